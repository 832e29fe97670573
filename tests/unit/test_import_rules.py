"""The layering holds in the source: `libs/` imports no service, a service imports only
itself, `wakeline` and the HTTP client (`wakeline_client`, a package of its own), and the
client imports none of them. Read from every module's AST (imports inside functions count too),
so nothing is imported to check it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ROOT / "services"
LIBS = ROOT / "libs"


def imported_packages(module: Path) -> set[str]:
    """Top-level names of the absolute imports in `module` (relative ones stay in its package)."""
    names = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"), str(module))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def wakeline_imports(root: Path) -> dict[str, set[str]]:
    """Each module under `root` (by its path from the repo) → the wakeline packages it imports."""
    return {str(module.relative_to(ROOT)): {n for n in imported_packages(module) if n.startswith("wakeline")}
            for module in sorted(root.rglob("*.py"))}


def test_the_rules_see_every_package():
    assert (LIBS / "wakeline").is_dir()
    assert sorted(p.name for p in SERVICES.iterdir() if (p / "__init__.py").exists()) == [
        "archiver", "brain", "gateway", "runner"]
    assert wakeline_imports(SERVICES / "brain")  # a walk that found nothing would pass everything


def test_libs_import_no_service():
    offending = {module: sorted(names - {"wakeline"}) for module, names in wakeline_imports(LIBS).items()
                 if names - {"wakeline"}}
    assert offending == {}


def test_a_service_imports_only_itself_and_wakeline():
    offending = {}
    for service in sorted(p for p in SERVICES.iterdir() if (p / "__init__.py").exists()):
        allowed = {"wakeline", f"wakeline_{service.name}", "wakeline_client"}
        offending |= {module: sorted(names - allowed) for module, names in wakeline_imports(service).items()
                      if names - allowed}
    assert offending == {}


def test_the_client_imports_no_wakeline_package_but_its_own():
    """clients/python installs alone (`pip install clients/python`): httpx and pydantic only."""
    imports = wakeline_imports(ROOT / "clients" / "python" / "wakeline_client")
    assert imports and {m: n - {"wakeline_client"} for m, n in imports.items() if n - {"wakeline_client"}} == {}


def test_no_test_module_imports_another():
    """Shared test code lives in modules named for what they hold (harnesses, factories),
    never in a `test_*` module another test imports (pytest would collect its tests twice)."""
    offending = {}
    for module in sorted((ROOT / "tests").rglob("*.py")):
        tree = ast.parse(module.read_text(encoding="utf-8"), str(module))
        for node in ast.walk(tree):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(name.split(".")[-1].startswith("test_") for name in names):
                offending.setdefault(str(module.relative_to(ROOT)), []).extend(names)
    assert (ROOT / "tests" / "unit" / "test_fold.py").exists()  # the walk sees the tests
    assert offending == {}


# The packages of `wakeline` by job, bottom to top, and which of the others each may import
# (docs/architecture.md, "The code by job"). The programs (`ops`) sit on top of everything;
# nothing below a package imports it.
LAYERS: dict[str, set[str]] = {
    "runtime": set(),
    "contract": {"runtime"},
    "log": {"contract", "runtime"},
    "transport": {"contract", "runtime"},
    "storage": {"log", "contract", "runtime"},
    "agent": {"storage", "log", "contract", "runtime"},
    "evidence": {"storage", "transport", "log", "contract", "runtime"},
    "ops": {"evidence", "storage", "transport", "log", "contract", "runtime"},
}
# What a service may use; the gateway also serves the evidence (checkpoints, proofs, verify),
# and its `cli` modules are the `wakeline` command, which runs the operator programs. The agent's
# decisions are the brain's, and the gateway's replay check runs them.
FOR_SERVICES = {"runtime", "contract", "log", "transport", "storage", "agent"}
EXTRA = {"services/gateway": {"evidence"}, "services/gateway/cli.py": {"evidence", "ops"},
         "services/gateway/cli_commands.py": {"evidence", "ops"}, "services/gateway/cli_quotas.py": {"ops"}}


def wakeline_layers(module: Path) -> set[str]:
    """The `wakeline` sub-packages `module` imports (`from wakeline.log.fold import …`,
    `from wakeline.log import fold`, `import wakeline.log.fold`); "" for the bare package."""
    found = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"), str(module))):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                 else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
        for name in names:
            parts = name.split(".")
            if parts[0] != "wakeline":
                continue
            if len(parts) > 1:
                found.add(parts[1])
            else:  # `from wakeline import x`: x must be a package, never a module at the top
                found |= {alias.name for alias in node.names} if isinstance(node, ast.ImportFrom) else {""}
    return found


def test_wakeline_holds_only_its_packages_by_job():
    lib = LIBS / "wakeline"
    assert sorted(p.stem for p in lib.glob("*.py")) == ["__init__"]
    assert sorted(p.name for p in lib.iterdir() if (p / "__init__.py").exists()) == sorted(LAYERS)


def test_each_package_of_wakeline_imports_only_the_layers_below_it():
    offending = {}
    for layer, allowed in LAYERS.items():
        for module in sorted((LIBS / "wakeline" / layer).rglob("*.py")):
            wrong = wakeline_layers(module) - allowed - {layer}
            if wrong:
                offending[str(module.relative_to(ROOT))] = sorted(wrong)
    assert offending == {}


def test_services_import_only_the_contract_log_transport_storage_agent_and_runtime():
    offending = {}
    modules = sorted(SERVICES.rglob("*.py"))
    assert modules
    for module in modules:
        where = str(module.relative_to(ROOT))
        allowed = FOR_SERVICES | EXTRA.get(where, set()) | EXTRA.get("/".join(where.split("/")[:2]), set())
        wrong = wakeline_layers(module) - allowed
        if wrong:
            offending[where] = sorted(wrong)
    assert offending == {}


def services_named_in_strings(module: Path) -> set[str]:
    """The service packages (`wakeline_<service>`) any string constant in `module` names: how
    one service would run another's code without importing it (`python -m wakeline_brain.…`)."""
    services = {p.name for p in SERVICES.iterdir() if (p / "__init__.py").exists()}
    named = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"), str(module))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            named |= {s for s in services if re.search(rf"\bwakeline_{s}\b", node.value)}
    return named


def test_no_service_names_another_services_code_in_a_string():
    """A service neither imports nor runs another's code: what two services share is a
    `wakeline` package (the gateway's replay check runs `wakeline.agent`, not the brain)."""
    offending = {}
    for service in sorted(p for p in SERVICES.iterdir() if (p / "__init__.py").exists()):
        for module in sorted(service.rglob("*.py")):
            others = services_named_in_strings(module) - {service.name}
            if others:
                offending[str(module.relative_to(ROOT))] = sorted(others)
    assert services_named_in_strings(Path(__file__)) >= {"brain"}  # the walk sees a string naming one
    assert offending == {}


# SQL on the two tables of the log: a clause that names one as what it reads, joins or writes.
SQL_ON_THE_LOG = re.compile(r"\b(FROM|JOIN|INTO|UPDATE)\s+(events|sessions)\b", re.IGNORECASE)
# Where it may be spelled out (issue 33, one data path): the storage layer (the brain's wake and
# the archiver's writes included, through the `EventStore`), the gateway's read model, and the
# library's own programs and evidence, which read the rows themselves.
SQL_HOMES = ("libs/wakeline/storage/", "services/gateway/read_model/", "libs/wakeline/evidence/",
             "libs/wakeline/ops/", "libs/wakeline/agent/replay_command.py")


def sql_on_the_log(module: Path) -> list[str]:
    """The string constants in `module` that read or write `events` or `sessions` (f-strings'
    literal parts included: `ast.walk` reaches a JoinedStr's constants). Docstrings are left
    out: they are prose ("the fold from events to …"), never run."""
    tree = ast.parse(module.read_text(encoding="utf-8"), str(module))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            and SQL_ON_THE_LOG.search(node.value)]


def test_sql_on_events_and_sessions_lives_in_the_storage_layer_and_the_gateway_read_model():
    """Every statement on `events` or `sessions` is in one of a few places, so a change to
    either table is checked against all of them: in the gateway, `read_model/`; elsewhere
    `wakeline.storage` (and the evidence, the operator programs and the replay program)."""
    found = {}
    for root in (SERVICES, LIBS / "wakeline"):
        for module in sorted(root.rglob("*.py")):
            if sql_on_the_log(module):
                found[str(module.relative_to(ROOT))] = sql_on_the_log(module)
    # the walk sees the SQL where it does live, so a walk that found nothing would fail here
    assert any(m.startswith("libs/wakeline/storage/") for m in found)
    assert any(m.startswith("services/gateway/read_model/") for m in found)
    offending = {m: [SQL_ON_THE_LOG.search(s).group(0) for s in sql] for m, sql in found.items()
                 if not m.startswith(SQL_HOMES)}
    assert offending == {}

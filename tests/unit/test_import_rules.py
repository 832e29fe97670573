"""The layering holds in the source: `libs/` imports no service, a service imports only
itself, `wakeline` and the HTTP client (`wakeline_client`, a package of its own), and the
client imports none of them. Read from every module's AST (imports inside functions count too),
so nothing is imported to check it."""

from __future__ import annotations

import ast
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

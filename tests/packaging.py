"""What pyproject.toml says the build contains, and the packages the tree holds."""

from __future__ import annotations

import ast
import importlib
import json
import os
import tomllib
from functools import cache
from importlib.metadata import Distribution, distribution, distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def tree_packages() -> set[str]:
    """Every directory with an __init__.py under each mapped top-level directory, as a dotted name."""
    found = set()
    for name, directory in SETUPTOOLS["package-dir"].items():
        base = ROOT / directory
        for init in base.rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                found.add(".".join([name, *init.parent.relative_to(base).parts]))
    return found


def runtime_requirements() -> list[Requirement]:
    """[project].dependencies: what `pip install wakeline` brings, and nothing of `[test]`."""
    return [Requirement(text) for text in PYPROJECT["project"]["dependencies"]]


def runtime_distributions() -> dict[str, Distribution]:
    """The installed distributions the runtime dependencies need, with everything they require in
    turn (markers evaluated for this interpreter, extras followed), by normalized name. Read from
    this venv's metadata, so no index is asked: what the wheel would pull in, as installed here."""
    found: dict[str, Distribution] = {}
    followed: set[tuple[str, str]] = set()  # (distribution, extra) whose requirements are queued
    wanted = [(requirement, "") for requirement in runtime_requirements()]
    while wanted:
        requirement, extra = wanted.pop()  # `extra`: the one the requiring distribution was asked with
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        if name not in found:
            found[name] = distribution(name)
        for asked in {"", *requirement.extras} - {e for n, e in followed if n == name}:
            followed.add((name, asked))
            wanted += [(Requirement(text), asked) for text in found[name].requires or []]
    return found


def link_distributions(distributions: dict[str, Distribution], target: Path) -> int:
    """A site directory holding only these distributions: each file their RECORD lists under
    site-packages, symlinked at its place (files installed elsewhere, such as scripts, are left
    out). Returns how many files it links."""
    linked = 0
    for dist in distributions.values():
        for file in dist.files or []:
            if file.parts[0] == "..":
                continue
            source = Path(str(dist.locate_file(file)))
            if not source.is_file():
                continue
            place = target / file
            place.parent.mkdir(parents=True, exist_ok=True)
            if not place.exists():
                place.symlink_to(source)
                linked += 1
    return linked


def imported_modules(directory: Path) -> dict[str, set[str]]:
    """Each module named by an absolute import anywhere in the .py files under `directory`
    (inside functions too) → the files importing it. `from a.b import c` names `a.b.c` (which
    `providing_distribution` takes for `a.b` when `c` is no module)."""
    found: dict[str, set[str]] = {}
    for module in sorted(directory.rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"), str(module))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                found.setdefault(name, set()).add(str(module.relative_to(ROOT)))
    return found


@cache
def installed_files() -> dict[str, str]:
    """Every file an installed distribution's RECORD lists (absolute path) → that distribution."""
    found = {}
    for dist in distributions():
        name = canonicalize_name(dist.metadata["Name"])  # read once: each read parses METADATA
        found.update((os.path.normpath(str(dist.locate_file(file))), name) for file in dist.files or [])
    return found


def providing_distribution(module: str, files: dict[str, str]) -> str | None:
    """The distribution whose file `module` is imported from (for `a.b.c` where `c` is a name in
    `a.b`, `a.b`'s); None when it cannot be found, which is a problem of its own."""
    for name in (module, module.rpartition(".")[0]):
        try:  # imported, not only found: a package may replace its submodules in sys.modules
            origin = getattr(importlib.import_module(name), "__file__", None) if name else None
        except ImportError:
            continue
        if origin:
            origin = os.path.normpath(origin)
            return files.get(origin) or editable_provider(origin)
    return None


@cache
def editable_sources() -> dict[str, str]:
    """Each distribution installed from a directory in editable mode (`pip install -e`, as `make venv`
    installs clients/python) -> that directory: its RECORD lists a path hook, not its modules."""
    found = {}
    for dist in distributions():
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
        if direct.get("dir_info", {}).get("editable") and direct["url"].startswith("file://"):
            found[canonicalize_name(dist.metadata["Name"])] = os.path.normpath(direct["url"].removeprefix("file://"))
    return found


def editable_provider(origin: str) -> str | None:
    """The editable distribution whose directory holds `origin`, the innermost when they nest."""
    holding = [(len(root), name) for name, root in editable_sources().items() if origin.startswith(root + os.sep)]
    return max(holding)[1] if holding else None

"""A module split into a package keeps its names: `from wakeline.contract.events import X`
works for every public X any of the package's modules defines, so callers never need to
know which part of the package holds it. Read from the modules' ASTs (what each defines,
not what it imports), against the package's `__all__`."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "libs"
# The packages that were one module once, and are imported by their package name.
PACKAGES = ("wakeline.contract.events", "wakeline.evidence.verify", "wakeline.evidence.witnesses")


def defined_names(module: Path) -> set[str]:
    """The public classes, functions and assigned names at the top of `module`."""
    names: set[str] = set()
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


@pytest.mark.parametrize("name", PACKAGES)
def test_the_package_names_every_public_name_of_its_modules(name: str) -> None:
    directory = ROOT / name.replace(".", "/")
    modules = [m for m in sorted(directory.glob("*.py")) if not m.stem.startswith("__")]
    assert len(modules) > 1
    package = importlib.import_module(name)
    defined = set().union(*(defined_names(m) for m in modules))
    assert sorted(package.__all__) == sorted(defined)
    assert all(getattr(package, n) is not None for n in package.__all__)

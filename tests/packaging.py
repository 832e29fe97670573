"""What pyproject.toml says the build contains, and the packages the tree holds."""

from __future__ import annotations

import tomllib
from pathlib import Path

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

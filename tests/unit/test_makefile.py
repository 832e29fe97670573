"""The Makefile's `.PHONY` names exactly the targets it defines, and `make test` lints first."""

from __future__ import annotations

import re
from pathlib import Path

MAKEFILE = (Path(__file__).resolve().parents[2] / "Makefile").read_text()


def targets() -> dict[str, list[str]]:
    """Each plain target (not a file rule, not a special target) → its prerequisites."""
    found = re.findall(r"^([a-z][a-z0-9_-]*):(?!=)([^\n]*)$", MAKEFILE, re.M)
    return {name: prerequisites.split() for name, prerequisites in found}


def test_phony_lists_exactly_the_targets():
    [phony] = re.findall(r"^\.PHONY:(.*)$", MAKEFILE, re.M)
    assert sorted(phony.split()) == sorted(targets())


def test_make_test_runs_lint_before_the_suite():
    assert targets()["test"] == ["up", "lint"]
    assert "ruff check libs services tests bench" in MAKEFILE and "/bin/mypy" in MAKEFILE

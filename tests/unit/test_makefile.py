"""The Makefile's `.PHONY` names exactly the targets it defines; `make test` lints first and runs
the suite under its own names, set up beside the demo's."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = (ROOT / "Makefile").read_text()


def targets() -> dict[str, list[str]]:
    """Each plain target (not a file rule, not a special target) → its prerequisites."""
    found = re.findall(r"^([a-z][a-z0-9_-]*):(?!=)([^\n]*)$", MAKEFILE, re.M)
    return {name: prerequisites.split() for name, prerequisites in found}


def test_phony_lists_exactly_the_targets():
    [phony] = re.findall(r"^\.PHONY:(.*)$", MAKEFILE, re.M)
    assert sorted(phony.split()) == sorted(targets())


def test_make_test_runs_lint_before_the_suite():
    assert targets()["test"] == ["test-up", "lint"]
    assert "ruff check libs services tests bench" in MAKEFILE and "/bin/mypy" in MAKEFILE


def recipe(target: str) -> str:
    return re.search(rf"^{target}:[^\n]*\n((?:\t[^\n]*\n)*)", MAKEFILE, re.M).group(1)


def test_make_test_sets_up_and_runs_the_suite_under_its_own_names_and_leaves_the_demo_running():
    names = re.search(r"^TEST_NAMES := (.*)$", MAKEFILE, re.M).group(1)
    assert "WAKELINE_TOPIC_PREFIX=$(TEST_TOPIC_PREFIX)" in names
    assert "WAKELINE_POSTGRES_DATABASE=$(TEST_DATABASE)" in names
    assert re.search(r"^TEST_TOPIC_PREFIX \?= wakeline-test$", MAKEFILE, re.M)
    assert re.search(r"^TEST_DATABASE \?= wakeline_test$", MAKEFILE, re.M)
    setup = recipe("test-up")
    assert setup.startswith("\t@export $(TEST_NAMES);")
    assert all(step in setup for step in ("pg.sh up", "wakeline migrate", "wakeline topics", "wakeline acls"))
    suite = recipe("test")
    assert suite.startswith("\t@export $(TEST_NAMES);") and "pytest" in suite
    assert "services.sh down" not in suite
    for demo in ("demo", "bench", "chaos", "up"):
        assert "TEST_NAMES" not in recipe(demo), demo


def test_a_test_run_by_hand_defaults_to_the_names_make_test_sets_up():
    conftest = (ROOT / "tests" / "conftest.py").read_text()
    prefix = re.search(r"^TEST_TOPIC_PREFIX \?= (\S+)$", MAKEFILE, re.M).group(1)
    database = re.search(r"^TEST_DATABASE \?= (\S+)$", MAKEFILE, re.M).group(1)
    assert f'os.environ.setdefault("WAKELINE_TOPIC_PREFIX", "{prefix}")' in conftest
    assert f'os.environ.setdefault("WAKELINE_POSTGRES_DATABASE", "{database}")' in conftest

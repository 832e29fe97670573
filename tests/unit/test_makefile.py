"""The Makefile's `.PHONY` names exactly the targets it defines; `make test` lints first and runs
the suite under its own names, set up beside the demo's; the benchmarks and chaos runs under
names of their own as well."""

from __future__ import annotations

import os
import re
import subprocess
import sys
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


BENCH_TARGETS = ("bench", "bench-cost", "chaos", "chaos-brains")


def test_the_benchmarks_and_chaos_run_under_their_own_names_set_up_beside_the_demos():
    names = re.search(r"^BENCH_NAMES := (.*)$", MAKEFILE, re.M).group(1)
    assert names == "WAKELINE_TOPIC_PREFIX=$(BENCH_TOPIC_PREFIX) WAKELINE_POSTGRES_DATABASE=$(BENCH_DATABASE)"
    prefix = re.search(r"^BENCH_TOPIC_PREFIX \?= (\S+)$", MAKEFILE, re.M).group(1)
    database = re.search(r"^BENCH_DATABASE \?= (\S+)$", MAKEFILE, re.M).group(1)
    test_prefix = re.search(r"^TEST_TOPIC_PREFIX \?= (\S+)$", MAKEFILE, re.M).group(1)
    assert len({prefix, test_prefix, "wakeline"}) == 3 and len({database, "wakeline_test", "wakeline"}) == 3
    setup = recipe("bench-up")
    assert setup.startswith("\t@export $(BENCH_NAMES);")
    assert all(step in setup for step in ("pg.sh up", "wakeline migrate", "wakeline topics", "wakeline acls"))
    for target in BENCH_TARGETS:
        assert targets()[target] == ["bench-up"], target
        run = [line for line in recipe(target).splitlines() if "-m bench" in line]
        assert run and "export $(BENCH_NAMES);" in run[0], target
    for demo in ("demo", "demo-harness", "up", "test", "test-up"):
        assert "BENCH_NAMES" not in recipe(demo), demo


def test_a_benchmark_run_by_hand_defaults_to_the_names_make_bench_sets_up_and_keeps_names_given():
    prefix = re.search(r"^BENCH_TOPIC_PREFIX \?= (\S+)$", MAKEFILE, re.M).group(1)
    database = re.search(r"^BENCH_DATABASE \?= (\S+)$", MAKEFILE, re.M).group(1)
    show = ("import bench, os; from wakeline.contract import topics; "
            "print(os.environ['WAKELINE_POSTGRES_DATABASE'], topics.EVENTS)")
    bare = {k: v for k, v in os.environ.items() if not k.startswith("WAKELINE_")}

    def names(**given: str) -> list[str]:
        out = subprocess.run([sys.executable, "-c", show], cwd=ROOT, env={**bare, **given},
                             capture_output=True, text=True, timeout=60, check=True)
        return out.stdout.split()

    assert names() == [database, f"{prefix}.events"]
    assert names(WAKELINE_TOPIC_PREFIX="mine", WAKELINE_POSTGRES_DATABASE="mine_db") == ["mine_db", "mine.events"]

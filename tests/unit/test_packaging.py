"""pyproject.toml's package list, package data and console scripts against the tree.

The build lists its packages explicitly (package-dir maps libs/ and services/ to the
import names), so a sub-package added without adding it here would silently be left out
of the wheel, as `wakeline_gateway.routes` once was. The wheel itself is built, installed
outside the checkout and run in tests/e2e/test_wheel_install.py.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

from tests.packaging import PYPROJECT, SETUPTOOLS, tree_packages

ROOT = Path(__file__).resolve().parents[2]


def test_the_build_lists_every_package_of_the_tree_and_nothing_else():
    assert set(SETUPTOOLS["packages"]) == tree_packages()
    assert "wakeline_gateway.routes" in tree_packages()


def test_every_data_file_the_code_reads_is_package_data():
    data = PYPROJECT["tool"]["setuptools"]["package-data"]
    read_at_run_time = {  # package -> files read through importlib.resources
        "wakeline": sorted((ROOT / "libs" / "wakeline" / "migrations").glob("*.sql")),
        "wakeline_brain": sorted((ROOT / "services" / "brain" / "policies").glob("*.json")),
    }
    for package, paths in read_at_run_time.items():
        assert paths, package
        base = ROOT / SETUPTOOLS["package-dir"][package]
        for path in paths:
            relative = path.relative_to(base).as_posix()
            assert any(fnmatch.fnmatch(relative, pattern) for pattern in data[package]), relative


def test_no_migration_is_left_where_migrate_no_longer_reads():
    """Migrations moved into the package (libs/wakeline/migrations); one added at the old place by
    a branch started before the move would never be applied."""
    assert {p.name for p in (ROOT / "deploy").rglob("*.sql")} == {"bootstrap.sql"}  # roles, run by pg.sh
    assert not (ROOT / "deploy" / "postgres" / "migrations").exists()
    assert not (ROOT / "deploy" / "policies").exists()


def test_every_service_and_operator_command_has_a_console_script():
    scripts = PYPROJECT["project"]["scripts"]
    assert scripts["wakeline"] == "wakeline_gateway.cli:main"
    for service in ("brain", "runner", "archiver", "gateway"):
        assert scripts[f"wakeline-{service}"] == f"wakeline_{service}.__main__:main"
        assert (ROOT / "services" / service / "__main__.py").read_text().count("def main(") == 1


def test_the_wakeline_command_has_the_operator_sub_commands():
    from wakeline_gateway.cli import parser

    commands = parser()._subparsers._group_actions[0].choices  # noqa: SLF001 - argparse keeps them here
    assert {"migrate", "topics", "acls", "checkpoints", "keys", "retention"} <= set(commands)


def test_the_dockerfile_installs_the_wheel_and_nothing_else_of_the_checkout():
    dockerfile = (ROOT / "Dockerfile").read_text()
    final_stage = dockerfile.rsplit("\nFROM ", 1)[1]
    assert "pip wheel" in dockerfile and "pip install --no-cache-dir /wheels/*.whl" in final_stage
    assert "COPY --from=wheel /wheels /wheels" in final_stage
    assert "COPY libs" not in final_stage and "COPY services" not in final_stage and "COPY deploy" not in final_stage

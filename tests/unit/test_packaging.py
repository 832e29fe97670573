"""pyproject.toml's package list, package data and console scripts against the tree.

The build lists its packages explicitly (package-dir maps libs/ and services/ to the
import names), so a sub-package added without adding it here would silently be left out
of the wheel, as `wakeline_gateway.routes` once was. The wheel itself is built, installed
outside the checkout and run in tests/e2e/test_wheel_install.py.
"""

from __future__ import annotations

import fnmatch
import sys
from pathlib import Path

import pytest

from tests.packaging import (
    PYPROJECT, SETUPTOOLS, imported_modules, installed_files, providing_distribution, runtime_distributions,
    tree_packages,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_build_lists_every_package_of_the_tree_and_nothing_else():
    assert set(SETUPTOOLS["packages"]) == tree_packages()
    assert "wakeline_gateway.routes" in tree_packages()


def test_every_data_file_the_code_reads_is_package_data():
    data = PYPROJECT["tool"]["setuptools"]["package-data"]
    read_at_run_time = {  # package -> files read through importlib.resources
        "wakeline.storage": sorted((ROOT / "libs" / "wakeline" / "storage" / "migrations").glob("*.sql")),
        "wakeline_brain": sorted((ROOT / "services" / "brain" / "policies").glob("*.json")),
    }
    for package, paths in read_at_run_time.items():
        assert paths, package
        top, *sub = package.split(".")  # a sub-package lives in its top package's directory
        base = ROOT / SETUPTOOLS["package-dir"][top] / "/".join(sub)
        for path in paths:
            relative = path.relative_to(base).as_posix()
            assert any(fnmatch.fnmatch(relative, pattern) for pattern in data[package]), relative


def test_no_migration_is_left_where_migrate_no_longer_reads():
    """Migrations moved into the package (libs/wakeline/storage/migrations); one added at the old place by
    a branch started before the move would never be applied."""
    assert not (ROOT / "libs" / "wakeline" / "migrations").exists()  # before the packages by job (issue 33)
    assert {p.name for p in (ROOT / "deploy").rglob("*.sql")} == {"bootstrap.sql"}  # roles, run by pg.sh
    assert not (ROOT / "deploy" / "postgres" / "migrations").exists()
    assert not (ROOT / "deploy" / "policies").exists()


def test_every_service_and_operator_command_has_a_console_script():
    scripts = PYPROJECT["project"]["scripts"]
    assert scripts["wakeline"] == "wakeline_gateway.cli:main"
    for service in ("brain", "runner", "archiver", "gateway"):
        assert scripts[f"wakeline-{service}"] == f"wakeline_{service}.__main__:main"
        assert (ROOT / "services" / service / "__main__.py").read_text().count("def main(") == 1
    # the replay check straight from Postgres: library code (wakeline.agent), which the `wakeline` command runs too
    assert scripts["wakeline-replay-check"] == "wakeline.agent.replay_command:main"


def test_the_wakeline_command_has_the_operator_sub_commands():
    from wakeline_gateway.cli import parser

    commands = parser()._subparsers._group_actions[0].choices  # noqa: SLF001 - argparse keeps them here
    assert {"migrate", "topics", "acls", "checkpoints", "keys", "retention", "verify-direct"} <= set(commands)


def test_verify_direct_is_the_operators_verify_with_its_own_arguments(capsys):
    """Not the gateway's `verify`: the module's own parser takes the rest (here, refusing it)."""
    from wakeline_gateway.cli import main

    with pytest.raises(SystemExit) as refused:
        main(["verify-direct", "--all"])  # --tenant is required by wakeline.evidence.verify, not by `wakeline verify`
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert "usage: wakeline verify-direct" in err and "--tenant" in err, err


def test_the_dockerfile_installs_the_wheel_and_nothing_else_of_the_checkout():
    dockerfile = (ROOT / "Dockerfile").read_text()
    final_stage = dockerfile.rsplit("\nFROM ", 1)[1]
    assert "pip wheel" in dockerfile and "pip install --no-cache-dir /wheels/*.whl" in final_stage
    assert "COPY --from=wheel /wheels /wheels" in final_stage
    assert "COPY libs" not in final_stage and "COPY services" not in final_stage and "COPY deploy" not in final_stage


def test_every_third_party_module_the_packages_import_comes_with_the_runtime_dependencies():
    """An import whose distribution only `[test]` (or nothing) brings would pass every test in
    the checkout's venv and fail where only the wheel's dependencies are installed. Each module
    is traced to the installed distribution whose file it is and that must be one that
    [project].dependencies pulls in. tests/e2e/test_wheel_install.py imports every module in a
    venv holding only those."""
    files = installed_files()
    runtime = set(runtime_distributions())
    own = set(SETUPTOOLS["package-dir"])
    assert {"aiokafka", "fastapi", "opentelemetry-sdk"} <= runtime and "pytest" not in runtime
    outside = {}
    for part in ("libs", "services"):
        for module, where in imported_modules(ROOT / part).items():
            top = module.split(".")[0]
            if top in sys.stdlib_module_names or top in own or top == "__future__":
                continue
            provider = providing_distribution(module, files)
            if provider not in runtime:
                outside[module] = (provider, sorted(where))
    assert outside == {}


def test_the_import_check_sees_a_test_only_import():
    """yaml is installed (by [test]) but no runtime dependency brings it: the check must say so."""
    files = installed_files()
    assert providing_distribution("yaml.safe_load", files) == "pyyaml"
    assert "pyyaml" not in runtime_distributions()
    assert providing_distribution("opentelemetry.trace", files) == "opentelemetry-api"  # a namespace package

"""Each service imports only itself and `wakeline` (libs): what two services share lives in
libs, so one service's internals can change without another noticing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICES = {"brain", "runner", "archiver", "gateway"}


def imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_a_service_imports_no_other_service(service):
    others = {f"wakeline_{name}" for name in SERVICES - {service}}
    crossing = {f"{path.relative_to(ROOT)}: {module}"
                for path in (ROOT / "services" / service).rglob("*.py")
                for module in imported_modules(path) if module.split(".")[0] in others}
    assert crossing == set()


def test_libs_import_no_service():
    crossing = {f"{path.relative_to(ROOT)}: {module}"
                for path in (ROOT / "libs" / "wakeline").rglob("*.py")
                for module in imported_modules(path) if module.split(".")[0].startswith("wakeline_")}
    assert crossing == set()

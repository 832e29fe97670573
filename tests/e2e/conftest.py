"""End-to-end fixtures: the four services as OS processes on the real broker and database.

Fixtures only; what tests share besides them lives in `stack` (the processes), `sessions`
(the HTTP API) and `stored_log` (the archive in Postgres).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from tests.e2e.console_browser import browser, page  # noqa: F401 - the console's browser fixtures
from tests.e2e.stack import require_database, running_stack


SWEEP = "test_zz_replay_sweep.py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The replay sweep runs right after the last other end-to-end test, whatever the order of
    the files or the paths asked for: it checks what they recorded (its name sorting last is
    not relied on). Not after the integration tests: they plant sessions no brain decided."""
    sweep = [item for item in items if item.path.name == SWEEP]
    rest = [item for item in items if item.path.name != SWEEP]
    e2e = Path(__file__).parent
    last = max((n for n, item in enumerate(rest) if e2e in item.path.parents), default=len(rest) - 1)
    items[:] = rest[:last + 1] + sweep + rest[last + 1:]


@pytest.fixture(scope="session", autouse=True)
def e2e_start() -> datetime:
    """When this run's first e2e test started (autouse: modules with a stack fixture of their
    own count too): every session since is one the e2e suite made (the suite's database
    outlives runs), which test_zz_replay_sweep.py checks at the end."""
    return datetime.now(UTC) - timedelta(seconds=1)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    require_database()
    with running_stack(tmp_path_factory.mktemp("e2e")) as stack:
        yield stack


@pytest.fixture
def client(stack):
    with httpx.Client(base_url=stack.url, timeout=30, headers=stack.headers) as client:
        yield client


@pytest.fixture
def auditor(stack):
    """Reads every session of tenant default: sessions made by Kafka producers belong to their
    own actor (user:kcat), which a user key rightly cannot see."""
    with httpx.Client(base_url=stack.url, timeout=30,
                      headers={"Authorization": f"Bearer {stack.api_key('e2e-auditor', 'auditor')}"}) as client:
        yield client

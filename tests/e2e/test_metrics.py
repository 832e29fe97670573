"""Each service's /metrics endpoint, read after real scripted sessions on the real stack: the
metrics docs/operations.md names are there, with values the sessions must have produced.

Sessions with tool calls go through the gateway, a malformed record goes onto the inbox
(dead-lettered by the brain), a request for a session that does not exist gets its 404, and a
tenant allowed one session a minute asks for a second (429), its first left waiting for a
harness that never comes (an open session, `waiting_client`): then every service is scraped
over HTTP, as Prometheus would.
"""

from __future__ import annotations

import re
import uuid
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.harness_http import LOOKUP, RUN_QUERY
from tests.e2e.inbox_records import produce
from tests.e2e.sessions import create_session, wait_ended, wait_for
from tests.e2e.stack import require_database, running_stack
from wakeline.contract.topics import INBOX, TOOL_CALLS, TOOL_RESULTS

ROOT = Path(__file__).resolve().parents[2]
Samples = dict[str, list[tuple[dict[str, str], float]]]
QUOTA_TENANT = f"e2e-quota-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    require_database()
    # The archiver measures its lag every second here (30 s by default). Sessions stay in the
    # brain's memory for the whole module (the stack's default evicts after 60 s idle, which a
    # slow CI run reaches while the fixture waits for the samplers: seen as 2 of 3 sessions).
    with running_stack(tmp_path_factory.mktemp("e2e-metrics"), WAKELINE_ARCHIVER_LAG_LOG_INTERVAL_S="1",
                       WAKELINE_IDLE_EVICT_S="900", WAKELINE_TENANT_SESSIONS_SAMPLE_S="1") as stack:
        yield stack


def scrape(port: int) -> Samples:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    samples: Samples = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name].append((sample.labels, sample.value))
    return samples


def total(samples: Samples, name: str, **labels: str) -> float:
    return sum(v for got, v in samples.get(name, []) if all(got.get(k) == want for k, want in labels.items()))


@pytest.fixture(scope="module")
def scraped(stack) -> dict[str, Samples]:
    with httpx.Client(base_url=stack.url, timeout=30, headers=stack.headers) as client:
        sessions = [create_session(client, "tools3") for _ in range(3)]
        for sid in sessions:
            assert wait_ended(client, stack, sid)["ended_reason"] == "completed"
        assert client.get("/v1/sessions/00000000-0000-4000-8000-000000000000").status_code == 404
    assert over_a_quota(stack).status_code == 429
    produce([(b"not-json", b"{this is not a command")], partition=0)
    ports = {name: service.metrics_port for name, service in stack.services.items()}
    # Gauges are sampled and the archiver's counts carried once a second, and a session reads
    # as ended before the archiver has stored all of it: wait for what must come, then read.
    wait_for(lambda: total(scrape(ports["brain"]), "wakeline_dead_letters_total", service="brain") >= 1, 30,
             "the brain to count its dead letter", stack)
    wait_for(lambda: scrape(ports["archiver"]).get("wakeline_archiver_lag"), 30, "the archiver's lag", stack)
    with moves_shown(stack):
        wait_for(lambda: total(scrape(ports["archiver"]), "wakeline_archiver_records_total", outcome="archived")
                 >= 4 * 10, 30, "the archiver's counts (the warm-up's events and 3 sessions')", stack)
        wait_for(lambda: total(scrape(ports["brain"]), "wakeline_brain_sessions") >= 4, 30,
                 "the brain's sessions gauge (the warm-up and 3 sessions)", stack)
    wait_for(lambda: total(scrape(ports["gateway"]), "wakeline_tenant_sessions", tenant=QUOTA_TENANT,
                           status="waiting_client") == 1, 30, "the quota tenant's open session in the gauge", stack)
    return {name: scrape(port) for name, port in ports.items()}


def over_a_quota(stack) -> httpx.Response:
    """A tenant of its own, allowed one session a minute by its admin: the answer to its second.
    Its first waits for a harness to answer its declared tool's call: it stays open."""
    admin = {"Authorization": f"Bearer {stack.api_key('adam', 'admin', QUOTA_TENANT)}"}
    waiting = {"message": "hi", "wait": False, "config": {"model": "scripted:harness", "tools": [RUN_QUERY, LOOKUP]}}
    with httpx.Client(base_url=stack.url, timeout=30, headers=admin) as client:
        assert client.put("/v1/quotas", json={"sessions_per_minute": 1}).status_code == 200
        return [client.post("/v1/sessions", json=waiting) for _ in range(2)][-1]


@contextmanager
def moves_shown(stack):
    """A failure says where the brain's partitions went: a second member of the group (say, a
    previous module's brain within its session timeout) takes sessions, and their events'
    archiving, elsewhere."""
    try:
        yield
    except AssertionError as err:
        log = stack.services["brain"].log
        lines = [line for line in log.read_text(errors="replace").splitlines() if "partition" in line]
        raise AssertionError(f"{err}\nthe brain's partition lines:\n" + "\n".join(lines[-20:])) from None


def test_the_brain_serves_transactions_appends_sessions_wakes_model_calls_lag_and_dead_letters(scraped, stack):
    brain = scraped["brain"]
    committed = total(brain, "wakeline_brain_transaction_seconds_count", outcome="committed")
    assert committed >= 3 * 4, brain.get("wakeline_brain_transaction_seconds_count")  # >= 4 appends a session
    assert total(brain, "wakeline_brain_transaction_seconds_sum", outcome="committed") > 0
    assert total(brain, "wakeline_events_appended_total") >= 3 * 10
    sessions = {labels["state"]: value for labels, value in brain["wakeline_brain_sessions"]}
    assert set(sessions) == {"live", "idle"} and sessions["live"] + sessions["idle"] >= 3, sessions  # not evicted
    assert total(brain, "wakeline_brain_wake_seconds_count") >= 3
    model_calls = total(brain, "wakeline_model_call_seconds_count", adapter="scripted", outcome="ok")
    assert model_calls >= 3 * 4  # tools3: three tool turns and a final reply each
    assert total(brain, "wakeline_model_tokens_total", adapter="scripted", direction="input") > 0
    assert total(brain, "wakeline_model_tokens_total", adapter="scripted", direction="output") >= model_calls
    # by tenant: the suite's sessions are tenant default's; the quota tenant's one made a call too
    assert total(brain, "wakeline_tenant_tokens_total", tenant="default") >= 3 * 4
    assert total(brain, "wakeline_tenant_tokens_total", tenant=QUOTA_TENANT) >= 1
    lag = brain["wakeline_consumer_lag"]
    partitions = int(stack.env().get("WAKELINE_PARTITIONS", "6"))
    assert {(s["topic"], s["partition"]) for s, _ in lag if s["service"] == "brain"} == \
        {(t, str(p)) for t in (INBOX, TOOL_RESULTS) for p in range(partitions)}
    assert all(v >= 0 for _, v in lag)
    assert total(brain, "wakeline_dead_letters_total", service="brain", reason="malformed") >= 1


def test_the_runner_serves_tool_durations_by_tool_and_outcome_queue_depth_and_lag(scraped, stack):
    runner = scraped["runner"]
    for tool in ("write_file", "bash", "list_files"):
        assert total(runner, "wakeline_tool_call_seconds_count", tool=tool, outcome="ok") >= 3, tool
    assert total(runner, "wakeline_tool_call_seconds_sum", tool="bash") > 0
    assert len(runner["wakeline_runner_queue_depth"]) == 1 and len(runner["wakeline_runner_calls_running"]) == 1
    # every call is done (old calls left on the suite's topics by earlier runs included, answered
    # `expired`): once the once-a-second sampler has seen the last one finish, both read 0
    port = stack.services["runner"].metrics_port
    wait_for(lambda: total(scrape(port), "wakeline_runner_queue_depth") == 0
             and total(scrape(port), "wakeline_runner_calls_running") == 0, 60, "an empty runner queue", stack)
    partitions = {s["partition"] for s, _ in runner["wakeline_consumer_lag"] if s["topic"] == TOOL_CALLS}
    assert len(partitions) == int(stack.env().get("WAKELINE_PARTITIONS", "6"))


def test_the_archiver_serves_batch_sizes_lag_per_partition_and_what_it_archived(scraped, stack):
    archiver = scraped["archiver"]
    archived = total(archiver, "wakeline_archiver_records_total", outcome="archived")
    assert archived >= 3 * 10
    assert total(archiver, "wakeline_archiver_batch_size_count") >= 1
    assert total(archiver, "wakeline_archiver_batch_size_sum") >= archived  # every archived record was in a batch
    lag = {labels["partition"]: value for labels, value in archiver["wakeline_archiver_lag"]}
    assert len(lag) == int(stack.env().get("WAKELINE_PARTITIONS", "6")) and all(v >= 0 for v in lag.values())


def test_the_gateway_serves_latency_by_route_template_never_by_raw_path(scraped):
    gateway = scraped["gateway"]
    assert total(gateway, "wakeline_http_request_seconds_count", method="POST", route="/v1/sessions",
                 status="201") >= 3
    assert total(gateway, "wakeline_http_request_seconds_count", method="GET", route="/v1/sessions/{session_id}",
                 status="404") >= 1
    assert total(gateway, "wakeline_http_request_seconds_sum", method="POST", route="/v1/sessions") > 0
    uuid = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-")
    assert not [labels for labels, _ in gateway["wakeline_http_request_seconds_count"]
                if uuid.search(labels["route"])]


def test_the_gateway_counts_commands_refused_by_a_quota_by_tenant_and_quota(scraped):
    assert total(scraped["gateway"], "wakeline_gateway_quota_rejections_total", tenant=QUOTA_TENANT,
                 quota="sessions_per_minute") == 1
    assert total(scraped["gateway"], "wakeline_gateway_quota_rejections_total", quota="commands_per_second") == 0


def test_the_gateway_shows_each_tenants_open_sessions_by_status(scraped):
    """Sampled from the sessions projection: the quota tenant's one session waits for its
    harness; nothing of theirs is counted once it has ended."""
    gauge = scraped["gateway"]["wakeline_tenant_sessions"]
    assert {labels["status"]: v for labels, v in gauge if labels["tenant"] == QUOTA_TENANT} == {"waiting_client": 1}
    assert not [labels for labels, _ in gauge if labels["status"] in ("ended", "deleted")]


def test_every_metric_a_service_serves_is_documented_with_an_alert(scraped):
    doc = (ROOT / "docs" / "operations.md").read_text()
    names = {re.sub(r"_(count|sum|bucket|created|total)$", "", name)
             for samples in scraped.values() for name in samples if name.startswith("wakeline_")}
    assert len(names) >= 14, names
    missing = [n for n in names if f"`{n}" not in doc]
    assert missing == [], missing

"""Declared tools under faults: a pool of harness workers (one killed while holding leases),
a brain killed while a call waits for its harness, a gateway restarted under a connected
harness. Separate processes on real Kafka and Postgres; its own stack, since it kills it."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from collections import Counter
from dataclasses import dataclass, field

import httpx
import pytest

from tests.e2e.harness_http import LOOKUP, RUN_QUERY, answer, create_with_tools, pool_stream, session_stream
from tests.e2e.sessions import session_status, wait_ended, wait_for
from tests.e2e.stack import require_database, running_stack
from tests.e2e.stored_log import assert_log_whole

POOL_SESSIONS = 100
CALLS_EACH = 5
LEASE_S = 30.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    require_database()
    with running_stack(tmp_path_factory.mktemp("e2e-harness")) as stack:
        yield stack


def output_for(call: dict) -> str:
    return f"rows for {call['input']['sql']}"  # the same answer from any worker: a tool made idempotent


@dataclass
class Worker:
    """A pool worker on a thread: takes calls from the pool stream and answers each."""

    stack: object
    headers: dict[str, str]
    answer_limit: int | None = None  # after this many answers it stops answering (and is then killed)
    answered: list[str] = field(default_factory=list)
    settled: list[str] = field(default_factory=list)  # every call it has had an answer to, whatever it was
    received: list[dict] = field(default_factory=list)
    duplicates: int = 0
    refused: list[str] = field(default_factory=list)
    ended: str | None = None
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        # Answers run beside the stream, as a worker that takes several calls at once runs them:
        # one at a time, each answer's wait for the brain would hold every other call it leased.
        with httpx.Client(base_url=self.stack.url, headers=self.headers, timeout=30) as client, \
                ThreadPoolExecutor(1 if self.answer_limit is not None else 8) as answering, \
                pool_stream(self.stack.url, self.headers, "run_query", LEASE_S) as stream:
            while not self.stop.is_set():
                try:
                    kind, call = stream.next(timeout=0.5)
                except AssertionError:
                    continue
                if kind != "tool_call":
                    self.ended = f"{kind}: {call}"  # the test checks every call was answered anyway
                    return
                self.received.append(call)
                if self.answer_limit is not None and len(self.received) > self.answer_limit:
                    continue  # holds the lease without answering, as a hung or dying worker does
                answering.submit(self.answer, client, call)

    def answer(self, client: httpx.Client, call: dict) -> None:
        response = answer(client, call["session_id"], call["tool_call_id"], output_for(call))
        self.settled.append(call["tool_call_id"])
        if response.status_code != 200:
            self.refused.append(response.text)
        elif response.json().get("note"):
            self.duplicates += 1
        else:
            self.answered.append(call["tool_call_id"])


def test_a_pool_of_three_workers_answers_every_call_once_and_a_killed_workers_calls_move_on(stack):
    # A tenant of its own: the pool takes calls across its tenant, and only these are this test's.
    tenant = f"pool-{uuid.uuid4().hex[:8]}"
    service = {"Authorization": f"Bearer {stack.api_key('pool', 'service', tenant=tenant)}"}
    client = httpx.Client(base_url=stack.url, timeout=30,
                          headers={"Authorization": f"Bearer {stack.api_key('owner', 'user', tenant=tenant)}"})
    doomed = Worker(stack, service, answer_limit=5)
    workers = [doomed, Worker(stack, service), Worker(stack, service)]
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
    for thread in threads:
        thread.start()
    sids = [create_with_tools(client, "pool5", [RUN_QUERY]) for _ in range(POOL_SESSIONS)]
    # Settled, not answered: delivery is at least once, so one of its five may have been
    # another worker's first (its answer then comes back as the recorded one, a duplicate).
    try:
        wait_for(lambda: len(doomed.received) > doomed.answer_limit and len(doomed.settled) == doomed.answer_limit,
                 120, "the doomed worker to hold a lease", stack)
    except AssertionError as failed:
        raise AssertionError(f"doomed worker: received {len(doomed.received)}, settled {len(doomed.settled)}, "
                             f"answered {len(doomed.answered)}, duplicates {doomed.duplicates}, refused "
                             f"{doomed.refused[:3]}, stream ended {doomed.ended!r}\n{failed}") from None
    held = {c["tool_call_id"] for c in doomed.received} - set(doomed.settled)
    killed_at = time.monotonic()
    doomed.stop.set()  # its connection drops: the leases it holds go back on offer
    others = workers[1:]
    wait_for(lambda: held <= {a for w in others for a in w.answered}, LEASE_S, "another worker to answer the "
             "killed worker's calls within the lease", stack)
    moved_in_s = time.monotonic() - killed_at
    for sid in sids:
        wait_ended(client, stack, sid, timeout=300)
    for worker in workers:
        worker.stop.set()
    per_call = Counter()
    for sid in sids:
        events = assert_log_whole(sid, tenant)
        calls = [e.payload.tool_call_id for e in events if e.type == "tool_call"]
        assert len(calls) == CALLS_EACH and all(e.payload.answered_by == "client"
                                                for e in events if e.type == "tool_call")
        per_call.update(e.payload.tool_call_id for e in events if e.type == "tool_result")
        ended = [e for e in events if e.type == "session_ended"]
        assert [e.payload.reason for e in ended] == ["completed"], ended
        # after the end only refusals: a duplicate delivery's answer, recorded as refused
        assert {e.type for e in events if e.seq > ended[0].seq} <= {"input_rejected"}
    assert len(per_call) == POOL_SESSIONS * CALLS_EACH and set(per_call.values()) == {1}
    answered = Counter(a for w in workers for a in w.answered)
    assert sum(answered.values()) == POOL_SESSIONS * CALLS_EACH and set(answered.values()) == {1}
    assert all(w.answered for w in others), [len(w.answered) for w in workers]
    assert not [r for w in workers for r in w.refused], [r for w in workers for r in w.refused][:5]
    assert moved_in_s < LEASE_S, moved_in_s
    print(f"pool: {len(held)} held calls moved on {moved_in_s:.2f}s after the kill; answers per worker "
          f"{[len(w.answered) for w in workers]}, duplicate deliveries {sum(w.duplicates for w in workers)}")


def test_a_worker_that_disconnects_gives_its_leases_back_at_once_not_when_they_run_out(stack):
    tenant = f"pool-{uuid.uuid4().hex[:8]}"
    service = {"Authorization": f"Bearer {stack.api_key('pool', 'service', tenant=tenant)}"}
    with httpx.Client(base_url=stack.url, timeout=30, headers=service) as client:
        sid = create_with_tools(client, "pool5", [RUN_QUERY])
        with pool_stream(stack.url, service, "run_query", lease_s=300) as first:
            kind, call = first.next()
            assert kind == "tool_call" and call["session_id"] == sid
            with pool_stream(stack.url, service, "run_query", lease_s=300) as second:
                with pytest.raises(AssertionError):
                    second.next(timeout=1.0)  # leased to the first worker: not offered twice
        dropped_at = time.monotonic()
        with pool_stream(stack.url, service, "run_query", lease_s=300) as third:
            kind, again = third.next(timeout=10)
            assert kind == "tool_call" and again["tool_call_id"] == call["tool_call_id"]
            assert time.monotonic() - dropped_at < 10  # far inside the 300 s lease: given back on disconnect
            assert answer(client, sid, again["tool_call_id"], "rows").status_code == 200
        client.post(f"/v1/sessions/{sid}/cancel")


def test_a_brain_killed_while_a_call_waits_wakes_with_the_call_still_pending(stack, client):
    sid = create_with_tools(client, "harness", [RUN_QUERY, LOOKUP])
    with session_stream(stack.url, stack.headers, sid) as harness:
        (call,) = harness.calls(1)
        wait_for(lambda: (s := session_status(client, sid)) and s["status"] == "waiting_client", 30,
                 "the session to wait for its harness", stack)
        stack.services["brain"].kill9()
        stack.start("brain")
        recorded = answer(client, sid, call["tool_call_id"], "rows after the brain died")
        assert recorded.status_code == 200, recorded.text + stack.report()
        for pair_call in harness.calls(2, timeout=90):
            assert answer(client, sid, pair_call["tool_call_id"], "ok").status_code == 200
    assert wait_ended(client, stack, sid)["ended_reason"] == "completed"
    events = assert_log_whole(sid)
    assert any(e.type == "woke" for e in events)
    results = [e for e in events if e.type == "tool_result"]
    assert [r.payload.tool_call_id for r in results].count(call["tool_call_id"]) == 1


def test_a_gateway_restarted_under_a_connected_harness_issues_the_call_again(stack, client):
    sid = create_with_tools(client, "harness", [RUN_QUERY, LOOKUP])
    with session_stream(stack.url, stack.headers, sid) as harness:
        (call,) = harness.calls(1)
        stack.services["gateway"].kill9()
        kind, _ = harness.next(timeout=30)
        assert kind in ("dropped", "closed"), kind  # the harness sees its connection go
    stack.start("gateway")
    stack.wait_gateway()
    with httpx.Client(base_url=stack.url, headers=stack.headers, timeout=30) as fresh:
        with session_stream(stack.url, stack.headers, sid) as harness:
            (again,) = harness.calls(1, timeout=60)
            assert again == call
            assert answer(fresh, sid, again["tool_call_id"], "rows").status_code == 200
            for pair_call in harness.calls(2):
                assert answer(fresh, sid, pair_call["tool_call_id"], "ok").status_code == 200
        assert wait_ended(fresh, stack, sid)["ended_reason"] == "completed"

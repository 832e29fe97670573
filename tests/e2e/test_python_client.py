"""The Python client (clients/python) against the running stack: the ordinary routes a program
uses, typed end to end. The harness routes have their own e2e tests (test_your_own_tools.py)."""

from __future__ import annotations

import pytest

from tests.e2e.sessions import wait_for
from wakeline_client import AsyncWakeline, Conflict, NotFound, Unauthorized, Wakeline, models


@pytest.fixture
def wakeline(stack):
    with Wakeline(stack.url, stack.headers["Authorization"].split()[1]) as client:
        yield client


def run_to_end(wakeline: Wakeline, policy: str, message: str = "go") -> tuple[str, list]:
    created = wakeline.sessions.create(message, title="python client", config={"model": f"scripted:{policy}"})
    # 202 is possible when the brain is slow to record it: the stream waits for the session to appear.
    events = list(wakeline.sessions.stream(created.session_id, appear_within_s=60))
    # The session's row is the archiver's projection: it may trail the stream by a moment.
    wait_for(lambda: wakeline.sessions.get(created.session_id).last_seq == events[-1].seq, 30,
             "the session's row to catch up")
    return created.session_id, events


def test_a_session_created_streamed_read_and_listed_through_the_client(wakeline):
    session_id, events = run_to_end(wakeline, "demo", "count the words")
    assert isinstance(events[0], models.SessionCreated) and isinstance(events[-1], models.SessionEnded)
    assert events[-1].payload.reason == "completed"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))

    session = wakeline.sessions.get(session_id)
    assert session.last_seq == events[-1].seq
    assert (session.session_id, session.status, session.title) == (session_id, "ended", "python client")
    assert session_id in {s.session_id for s in wakeline.sessions.list(limit=50).data}
    read = wakeline.sessions.events(session_id, after=2, limit=3)
    assert [e.seq for e in read.data] == [3, 4, 5] and type(read.data[0]) is type(events[2])
    only = wakeline.sessions.events(session_id, type=["tool_call"])
    assert only.data and all(isinstance(e, models.ToolCallRequested) for e in only.data)


def test_the_stream_resumes_after_the_last_event_seen(wakeline):
    session_id, events = run_to_end(wakeline, "demo")
    frames = wakeline.sessions.stream_frames(session_id)
    first = [next(frames) for _ in range(3)]
    frames.close()  # as if the connection dropped here
    rest = list(wakeline.sessions.stream_frames(session_id, after=int(first[-1].id)))
    assert [int(f.id) for f in first + rest] == [e.seq for e in events]
    assert rest[-1].event == "session_ended"


def test_a_message_continues_an_ended_session_and_cancel_ends_a_running_one(wakeline):
    session_id, events = run_to_end(wakeline, "slowmodel")
    sent = wakeline.sessions.send_message(session_id, "once more", expected_seq=events[-1].seq)
    assert sent.session_id == session_id and sent.status in ("done", "pending")
    cancelled = wakeline.sessions.cancel(session_id)
    assert cancelled.status in ("done", "pending")
    after = list(wakeline.sessions.stream(session_id, after=events[-1].seq, appear_within_s=30))
    assert any(isinstance(e, models.UserMessageReceived) and e.payload.text == "once more" for e in after)
    assert isinstance(after[-1], models.SessionEnded) and after[-1].payload.reason == "cancelled"
    with pytest.raises(Conflict) as stale:
        wakeline.sessions.send_message(session_id, "stale", expected_seq=1)
    assert stale.value.status == 409 and stale.value.code == "conflict"


def test_errors_come_back_typed(stack, wakeline):
    with pytest.raises(NotFound) as missing:
        wakeline.sessions.get("00000000-0000-4000-8000-000000000000")
    assert missing.value.code == "not_found" and missing.value.status == 404
    with Wakeline(stack.url, "wkl_0000000000000000_" + "x" * 43) as stranger, pytest.raises(Unauthorized):
        stranger.sessions.list()
    me = wakeline.me()
    assert me.role == "user" and wakeline.health().model_dump()


async def test_the_async_client_reads_what_the_sync_one_made(stack, wakeline):
    session_id, events = run_to_end(wakeline, "demo")
    async with AsyncWakeline(stack.url, stack.headers["Authorization"].split()[1]) as client:
        session = await client.sessions.get(session_id)
        streamed = [e async for e in client.sessions.stream(session_id)]
        tree = await client.sessions.tree(session_id)
    assert session.last_seq == events[-1].seq and [e.seq for e in streamed] == [e.seq for e in events]
    assert tree.session_id == session_id

"""wakeline.runtime.logs: JSON and text lines carry the fields bound in their own task only."""

from __future__ import annotations

import asyncio
import io
import json
import logging

import pytest

from wakeline.runtime import logs


@pytest.fixture
def captured():
    stream = io.StringIO()
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level

    def configure(fmt):
        logs.configure("brain", fmt)
        root.handlers[0].setStream(stream)
        return stream
    yield configure
    root.handlers[:] = saved
    root.setLevel(level)


async def _session(log: logging.Logger, sid: str, call: str | None, started: asyncio.Event) -> None:
    logs.bind(session_id=sid, seq=7, tool_call_id=call)
    started.set()
    await asyncio.sleep(0)
    log.info("working on %s", sid)


async def test_json_lines_carry_each_tasks_own_session_seq_and_tool_call(captured):
    stream = captured("json")
    log = logging.getLogger("wakeline_brain.actor")
    events = [asyncio.Event(), asyncio.Event()]
    await asyncio.gather(_session(log, "s-1", "call-1", events[0]), _session(log, "s-2", None, events[1]))
    log.warning("outside any session")
    # Only this test's lines: a service thread another test left running may log to the same
    # root handler meanwhile (the whole suite is one process); each of ours exactly once.
    ours = {"working on s-1", "working on s-2", "outside any session"}
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    lines = [line for line in lines if line["message"] in ours]
    assert sorted(line["message"] for line in lines) == sorted(ours), lines
    by_message = {line["message"]: line for line in lines}
    one, two, outside = by_message["working on s-1"], by_message["working on s-2"], by_message["outside any session"]
    assert (one["session_id"], one["seq"], one["tool_call_id"]) == ("s-1", 7, "call-1")
    assert (two["session_id"], two["seq"]) == ("s-2", 7) and "tool_call_id" not in two
    assert not {"session_id", "seq", "tool_call_id"} & set(outside)
    assert one["service"] == "brain" and one["level"] == "INFO" and one["logger"] == "wakeline_brain.actor"


async def test_a_none_unbinds_and_text_lines_append_the_fields(captured):
    stream = captured("text")
    log = logging.getLogger("wakeline_runner.metrics")

    async def call() -> None:
        logs.bind(session_id="s-9", tool_call_id="call-9")
        logs.bind(tool_call_id=None)
        log.info("done")
    await asyncio.create_task(call())
    line = stream.getvalue().strip()
    assert line.endswith("wakeline_runner.metrics: done [session_id=s-9]"), line
    assert " brain INFO " in line


def test_an_exception_is_one_json_line_with_its_traceback(captured):
    stream = captured("json")
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("x").exception("failed")
    (line,) = stream.getvalue().splitlines()
    assert "ValueError: boom" in json.loads(line)["exc"]

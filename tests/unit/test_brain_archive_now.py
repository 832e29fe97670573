"""The brain marks the events a caller waits to read back from the archive (`ARCHIVE_NOW_HEADER`),
and only those: every marked record cuts an archiver batch short (issue 35)."""

from __future__ import annotations

from types import SimpleNamespace

from wakeline.contract.topics import ARCHIVE_NOW_HEADER, ARCHIVE_NOW_TYPES
from wakeline_brain.session_log import _headers


def test_the_outcomes_a_caller_reads_back_from_the_archive_are_marked_and_a_steps_events_are_not() -> None:
    assert ARCHIVE_NOW_TYPES == {"session_created", "deleted"}
    for marked in ARCHIVE_NOW_TYPES:
        assert (ARCHIVE_NOW_HEADER, b"1") in (_headers(SimpleNamespace(type=marked)) or [])  # type: ignore[arg-type]
    # input_rejected too: a Kafka client over its quota makes one per command it floods with
    for step in ("user_message", "turn_started", "model_turn", "tool_call", "tool_result", "turn_ended", "woke",
                 "input_rejected"):
        assert _headers(SimpleNamespace(type=step)) is None  # type: ignore[arg-type]

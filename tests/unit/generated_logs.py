"""Hypothesis strategies for valid session logs: content events with markers between them.

Shared by the fold's and the status's property tests (`test_fold.py`, `test_status.py`).
"""

from __future__ import annotations

from hypothesis import strategies as st

from tests.factories import draft, sealed
from wakeline.log.fold import fold
from wakeline.log.snapshots import snapshot_payload

from .session_log import created

CONTENT = st.one_of(
    st.tuples(st.sampled_from(["user_message", "model_turn"]), st.text(max_size=8)),
    st.tuples(st.sampled_from(["tool_call", "tool_result"]), st.sampled_from(["tc-a", "tc-b"])),
    st.tuples(st.just("compaction"), st.just("")),
)
MARKERS = {"turn_started": {"turn": 1}, "turn_queued": {"turn": 1, "running": 1, "limit": 1},
           "turn_ended": {"turn": 1}, "title_generated": {"title": "t"},
           "woke": {"host": "brain-1", "reason": "wake", "from_seq": 1}, "file_reference": {"path": "a"},
           "message_queued": {"command_id": "cmd-q", "text": "later"}, "snapshot": None}


def content_draft(kind, arg, last_seq):
    if kind == "compaction":  # covers everything before it, so a marker moving seqs covers the same messages
        return draft(kind, summary="s", covered_from_seq=1, covered_to_seq=last_seq, tokens_before=2, tokens_after=1)
    if kind in ("tool_call", "tool_result"):
        extra = {"input": {}} if kind == "tool_call" else {"output": "out"}
        return draft(kind, tool_call_id=arg, name="bash", **extra)
    return draft(kind, "cmd-q" if kind == "user_message" else None, text=arg)


def marker(kind, drafts):
    """A snapshot holds the fold of everything before it, as the brain writes one."""
    if kind == "snapshot":
        return draft(snapshot_payload(fold(sealed(drafts, "sess-generated"))))
    return draft(kind, **MARKERS[kind])


def build(content, markers):
    drafts = [created()]
    for (kind, arg), before in zip(content, markers):
        for m in before:
            drafts.append(marker(m, drafts))
        drafts.append(content_draft(kind, arg, len(drafts)))
    return sealed(drafts, "sess-generated")


@st.composite
def sessions(draw):
    content = draw(st.lists(CONTENT, max_size=10))
    markers = draw(st.lists(st.lists(st.sampled_from(sorted(MARKERS)), max_size=2),
                            min_size=len(content), max_size=len(content)))
    return content, markers

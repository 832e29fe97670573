"""Transcript rendering is pure: markers skipped, content escaped, nothing executable."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from wakeline.log.chain import Draft
from wakeline.contract.events import SessionCreatedPayload
from wakeline_gateway.transcript import markdown
from wakeline_gateway.transcript.entries import entries, render_json
from wakeline_gateway.transcript.html import ALLOWED_TAGS, CSP, render_html
from wakeline_gateway.transcript.markdown import render_markdown

from tests.factories import draft, new_session_id, sealed

from .session_log import conversation

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '<a href="javascript:alert(1)">click</a>',
    '"><svg onload=alert(1)>',
    "</pre></article><script>alert(2)</script>",
    "<style>body{display:none}</style><iframe src=//evil>",
]


def hostile_log(payload: str) -> list:
    """Every place content can reach the page carries `payload`: text, tool names, ids, actors."""
    drafts = [
        Draft(actor=f"user:{payload}", trust="instruction", causation_id="c0",
              payload=SessionCreatedPayload(config={"system_prompt": payload, "model": payload},
                                            owner=payload, title=payload)),
        draft("user_message", "c1", text=payload),
        draft("turn_started", turn=1),
        draft("model_turn", text=payload, reasoning=[payload], tool_call_ids=["tc-1"]),
        draft("tool_call", tool_call_id=payload, name=payload, input={payload: payload}),
        draft("tool_result", "r1", tool_call_id=payload, name=payload, output=payload, is_error=True),
        draft("approval_denied", "c2", tool_call_id=payload, reason=payload),
        draft("session_ended", reason="error", detail=payload),
    ]
    return sealed(drafts, new_session_id())


def session_of(payload: str) -> dict:
    return {"session_id": payload, "title": payload, "owner": payload, "model": payload, "status": "ended",
            "last_seq": 8, "created_at": "2025-01-01T12:00:00Z"}


class TagCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, attrs))

    def handle_data(self, data):
        self.text.append(data)


def parsed(page: str) -> TagCollector:
    collector = TagCollector()
    collector.feed(page)
    collector.close()
    return collector


@pytest.mark.parametrize("payload", HOSTILE)
def test_html_of_hostile_content_contains_no_executable_markup(payload: str) -> None:
    events = hostile_log(payload)
    page = render_html(session_of(payload), entries(events))
    doc = parsed(page)
    assert "<script" not in page.lower() and "<img" not in page.lower() and "<svg" not in page.lower()
    assert not re.search(r"<[^>]*\son\w+\s*=", page, re.I), "an on* handler inside a tag"
    assert not re.search(r"href\s*=\s*[\"']?\s*javascript:", page, re.I)
    assert {tag for tag, _ in doc.tags} <= ALLOWED_TAGS
    attrs = [name for _, pairs in doc.tags for name, _ in pairs]
    assert not [a for a in attrs if a.startswith("on")] and "href" not in attrs and "src" not in attrs
    assert set(attrs) <= {"lang", "charset", "http-equiv", "content", "name", "class"}


@pytest.mark.parametrize("payload", HOSTILE)
def test_html_shows_hostile_content_as_text(payload: str) -> None:
    page = render_html(session_of(payload), entries(hostile_log(payload)))
    shown = "".join(parsed(page).text)
    assert shown.count(payload) >= 8  # title, facts, prompt, user, model, reasoning, tool name, output...


def test_html_carries_the_restrictive_csp_and_fetches_nothing() -> None:
    page = render_html(session_of("s"), entries(conversation(9, new_session_id())))
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in page
    assert CSP == "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    assert not re.search(r"(src|href)\s*=|url\(|@import", page, re.I)


def test_attribute_values_are_escaped() -> None:
    events = hostile_log('x" onmouseover="alert(1)')
    page = render_html(session_of('x" onmouseover="alert(1)'), entries(events))
    classes = [value for _, pairs in parsed(page).tags for name, value in pairs if name == "class"]
    assert all(re.fullmatch(r"[a-z0-9 -]+", value or "") for value in classes)
    assert 'x" onmouseover' not in page


def test_markers_are_skipped_and_the_order_is_the_log_order() -> None:
    events = conversation(8, new_session_id())
    items = entries(events)
    assert [i.type for i in items] == ["session_created", "user_message", "model_turn", "tool_call",
                                       "tool_result", "model_turn"]
    assert [i.seq for i in items] == [1, 2, 4, 5, 6, 7]
    assert items[4].trust == "data" and items[4].role == "tool" and items[4].tool_name == "bash"


def test_json_transcript_lists_entries_with_their_session() -> None:
    events = conversation(9, new_session_id())
    rendered = render_json({"session_id": "s"}, entries(events))
    assert rendered["session"] == {"session_id": "s"}
    assert rendered["entries"][1] | {"ts": None} == {
        "seq": 2, "type": "user_message", "role": "user", "actor": "user:alice", "trust": "instruction",
        "ts": None, "text": "question 1", "tool_name": None, "tool_call_id": None, "is_error": False,
        "reasoning": [], "answered_by": None, "inherited_from": None}


@pytest.mark.parametrize("payload", HOSTILE)
def test_markdown_makes_no_raw_html_or_links_from_content(payload: str) -> None:
    md = render_markdown(session_of(payload), entries(hostile_log(payload)))
    outside_fences = re.sub(r"(`{3,})[^\n]*\n.*?\n\1", "", md, flags=re.S)
    assert not re.search(r"(?<!\\)<[a-zA-Z/]", outside_fences)
    assert not re.search(r"(?<!\\)\]\(", outside_fences)


def test_markdown_fences_tool_output_longer_than_any_backtick_run_in_it() -> None:
    output = "before\n```\nnot the end\n`````\nafter"
    events = sealed([draft("session_created", "c", config={}, owner="user:a"),
                     draft("tool_result", "r", tool_call_id="t", name="bash", output=output)], new_session_id())
    md = render_markdown({"session_id": "s"}, entries(events))
    assert "``````text\n" + output + "\n``````" in md


def test_md_escape_keeps_text_readable() -> None:
    assert markdown.md_escape("a <b> & [c](d)") == r"a \<b\> \& \[c\](d)"


def test_a_claude_turn_shows_its_reasoning_collapsed_and_a_parked_turn_says_why() -> None:
    log = sealed([
        draft("session_created", "cmd-1", config={"model": "claude-x"}, owner="user:ann"),
        draft("turn_started", turn=1),
        draft("model_unavailable", error="OverloadedError: 529", attempt=1, retry_in_s=2.0),
        draft("model_turn", text="Answer.",
              blocks=[{"type": "thinking", "thinking": "secret plan <b>", "signature": "EqQBsig-77"},
                      {"type": "redacted_thinking", "data": "opaque"}, {"type": "text", "text": "Answer."}]),
    ], new_session_id())
    items = entries(log)
    assert [i.type for i in items] == ["session_created", "model_unavailable", "model_turn"]
    assert items[1].text == "the model is unavailable (attempt 1); calling again in 2 s: OverloadedError: 529"
    page = render_html({"session_id": "s"}, items)
    assert "<details><summary>reasoning</summary><pre>secret plan &lt;b&gt;</pre></details>" in page
    assert items[2].reasoning == ("secret plan <b>", "[redacted thinking]")  # from the blocks
    assert "opaque" not in page and "EqQBsig-77" not in page  # what only the API reads stays out

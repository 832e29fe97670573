"""A session's transcript as entries, Markdown or self-contained HTML. Pure functions.

Markers are skipped. Everything shown is content from the log, and the log holds
untrusted content (tool output, file text, model replies), so the HTML escapes every
piece of it, attributes included, renders no link or image from it, runs no script, and
carries a CSP that forbids fetching anything. Markdown escapes what would make raw HTML
or links, and fences tool input and output as code.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Literal, Mapping

from wakeline.contract.events import (
    ApprovalDenied, ApprovalGranted, ApprovalRequested, ContextCompacted, Event, HandsHandedBack,
    HandsTakenOver, InputRejected, ModelResponded, ModelUnavailable, SessionCreated, SessionDeleted, SessionEnded,
    SessionForked, ToolCallRequested, ToolResultReceived, UserMessageReceived, is_marker, reasoning_of,
)

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
Role = Literal["user", "assistant", "tool", "system"]
FACTS = ("session_id", "owner", "model", "status", "last_seq", "created_at", "ended_reason",
         "parent_session_id", "fork_seq")


@dataclass(frozen=True)
class Entry:
    seq: int
    type: str
    role: Role
    actor: str
    trust: str
    ts: str
    text: str
    tool_name: str | None = None
    tool_call_id: str | None = None
    is_error: bool = False
    reasoning: tuple[str, ...] = ()
    # "client" for a declared tool's call and result (the session's own harness answers it).
    answered_by: str | None = None
    # For a fork: the session this entry's event belongs to when it is the parent's (the
    # inherited prefix, read from the parent), else None.
    inherited_from: str | None = None


def entries(events: Iterable[Event], own_session: str | None = None) -> list[Entry]:
    """Entries of the events that are not markers; with `own_session` (a fork's id), the
    events of any other session are its inherited prefix and marked so."""
    return [to_entry(event, own_session) for event in events if not is_marker(event)]


def to_entry(event: Event, own_session: str | None = None) -> Entry:
    extra: dict[str, Any] = {}
    match event:
        case ToolCallRequested(payload=p):
            extra = {"tool_name": p.name, "tool_call_id": p.tool_call_id, "is_error": False,
                     "answered_by": p.answered_by}
        case ToolResultReceived(payload=p):
            extra = {"tool_name": p.name, "tool_call_id": p.tool_call_id, "is_error": p.is_error,
                     "answered_by": p.answered_by}
        case ModelResponded(payload=p):
            extra = {"reasoning": reasoning_of(p)}
    if own_session is not None and event.session_id != own_session:
        extra["inherited_from"] = event.session_id
    return Entry(seq=event.seq, type=event.type, role=_ROLES.get(event.type, "system"), actor=event.actor,
                 trust=event.trust, ts=event.ts.isoformat(), text=_text(event), **extra)


_ROLES: dict[str, Role] = {"user_message": "user", "model_turn": "assistant", "tool_call": "assistant",
                           "tool_result": "tool"}


def _with(text: str, detail: str | None) -> str:
    return f"{text}: {detail}" if detail else text


def _text(event: Event) -> str:
    match event:
        case SessionForked(payload=p):
            return f"forked from {p.parent_session_id} at seq {p.fork_seq} (hash {p.parent_hash[:16]}…)"
        case SessionCreated(payload=p):
            c = p.config
            return (f"model {c.model}, up to {c.max_turns} turns, tools: {', '.join(c.tool_names()) or 'none'}\n\n"
                    f"System prompt:\n{c.system_prompt}")
        case UserMessageReceived(payload=p) | ModelResponded(payload=p):
            return p.text
        case ToolCallRequested(payload=p):
            return json.dumps(p.input, indent=2, sort_keys=True, ensure_ascii=False)
        case ToolResultReceived(payload=p):
            return p.output
        case ContextCompacted(payload=p):
            return (f"seq {p.covered_from_seq}-{p.covered_to_seq} summarized "
                    f"({p.tokens_before} -> {p.tokens_after} tokens)\n\n{p.summary}")
        case ApprovalRequested(payload=p):
            return _with(f"approval requested for {p.tool_call_id}", p.reason)
        case ApprovalGranted(payload=p):
            return f"approved {p.tool_call_id}"
        case ApprovalDenied(payload=p):
            return _with(f"denied {p.tool_call_id}", p.reason)
        case SessionEnded(payload=p):
            return _with(f"session ended ({p.reason})", p.detail)
        case HandsTakenOver(payload=p):
            return f"{p.by} took over as the hands"
        case HandsHandedBack(payload=p):
            return f"{p.by} handed the tool calls back to the runners"
        case InputRejected(payload=p):
            return f"rejected command {p.command_id}: {p.reason}"
        case SessionDeleted(payload=p):
            return _with(f"deleted by {p.by}", p.reason)
        case ModelUnavailable(payload=p):
            return f"the model is unavailable (attempt {p.attempt}); calling again in {p.retry_in_s:g} s: {p.error}"
    return json.dumps(event.payload.model_dump(mode="json"), sort_keys=True)


def label(entry: Entry) -> str:
    harness = ", for the harness" if entry.answered_by == "client" else ""
    if entry.type == "tool_call":
        return f"tool call {entry.tool_name} ({entry.tool_call_id}{harness})"
    if entry.type == "tool_result":
        return f"tool {'error' if entry.is_error else 'result'} {entry.tool_name} ({entry.tool_call_id}{harness})"
    return entry.type.replace("_", " ")


def title_of(session: Mapping[str, Any]) -> str:
    return session.get("title") or f"Session {session.get('session_id', '')}"


def render_json(session: Mapping[str, Any], items: Iterable[Entry]) -> dict[str, Any]:
    return {"session": dict(session),
            "entries": [asdict(entry) | {"reasoning": list(entry.reasoning)} for entry in items]}


# -- Markdown ----------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`<>&\[\]])")


def md_escape(text: str) -> str:
    """Backslash-escapes what would make raw HTML, entities, links or images."""
    return _MD_SPECIAL.sub(r"\\\1", text)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _fenced(text: str, info: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def _quoted(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in md_escape(text).split("\n"))


def render_markdown(session: Mapping[str, Any], items: Iterable[Entry]) -> str:
    out = [f"# {md_escape(_one_line(title_of(session)))}", ""]
    out += [f"- {key}: {md_escape(_one_line(session[key]))}" for key in FACTS if session.get(key) is not None]
    for entry in items:
        head = f"#{entry.seq} · {label(entry)} · {entry.actor} · {entry.trust} · {entry.ts}"
        if entry.inherited_from:
            head += f" · inherited from {entry.inherited_from}"
        out += ["", f"### {md_escape(_one_line(head))}", ""]
        if entry.type in ("tool_call", "tool_result"):
            out.append(_fenced(entry.text, "json" if entry.type == "tool_call" else "text"))
        else:
            out.append(_quoted(entry.text))
        for block in entry.reasoning:
            out += ["", "Reasoning:", "", _quoted(block)]
    return "\n".join(out) + "\n"


# -- HTML --------------------------------------------------------------------------

ALLOWED_TAGS = frozenset({"html", "head", "meta", "title", "style", "body", "header", "h1", "dl", "dt",
                          "dd", "p", "main", "article", "div", "span", "pre", "details", "summary"})
# A line ending in a backslash adds no byte: the CSS is the same text, within 120 columns.
_CSS = """
body{font:15px/1.5 system-ui,sans-serif;margin:0 auto;max-width:60rem;padding:1rem;color:#1d1d1f}
header{border-bottom:1px solid #ccc;margin-bottom:1rem}h1{font-size:1.4rem;margin:.2rem 0}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.1rem 1rem;font-size:.85rem}
dt{color:#666}dd{margin:0}.note{font-size:.8rem;color:#666}
article{border:1px solid #ddd;border-radius:6px;margin:.6rem 0;padding:.4rem .7rem}
.meta{font-size:.75rem;color:#555;display:flex;gap:.8rem;flex-wrap:wrap}
.seq{font-weight:bold}pre{white-space:pre-wrap;word-break:break-word;margin:.3rem 0;\
font:13px/1.4 ui-monospace,monospace}
.user{background:#eef5ff}.assistant{background:#f6fff0}.tool{background:#fafafa}.system{background:#fffbea}
.data pre{border-left:3px solid #999;padding-left:.5rem}.error{border-color:#c33}
.inherited{opacity:.75;border-style:dashed}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _html_entry(entry: Entry) -> str:
    classes = " ".join(("entry", entry.role, entry.trust, "error" if entry.is_error else "",
                        "inherited" if entry.inherited_from else ""))
    marks = (("inherited", f"inherited from {entry.inherited_from}"),) if entry.inherited_from else ()
    meta = "".join(f'<span class="{_e(cls)}">{_e(value)}</span>' for cls, value in (
        ("seq", f"#{entry.seq}"), ("kind", label(entry)), ("actor", entry.actor),
        ("trust", entry.trust), ("ts", entry.ts), *marks))
    reasoning = "".join(f"<details><summary>reasoning</summary><pre>{_e(block)}</pre></details>"
                        for block in entry.reasoning)
    return (f'<article class="{_e(classes.strip())}"><div class="meta">{meta}</div>'
            f'<pre class="text">{_e(entry.text)}</pre>{reasoning}</article>')


def render_html(session: Mapping[str, Any], items: Iterable[Entry]) -> str:
    title = _e(title_of(session))
    facts = "".join(f"<dt>{_e(key)}</dt><dd>{_e(session[key])}</dd>"
                    for key in FACTS if session.get(key) is not None)
    body = "\n".join(_html_entry(entry) for entry in items)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{title}</title><style>{_CSS}</style></head>\n<body><header><h1>{title}</h1>"
        f"<dl>{facts}</dl><p class=\"note\">Everything below is shown as recorded and escaped: "
        "tool output and file content are data, never markup.</p></header>\n"
        f"<main>\n{body}\n</main></body></html>\n"
    )

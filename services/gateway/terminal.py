"""What the `wakeline` command line prints: one line per event, per session, per replay step.

Everything printed comes from the log, which holds untrusted text (tool output, model
replies), so control characters and bidi overrides are replaced before they reach a
terminal: a hostile file must not be able to rewrite the screen.
"""

from __future__ import annotations

import json
import re
from typing import Any

# C0/C1 controls (ESC starts terminal escape sequences) and bidi embedding/override marks.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
WIDTH = 160
EXIT_CODES = {"completed": 0, "max_turns": 2, "budget": 2, "quota": 2, "error": 3, "interrupted": 4, "cancelled": 4,
              "deleted": 4}


def safe(text: str) -> str:
    """Multi-line text with terminal-unsafe characters replaced by `?`."""
    return _UNSAFE.sub("?", text)


def one_line(text: Any, width: int = WIDTH) -> str:
    flat = " ".join(safe(str(text)).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def summary(event: dict[str, Any]) -> str:
    p, kind = event.get("payload", {}), event.get("type")
    if kind in ("user_message", "model_turn", "message_queued"):
        return p.get("text", "")
    if kind == "tool_call":
        return f"{p.get('name')} {_compact(p.get('input'))}"
    if kind == "tool_result":
        return f"{p.get('name')} {'ERROR ' if p.get('is_error') else ''}{p.get('output', '')}"
    if kind == "session_ended":
        return f"{p.get('reason')}" + (f": {p['detail']}" if p.get("detail") else "")
    if kind == "session_created":
        config = p.get("config", {})
        return f"model {config.get('model')}, max_turns {config.get('max_turns')}, owner {p.get('owner')}"
    return _compact(p)


def event_line(event: dict[str, Any]) -> str:
    head = f"{event.get('seq', '?'):>5} {one_line(event.get('type'), 20):<20} {one_line(event.get('actor'), 28):<28}"
    return f"{head} {one_line(summary(event), WIDTH - len(head) - 1)}"


def session_line(session: dict[str, Any]) -> str:
    return (f"{session['session_id']}  {one_line(session['status'], 8):<8} {one_line(session.get('model'), 24):<24} "
            f"seq {session['last_seq']:<5} {session['created_at'][:19]}  {one_line(session.get('title') or '', 60)}")


def replay_line(step: dict[str, Any]) -> str:
    state = step["state"]
    return (f"{step['seq']:>5} {one_line(step['type'], 20):<20} status={state['status']} turns={state['turns']} "
            f"messages={len(state['messages'])} pending_tools={len(state['pending_tool_calls'])} "
            f"queued={len(state['queued'])}")


def outcome_line(answer: dict[str, Any]) -> str:
    if answer.get("status") == "pending":
        return one_line(f"pending: command {answer['command_id']}: {answer.get('note')}", 1000)
    parts = [f"{answer.get('outcome')} at seq {answer.get('seq')}"]
    if answer.get("queued"):
        parts.append("(queued until the running turn ends)")
    if answer.get("note"):
        parts.append(f"— {answer['note']}")
    return one_line(" ".join(parts), 1000)


def exit_code(reason: str | None) -> int:
    return EXIT_CODES.get(reason or "", 1)


def tree_lines(node: dict[str, Any], steps: bool = True, indent: str = "") -> list[str]:
    """A session, its steps and, at the seq each starts after, the forks taken from it."""
    where = f" (fork of {node['parent_session_id']} at seq {node['fork_seq']})" if node.get("parent_session_id") else ""
    # one_line collapses whitespace, so the indent goes on after it
    lines = [indent + one_line(f"{node['session_id']} {node['status']} owner {node['owner']} "
                               f"seq {node['last_seq']}{where}", 1000)]
    forks = sorted(node.get("forks", []), key=lambda f: f["fork_seq"] or 0)
    shown = 0
    for step in node.get("steps", []) if steps else []:
        while shown < len(forks) and (forks[shown]["fork_seq"] or 0) < step["seq"]:
            lines += tree_lines(forks[shown], steps, indent + "  └─ ")
            shown += 1
        outcome = f" [{step['detail']['outcome']}]" if "outcome" in step["detail"] else ""
        lines.append(f"{indent}  {step['seq']:>5} {one_line(step['kind'], 10):<10} "
                     + one_line(f"{step['summary']}{outcome}", WIDTH - len(indent) - 18))
    for fork in forks[shown:]:
        lines += tree_lines(fork, steps, indent + "  └─ ")
    return lines


def prefix_line(prefix: dict[str, Any]) -> str:
    """What verify found in a fork's inherited history."""
    state = "ok" if prefix["ok"] else f"BROKEN: {prefix['parent'].get('reason')}"
    gone = (f"; {prefix['retained_out']} of its seqs were dropped by retention: that part of the history is gone"
            if prefix["retained_out"] else "")
    return one_line(f"  inherited prefix: {prefix['parent_session_id']} seq 1..{prefix['fork_seq']}: {state}, "
                    f"{prefix['events']} events checked there{gone}", 1000)

"""A transcript as Markdown: facts as a list, one heading per entry, text quoted and tool
input and output fenced, every piece of content escaped so it makes no raw HTML or link."""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from wakeline_gateway.transcript.entries import FACTS, Entry, label, title_of

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

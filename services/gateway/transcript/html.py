"""A transcript as one self-contained HTML page: every piece of content escaped (attributes
included), only the tags in `ALLOWED_TAGS`, inline CSS, no script, no link or image from
the log, and a CSP (`CSP`, also sent as a header) that forbids fetching anything."""

from __future__ import annotations

import html
from typing import Any, Iterable, Mapping

from wakeline_gateway.transcript.entries import FACTS, Entry, label, title_of

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
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

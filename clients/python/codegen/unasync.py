"""Generates the sync client (wakeline_client/_sync/) from the async one (wakeline_client/_async/).

`python clients/python/codegen/unasync.py` rewrites every module; the async code is the one
written by hand, and tests/unit/test_client_openapi.py fails when the committed sync modules
differ from what this makes of it. The rewriting is textual (as httpcore's unasync): `await`
and `async` go, `Async` leaves class names, asyncio's sleep becomes time's.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "wakeline_client"
SOURCE, TARGET = PACKAGE / "_async", PACKAGE / "_sync"
RULES = [
    (r"wakeline_client\._async\b", "wakeline_client._sync"),
    (r"\basynccontextmanager\b", "contextmanager"),
    (r"\basync def __aenter__\b", "def __enter__"),
    (r"\basync def __aexit__\b", "def __exit__"),
    (r"\b(async )?def __aiter__\b", "def __iter__"),
    (r"\basync (with|for|def) ", r"\1 "),
    (r"\bawait ", ""),
    (r"\baiter_lines\b", "iter_lines"),
    (r"\baread\(", "read("),
    (r"\baclose\b", "close"),
    (r"\bainvoke\b", "invoke"),
    (r"\basyncio\.sleep\b", "time.sleep"),
    (r"^import asyncio$", "import time"),
    (r"\bAsync(?=[A-Z])", ""),
    (r"\bThe async client\b", "The client"),
]


def unasync(source: str, name: str) -> str:
    text = source
    for pattern, replacement in RULES:
        text = re.sub(pattern, replacement, text, flags=re.MULTILINE)
    seen: set[str] = set()
    lines = []
    for line in text.splitlines():
        if line.startswith("import ") and line in seen:
            continue  # `import asyncio` became a second `import time`
        seen.add(line)
        lines.append(line)
    header = f"# GENERATED from wakeline_client/_async/{name} by clients/python/codegen/unasync.py: do not edit."
    return "\n".join([header, *lines]) + "\n"


def generated() -> dict[str, str]:
    """Each sync module's name -> its text."""
    return {path.name: unasync(path.read_text(encoding="utf-8"), path.name) for path in sorted(SOURCE.glob("*.py"))}


def main() -> int:
    TARGET.mkdir(exist_ok=True)
    wanted = generated()
    for stale in set(p.name for p in TARGET.glob("*.py")) - set(wanted):
        (TARGET / stale).unlink()
    for name, text in wanted.items():
        (TARGET / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(wanted)} modules to {TARGET}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

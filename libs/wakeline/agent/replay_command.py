"""`wakeline-replay-check`: the replay check (`replay_check`) as a program.

`wakeline-replay-check SID ... | --all [--since T] --tenant T` (= `python -m
wakeline.agent.replay_command`) reads the histories from Postgres, a fork's with its
inherited prefix; `--jsonl FILE` reads one history of JSON lines (`-`: stdin). One line per
session, or with `--json` one object per session (what `GET …/replay?check=true` returns).
Exit 0 when every session replays cleanly, 1 when one diverges, 2 when none could be read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from wakeline.agent.replay_check import check_lines, verdict
from wakeline.contract import events as e
from wakeline.contract.tools import tool_schemas
from wakeline.runtime.settings import CommonSettings
from wakeline.storage.lineage import PrefixUnavailable, prefix_events
from wakeline.storage.pg import TenantPool


def jsonl_history(text: str) -> dict[str, Sequence[e.Event]]:
    """One history from JSON lines, under the session id of its last event ("?" for none)."""
    events = [e.parse_event(line) for line in text.splitlines() if line.strip()]
    return {events[-1].session_id if events else "?": events}


async def stored_histories(dsn: str, tenant: str, session_ids: list[str],
                           since: datetime | None) -> dict[str, Sequence[e.Event]]:
    """The named sessions' histories (every session created since `since` when none is
    named) from the archive, each with its inherited prefix; one whose prefix is not all
    there is named on stderr and left out."""
    found: dict[str, Sequence[e.Event]] = {}
    async with TenantPool(dsn, min_size=1, max_size=2) as pool:
        async with pool.transaction(tenant) as conn:
            ids = session_ids or [r["session_id"] for r in await conn.fetch(
                "SELECT session_id FROM sessions WHERE created_at >= $1 ORDER BY created_at", since or datetime.min)]
            for session_id in ids:
                row = await conn.fetchrow("SELECT last_seq FROM sessions WHERE session_id = $1", session_id)
                try:
                    found[session_id] = await prefix_events(conn, session_id, row["last_seq"]) if row else []
                except PrefixUnavailable as err:
                    print(f"{session_id}: not checked: {err}", file=sys.stderr)
    return found


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wakeline-replay-check")
    parser.add_argument("session_id", nargs="*")
    parser.add_argument("--all", action="store_true")
    parser.add_argument("--since", help="with --all: sessions created since this ISO time")
    parser.add_argument("--tenant", default="default")
    parser.add_argument("--jsonl", help="read one history from this file of JSON lines ('-': stdin)")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per session (what GET .../replay?check=true returns)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Exit 0 when every session replays cleanly, 1 when one diverges, 2 when none could be read."""
    arguments = parser()
    args = arguments.parse_args(sys.argv[1:] if argv is None else argv)
    if args.jsonl:
        text = sys.stdin.read() if args.jsonl == "-" else Path(args.jsonl).read_text(encoding="utf-8")
        histories = jsonl_history(text)
    elif args.session_id or args.all:
        since = datetime.fromisoformat(args.since) if args.since else None
        histories = asyncio.run(stored_histories(CommonSettings().postgres_dsn, args.tenant, args.session_id, since))
    else:
        arguments.error("name sessions, --all, or --jsonl")
    if not histories:
        print("no sessions to check", file=sys.stderr)
        return 2
    if args.json:
        verdicts = [verdict(session_id, events, tool_schemas()) for session_id, events in histories.items()]
        print("\n".join(json.dumps(v) for v in verdicts))
        return 1 if any(not v["clean"] for v in verdicts) else 0
    lines, diverged = check_lines(histories, tool_schemas())
    print("\n".join(lines))
    return 1 if diverged else 0


if __name__ == "__main__":
    raise SystemExit(main())

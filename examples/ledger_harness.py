#!/usr/bin/env python3
"""The revenue-analysis harness of docs/your-own-tools.md: the session's model asks
`run_query` about a small SQLite ledger, and this process answers. It holds nothing: kill it
(kill -9 too) while a call is pending, start it again with the same session id, and the
gateway issues that call again; its result is recorded once.

    export WAKELINE_API_KEY=wkl_...   # WAKELINE_GATEWAY_URL defaults to http://127.0.0.1:18080
    sid=$(python examples/ledger_harness.py --create)      # model scripted:ledger, or --model claude-...
    python examples/ledger_harness.py "$sid"               # answers its calls until the session ends

The ledger is a SQLite file (--db, else $LEDGER_DB, else ./ledger.sqlite3), made on first use.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import time
from contextlib import closing
from pathlib import Path

from wakeline_client import Tool, Wakeline, tool

TASK = "Analyze this year's monthly revenue and flag anomalies."
SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger (year INTEGER, month INTEGER, revenue INTEGER, PRIMARY KEY (year, month));
CREATE TABLE IF NOT EXISTS contracts (id TEXT PRIMARY KEY, customer TEXT, signed_month TEXT, value INTEGER, note TEXT);
"""
LEDGER = [(2025, 10, 8_020_000), (2025, 11, 8_140_000), (2025, 12, 8_105_000),
          (2026, 1, 8_412_000), (2026, 2, 13_950_000), (2026, 3, 8_730_000),
          (2026, 4, 8_655_000), (2026, 5, 8_910_000), (2026, 6, 9_040_000)]
CONTRACTS = [("C-098", "Umbrella", "2026-01", 240_000, "support renewal"),
             ("C-101", "Acme", "2026-02", 5_200_000, "three-year licence, invoiced up front"),
             ("C-102", "Initech", "2026-02", 180_000, "support renewal"),
             ("C-103", "Globex", "2026-03", 310_000, "support renewal")]


def make_ledger(db: Path) -> None:
    """The two tables, filled once: a second harness on the same file finds them as they were."""
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.executescript(SCHEMA)
        conn.executemany("INSERT OR IGNORE INTO ledger VALUES (?, ?, ?)", LEDGER)
        conn.executemany("INSERT OR IGNORE INTO contracts VALUES (?, ?, ?, ?, ?)", CONTRACTS)


def ledger_tool(db: Path) -> Tool:
    @tool
    def run_query(sql: str) -> list[dict]:
        """Run one read-only SQL query (SQLite, SELECT only) against the company's books and
        return the rows as JSON. Tables: ledger(year, month, revenue) with one row per month
        (month 1-12, revenue in USD); contracts(id, customer, signed_month 'YYYY-MM', value
        in USD, note)."""
        # Read-only twice over (only a SELECT, on a connection that cannot write), so the same
        # query always gives the same rows: a call issued again is safe to run again.
        if not sql.lstrip().upper().startswith("SELECT"):
            raise ValueError("only SELECT queries are allowed: run_query is read-only")
        with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            conn.row_factory = sqlite3.Row
            return [dict(row) for row in conn.execute(sql)]
    return run_query


def say(line: str) -> None:
    print(line, flush=True)


def serve(client: Wakeline, session_id: str, run_query: Tool, hang_on_first_call: bool) -> int:
    """The seed's loop: wake the session, answer each call it issues, stop when it ends."""
    say(f"harness pid {os.getpid()}: answering run_query for session {session_id}")
    last_seq = 0
    with client.sessions.wake(session_id, tools=[run_query]) as stream:
        for event in stream:
            if event.type != "tool_call":
                continue
            say(f"call {event.id} received (seq {event.seq}): {event.name} {json.dumps(event.input)}")
            if hang_on_first_call:
                say(f"  holding {event.id} unanswered until this process is killed (--hang-on-first-call)")
                while True:
                    time.sleep(3600)
            result = stream.run(event)      # once per call in this process, however often it arrives
            recorded = stream.answer(event)  # posts it, retrying until the gateway has it
            outcome = f"recorded at seq {recorded.seq}" if recorded else "not recorded (settled otherwise)"
            say(f"call {event.id} answered: {'error' if result.is_error else 'ok'}, "
                f"{len(result.output)} bytes, {outcome}")
            last_seq = event.seq
    reason = stream.ended.reason if stream.ended else "unknown"
    say(f"session {session_id} ended: {reason}")
    report = ""
    for event in client.sessions.stream(session_id, after=last_seq):  # its last words, up to its end
        if event.type == "model_turn":
            report = event.payload.text or report
    say(f"report: {report}")
    return 0 if reason == "completed" else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("session_id", nargs="?", help="the session to answer (omit with --create)")
    parser.add_argument("--create", action="store_true", help="create a ledger session and print its id")
    parser.add_argument("--model", default="scripted:ledger", help="the session's model (default scripted:ledger)")
    parser.add_argument("--db", type=Path, default=Path(os.environ.get("LEDGER_DB", "ledger.sqlite3")))
    parser.add_argument("--hang-on-first-call", action="store_true",
                        help="receive the first call, then hold it unanswered until killed (for the demo)")
    args = parser.parse_args()
    if args.create == bool(args.session_id):
        parser.error("give either --create or a session id")
    make_ledger(args.db)
    run_query = ledger_tool(args.db)
    url = os.environ.get("WAKELINE_GATEWAY_URL", "http://127.0.0.1:18080")
    with Wakeline(url, api_key=os.environ["WAKELINE_API_KEY"]) as client:
        if args.create:
            config = {"model": args.model, "tools": [run_query.definition]}
            print(client.sessions.create(TASK, config=config).session_id)
            return 0
        return serve(client, args.session_id, run_query, args.hang_on_first_call)


if __name__ == "__main__":
    raise SystemExit(main())

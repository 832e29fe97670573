"""What each HTTP sub-command of `wakeline` does (`cli.py` parses the arguments and
picks one): run a task and watch it live, read sessions, events, transcripts, replays,
forks, trees, costs, verify a session with a proof, set a retention window, audit. Each
takes the HTTP client and the parsed arguments and returns the exit code.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wakeline.agent.replay_check import check_lines
from wakeline.agent.replay_command import jsonl_history
from wakeline.contract.tools import tool_schemas
from wakeline.ops.retention import parse_window
from wakeline_client import Wakeline, WakelineError
from wakeline_client import operations as ops
from wakeline_gateway import terminal


def run(client: Wakeline, args: argparse.Namespace) -> int:
    config = {k: v for k, v in (("model", args.model), ("max_turns", args.max_turns)) if v is not None}
    created = client.sessions.create(args.task, title=args.title, config=config or None)
    print(f"session {created.session_id}", file=sys.stderr)
    if created.status == "pending":
        print("waiting for the brain to create it (is the brain running?)", file=sys.stderr)
    last: dict[str, Any] = {}
    writing = False  # a live line of the model's text is open
    # A session created a moment ago may not be archived yet: its stream is 404 for a while.
    for frame in client.sessions.stream_frames(created.session_id, deltas=args.live, appear_within_s=30.0):
        item = frame.json()
        if frame.event == "delta":
            writing = _show_delta(item, writing)
            continue
        if writing:
            print(flush=True)
            writing = False
        last = item
        print(terminal.event_line(last), flush=True)
    ended = last.get("type") == "session_ended"
    return terminal.exit_code(last["payload"]["reason"] if ended else last.get("type"))


def _show_delta(delta: dict[str, Any], writing: bool) -> bool:
    """The model's text as it streams, on one live line; reasoning in brackets. Never kept:
    the finished `model_turn` line follows."""
    if delta.get("kind") == "start":
        prefix = "\n" if writing else ""
        print(f"{prefix}      (model writing, turn {delta.get('turn')}{', restarted' if writing else ''}) ",
              end="", flush=True)
        return True
    text = terminal.safe(str(delta.get("text", "")))
    print(f"[{text}]" if delta.get("kind") == "thinking" else text, end="", flush=True)
    return True


def sessions(client: Wakeline, args: argparse.Namespace) -> int:
    for session in client.http.json(ops.LIST_SESSIONS, query={"limit": args.limit})["data"]:
        print(terminal.session_line(session))
    return 0


def events(client: Wakeline, args: argparse.Namespace) -> int:
    params = {k: v for k, v in (("after", args.after), ("before", args.before), ("limit", args.limit),
                                ("type", args.type)) if v is not None}
    for event in client.http.json(ops.READ_EVENTS, session_params(args), params)["data"]:
        print(terminal.event_line(event))
    return 0


def transcript(client: Wakeline, args: argparse.Namespace) -> int:
    if args.html:
        page = client.sessions.transcript(args.session_id, format="html")
        Path(args.html).write_text(page, encoding="utf-8")
        print(f"wrote {args.html} ({len(page)} bytes)", file=sys.stderr)
    elif args.markdown:
        print(terminal.safe(client.sessions.transcript(args.session_id, format="markdown")), end="")
    else:
        print(terminal.safe(json.dumps(client.http.json(ops.READ_TRANSCRIPT, session_params(args)), indent=2,
                                    ensure_ascii=False)))
    return 0


def replay(client: Wakeline, args: argparse.Namespace) -> int:
    if args.check:
        return replay_check(client, args)
    if args.session_id is None:
        raise WakelineError("replay takes a session id (--all only with --check)")
    steps = client.http.json(ops.REPLAY_SESSION, session_params(args))["data"]
    for step in steps:
        print(terminal.safe(json.dumps(step, ensure_ascii=False)) if args.json else terminal.replay_line(step))
    return 0


def fork(client: Wakeline, args: argparse.Namespace) -> int:
    """A new session with SID's history up to SEQ, continued with MESSAGE."""
    body: dict[str, Any] = {"at_seq": args.seq, "message": args.message, "title": args.title}
    answer = client.http.json(ops.FORK_SESSION, session_params(args), body=body, idempotency_key=args.idempotency_key)
    print(f"session {answer['session_id']}")
    print(terminal.outcome_line(answer))
    return 0


def tree(client: Wakeline, args: argparse.Namespace) -> int:
    node = client.http.json(ops.SESSION_TREE, session_params(args))
    if args.json:
        print(terminal.safe(json.dumps(node, indent=2, ensure_ascii=False)))
    else:
        for line in terminal.tree_lines(node, steps=not args.forks_only):
            print(line)
    return 0


def cost(client: Wakeline, args: argparse.Namespace) -> int:
    if args.session_id is None:
        params = {k: when(v) for k, v in (("since", args.since), ("until", args.until)) if v}
        report = client.http.json(ops.TENANT_COST, query=params)
    else:
        report = client.http.json(ops.SESSION_COST, session_params(args))
    print(terminal.safe(json.dumps(report, indent=2, ensure_ascii=False)))
    return 0


def replay_check(client: Wakeline, args: argparse.Namespace) -> int:
    """Each history, read through the API with the caller's key, is judged in-process by the
    agent's decision code, the brain's own (`wakeline.agent.replay_check`)."""
    if args.all == (args.session_id is not None):
        raise WakelineError("replay --check takes a session id or --all, not both or neither")
    ids = [args.session_id] if args.session_id else list(_session_ids(client, when(args.since) if args.since else None))
    diverged = 0
    for session_id in ids:
        history = "\n".join(client.sessions.export(session_id, inherited=True))
        try:
            lines, diverging = check_lines(jsonl_history(history), tool_schemas())
        except Exception as err:  # a history the check cannot read: this session's failure, not the run's
            lines, diverging = [f"{session_id}: not checked: {type(err).__name__}: {err}"], 1
        print(terminal.safe("\n".join(lines)))
        diverged += diverging != 0
    print(f"{len(ids) - diverged} of {len(ids)} sessions replay cleanly", file=sys.stderr)
    return 1 if diverged else 0


def _session_ids(client: Wakeline, since: str | None) -> Iterator[str]:
    cursor = None
    while True:
        page = client.http.json(ops.LIST_SESSIONS, query={"limit": 200, "cursor": cursor})
        for session in page["data"]:
            if since is None or session["created_at"] >= since[:19]:
                yield session["session_id"]
        cursor = page["next_cursor"]
        if cursor is None or (since and page["data"] and page["data"][-1]["created_at"] < since[:19]):
            return


def verify(client: Wakeline, args: argparse.Namespace) -> int:
    """One session (any reader of it), or --all: every session of the key's tenant (auditor, admin)."""
    if args.all == (args.session_id is not None):
        raise WakelineError("verify takes a session id or --all, not both or neither")
    if args.all:
        # Linear in the tenant's events (every hash is recomputed): far beyond a normal request.
        tenant = client.http.json(ops.VERIFY_TENANT, timeout=900)
        reports = tenant["sessions"]
        for problem in tenant["checkpoint_problems"]:
            print(f"BROKEN checkpoint: {terminal.safe(problem['reason'])}")
    else:
        reports = [client.http.json(ops.VERIFY_SESSION, session_params(args))]
    for report in reports:
        if report["ok"]:
            print(f"ok: {report['session_id']}: {report['events']} events, hash chain intact"
                  + ("" if report["signatures_checked"] else " (checkpoint signatures not checked: no key)")
                  + (f"; signed checkpoints checked in {', '.join(report['witnesses_checked'])}"
                     if report.get("evidence_checked") else "; signed checkpoints not checked (no public key)"))
        else:
            print(f"BROKEN: {report['session_id']}: first bad seq {report['first_bad_seq']}: "
                  f"{terminal.safe(report['reason'] or '')}")
        if report.get("prefix"):
            print(terminal.prefix_line(report["prefix"]))
    ok = all(r["ok"] for r in reports) and (not args.all or tenant["ok"])
    if getattr(args, "proof", False):
        if args.all:
            raise WakelineError("--proof is for one session")
        # One JSON line: `wakeline proof-check FILE --public-key-file signer.key.pub` checks it offline.
        answer = client.http.json(ops.INCLUSION_PROOF, session_params(args))
        if answer["proof"] is None:
            print(f"no proof: {terminal.safe(answer['reason'] or '')}", file=sys.stderr)
            return 2
        print(json.dumps(answer["proof"]))
    if args.all:
        broken = sum(not r["ok"] for r in reports)
        print(f"{'ok' if ok else 'BROKEN'}: {len(reports)} sessions verified, {broken} broken, "
              f"{len(tenant['checkpoint_problems'])} checkpoint problems")
    return 0 if ok else 1


def retention_window(client: Wakeline, args: argparse.Namespace) -> int:
    """The tenant's window; with --keep-days, set it (admin)."""
    if args.keep_days is not None:
        answer = client.http.json(ops.SET_RETENTION, body={"keep_days": args.keep_days})
    else:
        answer = client.http.json(ops.READ_RETENTION)
    print(json.dumps(answer, indent=2))
    return 0


def when(text: str) -> str:
    """An ISO time, or an age such as 7d / 12h / 30m meaning that long ago."""
    try:
        return (datetime.now(UTC) - parse_window(text)).isoformat()
    except (ValueError, argparse.ArgumentTypeError):
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).isoformat()


def audit(client: Wakeline, args: argparse.Namespace) -> int:
    params: dict[str, Any] = {k: v for k, v in (
        ("actor", args.actor), ("principal", args.principal), ("type", args.type), ("tool", args.tool),
        ("session_id", args.session), ("outcome", args.outcome),
        ("since", when(args.since) if args.since else None),
        ("until", when(args.until) if args.until else None)) if v}
    if args.access_log:
        page = client.http.json(ops.ACCESS_LOG, query={k: params[k] for k in ("since", "until")
                                                       if k in params} | {"limit": args.limit})
        for entry in page["data"]:
            print(terminal.safe(json.dumps(entry, ensure_ascii=False)))
        return 0
    if args.sessions:
        for row in client.http.json(ops.AUDIT_SESSIONS, query={**params, "limit": args.limit})["data"]:
            print(terminal.safe(json.dumps(row, ensure_ascii=False)))
        return 0
    if args.format in ("jsonl", "csv"):
        for line in client.audit.export(format=args.format, **params):
            print(terminal.safe(line))
        return 0
    shown, cursor = 0, None
    while shown < args.limit:
        page_params = {**params, "limit": min(1000, args.limit - shown)} | ({"cursor": cursor} if cursor else {})
        page = client.http.json(ops.AUDIT_EVENTS, query=page_params)
        for event in page["data"]:
            print(f"{event['ts']} {event['session_id']} {terminal.event_line(event)}")
        shown += page["count"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    return 0


def session_params(args: argparse.Namespace) -> dict[str, str]:
    """The path parameters of a command on one session."""
    return {"session_id": args.session_id}

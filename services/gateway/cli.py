"""`wakeline`: run a task and watch it live, read sessions, and send commands, over HTTP.

`wakeline run` exits with the session's terminal reason: 0 completed, 2 max_turns,
3 error, 4 interrupted or cancelled; 1 means the gateway refused or could not be reached.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

from pydantic_settings import BaseSettings, SettingsConfigDict

from wakeline_gateway import terminal
from wakeline_gateway.client import GatewayClient, GatewayError


class CliSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="WAKELINE_", extra="ignore")

    gateway_url: str = "http://127.0.0.1:18080"
    timeout_s: float = 30.0


def run(client: GatewayClient, args: argparse.Namespace) -> int:
    config = {k: v for k, v in (("model", args.model), ("max_turns", args.max_turns)) if v is not None}
    body: dict[str, Any] = {"message": args.task, "title": args.title, "config": config or None}
    created = client.json("POST", "/v1/sessions", json=body)
    print(f"session {created['session_id']}", file=sys.stderr)
    if created["status"] == "pending":
        print("waiting for the brain to create it (is the brain running?)", file=sys.stderr)
    last: dict[str, Any] = {}
    for last in client.follow(created["session_id"]):
        print(terminal.event_line(last), flush=True)
    ended = last.get("type") == "session_ended"
    return terminal.exit_code(last["payload"]["reason"] if ended else last.get("type"))


def sessions(client: GatewayClient, args: argparse.Namespace) -> int:
    for session in client.json("GET", "/v1/sessions", params={"limit": args.limit})["data"]:
        print(terminal.session_line(session))
    return 0


def events(client: GatewayClient, args: argparse.Namespace) -> int:
    params = {k: v for k, v in (("after", args.after), ("before", args.before), ("limit", args.limit),
                                ("type", args.type)) if v is not None}
    for event in client.json("GET", f"/v1/sessions/{args.session_id}/events", params=params)["data"]:
        print(terminal.event_line(event))
    return 0


def transcript(client: GatewayClient, args: argparse.Namespace) -> int:
    path = f"/v1/sessions/{args.session_id}/transcript"
    if args.html:
        page = client.call("GET", path, params={"format": "html"}).text
        Path(args.html).write_text(page, encoding="utf-8")
        print(f"wrote {args.html} ({len(page)} bytes)", file=sys.stderr)
    elif args.markdown:
        print(terminal.safe(client.call("GET", path, params={"format": "markdown"}).text), end="")
    else:
        print(terminal.safe(json.dumps(client.json("GET", path), indent=2, ensure_ascii=False)))
    return 0


def replay(client: GatewayClient, args: argparse.Namespace) -> int:
    steps = client.json("GET", f"/v1/sessions/{args.session_id}/replay")["data"]
    for step in steps:
        print(terminal.safe(json.dumps(step, ensure_ascii=False)) if args.json else terminal.replay_line(step))
    return 0


def verify(client: GatewayClient, args: argparse.Namespace) -> int:
    report = client.json("GET", f"/v1/sessions/{args.session_id}/verify")
    if report["ok"]:
        print(f"ok: {report['events']} events, hash chain intact")
        return 0
    print(f"BROKEN: the chain first fails at seq {report['first_bad_seq']} ({report['events']} events read)")
    return 1


def command(method: str, suffix: str, body: Callable[[argparse.Namespace], dict[str, Any] | None] = lambda a: None):
    def send(client: GatewayClient, args: argparse.Namespace) -> int:
        headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else {}
        answer = client.json(method, f"/v1/sessions/{args.session_id}{suffix}", json=body(args), headers=headers)
        print(terminal.outcome_line(answer))
        return 0
    return send


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="wakeline", description=__doc__.split("\n")[0])
    sub = top.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="create a session for a task and stream it live")
    p.add_argument("task")
    p.add_argument("--model")
    p.add_argument("--max-turns", type=int)
    p.add_argument("--title")
    p.set_defaults(handler=run)
    p = sub.add_parser("sessions", help="list sessions, newest first")
    p.add_argument("--limit", type=int, default=50)
    p.set_defaults(handler=sessions)
    p = _with_session(sub, "events", events, "read events by position")
    for flag in ("--after", "--before", "--limit"):
        p.add_argument(flag, type=int)
    p.add_argument("--type", action="append", help="only this type (repeatable)")
    p = _with_session(sub, "transcript", transcript, "the transcript (JSON unless told)")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--html", metavar="FILE")
    _with_session(sub, "replay", replay, "the folded state after each event").add_argument("--json", action="store_true")
    _with_session(sub, "verify", verify, "recompute the hash chain")
    for name, method, suffix, text in (("wake", "POST", "/wake", "wake the session"),
                                       ("delete", "DELETE", "", "delete the session (rows stay)")):
        _with_session(sub, name, command(method, suffix), text).add_argument("--idempotency-key")
    message = command("POST", "/messages", lambda a: {"text": a.text, "expected_seq": a.expected_seq})
    p = _with_session(sub, "send", message, "post a message")
    p.add_argument("text")
    p.add_argument("--expected-seq", type=int)
    p.add_argument("--idempotency-key")
    return top


def _with_session(sub: Any, name: str, handler: Callable[..., int], text: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=text)
    p.add_argument("session_id")
    p.set_defaults(handler=handler)
    return p


def main(argv: list[str] | None = None, client: GatewayClient | None = None) -> int:
    args = parser().parse_args(argv)
    settings = CliSettings()
    try:
        with client or GatewayClient(settings.gateway_url, settings.timeout_s) as gateway:
            return args.handler(gateway, args)
    except GatewayError as err:
        print(f"wakeline: {terminal.one_line(err, 2000)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

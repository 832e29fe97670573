"""`wakeline`: run a task and watch it live, read sessions, send commands, audit, over HTTP.

Every HTTP command presents the API key in WAKELINE_API_KEY (`wakeline keys create` makes
one). `wakeline keys`, `wakeline retention` and the commands of `wakeline.ops.operator`
(`migrate`, `topics`, `acls`, `checkpoints`) are operator commands that talk to Postgres
or Kafka directly, not to the gateway.

`wakeline run` exits with the session's terminal reason: 0 completed, 2 max_turns, budget or quota,
3 error, 4 interrupted or cancelled; 1 means the gateway refused or could not be reached.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable


from pydantic import SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from wakeline.ops import keys as keys_admin
from wakeline.ops import operator
from wakeline.evidence import proofs
from wakeline.ops import retention as retention_admin
from wakeline_client import Wakeline, WakelineError
from wakeline_client import operations as ops
from wakeline_gateway import cli_quotas, terminal
from wakeline_gateway.cli_commands import (
    audit, cost, events, fork, replay, retention_window, run, session_params, sessions, transcript, tree, verify,
)


class CliSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="WAKELINE_", extra="ignore")

    gateway_url: str = "http://127.0.0.1:18080"
    # The local gateway's port (GatewaySettings.http_port): the default URL follows it, so a
    # second clone on one machine sets the port alone.
    http_port: int | None = None
    timeout_s: float = 30.0
    api_key: SecretStr | None = None

    @model_validator(mode="after")
    def _url_on_the_port(self) -> CliSettings:
        if self.http_port is not None and "gateway_url" not in self.model_fields_set:
            self.gateway_url = f"http://127.0.0.1:{self.http_port}"
        return self


def command(op: ops.Operation, body: Callable[[argparse.Namespace], dict[str, Any] | None] = lambda a: None):
    def send(client: Wakeline, args: argparse.Namespace) -> int:
        answer = client.http.json(op, session_params(args), body=body(args), idempotency_key=args.idempotency_key)
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
    p.add_argument("--live", action="store_true", help="also show the model's text as it is written")
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
    p = sub.add_parser("replay", help="the folded state after each event; --check: would today's code do the same?")
    p.add_argument("session_id", nargs="?")
    p.add_argument("--json", action="store_true")
    p.add_argument("--check", action="store_true", help="replay against today's brain: the first divergence or "
                                                       "'replays cleanly' (exit 1 if any diverges)")
    p.add_argument("--all", action="store_true", help="with --check: every session the key sees")
    p.add_argument("--since", help="with --check --all: sessions created since (ISO time or 7d, 12h, 30m)")
    p.set_defaults(handler=replay)
    p = _with_session(sub, "fork", fork, "a new session with the history up to SEQ, continued with MESSAGE")
    p.add_argument("seq", type=int)
    p.add_argument("message")
    p.add_argument("--title")
    p.add_argument("--idempotency-key")
    p = _with_session(sub, "tree", tree, "the session's steps and the forks taken from it, as a tree")
    p.add_argument("--json", action="store_true")
    p.add_argument("--forks-only", action="store_true", help="sessions only, no steps")
    p = sub.add_parser("cost", help="what a session cost; without SID, the tenant's by owner, model, day (auditor)")
    p.add_argument("session_id", nargs="?")
    p.add_argument("--since", help="ISO time or an age: 7d, 12h, 30m (tenant report)")
    p.add_argument("--until")
    p.set_defaults(handler=cost)
    p = sub.add_parser("verify", help="recompute hash chains: one session, or --all of the tenant")
    p.add_argument("session_id", nargs="?")
    p.add_argument("--all", action="store_true")
    p.add_argument("--proof", action="store_true",
                   help="also print the session's head and Merkle path to a signed tenant root (JSON)")
    p.set_defaults(handler=verify)
    p = sub.add_parser("proof-check", help="check a printed inclusion proof offline, with the public key alone",
                       add_help=False)
    p.set_defaults(direct=lambda rest: proofs.main(["check", *rest]))
    p = sub.add_parser("audit", help="events across every session of the tenant (auditor, admin)")
    p.add_argument("--actor", action="append", help="exact actor, e.g. user:alice (repeatable)")
    p.add_argument("--principal", help="every actor of this principal (user:, human:, service:)")
    p.add_argument("--since", help="ISO time or an age: 7d, 12h, 30m")
    p.add_argument("--until", help="ISO time or an age")
    p.add_argument("--type", action="append")
    p.add_argument("--tool")
    p.add_argument("--session")
    p.add_argument("--outcome", choices=("error", "ok"))
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--format", choices=("table", "jsonl", "csv"), default="table",
                   help="jsonl/csv stream every match (the export endpoint)")
    p.add_argument("--sessions", action="store_true", help="the sessions the matches touch")
    p.add_argument("--access-log", action="store_true", help="who queried the audit trail (admin)")
    p.set_defaults(handler=audit)
    p = sub.add_parser("retention-window", help="the tenant's retention window; --keep-days N sets it (admin)")
    p.add_argument("--keep-days", type=int)
    p.set_defaults(handler=retention_window)
    cli_quotas.add_parser(sub)
    p = sub.add_parser("keys", help="create, revoke or list API keys (as the schema owner)", add_help=False)
    p.set_defaults(direct=keys_admin.main)
    p = sub.add_parser("retention", help="drop months past every tenant's window (maintenance role)",
                       add_help=False)
    p.set_defaults(direct=retention_admin.main)
    for name, text, direct in operator.COMMANDS:  # migrate, topics, acls, checkpoints
        sub.add_parser(name, help=text, add_help=False).set_defaults(direct=direct)
    for name, op, text in (("wake", ops.WAKE_SESSION, "wake the session"),
                           ("delete", ops.DELETE_SESSION, "delete the session (rows stay)")):
        _with_session(sub, name, command(op), text).add_argument("--idempotency-key")
    message = command(ops.POST_MESSAGE, lambda a: {"text": a.text, "expected_seq": a.expected_seq})
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


def main(argv: list[str] | None = None, client: Wakeline | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args, rest = parser().parse_known_args(argv)
    if getattr(args, "direct", None) is not None:  # not HTTP: the operator module parses the rest
        return args.direct(rest)
    if rest:
        parser().parse_args(argv)  # exits naming the unrecognized arguments
    settings = CliSettings()
    key = settings.api_key.get_secret_value() if settings.api_key else None
    try:
        client = client or Wakeline(settings.gateway_url, key, timeout_s=settings.timeout_s)
    except ValueError as err:  # a malformed WAKELINE_API_KEY
        print(f"wakeline: {err}", file=sys.stderr)
        return 1
    try:
        with client as gateway:
            return args.handler(gateway, args)
    except WakelineError as err:
        print(f"wakeline: {terminal.one_line(err, 2000)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

"""`wakeline fork`, `tree` and `verify` of a fork against a fake gateway: what they send and print."""

from __future__ import annotations

import httpx

from tests.unit.test_gateway_cli import ESCAPE, FakeGateway
from wakeline_gateway.cli import main
from wakeline_gateway.client import GatewayClient


def node(sid: str, fork_seq: int | None, steps: list[dict], forks: list[dict] = ()) -> dict:
    return {"session_id": sid, "owner": "user:a", "title": None, "status": "ended", "last_seq": 20,
            "parent_session_id": "p" if fork_seq else None, "fork_seq": fork_seq, "steps": steps,
            "forks": list(forks)}


def step(seq: int, kind: str, summary: str, **detail) -> dict:
    return {"seq": seq, "kind": kind, "actor": "system:brain", "summary": summary, "detail": detail}


def run(argv: list[str], routes, capsys) -> tuple[int, str, FakeGateway]:
    fake = FakeGateway(routes)
    with GatewayClient("http://gw", transport=httpx.MockTransport(fake)) as client:
        code = main(argv, client=client)
    return code, capsys.readouterr().out, fake


def test_fork_posts_the_seq_and_message_and_prints_the_new_session(capsys):
    answer = {"session_id": "f1", "command_id": "c", "status": "done", "outcome": "forked", "seq": 8}
    code, out, fake = run(["fork", "p", "7", "another way"],
                          {("POST", "/v1/sessions/p/fork"): [httpx.Response(201, json=answer)]}, capsys)
    assert code == 0 and out.splitlines()[0] == "session f1" and "forked at seq 8" in out
    assert fake.requests[0].read() == b'{"at_seq":7,"message":"another way","title":null}'


def test_tree_prints_each_fork_under_the_step_it_follows_and_escapes_content(capsys):
    tree = node("p", None, [step(3, "turn", "turn 1"), step(5, "tool_call", f"bash{ESCAPE}", outcome="ok"),
                            step(9, "turn", "turn 2")],
                [node("f1", 5, [step(6, "forked", "from p at seq 5")])])
    code, out, _ = run(["tree", "p"], {("GET", "/v1/sessions/p/tree"): [httpx.Response(200, json=tree)]}, capsys)
    lines = out.splitlines()
    assert code == 0 and "\x1b" not in out
    at = next(i for i, line in enumerate(lines) if line.startswith("  └─ f1"))
    assert "[ok]" in lines[at - 1] and "turn 2" in lines[at + 2] and "fork of p at seq 5" in lines[at]


def test_verify_of_a_fork_says_when_its_prefix_was_dropped_by_retention(capsys):
    report = {"session_id": "f1", "ok": True, "events": 3, "signatures_checked": True, "first_bad_seq": None,
              "reason": None, "prefix": {"parent_session_id": "p", "fork_seq": 8, "ok": True, "events": 0,
                                         "retained_out": 8, "parent": {"reason": None}}}
    code, out, _ = run(["verify", "f1"], {("GET", "/v1/sessions/f1/verify"): [httpx.Response(200, json=report)]},
                       capsys)
    assert code == 0 and "inherited prefix: p seq 1..8: ok" in out and "history is gone" in out

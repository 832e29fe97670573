"""The `wakeline` command line against a fake gateway (httpx.MockTransport): what it sends,
what it prints, and the exit code it derives from the session's end."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from wakeline_client import RetryPolicy, Wakeline
from wakeline_client.sse import Frame, parse_frames
from wakeline_gateway.cli import main
from wakeline_gateway.terminal import event_line, exit_code, one_line, safe
from wakeline.ops import quota_ceilings

ESCAPE = "\x1b[2J\x1b]0;pwned\x07"


def event(seq: int, type_: str, **payload) -> dict:
    return {"seq": seq, "type": type_, "actor": "agent:scripted:demo", "payload": payload}


def sse(*events: dict) -> str:
    frames = [": wakeline stream\n\n"]
    frames += [f"id: {e['seq']}\nevent: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events]
    return "".join(frames)


class FakeGateway:
    """Answers like the gateway; `routes` maps (method, path) to a list of responses, used in turn."""

    def __init__(self, routes: dict[tuple[str, str], list[httpx.Response]]):
        self.routes, self.requests = routes, []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answers = self.routes.get((request.method, request.url.path))
        if not answers:
            return httpx.Response(404, json={"detail": f"no route {request.url.path}"})
        return answers.pop(0) if len(answers) > 1 else answers[0]


def client(gateway) -> Wakeline:
    """No waiting between attempts: a fake answers at once."""
    return Wakeline("http://gw", transport=httpx.MockTransport(gateway), retry=RetryPolicy(backoff_s=0))


def run_cli(argv: list[str], gateway: FakeGateway) -> int:
    return main(argv, client=client(gateway))


@pytest.mark.parametrize("reason, code", [("completed", 0), ("max_turns", 2), ("error", 3),
                                          ("interrupted", 4), ("cancelled", 4)])
def test_run_streams_until_the_end_and_exits_with_the_terminal_reason(reason, code, capsys) -> None:
    stream = sse(event(1, "session_created", config={"model": "m", "max_turns": 2}, owner="user:local"),
                 event(2, "tool_result", name="bash", output=f"ok{ESCAPE}"), event(3, "session_ended", reason=reason))
    gateway = FakeGateway({
        ("POST", "/v1/sessions"): [httpx.Response(202, json={"session_id": "s-1", "command_id": "c-1",
                                                             "status": "pending"})],
        # Just created: the first read of the stream may find it not yet archived.
        ("GET", "/v1/sessions/s-1/stream"): [httpx.Response(404, json={"detail": "not found"}),
                                             httpx.Response(200, text=stream)],
    })
    assert run_cli(["run", "list files", "--model", "scripted:demo", "--max-turns", "2"], gateway) == code
    out = capsys.readouterr().out.splitlines()
    sent = json.loads(gateway.requests[0].content)
    assert sent == {"message": "list files", "title": None, "config": {"model": "scripted:demo", "max_turns": 2}}
    assert [line.split()[:2] for line in out] == \
        [["1", "session_created"], ["2", "tool_result"], ["3", "session_ended"]]
    assert "\x1b" not in "".join(out) and "\x07" not in "".join(out)
    assert gateway.requests[-1].headers["Last-Event-ID"] == "0"


def test_errors_print_the_gateway_detail_and_exit_1(capsys) -> None:
    gateway = FakeGateway({("POST", "/v1/sessions/s-1/messages"): [httpx.Response(
        409, json={"detail": "the brain rejected the command: conflict", "expected_seq": 1, "current_seq": 3})]})
    assert run_cli(["send", "s-1", "hi", "--expected-seq", "1"], gateway) == 1
    err = capsys.readouterr().err
    assert "409: the brain rejected the command: conflict" in err and '"current_seq": 3' in err
    assert json.loads(gateway.requests[0].content) == {"text": "hi", "expected_seq": 1}


def test_unreachable_gateway_is_exit_1_with_a_message(capsys) -> None:
    def refuse(request):
        raise httpx.ConnectError("refused")
    assert main(["sessions"], client=client(refuse)) == 1
    assert "gateway unreachable at http://gw" in capsys.readouterr().err


def report(session_id: str, ok: bool, seq: int | None = None, reason: str | None = None) -> dict:
    return {"session_id": session_id, "ok": ok, "first_bad_seq": seq, "reason": reason, "events": 9,
            "signatures_checked": True}


def test_verify_exits_1_when_the_chain_is_broken(capsys) -> None:
    gateway = FakeGateway({("GET", "/v1/sessions/s/verify"): [httpx.Response(
        200, json=report("s", False, 4, "hash mismatch"))]})
    assert run_cli(["verify", "s"], gateway) == 1
    assert "first bad seq 4: hash mismatch" in capsys.readouterr().out


def test_verify_with_proof_prints_the_proof_as_one_json_line_after_the_report(capsys) -> None:
    proof = {"session_id": "s", "head": {"seq": 9, "hash": "a" * 64}, "path": [],
             "checkpoint": {"statement": "{}", "signature": "ed25519:00"}}
    gateway = FakeGateway({("GET", "/v1/sessions/s/verify"): [httpx.Response(200, json=report("s", True))],
                           ("GET", "/v1/sessions/s/proof"): [httpx.Response(200, json={
                               "session_id": "s", "proof": proof})]})
    assert run_cli(["verify", "s", "--proof"], gateway) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("ok: s: 9 events") and json.loads(out[-1]) == proof
    none_yet = FakeGateway({("GET", "/v1/sessions/s/verify"): [httpx.Response(200, json=report("s", True))],
                            ("GET", "/v1/sessions/s/proof"): [httpx.Response(200, json={
                                "session_id": "s", "proof": None, "reason": "no signed checkpoint names it"})]})
    assert run_cli(["verify", "s", "--proof"], none_yet) == 2
    assert "no proof: no signed checkpoint names it" in capsys.readouterr().err


def test_verify_all_reads_the_tenant_report_and_fails_on_any_bad_session(capsys) -> None:
    tenant = {"tenant": "t", "ok": False, "checkpoint_problems": [],
              "sessions": [report("a", True), report("b", False, 2, "missing")]}
    gateway = FakeGateway({("GET", "/v1/audit/verify"): [httpx.Response(200, json=tenant)]})
    assert run_cli(["verify", "--all"], gateway) == 1
    out = capsys.readouterr().out
    assert "ok: a: 9 events" in out and "BROKEN: b: first bad seq 2: missing" in out


def test_verify_of_a_whole_chain_prints_ok_and_never_broken_and_says_which_witnesses(capsys) -> None:
    signed = dict(report("s", True), evidence_checked=True, witnesses_checked=["postgres"])
    gateway = FakeGateway({("GET", "/v1/sessions/s/verify"): [httpx.Response(200, json=signed)]})
    assert run_cli(["verify", "s"], gateway) == 0
    out = capsys.readouterr().out
    assert "BROKEN" not in out and "signed checkpoints checked in postgres" in out, out
    unsigned = FakeGateway({("GET", "/v1/sessions/s/verify"): [httpx.Response(200, json=report("s", True))]})
    assert run_cli(["verify", "s"], unsigned) == 0
    out = capsys.readouterr().out
    assert "BROKEN" not in out and "signed checkpoints not checked (no public key)" in out, out


def test_audit_sends_filters_and_follows_the_cursor_up_to_the_limit(capsys) -> None:
    first = {"data": [dict(event(1, "tool_call", name="bash"), ts="2026-11-01T00:00:00Z", session_id="s1")],
             "count": 1, "next_cursor": "c1"}
    second = {"data": [dict(event(2, "tool_result", name="bash"), ts="2026-11-01T00:00:01Z", session_id="s1")],
              "count": 1, "next_cursor": None}
    gateway = FakeGateway({("GET", "/v1/audit/events"): [httpx.Response(200, json=first),
                                                         httpx.Response(200, json=second)]})
    assert run_cli(["audit", "--principal", "alice", "--type", "tool_call", "--type", "tool_result",
                    "--since", "2026-11-01T00:00:00Z", "--outcome", "error", "--limit", "5"], gateway) == 0
    params = [r.url.params for r in gateway.requests]
    assert params[0].get_list("type") == ["tool_call", "tool_result"] and params[0]["principal"] == "alice"
    assert params[0]["since"] == "2026-11-01T00:00:00+00:00" and params[0]["outcome"] == "error"
    assert "cursor" not in params[0] and params[1]["cursor"] == "c1" and params[1]["limit"] == "4"
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_the_api_key_goes_in_the_authorization_header(monkeypatch) -> None:
    monkeypatch.setenv("WAKELINE_API_KEY", "wkl_0123456789abcdef_" + "a" * 43)
    seen = []

    def gateway(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, json={"data": [], "count": 0, "next_cursor": None})

    import wakeline_gateway.cli as cli
    real = cli.Wakeline
    monkeypatch.setattr(cli, "Wakeline", lambda *a, **k: real(*a, transport=httpx.MockTransport(gateway), **k))
    assert main(["sessions"]) == 0
    assert seen == ["Bearer wkl_0123456789abcdef_" + "a" * 43]


def test_events_passes_the_window_and_types(capsys) -> None:
    gateway = FakeGateway({("GET", "/v1/sessions/s/events"): [httpx.Response(
        200, json={"session_id": "s", "data": [event(5, "user_message", text="hi")], "count": 1})]})
    assert run_cli(["events", "s", "--before", "6", "--limit", "1", "--type", "user_message"], gateway) == 0
    assert dict(gateway.requests[0].url.params) == {"before": "6", "limit": "1", "type": "user_message"}
    assert capsys.readouterr().out.split()[:3] == ["5", "user_message", "agent:scripted:demo"]


def test_transcript_html_is_written_to_the_file(tmp_path) -> None:
    gateway = FakeGateway({("GET", "/v1/sessions/s/transcript"): [httpx.Response(200, text="<!DOCTYPE html>x")]})
    target = tmp_path / "t.html"
    assert run_cli(["transcript", "s", "--html", str(target)], gateway) == 0
    assert target.read_text() == "<!DOCTYPE html>x" and gateway.requests[0].url.params["format"] == "html"


def test_parse_frames_skips_comments_and_joins_data_lines() -> None:
    lines = [": heartbeat", "", "id: 3", "event: woke", "data: {\"a\":", "data: 1}", "", ": bye"]
    assert list(parse_frames(lines)) == [Frame("woke", '{"a":\n1}', "3")]


def test_terminal_output_is_one_safe_line() -> None:
    line = event_line(event(7, "model_turn", text="two\nlines\u202e" + ESCAPE))
    assert "\n" not in line and "\x1b" not in line and "\u202e" not in line and "two lines" in line
    assert safe("a\nb\x1b") == "a\nb?" and one_line("x" * 500, 10) == "x" * 9 + "…"
    assert (exit_code("completed"), exit_code("max_turns"), exit_code(None)) == (0, 2, 1)


# -- fork, tree and a fork's verify --------------------------------------------------------


def node(sid: str, fork_seq: int | None, steps: list[dict], forks: list[dict] = ()) -> dict:
    return {"session_id": sid, "owner": "user:a", "title": None, "status": "ended", "last_seq": 20,
            "parent_session_id": "p" if fork_seq else None, "fork_seq": fork_seq, "steps": steps,
            "forks": list(forks)}


def step(seq: int, kind: str, summary: str, **detail) -> dict:
    return {"seq": seq, "kind": kind, "actor": "system:brain", "summary": summary, "detail": detail}


def run(argv: list[str], routes, capsys) -> tuple[int, str, FakeGateway]:
    fake = FakeGateway(routes)
    with client(fake) as gateway:
        code = main(argv, client=gateway)
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


def test_run_live_shows_the_model_text_as_it_streams_and_a_restart(capsys) -> None:
    def delta(call: str, index: int, kind: str, text: str = "") -> str:
        body = {"session_id": "s-1", "tenant": "t", "turn": 1, "call": call, "index": index, "kind": kind,
                "text": text}
        return f"event: delta\ndata: {json.dumps(body)}\n\n"
    stream = (sse(event(1, "session_created", config={"model": "m"}, owner="user:local"))
              + delta("a", 0, "start") + delta("a", 1, "thinking", "hm") + delta("a", 2, "text", "Hel")
              + delta("b", 0, "start") + delta("b", 1, "text", "Hel") + delta("b", 2, "text", f"lo{ESCAPE}")
              + sse(event(2, "model_turn", text="Hello"), event(3, "session_ended", reason="completed"))[19:])
    gateway = FakeGateway({
        ("POST", "/v1/sessions"): [httpx.Response(201, json={"session_id": "s-1", "command_id": "c-1",
                                                             "status": "done"})],
        ("GET", "/v1/sessions/s-1/stream"): [httpx.Response(200, text=stream)],
    })
    assert run_cli(["run", "say hello", "--live"], gateway) == 0
    assert gateway.requests[1].url.params["deltas"] == "true"
    out = capsys.readouterr().out
    assert "(model writing, turn 1) [hm]Hel\n" in out
    assert "(model writing, turn 1, restarted) Hello?[2J?]0;pwned?\n" in out
    assert out.index("restarted") < out.index("model_turn") < out.index("session_ended")


GOLDEN = Path(__file__).parent / "golden"


def test_replay_check_all_since_judges_each_newer_session_and_exits_1_on_a_divergence(capsys):
    clean = (GOLDEN / "recorded_compaction.jsonl").read_text()
    diverging = (GOLDEN / "session_basic.jsonl").read_text()  # diverges at seq 6 (test_replay_check)
    page = {"data": [{"session_id": "s-clean", "created_at": "2026-06-02T10:00:00+00:00"},
                     {"session_id": "s-basic", "created_at": "2026-06-01T10:00:00+00:00"},
                     {"session_id": "s-old", "created_at": "2026-05-01T10:00:00+00:00"}], "next_cursor": None}
    fake = FakeGateway({("GET", "/v1/sessions"): [httpx.Response(200, json=page)],
                        ("GET", "/v1/sessions/s-clean/export"): [httpx.Response(200, text=clean)],
                        ("GET", "/v1/sessions/s-basic/export"): [httpx.Response(200, text=diverging)]})
    with client(fake) as gateway:
        code = main(["replay", "--check", "--all", "--since", "2026-05-15T00:00:00Z"], client=gateway)
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert code == 1 and len(lines) == 2 and "replays cleanly" in lines[0] and "diverges at seq 6" in lines[1]
    assert "1 of 2 sessions replay cleanly" in err
    exports = [r for r in fake.requests if r.url.path.endswith("/export")]
    assert [r.url.path for r in exports] == ["/v1/sessions/s-clean/export", "/v1/sessions/s-basic/export"]
    assert all(r.url.params["inherited"] == "true" for r in exports)  # a fork's history with its prefix


def test_cost_prints_a_sessions_cost_or_the_tenants_since_an_age(capsys):
    mine = {"session_id": "s1", "model_calls": 3, "tokens": {"input_tokens": 705}}
    tenant = {"data": [{"actor": "user:ann", "model": "m", "day": "2026-06-01", "calls": 4, "tokens": {}}]}
    code, out, _ = run(["cost", "s1"], {("GET", "/v1/sessions/s1/cost"): [httpx.Response(200, json=mine)]}, capsys)
    assert code == 0 and json.loads(out) == mine
    code, out, fake = run(["cost", "--since", "7d"], {("GET", "/v1/audit/cost"): [httpx.Response(200, json=tenant)]},
                          capsys)
    assert code == 0 and json.loads(out) == tenant
    since = fake.requests[0].url.params["since"]
    age = datetime.now(UTC) - datetime.fromisoformat(since)
    assert 7 * 86400 - 60 < age.total_seconds() < 7 * 86400 + 60  # 7d: that long ago, as an ISO time


def quotas_answer(tenant: str = "acme", **own) -> dict:
    values = {"running_sessions": None, "sessions_per_minute": None, "commands_per_second": None,
              "tool_calls_in_flight": None, "tokens_per_day": None}
    return {"tenant": tenant, "own": {**values, **own}, "effective": values, "defaults": values,
            "ceilings": values, "enforced": ["sessions_per_minute", "commands_per_second", "running_sessions"],
            "set_by": None, "set_at": None, "history": []}


def test_quotas_set_changes_only_the_quotas_named_and_default_resets_one(capsys) -> None:
    gateway = FakeGateway({("GET", "/v1/quotas"): [httpx.Response(200, json=quotas_answer(
                               running_sessions=7, tokens_per_day=1000))],
                           ("PUT", "/v1/quotas"): [httpx.Response(200, json=quotas_answer(commands_per_second=5))]})
    assert run_cli(["quotas", "set", "--tenant", "acme", "--commands-per-second", "5",
                    "--tokens-per-day", "default"], gateway) == 0
    put = gateway.requests[-1]
    assert put.method == "PUT" and json.loads(put.content) == {
        "running_sessions": 7, "sessions_per_minute": None, "commands_per_second": 5, "tool_calls_in_flight": None,
        "tokens_per_day": None}
    assert json.loads(capsys.readouterr().out)["own"]["commands_per_second"] == 5


def test_quotas_refuse_a_key_of_another_tenant_and_change_nothing(capsys) -> None:
    gateway = FakeGateway({("GET", "/v1/quotas"): [httpx.Response(200, json=quotas_answer("other"))]})
    assert run_cli(["quotas", "set", "--tenant", "acme", "--sessions-per-minute", "10"], gateway) == 1
    assert [r.method for r in gateway.requests] == ["GET"]
    assert "belongs to tenant 'other', not 'acme'" in capsys.readouterr().err
    assert run_cli(["quotas", "show", "--tenant", "acme"], gateway) == 1
    assert run_cli(["quotas", "show"], gateway) == 0


@pytest.mark.parametrize("value", ["0", "-3", "lots", "1.5"])
def test_quotas_set_takes_whole_numbers_of_at_least_one_or_default(value) -> None:
    with pytest.raises(SystemExit):
        run_cli(["quotas", "set", "--tenant", "acme", "--commands-per-second", value], FakeGateway({}))


def test_quotas_ceiling_goes_to_the_operator_module_not_the_gateway(monkeypatch) -> None:
    seen: list[list[str]] = []
    monkeypatch.setattr(quota_ceilings, "main", lambda rest: seen.append(rest) or 0)
    gateway = FakeGateway({})
    assert run_cli(["quotas", "ceiling", "--tenant", "acme", "--running-sessions", "50"], gateway) == 0
    assert seen == [["--tenant", "acme", "--running-sessions", "50"]] and gateway.requests == []


def test_quotas_ceiling_changes_only_the_ceilings_named_and_default_resets_one() -> None:
    args = quota_ceilings.parser().parse_args(["--tenant", "acme", "--running-sessions", "50",
                                               "--tokens-per-day", "default", "--by", "operator:ops"])
    assert (args.tenant, args.by) == ("acme", "operator:ops")
    assert quota_ceilings.given(args) == {"running_sessions": 50, "tokens_per_day": None}
    assert quota_ceilings.given(quota_ceilings.parser().parse_args(["--tenant", "acme"])) == {}  # only shows


@pytest.mark.parametrize("argv", [["--running-sessions", "50"],  # no tenant
                                  ["--tenant", "acme", "--running-sessions", "0"],
                                  ["--tenant", "acme", "--commands-per-second", "lots"]])
def test_quotas_ceiling_needs_a_tenant_and_whole_numbers_or_default(argv) -> None:
    with pytest.raises(SystemExit):
        quota_ceilings.parser().parse_args(argv)

"""Claude sessions on the real stack: the four services as processes on the real broker and
database, the brain's `anthropic` SDK pointed at the local Messages API server in this
process (`tests.fakes.messages_api`), which streams every answer as server-sent events.

Each session's first message names it (`task-<n>`), so the server's responder knows whose
request it answers however the brain interleaves them: a tool call (with thinking, its
signature and a redacted-thinking block) first, a final answer once the tool result is in.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bench.prompt_cache import cacheable_share, pieces
from tests.e2e.console_browser import expect_ui, open_session, shot, sign_in
from tests.e2e.sessions import wait_ended, wait_for
from tests.e2e.stack import require_database, running_stack
from tests.e2e.stored_log import assert_log_whole, stored_events
from wakeline.contract.tools import tool_schemas
from wakeline.agent.replay_check import first_divergence
from tests.fakes.messages_api import (
    Canned, FakeMessagesAPI, error, message, redacted_thinking_block, text_block, thinking_block, tool_use_block,
)

MODEL = "claude-test-e2e"


def tag_of(body: dict[str, Any]) -> str:
    first = body["messages"][0]["content"]
    return first if isinstance(first, str) else next(b["text"] for b in first if b["type"] == "text")


def tool_results(body: dict[str, Any]) -> int:
    return sum(1 for m in body["messages"] if isinstance(m["content"], list)
               for b in m["content"] if b["type"] == "tool_result")


def first_reply(tag: str, command: str = "echo hi", **kwargs: Any) -> Canned:
    return message([thinking_block(f"I should run a command for {tag}.", f"sig-{tag}"),
                    redacted_thinking_block(f"redacted-{tag}"), text_block("Running it."),
                    tool_use_block("bash", {"command": command}, id=f"toolu_{tag}")], "tool_use", **kwargs)


class Script:
    """The server's answers per session tag: `storms[tag]` 529s first, `first[tag]` for the
    tool-use turn's first attempt, then the usual replies."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: dict[str, int] = defaultdict(int)
        self.storms: dict[str, int] = {}
        self.first: dict[str, Canned] = {}
        self.commands: dict[str, str] = {}
        self.sent: dict[str, list[dict[str, Any]]] = {}  # the tool-use turn's blocks, as sent

    def __call__(self, body: dict[str, Any]) -> Canned:
        tag = tag_of(body)
        self.calls[tag] += 1
        if self.calls[tag] <= self.storms.get(tag, 0):
            return error(529, "overloaded_error", "Overloaded")
        if tool_results(body) == 0:
            canned = self.first.pop(tag, None)
            if canned is None:
                canned = first_reply(tag, self.commands.get(tag, "echo hi"))
                self.sent[tag] = canned.body["content"]
            return canned
        return message([thinking_block("The command ran.", f"sig2-{tag}"), text_block(f"done {tag}")])


@pytest.fixture(scope="module")
def api() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as server:
        yield server


@pytest.fixture(scope="module")
def stack(api, tmp_path_factory):
    require_database()
    with running_stack(tmp_path_factory.mktemp("claude"), **brain_env(api)) as stack:
        yield stack


def brain_env(api: FakeMessagesAPI) -> dict[str, str]:
    """What the brain needs to reach the server (a restarted brain too)."""
    return {"WAKELINE_ANTHROPIC_API_KEY": "test-key-not-real", "WAKELINE_ANTHROPIC_BASE_URL": api.base_url,
            "WAKELINE_ANTHROPIC_MAX_RETRIES": "2", "WAKELINE_MODEL_RETRY_S": "0.5",
            "WAKELINE_MODEL_RETRY_MAX_S": "2", "WAKELINE_MODEL_CONCURRENCY": "8"}


@pytest.fixture
def script(api) -> Iterator[Script]:
    api.reset()
    script = Script()
    api.respond_with(script)
    yield script
    api.reset()


@pytest.fixture
def client(stack):
    with httpx.Client(base_url=stack.url, timeout=30, headers=stack.headers) as client:
        yield client


def create(client: httpx.Client, tag: str, **config: Any) -> str:
    response = client.post("/v1/sessions", json={"message": tag, "wait": False,
                                                 "config": {"model": MODEL, "max_tokens": 4096, **config}})
    assert response.status_code in (201, 202), response.text
    return response.json()["session_id"]


def requests_of(api: FakeMessagesAPI, tag: str) -> list[dict[str, Any]]:
    return [b for b in api.bodies() if isinstance(b, dict) and tag_of(b) == tag]


def assert_completed(session: dict[str, Any], sid: str) -> None:
    detail = [(e.type, e.payload) for e in stored_events(sid) if e.type in ("session_ended", "model_unavailable")]
    assert session["ended_reason"] == "completed", detail


def without_cache_marks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in b.items() if k != "cache_control"} for b in blocks]


def assert_breakpoints(body: dict[str, Any]) -> None:
    """Where the brain puts its cache marks (`claude.cache_breakpoints`): the last tool, the
    system prompt, the newest message's last block that may carry one, at most four in all."""
    assert [("cache_control" in t) for t in body["tools"]] == [False] * (len(body["tools"]) - 1) + [True]
    assert [("cache_control" in b) for b in body["system"]] == [True]
    newest = [b for b in body["messages"][-1]["content"] if b["type"] not in ("thinking", "redacted_thinking")]
    assert "cache_control" in newest[-1]
    assert not any("cache_control" in b for m in body["messages"] for b in m["content"]
                   if b["type"] in ("thinking", "redacted_thinking"))
    assert sum(marked for _, marked in pieces(body)) <= 4


def assert_keeps_marked_prefix(previous: dict[str, Any], body: dict[str, Any]) -> None:
    """`body` carries `previous`'s newest breakpoint over the same prefix, byte for byte, marks
    included: what `previous` wrote to the cache, `body` reads."""
    before, now = pieces(previous), pieces(body)
    newest = max(i for i, (_, marked) in enumerate(before) if marked)
    assert now[: newest + 1] == before[: newest + 1]
    assert cacheable_share(previous, body) == sum(len(p) for p, _ in now[: newest + 1]) / sum(len(p) for p, _ in now)


def test_a_529_storm_over_20_sessions_parks_them_and_every_one_completes(stack, client, api, script):
    tags = [f"storm-{i}" for i in range(20)]
    for tag in tags:
        script.storms[tag] = 5  # 3 tries (max_retries 2) fail: parked; the next call's 2 more fail, then it answers
    sids = {tag: create(client, tag, thinking_budget=1024) for tag in tags}

    for tag, sid in sids.items():
        assert_completed(wait_ended(client, stack, sid, timeout=180), sid)
    for tag, sid in sids.items():
        events = assert_log_whole(sid)
        waits = [e.payload for e in events if e.type == "model_unavailable"]
        assert [w.attempt for w in waits] == [1], tag
        assert "Overloaded" in waits[0].error
        assert [e.type for e in events].count("model_turn") == 2
        assert [e.payload.reason for e in events if e.type == "session_ended"] == ["completed"]
        assert script.calls[tag] == 5 + 2  # every 529 and the two answers: nothing lost, nothing doubled
        for body in requests_of(api, tag):
            assert_breakpoints(body)


def test_thinking_blocks_go_back_unchanged_after_a_kill_9_of_the_brain(stack, client, api, script):
    tag = "thinking-kill"
    script.commands[tag] = "sleep 4; echo slept"
    sid = create(client, tag, thinking_budget=2048)
    wait_for(lambda: any(e.type == "tool_call" for e in stored_events(sid)), 60, "the tool call", stack)
    stack.services["brain"].kill9()
    stack.start("brain", "brain", WAKELINE_HOST="brain-claude-2", **brain_env(api))

    assert_completed(wait_ended(client, stack, sid, timeout=120), sid)
    events = assert_log_whole(sid)
    assert any(e.type == "woke" and e.payload.host == "brain-claude-2" for e in events)
    [turn] = [e for e in events if e.type == "model_turn" and e.payload.stop_reason == "tool_use"]
    assert list(turn.payload.blocks) == script.sent[tag]  # stored as returned
    bodies = requests_of(api, tag)
    after = [b for b in bodies if tool_results(b)]
    assert after, "no request after the tool result"
    for body in after:  # rebuilt from the log by the new brain
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
        assistant = [m for m in body["messages"] if m["role"] == "assistant"]
        assert without_cache_marks(assistant[0]["content"]) == script.sent[tag]
    # The cache marks: where they belong in every request, and the first request the new
    # brain sends keeps the killed brain's last marked prefix identical (a cache hit).
    for body in bodies:
        assert_breakpoints(body)
    first_after = bodies.index(after[0])
    assert first_after > 0 and not tool_results(bodies[first_after - 1])  # sent by the killed brain
    assert_keeps_marked_prefix(bodies[first_after - 1], after[0])
    for previous, body in zip(bodies, bodies[1:]):
        assert_keeps_marked_prefix(previous, body)


def test_a_stream_cut_by_the_server_mid_turn_is_redone(stack, client, api, script):
    tag = "cut-stream"
    script.first[tag] = first_reply(tag, cut_after=5)
    sid = create(client, tag)

    assert_completed(wait_ended(client, stack, sid, timeout=120), sid)
    events = assert_log_whole(sid)
    [wait] = [e.payload for e in events if e.type == "model_unavailable"]
    assert "stream was cut" in wait.error
    assert [e.type for e in events].count("model_turn") == 2  # the cut turn left nothing behind
    assert len([b for b in requests_of(api, tag) if not tool_results(b)]) == 2


def test_a_brain_killed_mid_stream_redoes_the_turn_on_wake(stack, client, api, script):
    tag = "kill-mid-stream"
    script.first[tag] = first_reply(tag, pace_s=0.5)  # ~6 s of streaming
    sid = create(client, tag)
    wait_for(lambda: requests_of(api, tag), 60, "the first model request", stack)
    stack.services["brain"].kill9()
    stack.start("brain", "brain", WAKELINE_HOST="brain-claude-3", **brain_env(api))

    assert_completed(wait_ended(client, stack, sid, timeout=120), sid)
    events = assert_log_whole(sid)
    assert [e.type for e in events].count("model_turn") == 2
    assert "model_unavailable" not in [e.type for e in events]  # lost with the brain, redone by the next
    assert len([b for b in requests_of(api, tag) if not tool_results(b)]) == 2


class Viewer:
    """A live viewer on the gateway's SSE stream with `deltas=true`, reading in a thread."""

    def __init__(self, stack, sid: str) -> None:
        self.frames: list[tuple[str, dict[str, Any]]] = []
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._read, args=(stack, sid), daemon=True)
        self._thread.start()

    def _read(self, stack, sid: str) -> None:
        import json
        try:
            with httpx.Client(base_url=stack.url, headers=stack.headers, timeout=httpx.Timeout(5, read=120)) as http:
                with http.stream("GET", f"/v1/sessions/{sid}/stream",
                                 params={"deltas": "true", "until_end": "true"}) as response:
                    assert response.status_code == 200, response.read()
                    kind = None
                    for line in response.iter_lines():
                        if line.startswith("event: "):
                            kind = line[len("event: "):]
                        elif line.startswith("data: ") and kind:
                            self.frames.append((kind, json.loads(line[len("data: "):])))
        except BaseException as err:  # noqa: BLE001 - reported by the test
            self.error = err

    def deltas(self) -> list[dict[str, Any]]:
        return [data for kind, data in self.frames if kind == "delta"]

    def join(self) -> None:
        self._thread.join(timeout=60)
        assert not self._thread.is_alive() and self.error is None, self.error


def test_viewers_see_the_text_as_it_streams_and_the_turn_restart_after_a_kill_9(stack, client, api, script):
    tag = "viewer-kill"
    script.first[tag] = first_reply(tag, pace_s=0.4)  # the first attempt streams slowly
    sid = create(client, tag)
    wait_for(lambda: client.get(f"/v1/sessions/{sid}").status_code == 200, 30, "the session row", stack)
    viewer = Viewer(stack, sid)
    wait_for(lambda: any(d["kind"] == "thinking" for d in viewer.deltas()), 60, "thinking deltas", stack)
    stack.services["brain"].kill9()
    stack.start("brain", "brain", WAKELINE_HOST="brain-claude-4", **brain_env(api))

    assert_completed(wait_ended(client, stack, sid, timeout=120), sid)
    viewer.join()
    calls = list(dict.fromkeys(d["call"] for d in viewer.deltas() if d["turn"] == 1))
    assert len(calls) == 2, calls  # the killed call, then the redone one
    first, redone = ([(d["kind"], d["text"]) for d in viewer.deltas() if d["call"] == c] for c in calls)
    assert redone[0] == ("start", "")  # the restart is visible (the viewer may have joined the first late)
    partial, whole = ("".join(t for _, t in deltas) for deltas in (first, redone))
    assert partial and partial in whole and len(partial) < len(whole)  # the cut one was partial
    assert "".join(t for k, t in redone if k == "text") == "Running it."
    events = assert_log_whole(sid)
    assert "delta" not in {e.type for e in events}  # deltas never reach the log
    turns = [e for e in events if e.type == "model_turn"]
    assert len(turns) == 2 and turns[0].payload.text == "Running it."
    assert [kind for kind, _ in viewer.frames if kind == "model_turn"] == ["model_turn", "model_turn"]


def test_the_console_draws_the_model_writing_its_restart_and_then_its_reasoning_collapsed(
        stack, client, api, script, page):
    tag = "console-live"
    script.first[tag] = first_reply(tag, pace_s=0.8)  # the first attempt streams slowly (the page signs in meanwhile)
    sid = create(client, tag)
    wait_for(lambda: client.get(f"/v1/sessions/{sid}").status_code == 200, 30, "the session row", stack)
    sign_in(page, stack, stack.headers["Authorization"].removeprefix("Bearer "), "local · user · tenant default")
    open_session(page, stack, sid)
    page.wait_for_selector("#transcript li.live details.reasoning:not([hidden])")  # thinking, as it streams
    assert page.locator("#transcript li[data-type=model_turn]").count() == 0
    assert "model writing" in page.text_content("#transcript li.live .head")
    # a piece of the thinking so far (deltas are not replayed: a page that joins late misses the start)
    thinking = page.text_content("#transcript li.live pre.reasoning-text")
    assert thinking and thinking in f"I should run a command for {tag}.", thinking
    script.first[tag] = first_reply(tag, pace_s=0.4)  # the redone attempt too, so its restart stays in view
    stack.services["brain"].kill9()
    stack.start("brain", "brain", WAKELINE_HOST="brain-claude-console", **brain_env(api))
    restart = page.wait_for_selector("#transcript li.live .restart", timeout=60_000)
    assert "restarted" in restart.text_content()
    expect_ui(page.locator("#transcript li.live")).to_contain_text("I should run")  # the redone attempt, streaming
    shot(page, "model-writing")

    page.wait_for_selector("#transcript li[data-type=session_ended]", timeout=120_000)
    # each finished turn replaces what streamed (waited for: the page may draw the end a frame
    # before it drops the last live item; a make test run read it in between once)
    expect_ui(page.locator("#transcript li.live")).to_have_count(0)
    turns = page.locator("#transcript li[data-type=model_turn]")
    expect_ui(turns).to_have_count(2)
    first = turns.nth(0).locator("details.reasoning")
    assert first.get_attribute("open") is None  # collapsed
    assert first.locator("summary").text_content() == "reasoning"
    thought = first.text_content()
    assert f"I should run a command for {tag}." in thought and "[redacted thinking]" in thought
    assert f"sig-{tag}" not in page.text_content("#transcript")  # signatures are for the API only
    assert turns.nth(0).locator(".text").text_content() == "Running it."
    assert "The command ran." in turns.nth(1).locator("details.reasoning").text_content()
    # over HTTP: the stored log's asyncio.run cannot run under the page's Playwright loop
    assert wait_ended(client, stack, sid)["ended_reason"] == "completed"


MEMORY = "# MEMORY\n- the code word is PELICAN\n- tabs, never spaces\n"


class MemoryScript:
    """One session that writes MEMORY.md, fills its window with a long task and a command's
    output, is compacted (the summary written by the server), and answers last."""

    def __init__(self, tag: str) -> None:
        self.tag = tag

    def __call__(self, body: dict[str, Any]) -> Canned:
        system = body.get("system")
        system_text = system if isinstance(system, str) else "".join(b["text"] for b in system or [])
        if system_text.startswith("You are compacting"):
            return message([text_block(f"SUMMARY of {self.tag}: MEMORY.md written, seq ran.")])
        if str(body["messages"][0]["content"]).find("[Summary of earlier conversation]") >= 0:
            return message([text_block(f"done {self.tag}")])
        if tool_results(body) == 0:
            return message([tool_use_block("write_file", {"path": "MEMORY.md", "content": MEMORY},
                                           id=f"toolu_w_{self.tag}")], "tool_use")
        if tool_results(body) == 1:
            return message([tool_use_block("bash", {"command": "seq 1 200"}, id=f"toolu_b_{self.tag}")], "tool_use")
        return message([text_block(f"done {self.tag} without a compaction")])


def test_a_compaction_re_injects_the_memory_file_whole_after_the_summary_across_a_kill_9(stack, client, api):
    tag = "memory-file"
    api.reset()
    api.respond_with(MemoryScript(tag))
    try:
        response = client.post("/v1/sessions", json={
            "message": tag + " " + "Context to carry along. " * 170, "wait": False,
            "config": {"model": MODEL, "max_tokens": 512, "context_window": 1024, "memory_file": "MEMORY.md"}})
        assert response.status_code in (201, 202), response.text
        sid = response.json()["session_id"]
        read = wait_for(lambda: [e for e in stored_events(sid) if e.type == "tool_call" and e.actor == "system:brain"],
                        90, "the brain's read of the memory file", stack)
        # killed between its read and (most likely) the read's result: the wake folds and goes on
        stack.services["brain"].kill9()
        stack.start("brain", "brain", WAKELINE_HOST="brain-claude-memory", **brain_env(api))
        assert_completed(wait_ended(client, stack, sid, timeout=120), sid)
        bodies = [b for b in api.bodies() if isinstance(b, dict)]
    finally:
        api.reset()

    events = assert_log_whole(sid)
    assert [e.payload.name for e in read] == ["read_file"] and read[0].payload.input["path"] == "MEMORY.md"
    [call] = [e for e in events if e.type == "tool_call" and e.actor == "system:brain"]
    [result] = [e for e in events if e.type == "tool_result" and e.payload.tool_call_id == call.payload.tool_call_id]
    assert result.actor.startswith("runner:") and not result.payload.is_error  # the runner read the sandbox's file
    [compaction] = [e for e in events if e.type == "compaction"]
    assert compaction.seq > result.seq and compaction.payload.memory == MEMORY
    assert compaction.payload.memory_file == "MEMORY.md" and compaction.payload.summary_model == MODEL
    # The request after the compaction: the summary, then the memory file whole, as data.
    last = [b for b in bodies if "[Summary of earlier conversation]" in str(b["messages"][0]["content"])][0]
    opening = last["messages"][0]["content"]
    assert opening[0]["text"].startswith(f"[Summary of earlier conversation]\nSUMMARY of {tag}")
    assert opening[1]["text"] == f'<memory_file path="MEMORY.md" trust="data">\n{MEMORY}\n</memory_file>'
    # never a tool_use of the model's: every tool_result the API sees pairs with one it made
    for body in bodies:
        uses = {b["id"] for m in body["messages"] if isinstance(m["content"], list)
                for b in m["content"] if b["type"] == "tool_use"}
        results = {b["tool_use_id"] for m in body["messages"] if isinstance(m["content"], list)
                   for b in m["content"] if b["type"] == "tool_result"}
        assert call.payload.tool_call_id not in uses | results and results <= uses
    assert first_divergence(events, tool_schemas()) is None

"""The web console in a real browser (Debian's Chromium driven by Playwright) against the
real stack: roles, a live session, approval, keyboard delete, audit, hostile content.
The browser and page fixtures are `console_browser`'s (Chromium is the machine's; with
`WAKELINE_CONSOLE_SHOTS=<dir>` the tests save screenshots of the main screens there).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.e2e.console_browser import expect_ui, open_session, shot, sign_in
from tests.e2e.sessions import create_session, wait_ended, wait_for
from wakeline.storage.event_rows import event_row
from wakeline.storage.event_statements import INSERT_ROWS
from wakeline.contract.events import parse_event
from wakeline.runtime.settings import CommonSettings

HOSTILE_PORT = 47613  # named in tests/e2e/policies/hostileconsole.json
# Every write/delete control of a session view, by data-act.
WRITE_ACTS = {"cancel", "wake", "takeover", "handback"}
READ_ACTS = {"export-html", "export-json", "verify"}
CELLS = "rs => rs.map(r => [...r.cells].map(c => c.textContent))"  # a table's rows as lists of texts
# Fetches `url` once a frame and a task have passed: after what the page had queued before.
AFTER_A_TURN = ("url => new Promise(r => requestAnimationFrame(() => setTimeout(r)))"
                ".then(() => fetch(url)).then(() => null)")


@pytest.fixture(scope="module")
def keys(stack) -> dict[str, str]:
    return {role: stack.api_key(f"console-{role}", role) for role in ("user", "auditor", "admin")}


def api(stack, key: str) -> httpx.Client:
    return httpx.Client(base_url=stack.url, timeout=30, headers={"Authorization": f"Bearer {key}"})


def visible_acts(page) -> set[str]:
    return set(page.eval_on_selector_all("#s-actions button:not([hidden])", "bs => bs.map(b => b.dataset.act)"))


def test_console_is_served_with_a_strict_csp_and_me_names_the_caller(stack, keys):
    response = httpx.get(f"{stack.url}/console/")
    assert response.status_code == 200 and "text/html" in response.headers["content-type"]
    csp = response.headers["content-security-policy"]
    for rule in ("default-src 'self'", "script-src 'self'", "connect-src 'self'", "object-src 'none'",
                 "frame-ancestors 'none'"):
        assert rule in csp, csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert not re.search(r"<script(?![^>]*\bsrc=)", response.text), "inline script in index.html"
    assert not re.search(r"\son[a-z]+=", response.text), "inline event handler in index.html"
    assert httpx.get(f"{stack.url}/console/app.js").headers["content-security-policy"] == csp
    assert httpx.get(f"{stack.url}/console/..%2fapp.py").status_code in (404, 422)
    with api(stack, keys["auditor"]) as client:
        me = client.get("/v1/me").json()
    assert (me["principal"], me["role"], me["tenant"]) == ("console-auditor", "auditor", "default")
    assert "audit.read" in me["actions"] and "session.write" not in me["actions"]
    assert httpx.get(f"{stack.url}/v1/me").status_code == 401


def test_each_role_sees_exactly_the_actions_it_may_take(stack, keys, page):
    with api(stack, keys["user"]) as user:
        own = create_session(user, "tools3", "a session of the user")
        wait_ended(user, stack, own)
    page.goto(f"{stack.url}/console/")
    page.fill("#key", "wkl_not_a_real_key")
    page.press("#key", "Enter")
    page.wait_for_selector("#signin-error:not(:empty)")
    assert page.is_visible("#signin")

    sign_in(page, stack, keys["user"], "console-user · user · tenant default")
    page.wait_for_selector(f"#session-list li[data-session='{own}']")
    assert page.is_visible("#new-session") and not page.is_visible("#nav-audit")
    shot(page, "sessions")
    open_session(page, stack, own)
    assert visible_acts(page) == WRITE_ACTS | READ_ACTS | {"delete"} and page.is_visible("#send")
    shot(page, "session")
    assert page.evaluate("sessionStorage.getItem('wakeline.key')") == keys["user"]
    assert keys["user"] not in page.url

    page.click("#sign-out")
    sign_in(page, stack, keys["auditor"], "console-auditor · auditor · tenant default")
    assert not page.is_visible("#new-session") and page.is_visible("#nav-audit")
    page.wait_for_selector(f"#session-list li[data-session='{own}']")  # the whole tenant
    assert page.locator(f"#session-list li[data-session='{own}'] .bin").count() == 0
    open_session(page, stack, own)
    assert visible_acts(page) == READ_ACTS and not page.is_visible("#send")
    page.click("#nav-audit")
    page.wait_for_selector("#audit-form", state="visible")  # the view follows the hashchange event, a task later
    assert page.is_visible("#audit-form") and page.is_visible("#a-sessions")
    assert not page.is_visible("#access-log")  # the access log is the admin's

    page.click("#sign-out")
    sign_in(page, stack, keys["admin"], "console-admin · admin · tenant default")
    assert page.is_visible("#new-session") and page.is_visible("#nav-audit")
    # another's session: read, never write, but delete (deps.deletable_session lets a tenant admin)
    page.wait_for_selector(f"#session-list li[data-session='{own}'] .bin", state="attached")  # shown on hover/focus
    open_session(page, stack, own)
    assert visible_acts(page) == READ_ACTS | {"delete"} and not page.is_visible("#send")
    page.click("#nav-audit")
    page.wait_for_selector("#access-log", state="visible")
    assert page.is_visible("#access-log") and page.is_visible("#a-sessions")
    with api(stack, keys["admin"]) as admin:  # and the server agrees with the page
        assert admin.post(f"/v1/sessions/{own}/messages", json={"text": "not mine"}).status_code == 403
        assert admin.delete(f"/v1/sessions/{own}").status_code in (200, 202)


def test_a_session_started_in_the_console_runs_live_and_resumes_after_the_gateway_restarts(stack, keys, page):
    sign_in(page, stack, keys["user"], "console-user · user · tenant default")
    page.fill("#new-task", "count slowly")
    page.fill("#new-model", "scripted:slowmodel")
    page.fill("#new-title", "live in the console")
    page.click("#new-session button[type=submit]")
    page.wait_for_selector("#transcript li[data-type=tool_call]")
    session_id = page.url.rsplit("/", 1)[1]
    seen = page.eval_on_selector_all("#transcript > li", "ls => ls.length")

    gateway = stack.services["gateway"]  # a network drop, the hard way
    gateway.kill9()
    expect_ui(page.locator("#s-stream")).to_contain_text("reconnecting")
    gateway.start()
    stack.wait_gateway()

    page.wait_for_selector("#transcript li[data-type=session_ended]", timeout=90_000)
    assert page.eval_on_selector_all("#transcript > li", "ls => ls.length") > seen
    with api(stack, keys["user"]) as user:
        wait_ended(user, stack, session_id)  # the page saw the end on the live feed; Postgres a moment later
        stored = [e["seq"] for e in user.get(f"/v1/sessions/{session_id}/events").json()["data"]]
    shown = [int(s) for s in page.eval_on_selector_all("#transcript > li", "ls => ls.map(l => l.dataset.seq)")]
    assert shown == stored, "the transcript has a gap or a duplicate"
    # each result beside its call
    cells = page.eval_on_selector_all(".pair .result", "cs => cs.map(c => c.textContent)")
    assert len(cells) == 2 and "one" in cells[0] and "two" in cells[1], cells
    page.click("#s-actions button[data-act=verify]")
    expect_ui(page.locator("#s-notice")).to_contain_text("Chain intact")
    with page.expect_download() as download:
        page.click("#s-actions button[data-act=export-json]")
    assert session_id in Path(download.value.path()).read_text()
    with page.expect_download() as download:
        page.click("#s-actions button[data-act=export-html]")
    html = Path(download.value.path()).read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and session_id in html
    with api(stack, keys["user"]) as user:  # the cost line followed the session to its end
        cost = user.get(f"/v1/sessions/{session_id}/cost").json()
    assert cost["turns"] >= 3 and cost["tool_calls"] == 2
    expect_ui(page.locator("#s-cost")).to_contain_text(
        f"cost: {cost['turns']} turns, {cost['model_calls']} model calls, {cost['tool_calls']} tool calls")
    shot(page, "live-session")


def test_a_session_its_budget_stopped_shows_it_and_goes_on_from_the_console_with_a_raise(stack, keys, page):
    with api(stack, keys["user"]) as user:
        sid = create_session(user, "tools3", "spend a little", budget={"output_tokens": 1})
        wait_for(lambda: user.get(f"/v1/sessions/{sid}").json()["ended_reason"] == "budget", 60,
                 "the budget to stop the session", stack)
    sign_in(page, stack, keys["user"], "console-user · user · tenant default")
    open_session(page, stack, sid)
    expect_ui(page.locator("#s-budget")).to_contain_text("output tokens")
    expect_ui(page.locator("#s-budget")).to_contain_text("reached (output_tokens)")
    page.fill("#send-text", "go on")
    page.click("#send button[type=submit]")  # no raise: refused, and the form says where to raise it
    expect_ui(page.locator("#s-notice")).to_contain_text("Not sent: the session's budget is spent")
    assert page.eval_on_selector("#send-budget", "d => d.open")
    page.wait_for_selector("#transcript li[data-type=input_rejected]")  # the view is at the refusal's seq
    page.fill("#send-output-tokens", "100000")
    page.click("#send button[type=submit]")
    expect_ui(page.locator("#s-notice")).to_contain_text("Budget set and message sent.")
    expect_ui(page.locator("#transcript li[data-type=budget_changed]")).to_contain_text("output_tokens 100000")
    expect_ui(page.locator("#transcript li[data-type=session_ended]").last).to_contain_text("ended: completed",
                                                                                               timeout=60_000)
    expect_ui(page.locator("#s-budget")).to_contain_text("of 100000")
    shot(page, "budget")


def test_a_pending_tool_call_is_approved_from_the_console(stack, keys, page):
    with api(stack, keys["user"]) as user:
        sid = create_session(user, "slowmodel", "needs a yes", require_approval=["bash"])
    sign_in(page, stack, keys["user"], "console-user · user · tenant default")
    open_session(page, stack, sid)
    approve = page.wait_for_selector("#transcript li[data-type=approval_requested] button.approve")
    shot(page, "approval")
    approve.click()
    page.wait_for_selector("#transcript li[data-type=approval_granted]")
    # the second call needs approval too; this time from the keyboard
    expect_ui(page.locator("#transcript li[data-type=approval_requested]")).to_have_count(2, timeout=30_000)
    expect_ui(page.locator("#transcript button.approve")).to_have_count(1)
    page.focus("#transcript button.approve")
    page.keyboard.press("Enter")
    page.wait_for_selector("#transcript li[data-type=session_ended]", timeout=60_000)
    assert page.locator("#transcript button.approve").count() == 0
    assert page.locator("#transcript li[data-type=approval_granted]").count() == 2
    with api(stack, keys["user"]) as user:
        assert wait_ended(user, stack, sid)["ended_reason"] == "completed"


def test_a_pending_call_is_denied_the_session_woken_and_then_cancelled_from_the_console(stack, keys, page):
    with api(stack, keys["user"]) as user:
        sid = create_session(user, "slowmodel", "say no", require_approval=["bash"])
    sign_in(page, stack, keys["user"], "console-user · user · tenant default")
    open_session(page, stack, sid)
    page.click("#transcript li[data-type=approval_requested] button.deny")
    denied = page.wait_for_selector("#transcript li[data-type=approval_denied]")
    assert "user:console-user" in denied.text_content()
    expect_ui(page.locator("#s-notice")).to_contain_text("denied")
    # the call's result beside it: the denial, as an error
    expect_ui(page.locator("#transcript .pair .result.error").first).to_contain_text("denied by user:console-user")
    page.click("#s-actions button[data-act=wake]")
    page.wait_for_selector("#transcript li[data-type=woke]")
    page.click("#s-actions button[data-act=cancel]")
    ended = page.wait_for_selector("#transcript li[data-type=session_ended]", timeout=60_000)
    assert "ended: cancelled" in ended.text_content()
    with api(stack, keys["user"]) as user:
        assert wait_ended(user, stack, sid)["ended_reason"] == "cancelled"


def forge_next_event(tenant: str, last: dict) -> int:
    """Stores an event after `last` whose link does not match it (as a tampered store would),
    straight into Postgres as the service role, in a thread of its own (this one runs the
    page's Playwright loop). Returns its seq."""
    forged = parse_event({**last, "seq": last["seq"] + 1, "event_id": str(uuid.uuid4()), "prev_hash": "0" * 64})

    async def insert() -> None:
        conn = await asyncpg.connect(CommonSettings().postgres_dsn)
        try:
            async with conn.transaction():
                await conn.execute("SELECT set_config('wakeline.tenant', $1, true)", tenant)
                await conn.execute(INSERT_ROWS, *([value] for value in event_row(forged)))
        finally:
            await conn.close()
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, insert()).result(timeout=60)
    return forged.seq


def test_verify_says_where_a_chain_breaks(stack, page):
    tenant = f"console-{uuid.uuid4().hex[:8]}"  # a tenant of its own: the test database outlives runs
    key = stack.api_key("console-verifier", "user", tenant=tenant)
    with api(stack, key) as user:
        sid = create_session(user, "tools3", "to be tampered with")
        wait_ended(user, stack, sid)
        last = user.get(f"/v1/sessions/{sid}/events", params={"limit": 1000}).json()["data"][-1]
    sign_in(page, stack, key, f"console-verifier · user · tenant {tenant}")
    open_session(page, stack, sid)
    page.click("#s-actions button[data-act=verify]")
    expect_ui(page.locator("#s-notice")).to_contain_text(f"Chain intact: {last['seq']} events")
    bad = forge_next_event(tenant, last)
    page.click("#s-actions button[data-act=verify]")
    expect_ui(page.locator("#s-notice")).to_contain_text(f"Chain broken at seq {bad}")
    assert page.get_attribute("#s-notice", "class") == "error"
    shot(page, "verify-broken")


def test_take_over_hand_back_and_fork_from_a_step(stack, keys, page):
    with api(stack, keys["user"]) as user:
        sid = create_session(user, "tools3", "the parent")
        wait_ended(user, stack, sid)
    sign_in(page, stack, keys["user"], "console-user · user · tenant default")
    open_session(page, stack, sid)
    page.wait_for_selector("#transcript li[data-type=session_ended]")
    page.click("#s-actions button[data-act=takeover]")
    taken = page.wait_for_selector("#transcript li[data-type=takeover]")
    assert "human:console-user" in taken.text_content()
    page.click("#s-actions button[data-act=handback]")
    page.wait_for_selector("#transcript li[data-type=handback]")

    at = int(page.get_attribute("#transcript li[data-type=tool_result] >> nth=0", "data-seq"))
    page.click(f"#transcript li[data-seq='{at}'] button.fork")
    page.fill(f"#transcript li[data-seq='{at}'] .fork-form input", "take another road")
    page.press(f"#transcript li[data-seq='{at}'] .fork-form input", "Enter")
    expect_ui(page.locator("#s-meta")).to_contain_text(f"fork of {sid} at {at}")
    fork = page.url.rsplit("/", 1)[1]
    assert fork != sid
    page.wait_for_selector("#transcript li[data-type=user_message]")
    assert "take another road" in page.text_content("#transcript")
    page.click("#s-forks button[data-goto]")  # back to the parent, which now lists the fork
    expect_ui(page.locator(f"#s-forks li[data-node='{sid}'] > strong.here")).to_have_count(1)
    expect_ui(page.locator(f"#s-forks li[data-node='{sid}'] li[data-node='{fork}'] > button")).to_contain_text(
        f"fork at seq {at}")
    expect_ui(page.locator("#s-forks")).to_contain_text(f"fork at seq {at}")
    assert page.get_attribute("#s-forks button[data-goto]", "data-goto") == fork
    assert page.get_attribute("#s-forks .here", "aria-current") == "true"

    # a fork of the fork: the tree is drawn from the root, as deep as the forks go
    page.click(f"#s-forks button[data-goto='{fork}']")
    expect_ui(page.locator("#s-meta")).to_contain_text(f"{fork} ·")  # drawn once its transcript is its own
    page.wait_for_selector("#transcript li[data-type=session_ended]", timeout=60_000)
    deep_at = int(page.get_attribute("#transcript li[data-type=tool_result] >> nth=-1", "data-seq"))
    assert deep_at > at
    page.click(f"#transcript li[data-seq='{deep_at}'] button.fork")
    page.fill(f"#transcript li[data-seq='{deep_at}'] .fork-form input", "and another")
    page.press(f"#transcript li[data-seq='{deep_at}'] .fork-form input", "Enter")
    expect_ui(page.locator("#s-meta")).to_contain_text(f"fork of {fork} at {deep_at}")
    deeper = page.url.rsplit("/", 1)[1]
    path = f"#s-forks li[data-node='{sid}'] li[data-node='{fork}'] li[data-node='{deeper}']"
    expect_ui(page.locator(f"{path} > strong.here")).to_contain_text(f"fork at seq {deep_at}")
    expect_ui(page.locator(f"#s-forks li[data-node='{sid}'] > button[data-goto='{sid}']")).to_have_count(1)
    shot(page, "tree")


def test_the_person_holding_the_hands_answers_a_tool_call_then_hands_back(stack, keys, page):
    with api(stack, keys["user"]) as user:
        sid = create_session(user, "slowmodel", "let me do it")  # 3 s before its first call
        assert user.post(f"/v1/sessions/{sid}/takeover").status_code in (200, 202)
    sign_in(page, stack, keys["user"], "console-user · user · tenant default")
    open_session(page, stack, sid)
    page.wait_for_selector("#transcript .pair .hands-form textarea")
    page.fill("#transcript .pair .hands-form textarea", "one, by hand")
    page.click("#transcript .pair .hands-form button")
    result = page.wait_for_selector("#transcript .pair .result .head")
    assert "human:console-user" in result.text_content()
    assert page.locator("#transcript .hands-form").count() == 0
    page.click("#s-actions button[data-act=handback]")
    page.wait_for_selector("#transcript li[data-type=handback]")
    page.wait_for_selector("#transcript li[data-type=session_ended]", timeout=60_000)
    cells = page.eval_on_selector_all(".pair .result", "cs => cs.map(c => c.textContent)")
    assert "one, by hand" in cells[0] and "runner:" in cells[1], cells


def test_a_message_from_a_stale_view_is_refused_and_the_page_says_why(stack, keys, page):
    with api(stack, keys["user"]) as user:
        sid = create_session(user, "tools3", "first")
        wait_ended(user, stack, sid)
    streams: list[str] = []

    def freeze(route) -> None:  # the first stream reads to the end; later ones never connect
        streams.append(route.request.url)
        if len(streams) == 1:
            route.continue_(url=f"{route.request.url}&until_end=true")
        else:
            route.abort()

    page.route("**/stream?*", freeze)
    sign_in(page, stack, keys["user"], "console-user · user · tenant default")
    open_session(page, stack, sid)
    page.wait_for_selector("#transcript li[data-type=session_ended]")
    expect_ui(page.locator("#s-stream")).to_contain_text("reconnecting")
    with api(stack, keys["user"]) as user:  # someone else moves the session on
        assert user.post(f"/v1/sessions/{sid}/messages", json={"text": "from elsewhere"}).status_code == 202
    page.fill("#send-text", "from the stale page")
    page.click("#send button[type=submit]")
    expect_ui(page.locator("#s-notice")).to_contain_text("the session moved on since this view was drawn")
    assert page.get_attribute("#s-notice", "class") == "error"
    with api(stack, keys["user"]) as user:
        texts = [e["payload"]["text"] for e in user.get(f"/v1/sessions/{sid}/events",
                                                        params={"type": "user_message"}).json()["data"]]
    assert "from the stale page" not in texts


def test_a_session_is_deleted_with_the_keyboard_and_the_page_says_what_delete_means(stack, keys, page):
    with api(stack, keys["user"]) as user:
        sid = create_session(user, "tools3", "to be deleted")
        wait_ended(user, stack, sid)
    sign_in(page, stack, keys["user"], "console-user · user · tenant default")
    row = f"#session-list li[data-session='{sid}']"
    page.focus(row)  # the newest: first in the list
    page.keyboard.press("ArrowDown")
    below = page.evaluate("document.activeElement.dataset.session")
    assert below and below != sid
    page.keyboard.press("ArrowUp")
    assert page.evaluate("document.activeElement.dataset.session") == sid
    page.keyboard.press("Enter")
    expect_ui(page.locator("#s-meta")).to_contain_text(sid)
    page.focus("#back")  # back to the list, by the keyboard too
    page.keyboard.press("Enter")
    page.wait_for_selector(row)
    page.focus(row)
    page.keyboard.press("Delete")
    confirm = page.wait_for_selector(f"{row} .confirm")
    assert "append-only" in confirm.text_content() and "marks the session deleted" in confirm.text_content()
    shot(page, "delete-confirm")
    page.keyboard.press("Escape")  # changed mind: nothing happens
    assert page.locator(f"{row} .confirm").count() == 0
    assert page.evaluate("document.activeElement.dataset.session") == sid
    page.keyboard.press("Delete")
    page.wait_for_selector(f"{row} .confirm")
    page.keyboard.press("Shift+Tab")  # from Keep to Delete
    page.keyboard.press("Enter")
    page.wait_for_selector(row, state="detached")
    with api(stack, keys["user"]) as user:
        assert user.get(f"/v1/sessions/{sid}").status_code == 404


def test_the_audit_form_queries_pages_and_downloads_csv(stack, keys, page):
    with api(stack, keys["user"]) as user:
        sid = create_session(user, "tools3", "for the auditor")
        since = wait_ended(user, stack, sid)["created_at"]  # the database outlives runs: this run's window
    sign_in(page, stack, keys["auditor"], "console-auditor · auditor · tenant default")
    page.click("#nav-audit")
    page.fill("#a-principal", "console-user")
    page.fill("#a-since", since)
    page.fill("#a-type", "user_message")
    page.press("#a-type", "Enter")
    page.wait_for_selector("#a-results tbody tr")
    rows = page.eval_on_selector_all("#a-results tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.textContent))")
    assert rows and all(r[3] == "user_message" and r[4] == "user:console-user" for r in rows), rows
    assert sid in {r[1] for r in rows}
    shot(page, "audit")
    with page.expect_download() as download:
        page.click("#a-csv")
    csv = Path(download.value.path()).read_text().splitlines()
    assert len(csv) == len(rows) + 1 and sid in "\n".join(csv), csv[:3]
    with page.expect_download() as download:
        page.click("#a-jsonl")
    lines = [json.loads(line) for line in Path(download.value.path()).read_text().splitlines()]
    assert [(e["session_id"], str(e["seq"]), e["type"]) for e in lines] == [(r[1], r[2], r[3]) for r in rows]

    page.click("#a-sessions")  # the sessions those events belong to: the same form, another question
    page.wait_for_selector(f"#as-results tbody tr[data-session='{sid}']")
    touched = page.eval_on_selector_all("#as-results tbody tr", CELLS)
    assert {r[0] for r in touched} == {r[1] for r in rows}, (touched, rows)
    assert all(r[2] == "user:console-user" and "user_message" in r[6] for r in touched), touched
    page.set_viewport_size({"width": 380, "height": 900})  # a phone: the tables scroll, the page does not
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    shot(page, "narrow-audit")
    page.click(f"#as-results tr[data-session='{sid}'] button[data-goto]")
    expect_ui(page.locator("#s-meta")).to_contain_text(sid)


def test_the_admin_reads_the_access_log_a_page_at_a_time(stack, keys, page):
    with api(stack, keys["user"]) as user:  # the database outlives runs: this run's window
        since = wait_ended(user, stack, create_session(user, "tools3", "a clock"))["created_at"]
    with api(stack, keys["auditor"]) as auditor:
        for _ in range(52):  # the page shows 50 at a time
            assert auditor.get("/v1/audit/events", params={"type": "woke", "since": since}).status_code == 200
    sign_in(page, stack, keys["admin"], "console-admin · admin · tenant default")
    page.click("#nav-audit")
    page.fill("#al-principal", "console-auditor")
    page.fill("#al-since", since)
    page.press("#al-since", "Enter")
    page.wait_for_selector("#al-results tbody tr")
    expect_ui(page.locator("#al-results tbody tr")).to_have_count(50)
    page.click("#al-more")
    expect_ui(page.locator("#al-results tbody tr")).to_have_count(52)
    logged = page.eval_on_selector_all("#al-results tbody tr", CELLS)
    assert len(logged) == 52 and all(r[2] == "console-auditor" and r[3] == "auditor" for r in logged), logged
    assert all(r[5] == "GET /v1/audit/events" and '"woke"' in r[6] for r in logged), logged
    assert [int(r[0]) for r in logged] == sorted(int(r[0]) for r in logged)
    assert not page.is_visible("#al-more")
    shot(page, "access-log")


class Counter(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        Counter.hits.append(self.path)
        self.send_response(204)
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        pass


def listener(port: int) -> ThreadingHTTPServer:
    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), Counter)
    except OSError as err:
        pytest.fail(f"cannot listen on 127.0.0.1:{port} for the hostile-content test: {err}")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_hostile_content_stays_text_and_reaches_nothing(stack, keys, page):
    Counter.hits = []
    port = free_port()
    servers = [listener(HOSTILE_PORT), listener(port)]
    try:
        probe = httpx.get(f"http://127.0.0.1:{port}/probe")  # the counter counts
        assert probe.status_code == 204 and Counter.hits == ["/probe"]
        Counter.hits = []
        message = (f"<img src=x onerror=\"fetch('http://127.0.0.1:{port}/msg')\">"
                   f"<a href=\"javascript:alert(1)\">msg</a></script><script>fetch('http://127.0.0.1:{port}/m')</script>")
        with api(stack, keys["user"]) as user:
            created = user.post("/v1/sessions", json={
                "message": message, "title": "<b>hostile</b><script>alert(9)</script>",
                "config": {"model": "scripted:hostileconsole"}})
            assert created.status_code == 201, created.text
            sid = created.json()["session_id"]
            wait_ended(user, stack, sid)
        dialogs: list[str] = []
        foreign: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.on("request", lambda r: None if r.url.startswith(stack.url) else foreign.append(r.url))
        sign_in(page, stack, keys["user"], "console-user · user · tenant default")
        page.wait_for_selector(f"#session-list li[data-session='{sid}']")
        open_session(page, stack, sid)
        page.wait_for_selector("#transcript li[data-type=session_ended]")
        entries = page.evaluate("history.length")
        for button in page.query_selector_all("#transcript button.show-all"):
            button.click()
        page.get_by_text("click me").first.click()  # a javascript: link, were it one
        # Not a fixed window: a request this page sends once the click and a frame have had
        # their turn. What the content set off went out before it (the page's events come in
        # order), and a dialog would have held it back until dismissed.
        after = f"{stack.url}/healthz?after-click={uuid.uuid4().hex}"
        with page.expect_request(lambda request: request.url == after):
            page.evaluate(AFTER_A_TURN, after)
        # What escaped first (a page that ran the content may no longer be this page at all).
        assert dialogs == [] and foreign == [] and Counter.hits == [], (dialogs, foreign, Counter.hits)
        assert page.url.endswith(f"/console/#/s/{sid}"), page.url

        text = page.text_content("#transcript")
        assert "<script>fetch(" in text and "onerror=" in text and "javascript:" in text and "<svg" in text
        assert "Approve toolu_forged" in text  # shown as text ...
        assert page.locator("#transcript button.approve").count() == 0  # ... never as a button
        tags = set(page.eval_on_selector_all("#transcript *", "es => es.map(e => e.tagName.toLowerCase())"))
        assert tags <= {"li", "div", "span", "time", "strong", "pre", "details", "summary", "button"}, tags
        handlers = page.eval_on_selector_all(
            "#transcript *",
            "es => es.flatMap(e => [...e.attributes].map(a => a.name)).filter(n => n.startsWith('on'))")
        assert handlers == []
        assert page.text_content("#s-title") == "<b>hostile</b><script>alert(9)</script>"
        assert page.url.endswith(f"/console/#/s/{sid}") and page.evaluate("history.length") == entries
        assert dialogs == [] and foreign == [] and Counter.hits == [], (dialogs, foreign, Counter.hits)
        shot(page, "hostile")
        page.set_viewport_size({"width": 380, "height": 900})  # a phone: nothing wider than the window
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
        shot(page, "narrow")
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def test_the_render_bench_reads_the_pages_own_figures_in_its_short_form(stack, tmp_path):
    """`bench.console_render` end to end (its own gateway and Chromium beside this stack's
    services), on a three-turn session instead of a thousand events. Not a timing test."""
    from bench import console_render

    # in a thread of its own: this one already runs the module's Playwright
    with ThreadPoolExecutor(1) as pool:
        lines = pool.submit(console_render.run, repeats=1, run_dir=tmp_path, policy="tools3",
                            filler="tools3").result(timeout=300)
    by_name = {line["bench"]: line for line in lines}
    assert set(by_name) == {"console_list_ms", "console_transcript_ms"}
    shown, listed = by_name["console_transcript_ms"], by_name["console_list_ms"]
    assert shown["n"] == 1 and shown["events"] >= 12  # the whole session, each event once (checked in measure)
    assert 0 < shown["render_ms_p50"] <= shown["p50"]
    assert listed["n"] == 1 and listed["sessions"] == 20 and 0 <= listed["render_ms_p50"] <= listed["p50"]


# ---- Actions the console wires that the tests above never press ----------------------
# Each drives the page as a person would, then checks what the page shows and what the
# server recorded: the log through the API (or Postgres), never the page's word for it.
import asyncio  # noqa: E402, F811 - the section's own imports (the top may import some too)
import json  # noqa: E402, F811
import concurrent.futures  # noqa: E402, F811
from datetime import UTC, datetime  # noqa: E402, F811

import asyncpg  # noqa: E402, F811

from tests.e2e.stack import sandbox_work  # noqa: E402, F811
from wakeline.runtime.settings import AdminSettings  # noqa: E402, F811

USER = "console-user · user · tenant default"
AUDITOR = "console-auditor · auditor · tenant default"


def events_of(stack, key: str, session_id: str, **params: object) -> list[dict]:
    with api(stack, key) as client:
        response = client.get(f"/v1/sessions/{session_id}/events", params={"limit": 1000, **params})
    assert response.status_code == 200, response.text
    return response.json()["data"]


def test_a_pending_tool_call_is_denied_from_the_console_and_never_runs(stack, keys, page):
    # tools3 writes a.txt, then counts its lines, then lists the files: with the write
    # denied, the list the runner makes afterwards is the proof it never ran.
    with api(stack, keys["user"]) as user:
        sid = create_session(user, "tools3", "write then count", require_approval=["write_file"])
    sign_in(page, stack, keys["user"], USER)
    open_session(page, stack, sid)
    deny = page.wait_for_selector("#transcript li[data-type=approval_requested] button.deny")
    call_id = page.get_attribute("#transcript li[data-type=approval_requested] .approval", "data-approval")
    deny.click()
    denied = page.wait_for_selector("#transcript li[data-type=approval_denied]")
    assert call_id in denied.text_content() and "user:console-user" in denied.text_content()
    expect_ui(page.locator("#s-notice")).to_contain_text("denied")
    assert page.locator("#transcript .approval, #transcript button.approve, #transcript button.deny").count() == 0
    cell = page.locator(f"#transcript .result[data-result-for='{call_id}']")
    expect_ui(cell).to_contain_text("denied by user:console-user")
    assert "error" in cell.get_attribute("class")
    page.wait_for_selector("#transcript li[data-type=session_ended]", timeout=60_000)

    with api(stack, keys["user"]) as user:
        assert wait_ended(user, stack, sid)["ended_reason"] == "completed"
    log = events_of(stack, keys["user"], sid)
    denials = [e for e in log if e["type"] == "approval_denied"]
    assert [(e["payload"]["tool_call_id"], e["actor"]) for e in denials] == [(call_id, "user:console-user")]
    assert not [e for e in log if e["type"] == "approval_granted"]
    results = {e["payload"]["tool_call_id"]: e for e in log if e["type"] == "tool_result"}
    write = results[call_id]
    assert write["actor"] == "user:console-user" and write["payload"]["is_error"]
    assert write["payload"]["error_kind"] == "denied", write
    listing = next(e for e in results.values() if e["payload"]["name"] == "list_files")
    assert listing["actor"].startswith("runner:") and "a.txt" not in listing["payload"]["output"], listing
    assert not (sandbox_work(stack, sid) / "a.txt").exists()


def test_a_running_session_is_cancelled_from_the_console(stack, keys, page):
    # Held at its first call's approval, the session is running for as long as the test needs.
    with api(stack, keys["user"]) as user:
        sid = create_session(user, "slowmodel", "wait for me", require_approval=["bash"])
    sign_in(page, stack, keys["user"], USER)
    open_session(page, stack, sid)
    page.wait_for_selector("#transcript li[data-type=approval_requested] button.approve")
    with api(stack, keys["user"]) as user:
        assert user.get(f"/v1/sessions/{sid}").json()["status"] != "ended"
    page.click("#s-actions button[data-act=cancel]")
    ended = page.wait_for_selector("#transcript li[data-type=session_ended]")
    assert "cancelled" in ended.text_content() and "user:console-user" in ended.text_content()
    expect_ui(page.locator("#s-meta")).to_contain_text("ended")
    # a call of an ended session can no longer be approved: the page offers no button for it
    assert page.locator("#transcript button.approve, #transcript button.deny").count() == 0
    with api(stack, keys["user"]) as user:
        assert wait_ended(user, stack, sid)["ended_reason"] == "cancelled"
    log = events_of(stack, keys["user"], sid)
    ends = [(e["actor"], e["payload"]["reason"]) for e in log if e["type"] == "session_ended"]
    assert ends == [("user:console-user", "cancelled")]
    assert not [e for e in log if e["type"] in ("approval_granted", "tool_result")]


def test_a_session_is_woken_from_the_console(stack, keys, page):
    with api(stack, keys["user"]) as user:
        sid = create_session(user, "tools3", "to be woken")
        wait_ended(user, stack, sid)
    before = [e for e in events_of(stack, keys["user"], sid) if e["type"] == "woke"]
    assert not [e for e in before if e["actor"] == "user:console-user"]
    sign_in(page, stack, keys["user"], USER)
    open_session(page, stack, sid)
    page.wait_for_selector("#transcript li[data-type=session_ended]")
    page.click("#s-actions button[data-act=wake]")
    expect_ui(page.locator("#s-notice")).to_contain_text("wake")
    assert page.get_attribute("#s-notice", "class") != "error"
    woke = page.wait_for_selector("#transcript li[data-type=woke] >> text=user:console-user")
    seq = int(woke.evaluate("e => e.closest('li').dataset.seq"))
    # the page draws the event from the live feed (Kafka); the events API reads Postgres,
    # which has it once the archiver has stored it a moment later
    mine = wait_for(lambda: [e for e in events_of(stack, keys["user"], sid, type="woke")
                             if e["actor"] == "user:console-user"], 30, "the woke event archived", stack)
    assert [(e["seq"], e["payload"]["reason"]) for e in mine] == [(seq, "requested")]


def test_export_html_and_json_from_the_console(stack, keys, page):
    hostile = "<script>alert('x')</script> & <b>bold</b>"
    with api(stack, keys["user"]) as user:
        created = user.post("/v1/sessions", json={"message": hostile, "title": "<i>export</i> me",
                                                   "config": {"model": "scripted:tools3"}})
        assert created.status_code == 201, created.text
        sid = created.json()["session_id"]
        wait_ended(user, stack, sid)
        expected = user.get(f"/v1/sessions/{sid}/transcript", params={"format": "json"}).json()
    sign_in(page, stack, keys["user"], USER)
    open_session(page, stack, sid)
    page.wait_for_selector("#transcript li[data-type=session_ended]")

    with page.expect_download() as download:
        page.click("#s-actions button[data-act=export-html]")
    assert download.value.suggested_filename == f"{sid}.html"
    html = Path(download.value.path()).read_text()
    assert "&lt;script&gt;alert(" in html and "&lt;b&gt;bold&lt;/b&gt;" in html and "&amp;" in html
    assert "<script>alert(" not in html and "<b>bold</b>" not in html and "<i>export</i>" not in html
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>\s*\S", html), "a script with a body in the export"

    with page.expect_download() as download:
        page.click("#s-actions button[data-act=export-json]")
    assert download.value.suggested_filename == f"{sid}.json"
    exported = json.loads(Path(download.value.path()).read_text())
    assert exported == expected
    # ... and it is the session's events (markers aside), each with its seq, type, actor and trust
    log = {e["seq"]: e for e in events_of(stack, keys["user"], sid)}
    assert exported["entries"] and all(
        (x["type"], x["actor"], x["trust"]) == (log[x["seq"]]["type"], log[x["seq"]]["actor"], log[x["seq"]]["trust"])
        for x in exported["entries"])
    assert {x["seq"] for x in exported["entries"]} >= {s for s, e in log.items()
                                                       if e["type"] in ("user_message", "tool_call", "tool_result")}
    assert hostile in [x["text"] for x in exported["entries"] if x["type"] == "user_message"]


def audit_rows(page) -> list[tuple[str, int]]:
    return [(s, int(q)) for s, q in page.eval_on_selector_all(
        "#a-results tbody tr", "rs => rs.map(r => [r.cells[1].textContent, r.cells[2].textContent])")]


def test_the_audit_screen_pages_on_and_downloads_jsonl_equal_to_the_api(stack, keys, page):
    # More than one page (50) of events in a window only this test writes to: four sessions.
    since = datetime.now(UTC).isoformat()
    with api(stack, keys["user"]) as user:
        sids = [create_session(user, "tools3", f"for the audit's pages {n}") for n in range(4)]
        for sid in sids:
            wait_ended(user, stack, sid)
    until = datetime.now(UTC).isoformat()
    window = {"since": since, "until": until}
    with api(stack, keys["auditor"]) as auditor:
        first = auditor.get("/v1/audit/events", params={**window, "limit": 50}).json()
        assert first["count"] == 50 and first["next_cursor"], "the window holds one page only"
        second = auditor.get("/v1/audit/events", params={**window, "limit": 50, "cursor": first["next_cursor"]}).json()
        everything = auditor.get("/v1/audit/events", params={**window, "limit": 1000}).json()["data"]
    assert second["count"] > 0 and len(everything) < 1000
    assert set(sids) <= {e["session_id"] for e in everything}

    sign_in(page, stack, keys["auditor"], AUDITOR)
    page.click("#nav-audit")
    page.fill("#a-since", since)
    page.fill("#a-until", until)
    page.click("#audit-form button[type=submit]")
    expect_ui(page.locator("#a-results tbody tr")).to_have_count(50)
    assert audit_rows(page) == [(e["session_id"], e["seq"]) for e in first["data"]]
    expect_ui(page.locator("#a-notice")).to_contain_text("more on the next page")
    page.click("#a-more")
    expect_ui(page.locator("#a-results tbody tr")).to_have_count(50 + second["count"])
    assert audit_rows(page) == [(e["session_id"], e["seq"]) for e in first["data"] + second["data"]]
    assert page.is_visible("#a-more") == (second["next_cursor"] is not None)

    with page.expect_download() as download:
        page.click("#a-jsonl")
    assert download.value.suggested_filename == "audit-events.jsonl"
    lines = Path(download.value.path()).read_text().splitlines()
    assert [json.loads(line) for line in lines] == everything


def test_the_session_list_is_worked_with_arrow_keys_and_enter(stack, keys, page):
    with api(stack, keys["user"]) as user:
        for n in range(3):
            create_session(user, "tools3", f"for the keyboard {n}")
        listed = [s["session_id"] for s in user.get("/v1/sessions", params={"limit": 20}).json()["data"]]
    sign_in(page, stack, keys["user"], USER)
    page.wait_for_selector(f"#session-list li[data-session='{listed[2]}']")
    rows = page.eval_on_selector_all("#session-list > li", "ls => ls.map(l => l.dataset.session)")
    assert rows == listed, "the list is not the API's, newest first"

    def focused() -> str | None:
        return page.evaluate("document.activeElement.dataset.session || null")

    page.focus(f"#session-list li[data-session='{rows[0]}']")
    page.keyboard.press("ArrowUp")  # the first row has nothing above it
    assert focused() == rows[0]
    page.keyboard.press("ArrowDown")
    assert focused() == rows[1]
    page.keyboard.press("ArrowDown")
    assert focused() == rows[2]
    page.keyboard.press("ArrowUp")
    assert focused() == rows[1]
    page.keyboard.press("Enter")
    page.wait_for_selector("#transcript li[data-type=session_created]")
    assert page.url.endswith(f"/console/#/s/{rows[1]}")
    expect_ui(page.locator("#s-meta")).to_contain_text(rows[1])


def wider_than_the_window(page) -> list[str]:
    """Every element laid out past the window's right edge, except inside a box that scrolls
    or clips sideways (that box is itself checked): what would make the page scroll sideways."""
    return page.eval_on_selector_all("body *", """es => es.filter(e => {
        if (!e.getClientRects().length || e.getBoundingClientRect().right <= window.innerWidth + 1) return false;
        for (let a = e.parentElement; a && a !== document.body; a = a.parentElement)
            if (getComputedStyle(a).overflowX !== "visible") return false;
        return true;
    }).map(e => e.tagName + (e.id ? "#" + e.id : "") + " " + Math.round(e.getBoundingClientRect().right))""")


# A title one long word (a path, as people do write): the row must wrap it, not widen.
TITLE_PATH = "fix/services/gateway/console/render_transcript_of_a_very_long_session_name.js"


def test_a_narrow_window_fits_the_session_list_and_the_audit_screen(stack, keys, page):
    with api(stack, keys["user"]) as user:
        created = user.post("/v1/sessions", json={"message": "narrow", "title": TITLE_PATH,
                                                   "config": {"model": "scripted:tools3"}})
        assert created.status_code == 201, created.text
        sid = created.json()["session_id"]
        since = wait_ended(user, stack, sid)["created_at"]
    page.set_viewport_size({"width": 380, "height": 800})
    sign_in(page, stack, keys["admin"], "console-admin · admin · tenant default")
    page.wait_for_selector(f"#session-list li[data-session='{sid}']")
    assert page.evaluate("window.innerWidth") == 380
    assert wider_than_the_window(page) == []
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    shot(page, "narrow-sessions")
    page.click("#nav-audit")
    page.fill("#a-since", since)
    page.click("#audit-form button[type=submit]")
    page.wait_for_selector(f"#a-results tbody tr >> text={sid}")
    assert wider_than_the_window(page) == []
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")


async def _tamper(session_id: str, seq: int, payload: str | None = None) -> str:
    """As the database owner: the guard trigger of the event's partition off, its payload
    replaced (with `payload`, or its output changed by a word), the trigger on again, in
    one transaction. Returns the payload as it was, so the caller can put it back."""
    conn = await asyncpg.connect(AdminSettings().postgres_admin_dsn, timeout=10)
    try:
        async with conn.transaction():
            await conn.execute("SELECT set_config('wakeline.tenant', 'default', true)")
            await conn.execute("LOCK TABLE ONLY events IN ROW EXCLUSIVE MODE")
            ts = await conn.fetchval("SELECT ts FROM events WHERE session_id = $1 AND seq = $2", session_id, seq)
            partition = await conn.fetchval("SELECT ensure_events_partition($1)", ts)
            guards = [r["tgname"] for r in await conn.fetch(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal AND tgenabled = 'A' "
                "ORDER BY 1", partition)]
            for trigger in guards:
                await conn.execute(f'ALTER TABLE {partition} DISABLE TRIGGER "{trigger}"')
            was = await conn.fetchval(f"SELECT payload::text FROM {partition} WHERE session_id = $1 AND seq = $2",
                                      session_id, seq)
            new = payload if payload is not None else json.dumps({**json.loads(was), "output": "tampered"})
            changed = await conn.execute(f"UPDATE {partition} SET payload = $3::jsonb WHERE session_id = $1 "
                                         "AND seq = $2", session_id, seq, new)
            assert changed == "UPDATE 1"
            for trigger in guards:
                await conn.execute(f'ALTER TABLE {partition} ENABLE ALWAYS TRIGGER "{trigger}"')
        return was
    finally:
        await conn.close()


def tamper(session_id: str, seq: int, payload: str | None = None) -> str:
    """`_tamper` on a thread of its own: Playwright's sync API keeps an event loop running on this one."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(_tamper(session_id, seq, payload))).result()


def test_verify_names_the_seq_and_reason_where_a_tampered_chain_breaks(stack, keys, page):
    with api(stack, keys["user"]) as user:
        sid = create_session(user, "tools3", "to be tampered with")
        wait_ended(user, stack, sid)
        assert user.get(f"/v1/sessions/{sid}/verify").json()["ok"]
    seq = next(e["seq"] for e in events_of(stack, keys["user"], sid) if e["type"] == "tool_result")
    original = tamper(sid, seq)
    try:
        with api(stack, keys["user"]) as user:
            report = user.get(f"/v1/sessions/{sid}/verify").json()
        assert (report["ok"], report["first_bad_seq"]) == (False, seq), report
        assert report["reason"].startswith("hash mismatch"), report
        sign_in(page, stack, keys["user"], USER)
        open_session(page, stack, sid)
        page.wait_for_selector("#transcript li[data-type=session_ended]")
        page.click("#s-actions button[data-act=verify]")
        expect_ui(page.locator("#s-notice")).to_have_text(f"Chain broken at seq {seq}: {report['reason']}")
        assert page.get_attribute("#s-notice", "class") == "error"
        shot(page, "verify-broken")
    finally:  # the test database outlives this run: the chain is put back as it was
        tamper(sid, seq, original)
    with api(stack, keys["user"]) as user:
        assert user.get(f"/v1/sessions/{sid}/verify").json()["ok"]

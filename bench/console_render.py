"""The console's render time in a real browser: the session list, and a 1,000-event transcript.

Debian's Chromium driven by Playwright against a gateway of the running stack (the brain,
runner and archiver `bench/__main__.py` starts, with the bench policies: `wide1000` is 44
steps of ten `list_files` calls, a little over 1,000 events). The figures are the page's
own (`performance.measure` in app.js), read back after each load, not Playwright's: the
page marks when it starts (`loadSessions`, `openSession`) and measures once what it holds
is drawn, with one forced layout at the end so that style and layout are counted.
`list_ms` / `transcript_ms` run from the request to drawn (HTTP and the stream included);
`render_ms` is the page's own time building and appending the DOM.
The list is read with an admin key (the whole tenant) and holds a full page (20): short
sessions are added first where the tenant has fewer.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.harness import summary
from tests.e2e.stack import Stack

CHROMIUM = "/usr/bin/chromium"
POLICIES = Path(__file__).resolve().parent / "policies"
POLICY = "wide1000"
LIST_PAGE = 20  # app.js's PAGE
READ_MEASURE = "name => performance.getEntriesByName(name).map(m => ({ms: m.duration, ...m.detail}))"


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def ended_session(client: httpx.Client, policy: str, title: str, timeout: float = 600) -> dict:
    """A session of `policy` run to its end; its row (with last_seq)."""
    created = client.post("/v1/sessions", json={"message": "list, many times", "title": title,
                                                "config": {"model": f"scripted:{policy}", "max_turns": 100}})
    assert created.status_code == 201, created.text
    sid = created.json()["session_id"]

    def ended() -> dict | None:
        row = client.get(f"/v1/sessions/{sid}").json()
        return row if row["status"] == "ended" else None
    return wait_for(ended, timeout, f"session {sid} to end")


def sessions_to_show(url: str, key: str, policy: str, filler: str) -> dict:
    """A full first page of the list (the console shows LIST_PAGE), topped up with short
    `filler` sessions where the tenant has fewer; then the long session, newest."""
    with httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {key}"}) as client:
        listed = client.get("/v1/sessions", params={"limit": LIST_PAGE}).json()["count"]
        for n in range(LIST_PAGE - 1 - listed):
            ended_session(client, filler, f"filler {n}")
        return ended_session(client, policy, "render bench")


def page_figure(page, name: str, timeout: float = 60) -> dict[str, Any]:
    """The page's newest measure of `name`, waited for (Playwright's evaluate is not bound by
    the console's CSP; the page itself runs no eval)."""
    return wait_for(lambda: (page.evaluate(READ_MEASURE, name) or [None])[-1], timeout, f"measure {name}")


def measure(browser, url: str, key: str, session: dict, repeats: int = 5) -> list[dict]:
    """Loads the list and the transcript `repeats` times each, in fresh pages (nothing cached
    by the page itself; the browser's HTTP cache holds the static files after the first)."""
    lists: list[dict] = []
    transcripts: list[dict] = []
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    try:
        def measured(path: str, mark: str) -> dict[str, Any]:
            """A fresh page at `path`, signed in, and its figure for `mark`."""
            page = context.new_page()
            page.goto(f"{url}/console/{path}")
            page.fill("#key", key)
            page.press("#key", "Enter")
            figure = page_figure(page, mark)
            page.close()
            return figure

        for _ in range(repeats):
            lists.append(measured("", "console:list"))
            transcripts.append(measured(f"#/s/{session['session_id']}", "console:transcript"))
    finally:
        context.close()
    drawn = {t["events"] for t in transcripts}
    assert drawn == {session["last_seq"]}, f"the transcript drew {drawn} events of {session['last_seq']}"
    return [
        {"bench": "console_list_ms", "sessions": lists[0]["sessions"], **summary([x["ms"] for x in lists]),
         "render_ms_p50": summary([x["render_ms"] for x in lists])["p50"]},
        {"bench": "console_transcript_ms", "events": session["last_seq"], **summary([x["ms"] for x in transcripts]),
         "render_ms_p50": summary([x["render_ms"] for x in transcripts])["p50"]},
    ]


def run(repeats: int = 5, run_dir: Path | None = None, policy: str = POLICY, filler: str = "reply") -> list[dict]:
    """Starts a gateway of its own beside the running services, makes the session, measures."""
    from playwright.sync_api import sync_playwright

    stack = Stack(run_dir or Path(tempfile.mkdtemp(prefix="wakeline-bench-console-")))
    try:
        stack.start("gateway-console", kind="gateway")
        stack.wait_gateway()
        key = stack.api_key(principal="bench-console", role="admin")
        session = sessions_to_show(stack.url, key, policy, filler)
        with sync_playwright() as manager:
            browser = manager.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                return measure(browser, stack.url, key, session, repeats)
            finally:
                browser.close()
    finally:
        stack.stop_all()


def standalone(repeats: int = 5) -> list[dict]:
    """`python -m bench.console_render`: the services `run` needs (as `bench/__main__.py`
    starts them), then `run`."""
    run_dir = Path(tempfile.mkdtemp(prefix="wakeline-bench-console-"))
    services = Stack(run_dir)
    try:
        for name in ("archiver", "runner", "brain"):
            services.start(name, WAKELINE_POLICY_DIR=str(POLICIES))
        return run(repeats, run_dir)
    finally:
        services.stop_all()


if __name__ == "__main__":
    for line in standalone():
        print(json.dumps(line))

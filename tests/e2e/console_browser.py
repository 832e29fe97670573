"""What the console's browser tests share: Debian's Chromium under Playwright, a page per
test that fails it on any script error, and signing in.

Chromium is the machine's (`/usr/bin/chromium`); Playwright never downloads one. Without
it (or the `playwright` package) the tests skip, and fail under CI=true. With
`WAKELINE_CONSOLE_SHOTS=<dir>` `shot` saves screenshots there (`docs/console/` is made that way).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.requirements import missing

CHROMIUM = "/usr/bin/chromium"
TIMEOUT_MS = 30_000
SHOTS = os.environ.get("WAKELINE_CONSOLE_SHOTS")


@pytest.fixture(scope="module")
def browser(stack) -> Iterator[object]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as err:
        missing(f"the playwright package is not installed ({err}); `make venv` installs it")
    if not Path(CHROMIUM).exists():
        missing(f"no Chromium at {CHROMIUM}; install Debian's `chromium` package")
    manager = sync_playwright().start()
    try:
        browser = manager.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
    except Exception as err:  # noqa: BLE001 - whatever stops the browser, the test cannot run
        manager.stop()
        missing(f"Chromium at {CHROMIUM} did not start under Playwright: {err}")
    yield browser
    browser.close()
    manager.stop()


@pytest.fixture
def page(browser, stack):
    context = browser.new_context(viewport={"width": 1100, "height": 800}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    yield page
    context.close()
    assert not errors, f"the console threw: {errors}"


def expect_ui(locator):
    """Playwright's `expect`: it polls through selectors, where `wait_for_function` would
    need `eval`, which the console's CSP (rightly) refuses."""
    from playwright.sync_api import expect
    return expect(locator)


def sign_in(page, stack, key: str, expect: str) -> None:
    page.goto(f"{stack.url}/console/")
    page.fill("#key", key)
    page.press("#key", "Enter")
    expect_ui(page.locator("#who")).to_have_text(expect)


def shot(page, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def open_session(page, stack, session_id: str) -> None:
    page.goto(f"{stack.url}/console/#/s/{session_id}")
    page.wait_for_selector("#transcript li[data-type=session_created]")

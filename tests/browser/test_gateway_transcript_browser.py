"""The HTML transcript in a real browser (headless Debian Chromium): hostile content runs nothing.

Each page is loaded from a file and Chromium prints the DOM after scripts had their chance
(`--dump-dom` with a virtual time budget). A control page proves scripts do run in this
setup, so their absence from the transcript means something. Needs `/usr/bin/chromium`
(Debian package `chromium`); skipped without it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


from tests.requirements import require
from wakeline_gateway.transcript.entries import Entry
from wakeline_gateway.transcript.html import CSP, render_html

MARK = "data-pwned"
ATTACKS = [
    f"<script>document.body.setAttribute('{MARK}','script')</script>",
    f"<img src=x onerror=\"document.body.setAttribute('{MARK}','img')\">",
    f"<svg onload=\"document.body.setAttribute('{MARK}','svg')\"></svg>",
    f"</pre></article><script>document.body.setAttribute('{MARK}','breakout')</script>",
    f"\"><iframe srcdoc=\"<script>parent.document.body.setAttribute('{MARK}','iframe')</script>\">",
]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--virtual-time-budget=2000"]


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    require(path, "no chromium on PATH (Debian package `chromium`; make test installs it)")
    return path


def dom_after_load(page: str, tmp_path: Path) -> str:
    target = tmp_path / "page.html"
    target.write_text(page, encoding="utf-8")
    profile = tmp_path / "profile"
    done = subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", "--dump-dom", target.as_uri()],
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def hostile_entries() -> list[Entry]:
    return [Entry(seq=i + 1, type="tool_result", role="tool", actor=f"runner:{attack}", trust="data",
                  ts="2025-01-01T00:00:00+00:00", text=attack, tool_name=attack, tool_call_id=attack,
                  reasoning=(attack,))
            for i, attack in enumerate(ATTACKS)]


def test_control_page_shows_scripts_do_run_here(tmp_path: Path) -> None:
    page = f"<html><body><script>document.body.setAttribute('{MARK}','control')</script></body></html>"
    assert f'{MARK}="control"' in dom_after_load(page, tmp_path)


def test_csp_alone_blocks_an_inline_script(tmp_path: Path) -> None:
    page = (f'<html><head><meta http-equiv="Content-Security-Policy" content="{CSP}"></head><body>'
            f"<script>document.body.setAttribute('{MARK}','csp')</script></body></html>")
    assert MARK + '="' not in dom_after_load(page, tmp_path)


def test_hostile_transcript_runs_nothing_and_shows_the_content_as_text(tmp_path: Path) -> None:
    attack = ATTACKS[0]
    page = render_html({"session_id": attack, "title": attack, "owner": attack}, hostile_entries())
    dom = dom_after_load(page, tmp_path)
    assert MARK + '="' not in dom
    assert "<script" not in dom.lower() and "<img" not in dom.lower() and "<iframe" not in dom.lower()
    assert "&lt;script&gt;document.body.setAttribute" in dom

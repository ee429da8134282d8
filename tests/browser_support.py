"""Headless Chromium for report tests: Debian's /usr/bin/chromium (scripts/setup_browser.sh)
driven by playwright (the Python package only; no browser download)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


@contextmanager
def chromium() -> Iterator[object]:
    """A launched browser; skips the test, saying why, when chromium or playwright is absent."""
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed at /usr/bin/chromium: run scripts/setup_browser.sh")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is missing: pip install -e '.[test]'")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


def open_report(browser, path: Path):
    """Open ``path``; wait until every plotly chart has drawn its SVG. Returns (page,
    console errors/warnings and page errors, URLs requested)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.resolve().as_uri())
    page.wait_for_load_state("load")
    page.wait_for_function(
        "() => { const d = [...document.querySelectorAll('.plotly-graph-div')];"
        " return d.length > 0 && d.every(x => x.querySelector('svg.main-svg')); }", timeout=120_000)
    return page, problems, requests

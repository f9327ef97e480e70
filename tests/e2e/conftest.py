"""Browser tests: the app servers they start keep runs in a temporary store (never the user's cache), and every
test opens its pages the same way (Debian's Chromium with the same flags, a fresh context per visitor, its
JavaScript errors collected): the ``chromium`` and ``pages`` fixtures."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("SHRINKRAY_RUNS_DIR", tempfile.mkdtemp(prefix="shrinkray-e2e-runs-"))

CHROMIUM = "/usr/bin/chromium"
#: No sandbox (containers), no GPU, and nothing that would make Chromium itself call out to the network.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic",
]  # fmt: skip
#: What the app's first page shows once it has drawn.
READY = "text=Load an ONNX model"
#: How long a click may take to start a download: a loaded CI machine may still be drawing the page (the
#: model-set zip timed out at 30 s with a benchmark beside the suite on 2 cores)
DOWNLOAD_MS = 120_000


def _require_browser() -> None:
    missing = []
    if not Path(CHROMIUM).exists():
        missing.append(f"{CHROMIUM} (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright package (pip install -r requirements-dev.txt)")
    if missing:
        message = "browser tests need " + " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def chromium():
    """One headless Chromium per test module (skipped, saying why, without it; a failure in CI)."""
    _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class BrowserPages:
    """Opens pages, each in a fresh browser context (a new visitor), and collects their JavaScript errors."""

    def __init__(self, browser: Any) -> None:
        self.browser = browser
        self.errors: list[str] = []

    def open(self, url: str | None = None, *, width: int = 1440, height: int = 2000, ready: str | None = READY,
             requests: list[str] | None = None, **context: Any) -> Any:  # fmt: skip
        """A page at ``url`` (when given) once ``ready`` shows; ``requests`` collects every URL the context asks
        for (the component's frame too), from the first; ``context``: Playwright's options (color_scheme...)."""
        ctx = self.browser.new_context(viewport={"width": width, "height": height}, **context)
        if requests is not None:
            ctx.on("request", lambda request: requests.append(request.url))
        page = ctx.new_page()
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        if url is not None:
            page.goto(url)
            if ready:
                page.wait_for_selector(ready, timeout=60_000)
        return page


#: True once the app has not been running a script for ``quiet`` ms (polled; a run resets the clock).
_IDLE_FOR = """(quiet) => {
  const app = document.querySelector("[data-testid=stApp]");
  const now = performance.now();
  if (!app || app.dataset.testScriptState !== "notRunning") { window.__shrinkrayBusyAt = now; return false; }
  return now - window.__shrinkrayBusyAt >= quiet;
}"""


def wait_idle(page: Any, quiet_ms: int = 700, timeout_ms: int = 30_000) -> bool:
    """Wait until the app has drawn and stayed idle for ``quiet_ms`` (a page switch or the visitor cookie's
    rerun may start just after a click); False when it never was within ``timeout_ms`` (a page that polls a
    run keeps rerunning): the caller goes on, and its own wait says what did not happen."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.evaluate("() => { window.__shrinkrayBusyAt = performance.now(); }")
    try:
        page.wait_for_function(_IDLE_FOR, arg=quiet_ms, polling=100, timeout=timeout_ms)
    except PlaywrightTimeout:
        return False
    return True


def upload(page: Any, files: Any) -> None:
    """Set the page's file uploader once the app is idle: Streamlit drops a file given while a page switch is
    still drawing (the new page's uploader starts empty), as a person clicking "Model" and dropping a file in
    the same instant would see. ``files``: a path or a list of paths."""
    wait_idle(page)
    paths = [str(f) for f in files] if isinstance(files, list | tuple) else str(files)
    page.locator("input[type=file]").first.set_input_files(paths)


def upload_model(page: Any, model: Any, ready: str = "text=Weight tensors", timeout_ms: int = 60_000) -> None:
    """Upload ``model`` and wait for ``ready``; a file the uploader dropped (given just as a rerun began, the
    visitor cookie's on a busy machine: the uploader then lists no file) is given again, once, as a person
    would drop it again. A file being loaded is waited for, never given twice."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    upload(page, model)
    try:
        page.wait_for_selector(ready, timeout=timeout_ms // 2)
        return
    except PlaywrightTimeout:
        if page.locator("[data-testid=stFileUploaderFile]").count():
            page.wait_for_selector(ready, timeout=timeout_ms)  # it is there, still loading
            return
    upload(page, model)
    page.wait_for_selector(ready, timeout=timeout_ms)


def go_to(page: Any, name: str, ready: str, timeout_ms: int = 30_000) -> None:
    """Click the sidebar's ``name`` page once the app is idle and wait for ``ready``; a click the app dropped (on a
    fresh page, as the visitor cookie's rerun began) is given again, once, as a person would click again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in (1, 2):
        wait_idle(page)
        page.get_by_role("link", name=name).click()
        try:
            page.wait_for_selector(ready, timeout=timeout_ms // 2 if attempt == 1 else timeout_ms)
            return
        except PlaywrightTimeout:
            if attempt == 2:
                raise


@pytest.fixture
def pages(chromium) -> BrowserPages:
    """``pages.open(url, ...)`` for a test; assert ``not pages.errors`` at its end."""
    return BrowserPages(chromium)


@pytest.fixture(scope="module")
def module_pages(chromium) -> BrowserPages:
    """The same for a page a whole module shares (its fixture asserts no errors when the module ends)."""
    return BrowserPages(chromium)

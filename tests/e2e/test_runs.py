"""Runs in a real browser: a run's address reopens it after a reload and in a fresh browser context (same
cards, a working download), a bad run link says why, and Shrink settings survive a page change."""

from __future__ import annotations

import re

from helpers import press

import shrinkray
from shrinkray.graph.validate import validate
from tests.e2e.conftest import DOWNLOAD_MS, go_to, upload_model
from tests.e2e.test_browser import ROOT, SHOTS, _no_traceback, app_url  # noqa: F401

SAMPLE = ROOT / "sample_models" / "cnn.onnx"


def _cards(page) -> list[str]:
    """Each variant card's heading and its metric values, as the page shows them."""
    return [page.locator("h3").nth(i).inner_text() for i in range(page.locator("h3").count())] + sorted(
        page.locator("[data-testid='stMetricValue']").all_inner_texts()
    )


def _wait_results(page, metrics: int = 1) -> None:
    """Until the results are drawn: the reports' buttons and (at least) this many metric values."""
    page.wait_for_selector("text=Reports", timeout=240_000)
    page.wait_for_function(f"document.querySelectorAll(\"[data-testid='stMetricValue']\").length >= {metrics}",
                           timeout=60_000)  # fmt: skip
    page.wait_for_timeout(500)


def open_measurement_settings(page) -> None:
    """Expand "Measurement settings" (again, if a rerun redrew it closed) until its toggles show."""
    toggle = page.get_by_text("Measure latency")
    for _ in range(5):
        if toggle.is_visible():
            return
        page.get_by_text("Measurement settings", exact=True).first.click()  # a redraw may hold stale copies
        page.wait_for_timeout(1000)
    assert toggle.is_visible()


def start_small_run(page, url: str) -> None:
    """Load the CNN sample, keep two quick methods (weights-int8, float16), turn latency off (these tests are about
    keeping and sharing runs, not timing) and press Shrink and measure."""
    page.goto(url)
    page.wait_for_selector("text=Load an ONNX model", timeout=60_000)
    upload_model(page, str(SAMPLE))
    page.get_by_role("link", name="Shrink").click()
    page.wait_for_selector("text=Shrink and measure", timeout=30_000)
    for name in ("Dynamic INT8 (ONNX Runtime)", "N-value palettization"):
        page.get_by_role("button", name=f"Remove {name}").click()
        page.wait_for_timeout(400)
    page.wait_for_timeout(1000)
    open_measurement_settings(page)
    page.get_by_text("Measure latency").click()
    page.wait_for_timeout(400)
    press(page, "Shrink and measure")


def test_a_run_is_kept_and_reopens_from_its_address(app_url, pages, tmp_path):  # noqa: F811
    SHOTS.mkdir(exist_ok=True)
    page = pages.open(accept_downloads=True)
    start_small_run(page, app_url)
    page.wait_for_function("new URLSearchParams(location.search).get('run')", timeout=30_000)
    run_id = re.search(r"[?&]run=([A-Za-z0-9_-]+)", page.url).group(1)
    assert len(run_id) == 22
    page.reload()  # mid-run (or just after): the run goes on, and the page finds it again by its address
    page.wait_for_selector("text=Shrink and measure", timeout=60_000)
    assert f"run={run_id}" in page.url
    _wait_results(page)
    first = _cards(page)
    assert "weights-int8" in first and "float16" in first, first
    metrics = page.locator("[data-testid='stMetricValue']").count()
    page.screenshot(path=str(SHOTS / "runs_1_done.png"))
    _no_traceback(page)

    # Settings survive a page change (two methods, latency off)
    page.get_by_role("link", name="Compare").click()
    page.wait_for_selector("text=Inputs used for parity", timeout=60_000)
    page.wait_for_function("new URLSearchParams(location.search).get('run')", timeout=30_000)
    assert f"run={run_id}" in page.url
    page.get_by_role("link", name="Shrink").click()
    page.wait_for_selector("text=Shrink and measure", timeout=30_000)
    page.wait_for_function("new URLSearchParams(location.search).get('run')", timeout=30_000)
    assert f"run={run_id}" in page.url
    assert page.get_by_role("button", name="Remove Dynamic INT8 (ONNX Runtime)").count() == 0
    assert page.get_by_role("button", name="Remove Weights-only 8-bit").count() == 1
    assert page.get_by_role("button", name="Remove float16 weights").count() == 1
    open_measurement_settings(page)
    latency = page.locator("label", has_text="Measure latency").locator("input")
    assert not latency.is_checked()
    _wait_results(page, metrics)
    assert _cards(page) == first  # and the results are still there
    page.screenshot(path=str(SHOTS / "runs_2_settings_kept.png"))

    # Reload: the same run, the same cards
    page.reload()
    _wait_results(page, metrics)
    assert _cards(page) == first
    assert f"run={run_id}" in page.url
    page.screenshot(path=str(SHOTS / "runs_3_reloaded.png"))
    page.go_back()  # one press leaves the page: the run id replaced the address, it added no entry
    page.wait_for_selector("text=Inputs used for parity", timeout=60_000)
    assert "/compare" in page.url

    # A fresh browser context (a colleague): the same cards, and the download works
    fresh = pages.open(f"{app_url}/shrink?run={run_id}", accept_downloads=True, ready=None)
    _wait_results(fresh, metrics)
    assert _cards(fresh) == first
    assert "cnn" in fresh.locator("[data-testid='stSidebar']").inner_text()
    with fresh.expect_download(timeout=DOWNLOAD_MS) as info:
        fresh.get_by_role("button", name="Download cnn.weights-int8.onnx").click()
    target = tmp_path / "from_link.onnx"
    info.value.save_as(str(target))
    validate(shrinkray.load(target).model)
    assert target.stat().st_size < 0.35 * SAMPLE.stat().st_size
    fresh.screenshot(path=str(SHOTS / "runs_4_fresh_context.png"))
    _no_traceback(fresh)

    # Bad links: a malformed id and an unknown one each get a message, never a traceback
    fresh.goto(f"{app_url}/shrink?run=not-a-run")
    fresh.wait_for_selector("text=This run link cannot be opened", timeout=60_000)
    assert "not valid" in fresh.inner_text("body")
    fresh.screenshot(path=str(SHOTS / "runs_5_bad_link.png"))
    fresh.goto(f"{app_url}/shrink?run={'A' * 22}")
    fresh.wait_for_selector("text=No run with this id is kept here", timeout=60_000)
    _no_traceback(fresh)
    assert not pages.errors, pages.errors


def test_past_runs_lists_this_browsers_run_after_a_reload_and_opens_it(app_url, pages):  # noqa: F811
    """Issue 29: a browser's past runs (its signed cookie), reopened from the list after a reload; another
    browser's list does not show them."""
    SHOTS.mkdir(exist_ok=True)
    page = pages.open()
    start_small_run(page, app_url)
    _wait_results(page)
    page.reload()
    page.wait_for_selector("text=Reports", timeout=60_000)
    page.get_by_role("link", name="Past runs").click()
    page.wait_for_selector("text=Finished", timeout=30_000)
    page.screenshot(path=str(SHOTS / "past_runs.png"), full_page=True)
    assert page.get_by_text("cnn", exact=False).count() >= 1
    assert page.get_by_text("as served", exact=False).count() >= 1  # its headline
    _no_traceback(page)
    with page.context.expect_page() as opened:  # the run opens in a tab of its own
        page.get_by_role("link", name="Open").first.click()
    run_page = opened.value
    _wait_results(run_page)
    assert "run=" in run_page.url

    other = pages.open(app_url)  # another browser: its own list, empty
    go_to(other, "Past runs", "text=No runs from this browser yet")
    assert not pages.errors, pages.errors

"""The headline card in a real browser: its four parts, the connection picker, the line to copy, and the one
page to send, at 1440 and 800 px, light and dark (screenshots in tests/e2e/screenshots/)."""

from __future__ import annotations

import pytest
from helpers import run_sample_in_app

from tests.e2e.test_browser import ROOT, SHOTS, _no_traceback, app_url  # noqa: F401 - app_url is a fixture


@pytest.mark.parametrize(("width", "scheme"), [(1440, "light"), (800, "dark")])
def test_the_headline_card_after_a_run(app_url, pages, width, scheme, tmp_path):  # noqa: F811
    page = pages.open(app_url, width=width, height=1800, color_scheme=scheme, accept_downloads=True)
    run_sample_in_app(page, ROOT / "sample_models" / "cnn.onnx")
    body = page.inner_text("body")
    for part in ("Size as served (brotli)", "Download on 4G", "Saved a year", "Its verdict"):
        assert part in body, part
    page.get_by_text("3G (1.6 Mbps, 300 ms)").click()
    page.wait_for_selector("text=Download on 3G", timeout=30_000)
    page.get_by_text("Copy as text").click()
    line = page.locator("[data-testid='stCode']").inner_text()
    assert "on 3G (1.6 Mbps, 300 ms)" in line and "a year less at 100,000 downloads a month" in line
    page.wait_for_timeout(1000)
    page.get_by_text("Its verdict").scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"headline-card-{width}-{scheme}.png"))
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")  # nothing wider than the page
    with page.expect_download() as info:
        page.get_by_role("button", name="One page to send").click()
    saved = tmp_path / "one.html"
    info.value.save_as(str(saved))
    assert "<script" not in saved.read_text() and "on 3G" in saved.read_text()
    _no_traceback(page)
    assert not pages.errors, pages.errors

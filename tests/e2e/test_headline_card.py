"""The headline card in a real browser: its four parts, the connection picker, the line to copy, and the one
page to send, with what changes below it, at 1440 and 800 px, light and dark (screenshots in tests/e2e/screenshots/)."""

from __future__ import annotations

import pytest
from helpers import run_sample_in_app

from tests.e2e.conftest import DOWNLOAD_MS
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
    # what changes: the recommended variant's worst inputs beside the original's, nothing wider than its section
    changes = page.locator(".st-key-what-changes")
    changes.locator(".sr-ex").first.wait_for(timeout=30_000)
    assert changes.locator(".sr-ex").count() >= 1 and "Original" in changes.inner_text()
    picked = page.locator(".st-key-what-changes-picker").evaluate(
        "e => e.textContent + ' ' + [...e.querySelectorAll('input')].map(i => i.value).join(' ')")
    assert "(recommended)" in picked, picked
    assert changes.evaluate("""s => [...s.querySelectorAll('*')].every(e => e.getBoundingClientRect().right
                                    <= s.getBoundingClientRect().right + 1)""")  # fmt: skip
    changes.scroll_into_view_if_needed()
    changes.screenshot(path=str(SHOTS / f"what-changes-{width}-{scheme}.png"))
    with page.expect_download(timeout=DOWNLOAD_MS) as info:
        page.get_by_role("button", name="One page to send").click()
    saved = tmp_path / "one.html"
    info.value.save_as(str(saved))
    assert "<script" not in saved.read_text() and "on 3G" in saved.read_text()
    assert 'class="sr-ex"' in saved.read_text()  # the worst inputs, on the page to send too
    _no_traceback(page)
    assert not pages.errors, pages.errors

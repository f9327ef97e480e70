"""Issue 29's demo path on an uploaded built model (not a sample), in a real browser: the headline card with its
four parts, what changes, the model run in the browser, the run reopened from Past runs after a reload and, by
its link, in another browser with its in-browser timings, and the one page to send, readable without scripts."""

from __future__ import annotations

from tests.e2e.conftest import DOWNLOAD_MS
from tests.e2e.test_browser import _no_traceback, app_url  # noqa: F401 - app_url is a fixture
from tests.e2e.test_in_browser import WANTED, _dynamic_axes_model, _run_in_browser, _shot_panel, _shrink


def test_the_demo_path_on_an_uploaded_model(app_url, pages, tmp_path):  # noqa: F811
    tagger = _dynamic_axes_model(tmp_path / "tagger.onnx")
    page = pages.open(app_url, height=2400, accept_downloads=True)
    _shrink(page, tagger, latency=False)
    body = page.inner_text("body")
    for part in ("Size as served (brotli)", "Download on 4G", "Saved a year", "Its verdict"):
        assert part in body, part
    changes = page.locator(".st-key-what-changes")
    changes.locator(".sr-ex").first.wait_for(timeout=30_000)
    assert "Original" in changes.inner_text() and "top class" in changes.inner_text().lower()
    run_url = page.url
    assert "run=" in run_url

    _run_in_browser(page, expected=1 + len(WANTED))
    measured = page.get_by_text("Measured in:").first.inner_text()

    page.reload()  # the run is this browser's: Past runs lists it and opens it
    page.wait_for_selector("text=In your browser", timeout=60_000)
    page.get_by_role("link", name="Past runs").click()
    page.wait_for_selector("text=Finished", timeout=30_000)
    assert page.get_by_text("tagger", exact=False).count() >= 1
    with page.context.expect_page() as opened:
        page.get_by_role("link", name="Open").first.click()
    opened.value.wait_for_selector("text=Reports", timeout=60_000)

    elsewhere = pages.open(run_url.replace("/shrink?", "/compare?"), height=2400, ready="text=In your browser")
    elsewhere.get_by_text("Measured in:").first.wait_for(timeout=60_000)  # the timings kept with the run
    assert elsewhere.get_by_text("Measured in:").first.inner_text() == measured
    _shot_panel(elsewhere, "demo_path_other_browser")

    page.get_by_role("link", name="Shrink").click()
    page.wait_for_selector("text=Reports", timeout=60_000)
    with page.expect_download(timeout=DOWNLOAD_MS) as info:
        page.get_by_role("button", name="One page to send").click()
    saved = tmp_path / "one.html"
    info.value.save_as(str(saved))
    text = saved.read_text()
    assert "<script" not in text and "as served" in text and 'class="sr-ex"' in text
    offline = pages.open(saved.as_uri(), ready="text=as served")  # opens from the file alone
    assert "as served" in offline.inner_text("body")
    _no_traceback(page)
    assert not pages.errors, pages.errors

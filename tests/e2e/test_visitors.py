"""The visitor's cookie in a real browser (issue 27): a fresh browser gets a signed cookie on its first page, keeps
it across reloads, a tampered one is replaced, two browsers are two visitors, and the run a browser's very first
tab starts is recorded as that cookie's visitor (the component sent the cookie back to the session)."""

from __future__ import annotations

import os
import re

from shrinkray.runs.store import RunStore
from shrinkray.runs.visitors import COOKIE, VisitorKeys
from tests.e2e.test_browser import _no_traceback, app_url  # noqa: F401
from tests.e2e.test_runs import start_small_run


def _cookie(page) -> str:
    """The visitor cookie the page's browser holds, once it is there."""
    page.wait_for_function(f"document.cookie.includes('{COOKIE}=')", timeout=60_000)
    return next(c["value"] for c in page.context.cookies() if c["name"] == COOKIE)


def test_each_browser_gets_a_signed_cookie_and_its_first_run_is_recorded_as_that_visitor(app_url, pages):  # noqa: F811
    keys = VisitorKeys(os.environ["SHRINKRAY_RUNS_DIR"])
    first = pages.open(app_url)
    cookie = _cookie(first)
    visitor_id = keys.verify(cookie)
    assert visitor_id is not None
    first.reload()
    first.wait_for_selector("text=Load an ONNX model", timeout=60_000)
    assert _cookie(first) == cookie  # kept, not replaced

    second = pages.open(app_url)
    assert keys.verify(_cookie(second)) not in (None, visitor_id)  # another browser, another visitor

    tampered = pages.open()
    tampered.context.add_cookies([{"name": COOKIE, "value": cookie[:-2] + "xx", "url": app_url}])
    tampered.goto(app_url)
    tampered.wait_for_selector("text=Load an ONNX model", timeout=60_000)
    tampered.wait_for_function(f"!document.cookie.includes('{cookie[:-2]}xx')", timeout=60_000)
    assert keys.verify(_cookie(tampered)) not in (None, visitor_id)

    fresh = pages.open()  # a browser's very first tab: it connected with no cookie at all
    start_small_run(fresh, app_url)
    fresh.wait_for_function("new URLSearchParams(location.search).get('run')", timeout=30_000)
    run_id = re.search(r"[?&]run=([A-Za-z0-9_-]+)", fresh.url).group(1)
    fresh_id = keys.verify(_cookie(fresh))
    assert RunStore(os.environ["SHRINKRAY_RUNS_DIR"]).get(run_id).visitor == f"cookie:{fresh_id}"
    _no_traceback(fresh)
    assert not pages.errors, pages.errors

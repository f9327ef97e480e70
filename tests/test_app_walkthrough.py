"""Defects a new user met in the walkthrough (Chromium, 1280 px), each pinned by an AppTest: a shared Pricing
link's download count shown as it was sent, and model names shown literally on every page.

AppTest tier (Streamlit's script runner, no browser): runs go to a temporary store, never the user's cache.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("SHRINKRAY_RUNS_DIR", tempfile.mkdtemp(prefix="shrinkray-apptest-runs-"))

from streamlit.testing.v1 import AppTest  # noqa: E402

pytestmark = pytest.mark.app
ROOT = Path(__file__).resolve().parent.parent


def _pricing(params: dict[str, str]) -> AppTest:
    """The Pricing page opened from a link (the query is read on the page's first run)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    at.switch_page("app_pages/pricing.py")
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


# ---------------------------------------------------------------- 3. a shared link's downloads


@pytest.mark.parametrize("count", [2_500_000, 250_000, 1_234, 5_000_000_000])
def test_a_linked_download_count_is_shown_as_sent_on_the_slider_and_the_field(count):
    """A link with 2,500,000 downloads opened with the slider at 2,000,000: the page must show the user's
    number, never a round number near it (nor the slider's end for a count beyond it)."""
    at = _pricing({"provider": "gcs", "downloads": str(count), "sizes": "a=50MiB,b=10MiB"})
    assert at.select_slider(key="pricing:downloads_preset").value == count
    assert at.number_input(key="pricing:downloads").value == count
    assert any(f"at {count:,} downloads a month" in m.value for m in at.markdown)
    assert f"downloads={count}" in at.code[-1].value  # the link written back holds the same count
    assert not at.error, [e.value for e in at.error]


def test_the_slider_still_sets_round_numbers_and_keeps_a_typed_count():
    at = _pricing({"provider": "gcs", "downloads": "2500000", "sizes": "a=50MiB"})
    at.select_slider(key="pricing:downloads_preset").set_value(200_000).run()
    assert at.number_input(key="pricing:downloads").value == 200_000
    at.number_input(key="pricing:downloads").set_value(2_500_000).run()
    assert "2,500,000" in at.select_slider(key="pricing:downloads_preset").options  # still the count in force...
    at.number_input(key="pricing:downloads").set_value(5_000_000).run()
    assert "2,500,000" not in at.select_slider(key="pricing:downloads_preset").options  # ...until it is not
    at.number_input(key="pricing:downloads").set_value(333_333).run()
    assert not at.exception, at.exception
    assert at.select_slider(key="pricing:downloads_preset").value == 333_333
    assert any("at 333,333 downloads a month" in m.value for m in at.markdown)

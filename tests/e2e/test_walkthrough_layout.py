"""Layout at a laptop's width (1280 px, the app's sidebar open) in Chromium: the result cards' tables fit the page.

The walkthrough found the parity table of a card scrolling sideways once its "Decided by" text was long (a
detection head's "3 of 12 boxes moved..."). A small page shows a comparison whose outputs carry long names and
long decisions through the app's own card code (app_ui.results.show_results), and every element that could
scroll sideways is measured. Screenshot: tests/e2e/screenshots/layout_parity_table.png (look at it).
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.e2e.test_browser import ROOT, SHOTS, _free_port, app_url, stop_app  # noqa: F401

LONG_DECISION = ("3 of 12 boxes moved (IoU 0.87 < 0.9 for the best match of each), 1 of 12 boxes lost above "
                 "score 0.25, class kept on the 8 boxes matched; top-left corner off by up to 4.5 px")  # fmt: skip

#: Elements that scroll sideways: wider content than their box, and free to scroll.
OVERFLOWING = """() => [...document.querySelectorAll('[data-testid=stMain] *')].filter(e => {
    const style = getComputedStyle(e);
    return ['auto', 'scroll'].includes(style.overflowX) && e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0;
}).map(e => (e.getAttribute('data-testid') || e.className || e.tagName) + ' ' + e.scrollWidth + '>' + e.clientWidth)"""


@pytest.fixture(scope="module")
def cards_url(chromium, tmp_path_factory):
    """A page showing the result cards of a comparison with long output names and decisions."""
    from shrinkray.io.files import load
    from shrinkray.measure.results import CompareSettings
    from shrinkray.pipeline.compare import compare

    settings = CompareSettings(methods=[("weights-int8", {}), ("float16", {})], latency=False, brotli_quality=5)
    c = compare(load(ROOT / "sample_models" / "mlp.onnx"), settings)
    for result in c.variants:
        for output in result.parity.outputs:
            output.name = "/model.22/detect/head/boxes_and_scores_concat_output_0"
            output.decisions = LONG_DECISION
            output.reason = LONG_DECISION if not output.passed else output.reason
    folder = tmp_path_factory.mktemp("layout")
    (folder / "comparison.pkl").write_bytes(pickle.dumps(c))
    script = folder / "cards.py"
    script.write_text(
        "import pickle, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "import streamlit as st\n"
        "st.set_page_config(layout='wide')\n"
        "st.sidebar.markdown('**Current model**')  # the app's sidebar takes its share of the width\n"
        "from app_ui.results import show_results\n"
        f"show_results(pickle.loads(open({str(folder / 'comparison.pkl')!r}, 'rb').read()))\n"
    )
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port), "--server.headless", "true",
         "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2):
                break
        except OSError:
            time.sleep(0.5)
    yield url
    stop_app(proc)


def test_parity_tables_fit_the_page_at_1280_px(cards_url, pages):
    SHOTS.mkdir(exist_ok=True)
    pg = pages.open(cards_url, width=1280, height=900, ready="text=Reports")
    for expander in pg.get_by_text("Parity per output").all():
        expander.click()
    pg.wait_for_timeout(1500)
    tables = pg.locator("[data-testid=stExpanderDetails]")
    assert tables.count() >= 2 and LONG_DECISION[:40] in pg.inner_text("body")  # shown, whole, as text
    overflowing = pg.evaluate(OVERFLOWING)
    pg.get_by_text("Parity per output").first.scroll_into_view_if_needed()
    pg.screenshot(path=str(SHOTS / "layout_parity_table.png"))
    assert not overflowing, overflowing
    assert pg.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    assert "Traceback" not in pg.inner_text("body")
    assert not pages.errors, pages.errors


PRICING_LINK = ("/pricing?v=1&provider=gcs&downloads=2500000&delivery=brotli&growth=0&currency=$"
                "&sizes=original=522573/486137/484830,weights-int4=104442/93994/92230,dynamic-int8=139728/99804/95732,"
                "weights-int8=152617/145726/140454,palettize=522573/211799/193690,float16=265734/246778/244905"
                "&marks=dynamic-int8~fails%20parity%2B4.03x%20slower,weights-int4~recommended")  # fmt: skip


def test_a_shared_pricing_link_fits_the_page_at_1280_px_and_shows_its_count(app_url, pages):  # noqa: F811
    """The walkthrough's shared link: the cost table scrolled sideways (its last column and the standing
    "fails parity, 4.03x slower" cut off), and the slider showed 2,000,000 for the link's 2,500,000."""
    SHOTS.mkdir(exist_ok=True)
    pg = pages.open(app_url + PRICING_LINK, width=1280, height=900, ready="text=Cost per variant")
    pg.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length >= 1", timeout=60_000)
    pg.wait_for_timeout(1500)
    assert "at 2,500,000 downloads a month" in pg.inner_text("body")
    pg.wait_for_selector("[data-testid=stSliderThumbValue]", timeout=60_000)
    assert pg.inner_text("[data-testid=stSliderThumbValue]") == "2,500,000"
    pg.locator("[data-testid=stDataFrame]").last.scroll_into_view_if_needed()
    pg.wait_for_timeout(800)
    pg.screenshot(path=str(SHOTS / "layout_pricing_table.png"))
    overflowing = pg.evaluate(OVERFLOWING)
    assert not overflowing, overflowing
    assert "Traceback" not in pg.inner_text("body")
    assert not pages.errors, pages.errors

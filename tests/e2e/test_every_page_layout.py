"""Every page at 800 and 1440 px, light and dark, after a real run: nothing wider than the page, no element
scrolling sideways, no text cut off with an ellipsis, no console errors (a stakeholder's demo, issue 29).

One run of the cnn sample; the other three visitors open its run link (runs are kept and addressable), then
each visits the Model, Shrink, Compare, Pricing and Past runs pages. Screenshots: tests/e2e/screenshots/page-*.png.
"""

from __future__ import annotations

import pytest
from helpers import run_sample_in_app, whole_page_screenshot

from tests.e2e.test_browser import ROOT, SHOTS, _no_traceback, app_url  # noqa: F401 - app_url is a fixture

#: Text an element cuts off: it is set to end in an ellipsis and its content is wider than its box.
CUT = """() => [...document.querySelectorAll('[data-testid=stMain] *')].filter(e => {
    const style = getComputedStyle(e);
    return style.textOverflow === 'ellipsis' && e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0
        && e.offsetParent !== null;
}).map(e => (e.getAttribute('data-testid') || e.tagName) + ': ' + e.innerText.slice(0, 60))"""
#: Elements that scroll sideways (wider content than their box, free to scroll), plotly's own drag layers and
#: data grids aside: a grid wider than a narrow page keeps a scroll bar of its own and its first columns in view
#: (the Pricing grid puts the money first for that reason).
SIDEWAYS = """() => [...document.querySelectorAll('[data-testid=stMain] *')].filter(e => {
    const style = getComputedStyle(e);
    return ['auto', 'scroll'].includes(style.overflowX) && e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0
        && !e.closest('.js-plotly-plot') && !e.closest('[data-testid=stDataFrameGlideDataEditor]')
        && !(e.className || '').toString().includes('dvn-scroller');
}).map(e => (e.getAttribute('data-testid') || e.className || e.tagName) + ' ' + e.scrollWidth + '>' + e.clientWidth)"""
PAGES = ("Model", "Shrink", "Compare", "Pricing", "Past runs")


@pytest.fixture(scope="module")
def run_link(app_url, module_pages):  # noqa: F811
    """The address of a finished run of the cnn sample (weights-int8 and float16)."""
    page = module_pages.open(app_url, width=1440, height=1600)
    run_sample_in_app(page, ROOT / "sample_models" / "cnn.onnx",
                      remove=("Dynamic INT8 (ONNX Runtime)", "N-value palettization", "Weights-only 4-bit"))
    assert "run=" in page.url
    yield page.url
    page.context.close()


@pytest.mark.parametrize(("width", "scheme"), [(1440, "light"), (1440, "dark"), (800, "light"), (800, "dark")])
def test_every_page_fits_and_reads_without_errors(run_link, pages, width, scheme):
    console: list[str] = []
    page = pages.open(run_link, width=width, height=1400, color_scheme=scheme, ready="text=Reports")
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    problems = []
    for name in PAGES:
        page.get_by_role("link", name=name).click()  # the link opened Shrink, but Model comes first
        page.wait_for_timeout(2500)  # charts and cards drawn
        _no_traceback(page)
        whole_page_screenshot(page, SHOTS / f"page-{name.lower().replace(' ', '-')}-{width}-{scheme}.png")
        if not page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"):
            problems.append(f"{name}: the page is wider than the window")
        problems += [f"{name}: scrolls sideways: {e}" for e in page.evaluate(SIDEWAYS)]
        problems += [f"{name}: cut off: {e}" for e in page.evaluate(CUT)]
    assert not problems, "\n".join(problems)
    assert not console, console
    assert not pages.errors, pages.errors

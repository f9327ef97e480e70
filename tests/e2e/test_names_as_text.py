"""Names never become links, in a real browser (issue 27): only a browser shows what Streamlit's autolinker does.

Streamlit 1.67 linked ``https\\:\\/\\/evil.example`` (escapes and all) in st.table cells, captions and metric
values; AppTest sees only the Markdown source (tests/app/test_names_as_text.py). A model whose input, output,
weights, batch dimension and an op domain are URLs is uploaded; the Model page and the sidebar must hold no link
to it, and each name must read as the model spells it. Screenshot: tests/e2e/screenshots/names_as_text.png.
"""

from __future__ import annotations

import onnx

from tests.app.test_names_as_text import NAMES, url_model
from tests.e2e.conftest import upload
from tests.e2e.test_browser import SHOTS, _no_traceback, app_url  # noqa: F401

LINKS_TO_EVIL = """() => Array.from(document.querySelectorAll('[data-testid=stApp] a'))
    .map(a => a.getAttribute('href') || '').filter(href => /evil/i.test(href))"""


def test_a_model_whose_names_are_urls_shows_no_link(app_url, pages, tmp_path):  # noqa: F811
    SHOTS.mkdir(exist_ok=True)
    path = tmp_path / "names.onnx"
    onnx.save(url_model(), str(path))
    pg = pages.open(app_url, width=1280, height=1600)
    upload(pg, str(path))
    pg.wait_for_selector("text=Weight tensors", timeout=60_000)
    pg.wait_for_timeout(1500)
    pg.screenshot(path=str(SHOTS / "names_as_text.png"), full_page=True)
    assert pg.evaluate(LINKS_TO_EVIL) == []
    table = pg.inner_text("[data-testid=stTable]").replace("\u2060", "")
    assert NAMES["x"] in table and NAMES["y"] in table  # readable as the model spells them
    assert "www.evil.example 1" in pg.inner_text("[data-testid=stMetric]:has-text('Opset')").replace("\u2060", "")
    _no_traceback(pg)
    assert not pages.errors, pages.errors

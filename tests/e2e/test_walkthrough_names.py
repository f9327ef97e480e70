"""A model whose file name looks like Markdown and HTML is shown literally on every page, in a real browser.

AppTest sees the Markdown source each element gets (tests/test_app_walkthrough.py); only a browser shows what a
user sees. The file is uploaded through the real file input (a file name cannot hold "/", so the link has none),
shrunk, compared and priced; on each page no link, bold text, HTML element or formula may come from its name,
and the name must be readable as it was typed. Screenshots: tests/e2e/screenshots/names_*.png (look at them).
"""

from __future__ import annotations

import shutil

from helpers import press

from tests.e2e.conftest import upload
from tests.e2e.test_browser import ROOT, SHOTS, _no_traceback, app_url  # noqa: F401

STEM = "[click](http:x) **bold** <b>x<b> $x$ :red[r]"

#: Elements the name would have made if a renderer had acted on it.
ACTED = """() => {
    const main = document.querySelector('[data-testid=stApp]');
    const found = [];
    main.querySelectorAll('a').forEach(a => { if ((a.getAttribute('href') || '').includes('http:x')) found.push('link'); });
    main.querySelectorAll('strong, b').forEach(e => { if (/^(bold|x)$/.test(e.textContent.trim())) found.push('bold ' + e.textContent); });
    if (main.querySelector('.katex, math')) found.push('formula');
    main.querySelectorAll('span').forEach(e => { if (e.textContent === 'r' && e.style.color) found.push('colour'); });
    return found;
}"""


def _check(pg, name: str) -> None:
    pg.wait_for_timeout(1500)
    pg.screenshot(path=str(SHOTS / f"names_{name}.png"))
    assert pg.evaluate(ACTED) == [], name
    assert STEM in pg.inner_text("body"), name  # shown as typed
    _no_traceback(pg)


def test_a_model_named_like_markdown_shows_literally_on_every_page(app_url, pages, tmp_path):  # noqa: F811
    SHOTS.mkdir(exist_ok=True)
    model = tmp_path / f"{STEM}.onnx"
    shutil.copyfile(ROOT / "sample_models" / "mlp.onnx", model)
    pg = pages.open(app_url, width=1280, height=900)
    upload(pg, str(model))
    pg.wait_for_selector("text=Weight tensors", timeout=60_000)
    _check(pg, "1_model")

    pg.get_by_role("link", name="Shrink").click()
    pg.wait_for_selector("text=Shrink and measure", timeout=30_000)
    press(pg, "Shrink and measure")  # every default method: each card carries the name in its download
    pg.wait_for_selector("text=Reports", timeout=300_000)
    _check(pg, "2_shrink")

    pg.get_by_role("link", name="Compare").click()
    pg.wait_for_selector("text=Inputs used for parity", timeout=60_000)
    _check(pg, "3_compare")

    pg.get_by_role("link", name="Pricing").click()
    pg.wait_for_selector("text=Cost per variant", timeout=60_000)
    _check(pg, "4_pricing")
    assert not pages.errors, pages.errors

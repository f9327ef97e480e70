"""The one page to send prints to a single page, and reads without scripts (JavaScript off)."""

from __future__ import annotations

import re

import pytest

import shrinkray
from shrinkray.measure.results import CompareSettings
from shrinkray.pipeline.compare import compare
from shrinkray.report.one_page import to_one_page

SHOTS = __import__("pathlib").Path(__file__).resolve().parent / "screenshots"


@pytest.mark.parametrize("paper", ["A4", "Letter"])
def test_the_one_page_prints_to_one_page_without_scripts(chromium, tmp_path, paper):
    from helpers import sample_path

    methods = [("weights-int8", {}), ("float16", {}), ("palettize", {}), ("weights-int4", {})]
    c = compare(shrinkray.load(sample_path("transformer")), CompareSettings(methods=methods, latency=False))
    path = tmp_path / "one.html"
    path.write_text(to_one_page(c), encoding="utf-8")
    ctx = chromium.new_context(java_script_enabled=False, viewport={"width": 900, "height": 1200})
    page = ctx.new_page()
    page.goto(path.as_uri())
    assert page.locator(".card").is_visible()
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"one-page-{paper}.png"), full_page=True)
    pdf = page.pdf(format=paper)
    assert len(re.findall(rb"/Type\s*/Page(?!s)", pdf)) == 1
    ctx.close()

"""The one page to send prints to a single page, and reads without scripts (JavaScript off)."""

from __future__ import annotations

import re

import pytest

import shrinkray
from shrinkray.measure.results import CompareSettings
from shrinkray.pipeline.compare import compare
from shrinkray.report.one_page import to_one_page

SHOTS = __import__("pathlib").Path(__file__).resolve().parent / "screenshots"


@pytest.mark.parametrize(("paper", "sample"), [("A4", "transformer"), ("Letter", "transformer"), ("Letter", "mlp")])
def test_the_one_page_prints_to_one_page_without_scripts(chromium, tmp_path, paper, sample):
    """With what changes on it: the transformer's hidden states as values, the mlp's two class outputs as
    their top classes."""
    from helpers import sample_path

    methods = [("weights-int8", {}), ("float16", {}), ("palettize", {}), ("weights-int4", {})]
    c = compare(shrinkray.load(sample_path(sample)), CompareSettings(methods=methods, latency=False))
    path = tmp_path / "one.html"
    path.write_text(to_one_page(c), encoding="utf-8")
    ctx = chromium.new_context(java_script_enabled=False, viewport={"width": 900, "height": 1200})
    page = ctx.new_page()
    page.goto(path.as_uri())
    assert page.locator(".card").is_visible()
    SHOTS.mkdir(exist_ok=True)
    assert page.locator(".sr-changes").count() >= 1  # the worst inputs
    page.screenshot(path=str(SHOTS / f"one-page-{paper}-{sample}.png"), full_page=True)
    pdf = page.pdf(format=paper)
    assert len(re.findall(rb"/Type\s*/Page(?!s)", pdf)) == 1
    ctx.close()

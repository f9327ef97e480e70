"""The one page to send: no scripts, the headline, size / wait / cost per file, what changes."""

from __future__ import annotations

import copy
import re
from datetime import date
from decimal import Decimal

import pytest

import shrinkray
from shrinkray import pricing
from shrinkray.measure.results import CompareSettings
from shrinkray.measure.waits import download_seconds, get_connection
from shrinkray.pipeline.compare import compare
from shrinkray.report.one_page import to_one_page
from shrinkray.units import format_bytes, format_seconds
from shrinkray.verdict import verdict_of
from shrinkray.verdict.headline import headline_of


@pytest.fixture(scope="module")
def cnn():
    from helpers import sample_path

    methods = [("weights-int8", {}), ("float16", {}), ("palettize", {})]
    return compare(shrinkray.load(sample_path("cnn")), CompareSettings(methods=methods, latency=False))


def test_the_page_has_no_scripts_and_quotes_the_headline(cnn):
    page = to_one_page(cnn, today=date(2026, 11, 28))
    assert "<script" not in page.lower() and "http-equiv" not in page.lower() and "src=" not in page
    h = headline_of(cnn)
    assert f"{h.model} → {h.variant}" in page and h.verdict_sentence in page
    assert f"{format_seconds(h.wait.variant_s)} instead of {format_seconds(h.wait.original_s)}" in page
    assert pricing.format_money(h.saving_per_year, h.currency) in page and "2026-11-28" in page


def test_every_made_variant_has_its_size_wait_cost_and_verdict(cnn):
    page = to_one_page(cnn)
    rows = re.findall(r"<tr><td><code>([^<]+)</code></td><td class=\"n\">([^<]+)</td>", page)
    assert [k for k, _ in rows][0] == "original" and {k for k, _ in rows} == {"original", *(v.key for v in cnn.variants)}
    sizes = {k: s for k, s in rows}
    for r in cnn.all:
        assert sizes[r.key] == format_bytes(r.sizes.brotli)
        for cid in ("3g", "4g", "cable"):
            assert format_seconds(download_seconds(r.sizes.brotli, get_connection(cid))) in page
    for r in cnn.variants:
        assert verdict_of(r).label in page
    widths = [float(w) for w in re.findall(r'class="bar[^"]*" style="width:([0-9.]+)%"', page)]
    assert widths[0] == 100.0 and all(0 < w < 100 for w in widths[1:])  # the original is the largest here


def test_what_changes_lists_each_output_of_the_recommended_variant(cnn):
    page = to_one_page(cnn)
    h = headline_of(cnn)
    for o in verdict_of(cnn.get(h.variant)).outputs:
        assert o.sentence in page


def test_the_pricing_and_connection_given_are_used(cnn):
    choice = pricing.PricingChoice(pricing.get_provider("s3"), Decimal(1_000_000), "gzip")
    page = to_one_page(cnn, choice, "fibre")
    assert "Size as served (gzip)" in page and "1,000,000 downloads a month" in page and "fibre" in page


def test_with_nothing_to_recommend_the_page_says_keep_the_original(cnn):
    broken = copy.deepcopy(cnn)
    for r in broken.variants:
        r.error = "Could not run the variant: test"
    page = to_one_page(broken)
    assert "Keep the original" in page and "What changes" not in page


def test_the_foot_names_the_inputs_in_one_clause(cnn):
    """The page must print on one sheet: its foot names what the inputs were (the first clause of the note), while
    the verdict sentence above says how many decisions it rests on; the whole note is in the other reports."""
    first, *rest = cnn.input_note.split("; ")
    assert rest  # the note goes on: decisions, held-back inputs
    page = to_one_page(cnn, today=date(2026, 11, 28))
    assert f"Inputs: {first}. " in page.replace("&#x27;", "'") and rest[-1] not in page

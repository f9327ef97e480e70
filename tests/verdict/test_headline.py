"""The headline: size as served, the wait on a connection, money a year and the verdict, the same everywhere."""

from __future__ import annotations

import copy
from decimal import Decimal

import pytest

import shrinkray
from shrinkray import pricing
from shrinkray.measure.results import CompareSettings
from shrinkray.measure.waits import connections, download_seconds, get_connection
from shrinkray.pipeline.compare import compare
from shrinkray.report import formats as report
from shrinkray.verdict import verdict_of
from shrinkray.verdict.advice import recommended
from shrinkray.verdict.headline import DEFAULT_DOWNLOADS, default_pricing, headline_of


@pytest.fixture(scope="module")
def cnn():
    from helpers import sample_path

    methods = [("weights-int8", {}), ("float16", {})]
    return compare(shrinkray.load(sample_path("cnn")), CompareSettings(methods=methods, latency=False))


def test_the_headline_quotes_the_recommended_variant_in_four_parts(cnn):
    h = headline_of(cnn)
    best = recommended(cnn, "brotli")
    assert best is not None and h.variant == best.key
    assert h.original_bytes == cnn.original.sizes.brotli and h.variant_bytes == best.sizes.brotli
    assert 0 < h.reduction < 1
    assert [w.connection.id for w in h.waits] == [c.id for c in connections()]
    for w in h.waits:
        assert w.original_s == pytest.approx(download_seconds(h.original_bytes, w.connection))
        assert w.variant_s == pytest.approx(download_seconds(h.variant_bytes, w.connection))
        assert w.speedup > 1
    costs = {vc.key: vc for vc in pricing.comparison_costs(cnn, default_pricing())}
    assert h.saving_per_year == costs[best.key].saving.per_year > 0
    assert h.verdict_sentence == verdict_of(best).sentence and h.verdict_label == "Passes"
    text = h.text()
    assert h.size_text() in text and h.wait.sentence() in text and h.money_text() in text and h.verdict_sentence in text
    assert f"{int(DEFAULT_DOWNLOADS):,} downloads a month" in text and "on 4G (9 Mbps, 170 ms)" in text


def test_the_pricing_and_connection_chosen_are_the_ones_quoted(cnn):
    choice = pricing.PricingChoice(pricing.get_provider("s3"), Decimal(2_000_000), "gzip")
    h = headline_of(cnn, choice, "3g")
    assert h.delivery == "gzip" and h.original_bytes == cnn.original.sizes.gzip
    assert h.wait.connection == get_connection("3g") and "on 3G" in h.text()
    assert "2,000,000 downloads a month on " + choice.provider.name in h.money_text()
    assert h.saving_per_year > headline_of(cnn).saving_per_year  # 20x the downloads


def test_with_no_variant_to_recommend_the_headline_keeps_the_original_and_says_why(cnn):
    broken = copy.deepcopy(cnn)
    for r in broken.variants:
        r.error = "Could not run the variant: test"
    h = headline_of(broken)
    assert h.variant is None and h.saving_per_year is None and h.money_text() == ""
    assert h.text().startswith(f"{broken.name}: keep the original") and h.reason and h.reason in h.text()


def test_every_report_carries_the_same_headline(cnn):
    line = headline_of(cnn).text()
    assert report.to_json(cnn)["headline"]["text"] == line
    assert line in report.to_text(cnn)
    assert line in report.to_markdown(cnn).replace("\\", "")
    html = report.to_html(cnn)
    assert '<p class="headline">' in html and headline_of(cnn).verdict_sentence.split(":")[0] in html


def test_with_browser_runs_the_headline_says_when_the_model_is_ready(cnn):
    from shrinkray.measure.browser import BrowserRun

    with_runs = copy.deepcopy(cnn)
    best = recommended(with_runs, "brotli")
    with_runs.browser = [BrowserRun("original", session_ms=900.0, first_run_ms=300.0),
                         BrowserRun(best.key, session_ms=400.0, first_run_ms=200.0)]  # fmt: skip
    h = headline_of(with_runs)
    assert h.original_ready_s == pytest.approx(h.wait.original_s + 1.2)
    assert h.variant_ready_s == pytest.approx(h.wait.variant_s + 0.6)
    assert h.ready_text() in h.text() and "on 4G (download, load and first run in the browser)" in h.ready_text()
    assert headline_of(cnn).ready_text() == ""  # no browser runs: no claim
    with_runs.browser[1].error = "did not load"
    assert headline_of(with_runs).variant_ready_s is None

"""One run, one answer: the verdict sentence of each variant reads the same in the CLI's text, the Markdown,
HTML, JSON and CSV reports, the advice and the app's result card; none of them judges or words it again."""

from __future__ import annotations

import csv
import io
import json
import pickle
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))


def _show(path: str) -> None:
    import pickle

    from app_ui.results import show_results

    with open(path, "rb") as fh:
        show_results(pickle.load(fh))


@pytest.fixture(scope="module", params=["mlp", "decoder"])
def comparison(request):
    """The mlp with every default method: some pass, weights-int4 fails (and held-out judging applies); a
    decoder LM built in tests/lm_models.py, judged by what it generates (float16 passes, 4-bit fails)."""
    from helpers import cached_sample
    from lm_models import decoder_lm

    from shrinkray.measure.results import CompareSettings
    from shrinkray.pipeline.compare import compare

    if request.param == "decoder":
        return compare(decoder_lm("cached"), CompareSettings(latency=False, brotli_quality=1,
                                                             methods=[("float16", {}), ("weights-int4", {})]))  # fmt: skip
    return compare(cached_sample("mlp"), CompareSettings(latency=False, brotli_quality=1))


def test_every_surface_shows_the_same_sentence(comparison, tmp_path):
    from shrinkray.report import formats as report
    from shrinkray.verdict import verdict_of
    from shrinkray.verdict.advice import advise

    sentences = {r.key: verdict_of(r).sentence for r in comparison.variants}
    statuses = {verdict_of(r).status for r in comparison.variants}
    assert "pass" in statuses and len(statuses) >= 2, sentences  # the test sees more than one kind of verdict
    text = report.to_text(comparison)
    markdown = report.to_markdown(comparison)
    html = report.to_html(comparison)
    data = json.loads(report.to_json_text(comparison))
    rows = {row["key"]: row for row in csv.DictReader(io.StringIO(report.to_csv(comparison)))}
    for key, sentence in sentences.items():
        assert f"- {key}: {sentence}" in text
        assert report._md(sentence) in markdown, key
        assert report._h(sentence) in html, key
        assert next(v for v in data["variants"] if v["key"] == key)["verdict"]["sentence"] == sentence
        assert rows[key]["verdict_sentence"] == sentence
    advice = " ".join(a.text for a in advise(comparison))
    judged = [s for k, s in sentences.items() if not s.startswith("Passes")]
    assert judged and all(s in advice for s in judged)  # the advice quotes the failing ones, never rewords them

    path = tmp_path / "comparison.pkl"
    path.write_bytes(pickle.dumps(comparison))
    at = AppTest.from_function(_show, args=(str(path),), default_timeout=120).run()
    assert not at.exception, at.exception
    page = "\n".join(str(e.value) for e in at.markdown)
    from shrinkray.text_safety import streamlit_markdown as md

    for key, sentence in sentences.items():
        assert md(sentence) in page, (key, sentence)
    labels = [m.value for m in at.metric if m.label == "Verdict"]
    assert sorted(labels) == sorted(verdict_of(r).label for r in comparison.variants)


def test_the_headline_card_shows_the_four_parts_and_the_line_to_copy(comparison, tmp_path):
    from shrinkray.verdict.headline import headline_of

    path = tmp_path / "comparison.pkl"
    path.write_bytes(pickle.dumps(comparison))
    at = AppTest.from_function(_show, args=(str(path),), default_timeout=120).run()
    assert not at.exception, at.exception
    h = headline_of(comparison)  # nothing set on the Pricing page: its defaults
    metrics = {m.label: m for m in at.metric}
    from shrinkray.units import format_bytes

    assert metrics["Size as served (brotli)"].value == format_bytes(h.variant_bytes)
    assert metrics["Download on 4G"].delta.endswith("faster than " + h.wait.sentence().split("instead of ")[1].split(" (")[0])
    assert metrics["Saved a year"].value.replace(",", "") == f"${h.saving_per_year:.2f}"
    assert metrics["Its verdict"].value == h.verdict_label
    assert [c.value for c in at.code] == [h.text()]
    at.radio(key="headline:connection").set_value("3g").run()
    assert "Download on 3G" in {m.label for m in at.metric} and "on 3G (1.6 Mbps, 300 ms)" in at.code[0].value


def test_the_headline_card_png_is_offered_beside_the_one_page(comparison, tmp_path):
    path = tmp_path / "comparison.pkl"
    path.write_bytes(pickle.dumps(comparison))
    at = AppTest.from_function(_show, args=(str(path),), default_timeout=120).run()
    assert not at.exception, at.exception
    labels = [b.label for b in at.get("download_button")]
    assert labels.index("Headline card (PNG)") == labels.index("One page to send") + 1, labels


def test_downloads_take_transformers_js_names_when_asked(comparison, tmp_path):
    path = tmp_path / "comparison.pkl"
    path.write_bytes(pickle.dumps(comparison))
    at = AppTest.from_function(_show, args=(str(path),), default_timeout=120).run()
    assert not at.exception, at.exception
    labels = [b.label for b in at.get("download_button") if b.label.startswith("Download ")]
    from shrinkray.text_safety import streamlit_markdown as md

    assert f"Download {md(comparison.name + '.float16.onnx')}" in labels, labels
    at.radio(key="downloads:naming").set_value("transformers.js").run()
    labels = [b.label for b in at.get("download_button") if b.label.startswith("Download ")]
    assert f"Download {md('model_fp16.onnx')}" in labels and f"Download {md('model_q4.onnx')}" in labels, labels

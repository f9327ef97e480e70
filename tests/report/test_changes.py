"""What changes in the reports: the CLI's text (the worst input per output), Markdown, HTML and the one page,
model text escaped everywhere (issue 29, item 2)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from shrinkray.measure.examples import Box, Example, OutputExamples
from shrinkray.report import changes
from shrinkray.report import formats as report
from shrinkray.report.one_page import to_one_page

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def comparison():
    from helpers import cached_sample

    from shrinkray.measure.results import CompareSettings
    from shrinkray.pipeline.compare import compare

    c = compare(cached_sample("cnn"), CompareSettings(methods=[("weights-int8", {})], latency=False, brotli_quality=1))
    text = f"ab{HOSTILE}"
    line = OutputExamples("rec", "scores", "text", "characters changed in the decoded line (edit distance)", [
        Example(2, "input 3", 1.0, True, text, "abc", [[2, len(text)]], [[2, 3]]),
        Example(0, "input 1", 0.0, False, "same", "same"),
    ], inputs=2, changed=1)  # fmt: skip
    boxes = OutputExamples("output0", "detections", "boxes", "boxes moved, lost or new", [
        Example(1, "input 2", 1.3, True, original_boxes=[Box(10, 10, 50, 40, 1, 0.9, "moved"), Box(60, 60, 90, 90)],
                variant_boxes=[Box(20, 10, 60, 40, 1, 0.88, "moved"), Box(60, 60, 90, 90)], frame=[100, 100],
                image='data:image/png;base64,AAAA" onerror="alert(1)'),
    ], inputs=3, changed=1)  # fmt: skip
    c.variants[0].examples += [line, boxes]
    return c


def test_the_cli_text_has_the_worst_input_of_each_output(comparison):
    text = report.to_text(comparison)
    assert "What changes (the worst input per output; differing characters in [brackets]):" in text
    first = comparison.variants[0].examples[0]
    assert f"- weights-int8 · {changes.worst_line(first)}" in text
    assert first.output == "scores" and "top class" in changes.worst_line(first)
    assert f'- weights-int8 · rec: input 3: "ab[{HOSTILE}]" → "ab[c]"' in text
    assert "- weights-int8 · output0: input 2: 1 moved (1 of 2 boxes kept)" in text


def test_html_marks_the_characters_and_escapes_model_text(comparison):
    for page in (report.to_html(comparison), to_one_page(comparison)):
        assert f"ab<mark>{changes._h(HOSTILE)}</mark>" in page
        assert HOSTILE not in page and 'onerror="alert(1)' not in page  # a stored image that is not an image: dropped
        assert 'class="sr-box moved"' in page and "left:10.00%;top:10.00%;width:40.00%;height:30.00%" in page
    assert "<script" not in to_one_page(comparison)


def test_markdown_lists_the_worst_inputs(comparison):
    md = report.to_markdown(comparison)
    assert "What changes (the inputs where it differs most from the original, worst first):" in md
    assert "- input 3: original “ab**\\<script\\>alert(1)\\</script\\>**”, `weights-int8` “ab**c**”" in md


def test_json_keeps_the_examples_without_pictures(comparison):
    data = report.to_json(comparison)
    variant = next(v for v in data["variants"] if v["key"] == "weights-int8")
    shown = {oe["output"]: oe for oe in variant["what_changes"]}
    assert shown["rec"]["examples"][0]["variant_text"] == "abc"
    assert all("image" not in e for oe in variant["what_changes"] for e in oe["examples"])


def test_segments_cut_text_at_its_marks():
    assert changes.segments("abcdef", [[1, 3], [4, 9]]) == [("a", False), ("bc", True), ("d", False), ("ef", True)]
    assert changes.segments("abc", [[2, 1], [5, 6]]) == [("abc", False)]
    assert changes.marked_html("", []) == "<i>(empty)</i>"


def _waveform() -> OutputExamples:
    low = [[-0.5, 0.5]] * 40
    loud = [[-0.5, 0.5]] * 10 + [[-0.8, 0.8]] * 10 + [[-0.5, 0.5]] * 20
    e = Example(1, "input 2", 0.04, False, max_abs_diff=0.3, cosine=0.98, original_wave=low, variant_wave=loud)
    return OutputExamples("clean", "continuous", "waveform", "RMS error relative to the output's range", [e], 3)


def test_a_waveform_is_drawn_without_scripts_the_original_under_the_variant():
    import base64
    import re

    html_text = changes.examples_html(_waveform(), "float16")
    images = re.findall(r'<img class="sr-wave" alt="[^"]*" src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)">', html_text)
    assert len(images) == 2 and "<script" not in html_text
    original, variant = (base64.b64decode(i).decode() for i in images)
    assert original.count("<polygon") == 1 and variant.count("<polygon") == 2  # the original's outline under it
    assert "<script" not in original + variant
    assert "max abs diff 0.3" in html_text and "cosine 0.980000" in html_text
    assert "waveform · 3 inputs" in changes.summary(_waveform())
    words = changes.example_words(_waveform(), _waveform().examples[0])
    assert "max abs diff 0.3" in words and "cosine 0.980000" in words  # the CLI and Markdown say the numbers


def test_a_mask_is_drawn_as_two_pictures_with_its_numbers():
    import numpy as np

    from shrinkray.measure.what_changes import mask_picture

    picture = mask_picture(np.linspace(0, 1, 64 * 40).reshape(64, 40))
    e = Example(0, "input 1", 0.02, False, max_abs_diff=0.4, cosine=0.99, original_mask=picture, variant_mask=picture)
    oe = OutputExamples("gains", "continuous", "mask", "RMS error", [e], 2)
    html_text = changes.examples_html(oe, "weights-int8")
    assert html_text.count('<img class="sr-mask" alt="mask" src="data:image/png;base64,') == 2
    assert "max abs diff 0.4" in html_text and "mask · 2 inputs" in changes.summary(oe)
    forged = Example(0, "input 1", 0.02, False, original_mask='x" onerror="alert(1)', variant_mask="")
    assert "onerror" not in changes.examples_html(OutputExamples("g", "continuous", "mask", "RMS", [forged], 1), "v")

"""shrinkray.text_safety: one escaping function per renderer, and every report format on a hostile model."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from hostile.build_corpus import INJECTIONS, injection_model

import shrinkray
from shrinkray.measure.results import CompareSettings
from shrinkray.pipeline.compare import compare
from shrinkray.report import formats as report
from shrinkray.text_safety import (
    WORD_JOINER,
    csv_cell,
    markdown_code,
    markdown_text,
    one_line,
    plotly_label,
    streamlit_markdown,
    terminal,
    visible,
)

#: CommonMark: a backslash before ASCII punctuation shows that character.
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def unescape(markdown: str) -> str:
    return _ESCAPE.sub(r"\1", markdown)


# --------------------------------------------------------------------------- each renderer


@pytest.mark.parametrize("text", [*INJECTIONS.values(), "a\\b", "plain text: 1.5 (ok)", "", "` ``x`` `"])
def test_streamlit_markdown_shows_the_text_itself(text):
    escaped = streamlit_markdown(text)
    assert unescape(escaped).replace(WORD_JOINER, "") == one_line(text)  # the joiner has no width: not seen
    for active in ("](", "![", "<", "://", "www.", ":red[", "$", "`", "\x1b"):
        assert active not in escaped.replace("\\" + active[0], "")


#: What Streamlit's Markdown links on its own once escapes are read (seen in Chromium with Streamlit 1.67):
#: http(s)://, www. and e-mail addresses, in any case.
LINKABLE = re.compile(r"(?i)(https?://|www\.|[\w.+-]@[\w-]+\.)")


@pytest.mark.parametrize("text", [
    "see https://evil.example/x", "www.evil.example", "WWW.EVIL.EXAMPLE", "HTTPS://EVIL.EXAMPLE", "mail a@evil.example",
    "[x](http://evil.example)", "<https://evil.example>", "x&#64;evil.example", "http://a https://b www.c d@e.f",
])  # fmt: skip
def test_streamlit_markdown_leaves_nothing_to_autolink(text):
    """Streamlit autolinks after reading escapes (``https\\:\\/\\/x`` still became a link): what it reads must hold
    no URL or address, only the text with an invisible word joiner inside each."""
    escaped = streamlit_markdown(text)
    assert not LINKABLE.search(unescape(escaped)), escaped
    assert unescape(escaped).replace(WORD_JOINER, "") == one_line(text)


def test_streamlit_markdown_keeps_ordinary_messages_readable():
    message = "Loading model.onnx failed: the bytes are not a valid protobuf (it may be truncated)."
    assert streamlit_markdown(message) == message
    assert streamlit_markdown("# title") == "\\# title"
    assert streamlit_markdown("1. first") == "1\\. first"
    assert streamlit_markdown("two\nlines") == "two lines"


@pytest.mark.parametrize("text", INJECTIONS.values())
def test_plotly_labels_are_entity_escaped(text):
    label = plotly_label(text)
    assert "<" not in label and ">" not in label and "\x1b" not in label
    assert label.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&") == visible(text)


@pytest.mark.parametrize("text", [*INJECTIONS.values(), "features [4, 64] float32", "a | b", "cost $5 or $6"])
def test_markdown_report_text(text):
    escaped = markdown_text(text)
    assert unescape(escaped) == one_line(text)
    assert not re.search(r"(?<!\\)(<|\]\(|\$|\||://)", escaped), escaped
    assert "www.evil" not in escaped


def test_markdown_report_text_stays_readable():
    assert markdown_text("features [4, 64] float32, input_ids") == "features [4, 64] float32, input_ids"


@pytest.mark.parametrize(
    ("name", "code"), [("w1", "`w1`"), ("a`b", "``a`b``"), ("``x", "``` ``x ```"), ("a|b", "`a\\|b`")]
)
def test_markdown_code_fences_outlast_the_name(name, code):
    assert markdown_code(name) == code


@pytest.mark.parametrize(
    ("cell", "safe"),
    [
        ('=HYPERLINK("https://evil.example","x")', '\'=HYPERLINK("https://evil.example","x")'),
        ("+1+2", "'+1+2"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("  =1", "'  =1"),
        ("\t=1", "\\x09=1"),  # the tab is shown escaped, so the cell starts with a backslash
        ("-0.5", "-0.5"),
        ("1e-3", "1e-3"),
        ("weights-int8", "weights-int8"),
    ],
)
def test_csv_cells_are_never_formulas(cell, safe):
    assert csv_cell(cell) == safe


def test_terminal_shows_control_characters_escaped_and_keeps_lines():
    text = terminal("a\x1b[2Jb\x07\nc\u202ed\x9b")
    assert text == "a\\x1b[2Jb\\x07\nc\\u202ed\\x9b"


# --------------------------------------------------------------------------- every report format


@pytest.fixture(scope="module")
def hostile():
    loaded = shrinkray.load(injection_model().SerializeToString(), name=INJECTIONS["markdown_image"])
    settings = CompareSettings(methods=[("weights-int8", {}), ("palettize", {})], latency=False, culprits=False)
    return compare(loaded, settings)


def test_markdown_report_is_inert(hostile):
    md = report.to_markdown(hostile)
    prose = re.sub(r"(`+).*?\1", "", md)  # code spans show their content literally
    for name in (INJECTIONS["markdown_image"], INJECTIONS["html"]):
        assert name not in prose
    assert not re.search(r"(?<!\\)(<script|<img|<a |\]\(https)", prose)
    assert "://evil" not in prose


def test_csv_report_cells_are_never_formulas(hostile):
    rows = list(csv.reader(io.StringIO(report.to_csv(hostile))))
    for row in rows:
        for cell in row:
            if cell.lstrip(" ").startswith(("=", "+", "@", "\t", "\r")):
                pytest.fail(f"formula cell {cell!r}")
            if cell.startswith("-"):
                float(cell)  # only numbers may start with a minus


def test_html_report_is_inert(hostile):
    page = report.to_html(hostile)
    assert "<script>alert(1)" not in page
    assert '<img src="https://evil' not in page and '<a href="https://evil' not in page
    assert "&lt;script&gt;alert(1)" in page  # shown, escaped


def test_json_report_keeps_names_exactly(hostile):
    data = json.loads(report.to_json_text(hostile))
    assert data["model"]["inputs"][0]["name"] == INJECTIONS["html"]
    assert data["model"]["outputs"][0]["name"] == INJECTIONS["markdown_image"]


def test_terminal_table_is_inert(hostile):
    text = terminal(report.to_text(hostile))
    assert "\x1b" not in text and "\x07" not in text

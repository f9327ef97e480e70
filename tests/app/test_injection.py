"""Model-controlled names render inert in every page: no link, image, HTML, colour or formula forms.

The model (tests/hostile/build_corpus.py: injection_model) names its input, output, weights and nodes,
and its producer, with a Markdown image (a tracking beacon), a "CLICK-TO-FIX" link, raw HTML, plotly
pseudo-HTML, a spreadsheet formula, terminal escapes and Streamlit directives. AppTest gives each
element's Markdown source: every character that could act is escaped there.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hostile.build_corpus import INJECTIONS, injection_model
from streamlit.testing.v1 import AppTest

import shrinkray

ROOT = Path(__file__).resolve().parents[2]
MARKERS = ("beacon", "CLICK-TO-FIX", "evil", "alarm", "pwned", "alert", "HYPERLINK", "BIG")
#: What must never appear unescaped in a Markdown source that carries model text.
ACTIVE = [r"(?<!\\)\]\(", r"(?<!\\)\[", r"(?<!\\)<", r"://", r"www\.", r"(?<!\\):red", r"(?<!\\)\$", r"\x1b", r"\x07",
          r"(?<!\\)@"]  # fmt: skip


#: What Streamlit's Markdown links on its own *after* reading escapes (``https\\:\\/\\/x`` was still a link in
#: Chromium, issue 27): http(s)://, www. and e-mail addresses. Checked on the text with its escapes read.
LINKABLE = re.compile(r"(?i)(https?://|www\.|[\w.+-]@[\w-]+\.)")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def _texts(at: AppTest) -> list[str]:
    """Every Markdown source on the page (bodies, labels, help texts, metric values and table cells)."""
    texts = []
    for kind in ("markdown", "caption", "info", "warning", "error", "success", "title", "header", "subheader"):
        texts += [e.value for e in getattr(at, kind)]
    for metric in at.metric:
        texts += [metric.label, metric.proto.help or "", str(metric.value)]
    for button in at.get("download_button"):
        texts.append(button.proto.label)
    for table in at.table:  # st.table renders each cell as Markdown
        frame = table.value
        texts += [str(v) for v in frame.to_numpy().ravel()] + [str(v) for v in frame.index]
    return texts


def _assert_inert(at: AppTest) -> int:
    carrying = [t for t in _texts(at) if any(m in t for m in MARKERS)]
    for text in carrying:
        for pattern in ACTIVE:
            assert not re.search(pattern, text), (pattern, text)
        assert not LINKABLE.search(_ESCAPE.sub(r"\1", text)), text
    return len(carrying)


def _charts_are_inert(at: AppTest) -> int:
    """Plotly renders labels as pseudo-HTML: the figures must carry the names entity-escaped."""
    charts = at.get("plotly_chart")
    for chart in charts:
        text = chart.proto.spec
        assert "<a href" not in text and "<span style" not in text and "<script" not in text, text[:500]
    return sum("&lt;a href" in chart.proto.spec or "&lt;script" in chart.proto.spec for chart in charts)


@pytest.fixture(scope="module")
def loaded():
    return shrinkray.load(injection_model().SerializeToString(), name=INJECTIONS["markdown_link"])


def test_model_page_and_sidebar(loaded):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["model"] = loaded
    at.session_state["model_source"] = "Uploaded: " + INJECTIONS["markdown_image"]
    at.run()
    assert not at.exception, at.exception
    assert _assert_inert(at) >= 3  # subheader, sidebar name and source, producer help at least
    assert _charts_are_inert(at) >= 1  # the weight chart names the tensors
    weights = at.dataframe[0].value
    assert INJECTIONS["plotly"] in set(weights["name"])  # data grids show names exactly, as data
    # The inputs/outputs table (st.table renders Markdown, so it can wrap long shapes) carries names escaped.
    cells = [str(v) for v in at.table[0].value.to_numpy().ravel() if any(m in str(v) for m in MARKERS)]
    assert cells
    for cell in cells:
        for pattern in ACTIVE:
            assert not re.search(pattern, cell), (pattern, cell)


def test_shrink_and_compare_pages(loaded):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.session_state["model"] = loaded
    at.run()
    at.switch_page("app_pages/shrink.py").run()
    chosen = next(m for m in at.multiselect if m.label == "Methods to compare")
    chosen.set_value(["weights-int8", "palettize"]).run()
    toggle = next((t for t in at.toggle if t.label == "Measure latency"), None)
    if toggle is not None:
        toggle.set_value(False).run()
    next(b for b in at.button if b.label == "Shrink and measure").click().run()
    assert not at.exception, at.exception
    assert _assert_inert(at) >= 1
    at.switch_page("app_pages/compare.py").run()
    assert not at.exception, at.exception
    _assert_inert(at)
    _charts_are_inert(at)


def test_errors_naming_the_upload_are_inert():
    def page():
        from app_ui.controls import friendly_errors
        from app_ui.state import load_upload

        name = "![beacon](https://evil.example/t.png)<script>alert(1)</script>.onnx"
        with friendly_errors(f"Loading {name}"):
            load_upload(name, b"\x08\x01not a model")

    at = AppTest.from_function(page, default_timeout=60)
    at.run()
    assert not at.exception
    assert len(at.error) == 1 and _assert_inert(at) == 1


def test_server_paths_are_cut_from_messages():
    def page():
        import tempfile

        from app_ui.controls import friendly_errors
        from shrinkray.errors import OptionError

        with friendly_errors("Re-measuring"):
            path = f"{tempfile.gettempdir()}/shrinkray-session-abc/samples/inputs.npz"
            raise OptionError(f"Input file {path} has no array named 'x'", "Name the arrays after the inputs")

    at = AppTest.from_function(page, default_timeout=60)
    at.run()
    assert at.error[0].value == (
        "Re-measuring failed: Input file inputs.npz has no array named 'x'. Name the arrays after the inputs."
    )

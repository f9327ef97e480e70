"""Defects a new user met in the walkthrough (Chromium, 1280 px), each pinned by an AppTest: a shared Pricing
link's download count shown as it was sent, and model names shown literally on every page.

AppTest tier (tests/app: Streamlit's script runner, no browser; runs go to a temporary store).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import open_pricing
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
_pricing = open_pricing


# ---------------------------------------------------------------- 3. a shared link's downloads


@pytest.mark.parametrize("count", [2_500_000, 250_000, 1_234, 5_000_000_000])
def test_a_linked_download_count_is_shown_as_sent_on_the_slider_and_the_field(count):
    """A link with 2,500,000 downloads opened with the slider at 2,000,000: the page must show the user's
    number, never a round number near it (nor the slider's end for a count beyond it)."""
    at = _pricing({"provider": "gcs", "downloads": str(count), "sizes": "a=50MiB,b=10MiB"})
    assert at.select_slider(key="pricing:downloads_preset").value == count
    assert at.number_input(key="pricing:downloads").value == count
    assert any(f"at {count:,} downloads a month" in m.value for m in at.markdown)
    assert f"downloads={count}" in at.code[-1].value  # the link written back holds the same count
    assert not at.error, [e.value for e in at.error]


def test_the_slider_still_sets_round_numbers_and_keeps_a_typed_count():
    at = _pricing({"provider": "gcs", "downloads": "2500000", "sizes": "a=50MiB"})
    at.select_slider(key="pricing:downloads_preset").set_value(200_000).run()
    assert at.number_input(key="pricing:downloads").value == 200_000
    at.number_input(key="pricing:downloads").set_value(2_500_000).run()
    assert "2,500,000" in at.select_slider(key="pricing:downloads_preset").options  # still the count in force...
    at.number_input(key="pricing:downloads").set_value(5_000_000).run()
    assert "2,500,000" not in at.select_slider(key="pricing:downloads_preset").options  # ...until it is not
    at.number_input(key="pricing:downloads").set_value(333_333).run()
    assert not at.exception, at.exception
    assert at.select_slider(key="pricing:downloads_preset").value == 333_333
    assert any("at 333,333 downloads a month" in m.value for m in at.markdown)


# ---------------------------------------------------------------- 5. a model's name is shown literally everywhere

NAME = "[click](http://x) **bold** <b>x</b> $x$.onnx"
#: What would act if the name reached a Markdown renderer unescaped: a link, bold, HTML, a formula, an autolink.
ACTIVE = [r"(?<!\\)\[click", r"(?<!\\)\]\(", r"(?<!\\)\*\*bold", r"(?<!\\)<b>", r"(?<!\\)\$x", r"http://"]


def _strings(node) -> list[str]:
    """Every text an element's proto carries that Streamlit renders as Markdown (bodies, labels, help, captions)."""
    found = []
    proto = getattr(node, "proto", None)
    for field in ("body", "label", "help", "text", "caption", "placeholder"):
        value = getattr(proto, field, None) if proto is not None else None
        if isinstance(value, str) and value:
            found.append(value)
    for child in getattr(node, "children", {}).values() if isinstance(getattr(node, "children", None), dict) else []:
        found += _strings(child)
    return found


def _assert_literal(at: AppTest, where: str) -> int:
    texts = [t for t in _strings(at._tree) if "click" in t or "bold" in t]
    for text in texts:
        for pattern in ACTIVE:
            assert not re.search(pattern, text), (where, pattern, text)
    return len(texts)


def test_a_model_named_like_markdown_shows_literally_on_every_page():
    import shrinkray
    from app_ui.runs import wait_until_idle

    loaded = shrinkray.load((ROOT / "sample_models" / "mlp.onnx").read_bytes(), name=NAME)
    assert loaded.name == NAME
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.session_state["model"] = loaded
    at.session_state["model_source"] = f"Uploaded: {NAME}"
    at.run()
    assert not at.exception, at.exception
    assert _assert_literal(at, "model") >= 3  # title, sidebar name and source at least
    at.switch_page("app_pages/shrink.py").run()
    next(m for m in at.multiselect if m.label == "Methods to compare").set_value(["weights-int8"]).run()
    next(t for t in at.toggle if t.label == "Measure latency").set_value(False).run()
    next(b for b in at.button if b.label == "Shrink and measure").click().run()
    assert wait_until_idle(600), "the run did not finish"
    at.run()
    assert not at.exception, at.exception
    assert any("Reports" in m.value for m in at.markdown), "no results on the Shrink page"
    assert _assert_literal(at, "shrink") >= 2  # the sidebar and the model's download button at least
    for page in ("compare", "pricing", "model"):
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception, (page, at.exception)
        _assert_literal(at, page)


def test_the_download_of_a_large_models_zip_names_it_literally():
    """A model too large to load whole is shrunk into NAME.METHOD.zip: its download button's label (Markdown)
    carried the name unescaped, so the name's link and bold text acted."""

    def page(path: str) -> None:
        from app_ui.large_models import st_download

        st_download({"zip": path})

    name = NAME.replace("/", "")  # a file's name holds no "/"
    at = AppTest.from_function(page, args=(f"/nonexistent/{name}.weights-int8.zip",), default_timeout=60).run()
    assert not at.exception, at.exception
    labels = [b.proto.label for b in at.get("download_button")]
    assert len(labels) == 1 and "click" in labels[0], labels
    for pattern in ACTIVE[:-1]:
        assert not re.search(pattern, labels[0]), (pattern, labels[0])


def test_the_same_file_under_another_name_shows_that_name():
    """Inspection is cached by the file's hash: a second upload of the same bytes under another name showed the
    first name as the Model page's heading (the suite met it: mlp.onnx, then the same bytes as NAME)."""
    import shrinkray

    data = (ROOT / "sample_models" / "mlp.onnx").read_bytes()
    for name in ("first.onnx", "second.onnx"):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
        at.session_state["model"] = shrinkray.load(data, name=name)
        at.session_state["model_source"] = f"Uploaded: {name}"
        at.run()
        assert not at.exception, at.exception
        assert any(name in s.value for s in at.subheader), [s.value for s in at.subheader]

"""Names never become links (issue 27): a model whose names are URLs shows them as text on the Model page.

Streamlit (1.67) links bare URLs and e-mail addresses in everything that renders Markdown (``st.table`` cells,
captions, metric labels and values) *after* it reads escapes: ``https\\:\\/\\/evil.example`` was still a link in
Chromium. So each Markdown source is checked as the autolinker reads it (escapes undone): no ``http(s)://``,
``www.`` or address may be left in it. Data grids (``st.dataframe``) show text as data; their name columns are
declared text columns.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import onnx
import pytest
from hostile.build_corpus import small_mlp
from onnx import helper
from streamlit.testing.v1 import AppTest

import shrinkray

ROOT = Path(__file__).resolve().parents[2]
#: What Streamlit's Markdown links on its own once escapes are read: http(s)://, www. and e-mail addresses.
LINKABLE = re.compile(r"(?i)(https?://|www\.|[\w.+-]@[\w-]+\.)")
#: CommonMark: a backslash before ASCII punctuation shows that character.
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")

NAMES = {"x": "see https://evil.example/x", "y": "www.evil.example", "w1": "mail a@evil.example",
         "w2": "https://evil.example/w2"}  # fmt: skip


def url_model() -> onnx.ModelProto:
    """small_mlp whose input, output, weights, nodes, batch dimension and an op domain are URLs or addresses."""
    model = small_mlp()
    graph = model.graph
    for value in [*graph.input, *graph.output, *graph.initializer]:
        value.name = NAMES.get(value.name, value.name)
    for node in graph.node:
        node.input[:] = [NAMES.get(n, n) for n in node.input]
        node.output[:] = [NAMES.get(n, n) for n in node.output]
        node.name = "http://evil.example/" + node.name
    for value in [*graph.input, *graph.output]:
        value.type.tensor_type.shape.dim[0].dim_param = "www.evil.example/batch"
    model.opset_import.append(helper.make_opsetid("www.evil.example", 1))
    onnx.checker.check_model(model)
    return model


def as_read(markdown: str) -> str:
    """The text Streamlit's autolinker sees: the Markdown with its escapes read."""
    return _ESCAPE.sub(r"\1", markdown)


def linkable(markdown: str) -> list[str]:
    return LINKABLE.findall(as_read(markdown))


@pytest.fixture(scope="module")
def model_page():
    loaded = shrinkray.load(url_model().SerializeToString(), name="see https://evil.example/model.onnx")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["model"] = loaded
    at.run()
    assert not at.exception, at.exception
    return at


def test_the_inputs_and_outputs_table_shows_urls_as_text(model_page):
    table = model_page.table[0].value
    cells = [str(v) for v in table.to_numpy().ravel() if "evil" in str(v)]
    assert len(cells) >= 4  # both names and both batch dimensions (shape and dynamic axes)
    for cell in cells:
        assert linkable(cell) == [], cell
    names = {as_read(cell).replace("\u2060", "") for cell in table["name"]}
    assert names == {NAMES["x"], NAMES["y"]}  # readable exactly as the model names them


def test_metric_values_and_labels_show_an_op_domain_as_text(model_page):
    opset = next(m for m in model_page.metric if m.label == "Opset")
    assert "evil" in opset.value and linkable(opset.value) == [], opset.value
    for metric in model_page.metric:
        assert linkable(metric.label) == [] and linkable(metric.proto.help or "") == []


def test_every_markdown_text_on_the_page_and_sidebar_is_unlinkable(model_page):
    texts = []
    for kind in ("markdown", "caption", "info", "warning", "error", "success", "title", "header", "subheader"):
        texts += [e.value for e in getattr(model_page, kind)]
    carrying = [t for t in texts if "evil" in t]
    assert carrying  # the model's name: the page's subheader and the sidebar
    for text in carrying:
        assert linkable(text) == [], text


def test_data_grids_declare_name_columns_as_text(model_page):
    weights = model_page.dataframe[0]
    assert set(weights.value["name"]) == {NAMES["w1"], NAMES["w2"]}  # exactly, as data
    columns = json.loads(weights.proto.columns)
    assert columns["name"]["type_config"]["type"] == "text" and columns["where"]["type_config"]["type"] == "text"

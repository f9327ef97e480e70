"""The Streamlit app through Streamlit's AppTest: every page, a sample, each method, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import shrinkray
from shrinkray.measure.results import CompareSettings
from shrinkray.pipeline.compare import compare
from shrinkray.verdict.advice import recommended

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
TIMEOUT = 240


def _finish(at: AppTest) -> AppTest:
    """Runs are jobs off the page's script: wait for them to end, then redraw (what the page's poll does)."""
    from app_ui.runs import wait_until_idle

    if at.error:  # refused before any run started: the message is the answer
        return at
    assert wait_until_idle(600), "a run did not finish"
    return at.run()


def _app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    return at


def _load_sample(at: AppTest, name: str) -> AppTest:
    at.selectbox[0].select(name).run()
    next(b for b in at.button if b.label == "Load sample").click().run()
    assert not at.exception, at.exception
    return at


def _texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [m.value for m in at.caption] + [m.value for m in at.info]
    parts += [m.value for m in at.warning] + [m.value for m in at.success] + [m.value for m in at.error]
    parts += [m.value for m in at.title] + [m.value for m in at.subheader]
    return "\n".join(str(p) for p in parts)


def test_model_page_without_a_model_invites_to_load_one():
    at = _app()
    assert at.title[0].value == "Model"
    assert any("No model loaded yet" in i.value for i in at.info)
    assert "Current model" in _texts(at)


def test_loading_a_sample_shows_the_inspection_and_the_sidebar_names_it():
    at = _load_sample(_app(), "transformer")
    labels = {m.label: m.value for m in at.metric}
    assert labels["File size"].endswith("MiB")
    assert labels["Opset"] == "ai.onnx 17"
    assert at.session_state["model"].name == "transformer"
    frames = at.dataframe
    assert len(frames) == 1  # the weights: a grid (hundreds of rows), its columns narrow enough for 800 px
    assert frames[0].proto.columns and '"pinned": true' in frames[0].proto.columns  # the name stays in view
    methods = at.table[1].value  # a handful of rows: a table that wraps to a narrow page, not a grid
    assert list(methods.columns) == ["method", "tensors", "bytes", "share of file"] and len(methods) >= 3
    io_table = at.table[0].value  # a table (not a data grid), so long symbolic shapes wrap; names Markdown-escaped
    assert [n.replace("\\", "") for n in io_table["name"]] == ["input_ids", "attention_mask", "last_hidden_state", "pooled"]
    assert "0: batch" in io_table["dynamic axes"].iloc[0]
    assert "embeddings.word_embeddings.weight" in set(frames[0].value["name"])
    # The sidebar badge is checked in the browser test (AppTest drops the sidebar after st.rerun).
    assert len(at.get("plotly_chart")) == 2


def test_upload_error_is_a_friendly_message_not_a_traceback():
    def page():
        import streamlit as st

        from app_ui.controls import friendly_errors
        from app_ui.state import load_upload

        with friendly_errors("Loading broken.onnx"):
            load_upload("broken.onnx", b"\x08\x01garbage that is not a model")
        st.write("still alive")

    at = AppTest.from_function(page, default_timeout=60)
    at.run()
    assert not at.exception
    assert len(at.error) == 1
    message = at.error[0].value
    assert message.startswith("Loading broken.onnx failed:")
    assert "is not a readable ONNX model (the bytes are not a valid protobuf" in message
    assert "Traceback" not in message
    assert at.markdown[-1].value == "still alive"


def test_unexpected_errors_are_reported_without_a_traceback():
    def page():
        from app_ui.controls import friendly_errors

        with friendly_errors("Doing something"):
            raise KeyError("internal")

    at = AppTest.from_function(page, default_timeout=60)
    at.run()
    assert not at.exception
    assert "bug in Shrink Ray Studio" in at.error[0].value
    assert "KeyError" in at.error[0].value


def test_shrink_and_compare_pages_ask_for_a_model_first():
    at = _app()
    at.switch_page("app_pages/shrink.py").run()
    assert any("Load a model" in i.value for i in at.info)
    at.switch_page("app_pages/compare.py").run()
    assert any("Run **Shrink**" in i.value for i in at.info)


@pytest.fixture(scope="module")
def shrunk_app() -> AppTest:
    at = _load_sample(_app(), "mlp")
    at.switch_page("app_pages/shrink.py").run()
    # Fast settings: fewer timed runs, no culprit search budget needed for the page test.
    next(n for n in at.number_input if n.label == "Timed runs per model (0 = adaptive)").set_value(3).run()
    _finish(next(b for b in at.button if b.label == "Shrink and measure").click().run())
    assert not at.exception, at.exception
    return at


def test_shrink_page_shows_one_card_per_method_with_sizes_parity_and_latency(shrunk_app):
    at = shrunk_app
    headings = [m.value for m in at.markdown if m.value.startswith("### ")]
    cards = [s.name for s in shrinkray.all_methods() if s.in_default_set]
    assert headings == [f"### {name}" for name in cards]
    metrics = [m.label for m in at.metric]
    for label in ("Raw", "gzip -9", "Verdict", "Latency"):
        assert metrics.count(label) == len(cards), (label, metrics)
    assert sum(1 for m in metrics if m.startswith("brotli q")) == len(cards)
    # The headline is the engine's verdict on this comparison (timings decide "not slower", so compute it).
    comparison = at.session_state["comparisons"][at.session_state["latest"]]
    best = recommended(comparison)
    if best is not None:
        assert any(s.value.startswith(f"Best trade-off: {best.key}.") for s in at.success)
    else:
        assert any(w.value.startswith("No variant is ") for w in at.warning)  # none passes, or those that do are slower


def test_shrink_page_offers_downloads_for_models_and_reports(shrunk_app):
    labels = [b.label for b in shrunk_app.get("download_button")]
    assert sum(1 for label in labels if label.startswith("Download mlp.")) == len(
        [s for s in shrinkray.all_methods() if s.in_default_set]
    )
    for report in ("JSON", "Markdown", "CSV", "HTML with charts"):
        assert report in labels


def test_compare_page_draws_the_engine_charts(shrunk_app):
    at = shrunk_app
    at.switch_page("app_pages/compare.py").run()
    assert not at.exception, at.exception
    charts = at.get("plotly_chart")
    assert len(charts) >= 5  # pareto, size, latency, parity error, parity scatter (+ throughput)
    assert any("Inputs used for parity" in m.value for m in at.markdown)


def test_each_method_alone_runs_in_the_page():
    for spec in shrinkray.all_methods():
        at = _load_sample(_app(), "cnn")
        at.switch_page("app_pages/shrink.py").run()
        at.multiselect[0].set_value([spec.name]).run()
        at.toggle[-1].set_value(False).run()  # "Measure latency" off: this test is about the method
        _finish(next(b for b in at.button if b.label == "Shrink and measure").click().run())
        assert not at.exception, (spec.name, at.exception)
        headings = [m.value for m in at.markdown if m.value.startswith("### ")]
        assert headings == [f"### {spec.name}"]
        assert not at.error, [e.value for e in at.error]


def test_results_survive_moving_between_pages_without_recomputing(shrunk_app, monkeypatch):
    import shrinkray.pipeline.compare as compare_module

    calls = []
    monkeypatch.setattr(compare_module, "compare", lambda *a, **k: calls.append(1))
    at = shrunk_app
    at.switch_page("app_pages/model.py").run()
    at.switch_page("app_pages/shrink.py").run()
    assert not calls
    assert [m.value for m in at.markdown if m.value.startswith("### ")]


def test_tree_model_says_nothing_to_shrink():
    loaded = shrinkray.load(ROOT / "sample_models" / "tree.onnx")
    result = compare(loaded, CompareSettings(runs=3, latency=False))

    def page():
        import streamlit as st

        from app_ui.results import show_results

        show_results(st.session_state["comparison"])

    at = AppTest.from_function(page, default_timeout=60)
    at.session_state["comparison"] = result
    at.run()
    assert not at.exception, at.exception
    texts = _texts(at)
    assert "no float weight tensors large enough" in texts
    assert "changed nothing" in texts


def test_the_generative_sample_loads_with_its_tokenizer_and_is_judged_by_what_it_writes():
    at = _load_sample(_app(), "tiny_lm")
    loaded = at.session_state["model"]
    assert loaded.name == "tiny_lm"
    assert loaded.tokenizer.endswith("tokenizer.json") and loaded.prompts.endswith("prompts.txt")
    at.switch_page("app_pages/shrink.py").run()
    assert not at.exception, at.exception


def test_the_set_sample_is_one_model_shrunk_whole_and_each_variant_downloads_as_a_model_folder():
    """tiny_seq2seq (an encoder and a decoder) through the app's job path: one inspection, every file shrunk,
    the verdict from what the set writes, and each variant a .zip of a model folder in transformers.js names."""
    import io
    import zipfile

    from app_ui.runs import wait_until_idle

    at = _load_sample(_app(), "tiny_seq2seq")
    loaded = at.session_state["model"]
    assert loaded.model_set is not None and set(loaded.model_set.members) == {"encoder", "decoder"}
    assert "A set of models: encoder\\_model.onnx and decoder\\_model.onnx" in _texts(at)  # Markdown-escaped
    at.switch_page("app_pages/shrink.py").run()
    assert not at.exception, at.exception
    assert "auto" not in at.multiselect[0].options and "Smallest that passes" not in [b.label for b in at.button]
    at.multiselect[0].set_value(["float16"]).run()
    next(b for b in at.button if b.label == "Shrink and measure").click().run()
    assert wait_until_idle(600), "a run did not finish"
    at.run()
    assert not at.exception, at.exception
    texts = _texts(at)
    assert "writes the same output for 160 of 160 inputs" in texts and "judged through decoder" in texts
    labels = [b.proto.label for b in at.get("download_button")]
    assert any(label.endswith("seq2seq.float16.zip") for label in labels), labels
    from app_ui.runs import comparison_of

    folder = Path(comparison_of(at.session_state["run_id"]).variants[0].file)
    from shrinkray.io.model_set import pack_folder

    with zipfile.ZipFile(io.BytesIO(pack_folder(folder))) as zf:
        names = set(zf.namelist())
    assert {"onnx/encoder_model_fp16.onnx", "onnx/decoder_model_fp16.onnx", "tokenizer.json", "config.json"} <= names
    # its link reopens the run in another session, with the set itself (linked into that session's uploads)
    other = AppTest.from_file(APP, default_timeout=TIMEOUT)
    other.query_params["run"] = at.session_state["run_id"]
    other.switch_page("app_pages/shrink.py").run()
    assert not other.exception and not other.error, [e.value for e in other.error]
    reopened = other.session_state["model"]
    assert reopened.model_set is not None and reopened.sha256 == loaded.sha256 and reopened.name == "tiny_seq2seq"
    assert "uploads" in reopened.model_set.folder.parts  # this session's link, which outlives the run
    assert any(label.endswith("seq2seq.float16.zip") for label in [b.proto.label for b in other.get("download_button")])
    other.switch_page("app_pages/compare.py").run()  # its inputs form asks a set for text, not dimensions
    assert not other.exception, other.exception
    assert any("A set of models is fed the lines of its prompts.txt" in m.value for m in other.markdown)
    assert not [t for t in other.text_area if t.label.startswith("Dimensions")]


def test_cards_say_when_a_gzip_size_was_estimated(shrunk_app):
    """A file over 32 MiB has its gzip -9 estimated from sampled blocks: its card and the summary say so."""
    import dataclasses
    import pickle

    measured = shrunk_app.session_state["comparisons"][shrunk_app.session_state["latest"]]
    estimated = dataclasses.replace(measured, variants=[
        dataclasses.replace(r, sizes=dataclasses.replace(r.sizes, gzip_margin=r.sizes.gzip // 300, gzip_share=0.05))
        if r.sizes is not None else r for r in measured.variants])  # fmt: skip

    def page(blob: bytes):
        import pickle

        from app_ui.results import show_results

        show_results(pickle.loads(blob))

    at = AppTest.from_function(page, args=(pickle.dumps(estimated),), default_timeout=60)
    at.run()
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert labels.count("gzip -9 (estimated)") == len(estimated.variants) and labels.count("gzip -9") == 0
    assert any("estimated from" in c.value and "95% confidence" in c.value for c in at.caption)

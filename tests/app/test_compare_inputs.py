"""Real input samples on the Compare page and the parity verdict settings on the Shrink page, through AppTest.

This Streamlit's AppTest drives ``st.file_uploader`` (``set_value`` with (name, bytes, mime) tuples) and
``st.data_editor`` (its edit state assigned on ``session_state`` under the editor's key), so the real pages
run here: uploads are written to the session folder, re-measured in the capped worker, and shown.
"""

from __future__ import annotations

import io
import re
import wave
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import shrinkray
from shrinkray.measure.parity import VerdictSettings
from shrinkray.verdict import parity_verdict

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
TIMEOUT = 240
CLI_FLAG = re.compile(r"(?<![\w-])--[a-z]")


def _finish(at: AppTest) -> AppTest:
    """Runs are jobs off the page's script: wait for them to end, then redraw (what the page's poll does)."""
    from app_ui.runs import wait_until_idle

    if at.error:  # refused before any run started: the message is the answer
        return at
    assert wait_until_idle(600), "a run did not finish"
    return at.run()


def _png(color: tuple[int, int, int], size: tuple[int, int] = (48, 40)) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    img = Image.new("RGB", size, color)
    img.paste((255 - color[0], 255 - color[1], 255 - color[2]), (8, 8, size[0] // 2, size[1] // 2))
    img.save(buffer, format="PNG")
    return buffer.getvalue()


def _wav(samples: int, rate: int = 16000, hz: float = 440.0) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        t = np.arange(samples) / rate
        w.writeframes((np.sin(2 * np.pi * hz * t) * 8000).astype("<i2").tobytes())
    return buffer.getvalue()


def _latest(at: AppTest):
    return at.session_state["comparisons"][at.session_state["latest"]]


def _shrunk(loaded: shrinkray.LoadedModel | None = None, sample: str = "cnn") -> AppTest:
    """The app with a model loaded and Shrink run (weights-int8 only, no latency: fast)."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    if loaded is not None:
        at.session_state["model"] = loaded
        at.session_state["model_source"] = "test"
        at.run()
    else:
        at.run()
        at.selectbox[0].select(sample).run()
        next(b for b in at.button if b.label == "Load sample").click().run()
    assert not at.exception, at.exception
    at.switch_page("app_pages/shrink.py").run()
    return _run_shrink(at)


def _run_shrink(at: AppTest) -> AppTest:
    """Press "Shrink and measure" on the Shrink page with weights-int8 only and no latency (widgets reset
    when the page is left, so they are set on every visit)."""
    at.multiselect[0].set_value(["weights-int8"]).run()
    next(t for t in at.toggle if t.label == "Measure latency").set_value(False).run()
    _finish(next(b for b in at.button if b.label == "Shrink and measure").click().run())
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


def _remeasure(at: AppTest, files: list[tuple[str, bytes, str]], image_values: str | None = None) -> AppTest:
    at.switch_page("app_pages/compare.py").run()
    assert not at.exception, at.exception
    uploader = next(u for u in at.file_uploader if u.label.startswith("Real samples"))
    uploader.set_value(files)
    if image_values is not None:
        next(s for s in at.selectbox if s.label == "Image values").set_value(image_values)
    _finish(next(b for b in at.button if b.label == "Re-measure with these inputs").click().run())
    assert not at.exception, at.exception
    return at


@pytest.fixture(scope="module")
def cnn_app() -> AppTest:
    return _shrunk(sample="cnn")


def test_apptest_drives_the_uploader_and_the_data_editor(cnn_app):
    at = cnn_app
    at.switch_page("app_pages/compare.py").run()
    uploader = next(u for u in at.file_uploader if u.label.startswith("Real samples"))
    assert uploader.accept_multiple_files
    assert set(uploader.allowed_type) >= {".png", ".jpg", ".jpeg", ".wav", ".npz"}
    at.switch_page("app_pages/shrink.py").run()
    assert len(at.data_editor) == 1 and list(at.data_editor[0].value["Output"]) == ["scores"]
    # besides the headline card's, the downloads' and what-changes' radios, the verdict's own
    shown = [r.label for r in at.radio if r.label not in ("Connection", "Name model downloads", "Inputs shown per output")]
    assert shown == ["Parity verdict"]


def test_image_samples_are_measured_and_shown(cnn_app):
    at = _remeasure(cnn_app, [("red.png", _png((220, 30, 30)), "image/png"),
                              ("blue.png", _png((20, 40, 230)), "image/png")], image_values="0-1")  # fmt: skip
    assert not at.error, [e.value for e in at.error]
    comparison = _latest(at)
    assert comparison.input_note.startswith("Real samples (2): red.png, blue.png; image [1, 3, 32, 32]")
    assert comparison.settings.image_range == "0-1"
    assert comparison.variants[0].ok and comparison.variants[0].parity.samples == 2
    assert any(c.value.startswith("Real samples (2): red.png, blue.png") for c in at.caption)
    assert "/tmp" not in " ".join(str(c.value) for c in at.caption)  # the note names files, not server folders
    assert [i.captions for i in at.image] == [["red.png", "blue.png"]]  # both thumbnails
    # The Shrink page shows the same comparison, and a new run there keeps measuring on the samples.
    at.switch_page("app_pages/shrink.py").run()
    assert any("Real samples (2)" in c.value for c in at.caption)
    _run_shrink(at)
    assert _latest(at).input_note.startswith("Real samples (2)")
    assert _latest(at).settings.image_range == "0-1"


def test_an_npz_is_named_by_the_users_file_name(cnn_app):
    # the note said "Inputs loaded from inputs.npz" for an upload named cnn_inputs.npz
    buffer = io.BytesIO()
    np.savez(buffer, image=np.random.default_rng(3).uniform(-1, 1, (2, 3, 32, 32)).astype(np.float32))
    at = _remeasure(cnn_app, [("my cnn inputs.npz", buffer.getvalue(), "application/octet-stream")])
    assert not at.error, [e.value for e in at.error]
    assert _latest(at).input_note.startswith("Inputs loaded from my_cnn_inputs.npz"), _latest(at).input_note
    shown = [str(c.value).replace("\\_", "_") for c in at.caption]  # captions are Markdown: "_" escaped
    assert any("Inputs loaded from my_cnn_inputs.npz" in text for text in shown), shown


def test_a_failed_upload_keeps_the_samples_of_the_current_comparison(cnn_app):
    at = _remeasure(cnn_app, [("ok.png", _png((10, 200, 10)), "image/png")])
    assert not at.error, [e.value for e in at.error]
    kept = _latest(at).settings.sample_files
    at = _remeasure(at, [("bad.png", b"not an image", "image/png")])
    assert len(at.error) == 1
    assert all(Path(p).is_file() for p in kept)  # thumbnails and the next Shrink run still have them
    assert len(at.image) == 1
    at.switch_page("app_pages/shrink.py").run()
    _run_shrink(at)
    assert _latest(at).input_note.startswith("Real samples (1): ok.png")


def test_a_bad_image_is_one_friendly_line(cnn_app):
    at = _remeasure(cnn_app, [("broken.png", b"\x89PNG not really an image", "image/png")])
    assert len(at.error) == 1
    message = at.error[0].value
    assert message.startswith("Re-measuring failed: Cannot read broken.png as an image"), message
    assert "Give a PNG or JPEG file" in message
    assert "Traceback" not in message and "/tmp" not in message and "shrinkray-session" not in message
    assert not CLI_FLAG.search(message), message
    assert "\n" not in message.strip()


def test_an_image_for_a_model_without_image_input_is_explained_without_cli_flags():
    at = _shrunk(sample="mlp")
    at = _remeasure(at, [("cat.png", _png((1, 2, 3)), "image/png")])
    assert len(at.error) == 1
    message = at.error[0].value
    assert message.startswith("Re-measuring failed: cat.png is an image, but the model has no image inputs")
    assert not CLI_FLAG.search(message), message


def test_npz_and_images_together_are_refused():
    at = _shrunk(sample="mlp")
    buffer = io.BytesIO()
    np.savez(buffer, x=np.zeros((1, 4), np.float32))
    at = _remeasure(at, [("a.npz", buffer.getvalue(), "application/octet-stream"),
                         ("b.png", _png((1, 2, 3)), "image/png")])  # fmt: skip
    assert [e.value for e in at.error] == [
        "Re-measuring failed: Upload either one .npz file or images / WAV files, not both. Remove the extra files."
    ]


@pytest.fixture(scope="module")
def audio_app() -> AppTest:
    from helpers import framed_audio_model

    loaded = shrinkray.load(framed_audio_model(512).SerializeToString(), name="framed_audio")
    return _shrunk(loaded)


def test_wav_samples_feed_an_audio_model(audio_app):
    clips = [("hello.wav", _wav(16384), "audio/wav"), ("short.wav", _wav(8000, hz=220), "audio/wav")]
    at = _remeasure(audio_app, clips)
    assert not at.error, [e.value for e in at.error]
    comparison = _latest(at)
    # every clip as long as the first (the second is padded), the recurrent state synthesized
    note = "Real samples (2): hello.wav, short.wav; audio [1, 16384], state [2, 1, 16]; judged streaming over 16 steps"
    assert comparison.input_note.startswith(note)  # a recurrent state: the two files as a stream, cycled to 16
    assert comparison.variants[0].parity.samples == 16
    assert not at.image  # no thumbnails for audio


def test_a_wav_the_model_cannot_take_says_what_to_do_in_app_words(audio_app):
    # 16000 samples are not whole 512-sample frames: the model's Reshape refuses them
    at = _remeasure(audio_app, [("odd.wav", _wav(16000), "audio/wav")])
    assert len(at.error) == 1
    message = at.error[0].value
    assert message.startswith("Re-measuring failed: ONNX Runtime opened the model but could not run it"), message
    assert 'under "Inputs used for parity"' in message  # APP_HINTS wording, not the CLI's
    assert not CLI_FLAG.search(message), message


def test_bad_dimensions_in_the_form_name_no_cli_flag(cnn_app):
    at = cnn_app
    at.switch_page("app_pages/compare.py").run()
    next(t for t in at.text_area if t.label.startswith("Dimensions")).input("batch=zero")
    _finish(next(b for b in at.button if b.label == "Re-measure with these inputs").click().run())
    assert not at.exception, at.exception
    assert len(at.error) == 1
    message = at.error[0].value
    assert message.startswith("Re-measuring failed:") and "positive integer" in message
    assert not CLI_FLAG.search(message), message


def test_verdict_radio_and_data_editor_reach_the_verdict_settings(cnn_app):
    at = cnn_app
    at.switch_page("app_pages/shrink.py").run()
    at.radio[0].set_value("absolute")
    at.session_state["verdict_outputs"] = {
        "edited_rows": {0: {"Judge as": "scores", "Extra criteria": "min_top1_agreement=0.995, max_abs_error=0.5"}},
        "added_rows": [], "deleted_rows": [],
    }  # fmt: skip
    at.run()
    assert not at.error, [e.value for e in at.error]
    comparison = _latest(_run_shrink(at))
    assert comparison.settings.verdict == VerdictSettings(
        profile="absolute", per_output={"scores": {"min_top1_agreement": 0.995, "max_abs_error": 0.5}},
        kinds={"scores": "scores"},
    )  # fmt: skip
    parity = comparison.variants[0].parity
    metric = next(m for m in at.metric if m.label == "Verdict")
    assert metric.value == parity_verdict(parity).label
    assert parity_verdict(parity).sentence in metric.help and "Absolute verdict" in metric.help
    assert any(e.label == "Parity per output" for e in at.expander)
    table = next(d.value for d in at.table if "Decided by" in getattr(d.value, "columns", []))  # wraps, fits the page
    assert list(table.columns[:4]) == ["Output", "Kind", "Verdict", "Decided by"]
    assert list(table["Output"]) == ["scores"] and list(table["Kind"]) == ["scores"]


def test_a_bad_criterion_is_a_message_and_disables_the_run(cnn_app):
    at = cnn_app
    at.switch_page("app_pages/shrink.py").run()
    at.session_state["verdict_outputs"] = {
        "edited_rows": {0: {"Judge as": "auto", "Extra criteria": "min_happiness=3"}},
        "added_rows": [], "deleted_rows": [],
    }  # fmt: skip
    at.run()
    assert not at.exception, at.exception
    assert len(at.error) == 1
    message = at.error[0].value
    assert message.startswith("Reading the parity settings failed:") and "happiness" in message, message
    assert not CLI_FLAG.search(message), message
    assert next(b for b in at.button if b.label == "Shrink and measure").disabled


def test_samples_of_one_model_are_not_fed_to_the_next():
    at = _remeasure(_shrunk(sample="cnn"), [("cat.png", _png((90, 90, 10)), "image/png")])
    assert _latest(at).input_note.startswith("Real samples (1)")
    at.switch_page("app_pages/model.py").run()
    at.selectbox[0].select("mlp").run()
    next(b for b in at.button if b.label == "Load sample").click().run()
    at.switch_page("app_pages/shrink.py").run()
    at = _run_shrink(at)  # no "cat.png is an image, but the model has no image inputs"
    assert _latest(at).name == "mlp" and _latest(at).input_note.startswith("Synthesized inputs")


def test_the_inputs_form_starts_from_the_inputs_shown(cnn_app):
    """The form showed the seed used but empty dimensions and ranges and "Auto" image values: re-measuring
    with a new seed silently dropped a batch size (and image scaling) the shown results were measured with."""
    at = cnn_app
    at.switch_page("app_pages/compare.py").run()
    next(t for t in at.text_area if t.label.startswith("Dimensions")).input("N=2")
    next(t for t in at.text_area if t.label.startswith("Value ranges")).input("image=-1:0.5")
    next(s for s in at.selectbox if s.label == "Image values").set_value("0-255")
    _finish(next(b for b in at.button if b.label == "Re-measure with these inputs").click().run())
    assert not at.exception and not at.error, at.exception or [e.value for e in at.error]
    assert _latest(at).settings.inputs.dims == {"N": 2}
    at.switch_page("app_pages/shrink.py").run()
    at.switch_page("app_pages/compare.py").run()  # a later visit shows the same inputs
    assert next(t for t in at.text_area if t.label.startswith("Dimensions")).value == "N=2"
    assert next(t for t in at.text_area if t.label.startswith("Value ranges")).value == "image=-1:0.5"
    assert next(s for s in at.selectbox if s.label == "Image values").value == "0-255"
    next(n for n in at.number_input if n.label == "Seed").set_value(3)
    _finish(next(b for b in at.button if b.label == "Re-measure with these inputs").click().run())
    assert not at.exception and not at.error, at.exception or [e.value for e in at.error]
    used = _latest(at).settings
    assert (used.inputs.seed, used.inputs.dims, used.inputs.ranges, used.image_range) == (3, {"N": 2}, {"image": (-1.0, 0.5)}, "0-255")


def test_the_input_examples_name_this_models_own_inputs(cnn_app):
    at = cnn_app
    at.switch_page("app_pages/compare.py").run()
    dims = next(t for t in at.text_area if t.label.startswith("Dimensions"))
    ranges = next(t for t in at.text_area if t.label.startswith("Value ranges"))
    assert "seq=" not in dims.placeholder and "input_ids" not in ranges.placeholder  # not a transformer's
    assert ranges.placeholder == "image=0:1" and dims.placeholder.startswith("N=")  # the cnn sample's input

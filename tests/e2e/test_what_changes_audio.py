"""What changes for an audio model, in a real browser: a denoiser built here (a waveform in, a waveform out) is
uploaded and measured, and its worst inputs are drawn as waveforms, the original's under the variant's."""

from __future__ import annotations

import numpy as np
import onnx
from helpers import run_sample_in_app
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.test_browser import SHOTS, _no_traceback, app_url  # noqa: F401 - app_url is a fixture

SAMPLES = 4000


def denoiser() -> onnx.ModelProto:
    """noisy [N, 1, 4000] -> Conv 1->64 (k 31) -> Relu -> Conv 64->64 (k 15) -> Relu -> Conv 64->1 (k 31) -> clean."""
    rng = np.random.default_rng(5)

    def weight(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        fan_in = int(np.prod(shape[1:]))
        return numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["noisy", "w1"], ["h1"], pads=[15, 15]), helper.make_node("Relu", ["h1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["h2"], pads=[7, 7]), helper.make_node("Relu", ["h2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3"], ["clean"], pads=[15, 15]),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes, "denoiser", [helper.make_tensor_value_info("noisy", TensorProto.FLOAT, ["N", 1, SAMPLES])],
        [helper.make_tensor_value_info("clean", TensorProto.FLOAT, ["N", 1, SAMPLES])],
        [weight("w1", (64, 1, 31)), weight("w2", (64, 64, 15)), weight("w3", (1, 64, 31))],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def _worst_drawn(pages, url: str, model: onnx.ModelProto, path, drawn: str, words: str, shot: str) -> None:
    """Upload ``model``, run it, and check that what changes draws its worst inputs as ``drawn`` images (the
    original's and the variant's, loaded) with ``words`` said; a screenshot of the section."""
    path.write_bytes(model.SerializeToString())
    page = pages.open(url, width=1440, height=1800)
    run_sample_in_app(page, path)
    changes = page.locator(".st-key-what-changes")
    changes.locator(".sr-ex").first.wait_for(timeout=30_000)
    pictures = changes.locator(drawn)
    assert pictures.count() >= 2, changes.inner_text()  # the original's and the variant's, per worst input
    assert pictures.first.bounding_box()["width"] > 100
    assert pictures.first.evaluate("i => i.complete && i.naturalWidth > 0")
    assert words in changes.inner_text() and "max abs diff" in changes.inner_text()
    changes.scroll_into_view_if_needed()
    changes.screenshot(path=str(SHOTS / shot))
    _no_traceback(page)
    assert not pages.errors, pages.errors


def test_an_audio_models_worst_inputs_are_drawn_as_waveforms(app_url, pages, tmp_path):  # noqa: F811
    _worst_drawn(pages, app_url, denoiser(), tmp_path / "denoiser.onnx", "img.sr-wave", "waveform",
                 "what-changes-audio.png")  # fmt: skip


def masker() -> onnx.ModelProto:
    """noisy [N, 1, 4000] -> 50 frames of 80 samples -> MatMul [80, 64] -> Sigmoid -> gains [N, 64, 50]: a
    time-frequency mask in [0, 1], as speech enhancers output."""
    rng = np.random.default_rng(6)
    shape = numpy_helper.from_array(np.array([0, 50, 80], np.int64), "frames")
    weight = numpy_helper.from_array((rng.standard_normal((80, 64)) * 0.3).astype(np.float32), "w")
    nodes = [
        helper.make_node("Reshape", ["noisy", "frames"], ["framed"]), helper.make_node("MatMul", ["framed", "w"], ["h"]),
        helper.make_node("Sigmoid", ["h"], ["s"]), helper.make_node("Transpose", ["s"], ["gains"], perm=[0, 2, 1]),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes, "masker", [helper.make_tensor_value_info("noisy", TensorProto.FLOAT, ["N", 1, SAMPLES])],
        [helper.make_tensor_value_info("gains", TensorProto.FLOAT, ["N", 64, 50])], [shape, weight],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def test_an_audio_models_mask_is_drawn_as_pictures(app_url, pages, tmp_path):  # noqa: F811
    _worst_drawn(pages, app_url, masker(), tmp_path / "masker.onnx", "img.sr-mask", "mask",
                 "what-changes-audio-mask.png")  # fmt: skip

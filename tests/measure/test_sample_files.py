"""The user's image files: fed at the model's size or its family's, scaled keeping the aspect and padded."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from PIL import Image

from shrinkray.graph.sessions import open_session
from shrinkray.measure.inputs import PAGE_SIZE, InputOptions
from shrinkray.measure.sample_files import MAX_LINE_WIDTH, letterbox, load_sample_files


def image_model(shape: list, out_shape: list | None) -> onnx.ModelProto:
    """x (an image) -> mean over channels -> Sigmoid -> out, with the output shape given (a map or not)."""
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1), helper.make_node("Sigmoid", ["m"], ["out"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, out_shape)])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def save(tmp_path, name: str, size: tuple[int, int], paper=(240, 240, 235), ink=(10, 10, 10)) -> str:
    """A page-like image of ``size`` (W, H): paper with a dark block in its middle."""
    image = Image.new("RGB", size, paper)
    w, h = size
    image.paste(ink, (w // 4, h // 4, 3 * w // 4, 3 * h // 4))
    path = tmp_path / name
    image.save(path)
    return str(path)


PAPER = np.array([240, 240, 235]) / 255


def rgb01(feed: np.ndarray) -> np.ndarray:
    """[1, 3, H, W] in 0-1 -> [H, W, 3]."""
    return feed[0].transpose(1, 2, 0)


def test_a_page_for_a_detector_is_fed_at_the_page_size_keeping_its_aspect(tmp_path):
    model = image_model(["b", 3, "h", "w"], ["b", 1, "h", "w"])
    landscape = save(tmp_path, "scan.png", (1200, 900))  # a 4:3 scan: once fed at 640 x 480
    samples = load_sample_files([landscape, save(tmp_path, "tall.png", (600, 1000))], model, image_range="0-1")
    assert [s["x"].shape for s in samples] == [(1, 3, *PAGE_SIZE)] * 2
    page = rgb01(samples[0]["x"])
    scale = min(736 / 1200, 960 / 900)  # fits the width: 736 x 552, the rest is paper
    height = round(900 * scale)
    assert height == 552
    np.testing.assert_allclose(page[height:], np.broadcast_to(PAPER, page[height:].shape), atol=1e-6)  # padded with paper
    ink = page[:height].mean(axis=2) < 0.2
    rows, cols = np.nonzero(ink)
    assert rows.min() == pytest.approx(height / 4, abs=2) and rows.max() == pytest.approx(3 * height / 4, abs=2)
    assert cols.min() == pytest.approx(736 / 4, abs=2) and cols.max() == pytest.approx(3 * 736 / 4, abs=2)
    # the block stays square-ish: not stretched to the page's portrait aspect
    assert (rows.max() - rows.min()) / (cols.max() - cols.min()) == pytest.approx(900 / 1200, abs=0.02)
    open_session(model).run(None, samples[0])


def test_declared_sides_are_kept_and_the_image_is_not_stretched(tmp_path):
    model = image_model([1, 3, 64, 64], [1, 1, 64, 64])
    feed = load_sample_files([save(tmp_path, "wide.png", (200, 100))], model, image_range="0-1")[0]["x"]
    assert feed.shape == (1, 3, 64, 64)
    image = rgb01(feed)
    np.testing.assert_allclose(image[33:], np.broadcast_to(PAPER, image[33:].shape), atol=1e-6)  # 64 x 32, padded below


def test_the_users_dims_set_the_size(tmp_path):
    model = image_model(["b", 3, "h", "w"], ["b", 1, "h", "w"])
    feeds = load_sample_files([save(tmp_path, "a.png", (300, 200))], model, InputOptions(dims={"h": 512, "w": 640}))
    assert feeds[0]["x"].shape == (1, 3, 512, 640)


def test_a_model_of_no_family_gets_the_synthesized_size_not_640x480(tmp_path):
    model = image_model(["b", 3, "h", "w"], ["b", 1000])
    feed = load_sample_files([save(tmp_path, "photo.jpg", (1280, 960))], model)[0]["x"]
    assert feed.shape == (1, 3, 256, 256)


def test_text_lines_keep_their_height_and_widen_for_long_lines(tmp_path):
    model = image_model(["b", 3, 48, "w"], ["b", 1, 48, "w"])
    long_line = save(tmp_path, "long.png", (480, 48))
    short_line = save(tmp_path, "short.png", (100, 48))
    samples = load_sample_files([long_line, short_line], model, image_range="0-1")
    assert [s["x"].shape for s in samples] == [(1, 3, 48, 480)] * 2  # the first line's width, for every sample
    short = load_sample_files([short_line], model, image_range="0-1")[0]["x"]
    assert short.shape == (1, 3, 48, 320)  # a short line: the recognizer's 320, padded on the right
    np.testing.assert_allclose(rgb01(short)[:, 101:], np.broadcast_to(PAPER, rgb01(short)[:, 101:].shape), atol=1e-6)
    huge = load_sample_files([save(tmp_path, "huge.png", (4800, 48))], model, image_range="0-1")[0]["x"]
    assert huge.shape == (1, 3, 48, MAX_LINE_WIDTH)  # at most this wide: the line is scaled down to fit


def test_letterbox_pads_with_the_border_colour():
    image = Image.new("RGB", (10, 20), (0, 100, 200))
    boxed = letterbox(image, 40, 40)
    assert boxed.shape == (40, 40, 3)
    np.testing.assert_allclose(boxed[:, 20:], np.broadcast_to(np.array([0, 100, 200]) / 255, (40, 20, 3)), atol=1e-6)

"""The vectorized per-channel quantization gives ONNX Runtime's bytes, channel cases included."""

from __future__ import annotations

import contextlib

import numpy as np
import onnx
import pytest
from helpers import sample_path
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

from shrinkray.methods.ort_per_channel import vectorized


def _awkward() -> onnx.ModelProto:
    """A MatMul and a Conv whose channels are the cases the arithmetic branches on: all zeros, one value,
    all positive, all negative, tiny, huge, mixed signs."""
    rng = np.random.default_rng(3)
    w = rng.normal(size=(16, 8)).astype(np.float32)
    w[:, 0] = 0.0  # a constant channel: scale 1, zero point 0
    w[:, 1] = 0.25
    w[:, 2] = np.abs(w[:, 2]) + 1.0
    w[:, 3] = -np.abs(w[:, 3]) - 0.5
    w[:, 4] *= 1e-39  # under float32's tiny: flat
    w[:, 5] *= 1e30
    k = rng.normal(size=(6, 3, 3, 3)).astype(np.float32)
    k[0] = 0.0
    k[1] = np.abs(k[1])
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Conv", ["img", "k"], ["c"], pads=[1, 1, 1, 1]),
    ]
    graph = helper.make_graph(
        nodes, "awkward",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16]),
         helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("h", TensorProto.FLOAT, [2, 8]),
         helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 6, 8, 8])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(k, "k")],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _quantized(model: onnx.ModelProto, path, fast: bool, **options) -> bytes:
    with vectorized() if fast else contextlib.nullcontext():
        quantize_dynamic(model, str(path), per_channel=True, **options)
    return path.read_bytes()


@pytest.mark.parametrize("weight_type", [QuantType.QInt8, QuantType.QUInt8])
@pytest.mark.parametrize("reduce_range", [False, True])
def test_awkward_channels_quantize_to_onnx_runtimes_bytes(weight_type, reduce_range, tmp_path, monkeypatch):
    from shrinkray.methods import ort_per_channel

    covered = []
    real = ort_per_channel.quantize_weight_per_channel

    def spy(quantizer, name, *args):
        names = real(quantizer, name, *args)
        covered.append((name, names is not None))
        return names

    monkeypatch.setattr(ort_per_channel, "quantize_weight_per_channel", spy)
    options = {"weight_type": weight_type, "reduce_range": reduce_range}
    ours = _quantized(_awkward(), tmp_path / "ours.onnx", True, **options)
    theirs = _quantized(_awkward(), tmp_path / "theirs.onnx", False, **options)
    assert ours == theirs
    assert covered == [("w", True)]  # the vectorized way, not back to ORT's (ConvInteger's weight is per tensor)


@pytest.mark.parametrize("name", ["cnn", "transformer", "rnn", "subgraph", "shared_weight", "messy"])
def test_samples_quantize_to_onnx_runtimes_bytes(name, tmp_path):
    model = onnx.load(str(sample_path(name)))
    assert _quantized(model, tmp_path / "ours.onnx", True) == _quantized(model, tmp_path / "theirs.onnx", False)


def test_onnx_runtimes_own_is_back_afterwards():
    from onnxruntime.quantization.base_quantizer import BaseQuantizer

    own = BaseQuantizer.quantize_weight_per_channel_impl
    with vectorized():
        assert BaseQuantizer.quantize_weight_per_channel_impl is not own
    assert BaseQuantizer.quantize_weight_per_channel_impl is own


def test_a_weight_with_overrides_is_left_to_onnx_runtime(tmp_path):
    """Per-channel overrides given by scale and zero point: ONNX Runtime's path, which honours them."""
    model = _awkward()
    overrides = {"w": [{"axis": 1, "scale": np.float32(0.5), "zero_point": np.int8(0)}] * 8}
    options = {"extra_options": {"TensorQuantOverrides": overrides}}
    assert _quantized(model, tmp_path / "a.onnx", True, **options) == _quantized(model, tmp_path / "b.onnx", False, **options)

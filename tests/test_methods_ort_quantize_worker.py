"""The quantizer child saves only the weights ONNX Runtime's pre-processing changed (the parent judges
against them without loading the whole pre-processed model beside its own)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import shrinkray
from shrinkray.methods.ort_quantize_worker import _save_changed_weights


def _model(initializers: dict[str, np.ndarray]) -> onnx.ModelProto:
    graph = helper.make_graph([], "g", [], [], [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    return helper.make_model(graph)


def test_only_changed_or_renamed_weights_the_quantizer_rewrote_are_saved(tmp_path):
    rng = np.random.default_rng(0)
    same, moved, other = (rng.normal(size=(8, 8)).astype(np.float32) for _ in range(3))
    files = {
        "original": _model({"same": same, "moved": moved, "untouched": other}),
        "pre": _model({"same": same, "moved": moved * 3, "folded_new": other, "untouched": other * 2}),
        "quantized": _model({f"{n}_quantized": np.zeros((8, 8), np.int8) for n in ("same", "moved", "folded_new")}),
    }
    for name, model in files.items():
        onnx.save(model, tmp_path / f"{name}.onnx")
    target = tmp_path / "saw.onnx"
    _save_changed_weights(*(str(tmp_path / f"{n}.onnx") for n in files), str(target))
    saved = {t.name: numpy_helper.to_array(t) for t in onnx.load(target).graph.initializer}
    assert sorted(saved) == ["folded_new", "moved"]  # "untouched" changed but was not quantized
    np.testing.assert_array_equal(saved["moved"], moved * 3)


@pytest.mark.slow
def test_a_transposed_gemm_weight_is_judged_against_what_the_quantizer_saw():
    rng = np.random.default_rng(1)
    weight = rng.normal(0, 0.2, (32, 64)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="gemm", transB=1)], "gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(np.zeros(32, np.float32), "b")],
    )  # fmt: skip
    variant = shrinkray.shrink(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), "dynamic-int8")
    [change] = variant.changes
    assert change.name == "w" and change.shape == [32, 64]
    assert 0 < change.relative_rms_error < 0.02  # int8 per-tensor of a normal weight: ~0.7%

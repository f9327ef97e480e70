"""weights-int4's standard decode: few full-size float steps, because ONNX Runtime's constant folding holds
every intermediate of every decode until it ends (the session's peak while opening), and the same values."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import shrinkray
from shrinkray.graph.sessions import open_session

K, N = 256, 96


def _matmul(opset: int) -> tuple[onnx.ModelProto, np.ndarray]:
    """y = x @ w with a few large values in w (kept exactly as outliers from opset 11)."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((K, N)).astype(np.float32)
    w.reshape(-1)[rng.choice(w.size, 40, replace=False)] *= 12.0
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [K, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [K, N])],
        [numpy_helper.from_array(w, "w")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model, w


def _full_size_float_steps(model: onnx.ModelProto) -> list[str]:
    """Decode nodes whose output is a float tensor as large as the weight (each a float copy while folding)."""
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    sizes = {}
    for info in inferred.graph.value_info:
        t = info.type.tensor_type
        if t.elem_type == TensorProto.FLOAT and all(d.HasField("dim_value") for d in t.shape.dim):
            sizes[info.name] = int(np.prod([d.dim_value for d in t.shape.dim]))
    return [n.op_type for n in model.graph.node if n.op_type != "MatMul" and
            (sizes.get(n.output[0]) == K * N or n.output[0] == "w")]  # fmt: skip


@pytest.mark.parametrize("symmetric", [False, True])
def test_standard_decode_makes_few_full_size_float_copies(symmetric):
    model, _ = _matmul(17)
    variant = shrinkray.shrink(model, "weights-int4", form="standard", symmetric=symmetric, min_elements=1)
    (change,) = variant.changes
    assert "outlier" in " ".join(t.name for t in variant.model.graph.initializer)  # the outliers are kept
    steps = _full_size_float_steps(variant.model)
    # Cast of the codes, Sub of the zero point, Mul by the scales, Mul undoing the activation-aware scales,
    # ScatterND of the outliers, the Reshape to the weight's layout and its Transpose (the float unpacking
    # made 11 full-size and 7 half-size: nibbles split by Floor in float, the weight reshaped around ScatterND)
    assert len(steps) <= 7, steps
    assert "Floor" not in steps


@pytest.mark.parametrize("optimized", [True, False])
def test_standard_decode_rebuilds_the_recorded_weight_at_every_opset(optimized):
    """The uint8 unpacking (opset 11+) and the float one (before) decode what the change record says."""
    for opset in (9, 17):
        model, w = _matmul(opset)
        variant = shrinkray.shrink(model, "weights-int4", form="standard", min_elements=1)
        (change,) = variant.changes
        y = open_session(variant.model, optimized=optimized).run(None, {"x": np.eye(K, dtype=np.float32)})[0]
        err = np.abs(y.astype(np.float64) - w)
        assert err.max() == pytest.approx(change.max_abs_error, rel=1e-4, abs=1e-6)
        assert np.sqrt(np.mean(err**2)) == pytest.approx(change.rms_error, rel=1e-4)
        ops = {n.op_type for n in variant.model.graph.node}
        assert ("BitShift" in ops) == (opset >= 11) and ("Floor" in ops) == (opset < 11)

"""float16 storage: which weights it may convert (float16 reaches +-65504; inf/NaN do not count)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import shrinkray


def _two_weights(first: np.ndarray, second: np.ndarray) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "A"], ["h"]), helper.make_node("MatMul", ["h", "B"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        [numpy_helper.from_array(first, "A"), numpy_helper.from_array(second, "B")],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def test_a_weight_beyond_float16s_range_is_kept_and_non_finite_values_do_not_count():
    rng = np.random.default_rng(0)
    too_big, with_inf = (rng.normal(0, 0.1, (64, 64)).astype(np.float32) for _ in range(2))
    too_big[5, 7] = -70000.0  # beyond float16 in the negative direction
    with_inf[1, 2], with_inf[3, 4] = np.inf, np.nan  # not values float16 must reach
    variant = shrinkray.shrink(_two_weights(too_big, with_inf), "float16", min_elements=16)
    assert [c.name for c in variant.changes] == ["B"]
    assert any("Kept 'A'" in w and "65504" in w for w in variant.warnings), variant.warnings

"""Small models that are harmless to load and hostile to run: built by code, never committed."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _model(nodes, inputs, outputs, initializers) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "bomb", inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def memory_bomb(side: int = 60000) -> onnx.ModelProto:
    """A 16 KB model whose ConstantOfShape builds a side x side float tensor (14 GB at 60000) at run time."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])
    weight = numpy_helper.from_array(np.random.default_rng(0).random((64, 64), dtype=np.float32), "w")
    shape = numpy_helper.from_array(np.array([side, side], dtype=np.int64), "shape")
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["big"], value=one),
        helper.make_node("ReduceSum", ["big"], ["total"], keepdims=0),
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Add", ["xw", "total"], ["y"]),
    ]
    return _model(nodes, [x], [y], [weight, shape])


def loop_bomb(trips: int = 10**12) -> onnx.ModelProto:
    """A Loop that runs ``trips`` times (for ever, in practice)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Add", ["v_in", "one"], ["v_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [1, 64])],
        [numpy_helper.from_array(np.ones((1,), np.float32), "one")],
    )  # fmt: skip
    weight = numpy_helper.from_array(np.random.default_rng(0).random((64, 64), dtype=np.float32), "w")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Loop", ["trips", "cond", "xw"], ["y"], body=body),
    ]
    initializers = [weight, numpy_helper.from_array(np.array(trips, np.int64), "trips"),
                    numpy_helper.from_array(np.array(True), "cond")]  # fmt: skip
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        initializers,
    )

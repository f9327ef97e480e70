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


def batch_loop(per_extra_row: int) -> onnx.ModelProto:
    """x [batch, 64] -> y: a Loop of ``1 + (batch - 1) * per_extra_row`` trips, quick at batch 1 and as slow as
    one likes from batch 2 (parity judges batch 1; latency's batch sweep reaches the slow ones)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Add", ["v_in", "one"], ["v_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, ["batch", 64])],
        [numpy_helper.from_array(np.ones((1,), np.float32), "one")],
    )  # fmt: skip
    weight = numpy_helper.from_array(np.random.default_rng(0).random((64, 64), dtype=np.float32), "w")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["rows"], axis=0),
        helper.make_node("Sub", ["rows", "one_row"], ["extra"]),
        helper.make_node("Mul", ["extra", "per_row"], ["more"]),
        helper.make_node("Add", ["more", "one_row"], ["trips"]),
        helper.make_node("Loop", ["trips", "cond", "xw"], ["y"], body=body),
    ]
    initializers = [weight, numpy_helper.from_array(np.array(0, np.int64), "zero"),
                    numpy_helper.from_array(np.array(1, np.int64), "one_row"),
                    numpy_helper.from_array(np.array(per_extra_row, np.int64), "per_row"),
                    numpy_helper.from_array(np.array(True), "cond")]  # fmt: skip
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 64])],
        initializers,
    )


def slow_loop(trips: int, side: int = 384) -> onnx.ModelProto:
    """x [batch, side] -> y [batch, side], slow on purpose: a Loop of ``trips`` side x side MatMul + Tanh steps
    (about 1.3 ms each at 384 on one core here), whatever the batch. Its weights are ordinary initializers, so
    every method shrinks it."""
    rng = np.random.default_rng(0)

    def weight(name: str) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal((side, side)) / np.sqrt(side)).astype(np.float32), name)

    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("MatMul", ["s_in", "wb"], ["m"]),
         helper.make_node("Tanh", ["m"], ["s_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [side, side])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [side, side])],
        [weight("wb")],
    )  # fmt: skip
    nodes = [
        helper.make_node("Loop", ["trips", "cond", "s0"], ["s"], body=body),
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("MatMul", ["xw", "s"], ["y"]),
    ]
    initializers = [numpy_helper.from_array(np.array(trips, np.int64), "trips"),
                    numpy_helper.from_array(np.array(True), "cond"), weight("s0"), weight("w")]  # fmt: skip
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", side])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", side])],
        initializers,
    )


def first_run_seconds(model: onnx.ModelProto, batch: int = 4) -> float:
    """Seconds of a fresh one-thread session's first run of ``model`` on zeros of ``batch`` rows (as compare's
    first run of the original)."""
    import time

    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    shape = [batch, *[d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:]]]
    started = time.perf_counter()
    session.run(None, {model.graph.input[0].name: np.zeros(shape, np.float32)})
    return time.perf_counter() - started


def slow_loop_for(seconds: float) -> tuple[onnx.ModelProto, float]:
    """A :func:`slow_loop` whose first run takes about ``seconds`` on this machine, and what its first run took."""
    probe = first_run_seconds(slow_loop(100))
    model = slow_loop(max(int(100 * seconds / max(probe, 1e-3)), 1))
    return model, first_run_seconds(model)

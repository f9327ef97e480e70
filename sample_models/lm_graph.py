"""A GPT-style decoder written as an ONNX graph with onnx.helper, from given weights, in the optimum /
transformers.js layouts: ``cached`` (past_key_values.N.key/value in, present.N.key/value out), ``plain``
(input_ids, attention_mask -> logits) and ``merged`` (the cached graph read with a ``use_cache_branch`` flag).

Shared by sample_models/build_lm.py (weights trained with torch) and tests/lm_models.py (seeded weights):
one graph, so the sample and the test decoders differ only in what they learned. The attention's causal
mask works with a past: query i (at position past + i) sees keys 0..past + i, and padding via the mask.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 9  # onnx 1.23 writes IR 14 by default; onnxruntime 1.31 refuses it


class _Graph:
    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[TensorProto] = []
        self.count = 0

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def const(self, stem: str, value, exact: bool = False) -> str:
        name = stem if exact else self.name(stem)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs) -> str:
        name = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [name], **attrs))
        return name


def layer_names(layer: int) -> list[str]:
    """The weights of one block, in the order a builder draws them."""
    return [f"h.{layer}.{n}" for n in ("ln_1.weight", "ln_1.bias", "attn.q", "attn.k", "attn.v", "attn.proj",
                                       "ln_2.weight", "ln_2.bias", "mlp.fc", "mlp.proj")]  # fmt: skip


def decoder_graph(weights: dict[str, np.ndarray], layers: int, heads: int, layout: str = "cached",
                  name: str = "decoder") -> onnx.ModelProto:  # fmt: skip
    """The decoder over ``weights`` (``wte`` [vocab, width], ``wpe`` [positions, width], per layer
    :func:`layer_names` with x @ W matrices, ``ln_f.weight/bias``, ``lm_head`` [width, vocab])."""
    if layout not in ("cached", "plain", "merged"):
        raise ValueError(f"unknown layout {layout}")
    g = _Graph()
    vocab, width = weights["wte"].shape
    head_dim = width // heads
    cached = layout != "plain"
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"])]  # fmt: skip
    if cached:
        inputs.append(helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch_size", "sequence_length"]))
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", "sequence_length", vocab])]

    def w(key: str) -> str:
        return g.const(key, weights[key].astype(np.float32), exact=True)

    zero, one, two = (g.const(s, np.array(v, np.int64)) for s, v in (("zero", 0), ("one", 1), ("two", 2)))
    x = g.op("Gather", [w("wte"), "input_ids"])
    if cached:
        positions = "position_ids"
    else:  # positions 0..sequence-1, the plain export's own
        positions = g.op("Range", [zero, g.op("Gather", [g.op("Shape", ["input_ids"]), one]), one])
    x = g.op("Add", [x, g.op("Gather", [w("wpe"), positions])])
    mask = g.op("Cast", [g.op("Unsqueeze", ["attention_mask", g.const("axes", np.array([1, 2], np.int64))])],
                to=TensorProto.BOOL)  # [batch, 1, 1, total]  # fmt: skip
    split = g.const("split", np.array([0, 0, heads, head_dim], np.int64))
    merge = g.const("merge", np.array([0, 0, width], np.int64))
    scale = g.const("scale", np.array(head_dim ** -0.5, np.float32))
    for layer in range(layers):
        ln1_g, ln1_b, wq, wk, wv, wo, ln2_g, ln2_b, fc, proj = layer_names(layer)
        h = g.op("LayerNormalization", [x, w(ln1_g), w(ln1_b)], axis=-1, epsilon=1e-5)
        q, k, v = (g.op("Transpose", [g.op("Reshape", [g.op("MatMul", [h, w(key)]), split])], perm=[0, 2, 1, 3])
                   for key in (wq, wk, wv))  # fmt: skip
        if cached:
            for which in ("key", "value"):
                past, present = f"past_key_values.{layer}.{which}", f"present.{layer}.{which}"
                inputs.append(helper.make_tensor_value_info(
                    past, TensorProto.FLOAT, ["batch_size", heads, "past_sequence_length", head_dim]))  # fmt: skip
                g.nodes.append(helper.make_node("Concat", [past, k if which == "key" else v], [present], axis=2))
                outputs.append(helper.make_tensor_value_info(
                    present, TensorProto.FLOAT, ["batch_size", heads, "total_sequence_length", head_dim]))  # fmt: skip
                k, v = (present, v) if which == "key" else (k, present)
        scores = g.op("Mul", [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]), scale])
        total = g.op("Gather", [g.op("Shape", [k]), two])
        start = g.op("Sub", [total, g.op("Gather", [g.op("Shape", [q]), two])])
        query_pos = g.op("Unsqueeze", [g.op("Range", [start, total, one]), g.const("ax", np.array([1], np.int64))])
        key_pos = g.op("Unsqueeze", [g.op("Range", [zero, total, one]), g.const("ax", np.array([0], np.int64))])
        allowed = g.op("And", [g.op("LessOrEqual", [key_pos, query_pos]), mask])
        scores = g.op("Where", [allowed, scores, g.const("neg", np.array(-1e9, np.float32))])
        attn = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        joined = g.op("Reshape", [g.op("Transpose", [attn], perm=[0, 2, 1, 3]), merge])
        x = g.op("Add", [x, g.op("MatMul", [joined, w(wo)])])
        h = g.op("LayerNormalization", [x, w(ln2_g), w(ln2_b)], axis=-1, epsilon=1e-5)
        x = g.op("Add", [x, g.op("MatMul", [g.op("Relu", [g.op("MatMul", [h, w(fc)])]), w(proj)])])
    h = g.op("LayerNormalization", [x, w("ln_f.weight"), w("ln_f.bias")], axis=-1, epsilon=1e-5)
    g.nodes.append(helper.make_node("MatMul", [h, w("lm_head")], ["logits"]))
    if layout == "merged":
        # optimum's merged decoder picks one of two branches with this flag; here both paths are this graph,
        # so the flag is read (and must be fed) without changing the result
        inputs.append(helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1]))
        flag = g.op("Cast", ["use_cache_branch"], to=TensorProto.FLOAT)
        g.nodes.append(helper.make_node("Mul", [flag, g.const("nothing", np.array([0.0], np.float32))], ["branch_read"]))
        outputs.append(helper.make_tensor_value_info("branch_read", TensorProto.FLOAT, [1]))
    graph = helper.make_graph(g.nodes, f"{name}_{layout}", inputs, outputs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="shrinkray-samples")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model

"""Small decoder LMs built here with onnx.helper, in the optimum / transformers.js layouts.

Not our sample (sample_models/tiny_lm is trained with torch): these are built from scratch, GPT-style
(token + position embeddings, pre-norm attention with a causal mask that works with a past, an MLP, a head),
with seeded weights scaled so the next token is usually decided by a clear margin, in three layouts:
``cached`` (past_key_values.N.key/value in, present.N.* out), ``plain`` (input_ids, attention_mask -> logits)
and ``merged`` (the cached graph with a ``use_cache_branch`` flag, as optimum's merged decoders take it).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 9


class _Graph:
    def __init__(self, seed: int) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[TensorProto] = []
        self.rng = np.random.default_rng(seed)
        self.count = 0

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def const(self, stem: str, value) -> str:
        name = self.name(stem)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, stem: str, shape: tuple[int, ...], scale: float) -> str:
        return self.const(stem, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def op(self, op_type: str, inputs: list[str], stem: str | None = None, outputs: int = 1, **attrs) -> str | list[str]:
        names = [self.name(stem or op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, names, **attrs))
        return names[0] if outputs == 1 else names


def decoder_lm(layout: str = "cached", *, vocab: int = 512, width: int = 64, layers: int = 2, heads: int = 4,
               seed: int = 0, logit_scale: float = 3.0) -> onnx.ModelProto:  # fmt: skip
    """A GPT-style decoder in ``layout`` (cached, plain or merged); same seed, same weights in every layout."""
    g = _Graph(seed)
    head_dim = width // heads
    cached = layout in ("cached", "merged")
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"])]  # fmt: skip
    if cached:
        inputs.append(helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch_size", "sequence_length"]))
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", "sequence_length", vocab])]
    wte = g.weight("wte", (vocab, width), 1.0)
    wpe = g.weight("wpe", (256, width), 0.3)
    ids = "input_ids"
    x = g.op("Gather", [wte, ids])
    if cached:
        positions = "position_ids"
    else:  # positions 0..sequence-1, the plain export's own
        seq = g.op("Gather", [g.op("Shape", [ids]), g.const("one", np.array(1, np.int64))])
        positions = g.op("Range", [g.const("zero", np.array(0, np.int64)), seq, g.const("step", np.array(1, np.int64))])
    x = g.op("Add", [x, g.op("Gather", [wpe, positions])])
    mask_bool = g.op("Cast", [g.op("Unsqueeze", ["attention_mask", g.const("axes", np.array([1, 2], np.int64))])],
                     to=TensorProto.BOOL)  # [b, 1, 1, total]  # fmt: skip
    split_shape = g.const("split", np.array([0, 0, heads, head_dim], np.int64))
    merge_shape = g.const("merge", np.array([0, 0, width], np.int64))
    for layer in range(layers):
        h = _norm(g, x, width)
        q, k, v = (g.op("Transpose", [g.op("Reshape", [g.op("MatMul", [h, g.weight(f"w{t}", (width, width), width ** -0.5)]),
                                                   split_shape])], perm=[0, 2, 1, 3]) for t in "qkv")  # fmt: skip
        if cached:
            for which, new in (("key", k), ("value", v)):
                past = f"past_key_values.{layer}.{which}"
                inputs.append(helper.make_tensor_value_info(past, TensorProto.FLOAT,
                                                            ["batch_size", heads, "past_sequence_length", head_dim]))  # fmt: skip
                full = g.op("Concat", [past, new], axis=2)
                present = f"present.{layer}.{which}"
                g.nodes.append(helper.make_node("Identity", [full], [present]))
                outputs.append(helper.make_tensor_value_info(present, TensorProto.FLOAT,
                                                             ["batch_size", heads, "total_sequence_length", head_dim]))  # fmt: skip
                k, v = (present, v) if which == "key" else (k, present)
        scores = g.op("Mul", [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                              g.const("scale", np.array(head_dim ** -0.5, np.float32))])  # fmt: skip
        total = g.op("Gather", [g.op("Shape", [k]), g.const("two", np.array(2, np.int64))])
        length = g.op("Gather", [g.op("Shape", [q]), g.const("two", np.array(2, np.int64))])
        start = g.op("Sub", [total, length])
        one = g.const("one", np.array(1, np.int64))
        query_pos = g.op("Unsqueeze", [g.op("Range", [start, total, one]), g.const("ax", np.array([1], np.int64))])
        key_pos = g.op("Unsqueeze", [g.op("Range", [g.const("zero", np.array(0, np.int64)), total, one]),
                                     g.const("ax", np.array([0], np.int64))])  # fmt: skip
        causal = g.op("LessOrEqual", [key_pos, query_pos])  # [s, t]
        allowed = g.op("And", [causal, mask_bool])
        scores = g.op("Where", [allowed, scores, g.const("neg", np.array(-1e9, np.float32))])
        attn = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        merged = g.op("Reshape", [g.op("Transpose", [attn], perm=[0, 2, 1, 3]), merge_shape])
        x = g.op("Add", [x, g.op("MatMul", [merged, g.weight("wo", (width, width), width ** -0.5)])])
        h = _norm(g, x, width)
        up = g.op("Relu", [g.op("MatMul", [h, g.weight("w1", (width, 4 * width), width ** -0.5)])])
        x = g.op("Add", [x, g.op("MatMul", [up, g.weight("w2", (4 * width, width), (4 * width) ** -0.5)])])
    h = _norm(g, x, width)
    g.nodes.append(helper.make_node("MatMul", [h, g.weight("lm_head", (width, vocab), logit_scale * width ** -0.5)], ["logits"]))
    if layout == "merged":
        inputs.append(helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1]))
        # optimum's merged decoder picks a branch with this flag; here both paths are the same graph, so the
        # flag is read (and must be fed) without changing the result
        flag = g.op("Cast", [g.op("Cast", ["use_cache_branch"], to=TensorProto.FLOAT)], to=TensorProto.FLOAT)
        g.nodes.append(helper.make_node("Mul", [flag, g.const("zero_f", np.array([0.0], np.float32))], ["flag_zero"]))
        outputs.append(helper.make_tensor_value_info("flag_zero", TensorProto.FLOAT, [1]))
    graph = helper.make_graph(g.nodes, f"decoder_{layout}", inputs, outputs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tests.lm_models")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def _norm(g: _Graph, x: str, width: int) -> str:
    return g.op("LayerNormalization", [x, g.const("gamma", np.ones(width, np.float32)),
                                       g.const("beta", np.zeros(width, np.float32))], axis=-1, epsilon=1e-5)  # fmt: skip


def damaged(model: onnx.ModelProto, noise: float, seed: int = 1) -> onnx.ModelProto:
    """A copy with every weight matrix disturbed by ``noise`` times its own spread: a variant that changes
    what the model writes, for tests that a verdict fails it."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    rng = np.random.default_rng(seed)
    for tensor in out.graph.initializer:
        array = numpy_helper.to_array(tensor)
        if array.dtype == np.float32 and array.ndim == 2 and array.size >= 1024:
            array = array + rng.standard_normal(array.shape).astype(np.float32) * noise * float(array.std())
            tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))
    return out

"""Build the deterministic sample ONNX models used to exercise Shrink Ray Studio.

The models are small (<= 3 MB each) but shaped like real exports: weights are
either trained with numpy on a toy task or drawn from realistic distributions
(He/Xavier scale, per-output-channel scale variation, a few large outliers),
so quantization and pruning code sees the kind of tensors it meets in practice.
Each model also carries one or more structural quirks (subgraphs, Constant-node
weights, shared weights, float16, old opsets, odd dims, ai.onnx.ml ops).

Only onnx + numpy are needed to build; onnxruntime is used by ``--verify``.
Everything is seeded, so running the script twice yields byte-identical files.

    python sample_models/build.py              # build into this folder
    python sample_models/build.py --out DIR    # build elsewhere
    python sample_models/build.py --verify     # also run each model in onnxruntime
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

PRODUCER_NAME = "shrinkray-samples"
PRODUCER_VERSION = "1.0"
IR_VERSION = 10  # onnx 1.23 writes IR 14 by default; onnxruntime 1.31 refuses that.
DEFAULT_OPSET = 17
LARGE_TENSOR_ELEMENTS = 16384  # default weights-only quantization threshold
BASE_SEED = 20240601

Feeds = dict[str, np.ndarray]


# --------------------------------------------------------------------------- helpers


class GraphBuilder:
    """Collects nodes/initializers and hands out unique names, to keep builders short."""

    def __init__(self, prefix: str = "", numeric_names: bool = False) -> None:
        self.prefix = prefix
        self.numeric_names = numeric_names  # PyTorch-legacy style tensor names: "12", "13", ...
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []
        self._counter = 0

    def _next(self) -> int:
        self._counter += 1
        return self._counter

    def init(self, name: str, array: np.ndarray) -> str:
        """Add an initializer and return its name."""
        name = self.prefix + name
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def const(self, name: str, array: np.ndarray) -> str:
        """Add a Constant node holding ``array`` (weights outside the initializer list)."""
        name = self.prefix + name
        tensor = numpy_helper.from_array(np.asarray(array), name)
        self.nodes.append(
            helper.make_node(
                "Constant",
                [],
                [name],
                name=f"{self.prefix}Constant_{self._next()}",
                value=tensor,
            )
        )
        return name

    def op(
        self,
        op_type: str,
        inputs: Sequence[str],
        out: str | Sequence[str] | None = None,
        *,
        n_out: int = 1,
        domain: str | None = None,
        **attrs: object,
    ) -> str | list[str]:
        """Append a node; returns its output name (or list of names if several)."""
        k = self._next()
        if out is None:
            base = str(k) if self.numeric_names else f"{self.prefix}{op_type.lower()}_{k}"
            outs = [base] if n_out == 1 else [f"{base}_{i}" for i in range(n_out)]
        elif isinstance(out, str):
            outs = [out]
        else:
            outs = list(out)
        self.nodes.append(
            helper.make_node(
                op_type,
                list(inputs),
                outs,
                name=f"{self.prefix}{op_type}_{k}",
                domain=domain,
                **attrs,
            )
        )
        return outs[0] if len(outs) == 1 else outs

    def graph(
        self,
        name: str,
        inputs: Sequence[onnx.ValueInfoProto],
        outputs: Sequence[onnx.ValueInfoProto],
    ) -> onnx.GraphProto:
        return helper.make_graph(self.nodes, name, list(inputs), list(outputs), self.initializers)


def f32(x: object) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def i64(x: object) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def realistic_weight(
    rng: np.random.Generator,
    shape: Sequence[int],
    *,
    out_axis: int,
    fan_in: int | None = None,
    std: float | None = None,
    gain: float = float(np.sqrt(2.0)),
    spread: float = 0.25,
    laplace: bool = False,
    outliers: float = 0.0,
) -> np.ndarray:
    """Weight that looks trained: He-scaled, per-output-channel scale spread, rare outliers.

    ``spread`` is the sigma of the log-normal per-channel scale; ``outliers`` is the
    fraction of entries replaced by values at 10-20x the base std (random sign).
    """
    if std is None:
        if fan_in is None:
            raise ValueError("give fan_in or std")
        std = gain / np.sqrt(fan_in)
    base = rng.laplace(0.0, 1.0 / np.sqrt(2.0), shape) if laplace else rng.standard_normal(shape)
    ch_shape = [1] * len(shape)
    ch_shape[out_axis] = shape[out_axis]
    scale = rng.lognormal(0.0, spread, shape[out_axis]).reshape(ch_shape)
    w = base * std * scale
    if outliers > 0:
        n = max(1, round(outliers * w.size))
        idx = rng.choice(w.size, n, replace=False)
        w.flat[idx] = rng.uniform(10.0, 20.0, n) * std * rng.choice([-1.0, 1.0], n)
    return w.astype(np.float32)


def small_bias(rng: np.random.Generator, n: int, std: float = 0.01) -> np.ndarray:
    return (rng.standard_normal(n) * std).astype(np.float32)


def norm_params(rng: np.random.Generator, n: int, outlier_dims: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """LayerNorm/BatchNorm gamma near 1 (optionally a few large 'outlier feature' dims), small beta."""
    gamma = 1.0 + 0.05 * rng.standard_normal(n)
    if outlier_dims:
        gamma[rng.choice(n, outlier_dims, replace=False)] *= rng.uniform(3.0, 6.0, outlier_dims)
    beta = 0.02 * rng.standard_normal(n)
    return gamma.astype(np.float32), beta.astype(np.float32)


def vi(name: str, elem_type: int, shape: Sequence[int | str | None] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, shape)


def finalize(
    graph: onnx.GraphProto,
    *,
    opset: int = DEFAULT_OPSET,
    extra_opsets: Sequence[tuple[str, int]] = (),
    doc: str = "",
    metadata: dict[str, str] | None = None,
) -> onnx.ModelProto:
    """Wrap a graph into a model with pinned IR version/producer and run the full checker."""
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    model = helper.make_model(graph, opset_imports=opsets, producer_name=PRODUCER_NAME, doc_string=doc)
    model.ir_version = IR_VERSION
    model.producer_version = PRODUCER_VERSION
    for key, value in sorted((metadata or {}).items()):
        model.metadata_props.append(onnx.StringStringEntryProto(key=key, value=value))
    onnx.checker.check_model(model, full_check=True)
    return model


# --------------------------------------------------------------------------- 1. mlp


def _toy_classification(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """10-class task: class clusters in an 8-d latent space, warped non-linearly into 64 features."""
    centers = rng.standard_normal((10, 8)) * 1.6
    mix = rng.standard_normal((8, 64)) / np.sqrt(8)
    feat_scale = rng.lognormal(0.0, 0.5, 64)
    labels = rng.integers(0, 10, n)
    z = centers[labels] + rng.standard_normal((n, 8))
    x = (np.tanh(z @ mix) + 0.15 * (z @ mix) ** 2 + 0.1 * rng.standard_normal((n, 64))) * feat_scale
    return x, labels


def build_mlp(rng: np.random.Generator) -> onnx.ModelProto:
    """MLP 64-384-384-256-10 trained with SGD so its weights carry real structure."""
    x_all, y_all = _toy_classification(rng, 6000)
    mean, std = (
        x_all.mean(0),
        x_all.std(0),
    )  # normalisation is folded into the first layer below
    xn = (x_all - mean) / std
    x_tr, y_tr, x_te, y_te = xn[:5000], y_all[:5000], xn[5000:], y_all[5000:]

    # Layouts mirror the ONNX nodes: W1 [out,in] for Gemm(transB=1), others [in,out].
    params = {
        "w1": realistic_weight(rng, (384, 64), out_axis=0, fan_in=64).astype(np.float64),
        "b1": np.zeros(384),
        "w2": realistic_weight(rng, (384, 384), out_axis=1, fan_in=384, outliers=0.001).astype(np.float64),
        "b2": np.zeros(384),
        "w3": realistic_weight(rng, (384, 256), out_axis=1, fan_in=384).astype(np.float64),
        "b3": np.zeros(256),
        "w4": realistic_weight(rng, (256, 10), out_axis=1, fan_in=256, gain=1.0).astype(np.float64),
        "b4": np.zeros(10),
    }
    velocity = {k: np.zeros_like(v) for k, v in params.items()}
    lr, momentum, wd, batch = 0.02, 0.9, 1e-4, 128

    def forward(x: np.ndarray) -> tuple[np.ndarray, ...]:
        a1 = x @ params["w1"].T + params["b1"]
        h1 = np.maximum(a1, 0)
        a2 = h1 @ params["w2"] + params["b2"]
        h2 = np.maximum(a2, 0)
        a3 = h2 @ params["w3"] + params["b3"]
        h3 = np.maximum(a3, 0)
        return a1, h1, a2, h2, a3, h3, h3 @ params["w4"] + params["b4"]

    for _ in range(400):
        idx = rng.integers(0, len(x_tr), batch)
        x, y = x_tr[idx], y_tr[idx]
        a1, h1, a2, h2, a3, h3, logits = forward(x)
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        p[np.arange(batch), y] -= 1.0
        g = p / batch
        grads = {"w4": h3.T @ g, "b4": g.sum(0)}
        g = (g @ params["w4"].T) * (a3 > 0)
        grads.update(w3=h2.T @ g, b3=g.sum(0))
        g = (g @ params["w3"].T) * (a2 > 0)
        grads.update(w2=h1.T @ g, b2=g.sum(0))
        g = (g @ params["w2"].T) * (a1 > 0)
        grads.update(w1=g.T @ x, b1=g.sum(0))
        for k, grad in grads.items():
            velocity[k] = momentum * velocity[k] - lr * (grad + wd * params[k])
            params[k] += velocity[k]
    acc = float((forward(x_te)[-1].argmax(1) == y_te).mean())

    # Fold the input standardisation into layer 1 so the model takes raw features.
    w1 = params["w1"] / std
    b1 = params["b1"] - w1 @ mean
    gb = GraphBuilder()
    w1n, b1n = gb.init("fc1.weight", f32(w1)), gb.init("fc1.bias", f32(b1))
    w2n, b2n = (
        gb.init("fc2.weight", f32(params["w2"])),
        gb.init("fc2.bias", f32(params["b2"])),
    )
    w3n, b3n = (
        gb.init("fc3.weight", f32(params["w3"])),
        gb.init("fc3.bias", f32(params["b3"])),
    )
    w4n, b4n = (
        gb.init("head.weight", f32(params["w4"])),
        gb.init("head.bias", f32(params["b4"])),
    )
    h = gb.op("Relu", [gb.op("Gemm", ["features", w1n, b1n], transB=1)])
    h = gb.op("Relu", [gb.op("Add", [gb.op("MatMul", [h, w2n]), b2n])])
    h = gb.op("Relu", [gb.op("Gemm", [h, w3n, b3n])])
    gb.op("Add", [gb.op("MatMul", [h, w4n]), b4n], out="logits")
    gb.op("Softmax", ["logits"], out="probs", axis=1)
    graph = gb.graph(
        "mlp",
        [vi("features", TensorProto.FLOAT, ["batch", 64])],
        [
            vi("logits", TensorProto.FLOAT, ["batch", 10]),
            vi("probs", TensorProto.FLOAT, ["batch", 10]),
        ],
    )
    return finalize(
        graph,
        doc="MLP classifier trained with numpy SGD on a synthetic 10-class task.",
        metadata={"test_accuracy": f"{acc:.3f}"},
    )


# --------------------------------------------------------------------------- 2. cnn


def build_cnn(rng: np.random.Generator) -> onnx.ModelProto:
    """Small CNN: conv+BN+pool stem, plain/strided/depthwise/pointwise convs, GAP, Gemm head."""
    gb = GraphBuilder()

    def conv_w(name: str, cout: int, cin: int, k: int, **kw: object) -> str:
        w = realistic_weight(rng, (cout, cin, k, k), out_axis=0, fan_in=cin * k * k, spread=0.4, **kw)
        return gb.init(name, w)

    # stem: Conv without bias followed by BatchNormalization (typical PyTorch export before folding)
    h = gb.op("Conv", ["image", conv_w("stem.conv.weight", 32, 3, 3)], pads=[1, 1, 1, 1])
    gamma, beta = norm_params(rng, 32)
    bn = [
        gb.init("stem.bn.weight", gamma),
        gb.init("stem.bn.bias", beta),
        gb.init("stem.bn.running_mean", f32(0.1 * rng.standard_normal(32))),
        gb.init("stem.bn.running_var", f32(rng.lognormal(0.0, 0.3, 32))),
    ]
    h = gb.op("Relu", [gb.op("BatchNormalization", [h, *bn], epsilon=1e-5)])
    h = gb.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])  # 16x16
    h = gb.op(
        "Conv",
        [
            h,
            conv_w("block1.conv.weight", 64, 32, 3),
            gb.init("block1.conv.bias", small_bias(rng, 64)),
        ],
        pads=[1, 1, 1, 1],
    )
    h = gb.op("Relu", [h])
    h = gb.op(
        "Conv",
        [
            h,
            conv_w("block2.conv.weight", 128, 64, 3, outliers=0.001),
            gb.init("block2.conv.bias", small_bias(rng, 128)),
        ],
        pads=[1, 1, 1, 1],
        strides=[2, 2],
    )  # 8x8
    h = gb.op("Relu", [h])
    h = gb.op(
        "Conv",
        [
            h,
            conv_w("block3.dw.weight", 128, 1, 3),
            gb.init("block3.dw.bias", small_bias(rng, 128)),
        ],
        pads=[1, 1, 1, 1],
        group=128,
    )
    h = gb.op("Relu", [h])
    h = gb.op(
        "Conv",
        [
            h,
            conv_w("block3.pw.weight", 256, 128, 1),
            gb.init("block3.pw.bias", small_bias(rng, 256)),
        ],
    )
    h = gb.op("Flatten", [gb.op("GlobalAveragePool", [gb.op("Relu", [h])])], axis=1)
    fc_w = realistic_weight(rng, (10, 256), out_axis=0, fan_in=256, gain=1.0)
    gb.op(
        "Gemm",
        [h, gb.init("fc.weight", fc_w), gb.init("fc.bias", small_bias(rng, 10))],
        out="scores",
        transB=1,
    )
    graph = gb.graph(
        "cnn",
        [vi("image", TensorProto.FLOAT, ["N", 3, 32, 32])],
        [vi("scores", TensorProto.FLOAT, ["N", 10])],
    )
    return finalize(
        graph,
        doc="Small CNN with per-output-channel weight scales, BN, depthwise conv.",
    )


# --------------------------------------------------------------------------- 3. transformer


def build_transformer(rng: np.random.Generator) -> onnx.ModelProto:
    """Tiny post-LN BERT-style encoder (2 layers, d=64, 4 heads, FFN 512, erf-GELU)."""
    vocab, max_pos, d, heads, d_ff, n_layers = 2000, 128, 64, 4, 512, 2
    head_dim = d // heads
    gb = GraphBuilder()

    # token embeddings: per-row norm variation (frequent vs. rare tokens) plus a few outliers
    emb = realistic_weight(rng, (vocab, d), out_axis=0, std=0.05, spread=0.3, outliers=0.0005)
    pos = realistic_weight(rng, (max_pos, d), out_axis=0, std=0.02, spread=0.1)
    tok = gb.op("Gather", [gb.init("embeddings.word_embeddings.weight", emb), "input_ids"])
    seq_len = gb.op("Gather", [gb.op("Shape", ["input_ids"]), gb.init("const_one", i64(1))], axis=0)
    pos_ids = gb.op("Range", [gb.init("const_zero", i64(0)), seq_len, "const_one"])
    pos_emb = gb.op("Gather", [gb.init("embeddings.position_embeddings.weight", pos), pos_ids])

    def layer_norm(x: str, name: str, outlier_dims: int = 0) -> str:
        gamma, beta = norm_params(rng, d, outlier_dims)
        return gb.op(
            "LayerNormalization",
            [x, gb.init(f"{name}.weight", gamma), gb.init(f"{name}.bias", beta)],
            axis=-1,
            epsilon=1e-12,
        )

    def linear(x: str, name: str, d_in: int, d_out: int, outliers: float = 0.0) -> str:
        w = realistic_weight(rng, (d_in, d_out), out_axis=1, fan_in=d_in, gain=1.0, outliers=outliers)
        return gb.op(
            "Add",
            [
                gb.op("MatMul", [x, gb.init(f"{name}.weight", w)]),
                gb.init(f"{name}.bias", small_bias(rng, d_out)),
            ],
        )

    x = layer_norm(gb.op("Add", [tok, pos_emb]), "embeddings.LayerNorm")

    # additive attention mask [batch, 1, 1, seq]: 0 for tokens, -10000 for padding
    mask = gb.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    mask = gb.op(
        "Mul",
        [
            gb.op("Sub", [gb.init("const_one_f", f32(1.0)), mask]),
            gb.init("const_neg_big", f32(-10000.0)),
        ],
    )
    mask = gb.op("Unsqueeze", [mask, gb.init("const_axes_1_2", i64([1, 2]))])
    split_shape = gb.init("const_split_heads", i64([0, 0, heads, head_dim]))
    merge_shape = gb.init("const_merge_heads", i64([0, 0, d]))
    inv_sqrt_dh = gb.init("const_inv_sqrt_dh", f32(1.0 / np.sqrt(head_dim)))
    half, one_f = gb.init("const_half", f32(0.5)), "const_one_f"
    inv_sqrt2 = gb.init("const_inv_sqrt2", f32(1.0 / np.sqrt(2.0)))

    for i in range(n_layers):
        p = f"encoder.layer.{i}"
        q = gb.op(
            "Transpose",
            [gb.op("Reshape", [linear(x, f"{p}.attention.query", d, d), split_shape])],
            perm=[0, 2, 1, 3],
        )
        k = gb.op(
            "Transpose",
            [gb.op("Reshape", [linear(x, f"{p}.attention.key", d, d), split_shape])],
            perm=[0, 2, 3, 1],
        )
        v = gb.op(
            "Transpose",
            [gb.op("Reshape", [linear(x, f"{p}.attention.value", d, d), split_shape])],
            perm=[0, 2, 1, 3],
        )
        scores = gb.op("Add", [gb.op("Mul", [gb.op("MatMul", [q, k]), inv_sqrt_dh]), mask])
        ctx = gb.op("MatMul", [gb.op("Softmax", [scores], axis=-1), v])
        ctx = gb.op("Reshape", [gb.op("Transpose", [ctx], perm=[0, 2, 1, 3]), merge_shape])
        attn = linear(ctx, f"{p}.attention.output", d, d)
        x = layer_norm(gb.op("Add", [attn, x]), f"{p}.attention.LayerNorm", outlier_dims=1)
        ff = linear(x, f"{p}.intermediate", d, d_ff)
        erf = gb.op("Erf", [gb.op("Mul", [ff, inv_sqrt2])])
        gelu = gb.op("Mul", [gb.op("Mul", [ff, half]), gb.op("Add", [erf, one_f])])
        ff = linear(gelu, f"{p}.output", d_ff, d, outliers=0.001)
        x = layer_norm(gb.op("Add", [ff, x]), f"{p}.output.LayerNorm")

    gb.op("Identity", [x], out="last_hidden_state")
    first = gb.op("Gather", [x, gb.init("const_zero_idx", i64(0))], axis=1)
    gb.op("Tanh", [linear(first, "pooler.dense", d, d)], out="pooled")
    graph = gb.graph(
        "transformer",
        [
            vi("input_ids", TensorProto.INT64, ["batch", "seq"]),
            vi("attention_mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [
            vi("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", d]),
            vi("pooled", TensorProto.FLOAT, ["batch", d]),
        ],
    )
    return finalize(graph, doc=f"Tiny BERT-style encoder; seq must be <= {max_pos}, ids < {vocab}.")


# --------------------------------------------------------------------------- 4. rnn


def build_rnn(rng: np.random.Generator) -> onnx.ModelProto:
    """LSTM(32->128) -> GRU(128->128, linear_before_reset) -> Gemm head on the final hidden state."""
    hidden, d_in = 128, 32
    gb = GraphBuilder()

    def rnn_weights(name: str, gates: int, d_x: int, forget_gate: int | None) -> list[str]:
        w = realistic_weight(rng, (1, gates * hidden, d_x), out_axis=1, std=0.08, spread=0.3)
        r = realistic_weight(
            rng,
            (1, gates * hidden, hidden),
            out_axis=1,
            std=0.06,
            spread=0.3,
            outliers=0.001,
        )
        b = 0.05 * rng.standard_normal((1, 2 * gates * hidden))
        if forget_gate is not None:  # forget-gate bias around +1, as after training
            b[0, forget_gate * hidden : (forget_gate + 1) * hidden] += 1.0
        return [
            gb.init(f"{name}.W", w),
            gb.init(f"{name}.R", r),
            gb.init(f"{name}.B", f32(b)),
        ]

    # ONNX gate order: LSTM i,o,f,c (forget = 2); GRU z,r,h
    lstm_y, _ = gb.op(
        "LSTM",
        ["sequence", *rnn_weights("lstm", 4, d_in, 2)],
        n_out=2,
        hidden_size=hidden,
    )
    lstm_y = gb.op("Squeeze", [lstm_y, gb.init("axes_1", i64([1]))])  # [seq, 1, batch, h] -> [seq, batch, h]
    _, gru_h = gb.op(
        "GRU",
        [lstm_y, *rnn_weights("gru", 3, hidden, None)],
        ["", "gru_Y_h"],  # full Y sequence output deliberately omitted
        hidden_size=hidden,
        linear_before_reset=1,
    )
    gb.op("Squeeze", [gru_h, gb.init("axes_0", i64([0]))], out="final_hidden")
    head_w = realistic_weight(rng, (10, hidden), out_axis=0, fan_in=hidden, gain=1.0)
    gb.op(
        "Gemm",
        [
            "final_hidden",
            gb.init("head.weight", head_w),
            gb.init("head.bias", small_bias(rng, 10)),
        ],
        out="logits",
        transB=1,
    )
    graph = gb.graph(
        "rnn",
        [vi("sequence", TensorProto.FLOAT, ["seq", "batch", d_in])],
        [
            vi("final_hidden", TensorProto.FLOAT, ["batch", hidden]),
            vi("logits", TensorProto.FLOAT, ["batch", 10]),
        ],
    )
    return finalize(graph, doc="LSTM + GRU stack with a Gemm classification head.")


# --------------------------------------------------------------------------- 5. subgraph


def build_subgraph(rng: np.random.Generator) -> onnx.ModelProto:
    """If with per-branch weights (initializers and a Constant), then a Loop whose body holds a weight."""
    d = 128
    main = GraphBuilder()

    # then-branch: subgraph initializer + Constant-node weight, both >= 16384 elements
    ga = GraphBuilder(prefix="then/")
    h = ga.op(
        "MatMul",
        [
            "x",
            ga.init(
                "W1",
                realistic_weight(rng, (d, 256), out_axis=1, fan_in=d, outliers=0.001),
            ),
        ],
    )
    h = ga.op("Relu", [ga.op("Add", [h, ga.init("b1", small_bias(rng, 256))])])
    ga.op(
        "MatMul",
        [
            h,
            ga.const("W2", realistic_weight(rng, (256, d), out_axis=1, fan_in=256, gain=1.0)),
        ],
        out="then/out",
    )
    then_g = ga.graph("then_branch", [], [vi("then/out", TensorProto.FLOAT, [1, d])])

    # else-branch: two subgraph initializers
    gb = GraphBuilder(prefix="else/")
    h = gb.op(
        "Tanh",
        [
            gb.op(
                "MatMul",
                [
                    "x",
                    gb.init(
                        "W1",
                        realistic_weight(rng, (d, 192), out_axis=1, fan_in=d, gain=1.0),
                    ),
                ],
            )
        ],
    )
    gb.op(
        "MatMul",
        [
            h,
            gb.init(
                "W2",
                realistic_weight(rng, (192, d), out_axis=1, fan_in=192, gain=1.0, laplace=True),
            ),
        ],
        out="else/out",
    )
    else_g = gb.graph("else_branch", [], [vi("else/out", TensorProto.FLOAT, [1, d])])

    branch = main.op("If", ["use_branch_a"], out="branch_out", then_branch=then_g, else_branch=else_g)

    # Loop body: its own initializer plus an outer-scope initializer from the main graph
    w_out = main.init("loop_W_out", realistic_weight(rng, (256, d), out_axis=1, fan_in=256, gain=1.0))
    lb = GraphBuilder(prefix="body/")
    h = lb.op(
        "Tanh",
        [
            lb.op(
                "MatMul",
                [
                    "body/h_in",
                    lb.init(
                        "W_in",
                        realistic_weight(
                            rng,
                            (d, 256),
                            out_axis=1,
                            fan_in=d,
                            gain=1.0,
                            outliers=0.001,
                        ),
                    ),
                ],
            )
        ],
    )
    h = lb.op("Add", [lb.op("MatMul", [h, w_out]), "body/h_in"])
    lb.op("Tanh", [h], out="body/h_out")
    lb.op("Identity", ["body/cond_in"], out="body/cond_out")
    body = lb.graph(
        "loop_body",
        [
            vi("body/iter", TensorProto.INT64, []),
            vi("body/cond_in", TensorProto.BOOL, []),
            vi("body/h_in", TensorProto.FLOAT, [1, d]),
        ],
        [
            vi("body/cond_out", TensorProto.BOOL, []),
            vi("body/h_out", TensorProto.FLOAT, [1, d]),
        ],
    )
    trip = main.const("loop_trip_count", i64(3))
    cond = main.const("loop_cond", np.array(True))
    main.op("Loop", [trip, cond, branch], out="y", body=body)
    graph = main.graph(
        "subgraph",
        [vi("x", TensorProto.FLOAT, [1, d]), vi("use_branch_a", TensorProto.BOOL, [])],
        [
            vi("y", TensorProto.FLOAT, [1, d]),
            vi("branch_out", TensorProto.FLOAT, [1, d]),
        ],
    )
    return finalize(
        graph,
        doc="Control flow: weights inside If branches and a Loop body (trip count 3).",
    )


# --------------------------------------------------------------------------- 6. fp16


def build_fp16(rng: np.random.Generator) -> onnx.ModelProto:
    """MLP stored entirely in float16 (inputs, weights, outputs), with a LayerNormalization."""
    gb = GraphBuilder()

    def h16(a: np.ndarray) -> np.ndarray:
        return np.asarray(a).astype(np.float16)

    w1 = gb.init("fc1.weight", h16(realistic_weight(rng, (256, 128), out_axis=0, fan_in=128)))
    h = gb.op("Gemm", ["x", w1, gb.init("fc1.bias", h16(small_bias(rng, 256)))], transB=1)
    gamma, beta = norm_params(rng, 256)
    h = gb.op(
        "LayerNormalization",
        [h, gb.init("ln.weight", h16(gamma)), gb.init("ln.bias", h16(beta))],
        axis=-1,
        epsilon=1e-5,
    )
    w2 = gb.init(
        "fc2.weight",
        h16(realistic_weight(rng, (256, 256), out_axis=1, fan_in=256, outliers=0.001)),
    )
    h = gb.op(
        "Relu",
        [
            gb.op(
                "Add",
                [
                    gb.op("MatMul", [gb.op("Relu", [h]), w2]),
                    gb.init("fc2.bias", h16(small_bias(rng, 256))),
                ],
            )
        ],
    )
    w3 = gb.init(
        "head.weight",
        h16(realistic_weight(rng, (256, 16), out_axis=1, fan_in=256, gain=1.0)),
    )
    gb.op(
        "Add",
        [gb.op("MatMul", [h, w3]), gb.init("head.bias", h16(small_bias(rng, 16)))],
        out="logits",
    )
    gb.op("Softmax", ["logits"], out="probs", axis=-1)
    graph = gb.graph(
        "fp16_mlp",
        [vi("x", TensorProto.FLOAT16, ["batch", 128])],
        [
            vi("logits", TensorProto.FLOAT16, ["batch", 16]),
            vi("probs", TensorProto.FLOAT16, ["batch", 16]),
        ],
    )
    return finalize(graph, doc="float16 MLP: every tensor, input and output is float16.")


# --------------------------------------------------------------------------- 7. shared_weight


def build_shared_weight(rng: np.random.Generator) -> onnx.ModelProto:
    """Tied embedding (Gather + Transpose/MatMul), a matrix used by two MatMuls, a Constant weight,
    and an initializer that is also a graph input (overridable)."""
    vocab, d = 512, 256
    gb = GraphBuilder()
    emb = gb.init(
        "tied_embedding",
        realistic_weight(rng, (vocab, d), out_axis=0, std=0.05, spread=0.3, outliers=0.0005),
    )
    w_shared = gb.init(
        "shared_proj",
        realistic_weight(rng, (d, d), out_axis=1, fan_in=d, outliers=0.001),
    )
    w_override = gb.init("W_override", realistic_weight(rng, (d, d), out_axis=1, fan_in=d, gain=1.0))
    h = gb.op("Gather", [emb, "input_ids"])
    h = gb.op(
        "Relu",
        [
            gb.op(
                "Add",
                [gb.op("MatMul", [h, w_shared]), gb.init("b1", small_bias(rng, d))],
            )
        ],
    )
    h = gb.op(
        "Relu",
        [
            gb.op(
                "Add",
                [gb.op("MatMul", [h, w_shared]), gb.init("b2", small_bias(rng, d))],
            )
        ],
    )
    w_const = gb.const(
        "const_proj",
        realistic_weight(rng, (d, d), out_axis=1, fan_in=d, gain=1.0, laplace=True),
    )
    h = gb.op("MatMul", [h, w_const])
    gb.op("Tanh", [gb.op("MatMul", [h, w_override])], out="hidden")
    gb.op("MatMul", ["hidden", gb.op("Transpose", [emb], perm=[1, 0])], out="logits")
    graph = gb.graph(
        "shared_weight",
        [
            vi("input_ids", TensorProto.INT64, ["batch", "seq"]),
            vi("W_override", TensorProto.FLOAT, [d, d]),  # also an initializer -> optional, overridable
        ],
        [
            vi("logits", TensorProto.FLOAT, ["batch", "seq", vocab]),
            vi("hidden", TensorProto.FLOAT, ["batch", "seq", d]),
        ],
    )
    return finalize(
        graph,
        doc="Weight sharing, Constant-node weight and an overridable initializer.",
    )


# --------------------------------------------------------------------------- 8. tree


def _fit_tree(
    rng: np.random.Generator, x: np.ndarray, y: np.ndarray, n_classes: int, depth: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Randomised full-depth tree (best gini over 3 random features x 3 quantile cuts), BFS order."""
    n_internal = 2**depth - 1
    feats = np.zeros(n_internal, dtype=np.int64)
    thresholds = np.zeros(n_internal, dtype=np.float32)
    members: dict[int, np.ndarray] = {0: np.arange(len(y))}

    def gini(idx: np.ndarray) -> float:
        if len(idx) == 0:
            return 0.0
        p = np.bincount(y[idx], minlength=n_classes) / len(idx)
        return float(len(idx) * (1.0 - (p**2).sum()))

    for node in range(n_internal):
        idx = members[node]
        best: tuple[float, int, float] | None = None
        for f in rng.choice(x.shape[1], 3, replace=False):
            qs = np.quantile(x[idx, f], [0.25, 0.5, 0.75]) if len(idx) else [0.0]
            for q in qs:
                thr = float(np.float32(q))
                go_left = x[idx, f] <= thr
                score = gini(idx[go_left]) + gini(idx[~go_left])
                if best is None or score < best[0]:
                    best = (score, int(f), thr)
        assert best is not None
        _, feats[node], thresholds[node] = best
        go_left = x[idx, feats[node]] <= thresholds[node]
        members[2 * node + 1], members[2 * node + 2] = idx[go_left], idx[~go_left]
    leaf_probs = np.zeros((2**depth, n_classes))
    for leaf in range(2**depth):
        counts = np.bincount(y[members[n_internal + leaf]], minlength=n_classes) + 1.0  # Laplace smoothing
        leaf_probs[leaf] = counts / counts.sum()
    return feats, thresholds, leaf_probs


def build_tree(rng: np.random.Generator) -> onnx.ModelProto:
    """Random-forest style TreeEnsembleClassifier (20 trees, depth 4) behind a Sub/Mul scaler."""
    n_trees, depth, n_feat, n_classes = 20, 4, 8, 3
    offsets, scales = rng.normal(0, 5, n_feat), rng.lognormal(0, 1, n_feat)
    raw = rng.standard_normal((3000, n_feat)) * scales + offsets
    z = (raw - offsets) / scales
    score = z[:, 0] + 0.7 * z[:, 1] ** 2 - z[:, 2] * z[:, 3] + 0.3 * rng.standard_normal(len(z))
    y = np.digitize(score, np.quantile(score, [1 / 3, 2 / 3]))
    mean, std = raw.mean(0), raw.std(0)
    x = ((raw - mean) / std).astype(np.float32)

    n_internal, n_nodes = 2**depth - 1, 2 ** (depth + 1) - 1
    a: dict[str, list] = {k: [] for k in (
        "nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_values", "nodes_modes",
        "nodes_truenodeids", "nodes_falsenodeids", "class_treeids", "class_nodeids", "class_ids", "class_weights",
    )}  # fmt: skip
    ensemble_probs = np.zeros((len(x), n_classes))
    for t in range(n_trees):
        boot = rng.integers(0, len(y), len(y))
        feats, thresholds, leaf_probs = _fit_tree(rng, x[boot], y[boot], n_classes, depth)
        node_of = np.zeros(len(x), dtype=np.int64)  # route all samples to score the ensemble
        for _ in range(depth):
            left = x[np.arange(len(x)), feats[node_of]] <= thresholds[node_of]
            node_of = np.where(left, 2 * node_of + 1, 2 * node_of + 2)
        ensemble_probs += leaf_probs[node_of - n_internal] / n_trees
        for node in range(n_nodes):
            internal = node < n_internal
            a["nodes_treeids"].append(t)
            a["nodes_nodeids"].append(node)
            a["nodes_featureids"].append(int(feats[node]) if internal else 0)
            a["nodes_values"].append(float(thresholds[node]) if internal else 0.0)
            a["nodes_modes"].append("BRANCH_LEQ" if internal else "LEAF")
            a["nodes_truenodeids"].append(2 * node + 1 if internal else 0)
            a["nodes_falsenodeids"].append(2 * node + 2 if internal else 0)
            if not internal:
                for c in range(n_classes):
                    a["class_treeids"].append(t)
                    a["class_nodeids"].append(node)
                    a["class_ids"].append(c)
                    a["class_weights"].append(float(np.float32(leaf_probs[node - n_internal, c] / n_trees)))

    gb = GraphBuilder()
    h = gb.op("Sub", ["X", gb.init("scaler.offset", f32(mean))])
    h = gb.op("Mul", [h, gb.init("scaler.scale", f32(1.0 / std))])
    gb.op(
        "TreeEnsembleClassifier",
        [h],
        ["label", "probabilities"],
        domain="ai.onnx.ml",
        classlabels_int64s=list(range(n_classes)),
        post_transform="NONE",
        **a,
    )
    graph = gb.graph(
        "tree_ensemble",
        [vi("X", TensorProto.FLOAT, ["N", n_feat])],
        [
            vi("label", TensorProto.INT64, ["N"]),
            vi("probabilities", TensorProto.FLOAT, ["N", n_classes]),
        ],
    )
    return finalize(
        graph,
        extra_opsets=[("ai.onnx.ml", 3)],
        doc="Tree ensemble (ai.onnx.ml), no ZipMap.",
        metadata={"train_accuracy": f"{(ensemble_probs.argmax(1) == y).mean():.3f}"},
    )


# --------------------------------------------------------------------------- 9. messy


def build_messy(rng: np.random.Generator) -> onnx.ModelProto:
    """Old-exporter quirks: opset 11, all weights in Constant nodes, numeric tensor names,
    unnamed/'?' dims, int64 scalar input, shape-arithmetic Reshape, float + int64 outputs."""
    gb = GraphBuilder(numeric_names=True)
    w1 = gb.const(
        "onnx::MatMul_101",
        realistic_weight(rng, (64, 384), out_axis=1, fan_in=64, outliers=0.001),
    )
    b1 = gb.const("fc1.bias", small_bias(rng, 384))
    w_aux = gb.const(
        "onnx::MatMul_102",
        realistic_weight(rng, (16, 384), out_axis=1, fan_in=16, gain=1.0),
    )
    w2 = gb.const("onnx::MatMul_103", realistic_weight(rng, (384, 128), out_axis=1, fan_in=384))
    b2 = gb.const("fc2.bias", small_bias(rng, 128))
    w3 = gb.const(
        "head.weight",
        realistic_weight(rng, (10, 128), out_axis=0, fan_in=128, gain=1.0),
    )
    b3 = gb.const("head.bias", small_bias(rng, 10))

    h = gb.op("Add", [gb.op("MatMul", ["input.1", w1]), b1])
    h = gb.op("Relu", [gb.op("Add", [h, gb.op("MatMul", ["aux", w_aux])])])
    h = gb.op("Mul", [h, gb.op("Cast", ["scale"], to=TensorProto.FLOAT)])  # int64 scalar used as a factor
    # x.view(x.size(0), -1) as legacy PyTorch exported it
    n = gb.op("Gather", [gb.op("Shape", [h]), gb.const("200", i64(0))], axis=0)
    shape = gb.op(
        "Concat",
        [gb.op("Unsqueeze", [n], axes=[0]), gb.const("201", i64([-1]))],
        axis=0,
    )
    h = gb.op("Reshape", [h, shape])
    h = gb.op("Relu", [gb.op("Add", [gb.op("MatMul", [h, w2]), b2])])
    gb.op("Gemm", [h, w3, b3], out="output", transB=1)
    gb.op("ArgMax", ["output"], out="label", axis=1, keepdims=0)
    gb.op("Softmax", ["output"], out="probs", axis=1)  # opset-11 Softmax (coerces to 2-D)
    graph = gb.graph(
        "torch-jit-export",
        [
            vi("input.1", TensorProto.FLOAT, [None, 64]),  # dim with neither dim_value nor dim_param
            vi("aux", TensorProto.FLOAT, ["?", 16]),
            vi("scale", TensorProto.INT64, []),
        ],
        [
            vi("output", TensorProto.FLOAT, [None, 10]),
            vi("label", TensorProto.INT64, [None]),
            vi("probs", TensorProto.FLOAT, [None, None]),  # rank only, no dim info
        ],
    )
    return finalize(graph, opset=11, doc="Legacy-export quirks; all weights are Constant nodes.")


# --------------------------------------------------------------------------- registry


def _ids(rng: np.random.Generator, high: int, batch: int, seq: int) -> np.ndarray:
    return rng.integers(0, high, (batch, seq)).astype(np.int64)


def _transformer_feeds(rng: np.random.Generator) -> list[Feeds]:
    mask = np.ones((2, 12), np.int64)
    mask[1, 8:] = 0
    return [{"input_ids": _ids(rng, 2000, 2, 12), "attention_mask": mask}]


@dataclass(frozen=True)
class Sample:
    """One sample model: file name, builder, README text, and sample feeds for smoke tests."""

    filename: str
    build: Callable[[np.random.Generator], onnx.ModelProto]
    demonstrates: str
    feeds: Callable[[np.random.Generator], list[Feeds]]


SAMPLES: list[Sample] = [
    Sample(
        "mlp.onnx",
        build_mlp,
        "Numpy-trained classifier (accuracy in metadata_props); Gemm (transB=1 and transB=0) and "
        "MatMul+Add layers; two outputs; outliers in `fc2.weight`; input standardisation folded into fc1.",
        lambda r: [{"features": r.standard_normal((4, 64)).astype(np.float32)}],
    ),
    Sample(
        "cnn.onnx",
        build_cnn,
        "Conv without bias + BatchNormalization, MaxPool, stride-2 conv, depthwise (group=128) and 1x1 "
        "convs, GlobalAveragePool/Flatten/Gemm; per-output-channel weight scales (log-normal sigma 0.4).",
        lambda r: [{"image": r.standard_normal((2, 3, 32, 32)).astype(np.float32)}],
    ),
    Sample(
        "transformer.onnx",
        build_transformer,
        "BERT-style encoder: Gather embeddings, Shape/Range position ids, 4-head attention with additive "
        "int64 mask, LayerNormalization (opset 17, one outlier gamma per attention LN), erf-GELU FFN, "
        "pooler; Q/K/V/O (4096 elems) stay below the quantization threshold, FFN/embedding above.",
        _transformer_feeds,
    ),
    Sample(
        "rnn.onnx",
        build_rnn,
        "LSTM then GRU (linear_before_reset=1, omitted optional output), Squeeze, Gemm head; "
        "`lstm.W` is exactly 16384 elements (threshold boundary).",
        lambda r: [{"sequence": r.standard_normal((9, 3, 32)).astype(np.float32)}],
    ),
    Sample(
        "subgraph.onnx",
        build_subgraph,
        "If with weights as subgraph initializers and a Constant node inside the then-branch; "
        "branches read outer-scope `x`; Loop (trip count 3 from a Constant) whose body has its own "
        "initializer and also uses an outer-scope initializer.",
        lambda r: [
            {
                "x": r.standard_normal((1, 128)).astype(np.float32),
                "use_branch_a": np.array(flag),
            }
            for flag in (True, False)
        ],
    ),
    Sample(
        "fp16.onnx",
        build_fp16,
        "Everything float16: inputs, outputs, weights, biases, LayerNormalization params; Gemm, MatMul+Add, "
        "Softmax; outliers in `fc2.weight`.",
        lambda r: [{"x": r.standard_normal((4, 128)).astype(np.float16)}],
    ),
    Sample(
        "shared_weight.onnx",
        build_shared_weight,
        "`tied_embedding` feeds both Gather and Transpose->MatMul (tied LM head); `shared_proj` feeds two "
        "MatMuls; `const_proj` is a Constant node; `W_override` is an initializer also listed as a graph "
        "input (optional/overridable).",
        lambda r: [
            {"input_ids": _ids(r, 512, 2, 10)},
            {
                "input_ids": _ids(r, 512, 2, 10),
                "W_override": (0.05 * r.standard_normal((256, 256))).astype(np.float32),
            },
        ],
    ),
    Sample(
        "tree.onnx",
        build_tree,
        "ai.onnx.ml TreeEnsembleClassifier (opset ml 3, 20 trees x depth 4, train accuracy in metadata_props) after a Sub/Mul scaler; "
        "int64 `label` + tensor `probabilities` (no ZipMap); nothing large enough to quantize.",
        lambda r: [{"X": (r.standard_normal((16, 8)) * 3).astype(np.float32)}],
    ),
    Sample(
        "messy.onnx",
        build_messy,
        "Opset 11; all weights in Constant nodes; numeric/`onnx::` tensor names; unnamed dim, `?` dim, "
        "output with only unnamed dims; int64 scalar input Cast to float as a scale; Shape/Gather/Unsqueeze(axes attr)/"
        "Concat/Reshape; float, int64 (ArgMax) and float outputs.",
        lambda r: [
            {
                "input.1": r.standard_normal((3, 64)).astype(np.float32),
                "aux": r.standard_normal((3, 16)).astype(np.float32),
                "scale": np.array(2, np.int64),
            }
        ],
    ),
]


# --------------------------------------------------------------------------- introspection / README


def _walk_graphs(graph: onnx.GraphProto, where: str = "main graph"):
    """Yield (graph, location) for the graph and every nested subgraph."""
    yield graph, where
    for node in graph.node:
        for attr in node.attribute:
            subs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
            for sub in subs:
                yield from _walk_graphs(sub, f"{node.op_type} `{node.name}`.{attr.name}")


def large_tensors(model: onnx.ModelProto, threshold: int = LARGE_TENSOR_ELEMENTS) -> list[tuple[str, list[int], str]]:
    """(name, shape, where held) for every tensor with >= threshold elements."""
    found = []
    for graph, where in _walk_graphs(model.graph):
        kind = "initializer" if where == "main graph" else f"subgraph initializer in {where}"
        graph_inputs = {v.name for v in graph.input}
        for t in graph.initializer:
            if int(np.prod(t.dims)) >= threshold:
                found.append((t.name, list(t.dims), kind + (" + graph input" if t.name in graph_inputs else "")))
        for node in graph.node:
            if node.op_type == "Constant":
                for attr in node.attribute:
                    if attr.name == "value" and int(np.prod(attr.t.dims)) >= threshold:
                        found.append(
                            (
                                node.output[0],
                                list(attr.t.dims),
                                f"Constant node in {where}",
                            )
                        )
    return found


def _type_str(value: onnx.ValueInfoProto) -> str:
    tt = value.type.tensor_type
    dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type).name if tt.elem_type else "?"
    if dtype == "object":
        dtype = "string"
    if not tt.HasField("shape"):
        return f"{dtype}[unknown rank]"
    dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "None") for d in tt.shape.dim]
    return f"{dtype}[{', '.join(dims)}]"


def signature(model: onnx.ModelProto) -> tuple[list[str], list[str]]:
    inits = {t.name for t in model.graph.initializer}
    ins = [
        f"`{v.name}`: {_type_str(v)}" + (" (initializer, overridable)" if v.name in inits else "")
        for v in model.graph.input
    ]
    outs = [f"`{v.name}`: {_type_str(v)}" for v in model.graph.output]
    return ins, outs


def op_types(model: onnx.ModelProto) -> list[str]:
    ops = set()
    for graph, _ in _walk_graphs(model.graph):
        ops.update(f"{n.domain}:{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type for n in graph.node)
    return sorted(ops)


def _size(n: int) -> str:
    return f"{n / 1024:,.0f} KiB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.2f} MiB"


def write_readme(out_dir: Path, built: list[tuple[Sample, onnx.ModelProto, int]]) -> None:
    lines = [
        "# Sample models",
        "",
        "Generated by `python sample_models/build.py` (onnx + numpy only, fixed seeds; rerunning it",
        "gives byte-identical files on the same platform). Do not edit by hand: change `build.py` and rerun.",
        "`python sample_models/build.py --verify` also runs every model in onnxruntime (CPU).",
        "",
        f"All models: IR version {IR_VERSION}, producer `{PRODUCER_NAME}`, ai.onnx opset {DEFAULT_OPSET} unless",
        "noted, pass `onnx.checker.check_model(full_check=True)`. Weights are trained (mlp) or drawn from",
        "realistic distributions (He/Xavier scale, per-output-channel log-normal scale spread, some",
        "Laplacian, ~0.1% outliers at 10-20x std in selected tensors); biases small, norm gammas near 1.",
        "In shapes, a name is a symbolic dim (`dim_param`) and `None` is a dim with neither value nor param.",
        "",
        "| File | Size | Opset | Inputs | Outputs | Ops | What it demonstrates |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for sample, model, nbytes in built:
        ins, outs = signature(model)
        opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
        lines.append(
            f"| `{sample.filename}` | {_size(nbytes)} | {opsets} | {'<br>'.join(ins)} | {'<br>'.join(outs)} | "
            f"{', '.join(op_types(model))} | {sample.demonstrates} |"
        )
    lines += [
        "",
        f"## Tensors with >= {LARGE_TENSOR_ELEMENTS} elements (weights-only quantization candidates)",
        "",
    ]
    lines += [
        "| File | Tensor | Shape | Elements | Held as |",
        "| --- | --- | --- | --- | --- |",
    ]
    for sample, model, _ in built:
        tensors = large_tensors(model)
        if not tensors:
            lines.append(f"| `{sample.filename}` | (none) | | | |")
        for name, shape, where in tensors:
            lines.append(f"| `{sample.filename}` | `{name}` | {shape} | {int(np.prod(shape))} | {where} |")
    lines.append("")
    (out_dir / "README.md").write_text("\n".join(lines), encoding="utf-8")


# --------------------------------------------------------------------------- main


def verify(path: Path, sample: Sample, seed: int) -> None:
    """Open the model in onnxruntime (CPU) and check every output on the sample feeds is finite."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3  # silence the expected "initializer appears in graph inputs" warning
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    for feeds in sample.feeds(np.random.default_rng(seed)):
        for name, value in zip([o.name for o in session.get_outputs()], session.run(None, feeds), strict=True):
            value = np.asarray(value)
            if value.dtype.kind == "f" and not np.isfinite(value).all():
                raise AssertionError(f"{path.name}: output {name} has non-finite values")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent,
        help="output directory",
    )
    parser.add_argument("--verify", action="store_true", help="run each model in onnxruntime afterwards")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    built = []
    for i, sample in enumerate(SAMPLES):
        model = sample.build(np.random.default_rng(BASE_SEED + i))  # independent seed per model
        data = model.SerializeToString()
        path = args.out / sample.filename
        path.write_bytes(data)
        built.append((sample, model, len(data)))
        digest = hashlib.sha256(data).hexdigest()[:12]
        print(f"{path.name:20s} {len(data):>10,d} bytes  sha256:{digest}")
        if args.verify:
            verify(path, sample, BASE_SEED + i)
    write_readme(args.out, built)
    total = sum(n for _, _, n in built)
    print(f"{'total':20s} {total:>10,d} bytes" + ("  (all verified in onnxruntime)" if args.verify else ""))


if __name__ == "__main__":
    main()

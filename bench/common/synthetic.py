"""The generated transformer-like float32 model several benchmarks use (~100 MB by default).

Built deterministically from a seed (``LARGE_SPEC``) into bench/out/ once and reused: a tied token
embedding, pre-LN layers with q/k/v/o and FFN MatMuls, LayerNormalization, erf-GELU; Gaussian weights
with per-channel scale spread and outliers (see bench/README.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parent.parent / "out"

#: ~100 MB: 12288 x 512 tied embedding (6.3 M) + 6 layers x 3.15 M + small tensors = 25.4 M floats.
LARGE_SPEC = {"vocab": 12288, "d": 512, "heads": 8, "d_ff": 2048, "layers": 6, "max_pos": 256, "seed": 20250607}


def _weight(
    rng: np.random.Generator,
    shape: tuple[int, ...],
    *,
    out_axis: int,
    std: float,
    spread: float = 0.25,
    outliers: float = 0.0,
    outlier_sigmas: tuple[float, float] = (10.0, 20.0),
) -> np.ndarray:
    """Trained-looking weight: Gaussian, log-normal per-output-channel scale, rare big outliers."""
    w = rng.standard_normal(shape, dtype=np.float32)
    ch = [1] * len(shape)
    ch[out_axis] = shape[out_axis]
    w *= (std * rng.lognormal(0.0, spread, shape[out_axis])).astype(np.float32).reshape(ch)
    if outliers > 0:
        n = max(1, round(outliers * w.size))
        idx = rng.choice(w.size, n, replace=False)
        w.flat[idx] = (rng.uniform(*outlier_sigmas, n) * std * rng.choice([-1.0, 1.0], n)).astype(np.float32)
    return w


def build_transformer(
    vocab: int, d: int, heads: int, d_ff: int, layers: int, max_pos: int, seed: int
) -> onnx.ModelProto:
    """Pre-LN transformer encoder with a tied LM head, IR 10, opset 17, every node named.

    Inputs: input_ids int64[batch, seq]. Outputs: logits [batch, seq, vocab] and
    last_hidden_state [batch, seq, d]. Outliers (values at 10-30x the tensor's std) go into
    the embedding, the attention output projections and the FFN down projections; Q/K/V and
    FFN up projections are clean Gaussians with per-channel scale spread.
    """
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    inits: list[TensorProto] = []
    count = [0]

    def init(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def op(op_type: str, inputs: list[str], out: str | None = None, **attrs: Any) -> str:
        count[0] += 1
        name = f"/{op_type}_{count[0]}"
        out = out or f"{name}_out"
        nodes.append(helper.make_node(op_type, inputs, [out], name=name, **attrs))
        return out

    def layer_norm(x: str, p: str) -> str:
        gamma = (1.0 + 0.05 * rng.standard_normal(d)).astype(np.float32)
        gamma[rng.integers(0, d)] *= 4.0  # one "outlier feature" dim, as in real LLMs
        beta = (0.02 * rng.standard_normal(d)).astype(np.float32)
        return op("LayerNormalization", [x, init(f"{p}.weight", gamma), init(f"{p}.bias", beta)], axis=-1, epsilon=1e-5)

    def linear(x: str, p: str, d_in: int, d_out: int, **kw: Any) -> str:
        w = _weight(rng, (d_in, d_out), out_axis=1, std=1.0 / np.sqrt(d_in), **kw)
        b = (0.01 * rng.standard_normal(d_out)).astype(np.float32)
        return op("Add", [op("MatMul", [x, init(f"{p}.weight", w)]), init(f"{p}.bias", b)])

    head_dim = d // heads
    emb = init("embed_tokens.weight", _weight(rng, (vocab, d), out_axis=0, std=0.05, spread=0.3, outliers=0.0003))
    pos = init("embed_positions.weight", _weight(rng, (max_pos, d), out_axis=0, std=0.02, spread=0.1))
    one = init("const.one", np.array(1, dtype=np.int64))
    seq = op("Gather", [op("Shape", ["input_ids"]), one], axis=0)
    pos_ids = op("Range", [init("const.zero", np.array(0, dtype=np.int64)), seq, one])
    x = op("Add", [op("Gather", [emb, "input_ids"]), op("Gather", [pos, pos_ids])])
    split = init("const.split_heads", np.array([0, 0, heads, head_dim], dtype=np.int64))
    merge = init("const.merge_heads", np.array([0, 0, d], dtype=np.int64))
    inv_sqrt_dh = init("const.inv_sqrt_dh", np.array(1.0 / np.sqrt(head_dim), dtype=np.float32))
    half = init("const.half", np.array(0.5, dtype=np.float32))
    one_f = init("const.one_f", np.array(1.0, dtype=np.float32))
    inv_sqrt2 = init("const.inv_sqrt2", np.array(1.0 / np.sqrt(2.0), dtype=np.float32))
    for i in range(layers):
        p = f"layers.{i}"
        h = layer_norm(x, f"{p}.attn_norm")
        q = op("Transpose", [op("Reshape", [linear(h, f"{p}.attn.q_proj", d, d), split])], perm=[0, 2, 1, 3])
        k = op("Transpose", [op("Reshape", [linear(h, f"{p}.attn.k_proj", d, d), split])], perm=[0, 2, 3, 1])
        v = op("Transpose", [op("Reshape", [linear(h, f"{p}.attn.v_proj", d, d), split])], perm=[0, 2, 1, 3])
        scores = op("Softmax", [op("Mul", [op("MatMul", [q, k]), inv_sqrt_dh])], axis=-1)
        ctx = op("Reshape", [op("Transpose", [op("MatMul", [scores, v])], perm=[0, 2, 1, 3]), merge])
        x = op("Add", [x, linear(ctx, f"{p}.attn.o_proj", d, d, outliers=0.001)])
        h = layer_norm(x, f"{p}.ffn_norm")
        up = linear(h, f"{p}.ffn.up_proj", d, d_ff)
        gelu = op("Mul", [op("Mul", [up, half]), op("Add", [op("Erf", [op("Mul", [up, inv_sqrt2])]), one_f])])
        x = op("Add", [x, linear(gelu, f"{p}.ffn.down_proj", d_ff, d, outliers=0.002, outlier_sigmas=(15.0, 30.0))])
    hidden = layer_norm(x, "final_norm")
    op("Identity", [hidden], out="last_hidden_state")
    op("MatMul", [hidden, op("Transpose", [emb], perm=[1, 0])], out="logits")
    graph = helper.make_graph(
        nodes,
        "bench_transformer",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])],
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", vocab]),
            helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", d]),
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="shrinkray-bench")
    model.ir_version = 10
    model.doc_string = f"Generated by bench/run.py: {json.dumps({'vocab': vocab, 'd': d, 'heads': heads, 'd_ff': d_ff, 'layers': layers, 'max_pos': max_pos, 'seed': seed})}"
    onnx.checker.check_model(model)
    return model


#: ~16 MB: 1536 x 512 tied embedding + 1 layer (the quick check of a benchmark on the ~100 MB model)
SMALL_SPEC = dict(LARGE_SPEC, vocab=1536, layers=1)
SIZES = ("100mb", "small")


def add_size_option(parser: argparse.ArgumentParser) -> None:
    """``--size``: which generated model a benchmark takes (:func:`sized_model`)."""
    parser.add_argument("--size", choices=SIZES, default="100mb",
                        help="the generated ~100 MB transformer (the target's model) or a ~16 MB one")  # fmt: skip


def sized_model(size: str) -> Path:
    """The generated ~100 MB transformer (``"100mb"``) or its ~16 MB twin (``"small"``), as benchmarks take them."""
    return generated_model(SMALL_SPEC, name="first_card_small_transformer") if size == "small" else generated_model()


def generated_model(spec: dict[str, int] | None = None, name: str = "synthetic_transformer") -> Path:
    """Build (once) the generated model into bench/out/ and return its path."""
    spec = spec or LARGE_SPEC
    tag = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:8]
    path = OUT / f"{name}_{tag}.onnx"
    if not path.exists():
        OUT.mkdir(parents=True, exist_ok=True)
        model = build_transformer(**spec)
        tmp = path.with_suffix(".onnx.tmp")
        tmp.write_bytes(model.SerializeToString())
        os.replace(tmp, path)
    return path

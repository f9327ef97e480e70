"""How the weights-int8 decode form affects inference latency (ONNX Runtime, CPU).

Builds a MatMul chain (default 6 layers of 1024x1024, batch 1), shrinks it
with each decode form, and times original and variants interleaved in one
process so machine noise hits them alike. Prints median latency and the
ratio to the original. Run: python bench/dequant_forms.py [--layers 6 --dim 1024]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import onnx
from onnx import helper, numpy_helper

import shrinkray
from shrinkray.graph.sessions import open_session


def matmul_chain(layers: int, dim: int, seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    prev = "x"
    for i in range(layers):
        w = (rng.standard_normal((dim, dim)) / np.sqrt(dim)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"h{i}"]))
        nodes.append(helper.make_node("Tanh", [f"h{i}"], [f"a{i}"]))
        prev = f"a{i}"
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", dim])],
        [helper.make_tensor_value_info(prev, onnx.TensorProto.FLOAT, ["batch", dim])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    model = matmul_chain(args.layers, args.dim)
    variants = {"original": model}
    for form in ("cast-mul", "dequantize-linear"):
        for symmetric in (True, False):
            v = shrinkray.shrink(model, "weights-int8", form=form, symmetric=symmetric)
            variants[f"{form} {'sym' if symmetric else 'asym'}"] = v.model
    sessions = {k: open_session(m, threads=1) for k, m in variants.items()}
    feed = {"x": np.random.default_rng(1).standard_normal((1, args.dim)).astype(np.float32)}
    times: dict[str, list[float]] = {k: [] for k in sessions}
    for s in sessions.values():
        for _ in range(10):
            s.run(None, feed)
    for _ in range(args.runs):
        for k, s in sessions.items():
            t = time.perf_counter()
            s.run(None, feed)
            times[k].append(time.perf_counter() - t)
    base = statistics.median(times["original"])
    print(f"{args.layers} x MatMul {args.dim}x{args.dim}, batch 1, 1 thread, median of {args.runs} interleaved runs")
    for k, ts in times.items():
        med = statistics.median(ts)
        print(f"  {k:28s} {med * 1e3:8.3f} ms   x{med / base:5.2f}")


if __name__ == "__main__":
    main()

"""How the weights-int4 storage form affects inference latency, per consumer op (ONNX Runtime, CPU).

For each consumer op (MatMul, Gemm, Conv, Gather) builds a small float32 model at opset 21,
shrinks it with every ``--form`` of weights-int4 (standard: plain ONNX decode folded at load;
contrib: MatMulNBits / GatherBlockQuantized; dequantize-linear: opset-21 DequantizeLinear with
block_size), and times original and variants interleaved in one process so machine noise hits
them alike. Prints median latency (ms) and the ratio to the original, with graph optimizations
on (ORT_ENABLE_ALL, what users run) and off, plus session creation time.

Run: python bench/int4_forms.py [--runs 200] [--threads 1] [--cases matmul,gemm,conv,gather]
     python bench/int4_forms.py --sweep 64,128,256,512,1024 [--rows 1,16]   # MatMul size: where MatMulNBits pays
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import shrinkray  # noqa: E402
from shrinkray.graph.sessions import open_session  # noqa: E402

FORMS = ["standard", "contrib", "dequantize-linear"]


def _model(nodes, inits, inputs, outputs) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "forms", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


def matmul_chain(layers: int, dim: int, rng) -> onnx.ModelProto:
    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        inits.append(numpy_helper.from_array((rng.standard_normal((dim, dim)) / np.sqrt(dim)).astype(np.float32), f"w{i}"))
        nodes += [helper.make_node("MatMul", [prev, f"w{i}"], [f"h{i}"]), helper.make_node("Tanh", [f"h{i}"], [f"a{i}"])]
        prev = f"a{i}"
    io = helper.make_tensor_value_info
    return _model(nodes, inits, [io("x", TensorProto.FLOAT, ["m", dim])], [io(prev, TensorProto.FLOAT, ["m", dim])])


def gemm_chain(layers: int, dim: int, rng) -> onnx.ModelProto:
    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        inits.append(numpy_helper.from_array((rng.standard_normal((dim, dim)) / np.sqrt(dim)).astype(np.float32), f"w{i}"))
        inits.append(numpy_helper.from_array((0.01 * rng.standard_normal(dim)).astype(np.float32), f"b{i}"))
        nodes += [
            helper.make_node("Gemm", [prev, f"w{i}", f"b{i}"], [f"h{i}"], transB=1),
            helper.make_node("Tanh", [f"h{i}"], [f"a{i}"]),
        ]
        prev = f"a{i}"
    io = helper.make_tensor_value_info
    return _model(nodes, inits, [io("x", TensorProto.FLOAT, ["m", dim])], [io(prev, TensorProto.FLOAT, ["m", dim])])


def conv_chain(layers: int, channels: int, rng) -> onnx.ModelProto:
    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((channels, channels, 3, 3)) / np.sqrt(9 * channels)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes += [
            helper.make_node("Conv", [prev, f"w{i}"], [f"h{i}"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", [f"h{i}"], [f"a{i}"]),
        ]
        prev = f"a{i}"
    io = helper.make_tensor_value_info
    shape = ["n", channels, 56, 56]
    return _model(nodes, inits, [io("x", TensorProto.FLOAT, shape)], [io(prev, TensorProto.FLOAT, shape)])


def gather_table(vocab: int, dim: int, rng) -> onnx.ModelProto:
    emb = (0.05 * rng.standard_normal((vocab, dim))).astype(np.float32)
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["rows"]), helper.make_node("Tanh", ["rows"], ["y"])]
    io = helper.make_tensor_value_info
    return _model(
        nodes,
        [numpy_helper.from_array(emb, "emb")],
        [io("ids", TensorProto.INT64, ["b", "s"])],
        [io("y", TensorProto.FLOAT, ["b", "s", dim])],
    )


def cases(rng) -> dict[str, tuple[onnx.ModelProto, list[dict[str, np.ndarray]]]]:
    """name -> (model, feeds); several feeds = several input sizes timed separately."""
    mm = matmul_chain(6, 1024, rng)
    gm = gemm_chain(6, 1024, rng)
    x1 = rng.standard_normal((1, 1024)).astype(np.float32)
    x128 = rng.standard_normal((128, 1024)).astype(np.float32)
    conv = conv_chain(4, 128, rng)
    ids = rng.integers(0, 32000, (1, 128)).astype(np.int64)
    return {
        "matmul": (mm, [{"x": x1}, {"x": x128}]),
        "gemm": (gm, [{"x": x1}, {"x": x128}]),
        "conv": (conv, [{"x": rng.standard_normal((1, 128, 56, 56)).astype(np.float32)}]),
        "gather": (gather_table(32000, 512, rng), [{"ids": ids}]),
    }


def describe(model: onnx.ModelProto, feed: dict[str, np.ndarray]) -> str:
    ops = sorted({n.op_type for n in model.graph.node if n.op_type not in ("Tanh", "Relu")})
    shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in feed.items())
    return f"{'/'.join(ops)} ({shapes})"


def time_case(name: str, model, feeds, args) -> list[str]:
    variants = {"original": model}
    for form in FORMS:
        v = shrinkray.shrink(model, "weights-int4", form=form)
        ops = sorted({n.op_type for n in v.model.graph.node} - {"Tanh", "Relu", "Constant"})
        variants[form] = v.model
        print(f"  {name} {form}: {len(v.changes)} tensors, ops {', '.join(ops)}", flush=True)
    lines = []
    for optimized in (True, False):
        sessions, created = {}, {}
        for key, m in variants.items():
            t = time.perf_counter()
            sessions[key] = open_session(m, optimized=optimized, threads=args.threads)
            created[key] = time.perf_counter() - t
        for feed in feeds:
            times: dict[str, list[float]] = {k: [] for k in sessions}
            for s in sessions.values():
                for _ in range(5):
                    s.run(None, feed)
            for _ in range(args.runs):
                for key, s in sessions.items():
                    t = time.perf_counter()
                    s.run(None, feed)
                    times[key].append(time.perf_counter() - t)
            base = statistics.median(times["original"])
            label = "on" if optimized else "off"
            row = [f"| {describe(model, feed)} | {label} |"]
            for key in variants:
                med = statistics.median(times[key])
                row.append(f" {med * 1e3:.3f} ms (x{med / base:.2f}) |")
            row.append(" " + ", ".join(f"{k} {created[k] * 1e3:.0f}" for k in variants) + " |")
            lines.append("".join(row))
            print(lines[-1], flush=True)
    return lines


def sweep(dims: list[int], rows: list[int], args) -> None:
    """MatMul chains of square weights of each size: the contrib (MatMulNBits) and standard (folded at load)
    forms against the float original, optimizations on, per input row count; interleaved, medians."""
    rng = np.random.default_rng(0)
    print(f"| weight | rows | original ms | standard | contrib | load {load()} |")
    print("| --- | --- | --- | --- | --- | --- |")
    for dim in dims:
        model = matmul_chain(6, dim, rng)
        variants = {"original": model}
        for form in ("standard", "contrib"):
            variants[form] = shrinkray.shrink(model, "weights-int4", form=form).model
        sessions = {k: open_session(m, optimized=True, threads=args.threads) for k, m in variants.items()}
        for n in rows:
            feed = {"x": rng.standard_normal((n, dim)).astype(np.float32)}
            times: dict[str, list[float]] = {k: [] for k in sessions}
            for s in sessions.values():
                for _ in range(20):
                    s.run(None, feed)
            for _ in range(args.runs):
                for key, s in sessions.items():
                    t = time.perf_counter()
                    for _ in range(BURST):
                        s.run(None, feed)
                    times[key].append(time.perf_counter() - t)
            base = statistics.median(times["original"])
            cells = [f"x{statistics.median(times[k]) / base:.2f}" for k in ("standard", "contrib")]
            print(f"| {dim}x{dim} (x6) | {n} | {base / BURST * 1e3:.4f} | {' | '.join(cells)} | {load()} |", flush=True)


#: Runs per timed burst in the sweep (short runs are timed in bursts, as compare does).
BURST = 10


def load() -> str:
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cases", default="matmul,gemm,conv,gather")
    parser.add_argument("--sweep", default="", help="comma list of square MatMul weight sizes: the size sweep only")
    parser.add_argument("--rows", default="1,16", help="input rows for --sweep")
    args = parser.parse_args()
    if args.sweep:
        sweep([int(d) for d in args.sweep.split(",")], [int(r) for r in args.rows.split(",")], args)
        return
    rng = np.random.default_rng(0)
    wanted = args.cases.split(",")
    print(f"weights-int4 forms, block 32 asymmetric, {args.threads} thread(s), median of {args.runs} interleaved runs")
    head = "| model (input) | graph optimizations | original | " + " | ".join(FORMS) + " | session creation ms |"
    lines = [head, "|" + " --- |" * (len(FORMS) + 4)]
    for name, (model, feeds) in cases(rng).items():
        if name in wanted:
            lines += time_case(name, model, feeds, args)
    print("\n".join(lines))


if __name__ == "__main__":
    main()

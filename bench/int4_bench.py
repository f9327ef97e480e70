"""weights-int4 against ONNX Runtime's 4-bit quantizer on transformers (size, hidden-state cosine, latency).

Models: the generated ~100 MB float32 transformer of bench/run.py (``synthetic``) and the real
all-MiniLM-L6-v2 built by bench/real_models.py (``minilm``, realistic sentences); ``--models``
also takes other bench/real_models.py keys (CNNs: ONNX Runtime's quantizer only touches MatMul).

Variants: ONNX Runtime's ``MatMulNBitsQuantizer`` (block 32, asymmetric, round to nearest: what
the transformers.js converter uses; needs ``pip install onnx-ir``) and weights-int4 with several
options. For each: raw file size relative to the original; per float output the cosine of the
whole tensor and of the worst row (vector along the last axis); the task check where the model
has one; median latency of ``--runs`` interleaved runs (ONNX Runtime CPU, 1 thread, all graph
optimizations) relative to the original; shrink time.

Run: python bench/int4_bench.py [--models synthetic,minilm] [--runs 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

import shrinkray  # noqa: E402
from shrinkray.validate import open_session  # noqa: E402

#: (label, weights-int4 options); "exclude" keeps the same tensors float as ONNX Runtime's quantizer does.
OURS = [
    ("int4 b32 (default: outliers + activation-aware)", {}),
    ("int4 b32 activation-aware, no outliers", {"outliers": 0}),
    ("int4 b32 outliers, data-free", {"activation_aware": False}),
    ("int4 b32 rescaled, data-free, no outliers (before)", {"outliers": 0, "activation_aware": False}),
    ("int4 b32 mse + outliers + activation-aware", {"rounding": "mse"}),
    ("int4 b64 (outliers + activation-aware)", {"block_size": 64}),
]


def ort_rtn(model: onnx.ModelProto, block: int = 32) -> onnx.ModelProto:
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    q = MatMulNBitsQuantizer(copy, block_size=block, is_symmetric=False)
    q.process()
    return q.model.model


def synthetic_case(seed: int = 0):
    import run as bench_run

    path = bench_run.generated_model()
    model = onnx.load(str(path))
    rng = np.random.default_rng(seed)
    vocab = bench_run.LARGE_SPEC["vocab"]
    ranks = rng.zipf(1.3, size=(4, 64)) % vocab  # Zipf-like token ids
    return model, {"input_ids": ranks.astype(np.int64)}, None


def real_case(key: str):
    import real_models as rm

    case = rm.Case(key)
    return onnx.load(str(case.path)), dict(case.prepared.parity_feeds), case


def output_cosines(ref: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    out = {}
    for name, a in ref.items():
        if not np.issubdtype(a.dtype, np.floating):
            continue
        a64, b64 = a.astype(np.float64), got[name].astype(np.float64)
        whole = float(np.dot(a64.ravel(), b64.ravel()) / (np.linalg.norm(a64) * np.linalg.norm(b64) + 1e-300))
        ra, rb = a64.reshape(-1, a64.shape[-1]), b64.reshape(-1, b64.shape[-1])
        rows = (ra * rb).sum(1) / (np.linalg.norm(ra, axis=1) * np.linalg.norm(rb, axis=1) + 1e-300)
        out[name] = {"cosine": whole, "worst_row_cosine": float(rows.min())}
    return out


def measure(key: str, args) -> list[dict]:
    model, feeds, case = synthetic_case() if key == "synthetic" else real_case(key)
    base_bytes = len(model.SerializeToString())
    variants: dict[str, tuple[onnx.ModelProto, float]] = {"original": (model, 0.0)}
    has_matmul = any(n.op_type == "MatMul" for n in model.graph.node)
    if has_matmul:
        t = time.perf_counter()
        variants["ORT MatMulNBits b32 RTN"] = (ort_rtn(model), time.perf_counter() - t)
    for label, opts in OURS:
        if args.variants and not any(v in label for v in args.variants.split(",")):
            continue
        t = time.perf_counter()
        v = shrinkray.shrink(model, "weights-int4", **opts)
        variants[label] = (v.model, time.perf_counter() - t)
    if has_matmul:  # the same tensors as ONNX Runtime's quantizer: MatMul weights only
        ort_names = _matmul_weights(model)
        others = [r.name for r in shrinkray.graph.find_weights(model) if r.name not in ort_names]
        t = time.perf_counter()
        v = shrinkray.shrink(model, "weights-int4", exclude=others or ["\0"])
        variants["int4 b32, MatMul weights only"] = (v.model, time.perf_counter() - t)
        t = time.perf_counter()
        v = shrinkray.shrink(model, "weights-int4", exclude=others or ["\0"], outliers=0, activation_aware=False)
        variants["int4 b32 data-free no outliers, MatMul weights only"] = (v.model, time.perf_counter() - t)
    print(f"{key}: {base_bytes / 1e6:.1f} MB, {len(variants) - 1} variants built", flush=True)
    sessions = {k: open_session(m, threads=1) for k, (m, _) in variants.items()}
    names = [o.name for o in sessions["original"].get_outputs()]
    ref = dict(zip(names, sessions["original"].run(names, feeds), strict=True))
    times: dict[str, list[float]] = {k: [] for k in sessions}
    for s in sessions.values():
        s.run(None, feeds)
    for _ in range(args.runs):
        for k, s in sessions.items():
            t = time.perf_counter()
            s.run(None, feeds)
            times[k].append(time.perf_counter() - t)
    base_ms = statistics.median(times["original"]) * 1e3
    rows = []
    for k, (m, secs) in variants.items():
        got = dict(zip(names, sessions[k].run(names, feeds), strict=True))
        row = {
            "model": key,
            "variant": k,
            "raw_ratio": len(m.SerializeToString()) / base_bytes,
            "outputs": output_cosines(ref, got),
            "latency_ms": statistics.median(times[k]) * 1e3,
            "latency_ratio": statistics.median(times[k]) * 1e3 / base_ms,
            "shrink_s": secs,
        }
        unopt = open_session(m, optimized=False, threads=1)  # valid without graph optimizations too
        row["unoptimized_cosine"] = output_cosines(ref, dict(zip(names, unopt.run(names, feeds), strict=True)))
        del unopt
        if case is not None:
            res = case.check(m)
            row["task"] = f"{res.agree}/{res.total}"
        rows.append(row)
        print(_line(row), flush=True)
    return rows


def _matmul_weights(model: onnx.ModelProto) -> set[str]:
    inits = {t.name for t in model.graph.initializer}
    return {n.input[1] for n in model.graph.node if n.op_type == "MatMul" and n.input[1] in inits}


def _line(row: dict) -> str:
    cos = "; ".join(
        f"{name[:24]} {c['cosine']:.5f} (worst row {c['worst_row_cosine']:.4f})" for name, c in row["outputs"].items()
    )
    task = f" | task {row['task']}" if "task" in row else ""
    return (
        f"| {row['model']} | {row['variant']} | {row['raw_ratio']:.1%} | {cos} | x{row['latency_ratio']:.2f} "
        f"({row['latency_ms']:.1f} ms) | {row['shrink_s']:.1f} s{task} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="synthetic,minilm")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--json", default="")
    parser.add_argument("--variants", default="", help="only our variants whose label contains one of these")
    args = parser.parse_args()
    rows = []
    for key in args.models.split(","):
        rows += measure(key, args)
    print("| model | variant | raw size | output cosine | latency (1 thread) | shrink time |")
    for row in rows:
        print(_line(row))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

"""What limits weights-int4's output quality, tensor by tensor, without rebuilding models.

One ONNX Runtime session of the original in which every weight is an overridable input (as
``auto`` does); each experiment feeds approximations of some tensors and measures the outputs
against the original: whole-tensor cosine and worst-row cosine per float output. Bytes are what
each encoding stores (codes, scales, zero points, extras), as a share of the float32 weights and
of the whole file.

Experiments (``--exp``):

* ``alone``: each tensor alone at the default int4 encoding: which tensors cost the most cosine.
* ``variants``: every tensor at once with several encodings (rounding, blocks, outliers, activation-
  aware scales, int8 for chosen tensors) -> raw size and cosine.

Run: python -m bench int4-quality --models synthetic,minilm --exp alone,variants
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

from common import results as bench_results  # noqa: E402  (main's `results` is the JSON it extends)

from shrinkray.graph.sessions import open_session  # noqa: E402
from shrinkray.graph.weights import find_weights  # noqa: E402


def load_case(key: str):
    if key == "synthetic":
        from common import synthetic

        model = onnx.load(str(synthetic.generated_model()))
        rng = np.random.default_rng(0)
        vocab = synthetic.LARGE_SPEC["vocab"]
        feeds = {"input_ids": (rng.zipf(1.3, size=(4, 64)) % vocab).astype(np.int64)}
        calib = {"input_ids": (np.random.default_rng(1).zipf(1.3, size=(4, 64)) % vocab).astype(np.int64)}
        return model, feeds, calib, None
    from common import real_models as rm

    case = rm.Case(key)
    feeds = dict(case.prepared.parity_feeds)
    return onnx.load(str(case.path)), feeds, None, case


class Probe:
    """The original with every candidate weight overridable, plus the activations feeding each weight's consumer."""

    def __init__(self, model: onnx.ModelProto, refs, feeds) -> None:
        self.refs = refs
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        inits = {t.name: t for t in copy.graph.initializer}
        self.acts: dict[str, str] = {}
        outputs = {o.name for o in copy.graph.output}
        for r in refs:
            t = inits[r.name]
            copy.graph.input.append(helper.make_tensor_value_info(r.name, t.data_type, list(t.dims)))
            c = r.consumers[0]
            if c.op_type in ("MatMul", "Gemm") and c.input_index == 1 and len(r.consumers) == 1:
                act = c.node.input[0]
                self.acts[r.name] = act
                if act not in outputs:
                    copy.graph.output.append(helper.make_tensor_value_info(act, onnx.TensorProto.FLOAT, None))
                    outputs.add(act)
        self.model = copy
        self.session = open_session(copy, threads=2)
        self.names = [o.name for o in self.session.get_outputs()]
        self.final = [o.name for o in model.graph.output]
        self.feeds = feeds
        self.ref = self.run({})

    def run(self, override: dict[str, np.ndarray], feeds=None) -> dict[str, np.ndarray]:
        f = dict(feeds or self.feeds)
        for r in self.refs:
            f[r.name] = override.get(r.name, r.array())
        return dict(zip(self.names, self.session.run(None, f), strict=True))

    def act_stats(self, samples) -> dict[str, np.ndarray]:
        """Mean squared activation per input channel of each MatMul/Gemm weight (the AWQ statistic)."""
        sums: dict[str, np.ndarray] = {}
        for feeds in samples:
            out = self.run({}, feeds)
            for name, act in self.acts.items():
                a = out[act].astype(np.float64)
                a = a.reshape(-1, a.shape[-1])
                sums[name] = sums.get(name, 0) + (a**2).mean(axis=0) / len(samples)
        return sums

    def score(self, override) -> dict[str, tuple[float, float]]:
        got = self.run(override)
        res = {}
        for name in self.final:
            a, b = self.ref[name].astype(np.float64), got[name].astype(np.float64)
            if not np.issubdtype(self.ref[name].dtype, np.floating):
                continue
            whole = float((a * b).sum() / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-300))
            ra, rb = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
            rows = (ra * rb).sum(1) / (np.linalg.norm(ra, axis=1) * np.linalg.norm(rb, axis=1) + 1e-300)
            res[name] = (whole, float(rows.min()))
        return res


def fmt(score) -> str:
    return "; ".join(f"{k[:18]} {w:.5f}/{r:.4f}" for k, (w, r) in score.items())


def main(argv: list[str] | None = None) -> None:
    import int4_encodings as enc

    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="synthetic,minilm")
    ap.add_argument("--exp", default="alone,variants")
    ap.add_argument("--only", default="", help="comma-separated variant labels for --exp variants")
    ap.add_argument("--calib", default="synth", help="synth (the engine's synthesized inputs), same, other")
    ap.add_argument("--json", default=str(BENCH / "out" / "int4_quality.json"))
    args = ap.parse_args(argv)
    result = bench_results.begin("int4-quality", argv)
    table, alone_counts = [], []
    results = json.loads(Path(args.json).read_text()) if Path(args.json).exists() else {}
    for key in args.models.split(","):
        model, feeds, calib, case = load_case(key)
        refs = [r for r in find_weights(model) if r.kind == "initializer" and not r.scope and r.elements >= 16384
                and r.dtype == onnx.TensorProto.FLOAT]  # fmt: skip
        probe = Probe(model, refs, feeds)
        file_bytes = len(model.SerializeToString())
        weight_bytes = sum(r.elements * 4 for r in refs)
        if args.calib == "synth":
            from shrinkray.pipeline.compare import CompareSettings, parity_inputs

            calib = parity_inputs(model, CompareSettings()).samples
        elif args.calib == "same":
            calib = [feeds]
        else:
            calib = [calib] if calib is not None else [feeds]
        stats = probe.act_stats(calib)
        print(f"{key}: {file_bytes / 1e6:.1f} MB, {len(refs)} weights {weight_bytes / 1e6:.1f} MB", flush=True)
        row = results.setdefault(key, {})
        if "alone" in args.exp:
            alone = {}
            for r in refs:
                approx, nbytes = enc.encode(r, "default", stats)
                s = probe.score({r.name: approx})
                alone[r.name] = {"score": s, "bytes": nbytes, "size": r.elements}
                print(f"  alone {r.name[:40]:40s} {r.elements / 1e6:6.2f}M {fmt(s)}", flush=True)
            row["alone"] = alone
            alone_counts.append(f"{key} {len(alone)}")
        if "variants" in args.exp:
            labels = [x for x in args.only.split(",") if x] or list(enc.VARIANTS)
            out = row.setdefault("variants", {})
            for label in labels:
                t = time.perf_counter()
                override, total = {}, 0
                for r in refs:
                    approx, nbytes = enc.encode(r, label, stats, refs=refs)
                    override[r.name] = approx
                    total += nbytes
                raw = (file_bytes - weight_bytes + total) / file_bytes
                s = probe.score(override)
                out[label] = {"raw": raw, "score": s, "seconds": time.perf_counter() - t}
                if case is not None:
                    res = case_check(case, model, override)
                    out[label]["task"] = res
                table.append([key, label, f"{raw:.2%}", fmt(s), out[label].get("task", ""),
                              f"{time.perf_counter() - t:.1f} s"])  # fmt: skip
                print(bench_results.markdown_table(HEADER, table[-1:]).splitlines()[-1], flush=True)
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=1))
    notes = [f"Score per output: cosine of the whole tensor / of the worst row; calibration `{args.calib}`."]
    if alone_counts:
        notes.append(f"Tensors scored alone (4-bit one at a time): {', '.join(alone_counts)}; in `{Path(args.json).name}`.")
    bench_results.finish(result, HEADER, table, notes=notes, show=bool(table))


HEADER = ["model", "variant", "raw size", "score (output: cosine / worst row)", "task", "time"]


def case_check(case, model, override) -> str:
    from onnx import numpy_helper

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for t in copy.graph.initializer:
        if t.name in override:
            t.CopyFrom(numpy_helper.from_array(override[t.name].astype(np.float32), t.name))
    res = case.check(copy)
    return f"task {res.agree}/{res.total}"


if __name__ == "__main__":
    main()

"""Do adaptive latency ratios agree with the old fixed 50-run measurement?

For every bundled sample, the variants of the default methods are timed
against the original twice, in one process, at batch 1 (or the model's fixed
batch):

1. **adaptive** (the default since issue 12): interleaved rounds until every
   variant's ratio has a 95% interval within ±3%, or the budget;
2. **fixed 50**: the old measurement, 50 interleaved rounds, ratio of the medians.

The check: the fixed-50 ratio lies inside the adaptive interval, on every
sample and variant. Rows where the adaptive run ended "too noisy to call"
are counted apart (their interval is wide on purpose). The fixed measurement
is repeated to show its own spread (it lasts 0.05-1 s, so one burst of load
moves it), and agreement within the interval widened by the ±3% target is
counted too (the precision the stopping rule asks for). The machine's load is printed beside the table, since a shared
machine makes both runs noisy.

    python bench/latency_agreement.py                    # all samples, 1 thread
    python bench/latency_agreement.py --threads 2 --budget 10 --samples mlp,cnn
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import shrinkray  # noqa: E402
from shrinkray.errors import ShrinkRayError  # noqa: E402
from shrinkray.measure.inputs import first_axis_dynamic, synthesize  # noqa: E402
from shrinkray.measure.latency import DEFAULT_RUNS, TARGET, measure_latency  # noqa: E402

SAMPLES = ["mlp", "cnn", "transformer", "rnn", "subgraph", "fp16", "shared_weight", "tree", "messy"]
METHODS = ["dynamic-int8", "weights-int8", "palettize", "float16"]
#: The fixed measurement is repeated (right after the adaptive one) to show its own run-to-run spread.
REPEATS = 5


def variants(name: str) -> dict:
    loaded = shrinkray.load(ROOT / "sample_models" / f"{name}.onnx")
    models = {"original": loaded.model}
    for method in METHODS:
        try:
            variant = shrinkray.shrink(loaded, method)
        except ShrinkRayError:
            continue  # nothing to rewrite, or the method refuses this graph
        if variant.changes:
            models[method] = variant.model
    return models


def run(samples: list[str], threads: int, budget: float) -> list[dict]:
    rows = []
    for name in samples:
        models = variants(name)
        if len(models) < 2:
            print(f"{name}: no variant to compare (nothing to rewrite)", flush=True)
            continue
        source = models["original"]
        feeds = synthesize(source, batch=1 if first_axis_dynamic(source) else None).feeds
        t0 = time.perf_counter()
        adaptive = measure_latency(models, feeds, batch=1, threads=threads, budget_s=budget, reference="original")
        adaptive_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        fixed = [measure_latency(models, feeds, batch=1, threads=threads, runs=DEFAULT_RUNS, reference="original")
                 for _ in range(REPEATS)]  # fmt: skip
        fixed_s = (time.perf_counter() - t0) / REPEATS
        for key in models:
            if key == "original":
                continue
            a = adaptive[key]
            olds = [f[key].median_ms / f["original"].median_ms for f in fixed]
            old = olds[0]
            rows.append({
                "sample": name, "variant": key, "ratio": a.ratio, "low": a.ratio_low, "high": a.ratio_high,
                "rounds": a.runs, "stopped_by": a.stopped_by, "settled": a.settled, "adaptive_s": adaptive_s,
                "fixed50": old, "fixed_s": fixed_s, "agree": a.ratio_low <= old <= a.ratio_high,
                "repeats_in": sum(a.ratio_low <= x <= a.ratio_high for x in olds),
                "near": a.ratio_low * (1 - TARGET) <= old <= a.ratio_high * (1 + TARGET),
                "repeats_min": min(olds), "repeats_max": max(olds),
                "orig_ms": adaptive["original"].median_ms,
            })  # fmt: skip
            r = rows[-1]
            print(
                f"{name:14s} {key:13s} {r['orig_ms']:8.3f} ms  adaptive {r['ratio']:.3f} [{r['low']:.3f}-{r['high']:.3f}] "
                f"{r['rounds']:6d} rounds {r['stopped_by']:9s} {adaptive_s:5.1f} s | fixed-50 {old:.3f} ({fixed_s:4.1f} s) "
                f"| {'agree' if r['agree'] else 'DISAGREE'}{'' if r['settled'] else ' (too noisy to call)'} "
                f"| {REPEATS} fixed-50 runs: {r['repeats_min']:.3f}-{r['repeats_max']:.3f}, {r['repeats_in']} inside",
                flush=True,
            )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", default=",".join(SAMPLES))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--budget", type=float, default=20.0, help="adaptive budget per sample (s), as compare's default")
    args = parser.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{os.cpu_count()} CPUs, load average {load:.2f}; {args.threads} thread(s), batch 1, target ±{TARGET:.0%}, "
          f"budget {args.budget:g} s; columns: original median, adaptive ratio [95% interval], rounds, stop reason, "
          "time | fixed-50 ratio of medians (time) | agreement", flush=True)  # fmt: skip
    rows = run([s for s in args.samples.split(",") if s], args.threads, args.budget)
    settled = [r for r in rows if r["settled"]]
    noisy = [r for r in rows if not r["settled"]]
    agree = sum(r["agree"] for r in rows)
    inside = sum(r["repeats_in"] for r in rows)
    near = sum(r["near"] for r in rows)
    print(
        f"\nagree: {agree}/{len(rows)} (settled within ±{TARGET:.0%}: {sum(r['agree'] for r in settled)}/{len(settled)}; "
        f"too noisy to call: {sum(r['agree'] for r in noisy)}/{len(noisy)}); "
        f"adaptive time {sum({r['sample']: r['adaptive_s'] for r in rows}.values()):.1f} s, "
        f"fixed-50 {sum({r['sample']: r['fixed_s'] for r in rows}.values()):.1f} s; "
        f"all {REPEATS} fixed-50 repeats: {inside}/{REPEATS * len(rows)} inside the adaptive interval; "
        f"first fixed-50 within the interval widened by ±{TARGET:.0%} (the precision asked for): {near}/{len(rows)}; "
        f"load average now {os.getloadavg()[0]:.2f}"
    )
    return 0 if agree == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Is compare's latency interval honest, and does it agree with the old fixed 50-run measurement?

Two studies (issue 12, third pass), each printing the load average beside every measurement:

**Agreement** (default; also ``python -m bench compare-speed --agreement``). For every sample, three
times in a row: the default variants timed as compare times them (pairwise against the original, fresh
sessions, 5 warm-up runs, adaptive, 5 s shared by the pairs: :func:`time_pairwise`), then the old way
(every model's fresh session in rotation, one run each, 50 rounds, ratio of medians), then the old 50
rounds with compare's bursts (:func:`burst_for`). Counted:

* *repeats*: each of our three ratios inside the other two's reported intervals (what a repeat gives);
* *fixed-50 inside*: the old ratio inside our reported interval (the first pass's test);
* *agree*: the statistically correct test for two noisy measurements, |log a - log b| <= z * sqrt(se_a^2 +
  se_b^2), with each side's standard error from its own run (blocks of rounds) and the run-to-run term
  :data:`REPEAT_SD` (the fixed-50 ratio has an error too: 50 rounds).

**Setups** (``--setups``): raw per-run times of one pair timed four ways with the same sessions,
alternating one run each (A B, B A, ...), in bursts (~5 ms of runs each, first dropped), "alone" (bursts
of ~50 ms: one warm model at a time, as deployed, still interleaved so that load hits both alike), and the
old rotation of every model; which setup's ratio matches the model running alone?

    python -m bench latency-agreement --samples mlp,cnn,transformer,rnn,shared_weight,cnn3mb
    python -m bench latency-agreement --setups --samples mlp,transformer,rnn --seconds 0.7 --reps 2
    python -m bench latency-agreement --calibrate bench/out/latency_setups.json   # repeats vs intervals, by tau
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import results  # noqa: E402

from shrinkray.measure.latency import (  # noqa: E402
    DEFAULT_RUNS,
    REPEAT_SD,
    Timing,
    ratio_interval,
    time_models,
    time_pairwise,
)

METHODS = ("dynamic-int8", "weights-int8", "weights-int4", "palettize", "float16")
SAMPLES = "mlp,cnn,transformer,rnn,shared_weight,cnn3mb"
Z = 1.959963984540054


def load() -> float:
    return os.getloadavg()[0]


def variants(name: str) -> tuple[dict, dict]:
    """The sample's original and its default variants (those that rewrite something), and the feeds."""
    import shrinkray
    from shrinkray.errors import ShrinkRayError
    from shrinkray.measure.inputs import first_axis_dynamic, synthesize

    if name == "cnn3mb":
        from compare_speed import cnn_path

        path = cnn_path()
    else:
        path = ROOT / "sample_models" / f"{name}.onnx"
    loaded = shrinkray.load(path)
    models = {"original": loaded.model}
    for method in METHODS:
        try:
            variant = shrinkray.shrink(loaded, method)
        except ShrinkRayError:
            continue
        if variant.changes:
            models[method] = variant.model
    source = models["original"]
    return models, synthesize(source, batch=1 if first_axis_dynamic(source) else None).feeds


def _se_reported(ratio: float, low: float, high: float) -> float:
    """Standard error (log) of one measurement from its reported repeat interval (z * sqrt(2) * se)."""
    return max(math.log(high / ratio), math.log(ratio / low)) / (Z * math.sqrt(2))


def agreement(samples: list[str], repeats: int = 3, budget: float = 5.0) -> int:
    """Our pairwise measurement repeated, against the old fixed 50 rounds (see the module docstring)."""
    measure_agreement(samples, repeats, budget)
    return 0


def measure_agreement(samples: list[str], repeats: int = 3, budget: float = 5.0) -> list[dict]:
    """:func:`agreement`'s rows, one per sample and variant (also saved to bench/out/latency_agreement_third.json)."""
    from shrinkray.graph.sessions import open_session

    rows = []
    print(f"load average {load():.2f}; 1 thread, batch 1, budget {budget:g} s shared by the pairs, "
          f"REPEAT_SD {REPEAT_SD}", flush=True)  # fmt: skip
    for name in samples:
        models, feeds = variants(name)
        keys = [k for k in models if k != "original"]
        ours, old, old_burst, loads = [], [], [], []
        for _ in range(repeats):
            before = load()
            original = open_session(models["original"])
            openers = [(k, lambda m=models[k], f=feeds: partial(open_session(m).run, None, f)) for k in keys]
            t0 = time.perf_counter()
            stats = time_pairwise("original", partial(original.run, None, feeds), openers,
                                  Timing(budget_s=budget, warmup=5))  # fmt: skip
            spent = time.perf_counter() - t0
            del original
            ours.append({k: {"ratio": s.ratio, "low": s.ratio_low, "high": s.ratio_high, "rounds": s.runs,
                             "stopped_by": s.stopped_by, "settled": s.settled, "burst": s.burst, "seconds": spent}
                         for k, s in stats.items() if k != "original"})  # fmt: skip
            old.append(_fixed_measure(models, feeds, burst=1))
            old_burst.append(_fixed_measure(models, feeds, burst=None))
            loads.append((before, load()))
        for key in keys:
            a = [o[key] for o in ours]
            f = [o[key] for o in old]
            fb = [o[key] for o in old_burst]
            inside = [p["low"] <= q["ratio"] <= p["high"] for p, q in itertools.permutations(a, 2)]

            def agrees(x, y):
                d = abs(math.log(x["ratio"] / y["ratio"]))
                return d <= Z * math.hypot(x["se"], y["se"])

            for x in a:
                x["se"] = _se_reported(x["ratio"], x["low"], x["high"])
            row = {
                "sample": name, "variant": key, "loads": loads, "ours": a, "fixed50": f, "fixed50_burst": fb,
                "repeats_inside": sum(inside), "repeats_pairs": len(inside),
                "fixed_inside": [a[i]["low"] <= f[i]["ratio"] <= a[i]["high"] for i in range(repeats)],
                "agree": [agrees(a[i], f[i]) for i in range(repeats)],
                "agree_burst": [agrees(a[i], fb[i]) for i in range(repeats)],
                "settled": [x["settled"] for x in a],
            }  # fmt: skip
            rows.append(row)
            print(f"{name:13s} {key:13s} ours " + " ".join(f"{x['ratio']:.3f}[{x['low']:.3f}-{x['high']:.3f}]"
                  f"{'' if x['settled'] else '?'}" for x in a)
                  + " | fixed-50 " + " ".join(f"{x['ratio']:.3f}±{Z * x['se']:.3f}" for x in f)
                  + " | bursts " + " ".join(f"{x['ratio']:.3f}" for x in fb)
                  + f" | repeats in {row['repeats_inside']}/{len(inside)}, fixed in {sum(row['fixed_inside'])}/{repeats}, "
                  f"agree {sum(row['agree'])}/{repeats} (bursts {sum(row['agree_burst'])}/{repeats})", flush=True)  # fmt: skip
        print(f"  {name}: loads " + ", ".join(f"{a:.1f}->{b:.1f}" for a, b in loads), flush=True)
    n = len(rows)
    print(f"\nrepeats inside each other's interval: {sum(r['repeats_inside'] for r in rows)}/"
          f"{sum(r['repeats_pairs'] for r in rows)}; fixed-50 inside ours: {sum(sum(r['fixed_inside']) for r in rows)}/"
          f"{repeats * n}; agree (combined uncertainty): {sum(sum(r['agree']) for r in rows)}/{repeats * n}; "
          f"with bursts in the old rotation: {sum(sum(r['agree_burst']) for r in rows)}/{repeats * n}; too noisy to call: "
          f"{sum(not s for r in rows for s in r['settled'])}/{repeats * n}; load average now {load():.2f}", flush=True)  # fmt: skip
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "latency_agreement_third.json").write_text(json.dumps(rows, indent=1))
    return rows


def _fixed_measure(models: dict, feeds: dict, burst: int | None) -> dict[str, dict]:
    """The old measurement (fresh sessions of every model in rotation, 50 rounds, ratio of medians) and its
    standard error; ``burst=None`` times each model in compare's bursts instead of one run at a time."""
    from shrinkray.graph.sessions import open_session

    runners = {k: partial(open_session(m).run, None, feeds) for k, m in models.items()}
    stats = time_models(runners, Timing(runs=DEFAULT_RUNS, warmup=5, burst=burst), reference="original")
    out = {}
    for k, s in stats.items():
        if k == "original":
            continue
        half = max(math.log(s.ratio_high / s.ratio), math.log(s.ratio / s.ratio_low))  # reported: z*sqrt2*se
        se = half / (Z * math.sqrt(2))
        out[k] = {"ratio": s.median_ms / stats["original"].median_ms, "se": se, "burst": s.burst}
    return out


# ------------------------------------------------------------------ setups: alternating, bursts, alone, rotation


def _play(runners: dict, schedule: list[str]) -> list[float]:
    pc = time.perf_counter
    out = []
    for key in schedule:
        t0 = pc()
        runners[key]()
        out.append((pc() - t0) * 1000)
    return out


def _alternating(v: str, n: int) -> list[str]:
    return [x for i in range(n) for x in (("original", v) if i % 2 == 0 else (v, "original"))]


def collect_setups(samples: list[str], seconds: float, reps: int) -> list[dict]:
    """Raw per-run times of every pair timed four ways on the same sessions (fresh ones per rep)."""
    from shrinkray.graph.sessions import open_session

    data = []
    for name in samples:
        models, feeds = variants(name)
        keys = [k for k in models if k != "original"]
        for rep in range(reps):
            runners = {k: partial(open_session(m).run, None, feeds) for k, m in models.items()}
            for run in runners.values():
                for _ in range(5):
                    run()
            one = float(np.median(_play(runners, ["original"] * 7)))
            k_burst = max(4, min(50, round(5.0 / max(one, 0.01))))  # ~5 ms bursts, at least 4 runs
            n = max(20, int(seconds * 1000 / (2 * one)))
            rec = {"sample": name, "rep": rep, "load": load(), "k_burst": k_burst, "pairs": {}}
            for v in keys:
                pair = {}
                sched = _alternating(v, n)
                pair["alt"] = [sched, _play(runners, sched)]
                nb = max(6, n // k_burst)
                sched = [x for i in range(nb) for x in (["original"] * k_burst + [v] * k_burst if i % 2 == 0
                                                        else [v] * k_burst + ["original"] * k_burst)]  # fmt: skip
                pair["burst"] = [sched, _play(runners, sched)]
                k_long = max(k_burst, round(50.0 / max(one, 0.01)))  # ~50 ms: one warm model at a time
                nl = max(6, 2 * n // k_long)
                sched = [x for i in range(nl) for x in (["original"] * k_long + [v] * k_long if i % 2 == 0
                                                        else [v] * k_long + ["original"] * k_long)]  # fmt: skip
                pair["alone"] = [sched, _play(runners, sched)]
                sched = _alternating(v, n)
                pair["alt2"] = [sched, _play(runners, sched)]
                rec["pairs"][v] = pair
            sched = [x for i in range(DEFAULT_RUNS) for x in (list(runners)[i % len(runners):] + list(runners)[:i % len(runners)])]
            rec["rotation"] = [sched, _play(runners, sched)]
            rec["load_end"] = load()
            data.append(rec)
            print(f"{name} rep {rep}: load {rec['load']:.1f} -> {rec['load_end']:.1f}, burst {k_burst}, {n} rounds", flush=True)
            del runners
    return data


def _bursts(schedule: list[str], times: list[float], key: str) -> list[float]:
    """Median of each burst of ``key`` after its first run."""
    out, cur, prev = [], [], None
    for k, t in [*zip(schedule, times, strict=True), (None, 0.0)]:
        if k != prev and cur:
            if prev == key:
                out.append(float(np.median(cur[1:])))
            cur = []
        cur.append(t)
        prev = k
    return out


def setup_ratios(rec: dict, v: str) -> dict[str, float]:
    """Each setup's ratio (variant / original) for one pair of one rep."""
    pair = rec["pairs"][v]

    def of(schedule, times, key):
        return [t for k, t in zip(schedule, times, strict=True) if k == key]

    out = {}
    for setup in ("alt", "alt2"):
        s, t = pair[setup]
        out[setup] = ratio_interval(of(s, t, v), of(s, t, "original"))[0]
    s, t = pair["burst"]
    out["burst"] = ratio_interval(_bursts(s, t, v), _bursts(s, t, "original"))[0]
    s, t = pair["alone"]
    out["alone"] = ratio_interval(_bursts(s, t, v), _bursts(s, t, "original"))[0]
    s, t = rec["rotation"]
    out["rotation"] = float(np.median(of(s, t, v)) / np.median(of(s, t, "original")))
    return out


def setups(samples: list[str], seconds: float, reps: int) -> int:
    data = collect_setups(samples, seconds, reps)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "latency_setups.json").write_text(json.dumps(data))
    report_setups(data)
    return 0


def report_setups(data: list[dict]) -> None:
    """Per pair: the geometric mean over reps of each setup's ratio, relative to the model alone."""
    by: dict[tuple[str, str], list[dict]] = {}
    for rec in data:
        for v in rec["pairs"]:
            by.setdefault((rec["sample"], v), []).append(setup_ratios(rec, v) | {"load": rec["load"]})
    print("\nsample        variant        load       alone | alternating  bursts  rotation  (each / alone)")
    dev = {"alt": [], "burst": [], "rotation": []}
    for (sample, v), rs in by.items():
        g = {k: math.exp(float(np.mean([math.log(r[k]) for r in rs]))) for k in ("alone", "alt", "burst", "rotation")}
        for k in dev:
            dev[k] += [abs(math.log(r[k] / r["alone"])) for r in rs]
        loads = "/".join(f"{r['load']:.1f}" for r in rs)
        print(f"{sample:13s} {v:13s} {loads:10s} {g['alone']:.3f} | {g['alt'] / g['alone']:.3f}       "
              f"{g['burst'] / g['alone']:.3f}   {g['rotation'] / g['alone']:.3f}")
    print("median |log(setup / alone)|: " + ", ".join(f"{k} {np.median(v):.4f} (p90 {np.percentile(v, 90):.4f})" for k, v in dev.items()))


def calibrate(data: list[dict]) -> None:
    """How often a repeat's ratio lies inside the other measurement's interval: the within-run interval
    alone, and the reported one (x sqrt 2, run-to-run term tau) for a few values of tau. Input: raw setups
    rows; every alternating measurement of a pair (``alt``, ``alt2``; ``alt1`` in older rows) against every
    other of the same sample and variant (the same sessions seconds apart, and fresh sessions)."""
    found: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for rec in data:
        rec_load = rec["load"][0] if isinstance(rec["load"], list) else rec["load"]
        for v, pair in rec["pairs"].items():
            for kind in ("alt", "alt1", "alt2"):
                if kind not in pair:
                    continue
                s, t = pair[kind]
                ratio, low, high = ratio_interval([x for k, x in zip(s, t, strict=True) if k == v],
                                                  [x for k, x in zip(s, t, strict=True) if k == "original"])  # fmt: skip
                if low is not None and high is not None and low > 0:
                    se = max(math.log(high / ratio), math.log(ratio / low)) / Z
                    found.setdefault((rec["sample"], v), []).append((math.log(ratio), se, rec_load))
    pairs = np.array([(abs(a[0] - b[0]), a[1], max(a[2], b[2]))
                      for ms in found.values() for a, b in itertools.permutations(ms, 2)])  # fmt: skip
    print(f"{len(pairs)} ordered pairs of measurements; within-run se median {np.median(pairs[:, 1]):.4f}")
    print("tau    | repeat inside: within-run interval / reported interval   (all, load < 4, load >= 4)")
    for tau in (0.0, 0.003, 0.005, 0.007, 0.01):
        cells = []
        for mask in (np.ones(len(pairs), bool), pairs[:, 2] < 4, pairs[:, 2] >= 4):
            p = pairs[mask]
            if not len(p):
                cells.append("-")
                continue
            within = float(np.mean(p[:, 0] <= Z * p[:, 1]))
            reported = float(np.mean(p[:, 0] <= Z * np.sqrt(2 * (p[:, 1] ** 2 + tau**2))))
            cells.append(f"{within:.3f} / {reported:.3f} (n {len(p)})")
        print(f"{tau:.3f}  | " + "   ".join(cells))


SUMMARY_HEADER = ["sample", "load", "our repeats inside each other", "fixed-50 inside ours", "agree (combined)",
                  "too noisy to call"]  # fmt: skip


def summary_rows(rows: list[dict]) -> list[list]:
    """The summary of an agreement run: one line per sample and one for all (header: SUMMARY_HEADER)."""
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["sample"], []).append(r)
    total = [0, 0, 0, 0, 0, 0, 0]
    table = []
    for sample, rs in by.items():
        loads = [x for r in rs[:1] for pair in r["loads"] for x in pair]
        cells = (sum(r["repeats_inside"] for r in rs), sum(r["repeats_pairs"] for r in rs),
                 sum(sum(r["fixed_inside"]) for r in rs), sum(sum(r["agree"]) for r in rs),
                 sum(len(r["agree"]) for r in rs), sum(not x for r in rs for x in r["settled"]))  # fmt: skip
        total = [a + b for a, b in zip(total, (*cells, 0), strict=True)]
        table.append([sample, f"{min(loads):.1f}-{max(loads):.1f}", f"{cells[0]}/{cells[1]}", f"{cells[2]}/{cells[4]}",
                      f"{cells[3]}/{cells[4]}", f"{cells[5]}/{cells[4]}"])  # fmt: skip
    table.append(["**all**", "", f"{total[0]}/{total[1]}", f"{total[2]}/{total[4]}", f"{total[3]}/{total[4]}",
                  f"{total[5]}/{total[4]}"])  # fmt: skip
    return table


def summary(rows: list[dict]) -> None:
    """Markdown table of a saved agreement file: one line per sample."""
    print(results.markdown_table(SUMMARY_HEADER, summary_rows(rows)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", default=SAMPLES)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget", type=float, default=5.0, help="seconds shared by the pairs, as compare's default")
    parser.add_argument("--setups", action="store_true", help="the setup study instead of the agreement check")
    parser.add_argument("--seconds", type=float, default=0.7, help="setups: seconds per pair and setup")
    parser.add_argument("--reps", type=int, default=2, help="setups: fresh sessions this many times")
    parser.add_argument("--report", help="setups: print the table of a saved latency_setups.json")
    parser.add_argument("--summary", help="agreement: markdown table of a saved latency_agreement_third.json")
    parser.add_argument("--calibrate", help="setups: repeats inside the intervals, by run-to-run term, of a saved file")
    args = parser.parse_args(argv)
    samples = [s for s in args.samples.split(",") if s]
    if args.summary:
        summary(json.loads(Path(args.summary).read_text()))
        return 0
    if args.calibrate:
        calibrate(json.loads(Path(args.calibrate).read_text()))
        return 0
    if args.report:
        report_setups(json.loads(Path(args.report).read_text()))
        return 0
    if args.setups:
        return setups(samples, args.seconds, args.reps)
    result = results.begin("latency-agreement", argv)  # the studies above print only; this is the benchmark
    rows = measure_agreement(samples, args.repeats, args.budget)
    results.finish(
        result, SUMMARY_HEADER, summary_rows(rows),
        notes=[f"{len(rows) * args.repeats} ratios: {len({r['sample'] for r in rows})} samples, {args.repeats} repeats, "
               f"budget {args.budget:g} s. Rows: `latency_agreement_third.json` in bench/out/."],
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

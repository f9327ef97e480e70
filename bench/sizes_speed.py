"""Size-measurement speed: original + four variants of a ~50 MB model in under 30 s.

Builds (once, into bench/out/) a ~50 MB transformer-like float32 model with the same
generator as bench/run.py, makes the four variants with our default options
(dynamic-int8, weights-int8, palettize 256, float16), then times
``shrinkray.measure.sizes.measure_many`` on the five serialized blobs (raw, gzip -9,
brotli quality "auto", as resolve_brotli_quality decides; parallel threads, one per core)
and compares it with a serial single-thread run of the same compressions in the
same process, timing each compression on its own. Finally it times brotli at quality 5
6 and 9 on the blobs above 4 MiB (those that "auto" does not already use) and prints the
time and the size change against what "auto" chose.

    python -m bench sizes-speed            # prints the figures and the verdict
    python -m bench sizes-speed --json     # also prints them as JSON
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent)]

from common import results, synthetic  # noqa: E402  (the generated transformer)

#: ~50 MB: 6144 x 512 tied embedding + 3 layers of 3.15 M weights = 12.6 M floats.
SPEC_50MB = dict(synthetic.LARGE_SPEC, vocab=6144, layers=3)
TARGET_S = 30.0
ALT_QUALITIES = (5, 6, 9)  # the one "auto" already uses is skipped
VARIANTS = [("dynamic-int8", {}), ("weights-int8", {}), ("palettize", {}), ("float16", {})]


def make_blobs() -> dict[str, bytes]:
    import shrinkray

    path = synthetic.generated_model(SPEC_50MB, name="sizes_speed_transformer")
    loaded = shrinkray.load(path)
    blobs = {"original": path.read_bytes()}
    for method, options in VARIANTS:
        blobs[method] = shrinkray.shrink(loaded, method, **options).model.SerializeToString()
    return blobs


def run(quiet: bool = False) -> dict:
    from shrinkray.measure.sizes import brotli_size, gzip_size, measure_many, resolve_brotli_quality

    say = (lambda *a: None) if quiet else print
    t0 = time.perf_counter()
    blobs = make_blobs()
    say(f"built the model and 4 variants in {time.perf_counter() - t0:.1f} s")
    total_mb = sum(len(b) for b in blobs.values()) / 1e6

    t0 = time.perf_counter()
    parallel = measure_many(blobs, brotli_quality="auto")
    parallel_s = time.perf_counter() - t0

    # serial, single thread, each compression timed on its own
    jobs = {}
    t0 = time.perf_counter()
    serial = {}
    for key, data in blobs.items():
        q = resolve_brotli_quality("auto", len(data))
        t = time.perf_counter()
        g = gzip_size(data)
        jobs[(key, "gzip -9")] = time.perf_counter() - t
        t = time.perf_counter()
        b = brotli_size(data, q)
        jobs[(key, f"brotli q{q}")] = time.perf_counter() - t
        serial[key] = (len(data), g, b, q)
    serial_s = time.perf_counter() - t0

    same = all(
        (parallel[k].raw, parallel[k].gzip, parallel[k].brotli, parallel[k].brotli_quality) == serial[k] for k in blobs
    )
    header = ["blob", "raw MB", "gzip -9", "brotli", "brotli quality", "gzip s (serial)", "brotli s (serial)"]
    rows = []
    for key in blobs:
        s = parallel[key]
        gz = jobs[(key, "gzip -9")]
        br = jobs[(key, f"brotli q{s.brotli_quality}")]
        rows.append([key, f"{s.raw / 1e6:.1f}", f"{100 * s.gzip / s.raw:.1f}%", f"{100 * s.brotli / s.raw:.1f}%",
                     s.brotli_quality, f"{gz:.1f}", f"{br:.1f}"])  # fmt: skip
    say("\n" + results.markdown_table(header, rows))
    # what a cheaper brotli quality for large blobs would cost in size (an option for "auto")
    alternatives = {}
    for q in ALT_QUALITIES:
        if all(parallel[k].brotli_quality == q for k, d in blobs.items() if len(d) > 4 * 2**20):
            continue
        t_q, extra = 0.0, []
        for key, data in blobs.items():
            base_q = parallel[key].brotli_quality
            if base_q == q or len(data) <= 4 * 2**20:
                continue
            t = time.perf_counter()
            n = brotli_size(data, q)
            t_q += time.perf_counter() - t
            extra.append((key, n / parallel[key].brotli - 1))
        alternatives[q] = {"brotli_s": t_q, "size_change": dict(extra)}
    ok = parallel_s < TARGET_S
    base_brotli = sum(v for (k, kind), v in jobs.items() if kind.startswith("brotli"))
    auto_q = max(parallel[k].brotli_quality for k in blobs)
    notes = [f"{len(blobs)} blobs, {total_mb:.0f} MB, {os.cpu_count()} cores: `measure_many` (parallel threads) "
             f"{parallel_s:.1f} s, serial single thread {serial_s:.1f} s ({serial_s / parallel_s:.2f}x); slowest single "
             f"compression {max(jobs.values()):.1f} s ({', '.join(max(jobs, key=jobs.get))}); results identical to the "
             f"serial run: {same}."]  # fmt: skip
    say("\n" + notes[0])
    say(f"target < {TARGET_S:.0f} s: {'MET' if ok else 'NOT MET'}")
    for q, alt in alternatives.items():
        changes = ", ".join(f"{k} {100 * c:+.1f}%" for k, c in alt["size_change"].items())
        notes.append(f"brotli q{q} instead of q{auto_q} for blobs > 4 MiB: {alt['brotli_s']:.1f} s of brotli "
                     f"(vs {base_brotli:.1f} s); size change {changes}.")  # fmt: skip
        say(notes[-1])
    return {
        "table": {"header": header, "rows": rows},
        "notes": notes,
        "blobs": {k: parallel[k].as_dict() for k in blobs},
        "total_mb": total_mb,
        "parallel_s": parallel_s,
        "serial_s": serial_s,
        "jobs_s": {f"{k} {kind}": v for (k, kind), v in jobs.items()},
        "identical": same,
        "alternatives": alternatives,
        "target_s": TARGET_S,
        "met": ok,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="Also print the figures as JSON")
    args = parser.parse_args(argv)
    record = results.begin("sizes-speed", argv)
    result = run()
    if args.json:
        print(json.dumps(result, indent=1))
    results.finish(
        record, result["table"]["header"], result["table"]["rows"],
        targets=[results.Target(f"original + 4 variants measured in < {TARGET_S:.0f} s", result["met"],
                                f"{result['parallel_s']:.1f} s")],
        notes=result["notes"], show=False,
    )  # fmt: skip


if __name__ == "__main__":
    main()

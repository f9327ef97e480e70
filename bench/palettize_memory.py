"""Peak memory and wall time that ``palettize`` adds on the generated ~100 MB transformer (issue 12).

Each run is a fresh subprocess: it loads the model (bench/common/synthetic.py's ``generated_model()``, cached in
bench/out/), resets the kernel's peak-RSS mark (``/proc/self/clear_refs``, so the loading peak does not
count), then runs ``shrinkray.pipeline.shrink.shrink(model, "palettize", in_place=True, open_runtime=False)`` and
reports VmHWM (peak RSS) minus the RSS of the loaded model, and the wall time of the shrink. It also
reports the same two figures up to the moment ``shrink`` hands the palettized model to validation
(``method``: palettize's own work and the graph edits), since validation (onnx.checker on the
serialized model) has a peak of its own that palettize does not change.

    python -m bench palettize-memory                          # this checkout, levels 256, 3 runs
    git worktree add --detach /tmp/before <commit>            # then, runs of both interleaved:
    python -m bench palettize-memory --src /tmp/before --src . --levels 256 16 --runs 3 --json out.json
    python -m bench palettize-memory --src /tmp/before --src . --include embed_tokens.weight  # one 25 MB tensor
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

from common import results  # noqa: E402

CHILD = r"""
import json, sys, time
sys.path.insert(0, {src!r})
import shrinkray  # the chosen checkout's, before bench/ goes on sys.path
from shrinkray.pipeline.shrink import shrink
sys.path.insert(0, {bench!r})
import onnx
from common import synthetic


def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


import importlib
shrink_module = importlib.import_module("shrinkray.pipeline.shrink")
method = {{}}
validate = shrink_module.validate


def timed_validate(*args, **kwargs):
    method["peak"] = status("VmHWM")
    method["seconds"] = time.perf_counter() - start
    return validate(*args, **kwargs)


shrink_module.validate = timed_validate
model = onnx.load(str(synthetic.generated_model()))
loaded = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset VmHWM to the current RSS
start = time.perf_counter()
variant = shrink(model, "palettize", in_place=True, open_runtime=False, levels={levels}, include={include!r})
seconds = time.perf_counter() - start
print(json.dumps({{
    "shrinkray": shrinkray.__file__,
    "loaded_mb": loaded / 1e6,
    "peak_above_loaded_mb": (status("VmHWM") - loaded) / 1e6,
    "seconds": seconds,
    "method_peak_above_loaded_mb": (method["peak"] - loaded) / 1e6,
    "method_seconds": method["seconds"],
    "tensors_changed": len(variant.changes),
    "encodings": sorted({{c.encoding for c in variant.changes}})[:3],
}}))
"""


def run_once(src: str, levels: int, include: list[str]) -> dict:
    code = CHILD.format(src=str(Path(src).resolve()), bench=str(HERE), levels=levels, include=include)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    record = json.loads(out.stdout.strip().splitlines()[-1])
    if not record["shrinkray"].startswith(str(Path(src).resolve())):
        raise SystemExit(f"measured {record['shrinkray']}, not the checkout in {src}")
    return record


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", action="append", help="checkout whose shrinkray/ is measured (repeatable)")
    parser.add_argument("--levels", type=int, nargs="+", default=[256])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--include", nargs="*", default=[], help="only these tensors (globs), e.g. embed_tokens.weight: one in flight"
    )
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    args = parser.parse_args(argv)
    result = results.begin("palettize-memory", argv)
    sources = args.src or [str(HERE.parent)]
    records, table = [], []
    for levels in args.levels:
        runs: dict[str, list[dict]] = {src: [] for src in sources}
        for _ in range(args.runs):  # interleaved, so a busy spell on the shared machine hits every checkout
            for src in sources:
                runs[src].append(run_once(src, levels, args.include))
        for src in sources:
            records.append({"levels": levels, "include": args.include, "src": src, "runs": runs[src]})
            print(
                f"levels {levels}, {src}: loaded {runs[src][0]['loaded_mb']:.0f} MB, "
                f"{runs[src][0]['tensors_changed']} tensors"
            )
            cells = []
            for key in ("method_", ""):  # before validation, then the whole shrink
                peaks = [r[f"{key}peak_above_loaded_mb"] for r in runs[src]]
                secs = [r[f"{key}seconds"] for r in runs[src]]
                cells += [f"{statistics.median(peaks):.0f} MB ({', '.join(f'{p:.0f}' for p in peaks)})",
                          f"{statistics.median(secs):.2f} s"]  # fmt: skip
            what = f"levels {levels}" + (f", only {' '.join(args.include)}" if args.include else "")
            table.append([what, src, runs[src][0]["tensors_changed"], *cells])
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))
    results.finish(
        result,
        ["run", "checkout", "tensors", "peak above loaded, before validation: median (runs)", "time before validation",
         "peak above loaded, whole shrink: median (runs)", "time, whole shrink"],
        table,
        notes=[f"Median of {args.runs} runs, each a fresh subprocess; the checkouts interleaved."],
    )  # fmt: skip


if __name__ == "__main__":
    main()

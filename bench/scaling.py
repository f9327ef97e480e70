"""How cost grows with model size (issue 12): `shrink -m weights-int8` and `compare`, time and peak memory.

Generated transformers (bench/run.py's generator) of about 10 MB, 100 MB and 1 GB, and a 2.5 GB one
saved with external data (``model.onnx`` + ``model.onnx.data``), built on the fly into a scratch
folder (default: a temporary folder under /tmp, removed at the end; never committed). Each command
runs as ``/usr/bin/time -v shrinkray ...`` with the whole process tree's resident memory sampled every
50 ms (the CLI does the work in a capped worker; dynamic-int8 quantizes in a child of its own).

    python bench/scaling.py                               # 10mb,100mb,1gb,2.5gb
    python bench/scaling.py --sizes 10mb,100mb --steps shrink,compare
    python bench/scaling.py --sizes 1gb --steps shrink    # compare of 1 GB takes long on 2 cores

Results: bench/out/scaling.json (appended) and a table printed at the end, with the load average.
Before building the 2.5 GB model check free disk (it needs ~2.5 GB for the model and as much for
each variant written; ``df -h /tmp``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compare_speed  # noqa: E402  (process-tree memory sampling, load waiting)
import run as bench_run  # noqa: E402  (the transformer generator)

OUT = Path(__file__).resolve().parent / "out"

#: Generator specs: floats ~ vocab*d + layers*(4*d*d + 2*d*d_ff).
SPECS = {
    "10mb": {"vocab": 4096, "d": 256, "heads": 4, "d_ff": 1024, "layers": 2, "max_pos": 256, "seed": 1},
    "100mb": bench_run.LARGE_SPEC,
    "1gb": {"vocab": 32000, "d": 1024, "heads": 16, "d_ff": 4096, "layers": 16, "max_pos": 256, "seed": 3},
    "2.5gb": {"vocab": 32000, "d": 1024, "heads": 16, "d_ff": 4096, "layers": 48, "max_pos": 256, "seed": 4},
}


def build(size: str, folder: Path) -> Path:
    """The model file (with ``.data`` beside it when over 2 GB)."""
    model = bench_run.build_transformer(**SPECS[size])
    path = folder / f"scaling_{size.replace('.', '_')}.onnx"
    if model.ByteSize() > 2**31 - 2**20 or size == "2.5gb":
        onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=path.name + ".data", size_threshold=1024)  # fmt: skip
    else:
        path.write_bytes(model.SerializeToString())
    return path


def files_bytes(path: Path) -> int:
    data = path.with_name(path.name + ".data")
    return path.stat().st_size + (data.stat().st_size if data.exists() else 0)


def timed(cmd: list[str]) -> dict:
    """Wall time, tree peak and single-process peak of one command (compare_speed.measure_command)."""
    import re

    rc, out, err, wall, tree_peak = compare_speed.measure_command(["/usr/bin/time", "-v", *cmd])
    single = re.search(r"Maximum resident set size \(kbytes\): (\d+)", err)
    row = {"rc": rc, "wall_s": round(wall, 1), "tree_peak_mb": round(tree_peak / 1e6, 1),
           "single_peak_mb": round(int(single.group(1)) * 1024 / 1e6, 1) if single else None}  # fmt: skip
    if rc:
        row["stderr_tail"] = err[-800:]
    timings = [line for line in out.splitlines() if line.startswith("Phase timings")]
    if timings:
        row["timings"] = timings[-1]
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10mb,100mb,1gb,2.5gb")
    ap.add_argument("--steps", default="shrink,compare")
    ap.add_argument("--scratch", help="folder for the generated models (default: a temporary one, removed)")
    ap.add_argument("--patience", type=float, default=60.0, help="seconds to wait for load < 2.5 before each step")
    ap.add_argument("--json", default=str(OUT / "scaling.json"))
    args = ap.parse_args(argv)
    exe = shutil.which("shrinkray") or "shrinkray"
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = json.loads(out.read_text()) if out.exists() else []
    scratch = Path(args.scratch) if args.scratch else Path(tempfile.mkdtemp(prefix="shrinkray-scaling-"))
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        for size in [s for s in args.sizes.split(",") if s]:
            t0 = time.perf_counter()
            path = build(size, scratch)
            built_s = time.perf_counter() - t0
            nbytes = files_bytes(path)
            for step in [s for s in args.steps.split(",") if s]:
                load = compare_speed.wait_load(patience=args.patience)
                if step == "shrink":
                    target = scratch / f"{path.stem}.int8.onnx"
                    cmd = [exe, "shrink", str(path), "-m", "weights-int8", "-o", str(target), "--force"]
                else:
                    cmd = [exe, "compare", str(path), "--timings"]
                row = {"size": size, "file_mb": round(nbytes / 1e6, 1), "step": step, "built_s": round(built_s, 1),
                       "load_start": load, **timed(cmd), "load_end": round(os.getloadavg()[0], 2),
                       "date": time.strftime("%Y-%m-%d %H:%M"), "command": " ".join(["shrinkray", *cmd[1:]])}  # fmt: skip
                row["tree_peak_x_file"] = round(row["tree_peak_mb"] * 1e6 / nbytes, 2)
                if row["single_peak_mb"]:
                    row["single_peak_x_file"] = round(row["single_peak_mb"] * 1e6 / nbytes, 2)
                rows.append(row)
                out.write_text(json.dumps(rows, indent=1))
                print(json.dumps(row), flush=True)
                for leftover in scratch.glob(f"{path.stem}.int8.onnx*"):
                    leftover.unlink()
            for leftover in scratch.glob(f"{path.stem}*"):
                leftover.unlink()
    finally:
        if not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    print("\n| size | file MB | step | wall s | tree peak MB (x file) | worker peak MB (x file) | load start/end |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['size']} | {r['file_mb']} | {r['step']} | {r['wall_s']} | {r['tree_peak_mb']} ({r['tree_peak_x_file']}x) "
              f"| {r['single_peak_mb']} ({r.get('single_peak_x_file')}x) | {r['load_start']} / {r['load_end']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

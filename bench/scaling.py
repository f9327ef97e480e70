"""How cost grows with model size (issue 12): `shrink -m weights-int8` and `compare`, time and peak memory.

Generated transformers (bench/common/synthetic.py's generator) of about 10 MB, 100 MB and 1 GB (one .onnx file each),
and a 2.5 GB one kept in external data (a folder ``scaling_2_5gb/model.onnx`` + ``model.onnx.data``, and
the same folder zipped, stored), built on the fly in a child process into a scratch folder (default: a
temporary folder under /tmp, removed at the end; never committed). Each command runs as
``/usr/bin/time -v shrinkray ...`` with the whole process tree's resident memory sampled every 50 ms (the
CLI does the work in a capped worker). Steps:

* ``shrink``: ``shrink MODEL -m weights-int8`` (the folder's .onnx for an external-data model, which
  streams tensor by tensor: shrinkray.pipeline.streaming);
* ``shrink-zip``: the same on the zip (external-data models only);
* ``compare``: ``compare MODEL --timings`` plus ``--compare-args`` (default ``--methods weights-int8``,
  the method whose cost is followed here; the default four methods are in the earlier rows).

    python -m bench scaling                               # 10mb,100mb,1gb,2.5gb; shrink,shrink-zip,compare
    python -m bench scaling --sizes 10mb,100mb --steps shrink,compare
    python -m bench scaling --sizes 2.5gb --steps shrink,shrink-zip
    python -m bench scaling --plot-only                   # redraw bench/out/scaling.svg from the JSON

Results: bench/out/scaling.json (appended; each row has its load average at start and end), a table and
a linear fit of wall and CPU time against size per series printed at the end, and bench/out/scaling.svg (log-log: CPU
time and peak memory against file size). Check free disk before the 2.5 GB model: ~2.6 GB for the
folder, as much for the zip and for its unpacked copy during shrink-zip, 0.7 GB per output (``df -h /tmp``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compare_speed  # noqa: E402  (process-tree memory sampling, load waiting)
from common import results  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"

#: Generator specs: floats ~ vocab*d + layers*(4*d*d + 2*d*d_ff).
SPECS = {
    "10mb": {"vocab": 4096, "d": 256, "heads": 4, "d_ff": 1024, "layers": 2, "max_pos": 256, "seed": 1},
    "100mb": {"vocab": 12288, "d": 512, "heads": 8, "d_ff": 2048, "layers": 6, "max_pos": 256, "seed": 20250607},
    "1gb": {"vocab": 32000, "d": 1024, "heads": 16, "d_ff": 4096, "layers": 16, "max_pos": 256, "seed": 3},
    "2.5gb": {"vocab": 32000, "d": 1024, "heads": 16, "d_ff": 4096, "layers": 48, "max_pos": 256, "seed": 4},
}
SPECS["100mb-ext"], SPECS["1gb-ext"] = SPECS["100mb"], SPECS["1gb"]
#: Sizes saved with external data (the only way past 2 GB; the -ext twins show the streaming path's slope).
EXTERNAL = {"100mb-ext", "1gb-ext", "2.5gb"}


class _ToDataFile:
    """Stands in for onnx.numpy_helper inside the generator: each array of 1 KiB or more goes straight to
    the data file (the way exporters of large models write), so building 2.5 GB holds one tensor at a time."""

    def __init__(self, data: Path) -> None:
        from onnx import numpy_helper

        self._real = numpy_helper
        self._fh = data.open("xb")
        self._name = data.name

    def __getattr__(self, name: str):
        return getattr(self._real, name)

    def from_array(self, array, name: str):
        import onnx

        tensor = self._real.from_array(array, name)
        if array.nbytes >= 1024:
            offset = self._fh.tell()
            self._fh.write(tensor.raw_data)
            tensor.ClearField("raw_data")
            for key, value in (("location", self._name), ("offset", str(offset)), ("length", str(array.nbytes))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
            tensor.data_location = onnx.TensorProto.EXTERNAL
        return tensor


def _build_here(size: str, folder: Path) -> None:
    """In the child: generate and write (an in-memory model holds all of it, ~2x its size while built)."""
    import onnx
    from common import synthetic

    stem = f"scaling_{size.replace('.', '_').replace('-', '_')}"
    if size not in EXTERNAL:
        (folder / f"{stem}.onnx").write_bytes(synthetic.build_transformer(**SPECS[size]).SerializeToString())
        return
    target = folder / stem
    target.mkdir()
    writer = _ToDataFile(target / "model.onnx.data")
    synthetic.numpy_helper = writer
    check = synthetic.onnx.checker.check_model
    synthetic.onnx.checker.check_model = lambda model: None  # checked below, from the file
    try:
        model = synthetic.build_transformer(**SPECS[size])
    finally:
        synthetic.onnx.checker.check_model = check
        writer._fh.close()
    (target / "model.onnx").write_bytes(model.SerializeToString())
    onnx.checker.check_model(str(target / "model.onnx"))


def build(size: str, folder: Path) -> Path:
    """The model file (inside its own folder, with ``model.onnx.data`` beside it, for external data)."""
    subprocess.run([sys.executable, __file__, "--build-one", size, "--scratch", str(folder)], check=True)
    stem = f"scaling_{size.replace('.', '_').replace('-', '_')}"
    return folder / stem / "model.onnx" if size in EXTERNAL else folder / f"{stem}.onnx"


def zip_folder(model: Path) -> Path:
    """The model's folder as a stored zip (weights barely compress; a user's zip may be deflated)."""
    archive = model.parent.with_suffix(".zip")
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for f in sorted(model.parent.iterdir()):
            zf.write(f, f"{model.parent.name}/{f.name}")
    return archive


def files_bytes(path: Path) -> int:
    data = [path.with_name(path.name + ".data")]
    return path.stat().st_size + sum(d.stat().st_size for d in data if d.exists())


def folder_bytes(folder: Path, outside: frozenset[tuple[int, int]] = frozenset()) -> int:
    """Disk the files under ``folder`` take now: each file once however many links it has, none of the files
    ``outside`` names by (device, inode) (the input's own files, which a hard link beside a measuring copy reads
    in place), and 0 for files that vanish while it is walked."""
    seen: set[tuple[int, int]] = set(outside)
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                info = os.lstat(os.path.join(root, name))
                if (info.st_dev, info.st_ino) not in seen:
                    seen.add((info.st_dev, info.st_ino))
                    total += info.st_blocks * 512
    return total


def inodes(paths: list[Path]) -> frozenset[tuple[int, int]]:
    return frozenset((p.stat().st_dev, p.stat().st_ino) for p in paths if p.exists())


def timed(cmd: list[str], code: str | None = None, scratch: Path | None = None,
          inputs: list[Path] | None = None) -> dict:  # fmt: skip
    """Wall time, tree peak and single-process peak of one command (compare_speed.measure_command);
    ``code``: a checkout to run instead of the installed package (PYTHONPATH and working folder: the
    worker, ``python -m shrinkray.runs.sandbox``, imports from its working folder first). ``scratch``: the
    command's temporary folder (TMPDIR), whose disk use is sampled every 100 ms: its peak is the row's
    ``scratch_peak_mb`` (blocks allocated, so a sparse or not yet written file counts what it holds)."""
    env = dict(os.environ)
    if code:
        env["PYTHONPATH"] = code
    disk = [0]
    done = threading.Event()
    if scratch is not None:
        scratch.mkdir(parents=True, exist_ok=True)
        env["TMPDIR"] = str(scratch)
        own = inodes(inputs or [])

        def sample() -> None:
            while not done.wait(0.1):
                disk[0] = max(disk[0], folder_bytes(scratch, own))

        threading.Thread(target=sample, daemon=True).start()
    try:
        rc, out, err, wall, tree_peak = compare_speed.measure_command(["/usr/bin/time", "-v", *cmd], env=env,
                                                                      cwd=code)  # fmt: skip
    finally:
        done.set()
    single = re.search(r"Maximum resident set size \(kbytes\): (\d+)", err)
    row = {"rc": rc, "wall_s": round(wall, 1), "tree_peak_mb": round(tree_peak / 1e6, 1),
           "single_peak_mb": round(int(single.group(1)) * 1024 / 1e6, 1) if single else None}  # fmt: skip
    lines = [ln for ln in (out + "\n" + err).splitlines() if ln.startswith(("Error", "File:", "Note: Converted"))]
    if lines:
        row["said"] = " | ".join(lines)[:600]
    cpu = re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", err)
    if cpu:  # the process tree's CPU seconds: far less sensitive than wall time to other work on the machine
        row["cpu_s"] = round(sum(float(x) for x in cpu), 1)
    if rc:
        row["stderr_tail"] = err[-800:]
    if scratch is not None:
        row["scratch_peak_mb"] = round(disk[0] / 1e6, 1)
        shutil.rmtree(scratch, ignore_errors=True)
    timings = [line for line in out.splitlines() if line.startswith("Phase timings")]
    if timings:
        row["timings"] = timings[-1]
    return row


# --------------------------------------------------------------------------- results


TABLE_HEADER = ["size", "file MB", "step", "wall s", "CPU s", "worker peak MB (x file)", "tree peak MB (x file)",
                "scratch disk MB (x file)", "load start / end", "date"]  # fmt: skip


def table_rows(rows: list[dict]) -> list[list]:
    """The rows of the table this benchmark prints and writes (header: TABLE_HEADER)."""
    return [[r["size"], r["file_mb"], r["step"], f"{r['wall_s']}{'' if not r['rc'] else ' (rc ' + str(r['rc']) + ')'}",
             r.get("cpu_s", ""), f"{r['single_peak_mb']} ({r.get('single_peak_x_file')}x)",
             f"{r['tree_peak_mb']} ({r['tree_peak_x_file']}x)",
             f"{r['scratch_peak_mb']} ({r['scratch_peak_x_file']}x)" if "scratch_peak_mb" in r else "",
             f"{r['load_start']} / {r['load_end']}", r["date"]]
            for r in rows]  # fmt: skip


def series(row: dict) -> str:
    """What a row measured: the step, and for shrink whether the model was one file or external data."""
    if row["step"] == "shrink":
        return "shrink, external data (streamed)" if row.get("external_data") else "shrink, one file (in memory)"
    if row["step"] == "shrink-zip":
        return "shrink of the zip (streamed)"
    return row["step"] + (", external data" if row.get("external_data") else "")


def linear_fit(rows: list[dict], step: str, key: str = "wall_s") -> str:
    """Least squares seconds = a + b * MB over the successful rows of one series, and each row's fit."""
    pts = [(r["file_mb"], r[key]) for r in rows if series(r) == step and not r["rc"] and r.get(key) is not None]
    if len(pts) < 2:
        return f"{step}: fewer than two rows"
    n = len(pts)
    mx, my = sum(x for x, _ in pts) / n, sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    b = sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx else 0.0
    a = my - b * mx
    points = ", ".join(f"{x:g} MB: {y:g} s (fit {a + b * x:.1f} s)" for x, y in pts)
    return f"{step}: {key} ~ {a:.1f} s + {b * 1000:.1f} s per GB; {points}"


def svg_plot(rows: list[dict], path: Path) -> None:
    """Log-log plot, no plotting library: CPU time (left) and worker peak memory (right) against file size."""
    width, height, pad = 900, 440, 60
    bottom = height - 100  # the plots' lower edge: tick labels, axis title and legend below
    panels = [("CPU time of the process tree (s)", "cpu_s"), ("peak memory of the worker (MB)", "single_peak_mb")]
    colours = ["#6d28d9", "#0891b2", "#d97706", "#16a34a", "#dc2626"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="12"><rect width="100%" height="100%" fill="white"/>']  # fmt: skip
    good = [r for r in rows if not r["rc"] and r.get("single_peak_mb") and r.get("cpu_s")]
    steps = sorted({series(r) for r in good})  # a series with no finished run has nothing to draw
    xs = [r["file_mb"] for r in good]
    x0, x1 = math.log10(min(xs) / 1.5), math.log10(max(xs) * 1.5)
    pw = (width - 3 * pad) / 2
    for k, (title, key) in enumerate(panels):
        left = pad + k * (pw + pad)
        ys = [r[key] for r in good]
        y0, y1 = math.log10(min(ys) / 1.5), math.log10(max(ys) * 1.5)

        def px(v: float, left: float = left) -> float:
            return left + (math.log10(v) - x0) / (x1 - x0) * pw

        def py(v: float, y0: float = y0, y1: float = y1) -> float:
            return bottom - (math.log10(v) - y0) / (y1 - y0) * (bottom - pad)

        parts.append(f'<rect x="{left}" y="{pad}" width="{pw}" height="{bottom - pad}" fill="none" stroke="#999"/>')
        parts.append(f'<text x="{left + pw / 2}" y="{pad - 20}" text-anchor="middle" font-weight="bold">{title}</text>')
        parts.append(f'<text x="{left + pw / 2}" y="{bottom + 32}" text-anchor="middle">model size (MB, log)</text>')
        for dec in range(math.floor(x0), math.ceil(x1) + 1):
            v = 10**dec
            if x0 <= dec <= x1:
                parts.append(f'<line x1="{px(v)}" x2="{px(v)}" y1="{pad}" y2="{bottom}" stroke="#eee"/>'
                             f'<text x="{px(v)}" y="{bottom + 15}" text-anchor="middle">{v:g}</text>')  # fmt: skip
        for dec in range(math.floor(y0), math.ceil(y1) + 1):
            v = 10**dec
            if y0 <= dec <= y1:
                parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{py(v)}" y2="{py(v)}" stroke="#eee"/>'
                             f'<text x="{left - 5}" y="{py(v) + 4}" text-anchor="end">{v:g}</text>')  # fmt: skip
        for i, step in enumerate(steps):
            pts = sorted((r["file_mb"], r[key]) for r in good if series(r) == step)
            colour = colours[i % len(colours)]
            if len(pts) > 1:
                line = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
                parts.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2"/>')
            for x, y in pts:
                parts.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="4" fill="{colour}"/>'
                             f'<text x="{px(x) + 6:.1f}" y="{py(y) - 6:.1f}" fill="{colour}">{y:g}</text>')  # fmt: skip
        if key == "single_peak_mb":  # the 1x-file line: memory equal to the model's size (MB = MB)
            lo, hi = max(min(xs), 10**y0), min(max(xs), 10**y1)
            parts.append(f'<line x1="{px(lo):.1f}" y1="{py(lo):.1f}" x2="{px(hi):.1f}" y2="{py(hi):.1f}" '
                         f'stroke="#999" stroke-dasharray="4 4"/><text x="{px(hi) - 4:.1f}" y="{py(hi) + 14:.1f}" '
                         f'text-anchor="end" fill="#777">1x model size</text>')  # fmt: skip
    for i, step in enumerate(steps):
        lx, ly = pad + (i % 3) * 270, bottom + 50 + (i // 3) * 16
        parts.append(f'<rect x="{lx}" y="{ly}" width="10" height="10" fill="{colours[i % 5]}"/>'
                     f'<text x="{lx + 15}" y="{ly + 9}">{step}</text>')  # fmt: skip
    parts.append("</svg>")
    path.write_text("\n".join(parts))


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10mb,100mb,1gb,100mb-ext,1gb-ext,2.5gb")
    ap.add_argument("--steps", default="shrink,shrink-zip,compare")
    ap.add_argument("--compare-args", default="--methods weights-int8", help="extra arguments of compare")
    ap.add_argument("--scratch", help="folder for the generated models (default: a temporary one, removed)")
    ap.add_argument("--patience", type=float, default=60.0, help="seconds to wait for load < 2.5 before each step")
    ap.add_argument("--json", default=str(OUT / "scaling.json"))
    ap.add_argument("--plot-only", action="store_true")
    ap.add_argument("--label", default="", help="recorded in each row (e.g. the commit the --code copy holds)")
    ap.add_argument("--code", help="run this checkout of shrinkray (e.g. a `git archive HEAD` copy), not the installed one")
    ap.add_argument("--build-one", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.build_one:
        _build_here(args.build_one, Path(args.scratch))
        return 0
    result = results.begin("scaling", argv)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = json.loads(out.read_text()) if out.exists() else []
    before = len(rows)
    if not args.plot_only:
        run_steps(args, rows, out)
    new = rows[before:]
    print("\n" + results.markdown_table(TABLE_HEADER, table_rows(rows)))  # every row of the JSON, old ones too
    latest = {(r["size"], r["step"]): r for r in rows if r.get("pass") == "third"}  # the last run of each
    runs = list(latest.values())
    for step in sorted({series(r) for r in runs}):
        print(linear_fit(runs, step))
        print(linear_fit(runs, step, "cpu_s"))
    if runs:
        svg_plot(runs, OUT / "scaling.svg")
        print(f"plot: {OUT / 'scaling.svg'}")
    if new:  # --plot-only measures nothing: its section stays
        fits = [linear_fit(new, step, key) for step in sorted({series(r) for r in new}) for key in ("wall_s", "cpu_s")]
        fits = [f for f in fits if "fewer than two rows" not in f]
        notes = [f"Least-squares fits over this run: {'; '.join(fits)}."] if fits else []
        notes.append(f"Every row (appended): `{out.name}` in bench/out/; plot `scaling.svg`.")
        results.finish(result, TABLE_HEADER, table_rows(new), notes=notes, show=False)
    return 0


def run_steps(args: argparse.Namespace, rows: list[dict], out: Path) -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: the scratch folder is removed
    exe = shutil.which("shrinkray") or "shrinkray"
    scratch = Path(args.scratch) if args.scratch else Path(tempfile.mkdtemp(prefix="shrinkray-scaling-"))
    scratch.mkdir(parents=True, exist_ok=True)
    print(shutil.disk_usage(scratch).free / 1e9, "GB free in", scratch, flush=True)
    try:
        for size in [s for s in args.sizes.split(",") if s]:
            t0 = time.perf_counter()
            path = build(size, scratch)
            archive = zip_folder(path) if size in EXTERNAL and "shrink-zip" in args.steps else None
            built_s = time.perf_counter() - t0
            nbytes = files_bytes(path)
            for step in [s for s in args.steps.split(",") if s]:
                if step == "shrink-zip" and archive is None:
                    continue
                load = compare_speed.wait_load(patience=args.patience)
                target = scratch / f"{path.stem}.int8.onnx"
                if step == "shrink":
                    cmd = [exe, "shrink", str(path), "-m", "weights-int8", "-o", str(target), "--force"]
                elif step == "shrink-zip":
                    cmd = [exe, "shrink", str(archive), "-m", "weights-int8", "-o", str(target), "--force"]
                else:
                    cmd = [exe, "compare", str(path), "--timings", *args.compare_args.split()]
                row = {"size": size, "file_mb": round(nbytes / 1e6, 1), "step": step, "built_s": round(built_s, 1),
                       "external_data": size in EXTERNAL, "load_start": load,
                       **timed(cmd, args.code, scratch / "tmp", [path, path.with_name(path.name + ".data")]),
                       "load_end": round(os.getloadavg()[0], 2), "date": time.strftime("%Y-%m-%d %H:%M"),
                       "command": " ".join(["shrinkray", *cmd[1:]]), "pass": "third", "label": args.label}  # fmt: skip
                if target.exists():
                    row["output_mb"] = round(files_bytes(target) / 1e6, 1)
                row["tree_peak_x_file"] = round(row["tree_peak_mb"] * 1e6 / nbytes, 2)
                if row["single_peak_mb"]:
                    row["single_peak_x_file"] = round(row["single_peak_mb"] * 1e6 / nbytes, 2)
                row["scratch_peak_x_file"] = round(row["scratch_peak_mb"] * 1e6 / nbytes, 2)
                rows.append(row)
                out.write_text(json.dumps(rows, indent=1))
                print(json.dumps(row), flush=True)
                for leftover in scratch.glob(f"{path.stem}.int8.onnx*"):
                    leftover.unlink()
            for leftover in [path, path.with_name(path.name + ".data"), archive]:
                if leftover is not None and leftover.exists():
                    leftover.unlink()
            if size in EXTERNAL:
                shutil.rmtree(path.parent, ignore_errors=True)
    finally:
        if not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())

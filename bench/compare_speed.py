"""Issue 12 targets: `shrinkray compare MODEL` (default methods) wall time and peak memory.

Targets (2-core machine): the generated ~100 MB transformer in <= 60 s with peak RSS <= 4x the file;
a ~3 MB CNN in <= 15 s. Each run is ``/usr/bin/time -v shrinkray compare MODEL --timings --json ...``;
the CLI does the work in a worker subprocess, so peak memory is measured two ways:

* ``tree peak``: the sum of VmRSS over the whole process tree, sampled every 50 ms from /proc;
* ``max single``: /usr/bin/time's "Maximum resident set size" (the largest single process);
* ``peak_mb_by_process``: each process's own peak (VmHWM) by role: the worker, dynamic-int8's quantizer
  child (ONNX Runtime's quantize_dynamic: ~820 MB on the 101 MB model, so it, not the worker, is the "max
  single" whenever it is larger), the CLI.

Before each run it waits (up to 5 minutes) until the 1-minute load average is < 2.5 and records the
load average at the start and end. The phase breakdown (shrink, sizes, parity, culprits, latency)
comes from ``--timings`` (also in the JSON report). Results: bench/out/compare_speed.json.

    python -m bench compare-speed                 # both models, once each
    python -m bench compare-speed --repeat 2 --models cnn
    python -m bench compare-speed --before /tmp/old-tree   # also time another checkout (same run, alternating)
    python -m bench compare-speed --agreement     # pairwise adaptive latency vs the old fixed 50-run ratios
    python -m bench compare-speed --session-memory   # what each variant's ONNX Runtime session holds
    python -m bench compare-speed --trace         # in-process: peak resident memory per compare step

``--before PATH`` runs the same command with ``PYTHONPATH=PATH`` (a checkout of an older commit, e.g.
``git archive <commit> | tar -x -C PATH``) right before each run of this tree, so before/after share the
machine's load. ``--agreement`` times each sample's variants the way compare does now (pairwise against
the original, adaptive, 5 s per setting) and then the old way (all models, 50 interleaved rounds, ratio of
medians), three times, and counts repeats inside each other's intervals and agreement within the combined
uncertainty (bench/latency_agreement.py; raw rows bench/out/latency_agreement_third.json).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import results, synthetic  # noqa: E402  (the generated transformer)
from common.procs import wait_load  # noqa: E402, F401  (scaling.py uses it from here)

OUT = Path(__file__).resolve().parent / "out"
#: issue 12's targets: wall seconds, and the worker's peak as a multiple of the file (None: no memory target)
TARGETS = {"transformer": (60.0, 4.0), "cnn": (15.0, None)}


def build_cnn(seed: int = 7) -> onnx.ModelProto:
    """A ~2.9 MB float32 image classifier: 4 strided 3x3 convs (3->32->64->128->256), a 1x1 conv, GAP, Gemm 1000."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def w(name, shape, fan_in):
        arr = rng.normal(0, np.sqrt(2.0 / fan_in), shape).astype(np.float32)
        arr *= rng.lognormal(0, 0.3, (shape[0],) + (1,) * (len(shape) - 1)).astype(np.float32)  # channel spread
        inits.append(numpy_helper.from_array(arr, name))
        return name

    def b(name, n):
        inits.append(numpy_helper.from_array(rng.normal(0, 0.01, n).astype(np.float32), name))
        return name

    x, c_in = "image", 3
    for i, (c_out, k, s) in enumerate([(32, 3, 2), (64, 3, 2), (128, 3, 2), (256, 3, 2), (256, 1, 1)]):
        y = f"conv{i}"
        nodes.append(helper.make_node("Conv", [x, w(f"w{i}", (c_out, c_in, k, k), c_in * k * k), b(f"b{i}", c_out)], [y],
                                      kernel_shape=[k, k], strides=[s, s], pads=[k // 2] * 4))
        nodes.append(helper.make_node("Relu", [y], [y + "_r"]))
        x, c_in = y + "_r", c_out
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"]))
    fc = rng.normal(0, np.sqrt(1.0 / 256), (256, 1000)).astype(np.float32)
    inits.append(numpy_helper.from_array(fc, "fc_w"))
    nodes.append(helper.make_node("Gemm", ["flat", "fc_w", b("fc_b", 1000)], ["logits"]))
    nodes.append(helper.make_node("Softmax", ["logits"], ["probs"], axis=1))
    graph = helper.make_graph(
        nodes, "cnn3mb", [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, 224, 224])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 1000])], inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="shrinkray-bench")
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model


def cnn_path() -> Path:
    path = OUT / "compare_speed_cnn3mb.onnx"
    if not path.exists():
        OUT.mkdir(parents=True, exist_ok=True)
        path.write_bytes(build_cnn().SerializeToString())
    return path


def _tree_rss(root: int, hwm: dict[str, int] | None = None) -> int:
    """Sum of VmRSS (bytes) over ``root`` and all its descendants; ``hwm`` gets each process's own peak
    (VmHWM, kept by the kernel: no sample can miss it) by role (:func:`_role`), the largest per role."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                parents[int(entry)] = int(stat[stat.rindex(")") + 2:].split()[1])
            except (OSError, ValueError):
                pass
    tree, frontier = {root}, [root]
    while frontier:
        p = frontier.pop()
        for child, parent in parents.items():
            if parent == p and child not in tree:
                tree.add(child)
                frontier.append(child)
    total = 0
    for pid in tree:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
                elif line.startswith("VmHWM:") and hwm is not None:
                    role = _role(pid, root)
                    hwm[role] = max(hwm.get(role, 0), int(line.split()[1]) * 1024)
        except OSError:
            pass
    return total


def _role(pid: int, root: int) -> str:
    """Which process of a compare run ``pid`` is: the worker, ONNX Runtime's quantizer child of
    dynamic-int8, the CLI, or other (/usr/bin/time itself)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "other"
    if "ort_quantize_worker" in cmdline:
        return "quantizer"
    if any(f"shrinkray.{m}" in cmdline for m in ("runs.sandbox", "runs.jobs", "sandbox", "jobs")):
        return "worker"  # shrinkray.sandbox / shrinkray.jobs before the engine moved into subpackages (--before)
    if "compare" in cmdline and "/usr/bin/time" not in cmdline and pid != root:
        return "cli"
    return "other"


PATIENCE = [300.0]
#: Each process's own peak (VmHWM) by role in the last measure_command: worker, quantizer, cli.
PEAKS_BY_ROLE: dict[str, int] = {}


def measure_command(cmd: list[str], env: dict[str, str] | None = None,
                    cwd: str | None = None) -> tuple[int, str, str, float, int]:  # fmt: skip
    """Run ``cmd`` (under ``/usr/bin/time -v`` when the caller puts it first): its return code, output,
    error text, wall seconds and the peak resident memory of its whole process tree, sampled every 50 ms."""
    peak = [0]
    hwm: dict[str, int] = {}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss(proc.pid, hwm))
            time.sleep(0.05)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    done.set()
    thread.join()
    PEAKS_BY_ROLE.clear()
    PEAKS_BY_ROLE.update(hwm)
    return proc.returncode, out, err, wall, peak[0]


def run_once(model: Path, tag: str, pythonpath: str | None = None) -> dict:
    exe = shutil.which("shrinkray") or "shrinkray"
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    report = OUT / f"compare_speed_{tag}.json"
    cmd = ["/usr/bin/time", "-v", exe, "compare", str(model), "--timings", "--json", str(report)]
    load_start = wait_load(patience=PATIENCE[0])
    # the worker runs `python -m shrinkray.runs.sandbox`, which puts the working folder first on sys.path
    rc, out, err, wall, tree_peak = measure_command(cmd, env=env, cwd=pythonpath)
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", err)
    cpu = sum(float(x) for x in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", err))
    timings = {}
    with contextlib.suppress(OSError, ValueError):
        timings = json.loads(report.read_text()).get("timings", {})
    size = model.stat().st_size
    row = {
        "model": model.name, "file_mb": round(size / 1e6, 2), "rc": rc, "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),  # user + system of the CLI, its worker and their children: what load does not change
        "tree_peak_mb": round(tree_peak / 1e6, 1), "tree_peak_x_file": round(tree_peak / size, 2),
        "max_single_mb": round(int(m.group(1)) * 1024 / 1e6, 1) if m else None,
        # each process's own peak (VmHWM): /usr/bin/time's figure is the largest of them, which is dynamic-int8's
        # quantizer child (ONNX Runtime's quantize_dynamic, ~820 MB on the 101 MB model) whenever it beats the worker
        "peak_mb_by_process": {k: round(v / 1e6, 1) for k, v in sorted(PEAKS_BY_ROLE.items())},
        "worker_peak_x_file": round(PEAKS_BY_ROLE.get("worker", 0) / size, 2),
        "load_start": load_start, "load_end": round(os.getloadavg()[0], 2),
        "timings": {k: round(v, 1) for k, v in timings.items()},
        "timings_text": "\n".join(line for line in out.splitlines() if re.search(r"shrink|sizes|parity|culprit|latency|total", line, re.I))[-1500:],
        "command": " ".join(["shrinkray", "compare", str(model), "--timings", "--json", str(report)]),
        "tree": pythonpath or "this",
    }
    if rc:
        row["stderr_tail"] = err[-1500:]
    if row["max_single_mb"]:
        row["max_single_x_file"] = round(row["max_single_mb"] * 1e6 / size, 2)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="transformer,cnn")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", default=str(OUT / "compare_speed.json"))
    ap.add_argument("--before", help="another checkout to time right before each run (PYTHONPATH)")
    ap.add_argument("--after", help="the checkout to time (PYTHONPATH; default: the installed package)")
    ap.add_argument("--patience", type=float, default=300.0, help="seconds to wait for load < 2.5 before each run")
    ap.add_argument("--agreement", action="store_true", help="latency agreement with the fixed 50-run ratios")
    ap.add_argument("--session-memory", action="store_true", help="memory each variant's ONNX Runtime session adds")
    ap.add_argument("--trace", action="store_true", help="peak memory per step of compare, in this process")
    ap.add_argument("--samples", default="mlp,cnn,transformer,rnn,shared_weight,cnn3mb")
    args = ap.parse_args(argv)
    PATIENCE[0] = args.patience
    if args.trace:
        return trace(synthetic.generated_model())
    if args.session_memory:
        return session_memory(synthetic.generated_model())
    if args.agreement:
        return agreement([s for s in args.samples.split(",") if s])
    result = results.begin("compare-speed", argv)  # the diagnostics above print only; this is the benchmark
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = json.loads(out.read_text()) if out.exists() else []
    paths = {"transformer": synthetic.generated_model, "cnn": cnn_path}
    new = []
    for _ in range(args.repeat):
        for key in [k.strip() for k in args.models.split(",") if k.strip()]:
            for tree in ([args.before] if args.before else []) + [args.after]:
                row = run_once(paths[key](), f"{key}_{time.strftime('%Y%m%d-%H%M%S')}", tree)
                row["key"], row["date"] = key, time.strftime("%Y-%m-%d %H:%M")
                rows.append(row)
                new.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "timings_text"}), flush=True)
                print(row["timings_text"], flush=True)
                out.write_text(json.dumps(rows, indent=1))
    header, table, targets = result_table(new, args.after or "this")
    results.finish(result, header, table, targets=targets,
                   notes=[f"Every run's figures (appended): `{out.name}` in bench/out/."])  # fmt: skip
    return 0


def result_table(rows: list[dict], tree: str = "this") -> tuple[list[str], list[list], list[results.Target]]:
    """One line per run of this call, and the targets each model's runs of ``tree`` met."""
    header = ["model", "tree", "wall s", "CPU s", "worker peak MB (x file)", "quantizer peak MB", "tree peak MB",
              "load start / end", "rc"]  # fmt: skip
    table = [[f"{r['key']} {r['file_mb']} MB", r["tree"], r["wall_s"], r["cpu_s"],
              f"{r['peak_mb_by_process'].get('worker', '')} ({r['worker_peak_x_file']}x)",
              r["peak_mb_by_process"].get("quantizer", ""), r["tree_peak_mb"], f"{r['load_start']} / {r['load_end']}",
              r["rc"]] for r in rows]  # fmt: skip
    targets = []
    for key, (wall, times_file) in TARGETS.items():
        mine = [r for r in rows if r["key"] == key and r["tree"] == tree]
        if not mine:
            continue
        good = [not r["rc"] and r["wall_s"] <= wall and (times_file is None or r["worker_peak_x_file"] <= times_file)
                for r in mine]  # fmt: skip
        what = f"{key}: <= {wall:g} s" + (f", worker peak <= {times_file:g}x the file" if times_file else "")
        targets.append(results.Target(what, all(good), f"{sum(good)} of {len(good)} runs"))
    return header, table, targets


SESSION_PROBE = """
import sys, threading, time
import onnxruntime as ort
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS'):
            return int(line.split()[1]) * 1024
peak = [0]
def sample():
    while True:
        peak[0] = max(peak[0], rss()); time.sleep(0.005)
threading.Thread(target=sample, daemon=True).start()
time.sleep(0.05)
base = rss()
opts = ort.SessionOptions(); opts.intra_op_num_threads = 1; opts.inter_op_num_threads = 1
level = sys.argv[2]
if level == "none":
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
session = ort.InferenceSession(sys.argv[1], opts, providers=["CPUExecutionProvider"])
time.sleep(0.05)
held = rss() - base
import ctypes
ctypes.CDLL("libc.so.6").malloc_trim(0)  # what compare does after every open (shrinkray.memory)
time.sleep(0.05)
print(held, rss() - base, peak[0] - base)
"""


def session_memory(model: Path) -> int:
    """Resident memory an optimized 1-thread ONNX Runtime session adds (held, and at its peak while opening),
    for the model and each default variant, each in a fresh process: what compare's latency step holds."""
    import tempfile

    import shrinkray
    from shrinkray.errors import ShrinkRayError
    from shrinkray.graph import prefold

    loaded = shrinkray.load(model)
    size = model.stat().st_size
    with tempfile.TemporaryDirectory() as tmp:
        files = {"original": model}
        for spec in shrinkray.all_methods():
            if not spec.in_default_set:
                continue
            try:
                variant = shrinkray.shrink(loaded, spec.name)
            except ShrinkRayError:
                continue
            files[spec.name] = Path(tmp) / f"{spec.name}.onnx"
            files[spec.name].write_bytes(variant.model.SerializeToString())
            del variant
        print(f"{model.name}: {size / 1e6:.1f} MB; session memory (1 thread): held after opening, held after "
              "malloc_trim, peak while opening; optimized on the file, optimized on its measuring copy (decodes "
              "folded beforehand, weights external: what compare opens), and not optimized; then the seconds to "
              "make the copy (measure/prefold.py, in this process)")
        for key, path in files.items():
            cells = []
            copy = Path(tmp) / f"{key}.measuring.onnx"
            started = time.perf_counter()
            prefold.prefold_file(path, copy)
            made_s = time.perf_counter() - started
            for level, target in (("all", path), ("copy", copy), ("none", path)):
                done = subprocess.run([sys.executable, "-c", SESSION_PROBE, str(target), level if level != "copy" else "all"],
                                      capture_output=True, text=True)  # fmt: skip
                held, trimmed, peak = (int(x) / 1e6 for x in done.stdout.split())
                cells.append(f"{level:4s} +{held:5.0f} / +{trimmed:5.0f} / peak +{peak:5.0f} MB")
            print(f"  {key:14s} file {path.stat().st_size / 1e6:6.1f} MB  " + " | ".join(cells)
                  + f" | copy made in {made_s:.2f} s", flush=True)
    return 0


def trace(model: Path) -> int:
    """compare_job (what the CLI worker runs, default methods) in this process, with one heap as the worker
    has: the exact peak (VmHWM, read and reset through /proc/self/clear_refs at every boundary) of each
    progress step, of each ONNX Runtime session opening and of onnx.checker on each written file inside it."""
    import tempfile

    from shrinkray.measure.results import CompareSettings
    from shrinkray.memory import limit_malloc_arenas
    from shrinkray.pipeline import compare as compare_module
    from shrinkray.runs.jobs import compare_job

    limit_malloc_arenas(1)  # as the capped worker does (shrinkray/sandbox.py): its threads share one heap

    def status(key: str) -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1]) * 1024
        return 0

    state: dict = {"step": "loading the model", "peaks": {}}

    def mark(next_step: str) -> None:
        """The step that ends gets its peak; the kernel's high-water mark restarts from the current size."""
        step = state["step"]
        state["peaks"][step] = max(state["peaks"].get(step, 0), status("VmHWM:"))
        Path("/proc/self/clear_refs").write_text("5")
        state["step"] = next_step

    def inside(name: str, real):
        def wrapped(files, *more):
            step = state["step"]
            mark(f"{step} / {name} {Path(files[0] if isinstance(files, list) else files).name}")
            try:
                return real(files, *more)
            finally:
                mark(step)
        return wrapped

    compare_module._open_file_session = inside("opening", compare_module._open_file_session)
    if hasattr(compare_module, "check_file"):  # older trees (--before) checked inside shrink
        compare_module.check_file = inside("onnx.checker on", compare_module.check_file)
    size = model.stat().st_size
    Path("/proc/self/clear_refs").write_text("5")
    print(f"imports: {status('VmRSS:') / 1e6:.0f} MB; load average {os.getloadavg()[0]:.2f}", flush=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        result = compare_job(model, CompareSettings(), None, False, tmp, progress=lambda step, _f: mark(step))
    mark("end")
    print(f"wall {time.perf_counter() - start:.1f} s; phases " + ", ".join(f"{k} {v:.1f} s" for k, v in result.timings.items()))
    for step, peak in state["peaks"].items():
        print(f"  {peak / 1e6:6.0f} MB ({peak / size:5.2f}x)  {step}")
    top = max(state["peaks"].values())
    print(f"peak {top / 1e6:.0f} MB ({top / size:.2f}x the file); load average {os.getloadavg()[0]:.2f}")
    return 0


def agreement(samples: list[str]) -> int:
    """Compare's latency repeated three times per sample against the old fixed 50-run ratios, each with its
    own error (issue 12, third pass): bench/latency_agreement.py, which also studies the timing setups."""
    import latency_agreement

    return latency_agreement.agreement(samples)

if __name__ == "__main__":
    raise SystemExit(main())

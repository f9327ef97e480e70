"""Issue 27: the disk a run of the ~100 MB transformer takes in all (run store + scratch), and what a repeat adds.

Goes through the app's own Runs service (queue -> capped worker -> run store), default methods and
settings, twice on the same model as a visitor uploading it again would. Its run store and TMPDIR (where
the worker's scratch goes) are one fresh folder whose disk use is sampled every 100 ms (blocks allocated,
each file once however many links it has): the peak each run adds to it, the store once it ended, and how many
copies of the model the store holds. Targets: the peak under 3x the file, and one model copy for two runs.

    python -m bench run-disk
    python -m bench run-disk --size small
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from common import results, synthetic  # noqa: E402  (the generated transformer)
from scaling import folder_bytes  # noqa: E402  (inodes once, blocks allocated)

import shrinkray  # noqa: E402
from shrinkray.measure.results import CompareSettings  # noqa: E402
from shrinkray.runs.queue import LocalQueue  # noqa: E402
from shrinkray.runs.service import Runs  # noqa: E402
from shrinkray.runs.store import RunStore  # noqa: E402

TARGET_X = 3.0


def _one_run(runs: Runs, path: Path, watched: Path) -> tuple[str, float, int]:
    """Start a run of the model at ``path`` (loaded as an upload is) and sample ``watched`` until it ends: its
    status, wall seconds and the peak bytes it added to what ``watched`` held before it."""
    before = folder_bytes(watched)
    peak, done = [before], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], folder_bytes(watched))
            done.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    run_id = runs.start(shrinkray.load(path), CompareSettings())
    while runs.view(run_id).live:
        time.sleep(0.2)
    done.set()
    sampler.join()
    return runs.view(run_id).status, time.perf_counter() - start, peak[0] - before


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    synthetic.add_size_option(parser)
    args = parser.parse_args(argv)
    result = results.begin("run-disk", argv)
    path = synthetic.sized_model(args.size)
    size = path.stat().st_size
    base = Path(tempfile.mkdtemp(prefix="shrinkray-run-disk-"))
    (base / "tmp").mkdir()
    os.environ["TMPDIR"] = str(base / "tmp")  # the worker's scratch (it inherits the environment)
    tempfile.tempdir = None
    store = RunStore(base / "store")
    runs = Runs(store, LocalQueue(workers=1))
    rows, ok, peaks = [], True, []
    try:
        for label in ("first upload", "same file again"):
            kept_before = folder_bytes(base / "store")
            status, wall, peak = _one_run(runs, path, base)
            kept = folder_bytes(base / "store") - kept_before
            ok = ok and status == "done"
            peaks.append(peak)
            models = {(p.stat().st_dev, p.stat().st_ino) for p in (base / "store").rglob("model.onnx")}
            rows.append([label, status, f"{wall:.1f} s", f"{peak / 1e6:.0f} MB ({peak / size:.2f}x)",
                         f"{kept / 1e6:.0f} MB ({kept / size:.2f}x)", f"{(peak - kept) / 1e6:.0f} MB",
                         f"{folder_bytes(base / 'store') / 1e6:.0f} MB", str(len(models))])  # fmt: skip
            print(" | ".join(rows[-1]), flush=True)
    finally:
        runs.queue.shutdown()
        shutil.rmtree(base, ignore_errors=True)
    results.finish(
        result,
        ["run", "status", "wall", "peak disk it added, store + scratch (x file)", "kept by the run (x file)",
         "at its peak beyond what it kept", "store after", "model copies in store"],
        rows,
        targets=[
            results.Target(f"a run's peak disk <= {TARGET_X:g}x the file", bool(peaks) and max(peaks) <= TARGET_X * size,
                           f"{path.stem}, {size / 1e6:.1f} MB"),
            results.Target("a repeat upload adds no second model copy", ok and rows[-1][-1] == "1"),
        ],
        notes=["Disk: blocks allocated under one folder holding the run store and TMPDIR, each file once "
               "(hard links counted once), sampled every 100 ms; the model file the runs read is outside it.",
               "Kept by the run: what its store folder holds once it ended (its model copy unless shared, and one "
               "file per variant: five by default; a large variant that compresses well, palettize's, kept as "
               ".onnx.gz once its sizes are measured). At its peak beyond what it kept: scratch (sessions read the "
               "original through a header pointing into its own file; measuring copies and dynamic-int8's "
               "quantizer keep their models in memory) and a variant's raw file before it is compressed."],
        complete=ok,
    )  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

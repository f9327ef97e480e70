"""Issue 12: how soon the app's first variant card appears on the ~100 MB generated transformer.

Goes through the app's own Runs service (queue -> capped worker -> run store snapshots), polled every
0.2 s as the page would (the page polls every 1 s, so add up to 1 s), default methods and settings.
Prints when a snapshot first shows a built variant, its parity and its sizes, and the whole run.

    python -m bench first-card
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
os.environ.setdefault("SHRINKRAY_RUNS_DIR", tempfile.mkdtemp(prefix="shrinkray-first-card-"))

from common import synthetic  # noqa: E402  (the generated transformer)

import shrinkray  # noqa: E402
from shrinkray.measure.results import CompareSettings  # noqa: E402
from shrinkray.runs.service import Runs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    path = synthetic.generated_model()
    loaded = shrinkray.load(path)
    print(f"model {path.name}: {path.stat().st_size / 2**20:.1f} MiB, load average {os.getloadavg()[0]:.2f}")
    runs = Runs()
    start = time.perf_counter()
    run_id = runs.start(loaded, CompareSettings())
    firsts: dict[str, float] = {}
    tests = {"card (built variant)": lambda v: bool(v.record), "parity": lambda v: v.parity is not None,
             "sizes": lambda v: v.sizes is not None}  # fmt: skip
    while True:
        view = runs.view(run_id)
        snapshot = view.record.snapshot or view.record.result
        for name, test in tests.items():
            if name not in firsts and snapshot is not None and any(test(v) for v in snapshot.variants):
                firsts[name] = time.perf_counter() - start
                print(f"first {name}: {firsts[name]:.1f} s")
        if not view.live:
            break
        time.sleep(0.2)
    print(f"run {view.status} after {time.perf_counter() - start:.1f} s")
    runs.queue.shutdown()
    return 0 if view.status == "done" else 1


if __name__ == "__main__":
    sys.exit(main())

"""Issue 12: how soon the app's first variant card appears on the ~100 MB generated transformer.

Goes through the app's own Runs service (queue -> capped worker -> run store snapshots), polled every
0.2 s as the page would (the page polls every 1 s, so add up to 1 s), default methods and settings.
Prints when a snapshot first shows a built variant, its parity and its sizes, and the whole run; the
target is the first card within 3 s (issue 28; issue 12 asked 10 s). ``--size small`` runs the same on a
~16 MB transformer (a quick check of the tool, not the issue's figure).

    python -m bench first-card
    python -m bench first-card --size small
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

from common import results, synthetic  # noqa: E402  (the generated transformer)

import shrinkray  # noqa: E402
from shrinkray.measure.results import CompareSettings  # noqa: E402
from shrinkray.runs.service import Runs  # noqa: E402

TARGET_S = 3.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    synthetic.add_size_option(parser)
    args = parser.parse_args(argv)
    result = results.begin("first-card", argv)
    path = synthetic.sized_model(args.size)
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
    whole = time.perf_counter() - start
    print(f"run {view.status} after {whole:.1f} s")
    runs.queue.shutdown()
    seconds = [f"{firsts[name]:.1f} s" if name in firsts else "never" for name in tests]
    card = firsts.get("card (built variant)")
    results.finish(
        result,
        ["model", "first card", "first parity", "first sizes", "whole run", "status"],
        [[f"{path.stem} {path.stat().st_size / 1e6:.1f} MB", *seconds, f"{whole:.1f} s", view.status]],
        targets=[results.Target(f"first card <= {TARGET_S:g} s", card is not None and card <= TARGET_S,
                                "the issue's target is on the 100 MB model" if args.size == "small" else "")],
        notes=["The app's Runs service polled every 0.2 s (the page polls every 1 s: add up to 1 s)."],
        complete=view.status == "done",
    )  # fmt: skip
    return 0 if view.status == "done" else 1


if __name__ == "__main__":
    sys.exit(main())

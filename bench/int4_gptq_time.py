"""weights-int4 shrink time: the previous default (synthesized inputs) against the default with the user's inputs
(GPTQ), back to back in one process; wall and CPU seconds and the load average at the start of each.

Run: python bench/int4_gptq_time.py [synthetic,minilm]
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

import int4_bench as bench  # noqa: E402

import shrinkray  # noqa: E402


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    for key in (sys.argv[1] if len(sys.argv) > 1 else "synthetic,minilm").split(","):
        model = bench.synthetic_case()[0] if key == "synthetic" else bench.real_case(key)[0]
        context = bench.calibration_context(bench.calibration_feeds(key))
        for label, kw in (("previous default (synthesized inputs)", {}), ("default with the user's inputs (GPTQ)",
                                                                          {"context": context})):  # fmt: skip
            load = Path("/proc/loadavg").read_text().split()[0]
            wall, cpu = time.perf_counter(), cpu_seconds()
            shrinkray.shrink(model, "weights-int4", **kw)
            print(f"{key}: {label}: wall {time.perf_counter() - wall:.1f} s, cpu {cpu_seconds() - cpu:.1f} s, "
                  f"load {load}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

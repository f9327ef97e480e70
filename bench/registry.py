"""The benchmarks ``python -m bench`` knows: name -> one-line description and the module to run.

Every module lives in ``bench/`` (dotted names under ``bench/``, e.g. ``common.real_models``) and has
an argparse ``main(argv)``; ``python -m bench NAME ARGS...`` imports it with ``bench/`` first on
``sys.path`` (as running the file directly does) and calls ``main(ARGS)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Benchmark:
    name: str
    module: str  # importable with bench/ on sys.path
    description: str

    @property
    def path(self) -> Path:
        """The module's file."""
        return BENCH.joinpath(*self.module.split(".")).with_suffix(".py")


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("reference-tools", "run", "our methods vs onnx-shrink-ray and ORT quantize_dynamic: time, memory, sizes, errors"),
    Benchmark("compare-speed", "compare_speed", "issue 12: `shrinkray compare` wall time and peak memory (100 MB transformer, 3 MB CNN)"),
    Benchmark("scaling", "scaling", "issue 12: shrink and compare time / peak memory at 10 MB, 100 MB, 1 GB, 2.5 GB"),
    Benchmark("first-card", "first_card", "issues 12, 28: seconds until the app's first variant card on the 100 MB transformer"),
    Benchmark("run-disk", "run_disk", "issue 27: a run's disk in all (store + scratch) and what a repeat upload adds"),
    Benchmark("upload-memory", "upload_memory", "issue 27: the server memory one uploaded 100 MB model holds once loaded"),
    Benchmark("app-first-load", "app_first_load", "issue 29: the app's first load in Chromium on throttled 3G / 4G / cable"),
    Benchmark("palettize-memory", "palettize_memory", "issue 12: peak memory and time palettize adds on the 100 MB transformer"),
    Benchmark("latency-agreement", "latency_agreement", "issue 12: is compare's latency interval honest vs the fixed 50-run measurement"),
    Benchmark("gzip-estimate", "gzip_estimate", "issue 28: sampled gzip -9 of 1 GB files vs the exact stream: inside its interval, CPU saved"),
    Benchmark("sizes-speed", "sizes_speed", "raw / gzip / brotli sizes of a 50 MB model + 4 variants in under 30 s"),
    Benchmark("verdicts", "verdicts", "issue 11: parity verdicts vs the task check on 11 real models from PyPI wheels"),
    Benchmark("real-models", "common.real_models", "fetch the real models, print signatures and what the originals decide"),
    Benchmark("auto-bench", "auto_bench", "issue 13: the auto method's size, time and verdict on the transformer and real models"),
    Benchmark("int4-bench", "int4_bench", "weights-int4 vs ONNX Runtime's 4-bit quantizer on transformers"),
    Benchmark("int4-quality", "int4_quality", "what limits weights-int4's output quality, tensor by tensor"),
    Benchmark("runs-load", "runs_load", "N browser sessions press 'Shrink and measure' at once on one app server"),
    Benchmark("variants-identical", "variants_identical", "issue 26: every sample's variants byte-identical at a base revision and now"),
    Benchmark("recommend-reruns", "reruns", "issue 25: the recommendation and its verdict sentence over 5 reruns of compare on real models, vs the task check"),
)

BY_NAME = {b.name: b for b in BENCHMARKS}

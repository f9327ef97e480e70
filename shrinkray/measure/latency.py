"""CPU latency with ONNX Runtime, original and variants interleaved.

Sessions for all models are created first (creation time recorded on its
own), warmed up, then timed in rounds: each round runs every model once, in
a rotating order, so that noise from a shared machine hits them alike. The
ratio of medians is what users act on.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import onnx

from shrinkray.cores import usable_cores
from shrinkray.validate import open_session

DEFAULT_RUNS = 50
DEFAULT_WARMUP = 5


@dataclass
class LatencyStats:
    """Timing of one model at one batch size and thread count."""

    threads: int
    batch: int
    runs: int
    median_ms: float
    p90_ms: float
    mean_ms: float
    session_ms: float

    @property
    def throughput(self) -> float:
        """Samples per second: batch / median latency."""
        return self.batch / (self.median_ms / 1000.0) if self.median_ms > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"throughput_per_s": self.throughput}


def default_threads() -> list[int]:
    cores = usable_cores()
    return [1] if cores == 1 else [1, cores]


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def measure_latency(
    models: dict[str, onnx.ModelProto],
    feeds: dict[str, np.ndarray],
    *,
    batch: int,
    threads: int = 1,
    runs: int = DEFAULT_RUNS,
    warmup: int = DEFAULT_WARMUP,
    budget_s: float | None = None,
    on_round: Callable[[int, int], None] | None = None,
) -> dict[str, LatencyStats]:
    """Time every model on the same feeds, interleaved; stop early when the budget is spent.

    At least 3 rounds run even with a tiny budget, so every model gets a
    median; the stats record how many runs each got.
    """
    sessions = {}
    session_ms = {}
    for key, model in models.items():
        start = time.perf_counter()
        sessions[key] = open_session(model, threads=threads)
        session_ms[key] = (time.perf_counter() - start) * 1000
    for session in sessions.values():
        for _ in range(warmup):
            session.run(None, feeds)
    times: dict[str, list[float]] = {k: [] for k in sessions}
    keys = list(sessions)
    started = time.perf_counter()
    for round_index in range(runs):
        order = keys[round_index % len(keys):] + keys[: round_index % len(keys)]
        for key in order:
            t0 = time.perf_counter()
            sessions[key].run(None, feeds)
            times[key].append((time.perf_counter() - t0) * 1000)
        if on_round is not None:
            on_round(round_index + 1, runs)
        if budget_s is not None and round_index >= 2 and time.perf_counter() - started > budget_s:
            break
    return {
        key: LatencyStats(
            threads=threads,
            batch=batch,
            runs=len(ts),
            median_ms=statistics.median(ts),
            p90_ms=_percentile(ts, 90),
            mean_ms=statistics.fmean(ts),
            session_ms=session_ms[key],
        )
        for key, ts in times.items()
    }

"""CPU latency with ONNX Runtime: original and variants interleaved, timed until the ratio is known.

Sessions for all models are created first (creation time recorded on its
own), warmed up, then timed in rounds: each round runs every model once, in a
rotating order, so that noise from a shared machine hits them alike. What
users act on is how much slower or faster a variant is: the median over
blocks of consecutive rounds of each block's ratio of medians (a block of
one round is that round's paired ratio), with a distribution-free 95%
interval (order statistics of the binomial: no assumption about the shape
of the noise, no random resampling). Blocks matter on a shared machine: intervals from per-round
ratios alone were ±1% wide and a second run missed them by 5%, because
load comes and goes over seconds; the spread between blocks carries that.

**Stopping rule** (adaptive, the default): from :data:`MIN_ROUNDS` rounds and
:data:`MIN_SECONDS` on, the intervals are checked (every ~10% more rounds); timing stops as soon as
every variant's interval lies within ±:data:`TARGET` (3%) of its ratio, or
when the time budget is spent, whichever comes first. A variant whose
interval is still wider at the budget is *too noisy to call*
(``LatencyStats.settled`` is False). With ``runs=N`` exactly N rounds run
(the old fixed measurement), still within the budget, and the interval is reported too.

**Pairwise** (:func:`time_pairwise`, what compare uses): each variant is timed
against the original in its own rounds, so only two sessions are alive (memory:
a worker never holds every variant's session). One budget per setting is shared
by the pairs, and a pair whose interval could not come within the target even
with the rest of its share (projected as 1/sqrt(time)) gives up early ("noise",
too noisy to call) and leaves that time to the next pairs.

The timing loop (:func:`time_models`) takes plain callables and a timer, so
it is tested with a synthetic clock and known ratios.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from shrinkray.cores import usable_cores

if TYPE_CHECKING:
    import onnx

#: Rounds of the old fixed measurement (``runs=DEFAULT_RUNS``), kept for comparisons with it.
DEFAULT_RUNS = 50
DEFAULT_WARMUP = 5
#: Half-width of the 95% interval, relative to the ratio, at which adaptive timing stops.
TARGET = 0.03
CONFIDENCE = 0.95
#: Rounds before the stopping rule is first checked (10 rounds: order statistics 2 and 9, 97.9% coverage).
MIN_ROUNDS = 10
#: Seconds of timing before the stopping rule is first checked, so load that comes and goes over about
#: a second is seen before a tiny model's first 10 rounds (a few ms) are taken as the answer.
MIN_SECONDS = 1.0
#: Rounds that always run, even when the budget is already spent, so every model gets a median.
BUDGET_MIN_ROUNDS = 3
#: Blocks of consecutive rounds the interval is taken over (10: order statistics 2 and 9, 97.9% coverage).
BLOCKS = 10
#: Safety cap for adaptive timing without a budget.
MAX_ROUNDS = 100_000


@dataclass
class LatencyStats:
    """Timing of one model at one batch size and thread count.

    For a variant, ``ratio`` is its time over the original's (the median of
    block ratios) and ``ratio_low``/``ratio_high`` the 95% interval (:func:`ratio_interval`); ``settled``
    says whether that interval came within ±``target`` before the budget ran
    out (False: too noisy to call). For the original the ratio fields are None
    and ``settled`` says whether every variant settled.
    """

    threads: int
    batch: int
    runs: int
    median_ms: float
    p90_ms: float
    mean_ms: float
    session_ms: float
    ratio: float | None = None
    ratio_low: float | None = None
    ratio_high: float | None = None
    settled: bool | None = None
    stopped_by: str = ""  # "precision" (within target), "budget", "noise" (given up), "runs" (fixed count), "cap"
    target: float | None = None

    @property
    def throughput(self) -> float:
        """Samples per second: batch / median latency."""
        return self.batch / (self.median_ms / 1000.0) if self.median_ms > 0 else 0.0

    @property
    def too_noisy(self) -> bool:
        """The budget ended before the interval came within the target."""
        return self.settled is False

    def call(self) -> str:
        """'1.23x (95%: 1.20-1.26x)', or 'too noisy to call (95%: 0.90-1.15x)'; empty for the original."""
        if self.ratio is None:
            return ""
        interval = f"95%: {self.ratio_low:.2f}-{self.ratio_high:.2f}x" if self.ratio_low is not None else "no interval"
        return f"too noisy to call ({interval})" if self.too_noisy else f"{self.ratio:.2f}x ({interval})"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"throughput_per_s": self.throughput}


def default_threads() -> list[int]:
    cores = usable_cores()
    return [1] if cores == 1 else [1, cores]


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def _order_statistic_rank(n: int, confidence: float = CONFIDENCE) -> int:
    """Largest k (1-based) with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2; 0 when n is too small.

    [x_(k), x_(n+1-k)] of n sorted values then covers the median with at least ``confidence``.
    """
    tail = (1.0 - confidence) / 2
    if n > 1000:  # normal approximation, with continuity correction; exact sums would be slow
        z = statistics.NormalDist().inv_cdf(1 - tail)
        return max(0, math.floor((n - z * math.sqrt(n)) / 2 - 0.5) + 1)
    cdf, k = 0.0, 0
    log_half_n = n * math.log(0.5)
    for j in range(n // 2 + 1):
        cdf += math.exp(math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1) + log_half_n)
        if cdf > tail:
            break
        k = j + 1
    return k


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float | None, float | None]:
    """(median, low, high): a distribution-free interval for the median; low/high are None below 6 values."""
    x = np.sort(np.asarray(values, dtype=np.float64))  # float16-safe: widened to float64 first
    if not len(x):
        raise ValueError("no values")
    median = float(np.median(x))
    k = _order_statistic_rank(len(x), confidence)
    if k < 1:
        return median, None, None
    return median, float(x[k - 1]), float(x[len(x) - k])


def _within(median: float, low: float | None, high: float | None, target: float) -> bool:
    return low is not None and high is not None and median > 0 and \
        high <= median * (1 + target) and low >= median * (1 - target)  # fmt: skip


def time_models(
    runners: dict[str, Callable[[], Any]],
    *,
    batch: int = 1,
    threads: int = 1,
    session_ms: dict[str, float] | None = None,
    runs: int | None = None,
    warmup: int = 0,
    budget_s: float | None = None,
    target: float = TARGET,
    reference: str | None = None,
    min_rounds: int = MIN_ROUNDS,
    min_s: float = MIN_SECONDS,
    on_round: Callable[[int, int], None] | None = None,
    timer: Callable[[], float] = time.perf_counter,
) -> dict[str, LatencyStats]:
    """Time callables in interleaved rounds (see the module docstring); ``timer`` returns seconds.

    ``reference`` (default: the first key) is what ratios are taken against.
    ``runs=None`` is adaptive (stop at ±``target`` or the budget); a number runs
    that many rounds. The stopping rule is checked from ``min_rounds`` rounds
    and ``min_s`` seconds on (or the budget, if smaller). At least 3 rounds run even with a spent budget.
    """
    keys = list(runners)
    reference = reference if reference is not None else keys[0]
    others = [k for k in keys if k != reference]
    times, stopped_by = _rounds(runners, reference, others, runs=runs, warmup=warmup, budget_s=budget_s, target=target,
                                min_rounds=min_rounds, min_s=min_s, on_round=on_round, timer=timer)  # fmt: skip
    return _stats(times, reference, others, target, batch, threads, session_ms or {}, stopped_by)


def _rounds(
    runners: dict[str, Callable[[], Any]],
    reference: str,
    others: list[str],
    *,
    runs: int | None,
    warmup: int,
    budget_s: float | None,
    target: float,
    min_rounds: int,
    min_s: float,
    on_round: Callable[[int, int], None] | None,
    timer: Callable[[], float],
    give_up: bool = False,
) -> tuple[dict[str, list[float]], str]:
    """The interleaved rounds themselves: milliseconds per model, and why they stopped.

    ``give_up``: stop early ("noise") when an interval is so wide that even the whole budget would not
    bring it within the target (see :func:`_hopeless`); the variant is then too noisy to call, as it
    would have been at the budget's end, and the rest of the budget goes to the next pair.
    """
    keys = list(runners)
    for runner in runners.values():
        for _ in range(warmup):
            runner()
    times: dict[str, list[float]] = {k: [] for k in keys}
    limit = runs if runs is not None else MAX_ROUNDS
    next_check = max(min_rounds, 1)
    stopped_by = "runs" if runs is not None else "cap"
    started = timer()
    done = 0
    while done < limit:
        shift = done % len(keys)
        for key in keys[shift:] + keys[:shift]:
            t0 = timer()
            runners[key]()
            times[key].append((timer() - t0) * 1000.0)
        done += 1
        if on_round is not None:
            on_round(done, runs or 0)
        elapsed = timer() - started
        first = min(min_s, budget_s or min_s)  # when the stopping rule is first checked
        # giving up may come sooner: half that time already shows noise that cannot settle
        if runs is None and done >= next_check and (elapsed >= first or (give_up and elapsed >= first / 2)):
            next_check = max(done + 1, math.ceil(done * 1.1))
            if elapsed >= first and _all_settled(times, reference, others, target):
                stopped_by = "precision"
                break
            if give_up and budget_s and _hopeless(times, reference, others, target, elapsed / budget_s):
                stopped_by = "noise"
                break
        if budget_s is not None and done >= BUDGET_MIN_ROUNDS and done < limit and timer() - started > budget_s:
            stopped_by = "budget"
            break
    return times, stopped_by


def time_pairwise(
    reference: str,
    reference_runner: Callable[[], Any],
    openers: Sequence[tuple[str, Callable[[], Callable[[], Any]]]],
    *,
    batch: int = 1,
    threads: int = 1,
    session_ms: dict[str, float] | None = None,
    runs: int | None = None,
    warmup: int = 0,
    budget_s: float | None = None,
    target: float = TARGET,
    min_rounds: int = MIN_ROUNDS,
    min_s: float = MIN_SECONDS,
    timer: Callable[[], float] = time.perf_counter,
    give_up: bool = True,
) -> dict[str, LatencyStats]:
    """Time each variant against the reference, one pair at a time, so only two sessions are alive.

    ``openers`` give each variant's runner when called (its session opens then, and
    is dropped after its pair is timed). ``budget_s`` is shared by all pairs: each
    pair gets what is left divided by the pairs left, so a pair that settles early
    leaves its time to the next, and so does a pair given up as too noisy (``give_up``, see
    :func:`_rounds`). The reference's figures pool its runs from every pair.
    """
    session_ms = dict(session_ms or {})
    out: dict[str, LatencyStats] = {}
    pooled: list[float] = []
    reasons: list[str] = []
    spent = 0.0  # seconds of timing (session opens are not part of the budget)
    for index, (key, opener) in enumerate(openers):
        t0 = timer()
        runner = opener()
        session_ms[key] = (timer() - t0) * 1000.0
        share = None if budget_s is None else max(0.0, budget_s - spent) / (len(openers) - index)
        t0 = timer()
        times, stopped_by = _rounds({reference: reference_runner, key: runner}, reference, [key], runs=runs,
                                    warmup=warmup, budget_s=share, target=target, min_rounds=min_rounds,
                                    min_s=min(min_s, share) if share is not None else min_s, on_round=None,
                                    timer=timer, give_up=give_up)  # fmt: skip
        spent += timer() - t0
        del runner  # its session closes before the next one opens
        out[key] = _stats(times, reference, [key], target, batch, threads, session_ms, stopped_by)[key]
        pooled += times[reference]
        reasons.append(stopped_by)
    if not openers:
        times, stopped_by = _rounds({reference: reference_runner}, reference, [], runs=runs, warmup=warmup,
                                    budget_s=budget_s, target=target, min_rounds=min_rounds, min_s=min_s,
                                    on_round=None, timer=timer)  # fmt: skip
        return _stats(times, reference, [], target, batch, threads, session_ms, stopped_by)
    stopped = next((r for r in reasons if r != "precision"), "precision")
    original = _stats({reference: pooled}, reference, [], target, batch, threads, session_ms, stopped)[reference]
    original.settled = all(s.settled for s in out.values())
    return {reference: original, **out}


def blocks(n: int) -> int:
    """How many blocks of consecutive rounds the intervals use: :data:`BLOCKS`, or every round alone below that.

    A fixed count lets blocks grow with the run, so they outlast load that comes and goes: with the
    ratio drifting by 5% every ~50 rounds, 10 blocks covered the long-run ratio in 26 of 30 synthetic
    runs and sqrt(n) blocks in far fewer; on steady noise they cost ~1.5x the rounds.
    """
    return min(n, BLOCKS)


def ratio_interval(
    mine: Sequence[float], base: Sequence[float] | None = None, confidence: float = CONFIDENCE
) -> tuple[float, float | None, float | None]:
    """(ratio, low, high): the median of block ratios and its distribution-free 95% interval.

    The rounds are cut into :func:`blocks` runs of consecutive rounds; each
    block gives the ratio of its two medians (a block of one round is that
    round's paired ratio). Blocks keep what a shared machine does over
    seconds (load that comes and goes) inside the interval, which per-round
    ratios alone would hide; and the median of block ratios is the ratio in a
    typical stretch, where the ratio of the overall medians drifts when load
    changes during the run (seen: 0.66 overall against 0.67-0.72 in every block).
    Without ``base`` it is ``mine``'s own median and interval, relative to its overall median.
    """
    v = np.asarray(mine, dtype=np.float64)
    o = np.asarray(base, dtype=np.float64) if base is not None else None
    if not len(v):
        raise ValueError("no values")
    parts = blocks(len(v))
    if o is not None:
        ratios = [np.median(a) / np.median(b) for a, b in zip(np.array_split(v, parts), np.array_split(o, parts), strict=True)]
    else:
        ratios = [np.median(a) / np.median(v) for a in np.array_split(v, parts)]
    return median_interval([r for r in ratios if np.isfinite(r)], confidence)


#: Give up when the interval, shrinking like 1/sqrt(time) until the budget's end, would still be this
#: many times the target (noise that comes and goes over seconds shrinks it slower than that, so the
#: projection is optimistic and giving up errs towards timing on).
GIVE_UP_FACTOR = 1.5


def _hopeless(times: dict[str, list[float]], reference: str, others: list[str], target: float, used: float) -> bool:
    """True when some variant's interval cannot come within ``target`` in the rest of the budget.

    ``used``: the share of the budget spent so far (0-1).
    """
    if not 0 < used < 1:
        return False
    for key in others:
        ratio, low, high = ratio_interval(times[key], times[reference])
        if low is None or high is None or ratio <= 0:
            continue
        half = max(high / ratio - 1, 1 - low / ratio)
        if half * math.sqrt(used) > GIVE_UP_FACTOR * target:
            return True
    return False


def _all_settled(times: dict[str, list[float]], reference: str, others: list[str], target: float) -> bool:
    if not others:  # the original alone: its own median must be known this well
        return _within(*ratio_interval(times[reference]), target)
    return all(_within(*ratio_interval(times[k], times[reference]), target) for k in others)


def _stats(times, reference, others, target, batch, threads, session_ms, stopped_by) -> dict[str, LatencyStats]:
    out: dict[str, LatencyStats] = {}
    settled_all = True
    for key, ts in times.items():
        ratio = low = high = None
        settled = None
        if key != reference and ts:
            ratio, low, high = ratio_interval(ts, times[reference])
            settled = _within(ratio, low, high, target)
            settled_all &= settled
        out[key] = LatencyStats(
            threads=threads, batch=batch, runs=len(ts), median_ms=statistics.median(ts),
            p90_ms=_percentile(ts, 90), mean_ms=statistics.fmean(ts), session_ms=session_ms.get(key, 0.0),
            ratio=ratio, ratio_low=low, ratio_high=high, settled=settled, stopped_by=stopped_by, target=target,
        )  # fmt: skip
    if reference in out:
        if not others:
            settled_all = _within(*ratio_interval(times[reference]), target)
        out[reference].settled = settled_all
    return out


def measure_latency(
    models: dict[str, onnx.ModelProto],
    feeds: dict[str, np.ndarray],
    *,
    batch: int,
    threads: int = 1,
    runs: int | None = None,
    warmup: int = DEFAULT_WARMUP,
    budget_s: float | None = None,
    target: float = TARGET,
    reference: str | None = None,
    on_round: Callable[[int, int], None] | None = None,
) -> dict[str, LatencyStats]:
    """Time every model on the same feeds, interleaved, until the ratios are known or the budget is spent.

    ``runs=None`` (default) is adaptive; ``runs=N`` runs N rounds (at least 3
    even with a tiny budget, so every model gets a median). Ratios are taken
    against ``reference`` (default: the first model).
    """
    from shrinkray.validate import open_session  # here: reading LatencyStats needs no ONNX Runtime

    sessions = {}
    session_ms = {}
    for key, model in models.items():
        start = time.perf_counter()
        sessions[key] = open_session(model, threads=threads)
        session_ms[key] = (time.perf_counter() - start) * 1000
    runners = {key: partial(session.run, None, feeds) for key, session in sessions.items()}
    return time_models(
        runners, batch=batch, threads=threads, session_ms=session_ms, runs=runs, warmup=warmup,
        budget_s=budget_s, target=target, reference=reference, on_round=on_round,
    )  # fmt: skip

"""CPU latency with ONNX Runtime: original and variants interleaved, timed until the ratio is known.

Sessions for all models are created first (creation time recorded on its
own), warmed up, then timed in rounds: each round runs every model, in a
rotating order, so that noise from a shared machine hits them alike. A model
whose run is shorter than :data:`SHORT_RUN_MS` runs in a short burst per round
and the burst's first run is dropped: switching models refills caches, which
cost tiny models 2-7% when timed one run at a time, and a deployed model,
running alone and warm, does not pay it (issue 12, measured 2026-11-23; docs/benchmarks.md "Speed and memory").
What users act on is how much slower or faster a variant is: the median over
blocks of consecutive rounds of each block's ratio of medians (a block of
one round is that round's paired ratio), with a distribution-free 95%
interval (order statistics of the binomial: no assumption about the shape
of the noise, no random resampling). Blocks matter on a shared machine: intervals from per-round
ratios alone were ±1% wide and a second run missed them by 5%, because
load comes and goes over seconds; the spread between blocks carries that.

**What the interval means** (:func:`repeat_interval`): where a repeat of the same
measurement lands, 95%. One run cannot see what changes between runs (a new
session, load over minutes), so the within-run interval is widened by that
(:data:`REPEAT_SD`, measured) and by the repeat's own error (x sqrt 2).

**Stopping rule** (adaptive, the default): from :data:`MIN_ROUNDS` rounds and
:data:`MIN_SECONDS` on, the intervals are checked (every ~10% more rounds); timing stops as soon as
every variant's interval lies within ±:data:`TARGET` (3%) of its ratio, or
when the time budget is spent, whichever comes first. A variant whose interval is then neither within the
target nor wholly inside :data:`SAME_BAND` (0.95-1.05x: the original's speed, the answer however wide the
interval inside it; 0.95-1.01x read "too noisy" before, 2026-12-06) is *too noisy to tell*
(``LatencyStats.settled`` is False). The band decides the call, not when timing stops: stopping at it too
was tried, and the sub-millisecond mlp's repeats inside each other's interval (``python -m bench
latency-agreement``) were 13-24 of 30 with it and 16-28 without, too close to tell apart in 9 runs, so the
measurement stayed as it was validated (2026-12-06). With ``runs=N`` exactly N rounds run
(the old fixed measurement), still within the budget, and the interval is reported too.

**The budget is kept before each run, not after each round**: a timed run starts only when the running
median of that model's runs (its warm-up's before it has any) says it ends within the budget, and a round
cut short is dropped whole (rounds stay paired). So timing never passes its budget by more than one run's
misprediction (under one inference); a model too slow for even one round within its budget is not timed at
all (absent from the result: the caller says so), where checking after each round had run a 3 s model for
50 s on a 5 s budget (issue 27).

**Pairwise** (:func:`time_pairwise`, what compare uses): each variant is timed
against the original in its own rounds, so only two sessions are alive (memory:
a worker never holds every variant's session). One budget per setting is shared
by the pairs, and a pair whose interval could not come within the target even
with the rest of its share (projected as 1/sqrt(time)) gives up early ("noise",
too noisy to tell) and leaves that time to the next pairs.

The timing loop (:func:`time_models`, :func:`time_pairwise`; how they time is one
:class:`Timing`) takes plain callables and a timer, so it is tested with a
synthetic clock and known ratios.

Kept as one module (over 600 lines): the interleaved timing, its stop rule and its budget share one
loop's state; splitting them would pass that state between modules.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
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
#: A time ratio whose whole 95% interval lies inside these bounds is the original's speed: timing has its answer
#: (verdict/speed.py words it "about the original's time"); beyond them with its whole interval it is a change.
SAME_BAND = (0.95, 1.05)
#: Seconds of timing per (threads, batch) setting, shared by the variants (the CLI's and the app's default;
#: ``CompareSettings.latency_budget_s`` and the budget's plan start from it).
DEFAULT_BUDGET_S = 5.0
CONFIDENCE = 0.95
#: Rounds before the stopping rule is first checked (10 rounds: order statistics 2 and 9, 97.9% coverage).
MIN_ROUNDS = 10
#: Seconds of timing before the stopping rule is first checked, so load that comes and goes over about
#: a second is seen before a tiny model's first 10 rounds (a few ms) are taken as the answer.
MIN_SECONDS = 1.0
#: A model's warm-up ends once it has run at least once and warming it took this long: a model that runs
#: for seconds is warm after its first run (five of them per model and pair were most of that detector's
#: latency step, measured 2026-11-23).
WARMUP_S = 0.5
#: Blocks of consecutive rounds the interval is taken over (10: order statistics 2 and 9, 97.9% coverage).
BLOCKS = 10
#: Safety cap for adaptive timing without a budget.
MAX_ROUNDS = 100_000
#: Standard deviation (log scale) of what moves a ratio from one run to the next and no run sees
#: from inside (a new session's memory layout, load that changes over minutes). Measured on this
#: 2-core machine (issue 12, 2026-11-23); the check it passes: bench/RESULTS.md "latency-agreement".
REPEAT_SD = 0.007
#: Runs shorter than this are timed in bursts (switching models costs them a visible share).
SHORT_RUN_MS = 1.0
#: About how long a burst of one model's runs lasts (short, so load hits both models of a round alike).
BURST_MS = 2.0
MAX_BURST = 32


@dataclass
class LatencyStats:
    """Timing of one model at one batch size and thread count.

    For a variant, ``ratio`` is its time over the original's (the median of
    block ratios) and ``ratio_low``/``ratio_high`` where a repeat lands, 95% (:func:`repeat_interval`); ``settled``
    says whether that interval came within ±``target``, or wholly inside :data:`SAME_BAND`, before the budget
    ran out (False: too noisy to tell). For the original the ratio fields are None
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
    burst: int = 1  # runs of this model in a row per round (the first dropped when more than one)

    @property
    def throughput(self) -> float:
        """Samples per second: batch / median latency."""
        return self.batch / (self.median_ms / 1000.0) if self.median_ms > 0 else 0.0

    @property
    def too_noisy(self) -> bool:
        """The budget ended before the interval came within the target or inside :data:`SAME_BAND`."""
        return self.settled is False

    def call(self) -> str:
        """'1.23x (95%: 1.20-1.26x)', or 'too noisy to tell (95%: 0.90-1.15x)'; empty for the original."""
        if self.ratio is None:
            return ""
        interval = f"95%: {self.ratio_low:.2f}-{self.ratio_high:.2f}x" if self.ratio_low is not None else "no interval"
        return f"too noisy to tell ({interval})" if self.too_noisy else f"{self.ratio:.2f}x ({interval})"

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


def _decided(ratio: float, low: float | None, high: float | None, target: float) -> bool:
    """A variant's ratio is known: its interval within ±``target`` of it, or wholly inside :data:`SAME_BAND`."""
    return _within(ratio, low, high, target) or _inside_band(low, high)


def _inside_band(low: float | None, high: float | None) -> bool:
    return low is not None and high is not None and SAME_BAND[0] <= low and high <= SAME_BAND[1]


@dataclass(frozen=True)
class Timing:
    """How one timing run goes; :func:`time_models` and :func:`time_pairwise` share it.

    ``runs=None`` is adaptive (stop at ±``target`` or the budget); a number runs that many rounds. The
    stopping rule is checked from ``min_rounds`` rounds and ``min_s`` seconds on (or the budget, if
    smaller). ``timer`` returns seconds (a fake clock in tests).
    """

    batch: int = 1
    threads: int = 1
    runs: int | None = None
    warmup: int = 0
    budget_s: float | None = None
    target: float = TARGET
    min_rounds: int = MIN_ROUNDS
    min_s: float = MIN_SECONDS
    timer: Callable[[], float] = time.perf_counter
    #: Runs of one model in a row per round (the first dropped when more than one); None: from the
    #: warm-up's run time (:func:`burst_for`), 1 without warm-up.
    burst: int | None = None


def _timing(timing: Timing | None, options: dict[str, Any]) -> Timing:
    """``timing`` with keyword overrides (``time_models(runners, runs=25)`` reads as before)."""
    return replace(timing or Timing(), **options)


def time_models(
    runners: dict[str, Callable[[], Any]],
    timing: Timing | None = None,
    *,
    session_ms: dict[str, float] | None = None,
    reference: str | None = None,
    on_round: Callable[[int, int], None] | None = None,
    **options: Any,
) -> dict[str, LatencyStats]:
    """Time callables in interleaved rounds (see the module docstring).

    ``timing`` (or its fields as keywords) says how; ``reference`` (default: the first key) is what
    ratios are taken against. Warm-up runs come before the budget; timed runs stay within it (see the module
    docstring): when not one round fits, nothing is timed and the result is empty.
    """
    t = _timing(timing, options)
    keys = list(runners)
    reference = reference if reference is not None else keys[0]
    others = [k for k in keys if k != reference]
    times, stopped_by, burst = _rounds(runners, reference, others, t, on_round=on_round)
    if not times[reference]:
        return {}
    return _stats(times, reference, others, replace(t, burst=burst), session_ms or {}, stopped_by)


def _rounds(
    runners: dict[str, Callable[[], Any]],
    reference: str,
    others: list[str],
    t: Timing,
    *,
    on_round: Callable[[int, int], None] | None = None,
    give_up: bool = False,
    warmed: dict[str, float | None] | None = None,
    budget_warmup: bool = False,
) -> tuple[dict[str, list[float]], str, int]:
    """The interleaved rounds themselves: milliseconds per model, why they stopped, and the burst length.

    Each round runs every model once, or (runs under :data:`SHORT_RUN_MS`) in a short burst whose first
    run is dropped (:func:`_burst_ms`), in a rotating order. Before each run, :func:`_fits` checks that it
    ends within the budget; a round it cuts short is dropped whole.

    ``give_up``: stop early ("noise") when an interval is so wide that even the whole budget would not
    bring it within the target (see :func:`_hopeless`); the variant is then too noisy to tell, as it
    would have been at the budget's end, and the rest of the budget goes to the next pair.
    ``warmed``: models already warm (a pair's reference after the first pair), with their typical run (ms).
    ``budget_warmup``: the warm-up runs count in the budget (a pair of :func:`time_pairwise`: its share is all
    the time it may take).
    """
    keys = list(runners)
    timer = t.timer
    warmed = dict(warmed or {})
    started = timer()
    for key, runner in runners.items():
        if key not in warmed:
            left = t.budget_s - (timer() - started) if budget_warmup and t.budget_s is not None else None
            warmed[key] = warm_up(runner, t, left)
    typical = [ms for ms in warmed.values() if ms is not None]
    burst = t.burst if t.burst is not None else burst_for(max(typical) if typical else None)
    times: dict[str, list[float]] = {k: [] for k in keys}
    limit = t.runs if t.runs is not None else MAX_ROUNDS
    next_check = max(t.min_rounds, 1)
    stopped_by = "runs" if t.runs is not None else "cap"
    budget_s = t.budget_s
    first = min(t.min_s, budget_s if budget_s is not None else t.min_s)  # when the stopping rule is first checked
    if not budget_warmup:
        started = timer()
    done = 0
    expected = _Expected(times, warmed, burst)
    while done < limit:
        shift = done % len(keys)
        order = keys[shift:] + keys[:shift]
        if not _fits([expected(k) for k in order], timer() - started, budget_s):
            return times, _budget_end(times, reference, others, t, done), burst  # the round would end past it
        for key in order:
            if not _fits([expected(key)], timer() - started, budget_s):
                for ran in order[: order.index(key)]:  # a run overran: the round is cut short and dropped whole
                    times[ran].pop()
                return times, _budget_end(times, reference, others, t, done), burst
            times[key].append(_burst_ms(runners[key], burst, timer))
        done += 1
        if on_round is not None:
            on_round(done, t.runs or 0)
        elapsed = timer() - started
        # giving up may come sooner: half that time already shows noise that cannot settle
        if t.runs is None and done >= next_check and (elapsed >= first or (give_up and elapsed >= first / 2)):
            next_check = max(done + 1, math.ceil(done * 1.1))
            if elapsed >= first and _all_settled(times, reference, others, t.target):
                stopped_by = "precision"
                break
            if give_up and budget_s and _hopeless(times, reference, others, t.target, elapsed / budget_s):
                stopped_by = "noise"
                break
    return times, stopped_by, burst


def _budget_end(times: dict[str, list[float]], reference: str, others: list[str], t: Timing, done: int) -> str:
    """Why timing ended at the budget: "precision" when every interval was already within the target (a budget
    shorter than :data:`MIN_SECONDS` is when the rule is first checked), else "budget"."""
    if t.runs is None and done >= max(t.min_rounds, 1) and _all_settled(times, reference, others, t.target):
        return "precision"
    return "budget"


class _Expected:
    """Seconds a model's next run (a burst of ``burst``) should take: the running median of its runs, else its
    warm-up's typical run; None with neither (no warm-up, first round). The median is taken again once the runs
    grow by a tenth (a fresh median before every run made a 20 s budget of 2 ms runs quadratic)."""

    def __init__(self, times: dict[str, list[float]], warmed: dict[str, float | None], burst: int) -> None:
        self.times, self.warmed, self.burst = times, warmed, burst
        self.cached: dict[str, tuple[int, float]] = {}  # key -> (runs when taken, median ms)

    def __call__(self, key: str) -> float | None:
        runs = self.times[key]
        if not runs:
            typical = self.warmed.get(key)
        else:
            count, typical = self.cached.get(key, (0, 0.0))
            if len(runs) < count or len(runs) >= count * 1.1 or len(runs) < 20:
                typical = statistics.median(runs)
                self.cached[key] = (len(runs), typical)
        return None if typical is None else typical * self.burst / 1000.0


def _fits(expected: list[float | None], elapsed_s: float, budget_s: float | None) -> bool:
    """Whether runs expected to take these seconds end within the budget; a run of unknown length starts
    only while budget is left (it runs once to learn it)."""
    if budget_s is None:
        return True
    return elapsed_s + sum(e for e in expected if e is not None) <= budget_s and elapsed_s < budget_s


def warm_up(runner: Callable[[], Any], t: Timing, budget_s: float | None = None) -> float | None:
    """Up to ``t.warmup`` runs, fewer once :data:`WARMUP_S` has passed or (``budget_s``) the next run would end
    past that budget (at least one); the median run after the first in ms (a preempted first run is no guide),
    None without warm-up."""
    warm: list[float] = []
    started = t.timer()
    for _ in range(t.warmup):
        if warm and budget_s is not None and t.timer() - started + warm[-1] / 1000.0 > budget_s:
            break
        t0 = t.timer()
        runner()
        warm.append((t.timer() - t0) * 1000.0)
        if t.timer() - started >= WARMUP_S:
            break
    return statistics.median(warm[1:] or warm) if warm else None


def burst_for(run_ms: float | None) -> int:
    """Runs of one model in a row per round: 1 for runs of :data:`SHORT_RUN_MS` or more (or unknown),
    else enough for about :data:`BURST_MS` (at least 3, at most :data:`MAX_BURST`), the first dropped."""
    if run_ms is None or run_ms >= SHORT_RUN_MS:
        return 1
    return min(MAX_BURST, max(3, math.ceil(BURST_MS / max(run_ms, 1e-3)) + 1))


def _burst_ms(runner: Callable[[], Any], burst: int, timer: Callable[[], float]) -> float:
    """Milliseconds of one run: alone (``burst`` 1), or the median of a burst's runs after its first
    (which pays for switching from the other model: caches refilled, a deployed model does not pay it)."""
    if burst <= 1:
        t0 = timer()
        runner()
        return (timer() - t0) * 1000.0
    runs = []
    for _ in range(burst):
        t0 = timer()
        runner()
        runs.append((timer() - t0) * 1000.0)
    return statistics.median(runs[1:])


def time_pairwise(
    reference: str,
    reference_runner: Callable[[], Any],
    openers: Sequence[tuple[str, Callable[[], Callable[[], Any]]]],
    timing: Timing | None = None,
    *,
    session_ms: dict[str, float] | None = None,
    give_up: bool = True,
    deadline: float | None = None,
    reference_ms: float | None = None,
    **options: Any,
) -> dict[str, LatencyStats]:
    """Time each variant against the reference, one pair at a time, so only two sessions are alive.

    ``openers`` give each variant's runner when called (its session opens then, and
    is dropped after its pair is timed). ``timing`` (or its fields as keywords) as in
    :func:`time_models`; its ``budget_s`` is shared by all pairs and covers all their runs, warm-ups
    included (session opens are not part of it): each pair gets what is left divided by the pairs left,
    so a pair that settles early leaves its time to the next, and so does a pair given up as too noisy
    (``give_up``, see :func:`_rounds`). A pair that cannot fit its variant's warm-up and one round (the
    variant taken as fast as the reference) in its share takes what is left when that fits, else it is not
    timed and its session never opens. The reference's figures pool its runs from every pair; it is warmed
    up once, or not at all when the caller just ran it (``reference_ms``: that run's milliseconds, counted in
    the budget). ``deadline`` (on ``timing.timer``'s clock): variants whose pair would start after it are
    not timed. Variants not timed are absent from the result.
    """
    t = _timing(timing, options)
    timer = t.timer
    session_ms = dict(session_ms or {})
    out: dict[str, LatencyStats] = {}
    pooled: list[float] = []
    reasons: list[str] = []
    bursts: list[int] = []
    spent = (reference_ms or 0.0) / 1000.0  # seconds of running models (session opens are not part of the budget)
    warmed: dict[str, float | None] = {} if reference_ms is None else {reference: reference_ms}
    for index, (key, opener) in enumerate(openers):
        if deadline is not None and timer() >= deadline:
            break
        if not warmed:
            t0 = timer()
            warmed[reference] = warm_up(reference_runner, t, None if t.budget_s is None else t.budget_s - spent)
            spent += timer() - t0
        left = None if t.budget_s is None else max(0.0, t.budget_s - spent)
        share = None if left is None else left / (len(openers) - index)
        typical = statistics.median(pooled) if pooled else warmed.get(reference)
        if share is not None and typical is not None:
            need = 3 * typical / 1000.0  # the variant's warm-up and one round of both
            if need > left:
                continue  # not one round of this pair fits: not timed, its session not opened
            share = max(share, need)
        t0 = timer()
        runner = opener()
        session_ms[key] = (timer() - t0) * 1000.0
        pair = replace(t, budget_s=share, min_s=min(t.min_s, share) if share is not None else t.min_s)
        t0 = timer()
        times, stopped_by, burst = _rounds({reference: reference_runner, key: runner}, reference, [key], pair,
                                           give_up=give_up, warmed=warmed, budget_warmup=True)  # fmt: skip
        spent += timer() - t0
        del runner  # its session closes before the next one opens
        if not times[key]:
            continue  # its warm-up left no time for one round (slower than the reference)
        out[key] = _stats(times, reference, [key], replace(t, burst=burst), session_ms, stopped_by)[key]
        pooled += times[reference]
        reasons.append(stopped_by)
        bursts.append(burst)
    if not openers:
        times, stopped_by, burst = _rounds({reference: reference_runner}, reference, [], t, warmed=warmed)
        if not times[reference]:
            return {}
        return _stats(times, reference, [], replace(t, burst=burst), session_ms, stopped_by)
    if not pooled:  # the deadline came before the first pair, or not one pair fitted the budget
        return {}
    stopped = next((r for r in reasons if r != "precision"), "precision")
    original = _stats({reference: pooled}, reference, [], replace(t, burst=max(bursts)), session_ms, stopped)[reference]
    original.settled = all(s.settled for s in out.values())
    return {reference: original, **out}


@dataclass
class Alone:
    """One model timed by itself (:func:`time_alone`): its run times (ms), why timing stopped, its burst
    length and how long its session took to open."""

    times: list[float]
    stopped_by: str
    burst: int
    session_ms: float


def time_alone(opener: Callable[[], Callable[[], Any]], timing: Timing | None = None, *,
               session_ms: float | None = None, **options: Any) -> Alone:  # fmt: skip
    """One model timed with no other session alive (a model too large for two in memory, where
    :func:`time_pairwise`'s pairs would hold twice its weights): its session opened by ``opener``, warmed up
    and run until its own median is known within the target or ``timing``'s budget (warm-up included) ends;
    the session closes before this returns (when ``opener`` handed over the only reference to it).
    ``session_ms``: how long its session took to open, when ``opener`` hands over one opened before."""
    t = _timing(timing, options)
    started = t.timer()
    runner = opener()
    session_ms = (t.timer() - started) * 1000.0 if session_ms is None else session_ms
    times, stopped_by, burst = _rounds({"model": runner}, "model", [], t, budget_warmup=True)
    del runner
    return Alone(times["model"], stopped_by, burst, session_ms)


def stats_apart(reference: Alone, variants: dict[str, Alone], reference_key: str,
                timing: Timing | None = None, **options: Any) -> dict[str, LatencyStats]:  # fmt: skip
    """Latency of models timed one by one (:func:`time_alone`): ratios between the medians of their runs'
    blocks as in pairs, widened as a repeat would be (:func:`repeat_interval`). The runs were not interleaved,
    so load that changed between them shows in the ratio; callers say so. Variants with no run are absent."""
    t = _timing(timing, options)
    if not reference.times:
        return {}
    timed = {k: a for k, a in variants.items() if a.times}
    burst = max([reference.burst, *(a.burst for a in timed.values())])
    out: dict[str, LatencyStats] = {}
    for key, alone in timed.items():
        times = {reference_key: reference.times, key: alone.times}
        out[key] = _stats(times, reference_key, [key], replace(t, burst=burst), {key: alone.session_ms},
                          alone.stopped_by)[key]  # fmt: skip
    original = _stats({reference_key: reference.times}, reference_key, [], replace(t, burst=burst),
                      {reference_key: reference.session_ms}, reference.stopped_by)[reference_key]  # fmt: skip
    if timed:
        original.settled = all(s.settled for s in out.values())
    return {reference_key: original, **out}


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


def _z(confidence: float = CONFIDENCE) -> float:
    return statistics.NormalDist().inv_cdf(0.5 + confidence / 2)


def _repeat_half(within: float, confidence: float = CONFIDENCE, repeat_sd: float = REPEAT_SD) -> float:
    """Log half-width of a repeat's 95% range, from the within-run log half-width (taken as a 95% one)."""
    z = _z(confidence)
    return z * math.sqrt(2.0 * ((within / z) ** 2 + repeat_sd**2))


def repeat_interval(
    ratio: float, low: float | None, high: float | None, confidence: float = CONFIDENCE, repeat_sd: float = REPEAT_SD
) -> tuple[float, float | None, float | None]:
    """(ratio, low, high): where a repeat of the same measurement lands, 95% (what the reports show).

    The within-run interval (:func:`ratio_interval`) only knows the spread inside one run. A repeat
    differs by its own error too (both sides: x sqrt(2)) and by what changes from run to run and no run
    sees from inside: a new session's memory layout, load that moves over minutes (:data:`REPEAT_SD`).
    Each side is widened on the log scale: z * sqrt(2 * (se_within^2 + REPEAT_SD^2)).
    """
    if low is None or high is None or ratio <= 0 or low <= 0:
        return ratio, low, high
    below = _repeat_half(math.log(ratio / low), confidence, repeat_sd)
    above = _repeat_half(math.log(high / ratio), confidence, repeat_sd)
    return ratio, ratio * math.exp(-below), ratio * math.exp(above)


def _hopeless(times: dict[str, list[float]], reference: str, others: list[str], target: float, used: float) -> bool:
    """True when some variant's interval cannot come within ``target`` in the rest of the budget.

    ``used``: the share of the budget spent so far (0-1). The within-run part is projected to shrink
    like 1/sqrt(time); the run-to-run part (:data:`REPEAT_SD`) does not shrink.
    """
    if not 0 < used < 1:
        return False
    for key in others:
        ratio, low, high = ratio_interval(times[key], times[reference])
        if low is None or high is None or ratio <= 0 or low <= 0:
            continue
        within = max(math.log(high / ratio), math.log(ratio / low))
        if math.expm1(_repeat_half(within * math.sqrt(used))) > GIVE_UP_FACTOR * target:
            return True
    return False


def _all_settled(times: dict[str, list[float]], reference: str, others: list[str], target: float) -> bool:
    if not others:  # the original alone: its own median must be known this well
        return _within(*ratio_interval(times[reference]), target)
    return all(_within(*repeat_interval(*ratio_interval(times[k], times[reference])), target) for k in others)


def _stats(times: dict[str, list[float]], reference: str, others: list[str], t: Timing,
           session_ms: dict[str, float], stopped_by: str) -> dict[str, LatencyStats]:  # fmt: skip
    out: dict[str, LatencyStats] = {}
    settled_all = True
    for key, ts in times.items():
        ratio = low = high = None
        settled = None
        if key != reference and ts:
            ratio, low, high = repeat_interval(*ratio_interval(ts, times[reference]))
            settled = _decided(ratio, low, high, t.target)
            settled_all &= settled
        out[key] = LatencyStats(
            threads=t.threads, batch=t.batch, runs=len(ts), median_ms=statistics.median(ts),
            p90_ms=_percentile(ts, 90), mean_ms=statistics.fmean(ts), session_ms=session_ms.get(key, 0.0),
            ratio=ratio, ratio_low=low, ratio_high=high, settled=settled, stopped_by=stopped_by, target=t.target,
            burst=t.burst or 1,
        )  # fmt: skip
    if reference in out:
        if not others:
            settled_all = _within(*ratio_interval(times[reference]), t.target)
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
    from shrinkray.graph.sessions import open_session  # start-up: reading LatencyStats needs no onnx

    sessions = {}
    session_ms = {}
    for key, model in models.items():
        start = time.perf_counter()
        sessions[key] = open_session(model, threads=threads)
        session_ms[key] = (time.perf_counter() - start) * 1000
    runners = {key: partial(session.run, None, feeds) for key, session in sessions.items()}
    timing = Timing(batch=batch, threads=threads, runs=runs, warmup=warmup, budget_s=budget_s, target=target)
    return time_models(runners, timing, session_ms=session_ms, reference=reference, on_round=on_round)

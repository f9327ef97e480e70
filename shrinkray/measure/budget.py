"""The first run of the original sets the budget of the rest (issue 27).

A model at 3 s per inference ran 23 times for one variant, and one at 30 s spent a worker's whole 600 s and
returned only the limit's message. The original's first inference is timed; from it and what the comparison
is asked for, the work ahead is estimated::

    (original's further sets + its reserve) + methods x (sets + reserve, as if every variant were undecided)
    + calibration sets x (1 + methods that calibrate) + latency (settings x (budget + 2 runs))
    (all in runs of the original, each as long as its first)
    + per variant: writing, checking and opening it (as long as the original's file took), culprit budgets

and, inside a capped worker (its ``max_job_seconds`` is real there: :data:`shrinkray.io.limits.WORKER_ENV`),
compared with what is left of the cap less :data:`PLAN_MARGIN`. When it does not fit, the plan shrinks, in
this order: no reserve, no latency, fewer parity sets (down to the fewest that can still decide a top-1
verdict); the input and latency notes say what was cut and why. When even that does not fit, the run is
refused at once with one sentence (a :class:`LimitExceededError` whose ``setting`` is :data:`BUDGET_SETTING`, which
each front end words as its own controls), instead of burning the slot. The same check runs right after the
first inference (the fewest sets, nothing else), so a 30 s model is refused after one run, not after four.

Pure arithmetic on measured seconds: :class:`Budget` takes a clock of what is left (tests give numbers).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shrinkray.errors import LimitExceededError
from shrinkray.io.limits import JOB_STARTED_ENV, WORKER_ENV, Limits
from shrinkray.measure.latency import DEFAULT_BUDGET_S, MIN_ROUNDS
from shrinkray.units import format_seconds

#: Share of the job's cap a plan leaves free: what the estimate does not see (sizes still compressing on a
#: shared machine, the results and reports, a method slower than writing a file).
PLAN_MARGIN = 0.15
#: The ``setting`` of a refusal: each front end words it as its controls (fewer methods, smaller inputs).
BUDGET_SETTING = "job_time"
#: Synthesized sets a method that learns from inputs calibrates on at most (the judging side gets 160+ decisions
#: and a reserve; AWQ scales and auto's search settle on far fewer, and each set is an inference per candidate):
#: measure.parity_inputs makes the calibration part with no more sets than this and no reserve, and the plan
#: counts them.
CALIBRATION_SETS = 10


def limit_words(seconds: float) -> str:
    """A cap as a limit: '10-minute limit', '90-second limit'."""
    if seconds >= 60 and seconds % 60 == 0:
        minutes = int(seconds // 60)
        return f"{minutes}-minute limit"
    return f"{seconds:g}-second limit"


def job_clock(limits: Limits | None = None) -> tuple[float, float] | None:
    """(when the capped worker's clock started, on ``time.perf_counter()``; its ``max_job_seconds``), or None
    outside a capped worker. The worker's parent puts its start in :data:`JOB_STARTED_ENV` (``time.monotonic``);
    without it, now."""
    if os.environ.get(WORKER_ENV) != "1":
        return None
    cap = (limits or Limits.from_env()).max_job_seconds
    now = time.perf_counter()
    try:
        elapsed = time.monotonic() - float(os.environ.get(JOB_STARTED_ENV, "nan"))
    except ValueError:
        elapsed = math.nan
    return (now - elapsed if 0 <= elapsed < cap * 10 else now), cap


@dataclass(frozen=True)
class Asked:
    """The parity sets a verdict asks for (a set: one inference of the original, a batch or one sample)."""

    have: int  # sets already run (the first ones)
    wanted: int  # sets in all for a firm verdict
    minimum: int  # the fewest that can still decide (at least ``have``)
    reserve: int  # reserve sets for variants the others leave undecided
    samples_per_set: int = 1
    user_data: bool = False  # the user's own samples: they are not cut, only the rest of the plan


@dataclass
class Plan:
    """What the comparison runs, and what was cut in plain words ("" when nothing was)."""

    sets: int
    reserve: int
    latency: bool
    estimate_s: float
    input_note: str = ""
    latency_note: str = ""


@dataclass
class Budget:
    """What a comparison is asked to run, and the seconds it may take (``time_left``: None means no cap).

    ``overhead_s``: seconds per variant besides its inferences (written, checked, opened); ``culprits_s``: the
    culprit search's budget in all. :meth:`first_run` is told the original's first inference; :meth:`plan`
    makes the plan once the first set's decisions are known.
    """

    methods: int
    calibrating: int = 0  # methods that learn from inputs (a calibration split is run for them)
    latency: bool = True
    latency_settings: int = 1  # (threads, batch) settings timed
    latency_budget_s: float | None = DEFAULT_BUDGET_S
    latency_runs: int | None = None  # fixed rounds per variant (without a latency budget they set its length)
    overhead_s: float = 0.0
    culprits_s: float = 0.0
    time_left: Callable[[], float | None] = lambda: None
    cap_s: float | None = None
    first_s: float | None = None
    first_group: int = 1  # inferences in the first group of samples (runs mode: each sample is one)
    first_samples: int = 1  # input samples in that group (a batch holds several)
    made: Plan | None = field(default=None, repr=False)

    # ------------------------------------------------------------ the estimate

    def estimate(self, asked: Asked, sets: int, reserve: int, latency: bool) -> float:
        """Seconds the rest of the comparison takes with this plan (see the module docstring)."""
        t = self.first_s or 0.0
        original = max(sets - asked.have, 0) + reserve
        variants = self.methods * (sets + reserve)
        calibration = min(CALIBRATION_SETS, sets) * (1 + self.calibrating) if self.calibrating else 0
        if self.latency_budget_s is not None:  # timing stays within its budget per setting (measure/latency.py)
            per_setting = self.latency_budget_s + 2 * t
        else:
            per_setting = (1 + self.methods * (1 + 2 * (self.latency_runs or MIN_ROUNDS))) * t
        timing = self.latency_settings * per_setting if latency else 0.0
        return (original + variants + calibration) * t + timing + self.methods * self.overhead_s + self.culprits_s

    def _fits(self, seconds: float) -> bool:
        left = self.time_left()
        return left is None or seconds <= left

    # ------------------------------------------------------------ the two checks

    def first_run(self, seconds: float) -> None:
        """The original's first inference took ``seconds``: refuse at once when even the fewest sets (the first
        group's), without reserve or latency, would pass the cap."""
        self.first_s = seconds
        group = max(self.first_group, 1)
        least = Asked(have=1, wanted=group, minimum=group, reserve=0)
        need = self.estimate(least, group, 0, False)
        if not self._fits(need):
            raise self.refusal(need, self.first_samples)

    def plan(self, asked: Asked) -> Plan:
        """The largest plan that fits, cut in the order of the module docstring; refused when none does."""
        t = self.first_s or 0.0
        minimum = max(min(asked.minimum, asked.wanted), asked.have)
        latency = self.latency
        steps = [(asked.wanted, asked.reserve, latency)]
        if asked.reserve:
            steps.append((asked.wanted, 0, latency))
        if latency:
            steps.append((asked.wanted, 0, False))
        for sets, reserve, timed in steps:
            if self._fits(self.estimate(asked, sets, reserve, timed)):
                return self._made(asked, sets, reserve, timed)
        if not asked.user_data:
            for sets in range(asked.wanted - 1, minimum - 1, -1):
                if self._fits(self.estimate(asked, sets, 0, False)):
                    return self._made(asked, sets, 0, False)
        sets = asked.wanted if asked.user_data else minimum
        raise self.refusal(self.estimate(asked, sets, 0, False), sets * asked.samples_per_set, t)

    def _made(self, asked: Asked, sets: int, reserve: int, latency: bool) -> Plan:
        estimate = self.estimate(asked, sets, reserve, latency)
        why = self._why()
        cuts = []
        if sets < asked.wanted:
            cuts.append(f"judged on {sets * asked.samples_per_set} of the {asked.wanted * asked.samples_per_set} "
                        "inputs a firm verdict asks for")  # fmt: skip
        if asked.reserve and not reserve:
            cuts.append("no reserve for a variant these inputs leave undecided (it stays undecided)")
        input_note = f"; {', and '.join(cuts)}: {why}" if cuts else ""
        latency_note = ""
        if self.latency and not latency:
            latency_note = f"Speed not timed: {why}"
        self.made = Plan(sets, reserve, latency, estimate, input_note, latency_note)
        return self.made

    def _why(self) -> str:
        cap = f"the run's {limit_words(self.cap_s)}" if self.cap_s else "its time limit"
        took = format_seconds(self.first_s or 0.0, rough=True)
        return f"one run of the original takes {took} here, so the rest is cut to finish within {cap}"

    def refusal(self, seconds: float, inputs: int, first_s: float | None = None) -> LimitExceededError:
        """One sentence: what one run takes, what the whole run would take (``seconds`` still to come and what
        has passed), the limit; the hint names the settings (each front end words it as its own)."""
        first = first_s if first_s is not None else self.first_s or 0.0
        methods = f"{self.methods} method{'s' if self.methods != 1 else ''}"
        total = seconds
        left = self.time_left()
        if self.cap_s and left is not None:
            total += max(self.cap_s * (1 - PLAN_MARGIN) - left, 0.0)  # what this run has spent already
        if not self.cap_s:
            limit = "more than the time limit"
        elif total > self.cap_s:
            limit = f"more than this server's {limit_words(self.cap_s)}"
        else:
            limit = f"too close to this server's {limit_words(self.cap_s)}"
        return LimitExceededError(
            f"One run of this model takes {format_seconds(first, rough=True)}; judging {methods} on {inputs} "
            f"input{'s' if inputs != 1 else ''} would take {format_seconds(total, rough=True)} in all, {limit}",
            "Compare fewer methods or give smaller inputs; where you run it yourself, raise "
            f"{Limits.env_name('max_job_seconds')}",
            setting=BUDGET_SETTING,
        )


class FirstRun:
    """A session whose first successful ``run`` is timed and told to ``budget.first_run`` (which may refuse);
    everything else is the session's."""

    def __init__(self, session: Any, budget: Budget, timer: Callable[[], float] = time.perf_counter) -> None:
        self._session = session
        self._budget = budget
        self._timer = timer
        self._timed = False

    def run(self, *args: Any, **kwargs: Any) -> Any:
        if self._timed:
            return self._session.run(*args, **kwargs)
        started = self._timer()
        out = self._session.run(*args, **kwargs)
        self._timed = True
        self._budget.first_run(self._timer() - started)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

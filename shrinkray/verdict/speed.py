"""The one call on a variant's speed: slower, faster, about the same, or too noisy to tell, in one wording.

The card, the tables, the advice, the recommendation and the reports all read :func:`speed_of`, so a
latency that timing could not tell from the original's reads "too noisy to tell" everywhere and never
decides the recommendation (that falls to size and parity); a surely slower variant reads the same ratio
everywhere. Each call carries the original's time beside the variant's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shrinkray.measure.latency import SAME_BAND  # a ratio whose whole 95% range lies beyond it is a change

#: The advice calls a variant slower (and the recommendation passes it over) beyond this ratio.
SLOWER_RATIO = 1.10

SLOWER, FASTER, SAME, NOISY, UNMEASURED = "slower", "faster", "same", "too noisy", "unmeasured"


@dataclass(frozen=True)
class SpeedCall:
    """A variant's time against the original's at the first measured setting (threads, batch)."""

    status: str
    ratio: float | None = None
    low: float | None = None  # where a repeat of the measurement lands, 95%
    high: float | None = None
    variant_ms: float | None = None
    original_ms: float | None = None
    threads: int = 1
    batch: int = 1

    @property
    def interval(self) -> str:
        return f"95%: {self.low:.2f}-{self.high:.2f}x" if self.low is not None and self.high is not None else ""

    @property
    def words(self) -> str:
        """'1.39x slower than the original (95%: 1.20-1.61x)', 'too noisy to tell from the original's time
        (95%: 0.87-1.40x)', 'about the original's time (0.99x)'; empty when not measured."""
        if self.status == UNMEASURED or self.ratio is None:
            return ""
        around = f" ({self.interval})" if self.interval else ""
        if self.status == SLOWER:
            return f"{self.ratio:.2f}x slower than the original{around}"
        if self.status == FASTER:
            return f"{1 / self.ratio:.2f}x faster than the original{around}"
        if self.status == NOISY:
            return f"too noisy to tell from the original's time{around}"
        return f"about the original's time ({self.ratio:.2f}x)"

    @property
    def surely_slower(self) -> bool:
        """Slower by more than ``SLOWER_RATIO``, and sure of it: what the advice and recommendation act on."""
        return self.status == SLOWER and self.ratio is not None and self.ratio > SLOWER_RATIO


def call_ratio(ratio: float, low: float | None, high: float | None, noisy: bool) -> str:
    """The status of a time ratio: beyond the band with its whole interval, within it, or too noisy to tell."""
    if low is not None and high is not None:
        if low > SAME_BAND[1]:
            return SLOWER
        if high < SAME_BAND[0]:
            return FASTER
        if noisy:
            return NOISY
        return SAME
    if noisy:
        return NOISY
    return SLOWER if ratio > SAME_BAND[1] else FASTER if ratio < SAME_BAND[0] else SAME


def stats_call(stats: Any) -> str:
    """The status of one timed setting (a variant's ``LatencyStats``); UNMEASURED without a ratio."""
    if stats is None or getattr(stats, "ratio", None) is None:
        return UNMEASURED
    return call_ratio(stats.ratio, stats.ratio_low, stats.ratio_high, stats.too_noisy)


def stats_words(stats: Any) -> str:
    """One timed setting's ratio in the call's words: '1.23x (95%: 1.20-1.26x)', or 'too noisy to tell (95%:
    0.90-1.15x)'; empty without a ratio."""
    if stats is None or getattr(stats, "ratio", None) is None:
        return ""
    interval = f"95%: {stats.ratio_low:.2f}-{stats.ratio_high:.2f}x" if stats.ratio_low is not None else "no interval"
    return f"too noisy to tell ({interval})" if stats_call(stats) == NOISY else f"{stats.ratio:.2f}x ({interval})"


def speed_of(comparison: Any, result: Any) -> SpeedCall:
    """The call on ``result``'s speed in ``comparison`` (a ``Comparison`` and one of its ``VariantResult``)."""
    original = comparison.original
    if not original.latency or not result.latency:
        return SpeedCall(UNMEASURED)
    base = original.latency[0]
    if result is original:
        return SpeedCall(SAME, 1.0, None, None, base.median_ms, base.median_ms, base.threads, base.batch)
    mine = result.latency_at(base.threads, base.batch)
    if mine is None or base.median_ms <= 0:
        return SpeedCall(UNMEASURED)
    ratio = mine.ratio if mine.ratio is not None else mine.median_ms / base.median_ms
    status = call_ratio(ratio, mine.ratio_low, mine.ratio_high, mine.too_noisy) if mine.ratio is not None else \
        call_ratio(ratio, None, None, mine.too_noisy)
    return SpeedCall(status, ratio, mine.ratio_low, mine.ratio_high, mine.median_ms, base.median_ms,
                     base.threads, base.batch)  # fmt: skip

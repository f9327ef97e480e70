"""How sure a share of kept decisions is: a 95% interval, and whether it clears a limit.

A verdict that keeps "39 of 40" top classes against a 0.97 bar passes or fails by luck: the same variant on
other seeds lands either side (bench: magika's 4-bit passed on one seed and failed on another). So a share
of decisions is judged by its interval, not its point: it passes only when the interval's low end clears
the limit, fails only when its high end is below it, and is *undecided* in between, with more decisions
(or the user's own data) to settle it. Wilson's score interval: closed form, good at shares near 1, where
the normal approximation says "100% ± 0".
"""

from __future__ import annotations

import math

#: Each end is a one-sided 95% bound: "at least 97.3% with 95% confidence" is what the low end says.
CONFIDENCE = 0.95
#: The normal quantile of a one-sided bound at each confidence.
_Z = {0.90: 1.2815515655446004, 0.95: 1.6448536269514722, 0.99: 2.3263478740408408}

PASS, FAIL, UNDECIDED = "pass", "fail", "undecided"


def bounds(kept: int, total: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """(low, high): one-sided bounds of the share kept/total at ``confidence`` each; (0, 1) with nothing decided."""
    if total <= 0:
        return 0.0, 1.0
    if not 0 <= kept <= total:
        raise ValueError(f"kept {kept} is not between 0 and {total}")
    z = _Z[confidence]
    share = kept / total
    denominator = 1.0 + z * z / total
    centre = (share + z * z / (2 * total)) / denominator
    half = z * math.sqrt(share * (1 - share) / total + z * z / (4 * total * total)) / denominator
    return max(0.0, min(centre - half, share)), min(1.0, max(centre + half, share))  # rounding never moves a bound past the share


def call(kept: int, total: int, limit: float, confidence: float = CONFIDENCE) -> str:
    """PASS when the low bound is at or above ``limit``, FAIL when the high bound is below it, else UNDECIDED."""
    low, high = bounds(kept, total, confidence)
    if low >= limit:
        return PASS
    if high < limit:
        return FAIL
    return UNDECIDED


def decisions_to_pass(limit: float, flips: int = 0, confidence: float = CONFIDENCE, most: int = 100_000) -> int:
    """The fewest decisions with ``flips`` of them changed whose low bound clears ``limit`` (``most`` when none
    below it does): how many inputs a verdict needs before it can pass at all."""
    for total in range(flips + 1, most):
        if bounds(total - flips, total, confidence)[0] >= limit:
            return total
    return most

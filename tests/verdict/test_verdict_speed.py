"""The one call on speed: slower or faster only when the whole 95% range says so; else the same or too noisy."""

from __future__ import annotations

import pytest

from shrinkray.measure.latency import LatencyStats
from shrinkray.verdict.speed import FASTER, NOISY, SAME, SLOWER, SpeedCall, call_ratio, stats_words


@pytest.mark.parametrize(("ratio", "low", "high", "noisy", "status"), [
    (1.39, 1.20, 1.60, False, SLOWER),
    (1.39, 0.87, 1.60, True, NOISY),  # the card, the banner and the advice all say "too noisy to tell"
    (0.85, 0.78, 0.88, True, FASTER),  # noisy, but its whole range is below 0.95
    (1.01, 0.98, 1.03, False, SAME),
    (1.30, None, None, False, SLOWER),
])  # fmt: skip
def test_call_ratio(ratio, low, high, noisy, status):
    assert call_ratio(ratio, low, high, noisy) == status


def test_words_and_the_slower_bar():
    slower = SpeedCall(SLOWER, 1.39, 1.2, 1.6, 1.39, 1.0)
    assert slower.words == "1.39x slower than the original (95%: 1.20-1.60x)" and slower.surely_slower
    assert not SpeedCall(SLOWER, 1.07, 1.06, 1.08).surely_slower  # slower, but within the advice's 10%
    assert SpeedCall(NOISY, 1.39, 0.87, 1.6).words == "too noisy to tell from the original's time (95%: 0.87-1.60x)"
    assert SpeedCall(FASTER, 0.5, 0.45, 0.55).words.startswith("2.00x faster than the original")


def test_stats_words_follow_the_call():
    clear = LatencyStats(1, 1, 20, 1.0, 1.1, 1.0, 5.0, ratio=0.85, ratio_low=0.78, ratio_high=0.88, settled=False)
    assert stats_words(clear) == "0.85x (95%: 0.78-0.88x)"  # not "too noisy": its range is wholly below 0.95
    unclear = LatencyStats(1, 1, 20, 1.0, 1.1, 1.0, 5.0, ratio=1.2, ratio_low=0.8, ratio_high=1.6, settled=False)
    assert stats_words(unclear).startswith("too noisy to tell")

"""The 95% bounds a share of decisions is judged by: Wilson's interval, one-sided 95% at each end."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shrinkray.measure.confidence import FAIL, PASS, UNDECIDED, bounds, call, decisions_to_pass


@given(st.integers(1, 5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_the_share_lies_inside_its_bounds(pair):
    kept, total = pair
    low, high = bounds(kept, total)
    assert 0.0 <= low <= kept / total <= high <= 1.0


def test_more_decisions_narrow_the_bounds():
    widths = [bounds(n - n // 100, n)[1] - bounds(n - n // 100, n)[0] for n in (100, 400, 1600, 6400)]
    assert widths == sorted(widths, reverse=True) and widths[-1] < 0.01


def test_known_values():
    """Checked by hand against the Wilson score formula with z = 1.6449 (one-sided 95%)."""
    assert bounds(160, 160)[0] == pytest.approx(0.98338, abs=1e-4)
    assert bounds(158, 160)[0] == pytest.approx(0.96293, abs=1e-4)
    assert bounds(0, 0) == (0.0, 1.0)


def test_the_call_needs_the_whole_interval_on_one_side():
    assert call(160, 160, 0.97) == PASS  # at least 98.3%
    assert call(159, 160, 0.97) == PASS  # at least 97.3%
    assert call(158, 160, 0.97) == UNDECIDED  # 96.3% to 99.6%: either side of 0.97
    assert call(150, 160, 0.97) == FAIL  # at most 96.2%
    assert call(40, 40, 0.97) == UNDECIDED  # perfect, but 40 decisions cannot show 97%
    assert call(4, 4, 0.97) == UNDECIDED


def test_decisions_to_pass():
    assert decisions_to_pass(0.97) == 88  # the fewest perfect decisions that clear 0.97
    assert call(88, 88, 0.97) == PASS and call(87, 87, 0.97) == UNDECIDED
    assert decisions_to_pass(0.97, flips=1) > 88


def test_kept_outside_the_total_is_refused():
    with pytest.raises(ValueError):
        bounds(5, 4)

"""The one wording of numbers for people (shrinkray/units.py): durations here."""

from __future__ import annotations

import pytest

from shrinkray.units import format_seconds


@pytest.mark.parametrize(
    ("seconds", "exact", "rough"),
    [
        (0.042, "0.04 s", "0.04 s"),
        (0.291, "0.29 s", "0.29 s"),
        (3.14, "3.1 s", "3.1 s"),
        (4.24, "4.2 s", "4.2 s"),
        (36.6, "37 s", "37 s"),
        (45.2, "45 s", "45 s"),
        (95, "1 min 35 s", "about 2 minutes"),  # from 90 s on, both in minutes (a wait used to say "95 s" to 120)
        (125, "2 min 5 s", "about 2 minutes"),
        (1984, "33 min 4 s", "about 33 minutes"),
        (9000, "2 h 30 min", "about 2.5 hours"),  # a wait used to say "150 min 0 s"
    ],
)
def test_a_duration_reads_the_same_everywhere_up_to_a_minute_and_a_half(seconds, exact, rough):
    assert format_seconds(seconds) == exact
    assert format_seconds(seconds, rough=True) == rough


def test_the_measure_modules_have_no_formatter_of_their_own():
    """budget.py (estimates) and waits.py (downloads) both word seconds through units.format_seconds."""
    from shrinkray.measure import budget, waits

    assert not hasattr(budget, "duration_words") and not hasattr(waits, "format_seconds")
    assert budget.format_seconds is format_seconds

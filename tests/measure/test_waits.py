"""Connection profiles and download waits: the data file's profiles, and wait = size / bandwidth + round trip."""

from __future__ import annotations

import pytest

from shrinkray.errors import OptionError
from shrinkray.measure.waits import connections, download_seconds, get_connection
from shrinkray.units import format_seconds


def test_every_profile_names_its_source_and_date():
    profiles = connections()
    assert {"3g", "4g", "cable"} <= {c.id for c in profiles}
    for c in profiles:
        assert c.down_bps > 0 and c.rtt_ms >= 0
        assert c.source.startswith(("WebPageTest", "Lighthouse")) and "https://" in c.source
        assert len(c.checked) == 10 and c.checked.startswith("20")


@pytest.mark.parametrize("cid", ["3g", "slow-4g", "4g", "cable", "fibre"])
@pytest.mark.parametrize("size", [0, 1, 137_000, 41 * 2**20, 3 * 2**30])
def test_the_wait_is_the_size_over_the_bandwidth_plus_one_round_trip(cid, size):
    c = get_connection(cid)
    assert download_seconds(size, c) == pytest.approx(size * 8 / c.down_bps + c.rtt_ms / 1000, rel=1e-12)


def test_the_figures_of_the_profiles_the_issue_names():
    assert get_connection("3g").down_bps == 1_600_000 and get_connection("3g").rtt_ms == 300
    assert get_connection("4g").down_bps == 9_000_000 and get_connection("4g").rtt_ms == 170
    assert get_connection().id == "4g"  # the default
    assert download_seconds(9_000_000 // 8, get_connection("4g")) == pytest.approx(1.17)


def test_an_unknown_connection_says_which_exist():
    with pytest.raises(OptionError, match="'5g' is not a known connection") as found:
        get_connection("5g")
    assert "4g" in found.value.hint


def test_negative_sizes_are_refused():
    with pytest.raises(ValueError):
        download_seconds(-1, get_connection())


@pytest.mark.parametrize(("seconds", "text"), [(0.291, "0.29 s"), (4.24, "4.2 s"), (36.6, "37 s"), (125, "2 min 5 s")])
def test_seconds_read_as_people_read_them(seconds, text):
    assert format_seconds(seconds) == text

"""Download cost: provider data, tier arithmetic, savings, break-even, reports and the CLI.

The worked example of the issue: 52,428,800 bytes (50 MiB) downloaded 100,000
times a month at a flat 0.12 per GiB is 4,882.8125 GiB and 585.94 a month.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import shutil
from decimal import Decimal
from importlib import resources
from types import SimpleNamespace

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the tomli backport (a dependency there)
    import tomli as tomllib

import pytest
from helpers import ROOT, sample_path
from hypothesis import given, settings
from hypothesis import strategies as st

import shrinkray
from shrinkray import cli, pricing
from shrinkray.errors import OptionError, ShrinkRayError
from shrinkray.measure.results import CompareSettings, Comparison
from shrinkray.measure.sizes import Sizes, gzip_size
from shrinkray.pipeline.compare import compare
from shrinkray.pricing.costs import (
    PricingChoice,
    break_even_downloads,
    cost_for,
    estimates_for_comparison,
    monthly_cost,
    savings,
)
from shrinkray.pricing.numbers import GIB, format_money, parse_downloads, parse_growth, parse_size, parse_sizes
from shrinkray.pricing.providers import Provider, Tier, custom_provider, get_provider, load_providers, resolve_provider
from shrinkray.report import formats as report

D = Decimal
EXAMPLE_BYTES = 52_428_800
EXAMPLE_DOWNLOADS = 100_000
PRESETS = ["gcs", "s3", "cloudfront", "azure", "r2"]
FAST = {"runs": 5, "latency": False, "culprits": False, "brotli_quality": 5, "threads": [1]}


def tiered(*tiers: tuple[float | None, float], free: float = 0) -> Provider:
    return Provider(
        id="test",
        name="Test",
        tiers=tuple(Tier(None if up is None else D(str(up)), D(str(price))) for up, price in tiers),
        free_gib_per_month=D(str(free)),
    )


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---------------------------------------------------------------- provider data


def test_presets_are_the_documented_providers_with_sources_and_dates():
    providers = load_providers()
    assert list(providers) == PRESETS
    assert pricing.default_provider_id() == "gcs"
    assert get_provider().id == "gcs"
    for p in providers.values():
        assert p.currency == "USD" and p.unit == "GiB"
        assert p.source_url.startswith("https://") and p.name and p.scope
        assert re.fullmatch(r"2026-11(-\d\d)?", p.checked)
        assert "change" in p.notes.lower()
        assert p.tiers[-1].up_to_gib is None
        bounds = [t.up_to_gib for t in p.tiers[:-1]]
        assert bounds == sorted(bounds) and all(b > 0 for b in bounds)
        assert all(t.price_per_gib >= 0 for t in p.tiers)


def test_preset_list_prices():
    providers = load_providers()
    assert [t.price_per_gib for t in providers["gcs"].tiers] == [D("0.12"), D("0.11"), D("0.08")]
    assert [t.up_to_gib for t in providers["gcs"].tiers] == [1024, 10240, None]
    assert providers["gcs"].free_gib_per_month == 0
    assert providers["s3"].free_gib_per_month == 100
    assert providers["s3"].tiers[0].price_per_gib == D("0.09")
    assert providers["cloudfront"].free_gib_per_month == 1024
    assert providers["cloudfront"].tiers[0].price_per_gib == D("0.085")
    assert providers["azure"].free_gib_per_month == 100
    assert providers["azure"].tiers[0].price_per_gib == D("0.087")
    assert providers["r2"].zero_egress


def test_price_list_ships_in_the_package():
    assert resources.files("shrinkray.pricing").joinpath("cdn_prices.toml").is_file()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "*.toml" in config["tool"]["setuptools"]["package-data"]["shrinkray.pricing"]


def test_providers_by_alias_and_case():
    assert get_provider("S3").id == "s3"
    assert get_provider("google").id == "gcs"
    assert get_provider(" Cloudflare ").id == "r2"


GOOD = {
    "name": '"X"', "currency": '"USD"', "unit": '"GiB"', "source_url": '"https://example.com"', "checked": '"2026-11"',
    "tiers": "[{ up_to_gib = 10, price_per_gib = 1 }, { price_per_gib = 0.5 }]",
}  # fmt: skip


DESCENDING = "[{ up_to_gib = 10, price_per_gib = 1 }, { up_to_gib = 5, price_per_gib = 1 }, { price_per_gib = 1 }]"


def price_file(pid: str = "x", **changes: str | None) -> str:
    fields = {k: v for k, v in (GOOD | changes).items() if v is not None}
    return f"[providers.{pid}]\n" + "".join(f"{k} = {v}\n" for k, v in fields.items())


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (price_file(source_url=None), "lacks source_url"),
        (price_file(checked=None), "lacks checked"),
        (price_file(unit='"GB"'), "bills per 'GB'"),
        (price_file(tiers=DESCENDING), "tier 2 must end above 10 GiB"),
        (price_file(tiers="[{ up_to_gib = 10, price_per_gib = 1 }]"), "last tier must have no up_to_gib"),
        (price_file(tiers="[{ price_per_gib = -1 }]"), "cannot be negative"),
        (price_file(tiers="[]"), "no price tiers"),
        (price_file("custom"), "reserved"),
        ("[providers.x\n", "not valid TOML"),
        ('default = "gcs"\n', "no [providers.NAME] tables"),
        ('default = "nope"\n' + price_file(), "default 'nope' is not one of its providers"),
    ],
)
def test_bad_price_files_are_clear_errors(tmp_path, body, message):
    path = tmp_path / "prices.toml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(OptionError, match=re.escape(message)):
        load_providers(path)


def test_missing_price_file(tmp_path):
    with pytest.raises(OptionError, match="Cannot read the price list"):
        load_providers(tmp_path / "none.toml")


def test_own_price_file_in_the_same_format(tmp_path):
    path = tmp_path / "prices.toml"
    path.write_text(
        'default = "cheap"\n[providers.cheap]\nname = "Cheap"\ncurrency = "USD"\nunit = "GiB"\n'
        'source_url = "https://example.com"\nchecked = "2026-11-22"\nfree_gib_per_month = 10\n'
        "tiers = [{ up_to_gib = 100, price_per_gib = 0.02 }, { price_per_gib = 0.01 }]\n",
        encoding="utf-8",
    )
    provider = get_provider(path=path)
    assert provider.id == "cheap" and provider.free_gib_per_month == 10
    assert monthly_cost(110, provider) == D("1.9")  # 90 GiB at 0.02 + 10 GiB at 0.01


# ---------------------------------------------------------------- units


def test_bytes_to_gib_is_binary_and_exact():
    assert pricing.GIB == 2**30 == 1_073_741_824
    assert pricing.gib(2**30) == 1
    assert pricing.gib(EXAMPLE_BYTES * EXAMPLE_DOWNLOADS) == D("4882.8125")
    flat = custom_provider(1)
    assert monthly_cost(pricing.gib(10**9), flat) == D("0.931322574615478515625")  # 1 GB is not 1 GiB


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("52428800", 52_428_800), ("52_428_800", 52_428_800), ("50MiB", 52_428_800), ("50 MiB", 52_428_800),
        ("50mib", 52_428_800), ("1.5GB", 1_500_000_000), ("1.5GiB", 1_610_612_736), ("1kB", 1000), ("1KiB", 1024),
        ("2TB", 2 * 10**12), ("1TiB", 2**40), ("5e7", 50_000_000), ("100B", 100), ("0.5KiB", 512), (".5KiB", 512),
        ("1.3KiB", 1331),  # 1331.2 rounds to a whole byte
    ],
)  # fmt: skip
def test_parse_size_units(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["0", "0MiB", "-1", "-5MiB", "abc", "", "5 MiBB", "1Mx", "1,5MB", "nan", "inf"])
def test_parse_size_refuses_nonsense(text):
    with pytest.raises(OptionError):
        parse_size(text)


def test_parse_sizes_lists():
    assert parse_sizes("52428800, 13MiB,") == [52_428_800, 13 * 2**20]
    with pytest.raises(OptionError, match="empty"):
        parse_sizes(" , ")


def test_parse_downloads_and_growth():
    assert (
        parse_downloads("100000") == parse_downloads("100_000") == parse_downloads("100,000") == parse_downloads("1e5")
    )
    assert parse_downloads("0") == 0
    for bad in ["-5", "abc", "nan", "1,5"]:
        with pytest.raises(OptionError):
            parse_downloads(bad)
    # One rule for the CLI, the app and its links: a bare number is a percentage.
    assert parse_growth("5%") == parse_growth("5") == parse_growth(" 5 % ") == D("0.05")
    assert parse_growth("0.05") == D("0.0005")
    assert parse_growth("-10%") == parse_growth("-10") == D("-0.1")
    assert parse_growth("150%") == D("1.5")
    assert parse_growth("1000") == D("10")
    for bad in ["-100%", "-100", "1001", "abc", "inf%", "5%%", "0.12345"]:
        with pytest.raises(OptionError):
            parse_growth(bad)


def test_money_is_rounded_half_up_only_for_display():
    assert format_money(D("585.9375")) == "$585.94"
    assert format_money(D("0.005")) == "$0.01"
    assert format_money(D("0.004")) == "<$0.01"
    assert format_money(D("0")) == "$0.00"
    assert format_money(D("-1234.5")) == "-$1,234.50"
    assert format_money(D("3"), "EUR") == "3.00 EUR"


# ---------------------------------------------------------------- the worked example


def test_worked_example():
    estimate = cost_for(EXAMPLE_BYTES, EXAMPLE_DOWNLOADS, custom_provider(0.12))
    assert estimate.gib_per_month == D("4882.8125")
    assert estimate.monthly == D("585.9375")
    assert format_money(estimate.monthly) == "$585.94"
    assert estimate.yearly == estimate.total == D("7031.25")
    assert estimate.per_million_downloads == D("5859.375")
    assert estimate.per_month == (D("585.9375"),) * 12
    data = estimate.as_dict()
    assert data["gib_per_month"] == 4882.8125 and data["cost_per_month"] == 585.9375 and data["unit"] == "GiB"


def test_worked_example_accepts_any_number_type():
    for price in (0.12, "0.12", D("0.12")):
        for downloads in (100_000, 100_000.0, "100_000", D(100_000)):
            assert cost_for(EXAMPLE_BYTES, downloads, custom_provider(price)).monthly == D("585.9375")


# ---------------------------------------------------------------- tiers


def test_gcs_tiers_at_and_across_boundaries():
    gcs = get_provider("gcs")
    assert monthly_cost(0, gcs) == 0
    assert monthly_cost(1, gcs) == D("0.12")
    assert monthly_cost(1024, gcs) == D("122.88")  # exactly at the first bound: all at 0.12
    assert monthly_cost(1025, gcs) == D("122.99")  # one GiB past it at 0.11
    assert monthly_cost(2048, gcs) == D("122.88") + 1024 * D("0.11")
    assert monthly_cost(10240, gcs) == D("122.88") + 9216 * D("0.11") == D("1136.64")
    assert monthly_cost(10241, gcs) == D("1136.72")
    assert monthly_cost(D("1024.5"), gcs) == D("122.88") + D("0.055")
    assert gcs.price_at(0) == gcs.price_at(D("1023.9")) == D("0.12")
    assert gcs.price_at(1024) == D("0.11") and gcs.price_at(20000) == D("0.08")


def test_every_tier_of_every_preset_is_continuous_at_its_bounds():
    tiny = D("1e-9")
    for provider in load_providers().values():
        bounds = [provider.free_gib_per_month] + [t.up_to_gib for t in provider.tiers if t.up_to_gib is not None]
        for bound in bounds:
            if bound == 0:
                continue
            below, at, above = (monthly_cost(bound + d, provider) for d in (-tiny, 0, tiny))
            assert below <= at <= above
            assert above - below <= 2 * tiny * max(t.price_per_gib for t in provider.tiers)


def test_free_allowance_comes_first_and_counts_toward_the_tiers():
    s3 = get_provider("s3")
    assert monthly_cost(100, s3) == 0
    assert monthly_cost(101, s3) == D("0.09")
    assert monthly_cost(10240, s3) == 10140 * D("0.09") == D("912.6")
    assert monthly_cost(10241, s3) == D("912.685")
    cloudfront = get_provider("cloudfront")
    assert monthly_cost(1024, cloudfront) == 0
    assert monthly_cost(1025, cloudfront) == D("0.085")
    azure = get_provider("azure")
    assert monthly_cost(100, azure) == 0 and monthly_cost(150, azure) == 50 * D("0.087")
    custom = custom_provider(D("0.12"), free_gib=100)
    assert monthly_cost(100, custom) == 0 and monthly_cost(200, custom) == 12


def test_free_allowance_larger_than_the_first_tier():
    provider = tiered((3, 1), (10, 0.5), (None, 0.25), free=5)
    assert monthly_cost(5, provider) == 0
    assert monthly_cost(12, provider) == 5 * D("0.5") + 2 * D("0.25")


@given(st.integers(min_value=0, max_value=40))
def test_tiers_match_a_gib_by_gib_count(whole_gib):
    provider = tiered((3, 1), (7, 0.5), (20, 0.2), (None, 0.1), free=2)
    brute = sum((provider.price_at(i) for i in range(whole_gib)), D(0))
    assert monthly_cost(whole_gib, provider) == brute


@given(
    st.sampled_from(PRESETS[:4]),
    st.decimals(min_value=0, max_value=6_000_000, places=3),
    st.decimals(min_value=0, max_value=6_000_000, places=3),
)
def test_cost_never_falls_and_never_beats_the_lowest_price(pid, x, y):
    provider = get_provider(pid)
    low, high = sorted((x, y))
    assert monthly_cost(low, provider) <= monthly_cost(high, provider)
    cheapest = min(t.price_per_gib for t in provider.tiers)
    dearest = max(t.price_per_gib for t in provider.tiers)
    billable = max(high - provider.free_gib_per_month, 0)
    assert billable * cheapest <= monthly_cost(high, provider) <= billable * dearest


def test_zero_egress_provider():
    r2 = get_provider("r2")
    assert monthly_cost(10**9, r2) == 0
    estimate = cost_for(EXAMPLE_BYTES, 10**9, r2)
    assert estimate.monthly == estimate.yearly == estimate.per_million_downloads == 0
    saving = savings(EXAMPLE_BYTES, 1000, 10**6, r2)
    assert saving.per_month == 0 and saving.share is None
    assert break_even_downloads(EXAMPLE_BYTES, 1000, r2, 1) is None
    assert custom_provider(0).zero_egress


# ---------------------------------------------------------------- months, growth, savings


def test_growth_compounds_monthly_and_each_month_has_its_own_tiers():
    flat = custom_provider(1)
    estimate = cost_for(GIB, 1000, flat, growth=0.1)
    assert estimate.per_month == tuple(1000 * D("1.1") ** i for i in range(12))
    assert estimate.yearly == sum(estimate.per_month)
    gcs = get_provider("gcs")
    grown = cost_for(GIB, 1000, gcs, months=24, growth="0.2")
    assert grown.months == 24
    for i, cost in enumerate(grown.per_month):
        assert cost == monthly_cost(1000 * D("1.2") ** i, gcs)
    assert grown.yearly == sum(grown.per_month[:12]) and grown.total == sum(grown.per_month)
    assert cost_for(GIB, 1000, gcs, months=3).yearly == cost_for(GIB, 1000, gcs).yearly  # yearly is always 12 months
    shrinking = cost_for(GIB, 1000, flat, growth=-0.5)
    assert shrinking.per_month[1] == 500


def test_no_growth_year_is_twelve_months():
    estimate = cost_for(EXAMPLE_BYTES, EXAMPLE_DOWNLOADS, get_provider("s3"))
    assert estimate.yearly == 12 * estimate.monthly


def test_savings_of_a_smaller_variant():
    flat = custom_provider(D("0.12"))
    saving = savings(EXAMPLE_BYTES, 13_107_200, EXAMPLE_DOWNLOADS, flat)  # 50 MiB -> 12.5 MiB
    assert saving.original.monthly == D("585.9375")
    assert saving.variant.monthly == D("146.484375")
    assert saving.per_month == D("439.453125")
    assert saving.per_year == 12 * saving.per_month
    assert saving.per_million_downloads == D("4394.53125")
    assert saving.share == D("0.75")
    assert format_money(saving.per_month) == "$439.45"


def test_a_larger_variant_saves_a_negative_amount():
    saving = savings(1000, 2000, 10**6, custom_provider(1))
    assert saving.per_month < 0 and saving.share == -1


def test_no_downloads_cost_nothing():
    estimate = cost_for(EXAMPLE_BYTES, 0, get_provider())
    assert estimate.monthly == 0 and estimate.per_million_downloads is None
    assert savings(EXAMPLE_BYTES, 1000, 0, get_provider()).per_million_downloads is None


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: cost_for(EXAMPLE_BYTES, -1, get_provider()), "cannot be negative"),
        (lambda: cost_for(0, 100, get_provider()), "more than 0 bytes"),
        (lambda: cost_for(-5, 100, get_provider()), "more than 0 bytes"),
        (lambda: cost_for(1.5, 100, get_provider()), "whole number of bytes"),
        (lambda: cost_for(EXAMPLE_BYTES, float("nan"), get_provider()), "finite"),
        (lambda: cost_for(EXAMPLE_BYTES, "lots", get_provider()), "must be a number"),
        (lambda: cost_for(EXAMPLE_BYTES, True, get_provider()), "must be a number"),
        (lambda: cost_for(EXAMPLE_BYTES, 1, get_provider(), growth=-1), "more than -100%"),
        (lambda: cost_for(EXAMPLE_BYTES, 1, get_provider(), months=0), "Months"),
        (lambda: monthly_cost(-1, get_provider()), "cannot be negative"),
        (lambda: custom_provider(-0.12), "cannot be negative"),
        (lambda: get_provider("backblaze"), "Unknown provider 'backblaze'. Use one of gcs, s3, cloudfront, azure, r2"),
        (lambda: get_provider("custom"), "needs a price"),
        (lambda: resolve_provider("s3", 0.1), "Both --provider s3 and --price-per-gb"),
        (lambda: resolve_provider("s3", free_gib=5), "--free-gib only applies to a flat price"),
        (lambda: break_even_downloads(1000, 500, get_provider(), -1), "cannot be negative"),
        (lambda: PricingChoice(get_provider(), D(1), delivery="zip"), "Unknown delivery 'zip'"),
    ],
)
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises(OptionError, match=re.escape(message)) as info:
        call()
    assert isinstance(info.value, ShrinkRayError)
    assert info.value.hint  # says what to do


def test_resolve_provider():
    assert resolve_provider().id == "gcs"
    assert resolve_provider("azure").id == "azure"
    flat = resolve_provider(None, "0.12", "100")
    assert flat.id == "custom" and flat.tiers == (Tier(None, D("0.12")),) and flat.free_gib_per_month == 100
    assert resolve_provider("custom", 0.05).tiers[0].price_per_gib == D("0.05")


# ---------------------------------------------------------------- break-even


def test_break_even_with_a_flat_price():
    flat = custom_provider(D("0.1"))
    # 1 GiB -> 0.5 GiB saves 0.05 per download: 100 a month needs 2,000 downloads
    assert break_even_downloads(GIB, GIB // 2, flat, 100) == 2000
    assert savings(GIB, GIB // 2, 1999, flat).per_month < 100 <= savings(GIB, GIB // 2, 2000, flat).per_month
    assert break_even_downloads(GIB, GIB // 2, flat, D("100.01")) == 2001  # rounded up to a whole download
    assert break_even_downloads(GIB, GIB // 2, flat, 0) == 0


def test_break_even_inside_a_free_allowance():
    s3 = get_provider("s3")
    # both files are free up to 100 downloads; then only the 1 GiB one pays 0.09 per download
    assert break_even_downloads(GIB, GIB // 2, s3, D("4.5")) == 150


def test_break_even_when_the_saving_dips_is_the_first_crossing():
    provider = tiered((100, 1), (None, 0.1))
    a, b = GIB, GIB * 7 // 8  # 1 GiB and 0.875 GiB per download

    def saving(n):
        return savings(a, b, n, provider).per_month

    # the saving rises to 12.5 at 100 downloads, falls while only the original is in the cheap tier, then rises again
    assert saving(100) == D("12.5") and saving(110) < saving(100) and saving(2000) > saving(100)
    assert break_even_downloads(a, b, provider, 5) == 40
    assert break_even_downloads(a, b, provider, D("12.5")) == 100
    target = 13
    expected = next(n for n in range(5000) if saving(n) >= target)
    assert break_even_downloads(a, b, provider, target) == expected == 1040


def test_break_even_when_the_crossing_falls_between_two_whole_downloads():
    provider = tiered((100, 1), (None, 0.1))
    a, b = 3 * 2**29, 3 * 2**28  # 1.5 GiB and 0.75 GiB: the original leaves the dear tier at 66.67 downloads

    def saving(n):
        return savings(a, b, n, provider).per_month

    # 50 is reached only at 66.67 downloads; at 67 the saving already fell, so the first whole count is much later
    assert saving(66) < 50 and saving(67) < 50
    expected = next(n for n in range(5000) if saving(n) >= 50)
    assert break_even_downloads(a, b, provider, 50) == expected == 667
    assert break_even_downloads(a, b, provider, D("49.5")) == 66
    capped = tiered((100, 1), (None, 0))
    assert break_even_downloads(a, b, capped, 50) is None


def test_break_even_never():
    gcs = get_provider("gcs")
    assert break_even_downloads(1000, 1000, gcs, 1) is None
    assert break_even_downloads(1000, 2000, gcs, 1) is None
    capped = tiered((10, 1), (None, 0))  # once both are past 10 GiB the saving stops growing
    assert break_even_downloads(GIB, GIB // 2, capped, 100) is None


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(PRESETS[:4]),
    st.integers(min_value=1_000, max_value=5 * 10**9),
    st.floats(min_value=0.01, max_value=0.99),
    st.decimals(min_value="0.01", max_value=50_000, places=2),
)
def test_break_even_is_the_first_whole_download_count_that_reaches_the_target(pid, original, ratio, target):
    provider = get_provider(pid)
    variant = max(1, int(original * ratio))
    n = break_even_downloads(original, variant, provider, target)

    def saving(downloads):
        a, b = D(original) / GIB, D(variant) / GIB
        return monthly_cost(a * downloads, provider) - monthly_cost(b * downloads, provider)

    # The variant is smaller and every preset's last tier has a price, so the saving grows without bound.
    assert provider.tiers[-1].price_per_gib > 0
    assert n is not None
    assert saving(n) >= target
    # the saving is linear between kinks, so the whole counts next to every kink below n are enough to check
    bounds = [provider.free_gib_per_month] + [t.up_to_gib for t in provider.tiers if t.up_to_gib is not None]
    kinks = {g * GIB / size for g in bounds for size in (D(original), D(variant))}
    candidates = {0, n - 1} | {m for k in kinks for m in (math.floor(k), math.ceil(k))}
    assert all(saving(m) < target for m in candidates if 0 <= m < n)


# ---------------------------------------------------------------- a comparison


def _sizes(raw: int, gzip: int, brotli: int) -> Sizes:
    return Sizes(raw=raw, gzip=gzip, brotli=brotli, brotli_quality=11)


def fake_comparison() -> SimpleNamespace:
    original = SimpleNamespace(key="original", sizes=_sizes(EXAMPLE_BYTES, 48_000_000, 46_000_000))
    small = SimpleNamespace(key="float16", sizes=_sizes(EXAMPLE_BYTES // 2, 23_000_000, 22_000_000))
    failed = SimpleNamespace(key="broken", sizes=None)
    return SimpleNamespace(original=original, variants=[small, failed], all=[original, small, failed])


def test_estimates_for_comparison():
    c = fake_comparison()
    gcs = get_provider("gcs")
    costs = estimates_for_comparison(c, EXAMPLE_DOWNLOADS, gcs, "gzip", growth=0.02)
    assert [vc.key for vc in costs] == ["original", "float16", "broken"]
    original, small, failed = costs
    assert original.is_original and original.saving is None and original.bytes_served == 48_000_000
    assert original.estimate == cost_for(48_000_000, EXAMPLE_DOWNLOADS, gcs, growth=0.02)
    assert small.bytes_served == 23_000_000
    assert small.saving == savings(48_000_000, 23_000_000, EXAMPLE_DOWNLOADS, gcs, growth=0.02)
    assert failed.bytes_served is None and failed.estimate is None and failed.saving is None
    raw = estimates_for_comparison(c, EXAMPLE_DOWNLOADS, custom_provider(0.12), "raw")
    assert raw[0].estimate.monthly == D("585.9375")
    with pytest.raises(OptionError, match="Unknown delivery"):
        estimates_for_comparison(c, 1, gcs, "zstd")


@pytest.fixture(scope="module")
def mlp() -> Comparison:
    methods = [("float16", {}), ("weights-int8", {})]
    return compare(shrinkray.load(sample_path("mlp")), CompareSettings(methods=methods, **FAST))


@pytest.fixture
def choice() -> PricingChoice:
    return PricingChoice(custom_provider(D("0.12")), D(10**6), "brotli")


def test_reports_are_unchanged_without_pricing(mlp):
    assert "cost" not in report.to_json(mlp)
    assert "Download cost" not in report.to_markdown(mlp) and "Download cost" not in report.to_text(mlp)
    header = next(csv.reader(io.StringIO(report.to_csv(mlp))))
    assert header == report.csv_columns(mlp)
    assert report.to_json(mlp) == report.to_json(mlp, pricing=None)


def test_json_report_with_pricing(mlp, choice):
    data = report.to_json(mlp, pricing=choice)
    json.dumps(data, allow_nan=False)
    cost = data["cost"]
    assert cost["unit"] == "GiB" and cost["currency"] == "USD" and cost["delivery"] == "brotli"
    assert cost["downloads_per_month"] == 10**6 and cost["provider"]["id"] == "custom"
    rows = {row["key"]: row for row in cost["variants"]}
    assert set(rows) == {"original", "float16", "weights-int8"}
    for result in mlp.all:
        expected = cost_for(result.sizes.brotli, 10**6, choice.provider)
        assert rows[result.key]["bytes_served"] == result.sizes.brotli
        assert rows[result.key]["cost_per_month"] == float(expected.monthly)
    assert rows["original"]["saving_per_month"] is None
    assert rows["float16"]["saving_per_month"] == pytest.approx(
        rows["original"]["cost_per_month"] - rows["float16"]["cost_per_month"]
    )
    assert {k: v for k, v in data.items() if k not in ("cost", "headline")} == {
        k: v for k, v in report.to_json(mlp).items() if k != "headline"}
    assert data["headline"]["pricing"].startswith("1,000,000 downloads a month")  # the headline is priced alike


def test_markdown_text_and_csv_reports_with_pricing(mlp, choice):
    md = report.to_markdown(mlp, pricing=choice)
    section = md.split("## Download cost", 1)[1].split("## Advice", 1)[0]
    assert "| `float16` |" in section and "GiB/month" in section and "per GiB" in section
    assert "\\$" in section and not re.search(r"(?<!\\)\$", section)  # every $ escaped, never a math span
    text = report.to_text(mlp, pricing=choice)
    assert "Download cost: 1,000,000 downloads a month, served brotli" in text
    assert "2^30 bytes" in text
    original_cost = format_money(cost_for(mlp.original.sizes.brotli, 10**6, choice.provider).monthly)
    assert original_cost in text
    rows = list(csv.DictReader(io.StringIO(report.to_csv(mlp, pricing=choice))))
    header = next(csv.reader(io.StringIO(report.to_csv(mlp, pricing=choice))))
    assert header == report.csv_columns(mlp) + pricing.cost_csv_columns(choice)
    by_key = {r["key"]: r for r in rows}
    assert by_key["original"]["saving_per_month_usd"] == ""
    assert float(by_key["float16"]["cost_bytes_served"]) == mlp.get("float16").sizes.brotli
    expected = savings(mlp.original.sizes.brotli, mlp.get("float16").sizes.brotli, 10**6, choice.provider)
    assert float(by_key["float16"]["saving_per_month_usd"]) == float(expected.per_month)


def test_write_reports_with_pricing(mlp, choice, tmp_path):
    paths = {k: tmp_path / f"r.{k}" for k in ("json", "md", "csv")}
    report.write_reports(mlp, json_path=paths["json"], markdown_path=paths["md"], csv_path=paths["csv"], pricing=choice)
    assert "cost" in json.loads(paths["json"].read_text(encoding="utf-8"))
    assert "## Download cost" in paths["md"].read_text(encoding="utf-8")
    assert "cost_per_month_usd" in paths["csv"].read_text(encoding="utf-8").splitlines()[0]


# ---------------------------------------------------------------- CLI


def test_cli_price_worked_example(capsys):
    code, out, err = run_cli(capsys, "price", "--size", "52428800", "--downloads", "100000", "--price-per-gb", "0.12")
    assert code == 0 and err == ""
    row = next(line for line in out.splitlines() if "52,428,800" in line)
    assert "4,882.8125" in row and "$585.94" in row and "$7,031.25" in row and "$5,859.38" in row
    assert "GiB = 2^30 bytes" in out


def test_cli_price_json(capsys):
    code, out, _ = run_cli(capsys, "price", "--size", "50MiB,12.5MiB", "--downloads", "100_000",
                           "--price-per-gib", "0.12", "--json", "--break-even", "100")  # fmt: skip
    assert code == 0
    data = json.loads(out)
    assert data["unit"] == "GiB" and data["bytes_per_unit"] == 2**30 and data["provider"]["id"] == "custom"
    first, second = data["rows"]
    assert first["bytes_per_download"] == EXAMPLE_BYTES
    assert first["gib_per_month"] == 4882.8125 and first["cost_per_month"] == 585.9375
    assert second["saving_per_month"] == 439.453125 and second["saving_share"] == 0.75
    # 100 a month at 0.12 * 37.5/1024 GiB saved per download
    assert second["break_even_downloads_per_month"] == math.ceil(100 / (0.12 * 37.5 / 1024))


def test_cli_price_provider_with_several_sizes_and_break_even(capsys):
    code, out, _ = run_cli(capsys, "price", "--size", "50MiB,13MiB", "--downloads", "100000",
                           "--provider", "s3", "--break-even", "100", "--growth", "5%")  # fmt: skip
    assert code == 0
    assert "Amazon S3" in out and "https://aws.amazon.com/s3/pricing/" in out and "checked 2026-11" in out
    assert "Saving/month" in out and "growing 5% a month" in out
    expected = break_even_downloads(EXAMPLE_BYTES, 13 * 2**20, get_provider("s3"), 100)
    assert f"{expected:,} downloads" in out


def test_cli_price_measures_files(capsys, tmp_path):
    model = tmp_path / "tree.onnx"  # small: the command measures brotli at quality 11 as well
    shutil.copyfile(sample_path("tree"), model)
    code, out, _ = run_cli(capsys, "price", model, "--downloads", "1000", "--delivery", "gzip", "--json")
    assert code == 0
    row = json.loads(out)["rows"][0]
    assert row["bytes_per_download"] == gzip_size(model.read_bytes()) < model.stat().st_size
    assert row["label"].startswith("tree.onnx (gzip")


def test_cli_list_providers(capsys):
    code, out, _ = run_cli(capsys, "price", "--list-providers")
    assert code == 0
    for provider in load_providers().values():
        assert provider.id in out and provider.source_url in out
    assert "gcs (default)" in out and "2^30 bytes" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--size", "1MiB", "--downloads", "-5"], "Error: Downloads per month cannot be negative (-5)."),
        (["--size", "0", "--downloads", "5"], "Error: Size '0' is 0 bytes."),
        (["--size", "1MiB", "--downloads", "5", "--provider", "nope"], "Error: Unknown provider 'nope'."),
        (["--size", "1MiB", "--downloads", "5", "--provider", "custom"], "Error: The custom provider needs a price."),
        (["--size", "1MiB", "--downloads", "5", "--provider", "s3", "--price-per-gb", "1"], "Error: Both --provider"),
        (["--size", "1MiB", "--downloads", "5", "--price-per-gb", "-1"], "Error: Price per GiB cannot be negative"),
        (["--size", "1MiB", "--downloads", "5", "--free-gib", "10"], "Error: --free-gib only applies"),
        (["--size", "1MiB", "--downloads", "5", "--growth", "5x"], "Error: Monthly growth must be a percentage such as 5 or 5%, not '5x'."),
        (["--size", "1MiB"], "Error: --downloads is required."),
        (["--downloads", "5"], "Error: Nothing to price."),
        (["missing.onnx", "--downloads", "5"], "Error: Missing missing.onnx."),
        (["--size", "50XB", "--downloads", "5"], "Error: '50XB' is not a size."),
        # Out of range: a message naming the bound, never a traceback, a silent 0 or "a bug".
        (["--size", "1e308", "--downloads", "5"], "Error: Size '1e308' is more than 1,125,899,906,842,624 bytes (1 PiB)."),
        (["--size", "1MiB", "--downloads", "1e13"], "Error: Downloads per month must be at most 1,000,000,000,000, not 1e13."),
        (["--size", "1MiB", "--downloads", "nan"], "Error: Downloads per month must be a finite number, not 'nan'."),
        (["--size", "1MiB", "--downloads", "abc"], "Error: Downloads per month must be a number, not 'abc'."),
        (["--size", "1MiB", "--downloads", "0.5"], "Error: Downloads per month must be a whole number, not 0.5."),
        (["--size", "1MiB", "--downloads", "5", "--price-per-gb", "1e-400"],
         "Error: Price per GiB has more than 6 decimal places (1e-400). Round it, e.g. 0.12."),
        (["--size", "1MiB", "--downloads", "5", "--price-per-gb", "1e308"], "Error: Price per GiB must be at most 1,000,"),
        (["--size", "1MiB", "--downloads", "5", "--price-per-gb", "inf"], "Error: Price per GiB must be a finite number"),
        (["--size", "1MiB", "--downloads", "5", "--price-per-gb", "0.1", "--free-gib", "1e300"],
         "Error: Free GiB per month must be at most 1,000,000,000,"),
        (["--size", "1MiB", "--downloads", "5", "--growth", "100000%"], "Error: Monthly growth must be from -99% to 1000%, not 100000%."),
        (["--size", "1MiB", "--downloads", "5", "--growth=-100%"], "Error: Monthly growth must be more than -100%"),
        (["--size", "1MiB", "--downloads", "5", "--growth", "inf%"], "Error: Monthly growth must be a finite percentage"),
        (["--size", "1MiB,2MiB", "--downloads", "5", "--break-even", "1e300"], "Error: --break-even must be at most"),
    ],
)
def test_cli_price_errors_are_one_line(capsys, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "price", *args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1 and out == ""
    assert len(lines) == 1 and lines[0].startswith(message), lines


def test_cli_compare_cost_flags_need_downloads_and_fail_before_work(capsys, tmp_path):
    code, out, err = run_cli(capsys, "compare", tmp_path / "missing.onnx", "--provider", "s3", "--growth", "5%")
    assert code == 1 and out == ""
    assert err.strip() == (
        "Error: --provider, --growth need --downloads. Say how many downloads a month, e.g. --downloads 100000."
    )
    code, _, err = run_cli(capsys, "compare", tmp_path / "missing.onnx", "--downloads", "10", "--provider", "nope")
    assert code == 1 and err.startswith("Error: Unknown provider 'nope'")


@pytest.mark.slow  # a comparison in a capped worker interpreter (shrinkray.runs.sandbox)
def test_cli_compare_with_downloads_adds_cost(capsys, tmp_path):
    model = tmp_path / "mlp.onnx"
    shutil.copyfile(sample_path("mlp"), model)
    paths = [tmp_path / "r.json", tmp_path / "r.md", tmp_path / "r.csv"]
    code, out, err = run_cli(
        capsys, "compare", model, "--methods", "float16", "--no-latency", "--no-culprits", "--brotli-quality", "5",
        "-q", "--downloads", "100000", "--provider", "s3", "--delivery", "gzip",
        "--json", paths[0], "--markdown", paths[1], "--csv", paths[2],
    )  # fmt: skip
    assert code == 0, err
    assert "Download cost: 100,000 downloads a month, served gzip, Amazon S3" in out
    assert "Saving/month" in out and "https://aws.amazon.com/s3/pricing/" in out
    data = json.loads(paths[0].read_text(encoding="utf-8"))
    assert data["cost"]["provider"]["id"] == "s3" and data["cost"]["delivery"] == "gzip"
    assert [v["key"] for v in data["cost"]["variants"]] == ["original", "float16"]
    assert "## Download cost" in paths[1].read_text(encoding="utf-8")
    assert "saving_per_year_usd" in paths[2].read_text(encoding="utf-8").splitlines()[0]


def test_break_even_lands_on_the_whole_number_decimal_rounding_overshoots():
    """Found by hypothesis: the exact crossing computed at 28 digits was just above 13421772800."""
    from shrinkray import pricing

    provider = pricing.get_provider("cloudfront")
    found = pricing.break_even_downloads(1000, 990, provider, "10.00")
    assert found == 13421772800
    saving = lambda n: pricing.monthly_cost(Decimal(1000 * n) / pricing.GIB, provider) - pricing.monthly_cost(  # noqa: E731
        Decimal(990 * n) / pricing.GIB, provider
    )
    assert saving(found) >= Decimal("10.00") > saving(found - 1)


@pytest.mark.parametrize(
    "args",
    [
        ["--size", "1024TiB", "--downloads", "1e12", "--price-per-gb", "1000", "--growth", "1000%"],  # every bound at once
        ["--size", "1,1024TiB", "--downloads", "1", "--price-per-gb", "0.000001"],
        ["--size", "1MiB,2MiB", "--downloads", "1000", "--break-even", "1000000000000"],
    ],
)
def test_cli_price_json_is_valid_json_at_the_bounds(capsys, args):
    code, out, err = run_cli(capsys, "price", *args, "--json")
    assert code == 0, err
    data = json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
    for row in data["rows"]:
        assert all(math.isfinite(v) for v in row["cost_each_month"])
        assert math.isfinite(row["cost_per_year"])


def test_the_bounds_are_checked_wherever_a_number_enters(capsys):
    with pytest.raises(OptionError, match="Downloads per month must be at most"):
        cost_for(1000, 10**13, get_provider())
    with pytest.raises(OptionError, match="Downloads per month must be at most"):
        PricingChoice(get_provider(), D(10**13))
    with pytest.raises(OptionError, match="Size must be at most"):
        cost_for(2**51, 10, get_provider())
    with pytest.raises(OptionError, match="Price per GiB must be at most"):
        pricing.with_prices(get_provider(), [(None, "1e308")])
    with pytest.raises(OptionError, match="Tier end must be at most"):
        pricing.with_prices(get_provider(), [("1e300", "0.1"), (None, "0.05")])
    with pytest.raises(OptionError, match="Free GiB per month has more than 6 decimal places"):
        custom_provider("0.1", "1e-9")
    with pytest.raises(OptionError, match="Monthly growth must be from -99% to 1000%, not 1100%"):
        cost_for(1000, 10, get_provider(), growth=11)
    with pytest.raises(OptionError, match="Months must be a whole number from 1 to 120"):
        cost_for(1000, 10, get_provider(), months=121)



def test_cli_growth_5_means_5_percent_like_the_app(capsys, tmp_path, monkeypatch):
    """One rule for every front end: a bare growth number is a percentage (the app's field and links read it so)."""
    monkeypatch.chdir(tmp_path)
    outputs = []
    for growth in ("5", "5%"):
        code, out, err = run_cli(capsys, "price", "--size", "50MiB", "--downloads", "100000", "--growth", growth, "--json")
        assert code == 0, err
        outputs.append(json.loads(out))
    assert outputs[0] == outputs[1]
    row = outputs[0]["rows"][0]
    assert outputs[0]["growth_per_month"] == row["growth_per_month"] == 0.05
    expected = cost_for(50 * 2**20, 100_000, get_provider(), growth=D("0.05"))
    assert row["cost_per_year"] == pytest.approx(float(expected.yearly))
    assert row["cost_each_month"][1] == pytest.approx(row["cost_each_month"][0] * 1.05, rel=0.01)

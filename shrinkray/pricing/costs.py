"""Download cost: what serving a model file costs in internet egress, and what a smaller file saves.

Egress is billed per GiB (2**30 bytes) of data served in a calendar month, at
tiered prices that fall as the month's volume grows, often after a free
allowance. So for one file::

    GiB per month  = bytes served per download * downloads per month / 2**30
    cost per month = the tiered price applied to that month's GiB (free allowance first)
    cost per year  = the sum of 12 months (downloads may grow by a fixed rate each month)

Bytes served depend on how the file is delivered: raw, gzip or brotli (the
sizes :mod:`shrinkray.measure.sizes` measured). Provider prices are data, in
``shrinkray/pricing/cdn_prices.toml``, each with its source page and the date it
was checked. All money is :class:`~decimal.Decimal`, exact until it is shown
(rounded half up to cents); ``as_dict()`` gives plain floats for JSON and charts.

Everything here is a pure function of its arguments; the CLI (``shrinkray
price``, ``shrinkray compare --downloads``), the reports and the app share it:

- :func:`load_providers` / :func:`get_provider` / :func:`custom_provider` /
  :func:`resolve_provider`: the presets (Google Cloud Storage is the default)
  or a flat price; each :class:`Provider` carries its source URL and date.
- :func:`monthly_cost` (GiB in one month -> money), :func:`cost_for` (one file
  -> :class:`CostEstimate`: per month, each month, per year, per million
  downloads), :func:`savings` (-> :class:`Saving`), :func:`break_even_downloads`.
- :func:`estimates_for_comparison` (one :class:`VariantCost` per result of a
  ``Comparison``), and :class:`PricingChoice`, which the report functions take
  as their optional ``pricing`` argument.
- :func:`parse_size` (``50MiB``, ``1.5GB``...), :func:`parse_downloads`,
  :func:`parse_growth`, :func:`format_money`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, localcontext
from typing import TYPE_CHECKING, Any

from shrinkray.pricing.numbers import (
    _PRECISION,
    GIB,
    MILLION,
    MONTHS_PER_YEAR,
    UNIT,
    _delivery,
    _downloads,
    _exact,
    _growth,
    _money,
    _months,
    _non_negative,
    _positive_bytes,
    format_count,
    format_gib,
    format_money,
    format_percent,
    format_size,
)
from shrinkray.pricing.providers import Provider

if TYPE_CHECKING:
    from shrinkray.measure.results import Comparison


# ---------------------------------------------------------------- the arithmetic


@_exact
def monthly_cost(gib_in_month: Any, provider: Provider) -> Decimal:
    """Cost of serving ``gib_in_month`` GiB in one month: free allowance first, then each tier in turn.

    Tier bounds count the free allowance (a 100 GiB allowance inside a tier
    ending at 10,240 GiB bills 10,140 GiB at that tier's price).
    """
    used = _non_negative(gib_in_month, "GiB served")
    total = Decimal(0)
    lower = Decimal(0)
    for tier in provider.tiers:
        upper = used if tier.up_to_gib is None else min(tier.up_to_gib, used)
        billed_from = max(lower, provider.free_gib_per_month)
        if upper > billed_from:
            total += (upper - billed_from) * tier.price_per_gib
        if tier.up_to_gib is None or used <= tier.up_to_gib:
            break
        lower = tier.up_to_gib
    return total


@dataclass(frozen=True)
class CostEstimate:
    """Egress cost of serving one file ``downloads_per_month`` times a month (growing by ``growth`` a month)."""

    bytes_per_download: int
    downloads_per_month: Decimal  # in the first month
    growth: Decimal  # per month, 0.05 = 5% more each month
    provider_id: str
    currency: str
    gib_per_month: Decimal  # first month
    monthly: Decimal  # first month
    per_month: tuple[Decimal, ...]  # each month of the horizon
    yearly: Decimal  # the first 12 months
    total: Decimal  # the whole horizon (= yearly for the default 12 months)
    per_million_downloads: Decimal | None  # average at the first month's volume; None with no downloads

    @property
    def months(self) -> int:
        return len(self.per_month)

    @property
    def gib_per_download(self) -> Decimal:
        with localcontext() as ctx:
            ctx.prec = _PRECISION
            return Decimal(self.bytes_per_download) / GIB

    def as_dict(self) -> dict[str, Any]:
        return {
            "bytes_per_download": self.bytes_per_download,
            "gib_per_download": float(self.gib_per_download),
            "downloads_per_month": float(self.downloads_per_month),
            "growth_per_month": float(self.growth),
            "provider": self.provider_id,
            "currency": self.currency,
            "unit": UNIT,
            "gib_per_month": float(self.gib_per_month),
            "cost_per_month": float(self.monthly),
            "cost_per_year": float(self.yearly),
            "cost_total": float(self.total),
            "months": self.months,
            "cost_each_month": [float(m) for m in self.per_month],
            "cost_per_million_downloads": _float(self.per_million_downloads),
        }


def _float(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


@_exact
def cost_for(
    size_bytes: Any,
    downloads_per_month: Any,
    provider: Provider,
    months: int = MONTHS_PER_YEAR,
    growth: Any = 0.0,
) -> CostEstimate:
    """Egress cost of a file of ``size_bytes`` (as served) downloaded ``downloads_per_month`` times a month.

    Month ``i`` (0-based) has ``downloads * (1 + growth) ** i`` downloads, each
    month priced on its own tiers. ``yearly`` always covers 12 months, ``total``
    the ``months`` given.
    """
    size = _positive_bytes(size_bytes)
    downloads = _downloads(downloads_per_month)
    rate = _growth(growth)
    horizon = _months(months)
    per_gib = Decimal(size) / GIB
    costs = [monthly_cost(per_gib * downloads * (1 + rate) ** i, provider) for i in range(max(horizon, MONTHS_PER_YEAR))]
    first_gib = per_gib * downloads
    return CostEstimate(
        bytes_per_download=size,
        downloads_per_month=downloads,
        growth=rate,
        provider_id=provider.id,
        currency=provider.currency,
        gib_per_month=first_gib,
        monthly=costs[0],
        per_month=tuple(costs[:horizon]),
        yearly=sum(costs[:MONTHS_PER_YEAR], Decimal(0)),
        total=sum(costs[:horizon], Decimal(0)),
        per_million_downloads=costs[0] / downloads * MILLION if downloads else None,
    )


@dataclass(frozen=True)
class Saving:
    """What serving the variant instead of the original saves (negative: it costs more)."""

    original: CostEstimate
    variant: CostEstimate
    per_month: Decimal  # first month
    per_year: Decimal  # first 12 months
    total: Decimal  # the whole horizon
    per_million_downloads: Decimal | None
    share: Decimal | None  # of the original's first-month cost; None when that is 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "saving_per_month": float(self.per_month),
            "saving_per_year": float(self.per_year),
            "saving_total": float(self.total),
            "saving_per_million_downloads": _float(self.per_million_downloads),
            "saving_share": _float(self.share),
        }


@_exact
def _saving(original: CostEstimate, variant: CostEstimate) -> Saving:
    per_month = original.monthly - variant.monthly
    downloads = original.downloads_per_month
    return Saving(
        original=original,
        variant=variant,
        per_month=per_month,
        per_year=original.yearly - variant.yearly,
        total=original.total - variant.total,
        per_million_downloads=per_month / downloads * MILLION if downloads else None,
        share=per_month / original.monthly if original.monthly else None,
    )


def savings(
    original_bytes: Any,
    variant_bytes: Any,
    downloads_per_month: Any,
    provider: Provider,
    months: int = MONTHS_PER_YEAR,
    growth: Any = 0.0,
) -> Saving:
    """Saving of serving ``variant_bytes`` instead of ``original_bytes``: per month, per year, per million downloads."""
    return _saving(
        cost_for(original_bytes, downloads_per_month, provider, months, growth),
        cost_for(variant_bytes, downloads_per_month, provider, months, growth),
    )


@_exact
def break_even_downloads(
    original_bytes: Any, variant_bytes: Any, provider: Provider, target_saving_per_month: Any
) -> int | None:
    """Fewest downloads a month at which the variant saves at least ``target_saving_per_month``.

    None when that never happens (the variant is not smaller, or egress is
    free). Cost is piecewise linear in downloads, with a kink wherever either
    file's monthly GiB crosses a tier bound or the free allowance, so the
    saving is solved exactly segment by segment. The saving is not always
    monotonic (a cheaper tier reached by the original first can shrink it), so
    the first crossing is returned.
    """
    a = Decimal(_positive_bytes(original_bytes, "Original size")) / GIB
    b = Decimal(_positive_bytes(variant_bytes, "Variant size")) / GIB
    target = _money(target_saving_per_month)
    if target == 0:
        return 0
    if b >= a:
        return None

    def saving(downloads: Decimal) -> Decimal:
        return monthly_cost(a * downloads, provider) - monthly_cost(b * downloads, provider)

    bounds = [provider.free_gib_per_month] + [t.up_to_gib for t in provider.tiers if t.up_to_gib is not None]
    kinks = sorted({g / per for g in bounds if g > 0 for per in (a, b)})
    final_slope = (a - b) * provider.tiers[-1].price_per_gib
    start = Decimal(0)
    for _ in range(len(kinks) + 2):  # each retry moves past at least one kink
        exact = _first_reach(saving, kinks, start, target, final_slope)
        if exact is None:
            return None
        whole = int(exact.to_integral_value(rounding=ROUND_CEILING))
        # Decimal division rounds at 28 digits: the crossing can land just above a whole number
        # that already reaches the target (1000 vs 990 bytes on CloudFront, $10: 13421772800).
        while whole - 1 >= start and saving(Decimal(whole - 1)) >= target:
            whole -= 1
        if saving(Decimal(whole)) >= target:
            return whole
        start = Decimal(whole)  # the saving fell again before the next whole download
    return None


def _first_reach(
    f: Callable[[Decimal], Decimal], kinks: list[Decimal], start: Decimal, target: Decimal, final_slope: Decimal
) -> Decimal | None:
    """First x >= start with f(x) >= target, for f linear between kinks (and with final_slope after the last)."""
    x0, y0 = start, f(start)
    if y0 >= target:
        return x0
    for x1 in (k for k in kinks if k > start):
        y1 = f(x1)
        if y1 >= target:
            return x0 + (target - y0) * (x1 - x0) / (y1 - y0)
        x0, y0 = x1, y1
    if final_slope <= 0:
        return None
    return x0 + (target - y0) / final_slope



# ---------------------------------------------------------------- a comparison's variants


@dataclass(frozen=True)
class PricingChoice:
    """The pricing a report is made for: a provider, downloads a month, delivery and monthly growth."""

    provider: Provider
    downloads_per_month: Decimal
    delivery: str = "brotli"
    growth: Decimal = Decimal(0)
    months: int = MONTHS_PER_YEAR

    def __post_init__(self) -> None:
        object.__setattr__(self, "downloads_per_month", _downloads(self.downloads_per_month))
        object.__setattr__(self, "growth", _growth(self.growth))
        object.__setattr__(self, "months", _months(self.months))
        _delivery(self.delivery)

    def describe(self) -> str:
        growth = f", growing {format_percent(self.growth)} a month" if self.growth else ""
        return (
            f"{format_count(self.downloads_per_month)} downloads a month{growth}, served {self.delivery}, "
            f"{self.provider.name} ({self.provider.describe_tiers()})"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider.as_dict(),
            "downloads_per_month": float(self.downloads_per_month),
            "delivery": self.delivery,
            "growth_per_month": float(self.growth),
            "months": self.months,
            "currency": self.provider.currency,
            "unit": UNIT,
        }


@dataclass(frozen=True)
class VariantCost:
    """Cost of serving one result of a comparison, and its saving against the original."""

    key: str
    is_original: bool
    delivery: str
    bytes_served: int | None  # None: the variant has no measured size (it failed)
    estimate: CostEstimate | None
    saving: Saving | None  # None for the original and for results without a size

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"key": self.key, "is_original": self.is_original, "bytes_served": self.bytes_served}
        data |= self.estimate.as_dict() if self.estimate else {"cost_per_month": None, "cost_per_year": None}
        data |= self.saving.as_dict() if self.saving else {"saving_per_month": None, "saving_per_year": None}
        return data


def estimates_for_comparison(
    comparison: Comparison,
    downloads_per_month: Any,
    provider: Provider,
    delivery: str = "brotli",
    growth: Any = 0.0,
    months: int = MONTHS_PER_YEAR,
) -> list[VariantCost]:
    """One :class:`VariantCost` per result (original first), for the report and the app."""
    _delivery(delivery)
    original = comparison.original
    base = None
    if original.sizes is not None:
        base = cost_for(original.sizes.get(delivery), downloads_per_month, provider, months, growth)
    costs = []
    for result in comparison.all:
        is_original = result is original
        served = result.sizes.get(delivery) if result.sizes is not None else None
        estimate = base if is_original else None
        if served is not None and not is_original:
            estimate = cost_for(served, downloads_per_month, provider, months, growth)
        saving = _saving(base, estimate) if base is not None and estimate is not None and not is_original else None
        costs.append(VariantCost(result.key, is_original, delivery, served, estimate, saving))
    return costs


def comparison_costs(comparison: Comparison, choice: PricingChoice) -> list[VariantCost]:
    return estimates_for_comparison(
        comparison, choice.downloads_per_month, choice.provider, choice.delivery, choice.growth, choice.months
    )



# ---------------------------------------------------------------- report pieces (text, Markdown, CSV, JSON)

DASH = "—"


def cost_table(choice: PricingChoice, costs: list[VariantCost]) -> tuple[list[str], list[list[str]]]:
    """Header and display rows (original first) for the terminal and Markdown reports."""
    cur = choice.provider.currency
    header = [
        "Variant", f"Served ({choice.delivery})", "GiB/month", "Cost/month", "Cost/year", "Per 1M downloads",
        "Saving/month", "Saving/year",
    ]  # fmt: skip
    rows = []
    for vc in costs:
        est, sav = vc.estimate, vc.saving
        rows.append(
            [
                vc.key,
                DASH if vc.bytes_served is None else format_size(vc.bytes_served),
                DASH if est is None else format_gib(est.gib_per_month),
                DASH if est is None else format_money(est.monthly, cur),
                DASH if est is None else format_money(est.yearly, cur),
                DASH
                if est is None or est.per_million_downloads is None
                else format_money(est.per_million_downloads, cur),
                DASH if sav is None else format_money(sav.per_month, cur),
                DASH if sav is None else format_money(sav.per_year, cur),
            ]
        )
    return header, rows


def cost_notes(choice: PricingChoice) -> list[str]:
    """The sentences every cost table is shown with: assumptions, unit and source."""
    year = "Per year = 12 months" + (" with that growth; Cost/month is the first month" if choice.growth else "")
    return [
        f"Download cost: {choice.describe()}. {year}.",
        choice.provider.source_line() + " Egress only: no storage, request or tax; prices change.",
    ]


def cost_csv_columns(choice: PricingChoice) -> list[str]:
    cur = choice.provider.currency.lower()
    return [
        "cost_provider", "cost_delivery", "cost_downloads_per_month", "cost_growth_per_month", "cost_bytes_served",
        "cost_gib_per_month", f"cost_per_month_{cur}", f"cost_per_year_{cur}", f"cost_per_million_downloads_{cur}",
        f"saving_per_month_{cur}", f"saving_per_year_{cur}", f"saving_per_million_downloads_{cur}",
    ]  # fmt: skip


def cost_csv_values(choice: PricingChoice, vc: VariantCost) -> dict[str, Any]:
    """One row's cost cells, unrounded (floats), keyed like :func:`cost_csv_columns`."""
    est, sav = vc.estimate, vc.saving
    values = [
        choice.provider.id, choice.delivery, float(choice.downloads_per_month), float(choice.growth),
        vc.bytes_served,
        None if est is None else float(est.gib_per_month),
        None if est is None else float(est.monthly),
        None if est is None else float(est.yearly),
        None if est is None else _float(est.per_million_downloads),
        None if sav is None else float(sav.per_month),
        None if sav is None else float(sav.per_year),
        None if sav is None else _float(sav.per_million_downloads),
    ]  # fmt: skip
    return dict(zip(cost_csv_columns(choice), values, strict=True))


def cost_json(choice: PricingChoice, costs: list[VariantCost]) -> dict[str, Any]:
    return choice.as_dict() | {"variants": [vc.as_dict() for vc in costs]}


@_exact
def cost_curve(sizes: dict[str, int], provider: Provider, downloads: Sequence[Any]) -> dict[str, list[float]]:
    """Monthly cost of each file at each downloads-per-month value (for the cost-vs-downloads chart)."""
    curves: dict[str, list[float]] = {}
    for label, size in sizes.items():
        per = Decimal(_positive_bytes(size, f"Size of {label}")) / GIB
        curves[label] = [float(monthly_cost(per * _non_negative(d, "Downloads"), provider)) for d in downloads]
    return curves


def log_downloads_grid(low: int = 100, high: int = 10**9, points_per_decade: int = 12) -> list[int]:
    """Download counts evenly spaced on a log axis."""
    decades = math.log10(high) - math.log10(low)
    count = max(2, round(decades * points_per_decade) + 1)
    return sorted({round(low * (high / low) ** (i / (count - 1))) for i in range(count)})

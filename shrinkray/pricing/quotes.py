"""``shrinkray price``: a quote of what one or more file sizes cost to serve, as rows and text."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shrinkray.errors import OptionError
from shrinkray.pricing.costs import DASH, CostEstimate, Saving, _float, _saving, break_even_downloads, cost_for
from shrinkray.pricing.numbers import (
    CUSTOM,
    GIB,
    UNIT,
    UNIT_NOTE,
    _delivery,
    _money,
    format_count,
    format_gib,
    format_money,
    format_percent,
)
from shrinkray.pricing.providers import Provider, default_provider_id, load_providers
from shrinkray.units import text_table

if TYPE_CHECKING:
    pass


# ---------------------------------------------------------------- `shrinkray price`


@dataclass(frozen=True)
class PriceRow:
    label: str
    estimate: CostEstimate
    saving: Saving | None  # against the first row
    break_even: int | None = None  # downloads a month for the target saving against the first row


@dataclass(frozen=True)
class PriceQuote:
    """The cost of several sizes under one provider; the first size is the one the others are compared to."""

    provider: Provider
    downloads_per_month: Decimal
    growth: Decimal
    delivery: str
    rows: tuple[PriceRow, ...]
    target_saving: Decimal | None = None

    def table(self) -> tuple[list[str], list[list[str]]]:
        cur = self.provider.currency
        several = len(self.rows) > 1
        header = ["Size", "GiB/month", "Cost/month", "Cost/year", "Per 1M downloads"]
        if several:
            header += ["Saving/month", "Saving/year", "Saving"]
        if self.target_saving is not None and several:
            header.append(f"Saves {format_money(self.target_saving, cur)}/month at")
        rows = []
        for index, row in enumerate(self.rows):
            est, sav = row.estimate, row.saving
            cells = [
                row.label,
                format_gib(est.gib_per_month),
                format_money(est.monthly, cur),
                format_money(est.yearly, cur),
                DASH if est.per_million_downloads is None else format_money(est.per_million_downloads, cur),
            ]
            if several:
                first = index == 0
                cells += [
                    DASH if first or sav is None else format_money(sav.per_month, cur),
                    DASH if first or sav is None else format_money(sav.per_year, cur),
                    DASH if first or sav is None or sav.share is None else format_percent(sav.share),
                ]
            if self.target_saving is not None and several:
                cells.append(
                    DASH if index == 0 else ("never" if row.break_even is None else f"{row.break_even:,} downloads")
                )
            rows.append(cells)
        return header, rows

    def to_text(self) -> str:
        growth = f", growing {format_percent(self.growth)} a month" if self.growth else ""
        header, rows = self.table()
        lines = [
            (
                f"{format_count(self.downloads_per_month)} downloads a month{growth}, served {self.delivery}; "
                f"{self.provider.name}: {self.provider.describe_tiers()}."
            ),
            "",
            *text_table([header, *rows], indent="  ", right_from=1),
            "",
            (
                "Cost/month is the first month; per year = 12 months with that growth"
                if self.growth
                else "Per year = 12 months"
            )
            + "; per 1M downloads = the average cost at the first month's volume.",
            self.provider.source_line(),
        ]
        if self.provider.notes and not self.provider.is_custom:
            lines.append("Note: " + self.provider.notes)
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        rows = []
        for row in self.rows:
            item: dict[str, Any] = {"label": row.label} | row.estimate.as_dict()
            item |= row.saving.as_dict() if row.saving is not None else {}
            if self.target_saving is not None and row.saving is not None:
                item["break_even_downloads_per_month"] = row.break_even
            rows.append(item)
        return {
            "unit": UNIT,
            "bytes_per_unit": GIB,
            "currency": self.provider.currency,
            "provider": self.provider.as_dict(),
            "downloads_per_month": float(self.downloads_per_month),
            "growth_per_month": float(self.growth),
            "delivery": self.delivery,
            "target_saving_per_month": _float(self.target_saving),
            "rows": rows,
        }


def quote(
    sizes: Iterable[tuple[str, int]],
    downloads_per_month: Any,
    provider: Provider,
    delivery: str = "raw",
    growth: Any = 0.0,
    target_saving: Any = None,
) -> PriceQuote:
    """Cost of each (label, bytes served) and the saving of each against the first."""
    items = list(sizes)
    if not items:
        raise OptionError("No sizes to price", "Give --size BYTES or a file")
    target = None if target_saving is None else _money(target_saving)
    first = cost_for(items[0][1], downloads_per_month, provider, growth=growth)
    rows = []
    for index, (label, size) in enumerate(items):
        estimate = first if index == 0 else cost_for(size, downloads_per_month, provider, growth=growth)
        saving = None if index == 0 else _saving(first, estimate)
        even = None
        if target is not None and index > 0:
            even = break_even_downloads(items[0][1], size, provider, target)
        rows.append(PriceRow(label, estimate, saving, even))
    return PriceQuote(provider, first.downloads_per_month, first.growth, _delivery(delivery), tuple(rows), target)


def providers_text(path: str | Path | None = None) -> str:
    """Every preset with its tiers, source and the date it was checked (``shrinkray price --list-providers``)."""
    default = default_provider_id(path)
    lines = [f"Egress prices per {UNIT_NOTE}. Prices change; check the source before budgeting.", ""]
    for p in load_providers(path).values():
        lines += [
            f"{p.id}{' (default)' if p.id == default else ''}: {p.name}, {p.scope}",
            f"    {p.describe_tiers()}",
            f"    source: {p.source_url} (checked {p.checked})",
            f"    {p.notes}",
            "",
        ]
    lines.append(f"{CUSTOM}: a flat price you give: --price-per-gb 0.12 [--free-gib 100]")
    return "\n".join(lines)

"""Download cost: what serving a model file costs in internet egress, and what a smaller file saves.

Egress is billed per GiB (2**30 bytes) of data served in a calendar month, at
tiered prices that fall as the month's volume grows, often after a free
allowance. So for one file::

    GiB per month  = bytes served per download * downloads per month / 2**30
    cost per month = the tiered price applied to that month's GiB (free allowance first)
    cost per year  = the sum of 12 months (downloads may grow by a fixed rate each month)

Bytes served depend on how the file is delivered: raw, gzip or brotli (the
sizes :mod:`shrinkray.measure.sizes` measured). Provider prices are data, in
``shrinkray/data/cdn_prices.toml``, each with its source page and the date it
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

import dataclasses
import functools
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal, InvalidOperation, localcontext
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shrinkray.errors import OptionError
from shrinkray.units import format_bytes, text_table

if TYPE_CHECKING:
    from shrinkray.results import Comparison

#: Bytes in the unit every provider bills egress by.
GIB = 2**30
UNIT = "GiB"
UNIT_NOTE = "GiB = 2^30 bytes, the unit providers bill egress by"
#: Id of the flat price the user gives (``--price-per-gb``); never a preset in the data file.
CUSTOM = "custom"
#: How a file can be served; the bytes of each are measured by ``shrinkray.measure.sizes``.
DELIVERIES = ("raw", "gzip", "brotli")
MONTHS_PER_YEAR = 12
MILLION = Decimal(1_000_000)
_DATA = "data/cdn_prices.toml"
_PRECISION = 60  # bytes * downloads / 2**30 is an exact decimal of up to ~45 digits


def _exact(fn: Callable) -> Callable:
    """Run with enough decimal digits that byte and GiB arithmetic is exact."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with localcontext() as ctx:
            ctx.prec = _PRECISION
            return fn(*args, **kwargs)

    return wrapper


# ---------------------------------------------------------------- numbers in, checked


def _number(value: Any, what: str) -> Decimal:
    """A finite Decimal from an int, float, Decimal or numeric string (``_`` allowed as a separator)."""
    if isinstance(value, bool) or value is None:
        raise OptionError(f"{what} must be a number, not {value!r}", "e.g. 100000")
    try:
        if isinstance(value, Decimal):
            number = value
        elif isinstance(value, int):
            number = Decimal(value)
        elif isinstance(value, float):
            number = Decimal(repr(value))  # 0.12 stays 0.12, not 0.11999999999999999555910790149937
        elif isinstance(value, str):
            number = Decimal(value.strip().replace("_", ""))
        else:
            raise InvalidOperation
    except (InvalidOperation, ValueError):
        raise OptionError(f"{what} must be a number, not {value!r}", "e.g. 100000") from None
    if not number.is_finite():
        raise OptionError(f"{what} must be a finite number, not {value!r}", "e.g. 100000")
    return number


#: Bounds of every pricing input, the same for the CLI flags, the app's controls and its link parameters.
#: Far beyond real use, and small enough that every result (at most ~1e146 a month, at 1 PiB x 10^12
#: downloads x 1000% growth for 120 months x 1000 a GiB) is a finite float for JSON and charts.
MAX_DOWNLOADS = Decimal(10**12)  # a month
MAX_SIZE_BYTES = 2**50  # 1 PiB served per download
MAX_PRICE_PER_GIB = Decimal(1000)
MAX_FREE_GIB = Decimal(10**9)  # a month
MAX_TIER_GIB = Decimal(10**12)
MAX_MONEY = Decimal(10**12)  # a target saving a month
MAX_GROWTH = Decimal(10)  # +1000% a month
MIN_GROWTH = Decimal("-0.99")  # -99% a month (-100% would mean no downloads at all after the first month)
_GROWTH_RANGE = f"{(MIN_GROWTH * 100).normalize():f}% to {(MAX_GROWTH * 100).normalize():f}%"
MAX_MONTHS = 120
#: Decimal places a price, growth rate, allowance or download count may have (1e-400 is refused, not
#: printed with 400 digits).
MAX_PLACES = 6


def _shown(value: Any) -> str:
    text = str(value).strip()
    return text if len(text) <= 40 else text[:39] + "…"


def _bounded(number: Decimal, what: str, high: Decimal | int, example: str, *, raw: Any = None) -> Decimal:
    """``number`` unless it is above ``high`` or has more than MAX_PLACES decimal places."""
    if number > high:
        raise OptionError(
            f"{what} must be at most {Decimal(high):,}, not {_shown(number if raw is None else raw)}",
            f"Give a smaller value, e.g. {example}",
        )
    sign, digits, exponent = number.as_tuple()  # no context arithmetic: 1e-9999999999 must not round to 0
    trailing = len(digits) - len("".join(map(str, digits)).rstrip("0")) if any(digits) else 0
    if isinstance(exponent, int) and any(digits) and exponent + trailing < -MAX_PLACES:
        raise OptionError(
            f"{what} has more than {MAX_PLACES} decimal places ({_shown(number if raw is None else raw)})",
            f"Round it, e.g. {example}",
        )
    return number


def _non_negative(value: Any, what: str, example: str = "100000") -> Decimal:
    number = _number(value, what)
    if number < 0:
        raise OptionError(f"{what} cannot be negative ({_shown(value)})", f"Give 0 or more, e.g. {example}")
    return number


def _downloads(value: Any, what: str = "Downloads per month", raw: Any = None) -> Decimal:
    number = _bounded(_non_negative(value, what), what, MAX_DOWNLOADS, "100000", raw=value if raw is None else raw)
    if number != number.to_integral_value():
        raise OptionError(f"{what} must be a whole number, not {_shown(value if raw is None else raw)}", "e.g. 100000")
    return number


def _price(value: Any, what: str = "Price per GiB") -> Decimal:
    return _bounded(_non_negative(value, what, "0.12"), what, MAX_PRICE_PER_GIB, "0.12", raw=value)


def _free_gib(value: Any, what: str = "Free GiB per month") -> Decimal:
    return _bounded(_non_negative(value, what, "100"), what, MAX_FREE_GIB, "100", raw=value)


def _tier_end(value: Any, what: str = "Tier end") -> Decimal:
    return _bounded(_non_negative(value, what, "10240"), what, MAX_TIER_GIB, "10240", raw=value)


def _money(value: Any, what: str = "Target saving per month") -> Decimal:
    return _bounded(_non_negative(value, what, "100"), what, MAX_MONEY, "100", raw=value)


def _positive_bytes(value: Any, what: str = "Size") -> int:
    number = _number(value, what)
    if number <= 0:
        raise OptionError(
            f"{what} must be more than 0 bytes, not {_shown(value)}", "Give the file size, e.g. 52428800 or 50MiB"
        )
    if number > MAX_SIZE_BYTES:
        raise OptionError(
            f"{what} must be at most {MAX_SIZE_BYTES:,} bytes (1 PiB), not {_shown(value)}",
            "Give the size of the file served, e.g. 52428800 or 50MiB",
        )
    if number != number.to_integral_value():
        raise OptionError(f"{what} must be a whole number of bytes, not {_shown(value)}", "e.g. 52428800 or 50MiB")
    return int(number)


def _growth(value: Any, raw: Any = None) -> Decimal:
    growth = _number(value, "Monthly growth")
    if growth <= -1:
        raise OptionError(
            f"Monthly growth must be more than -100%, not {growth * 100:g}%", "e.g. 0.05 (5% more downloads a month)"
        )
    if growth > MAX_GROWTH or growth < MIN_GROWTH:
        raise OptionError(
            f"Monthly growth must be from {_GROWTH_RANGE}, not {growth * 100:g}%",
            "e.g. 0.05 (5% more downloads a month)",
        )
    return _bounded(growth, "Monthly growth", MAX_GROWTH, "0.05", raw=value if raw is None else raw)


def _months(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_MONTHS:
        raise OptionError(f"Months must be a whole number from 1 to {MAX_MONTHS}, not {value!r}", "e.g. 12")
    return value


def _delivery(value: str) -> str:
    if value not in DELIVERIES:
        raise OptionError(f"Unknown delivery '{value}'", "Use raw, gzip or brotli")
    return value


@_exact
def gib(size_bytes: Any) -> Decimal:
    """Bytes as GiB (bytes / 2**30), exactly."""
    return _non_negative(size_bytes, "Bytes") / GIB


# ---------------------------------------------------------------- providers


@dataclass(frozen=True)
class Tier:
    """A price band: GiB served in the month up to ``up_to_gib`` (cumulative; None = no end)."""

    up_to_gib: Decimal | None
    price_per_gib: Decimal


@dataclass(frozen=True)
class Provider:
    """One price list for internet egress; prices per GiB (2**30 bytes) in ``currency``."""

    id: str
    name: str
    tiers: tuple[Tier, ...]
    free_gib_per_month: Decimal = Decimal(0)
    currency: str = "USD"
    unit: str = UNIT
    scope: str = ""
    source_url: str = ""
    checked: str = ""
    notes: str = ""
    aliases: tuple[str, ...] = ()

    @property
    def zero_egress(self) -> bool:
        return all(t.price_per_gib == 0 for t in self.tiers)

    @property
    def is_custom(self) -> bool:
        return self.id == CUSTOM

    def price_at(self, gib_in_month: Any) -> Decimal:
        """Marginal price of the next GiB once ``gib_in_month`` GiB were served this month."""
        used = _non_negative(gib_in_month, "GiB served")
        if used < self.free_gib_per_month:
            return Decimal(0)
        for tier in self.tiers:
            if tier.up_to_gib is None or used < tier.up_to_gib:
                return tier.price_per_gib
        return self.tiers[-1].price_per_gib

    def describe_tiers(self) -> str:
        """One line, e.g. ``first 100 GiB free; to 10,240 GiB $0.09; ...; above $0.05 per GiB``."""
        parts = [f"first {format_gib(self.free_gib_per_month)} GiB free"] if self.free_gib_per_month else []
        lower = Decimal(0)
        for tier in self.tiers:
            price = format_price(tier.price_per_gib, self.currency)
            if tier.up_to_gib is None:
                parts.append(f"above {format_gib(lower)} GiB {price}" if lower else f"{price} flat")
            else:
                parts.append(f"to {format_gib(tier.up_to_gib)} GiB {price}")
                lower = tier.up_to_gib
        return "; ".join(parts) + f" per {self.unit}"

    def source_line(self) -> str:
        if self.is_custom:
            return f"{self.name}: a price you gave, per {UNIT_NOTE}."
        return f"Prices: {self.name}, {self.scope}; {self.source_url} (checked {self.checked}); {UNIT_NOTE}."

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "scope": self.scope,
            "currency": self.currency,
            "unit": self.unit,
            "bytes_per_unit": GIB,
            "source_url": self.source_url,
            "checked": self.checked,
            "free_gib_per_month": float(self.free_gib_per_month),
            "tiers": [
                {
                    "up_to_gib": None if t.up_to_gib is None else float(t.up_to_gib),
                    "price_per_gib": float(t.price_per_gib),
                }
                for t in self.tiers
            ],
            "notes": self.notes,
        }


def _check_tiers(tiers: Sequence[Tier], where: str) -> tuple[Tier, ...]:
    if not tiers:
        raise OptionError(f"{where}: no price tiers", "Give at least one tier with price_per_gib")
    lower = Decimal(0)
    for index, tier in enumerate(tiers):
        last = index == len(tiers) - 1
        if tier.price_per_gib < 0:
            raise OptionError(f"{where}: tier {index + 1} has a negative price", "Prices are 0 or more per GiB")
        if last and tier.up_to_gib is not None:
            raise OptionError(f"{where}: the last tier must have no up_to_gib", "Leave it open-ended")
        if not last and (tier.up_to_gib is None or tier.up_to_gib <= lower):
            raise OptionError(
                f"{where}: tier {index + 1} must end above {format_gib(lower)} GiB",
                "Give increasing up_to_gib values and leave only the last tier open-ended",
            )
        lower = tier.up_to_gib if tier.up_to_gib is not None else lower
    return tuple(tiers)


def _provider_from_toml(pid: str, raw: Any, where: str) -> Provider:
    place = f"{where}: provider '{pid}'"
    if not isinstance(raw, dict):
        raise OptionError(f"{place} is not a table", "Write it as [providers.NAME]")
    missing = [k for k in ("name", "currency", "unit", "source_url", "checked", "tiers") if k not in raw]
    if missing:
        raise OptionError(f"{place} lacks {', '.join(missing)}", "Every provider needs a source and a date")
    if raw["unit"] != UNIT:
        raise OptionError(f"{place} bills per '{raw['unit']}'", f"Give prices per {UNIT} (2^30 bytes)")
    if not isinstance(raw["tiers"], list) or not all(isinstance(t, dict) for t in raw["tiers"]):
        raise OptionError(f"{place}: tiers must be a list of tables", "e.g. [{ price_per_gib = 0.12 }]")
    tiers = [
        Tier(
            up_to_gib=None if t.get("up_to_gib") is None else _tier_end(t["up_to_gib"], f"{place} up_to_gib"),
            price_per_gib=_price(t.get("price_per_gib"), f"{place} price_per_gib"),
        )
        for t in raw["tiers"]
    ]
    return Provider(
        id=pid,
        name=str(raw["name"]),
        scope=str(raw.get("scope", "")),
        currency=str(raw["currency"]),
        unit=UNIT,
        source_url=str(raw["source_url"]),
        checked=str(raw["checked"]),
        free_gib_per_month=_free_gib(raw.get("free_gib_per_month", 0), f"{place} free_gib_per_month"),
        tiers=_check_tiers(tiers, place),
        notes=" ".join(str(raw.get("notes", "")).split()),
        aliases=tuple(str(a).lower() for a in raw.get("aliases", [])),
    )


def _toml_loads(text: str, where: str) -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise OptionError(
                "Reading price lists needs Python 3.11+ or the tomli package", "pip install tomli"
            ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise OptionError(f"{where} is not valid TOML: {exc}", "Fix the file") from None


@functools.lru_cache(maxsize=8)
def _load(path: str | None) -> tuple[str, tuple[Provider, ...]]:
    if path is None:
        where = f"shrinkray/{_DATA}"
        text = resources.files("shrinkray").joinpath(_DATA).read_text(encoding="utf-8")
    else:
        where = path
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise OptionError(f"Cannot read the price list {path}: {exc.strerror or exc}", "Check the path") from None
    data = _toml_loads(text, where)
    table = data.get("providers")
    if not isinstance(table, dict) or not table:
        raise OptionError(f"{where} has no [providers.NAME] tables", "See shrinkray/data/cdn_prices.toml")
    providers = tuple(_provider_from_toml(str(pid).lower(), raw, where) for pid, raw in table.items())
    if any(p.id == CUSTOM for p in providers):
        raise OptionError(f"{where}: '{CUSTOM}' is reserved for a flat price you give", "Rename that provider")
    default = str(data.get("default", providers[0].id)).lower()
    if default not in {p.id for p in providers}:
        raise OptionError(f"{where}: default '{default}' is not one of its providers", "Fix the default key")
    return default, providers


def load_providers(path: str | Path | None = None) -> dict[str, Provider]:
    """Provider presets by id, in file order: the packaged list, or a TOML file in the same format."""
    return {p.id: p for p in _load(None if path is None else str(path))[1]}


def default_provider_id(path: str | Path | None = None) -> str:
    return _load(None if path is None else str(path))[0]


@_exact
def custom_provider(price_per_gib: Any, free_gib: Any = 0, currency: str = "USD") -> Provider:
    """A flat price per GiB (2**30 bytes), optionally after a free allowance each month."""
    price = _price(price_per_gib)
    free = _free_gib(free_gib)
    return Provider(
        id=CUSTOM,
        name=f"Custom flat price {format_price(price, currency)} per {UNIT}",
        tiers=(Tier(None, price),),
        free_gib_per_month=free,
        currency=currency,
        scope="a flat price you gave" + (f", first {format_gib(free)} GiB a month free" if free else ""),
        notes="A flat price per GiB that you gave; no provider data is used.",
    )


def get_provider(name: str | None = None, path: str | Path | None = None) -> Provider:
    """A preset by id or alias (case-insensitive); None gives the default (Google Cloud Storage)."""
    providers = load_providers(path)
    if name is None:
        return providers[default_provider_id(path)]
    key = name.strip().lower()
    for provider in providers.values():
        if key == provider.id or key in provider.aliases:
            return provider
    if key == CUSTOM:
        raise OptionError("The custom provider needs a price", "Give --price-per-gb, e.g. --price-per-gb 0.12")
    raise OptionError(
        f"Unknown provider '{name}'",
        f"Use one of {', '.join(providers)}, or give a flat price with --price-per-gb (see --list-providers)",
    )


def resolve_provider(
    name: str | None = None,
    price_per_gib: Any = None,
    free_gib: Any = None,
    path: str | Path | None = None,
) -> Provider:
    """What the CLI and the app offer: a preset by name, or a flat price (``--price-per-gb``), not both."""
    if price_per_gib is not None:
        if name is not None and name.strip().lower() != CUSTOM:
            raise OptionError(
                f"Both --provider {name} and --price-per-gb were given",
                "Give one: a preset (--provider), or a flat price (--price-per-gb)",
            )
        return custom_provider(price_per_gib, free_gib if free_gib is not None else 0)
    if free_gib is not None:
        raise OptionError("--free-gib only applies to a flat price", "Add --price-per-gb, or drop --free-gib")
    return get_provider(name, path)


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


# ---------------------------------------------------------------- parsing and showing


_SIZE = re.compile(r"^([0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?\s*([a-zA-Z]*)$")
#: Size units: decimal (kB, MB, GB, TB = powers of 1000) and binary (KiB, MiB, GiB, TiB = powers of 1024).
SIZE_UNITS = {
    "": 1, "b": 1, "byte": 1, "bytes": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}  # fmt: skip


@_exact
def parse_size(text: str) -> int:
    """Bytes from ``52428800``, ``52_428_800``, ``50MiB``, ``1.5GB`` (GB = 10^9, GiB = 2^30), rounded to a byte."""
    match = _SIZE.match(str(text).strip())
    unit = match.group(3).lower() if match else ""
    if not match or unit not in SIZE_UNITS:
        raise OptionError(
            f"'{text}' is not a size",
            "Give bytes or a number with a unit: 52428800, 50MiB, 1.5GB (kB/MB/GB/TB = 1000^n, KiB/MiB/GiB/TiB = 1024^n)",
        )
    exponent = int(match.group(2) or 0)
    if exponent > 30:
        raise OptionError(f"Size '{_shown(text)}' is more than {MAX_SIZE_BYTES:,} bytes (1 PiB)", "e.g. 50MiB")
    number = Decimal(match.group(1).replace("_", "")).scaleb(max(exponent, -60))
    size = (number * SIZE_UNITS[unit]).to_integral_value(rounding=ROUND_HALF_UP)
    if size <= 0:
        raise OptionError(f"Size '{_shown(text)}' is 0 bytes", "Give the size of the file served, e.g. 50MiB")
    if size > MAX_SIZE_BYTES:
        raise OptionError(f"Size '{_shown(text)}' is more than {MAX_SIZE_BYTES:,} bytes (1 PiB)", "e.g. 50MiB")
    return int(size)


def parse_sizes(text: str) -> list[int]:
    """A comma-separated list of sizes (see :func:`parse_size`)."""
    items = [t for t in (part.strip() for part in str(text).split(",")) if t]
    if not items:
        raise OptionError("--size is empty", "e.g. --size 52428800 or --size 50MiB,13MiB")
    return [parse_size(item) for item in items]


def parse_downloads(text: str) -> Decimal:
    """Downloads per month: ``100000``, ``100_000``, ``100,000`` or ``1e5``; 0 or more."""
    raw = str(text).strip()
    if re.fullmatch(r"[0-9]{1,3}(,[0-9]{3})+", raw):
        raw = raw.replace(",", "")
    try:
        value = Decimal(raw.replace("_", ""))
    except InvalidOperation:
        raise OptionError(f"Downloads per month must be a number, not '{_shown(text)}'", "e.g. 100000 or 1e5") from None
    if not value.is_finite():
        raise OptionError(f"Downloads per month must be a finite number, not '{_shown(text)}'", "e.g. 100000")
    if value < 0:
        raise OptionError(f"Downloads per month cannot be negative ({_shown(text)})", "Give 0 or more, e.g. 100000")
    return _downloads(value, "Downloads per month", raw=text)


def parse_growth(text: str) -> Decimal:
    """Monthly growth, always in percent: ``5`` and ``5%`` both mean 5% a month (``0.05`` is 0.05%).

    One rule for every front end: the app's "Growth per month (%)" field, its links and the CLI's
    ``--growth`` all read a bare number as a percentage. Returns the rate as a fraction (5% -> 0.05).
    """
    raw = str(text).strip()
    number = raw.removesuffix("%").strip()
    try:
        value = Decimal(number)
    except InvalidOperation:
        raise OptionError(
            f"Monthly growth must be a percentage such as 5 or 5%, not '{_shown(text)}'", "e.g. 5 (for 5% a month)"
        ) from None
    if not value.is_finite():
        raise OptionError(f"Monthly growth must be a finite percentage, not '{_shown(text)}'", "e.g. 5%")
    # out-of-range values are refused before dividing, which would round what was typed
    if value > MAX_GROWTH * 100:
        raise OptionError(f"Monthly growth must be from {_GROWTH_RANGE}, not {_shown(number)}%", "e.g. 5%")
    if value <= -100:
        raise OptionError(f"Monthly growth must be more than -100%, not {_shown(number)}%", "e.g. 5%")
    exponent = value.normalize().as_tuple().exponent
    if isinstance(exponent, int) and exponent < -(MAX_PLACES - 2):
        raise OptionError(
            f"Monthly growth has more than {MAX_PLACES - 2} decimal places of a percent ({_shown(raw)})", "e.g. 5.25"
        )
    return _growth(value / 100, raw=raw)


def format_growth(rate: Decimal | float) -> str:
    """A growth rate (fraction) as the percentage :func:`parse_growth` reads back: 0.05 -> ``5``."""
    text = f"{(Decimal(str(rate)) * 100).normalize():f}"
    return "0" if text in ("-0", "") else text


def parse_price(text: str) -> Decimal:
    """A price per GiB: 0 to MAX_PRICE_PER_GIB, at most MAX_PLACES decimals (``0.12``, ``$0.085``)."""
    return _price(str(text).strip().lstrip("$").strip())


def parse_free_gib(text: str) -> Decimal:
    """A free allowance in GiB a month: 0 to MAX_FREE_GIB."""
    return _free_gib(str(text).strip())


def parse_currency_symbol(text: str) -> str:
    """A currency label of 1 to 4 printable characters (only the label changes, never the prices)."""
    value = str(text).strip()
    if not 1 <= len(value) <= 4 or not value.isprintable():
        raise OptionError(f"A currency symbol is 1 to 4 printable characters, not {len(value)}", "e.g. $ or €")
    return value


def parse_money(text: str, flag: str = "--break-even") -> Decimal:
    raw = str(text).strip().lstrip("$").replace("_", "")
    try:
        value = Decimal(raw)
    except InvalidOperation:
        raise OptionError(f"{flag} takes an amount of money, not '{_shown(text)}'", f"e.g. {flag} 100") from None
    if not value.is_finite() or value < 0:
        raise OptionError(f"{flag} must be 0 or more, not '{_shown(text)}'", f"e.g. {flag} 100")
    return _money(value, flag)


def format_money(amount: Decimal, currency: str = "USD") -> str:
    """Rounded half up to cents: ``$585.94``, ``-$3.10``; amounts under a cent show as ``<$0.01``."""
    sign = "-" if amount < 0 else ""
    magnitude = abs(amount)
    symbol = "$" if currency == "USD" else ""
    suffix = "" if symbol else f" {currency}"
    if 0 < magnitude < Decimal("0.005"):
        return f"{sign}<{symbol}0.01{suffix}"
    cents = magnitude.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return f"{sign}{symbol}{cents:,.2f}{suffix}"


def format_price(price: Decimal, currency: str = "USD") -> str:
    """A unit price with the digits it has: ``$0.12``, ``$0.085``, ``$0``."""
    text = f"{price.normalize():f}" if price else "0"
    if "." in text and len(text.split(".")[1]) == 1:
        text += "0"
    return f"${text}" if currency == "USD" else f"{text} {currency}"


def format_amount(amount: Decimal | float | int, symbol: str = "$") -> str:
    """Money under a user's currency label (only the label changes, never the number): ``€1,234.50``,
    ``-€3.10``, ``<€0.01``. The app's Pricing page and its links show every amount this way."""
    return format_money(Decimal(str(amount)), "USD").replace("$", symbol, 1)


def format_gib(value: Decimal) -> str:
    """GiB with up to 4 decimals, trailing zeros dropped: ``4,882.8125``, ``1,024``, ``0.0488``."""
    rounded = Decimal(value).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP)
    text = f"{rounded:,.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def format_count(value: Decimal) -> str:
    number = Decimal(value)
    if number == number.to_integral_value():
        return f"{int(number):,}"
    return f"{number:,.2f}"


def format_percent(share: Decimal) -> str:
    return f"{float(share) * 100:.1f}%".replace(".0%", "%")


def format_size(size_bytes: int) -> str:
    """``50.00 MiB (52,428,800 B)``."""
    return f"{format_bytes(size_bytes)} ({size_bytes:,} B)" if size_bytes >= 1024 else f"{size_bytes:,} B"



# ---------------------------------------------------------------- what-if helpers for the app


__all__ = [
    "CUSTOM",
    "DELIVERIES",
    "GIB",
    "UNIT",
    "CostEstimate",
    "PriceQuote",
    "PricingChoice",
    "Provider",
    "Saving",
    "Tier",
    "VariantCost",
    "break_even_downloads",
    "comparison_costs",
    "cost_for",
    "custom_provider",
    "default_provider_id",
    "estimates_for_comparison",
    "format_amount",
    "format_growth",
    "format_money",
    "get_provider",
    "load_providers",
    "monthly_cost",
    "parse_downloads",
    "parse_currency_symbol",
    "parse_free_gib",
    "parse_growth",
    "parse_price",
    "parse_size",
    "parse_sizes",
    "quote",
    "resolve_provider",
    "savings",
]



def with_prices(base: Provider, tiers: Sequence[tuple[Any, Any]], free_gib: Any = 0) -> Provider:
    """A copy of ``base`` with edited prices: ``tiers`` as (up_to_gib or None for the last, price_per_gib)."""
    parsed = [
        Tier(
            None if up in (None, "", "None") or (isinstance(up, float) and math.isnan(up)) else _tier_end(up),
            _price(price),
        )
        for up, price in tiers
    ]
    checked = _check_tiers(parsed, f"Prices for {base.name}")
    free = _free_gib(free_gib)
    return dataclasses.replace(base, tiers=checked, free_gib_per_month=free)


def encode_tiers(provider: Provider) -> str:
    """Tiers as a short, URL-safe text: ``1024:0.12;10240:0.11;:0.08``."""
    parts = []
    for tier in provider.tiers:
        up = "" if tier.up_to_gib is None else f"{tier.up_to_gib.normalize():f}"
        parts.append(f"{up}:{tier.price_per_gib.normalize():f}")
    return ";".join(parts)


def decode_tiers(text: str) -> list[tuple[str | None, str]]:
    """The inverse of :func:`encode_tiers`; raises OptionError on malformed text."""
    tiers: list[tuple[str | None, str]] = []
    for part in str(text).split(";"):
        up, sep, price = part.partition(":")
        if not sep or not price.strip():
            raise OptionError(f"'{part}' is not a price tier", "Write tiers as UP_TO_GIB:PRICE;...;:LAST_PRICE")
        tiers.append((up.strip() or None, price.strip()))
    return tiers


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

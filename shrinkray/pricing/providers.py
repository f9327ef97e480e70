"""Providers and their tiered egress prices: the presets in ``cdn_prices.toml`` (each with its source page
and the date it was checked), a flat custom price, and tiers edited in the app's what-if.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shrinkray.errors import OptionError
from shrinkray.pricing.numbers import (
    _DATA,
    CUSTOM,
    GIB,
    UNIT,
    UNIT_NOTE,
    _exact,
    _free_gib,
    _non_negative,
    _price,
    _shown,
    _tier_end,
    format_gib,
    format_price,
)

if TYPE_CHECKING:
    pass


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
        where = f"shrinkray/pricing/{_DATA}"
        text = resources.files("shrinkray.pricing").joinpath(_DATA).read_text(encoding="utf-8")
    else:
        where = path
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise OptionError(f"Cannot read the price list {path}: {exc.strerror or exc}", "Check the path") from None
    data = _toml_loads(text, where)
    table = data.get("providers")
    if not isinstance(table, dict) or not table:
        raise OptionError(f"{where} has no [providers.NAME] tables", "See shrinkray/pricing/cdn_prices.toml")
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


#: Price tiers one price list may have when edited (the app's table, a link): the presets have at most 7.
MAX_TIERS = 32


def _count_tiers(count: int) -> None:
    if count > MAX_TIERS:
        raise OptionError(f"{count:,} price tiers: at most {MAX_TIERS} are priced", "Merge some tiers")


def with_prices(base: Provider, tiers: Sequence[tuple[Any, Any]], free_gib: Any = 0) -> Provider:
    """A copy of ``base`` with edited prices: ``tiers`` as (up_to_gib or None for the last, price_per_gib)."""
    _count_tiers(len(tiers))
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
    """The inverse of :func:`encode_tiers`; raises OptionError on malformed text or more than MAX_TIERS tiers."""
    tiers: list[tuple[str | None, str]] = []
    parts = str(text).split(";")
    _count_tiers(len(parts))
    for part in parts:
        up, sep, price = part.partition(":")
        if not sep or not price.strip():
            raise OptionError(f"'{_shown(part)}' is not a price tier", "Write tiers as UP_TO_GIB:PRICE;...;:LAST_PRICE")
        tiers.append((up.strip() or None, price.strip()))
    return tiers

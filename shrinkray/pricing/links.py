"""Page addresses that reproduce what a user saw: the Pricing what-if as a compact, versioned query string.

A shared Pricing link must show a colleague the same money, so it carries every input the numbers
depend on: provider (and edited prices), downloads, delivery, growth, currency, and the sizes priced,
either typed or measured (original and every variant, raw/gzip/brotli), plus the run id when the
sizes came from a kept run. :func:`encode_pricing` writes it; :func:`decode_pricing` reads any
address, bounded exactly as the CLI's flags are, and turns every malformed value into a
:class:`LinkProblem` with the default used instead (never an exception), so a page only draws.

Format (``v=1``; a link without ``v`` is read as version 1, the format links had before it)::

    v=1&provider=gcs&downloads=100000&delivery=brotli&growth=5&currency=$
       &sizes=original=1096704/985421/861102,weights-int8=299008/268112/250011&run=Ab3x...

``growth`` is in percent (5 = 5% a month, see :func:`shrinkray.pricing.numbers.parse_growth`); a size is
``LABEL=BYTES`` (the same for every delivery; units such as ``50MiB`` are read too) or
``LABEL=RAW/GZIP/BROTLI``; ``%`` and ``,`` in labels are percent-escaped; ``tiers`` is
:func:`shrinkray.pricing.providers.encode_tiers` text, with ``free`` its free GiB a month; ``price`` the
custom provider's flat price.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlencode

from shrinkray import pricing
from shrinkray.errors import OptionError, ShrinkRayError

if TYPE_CHECKING:
    from shrinkray.measure.results import Comparison

#: The link format written by :func:`encode_pricing`.
LINK_VERSION = "1"
DEFAULT_DOWNLOADS = 100_000
DEFAULT_DELIVERY = "brotli"
DEFAULT_CURRENCY = "$"
DEFAULT_PRICE = Decimal("0.12")
#: What the Pricing page prices before anything is measured or typed.
EXAMPLE_SIZES_TEXT = "original=50MiB,shrunk=13MiB"
_RUN_ID = re.compile(r"[A-Za-z0-9_-]{8,128}")
_MARK = re.compile(r"(recommended|fails parity|parity not measured|parity undecided|[0-9]{1,6}\.[0-9]{2}x slower)")
_SAFE = "/:,;=~!*()$@'"  # kept readable in the address; everything else is percent-encoded

#: Sizes priced: label -> bytes served for each delivery (raw, gzip, brotli).
Sizes = dict[str, dict[str, int]]


@dataclass(frozen=True)
class LinkProblem:
    """One value of a link that was not used: which parameter, what it held, why, and what is shown instead."""

    param: str
    value: str
    problem: str
    fallback: str

    def sentence(self, what: str = "") -> str:
        label = what or self.param
        return f"The link's {label} ({self.param}={_short(self.value)}) was not used: {self.problem} Showing {self.fallback} instead."


@dataclass
class PricingLink:
    """Every input of the Pricing page; the defaults are version 1's."""

    provider: str = field(default_factory=pricing.default_provider_id)
    downloads: int = DEFAULT_DOWNLOADS
    delivery: str = DEFAULT_DELIVERY
    growth: Decimal = Decimal(0)  # a fraction: 0.05 = 5% a month
    currency: str = DEFAULT_CURRENCY
    price: Decimal | None = None  # the custom provider's flat price
    tiers: list[tuple[str | None, str]] | None = None  # edited prices, as decode_tiers gives them
    free: Decimal | None = None  # free GiB a month with edited prices
    sizes: Sizes | None = None
    run: str | None = None
    marks: dict[str, str] | None = None  # label -> its standing ("recommended", "fails parity", "2.70x slower")


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _message(exc: ShrinkRayError) -> str:
    hint = exc.hint
    if hint.startswith("e.g. "):
        hint = "For example " + hint.removeprefix("e.g. ")
    return f"{exc.problem}. {hint}." if hint else f"{exc.problem}."


# ---------------------------------------------------------------- sizes


def _escape_label(label: str) -> str:
    return label.replace("%", "%25").replace(",", "%2C")


#: Files priced at once, at most: a link with 3,000 sizes cost 10 s of server CPU and a minute to draw.
MAX_SIZES = 64
#: Characters of one file's label (a variant's name); a link is written with longer ones cut to this.
MAX_LABEL_CHARS = 200
#: Characters each parameter of a link may hold (after the address's percent-decoding): several times what the
#: page writes (a label's ``%`` and ``,`` are written as three characters each), so every link it writes is read.
MAX_PARAM_CHARS = {
    "v": 8, "provider": 64, "downloads": 64, "delivery": 16, "growth": 64, "currency": 32, "price": 64,
    "free": 64, "run": 128, "tiers": pricing.MAX_TIERS * 64,
    "sizes": MAX_SIZES * (3 * MAX_LABEL_CHARS + 64),  # + RAW/GZIP/BROTLI of up to 16 digits each
    "marks": MAX_SIZES * (3 * MAX_LABEL_CHARS + 128),  # + words such as "recommended+12.34x slower"
}  # fmt: skip


def _check_length(name: str, raw: str, what: str = "It") -> None:
    """An OptionError when a link's ``name`` holds more than its ``MAX_PARAM_CHARS`` (read before anything else)."""
    limit = MAX_PARAM_CHARS[name]
    if len(raw) > limit:
        raise OptionError(f"{what} holds {len(raw):,} characters, more than the {limit:,} a link's {name} may have")


def _label(text: str, fallback: str) -> str:
    """A label read from sizes or marks (percent-escapes undone), at most ``MAX_LABEL_CHARS`` characters."""
    name = unquote(text.strip()) if text.strip() else fallback
    if len(name) > MAX_LABEL_CHARS:
        raise OptionError(f"A label of {len(name):,} characters: at most {MAX_LABEL_CHARS} are read",
                          "Give shorter names")  # fmt: skip
    return name


def _cut_label(label: str) -> str:
    """A label as a link is written with it: cut to ``MAX_LABEL_CHARS`` so that the link reads back."""
    return label if len(label) <= MAX_LABEL_CHARS else label[: MAX_LABEL_CHARS - 1] + "…"


def _size_items(text: str) -> list[str]:
    """The comma-separated items of sizes text, at most ``MAX_SIZES`` of them."""
    items = [part.strip() for part in str(text).split(",") if part.strip()]
    if len(items) > MAX_SIZES:
        raise OptionError(f"{len(items):,} sizes: at most {MAX_SIZES} files are priced at once",
                          "Price fewer files at a time")  # fmt: skip
    return items


def parse_sizes_text(text: str) -> dict[str, int]:
    """``LABEL=SIZE`` items, comma-separated (``original=50MiB, shrunk=13MiB``); an item without a label is
    called ``file N``. Sizes take units (see :func:`shrinkray.pricing.numbers.parse_size`)."""
    sizes: dict[str, int] = {}
    for item in _size_items(text):
        label, sep, size = item.rpartition("=")
        name = _label(label if sep else "", f"file {len(sizes) + 1}")
        try:
            sizes[name] = pricing.parse_size(size if sep else item)
        except OptionError as exc:
            raise OptionError(f"{name}: {exc.problem}", exc.hint) from None
    return sizes


def _parse_sizes_param(text: str) -> Sizes:
    sizes: Sizes = {}
    for item in _size_items(text):
        label, sep, value = item.rpartition("=")
        name = _label(label if sep else "", f"file {len(sizes) + 1}")
        parts = (value if sep else item).split("/")
        if len(parts) not in (1, len(pricing.DELIVERIES)):
            raise OptionError(f"{name}: '{_short(value)}' is not a size", "Give one size, or raw/gzip/brotli sizes")
        try:
            numbers = [pricing.parse_size(p) for p in parts]
        except OptionError as exc:
            raise OptionError(f"{name}: {exc.problem}", exc.hint) from None
        if len(numbers) == 1:
            numbers *= len(pricing.DELIVERIES)
        sizes[name] = dict(zip(pricing.DELIVERIES, numbers, strict=True))
    if not sizes:
        raise OptionError("No sizes", "Give LABEL=SIZE items, e.g. original=50MiB,shrunk=13MiB")
    return sizes


def encode_sizes(sizes: Sizes) -> str:
    """``label=RAW/GZIP/BROTLI`` items (one number when the three are equal), comma-separated."""
    items = []
    for label, per in sizes.items():
        values = [int(per[d]) for d in pricing.DELIVERIES]
        text = size_text(values[0]) if len(set(values)) == 1 else "/".join(map(str, values))
        items.append(f"{_escape_label(_cut_label(label))}={text}")
    return ",".join(items)


def size_text(size: int) -> str:
    """Bytes as typed sizes read them, exactly: ``50MiB`` when whole in a binary unit, else ``52428801``."""
    for unit, factor in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)


def sizes_text(sizes: Mapping[str, int]) -> str:
    """Typed sizes as the Pricing page's text field shows them (what :func:`parse_sizes_text` reads back)."""
    return ",".join(f"{_escape_label(_cut_label(label))}={size_text(size)}" for label, size in sizes.items())


def is_typed(sizes: Sizes) -> bool:
    """True when every file is served with the same bytes whatever the delivery (sizes typed, not measured)."""
    return all(len(set(per.values())) == 1 for per in sizes.values())


def standing_marks(standing: Mapping[str, Any]) -> dict[str, str]:
    """Label -> a variant's standing in words (objects with ``label()``, e.g. ``shrinkray.verdict.advice.Standing``)."""
    return {key: text for key, s in standing.items() if (text := s.label())}


def _encode_marks(marks: Mapping[str, str]) -> str:
    return ",".join(f"{_escape_label(_cut_label(k)).replace('~', '%7E')}~{v.replace(', ', '+')}"
                    for k, v in marks.items())  # fmt: skip


def _parse_marks(text: str) -> dict[str, str]:
    marks: dict[str, str] = {}
    items = [part for part in str(text).split(",") if part.strip()]
    if len(items) > MAX_SIZES:
        raise OptionError(f"{len(items):,} standings: at most {MAX_SIZES} files are priced at once",
                          "Open the link exactly as it was shared")  # fmt: skip
    for item in items:
        label, sep, value = item.rpartition("~")
        words = value.replace("+", ", ").split(", ")
        if not sep or not label or not all(_MARK.fullmatch(w) for w in words):
            raise OptionError(f"'{_short(item)}' is not a variant's standing", "Open the link exactly as it was shared")
        marks[_label(label, label)] = ", ".join(words)
    return marks


def same_sizes(sizes: Mapping[str, int]) -> Sizes:
    """Typed sizes (bytes served, whatever the delivery) in the link's form."""
    return {label: dict.fromkeys(pricing.DELIVERIES, int(size)) for label, size in sizes.items()}


def comparison_sizes(comparison: Comparison, order: Iterable[str] | None = None) -> Sizes:
    """The measured raw / gzip -9 / brotli sizes of the original and every variant that has them
    (in ``order`` of keys when given, else the comparison's)."""
    measured = {
        r.key: {d: int(r.sizes.get(d)) for d in pricing.DELIVERIES}
        for r in comparison.all
        if r.sizes is not None and all(r.sizes.get(d) for d in pricing.DELIVERIES)
    }
    keys = [k for k in order if k in measured] if order is not None else list(measured)
    return {k: measured[k] for k in keys}


def served(sizes: Sizes, delivery: str) -> dict[str, int]:
    """Bytes served per download for each label, as ``delivery``."""
    return {label: per[delivery] for label, per in sizes.items()}


# ---------------------------------------------------------------- the whole link


def encode_pricing(link: PricingLink) -> str:
    """The query string (without ``?``) that :func:`decode_pricing` reads back as ``link``."""
    params: dict[str, str] = {
        "v": LINK_VERSION,
        "provider": link.provider,
        "downloads": str(int(link.downloads)),
        "delivery": link.delivery,
        "growth": pricing.format_growth(link.growth),
        "currency": link.currency,
    }
    if link.price is not None and link.provider == pricing.CUSTOM:
        params["price"] = f"{link.price.normalize():f}"
    if link.tiers is not None:
        params["tiers"] = ";".join(f"{'' if up is None else up}:{price}" for up, price in link.tiers)
        params["free"] = f"{(link.free or Decimal(0)).normalize():f}"
    if link.sizes:
        params["sizes"] = encode_sizes(link.sizes)
    if link.run:
        params["run"] = link.run
    if link.marks:
        params["marks"] = _encode_marks(link.marks)
    return urlencode(params, quote_via=quote, safe=_SAFE)


def _first(params: Mapping[str, Any], name: str) -> str | None:
    value = params.get(name)
    if isinstance(value, (list, tuple)):
        value = value[-1] if value else None
    return None if value is None else str(value)


def decode_pricing(
    params: Mapping[str, Any], providers: Mapping[str, pricing.Provider] | None = None
) -> tuple[PricingLink, list[LinkProblem]]:
    """The what-if a link describes, and what in it was not usable (each replaced by its default).

    ``params``: the address's query parameters (values as strings, or lists of them as ``parse_qs``
    gives). Never raises for anything a link can hold.
    """
    providers = pricing.load_providers() if providers is None else providers
    link = PricingLink()
    problems: list[LinkProblem] = []

    def take(name: str, parse, fallback_text: str):
        raw = _first(params, name)
        if raw is None or raw.strip() == "":
            return None
        try:
            _check_length(name, raw)
            return parse(raw)
        except ShrinkRayError as exc:
            problems.append(LinkProblem(name, raw, _message(exc), fallback_text))
        except (ValueError, ArithmeticError):
            problems.append(LinkProblem(name, raw, "It could not be read.", fallback_text))
        return None

    version = _first(params, "v")
    if version is not None and len(version) > MAX_PARAM_CHARS["v"]:
        take("v", str, "what could be read")  # its length, in the same words as every other value's
    elif version is not None and version != LINK_VERSION:
        problems.append(LinkProblem("v", version, "This link was made by another version of Shrink Ray Studio; "
                                    "its values were read as version 1.", "what could be read"))  # fmt: skip

    def provider_id(raw: str) -> str:
        pid = raw.strip()
        if pid != pricing.CUSTOM and pid not in providers:
            raise OptionError(f"Unknown provider '{_short(pid)}'", f"Known: {', '.join([*providers, pricing.CUSTOM])}")
        return pid

    link.provider = take("provider", provider_id, _provider_name(providers, link.provider)) or link.provider
    downloads = take("downloads", pricing.parse_downloads, f"{DEFAULT_DOWNLOADS:,}")
    link.downloads = int(downloads) if downloads is not None else link.downloads

    def delivery(raw: str) -> str:
        if raw.strip() not in pricing.DELIVERIES:
            raise OptionError(f"'{_short(raw)}' is not a delivery", "Use raw, gzip or brotli")
        return raw.strip()

    link.delivery = take("delivery", delivery, DEFAULT_DELIVERY) or link.delivery
    growth = take("growth", pricing.parse_growth, "0%")
    link.growth = growth if growth is not None else link.growth
    link.currency = take("currency", pricing.parse_currency_symbol, DEFAULT_CURRENCY) or link.currency
    if link.provider == pricing.CUSTOM:
        link.price = take("price", pricing.parse_price, f"{DEFAULT_PRICE} a GiB")
        link.price = DEFAULT_PRICE if link.price is None else link.price
    base = _base_provider(providers, link)
    tiers_text = _first(params, "tiers")
    if tiers_text:
        free_raw = _first(params, "free") or "0"

        def tiers(raw: str) -> list[tuple[str | None, str]]:
            _check_length("free", free_raw, "Its free allowance (free)")
            decoded = pricing.decode_tiers(raw)
            pricing.with_prices(base, decoded, pricing.parse_free_gib(free_raw))  # bounds and order, as the page
            return decoded

        link.tiers = take("tiers", tiers, f"{base.name}'s prices")
        if link.tiers is not None:
            link.free = pricing.parse_free_gib(free_raw)
    link.sizes = take("sizes", _parse_sizes_param, "the example sizes")

    def run_id(raw: str) -> str:
        if not _RUN_ID.fullmatch(raw.strip()):
            raise OptionError("This is not a run id", "Open the link exactly as it was shared")
        return raw.strip()

    link.run = take("run", run_id, "no run")
    link.marks = take("marks", _parse_marks, "no marks")
    return link, problems


def _provider_name(providers: Mapping[str, pricing.Provider], pid: str) -> str:
    return providers[pid].name if pid in providers else "a flat price"


def _base_provider(providers: Mapping[str, pricing.Provider], link: PricingLink) -> pricing.Provider:
    if link.provider == pricing.CUSTOM:
        return pricing.custom_provider(link.price if link.price is not None else DEFAULT_PRICE, 0)
    return providers[link.provider]


def provider_for(link: PricingLink, providers: Mapping[str, pricing.Provider] | None = None) -> pricing.Provider:
    """The provider the link prices with, its edited prices applied."""
    providers = pricing.load_providers() if providers is None else providers
    base = _base_provider(providers, link)
    if link.tiers is None:
        return base
    return pricing.with_prices(base, link.tiers, link.free or 0)


def edited_tiers(base: pricing.Provider, edited: pricing.Provider) -> tuple[list[tuple[str | None, str]], Decimal] | None:
    """The link's ``tiers``/``free`` for prices edited away from ``base`` (None when they are the preset's)."""
    if edited.tiers == base.tiers and edited.free_gib_per_month == base.free_gib_per_month:
        return None
    return pricing.decode_tiers(pricing.encode_tiers(edited)), edited.free_gib_per_month


__all__ = [
    "EXAMPLE_SIZES_TEXT",
    "LINK_VERSION",
    "MAX_LABEL_CHARS",
    "MAX_PARAM_CHARS",
    "MAX_SIZES",
    "LinkProblem",
    "PricingLink",
    "Sizes",
    "comparison_sizes",
    "decode_pricing",
    "edited_tiers",
    "encode_pricing",
    "encode_sizes",
    "is_typed",
    "parse_sizes_text",
    "provider_for",
    "same_sizes",
    "served",
    "size_text",
    "sizes_text",
    "standing_marks",
]

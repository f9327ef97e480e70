"""Numbers in and out of the pricing: checked and bounded on the way in, parsed from text, shown to people.

Every limit here (downloads, sizes, prices, growth, months) is what a link or a flag may ask for; a value
beyond it is refused in one sentence that names the field and gives an example.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation, localcontext
from typing import TYPE_CHECKING, Any

from shrinkray.errors import OptionError
from shrinkray.units import format_bytes

if TYPE_CHECKING:
    pass


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
_DATA = "cdn_prices.toml"
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


def _number(value: Any, what: str, example: str = "100000") -> Decimal:
    """A finite Decimal from an int, float, Decimal or numeric string (``_`` allowed as a separator); an error's
    hint gives ``example``, a value of this field (a price's is 0.12, not a count of downloads)."""
    if isinstance(value, bool) or value is None:
        raise OptionError(f"{what} must be a number, not {_shown(repr(value))}", f"e.g. {example}")
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
        raise OptionError(f"{what} must be a number, not {_shown(repr(value))}", f"e.g. {example}") from None
    if not number.is_finite():
        raise OptionError(f"{what} must be a finite number, not {_shown(repr(value))}", f"e.g. {example}")
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
    number = _number(value, what, example)
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
    number = _number(value, what, "52428800 or 50MiB")
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
    growth = _number(value, "Monthly growth", "0.05 (5% more downloads a month)")
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

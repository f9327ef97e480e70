"""Formatting numbers for people. Binary units throughout (1 MiB = 2**20 bytes),
because that is also what cloud providers bill by (GiB)."""

from __future__ import annotations

_UNITS = ["B", "KiB", "MiB", "GiB", "TiB"]


def format_bytes(n: float) -> str:
    value = float(n)
    for unit in _UNITS:
        if abs(value) < 1024 or unit == _UNITS[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_percent(share: float) -> str:
    return f"{share * 100:.1f}%"

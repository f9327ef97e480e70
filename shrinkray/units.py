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


def text_table(rows: list[list[str]], *, indent: str = "", right_from: int | None = None) -> list[str]:
    """Rows (header first) padded to column width for a terminal.

    Columns are left-aligned; from column ``right_from`` on they are
    right-aligned (numbers). Trailing spaces are trimmed. Hand-written on purpose: the same
    tables go into text reports written to files, where a terminal-width library would wrap or
    style them, and 15 lines need no dependency.
    """
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [
            c.rjust(w) if right_from is not None and i >= right_from else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.append((indent + "  ".join(cells)).rstrip())
    return out

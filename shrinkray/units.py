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


def format_seconds(seconds: float, *, rough: bool = False) -> str:
    """A duration as people read it, the one wording of seconds for users: '0.29 s', '4.2 s', '37 s'; from 90 s
    on '2 min 5 s' and '2 h 30 min' (a measured or modelled wait, e.g. a download), or with ``rough`` (an
    estimate, e.g. what a run would take) 'about 33 minutes' and 'about 2.5 hours'."""
    if seconds < 1:
        return f"{seconds:.2f} s"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if rough:
        return f"about {round(seconds / 60)} minutes" if seconds < 90 * 60 else f"about {seconds / 3600:.1f} hours"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 90:
        return f"{minutes} min {rest} s"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours} h {minutes} min"


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

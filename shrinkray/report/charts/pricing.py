"""Cost curves: what serving each file costs a month as downloads grow."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from shrinkray.measure.results import ORIGINAL
from shrinkray.report.charts.style import (
    COST_DASHES,
    LABEL_BACKGROUND,
    ORIGINAL_COLOR,
    PALETTE,
    TOLERANCE_COLOR,
    _esc,
    _figure,
)


def cost_curve_chart(
    curves: dict[str, list[float]],
    downloads: list[int],
    *,
    current_downloads: float | None = None,
    currency_symbol: str = "$",
    provider_name: str = "",
    delivery: str = "brotli",
    colors: dict[str, str] | None = None,
) -> go.Figure:
    """Monthly egress cost against downloads per month (log x), one line per file.

    ``curves`` comes from :func:`shrinkray.pricing.costs.cost_curve`; the first
    entry is the reference (grey, dotted) when it is called ``original``.
    ``colors`` (label -> colour, e.g. from :func:`variant_colors`) keeps each variant in the colour the
    other charts give it, whatever order the curves come in; labels without one take the palette in order.

    Every file stays visible: files that cost the same at every point (the same bytes served) are one line
    labelled ``a = b`` (drawn apart, the last hid the others), and each line has its own dash pattern, so
    lines a few per cent apart, which lie on top of each other on log axes, still show both colours.
    """
    fig = _figure(
        "Monthly egress cost by downloads",
        f"{_esc(provider_name)} prices per GiB (2^30 bytes), served {_esc(delivery)}; log axes (free months not drawn)",
    )
    groups: dict[tuple[float, ...], list[str]] = {}
    for label, costs in curves.items():
        groups.setdefault(tuple(costs), []).append(label)
    variants = [label for label in curves if label != ORIGINAL]
    dashes = iter(COST_DASHES * (len(groups) // len(COST_DASHES) + 1))
    for costs, labels in groups.items():
        first = ORIGINAL if ORIGINAL in labels else labels[0]
        is_original = first == ORIGINAL
        color = (colors or {}).get(first) or (
            ORIGINAL_COLOR if is_original else PALETTE[variants.index(first) % len(PALETTE)]
        )
        name = " = ".join([first, *[label for label in labels if label != first]])
        dash = "dot" if is_original else next(dashes)
        fig.add_trace(
            go.Scatter(
                x=downloads, y=[c if c > 0 else None for c in costs], name=_esc(name), mode="lines",
                line={"color": color, "width": 3, "dash": dash},
                hovertemplate=f"{_esc(currency_symbol)}%{{y:,.2f}}<extra>{_esc(name)}</extra>",
            )
        )  # fmt: skip
    if current_downloads:
        fig.add_vline(x=current_downloads, line={"color": TOLERANCE_COLOR, "dash": "dash", "width": 1.5})
        # An annotation on a log axis is placed by the exponent (add_vline's own label went to 10^100000: unseen).
        fig.add_annotation(
            x=math.log10(current_downloads), xref="x", y=1, yref="y domain", xanchor="right", yanchor="top",
            text=f"{current_downloads:,.0f} / month", showarrow=False, font={"color": TOLERANCE_COLOR},
            bgcolor=LABEL_BACKGROUND,
        )  # fmt: skip
    # One hover box with every file's cost at that count: lines that nearly coincide are read there.
    fig.update_layout(hovermode="x unified")
    decades = [10**k for k in range(len(str(int(min(downloads)))) - 1, len(str(int(max(downloads)))))] if downloads else []
    # The hover box says the count in full (1,467,799); ticks named here, else they take the hover's format.
    fig.update_xaxes(type="log", title_text="Downloads per month (log scale)", hoverformat=",.0f",
                     tickvals=decades, ticktext=[_count(d) for d in decades])  # fmt: skip
    fig.update_yaxes(type="log", title_text=f"Cost per month ({_esc(currency_symbol)}, log scale)")
    return fig


def _count(n: int) -> str:
    """A round count as an axis says it: 100, 1000, 10k, 1M, 1B."""
    for size, unit in ((10**9, "B"), (10**6, "M"), (10**4, "k")):
        if n >= size:
            return f"{n // (size if unit != 'k' else 1000):,}{unit}"
    return str(n)

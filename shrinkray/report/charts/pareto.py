"""The size-against-error chart: the frontier of variants worth keeping, and the recommended one."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from shrinkray.measure.results import Comparison
from shrinkray.report.charts.style import (
    FONT_SIZE,
    FRONTIER_COLOR,
    HEIGHT,
    LABEL_BACKGROUND,
    LOG_SPAN,
    RECOMMENDED_COLOR,
    TOLERANCE_COLOR,
    _delivery_label,
    _esc,
    _failed_note,
    _figure,
    byte_unit,
    empty_figure,
    variant_colors,
)
from shrinkray.verdict.advice import pareto, recommended


def _line_label(fig: go.Figure, y: float, text: str, color: str, log: bool, right: bool) -> None:
    """A label sitting on a horizontal line (annotations on a log axis take log10 coordinates)."""
    fig.add_annotation(
        x=1 if right else 0, xref="paper", xanchor="right" if right else "left",
        y=math.log10(y) if log else y, yanchor="bottom", text=text, showarrow=False,
        font={"color": color, "size": FONT_SIZE - 2},
    )  # fmt: skip


def pareto_chart(c: Comparison, delivery: str = "brotli") -> go.Figure:
    """Delivered size against the worst max-abs output error; frontier connected, recommended variant starred.

    The y axis turns logarithmic when the errors span two decades or more;
    an error of exactly 0 is then drawn on a labelled floor line, and an
    infinite one (missing output, changed shape) on a labelled ceiling line.
    """
    title = "Size vs accuracy"
    points = pareto(c, delivery)
    label = _delivery_label(c, delivery)
    abs_tol = 1.0  # severity: the share of the allowed error; 1.0 is the verdict's limit
    if not points:
        return empty_figure(title, "Nothing to plot: no variant has both a size and a parity measurement.")
    colors = variant_colors(c)
    best = recommended(c, delivery)
    base = c.original.sizes.get(delivery) if c.original.sizes is not None else None
    finite = [p.error for p in points if math.isfinite(p.error)]
    positive = [e for e in finite if e > 0]
    span = [*positive, abs_tol] if abs_tol > 0 else positive
    use_log = bool(positive) and max(span) / min(span) >= LOG_SPAN
    top = max([*finite, abs_tol, 0.0])
    if use_log:
        floor, ceiling = min(span) / 10, max(span) * 10
    else:
        floor, ceiling = 0.0, (top * 1.2 if top > 0 else 1.0)

    def plotted(error: float) -> float:
        if not math.isfinite(error):
            return ceiling
        return floor if use_log and error <= 0 else error

    div, unit = byte_unit(max(p.size for p in points))
    verdict = (f"star: recommended ({_esc(best.key)})" if best is not None
               else "no variant is smaller and within tolerance")  # fmt: skip
    fig = _figure(
        title,
        f"Parity error as a share of what the verdict allows (1 = the limit) vs {label} size; "
        f"● passes parity, ✕ fails; {verdict}",
        height=max(HEIGHT, 520),
        notes=[_failed_note(c.all)],
    )
    by_key = {p.key: p for p in points}
    if best is not None:  # drawn first, so the variant's own marker shows in the middle of the star
        star = by_key[best.key]
        fig.add_trace(
            go.Scatter(
                name="Recommended", x=[star.size / div], y=[plotted(star.error)], mode="markers",
                marker={"symbol": "star", "size": 34, "color": RECOMMENDED_COLOR, "line": {"width": 2, "color": "#333"}},
                hovertemplate=f"<b>Recommended: {_esc(best.key)}</b><extra></extra>",
            )
        )  # fmt: skip
    frontier = sorted({(p.size, plotted(p.error)) for p in points if p.on_frontier})
    if len(frontier) > 1:
        fig.add_trace(
            go.Scatter(
                name="Pareto frontier", x=[s / div for s, _ in frontier], y=[e for _, e in frontier], mode="lines",
                line={"color": FRONTIER_COLOR, "width": 1.5, "dash": "dot"}, hoverinfo="skip",
            )
        )  # fmt: skip
    for result in c.all:
        p = by_key.get(result.key)
        if p is None:
            continue
        if not math.isfinite(p.error):
            shown = "infinite (an output is missing or changed shape)"
        elif p.error == 0:
            shown = "0 (identical outputs)"
        else:
            shown = f"{p.error:.4g}"
        share = f"{p.size / base:.1%} of the original" if base else ""
        failing = "; ".join(o.reason for o in result.parity.outputs if not o.passed)
        reason = "passes parity" if p.passed else "FAILS parity: " + _esc(failing[:160])
        fig.add_trace(
            go.Scatter(
                name=p.key,
                x=[p.size / div],
                y=[plotted(p.error)],
                mode="markers",
                marker={
                    "color": colors[p.key],
                    "size": 15,
                    "symbol": "circle" if p.passed else "x",
                    "line": {"width": 1.5, "color": "white"} if p.passed else {"width": 0},
                },
                customdata=[[f"{p.size:,}", share, shown, reason, "on the frontier" if p.on_frontier else "dominated"]],
                hovertemplate="<b>%{fullData.name}</b><br>" + label + ": %{customdata[0]} bytes (%{customdata[1]})"
                "<br>share of the allowed error: %{customdata[2]}<br>%{customdata[3]}<br>%{customdata[4]}"
                "<extra></extra>",
            )
        )
    groups: dict[tuple[int, float], list[str]] = {}
    for p in points:
        groups.setdefault((p.size, plotted(p.error)), []).append(p.key)
    for (size, y), keys in groups.items():
        if len(keys) > 1:
            fig.add_annotation(
                x=size / div, y=math.log10(y) if use_log else y, ax=-30, ay=-40, showarrow=True, arrowhead=0,
                text="same size and error:<br>" + "<br>".join(_esc(k) for k in keys), align="right", xanchor="right",
                font={"size": FONT_SIZE - 2}, bgcolor=LABEL_BACKGROUND,
            )  # fmt: skip
    if best is not None:
        star = by_key[best.key]
        fig.add_annotation(
            x=star.size / div, y=math.log10(plotted(star.error)) if use_log else plotted(star.error),
            # wholly above and right of the star: the Pareto line falls through it from upper left to lower right,
            # so it never enters that corner; the star sits near the left edge more often than the right
            text=f"<b>Recommended: {_esc(best.key)}</b>", showarrow=True, arrowhead=2, ax=40, ay=-45, xanchor="left",
            font={"size": FONT_SIZE}, bgcolor=LABEL_BACKGROUND, bordercolor=RECOMMENDED_COLOR,
        )  # fmt: skip
    if abs_tol > 0:
        fig.add_hline(y=abs_tol, line={"color": TOLERANCE_COLOR, "dash": "dash", "width": 2})
        _line_label(fig, abs_tol, "parity limit", TOLERANCE_COLOR, use_log, right=True)
    if use_log and any(p.error == 0 for p in points):
        fig.add_hline(y=floor, line={"color": "#AAAAAA", "dash": "dot", "width": 1})
        _line_label(fig, floor, "error exactly 0 (identical outputs)", "#777777", use_log, right=False)
    if any(not math.isfinite(p.error) for p in points):
        fig.add_hline(y=ceiling, line={"color": "#AAAAAA", "dash": "dot", "width": 1})
        _line_label(fig, ceiling, "infinite error (output missing or shape changed)", "#777777", use_log, right=False)
    largest = max(p.size for p in points) / div
    fig.update_xaxes(title_text=f"Delivered size, {label} ({unit})", range=[0, largest * 1.12])
    if use_log:
        upper = ceiling if any(not math.isfinite(p.error) for p in points) else max(span)
        fig.update_yaxes(title_text="Share of the allowed error (log scale)", type="log", dtick=1,
                         range=[math.log10(floor) - 0.3, math.log10(upper) + 0.4],
                         exponentformat="power")  # a ratio: 10⁻⁴, not "100μ" (an SI prefix reads as a unit)  # fmt: skip
    else:
        fig.update_yaxes(title_text="Share of the allowed error", range=[-ceiling * 0.05, ceiling * 1.1])
    return fig

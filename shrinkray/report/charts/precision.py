"""auto's choice drawn: each tensor's bytes before and after, coloured by the precision it got."""

from __future__ import annotations

import plotly.graph_objects as go

from shrinkray.measure.results import Comparison
from shrinkray.report.charts.style import HEIGHT, _esc, _figure, byte_unit, empty_figure

PRECISION_COLORS = {"float32": "#888888", "float16": "#4C78A8", "int8": "#F58518", "int7": "#E8A33D",
                    "int6": "#C9B03A", "int5": "#93A73F", "int4": "#54A24B"}  # fmt: skip


def precision_chart(c: Comparison, key: str) -> go.Figure:
    """auto's choice: each tensor's bytes before and after, coloured by the precision it got."""
    title = "Precision per tensor"
    rows = c.get(key).record.get("details", {}).get("precision_map") or []
    if not rows:
        return empty_figure(title, "This variant did not choose precisions tensor by tensor.")
    rows = sorted(rows, key=lambda r: -r["bytes_before"])
    div, unit = byte_unit(max(r["bytes_before"] for r in rows))
    fig = _figure(title, f"{_esc(key)}: bytes per tensor before (outline) and after (colour: the precision chosen)",
                  height=max(HEIGHT, 120 + 22 * len(rows)))  # fmt: skip
    names = [_esc(r["tensor"]) for r in rows]
    fig.add_trace(go.Bar(name="float32 before", y=names, x=[r["bytes_before"] / div for r in rows], orientation="h",
                         marker={"color": "rgba(0,0,0,0)", "line": {"color": "#888888", "width": 1}},
                         hovertemplate="%{y}: %{x:.3g} " + unit + " before<extra></extra>"))  # fmt: skip
    for level, color in PRECISION_COLORS.items():
        picked = [r for r in rows if r["precision"] == level]
        if picked:
            fig.add_trace(go.Bar(name=level, y=[_esc(r["tensor"]) for r in picked],
                                 x=[r["bytes_after"] / div for r in picked], orientation="h", marker={"color": color},
                                 hovertemplate="%{y}: %{x:.3g} " + unit + f" as {level}<extra></extra>"))  # fmt: skip
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(title_text=f"Size ({unit})")
    fig.update_yaxes(autorange="reversed")
    return fig

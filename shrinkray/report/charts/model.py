"""Charts of a model on its own: its ops and where its weight bytes are."""

from __future__ import annotations

import plotly.graph_objects as go

from shrinkray.pipeline.inspect import ModelSummary
from shrinkray.report.charts.style import HEIGHT, PALETTE, _esc, _figure, byte_unit, empty_figure
from shrinkray.units import format_bytes

#: The two model charts sit side by side: at an 800 px page each is about 230 px wide, 36 characters a line.
HALF_PAGE_CHARS = 36


def op_histogram_chart(summary: ModelSummary, top: int = 20) -> go.Figure:
    """Node count per operator type (including subgraphs), the most frequent first."""
    title = "Operators"
    if not summary.op_histogram:
        return empty_figure(title, "The graph has no nodes.")
    shown = summary.op_histogram[:top]
    rest = summary.op_histogram[top:]
    labels = [_esc(op) for op, _ in shown] + ([f"{len(rest)} other op types"] if rest else [])  # ticks are HTML
    counts = [n for _, n in shown] + ([sum(n for _, n in rest)] if rest else [])
    fig = _figure(
        title,
        f"{summary.node_count:,} nodes ({summary.subgraph_count} subgraphs), {len(summary.op_histogram)} op types",
        height=max(HEIGHT, 120 + 26 * len(labels)),
        wrap=HALF_PAGE_CHARS,
    )
    fig.add_trace(
        go.Bar(
            x=counts,
            y=labels,
            orientation="h",
            name="nodes",
            marker_color=PALETTE[0],
            hovertemplate="%{y}: %{x} nodes<extra></extra>",
        )
    )
    fig.update_layout(showlegend=False)
    fig.update_xaxes(title_text="Nodes (count)", rangemode="tozero")
    fig.update_yaxes(autorange="reversed", title_text="")
    return fig


def weight_bytes_chart(summary: ModelSummary, top: int = 15) -> go.Figure:
    """The largest weight tensors by bytes, and the share of the file they hold."""
    title = "Where the bytes are"
    if not summary.weights:
        return empty_figure(title, "The model stores no weight tensors.")
    weights = sorted(summary.weights, key=lambda w: -w.bytes)
    shown, rest = weights[:top], weights[top:]
    div, unit = byte_unit(weights[0].bytes)
    labels = [_esc(w.name) for w in shown]  # tick and hover labels are pseudo-HTML
    values = [w.bytes for w in shown]
    custom = [[f"{w.bytes:,}", f"{w.share_of_file:.1%}", w.dtype, str(w.shape), _esc(w.where)] for w in shown]
    if rest:
        total = sum(w.bytes for w in rest)
        labels.append(f"{len(rest)} smaller tensors")
        values.append(total)
        custom.append([f"{total:,}", f"{total / summary.file_bytes:.1%}", "", "", ""])
    fig = _figure(
        title,
        f"Largest weight tensors; weights are {format_bytes(summary.weight_bytes)} = "
        f"{summary.weight_share:.1%} of the {format_bytes(summary.file_bytes)} file",
        height=max(HEIGHT, 120 + 26 * len(labels)),
        wrap=HALF_PAGE_CHARS,
    )
    fig.add_trace(
        go.Bar(
            x=[v / div for v in values],
            y=labels,
            orientation="h",
            name="weights",
            marker_color=PALETTE[0],
            customdata=custom,
            hovertemplate="<b>%{y}</b><br>%{customdata[0]} bytes, %{customdata[1]} of the file"
            "<br>%{customdata[2]} %{customdata[3]} (%{customdata[4]})<extra></extra>",
        )
    )
    fig.update_layout(showlegend=False)
    fig.update_xaxes(title_text=f"Size ({unit})", rangemode="tozero")
    fig.update_yaxes(autorange="reversed", title_text="")
    return fig

"""The download-size chart: raw, gzip and brotli bytes of the original and each variant."""

from __future__ import annotations

import plotly.graph_objects as go

from shrinkray.measure.results import Comparison
from shrinkray.report.charts.style import (
    _brotli_label,
    _delivery_label,
    _failed_note,
    _figure,
    byte_unit,
    empty_figure,
    variant_colors,
)


def size_chart(c: Comparison) -> go.Figure:
    """Grouped bars: raw / gzip / brotli (and zstd when measured) bytes for the original and every variant."""
    colors = variant_colors(c)
    measured = [r for r in c.all if r.sizes is not None]
    title = "Download size"
    if not measured:
        return empty_figure(title, "No sizes were measured (every variant failed).")
    base = c.original.sizes
    kinds = [
        ("raw", "raw file"),
        ("gzip", f"gzip -{measured[0].sizes.gzip_level}"),
        ("brotli", _brotli_label(measured)),
    ]
    if any(r.sizes.zstd is not None for r in measured):
        kinds.append(("zstd", _delivery_label(c, "zstd")))
    largest = max(r.sizes.raw for r in measured)
    div, unit = byte_unit(largest)
    fig = _figure(
        title,
        "Bytes to download: raw file, " + ", ".join(label for _, label in kinds[1:-1]) + f" and {kinds[-1][1]}; "
        "lower is better",
        notes=[_failed_note(c.all)],
    )
    for result in measured:
        values, custom = [], []
        for kind, label in kinds:
            n = getattr(result.sizes, kind)
            reference = getattr(base, kind) if base is not None else None
            share = f"{n / reference:.1%} of the original" if n is not None and reference else ""
            quality = f" (q{result.sizes.brotli_quality})" if kind == "brotli" else ""
            values.append(n / div if n is not None else None)
            custom.append([f"{n:,}" if n is not None else "n/a", share, label + quality])
        fig.add_trace(
            go.Bar(
                name=result.key,
                x=[label for _, label in kinds],
                y=values,
                customdata=custom,
                marker_color=colors[result.key],
                hovertemplate="<b>%{fullData.name}</b><br>%{customdata[2]}: %{customdata[0]} bytes"
                "<br>%{customdata[1]}<extra></extra>",
            )
        )
    fig.update_layout(barmode="group", bargap=0.2, bargroupgap=0.05)
    fig.update_xaxes(title_text="Delivery (compression)")
    fig.update_yaxes(title_text=f"Size ({unit})", rangemode="tozero")
    return fig

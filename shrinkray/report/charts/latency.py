"""Latency and throughput charts: medians with their intervals, the original beside each variant."""

from __future__ import annotations

import plotly.graph_objects as go

from shrinkray.measure.latency import LatencyStats
from shrinkray.measure.results import ORIGINAL, Comparison
from shrinkray.report.charts.style import MUTED_COLOR, _esc, _failed_note, _figure, empty_figure, variant_colors
from shrinkray.verdict.speed import NOISY, stats_call, stats_words


def _latency_threads(c: Comparison, threads: int | None) -> tuple[int | None, list[int]]:
    """The thread count to show (default: the first measured) and every measured count."""
    measured: list[int] = []
    for result in c.all:
        for s in result.latency:
            if s.threads not in measured:
                measured.append(s.threads)
    if threads is None:
        first = c.original.latency[0].threads if c.original.latency else (measured[0] if measured else None)
        return first, measured
    return threads, measured


def _runs_text(stats: list[LatencyStats]) -> str:
    runs = sorted({s.runs for s in stats})
    if not runs:
        return ""
    return f"{runs[0]} runs" if len(runs) == 1 else f"{runs[0]}-{runs[-1]} runs"


def _threads_text(threads: int) -> str:
    return f"{threads} thread" + ("" if threads == 1 else "s")


def _no_latency(c: Comparison, title: str, threads: int | None, measured: list[int]) -> go.Figure | None:
    if not measured:
        reason = "Latency was not measured" + (" (turned off)." if not c.settings.latency else ".")
        if c.latency_note and c.settings.latency:
            reason += "<br>" + _esc(c.latency_note)
        return empty_figure(title, reason)
    if threads not in measured:
        return empty_figure(
            title,
            f"No latency was measured with {_threads_text(threads)}.<br>Measured: "
            + ", ".join(map(str, measured)) + " thread(s).",
        )  # fmt: skip
    return None


def latency_chart(c: Comparison, threads: int | None = None) -> go.Figure:
    """Median latency per call with a whisker up to p90, per variant; one panel per batch size."""
    title = "Latency per call"
    threads, measured = _latency_threads(c, threads)
    empty = _no_latency(c, title, threads, measured)
    if empty is not None:
        return empty
    colors = variant_colors(c)
    stats = [s for r in c.all for s in r.latency if s.threads == threads]
    batches = sorted({s.batch for s in stats})
    subtitle = (
        f"Median of {_runs_text(stats)} (whisker: p90), {_threads_text(threads)}, ONNX Runtime CPU, "
        "interleaved; lower is better"
    )
    noisy = sorted({r.key for r in c.variants for s in r.latency if s.threads == threads and stats_call(s) == NOISY})
    named = ", ".join(noisy) if len(noisy) <= 2 else f"{len(noisy)} variants"  # the hatching shows which
    noisy_note = f"hatched: too noisy to tell against the original ({named})" if noisy else ""
    fig = _figure(title, subtitle, notes=[_failed_note(c.all), noisy_note], cols=len(batches),
                  panel_titles=[f"batch {b}" for b in batches])  # fmt: skip
    base = {s.batch: s for s in c.original.latency if s.threads == threads}
    for result in c.all:
        for col, batch in enumerate(batches, start=1):
            s = result.latency_at(threads, batch)
            if s is None:
                continue
            ratio = (
                f"{s.median_ms / base[batch].median_ms:.2f}x the original"
                if batch in base and base[batch].median_ms > 0
                else ""
            )
            if s.ratio is not None:  # the measured ratio and where a repeat would land, or "too noisy to tell"
                ratio = f"vs the original: {stats_words(s)}"
            trace = go.Bar(
                name=result.key,
                legendgroup=result.key,
                showlegend=col == 1,
                x=[f"batch {batch}"],
                y=[s.median_ms],
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [max(s.p90_ms - s.median_ms, 0.0)],
                    "arrayminus": [0.0],
                    "thickness": 2,
                    "width": 6,
                    "color": MUTED_COLOR,
                },
                marker_color=colors[result.key],
                marker_pattern_shape="/" if stats_call(s) == NOISY and result.key != ORIGINAL else "",
                customdata=[[s.p90_ms, s.mean_ms, s.runs, s.throughput, ratio, s.session_ms]],
                hovertemplate="<b>%{fullData.name}</b><br>median %{y:.3f} ms, p90 %{customdata[0]:.3f} ms"
                "<br>mean %{customdata[1]:.3f} ms over %{customdata[2]} runs<br>%{customdata[3]:,.0f} samples/s"
                "<br>%{customdata[4]}<br>session created in %{customdata[5]:.1f} ms<extra></extra>",
            )
            if len(batches) > 1:
                fig.add_trace(trace, row=1, col=col)
            else:
                fig.add_trace(trace)
    fig.update_layout(barmode="group", bargap=0.15)
    fig.update_xaxes(showticklabels=len(batches) == 1)
    fig.update_yaxes(rangemode="tozero")
    if len(batches) > 1:
        fig.update_yaxes(title_text="Median latency (ms)", row=1, col=1)
    else:
        fig.update_yaxes(title_text="Median latency (ms)")
        fig.update_xaxes(title_text="Batch size (samples per call)")
    return fig


def throughput_chart(c: Comparison, threads: int | None = None) -> go.Figure:
    """Samples per second against batch size, one line per variant (needs two or more batch sizes)."""
    title = "Throughput by batch size"
    threads, measured = _latency_threads(c, threads)
    empty = _no_latency(c, title, threads, measured)
    if empty is not None:
        return empty
    stats = [s for r in c.all for s in r.latency if s.threads == threads]
    batches = sorted({s.batch for s in stats})
    if len(batches) < 2:
        only = f"batch {batches[0]}" if batches else "no batch"
        return empty_figure(
            title, f"Throughput needs two or more batch sizes; only {only} was measured.<br>"
            "Models with a fixed batch axis run at one size.",
        )  # fmt: skip
    colors = variant_colors(c)
    fig = _figure(
        title,
        f"Batch / median latency of {_runs_text(stats)}, {_threads_text(threads)}, ONNX Runtime CPU; higher is better",
        notes=[_failed_note(c.all)],
    )
    for result in c.all:
        points = sorted((s for s in result.latency if s.threads == threads), key=lambda s: s.batch)
        if not points:
            continue
        fig.add_trace(
            go.Scatter(
                name=result.key,
                x=[s.batch for s in points],
                y=[s.throughput for s in points],
                mode="lines+markers",
                line={"color": colors[result.key], "width": 3, "dash": "dot" if result.key == ORIGINAL else "solid"},
                marker={"size": 10},
                customdata=[[s.median_ms, s.p90_ms] for s in points],
                hovertemplate="<b>%{fullData.name}</b><br>batch %{x}: %{y:,.0f} samples/s"
                "<br>median %{customdata[0]:.3f} ms, p90 %{customdata[1]:.3f} ms<extra></extra>",
            )
        )
    fig.update_xaxes(title_text="Batch size (samples per call, log scale)", type="log", tickvals=batches,
                     ticktext=[str(b) for b in batches])  # fmt: skip
    fig.update_yaxes(title_text="Throughput (samples/s)", rangemode="tozero")
    return fig

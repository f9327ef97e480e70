"""Timings of runs in the user's browser (ONNX Runtime Web) beside the server's."""

from __future__ import annotations

import plotly.graph_objects as go

from shrinkray.measure.results import Comparison
from shrinkray.report.charts.latency import _threads_text
from shrinkray.report.charts.style import ORIGINAL_COLOR, PALETTE, _esc, _figure, empty_figure
from shrinkray.verdict.browser import browser_name


def browser_chart(c: Comparison, runs: list | None = None) -> go.Figure:
    """Server CPU vs your browser: median run and session creation per model, ONNX Runtime on the server
    (1 thread) beside ONNX Runtime Web in the browser that ran the panel, on the same input."""
    runs = list(runs if runs is not None else getattr(c, "browser", []) or [])
    title = "Server CPU vs your browser"
    if not runs:
        return empty_figure(title, "Not measured in a browser (the app's Compare page runs it)")
    if not any(r.ok for r in runs):
        return empty_figure(title, "No model ran in the browser: see the advice")
    first = runs[0]
    threads = first.threads or 1
    where = f"{_esc(browser_name(first.user_agent))}, {_esc(first.runtime)} ({_esc(first.backend)}, {_threads_text(threads)})"
    subtitle = f"Same input (batch {first.batch}); server: ONNX Runtime CPU, 1 thread; browser: {where}; lower is better"
    failed = [r.key for r in runs if not r.ok]
    note = "did not run in the browser: " + ", ".join(_esc(k) for k in failed) if failed else ""
    fig = _figure(title, subtitle, notes=[note], cols=2, panel_titles=["median run (ms)", "session creation (ms)"])
    keys = [r.key for r in runs if r.ok]
    server = {r.key: r.latency_at(1, first.batch) for r in c.all if r.key in keys}
    for col, (server_value, browser_value) in enumerate(
        [(lambda s: s.median_ms, lambda r: r.median_ms), (lambda s: s.session_ms, lambda r: r.session_ms)], start=1
    ):
        xs = [_esc(k) for k in keys]
        fig.add_trace(go.Bar(
            name="server CPU (ONNX Runtime, 1 thread)", legendgroup="server", showlegend=col == 1, x=xs,
            y=[server_value(server[k]) if server.get(k) else None for k in keys], marker_color=ORIGINAL_COLOR,
            hovertemplate="<b>%{x}</b><br>server %{y:.2f} ms<extra></extra>",
        ), row=1, col=col)  # fmt: skip
        fig.add_trace(go.Bar(
            name=f"your browser ({_esc(browser_name(first.user_agent))}, {_threads_text(threads)})",
            legendgroup="browser", showlegend=col == 1, x=xs, y=[browser_value(r) for r in runs if r.ok],
            marker_color=PALETTE[0], hovertemplate="<b>%{x}</b><br>browser %{y:.2f} ms<extra></extra>",
        ), row=1, col=col)  # fmt: skip
    fig.update_layout(barmode="group", bargap=0.2)
    fig.update_yaxes(rangemode="tozero", title_text="ms", row=1, col=1)
    return fig



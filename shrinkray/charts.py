"""Plotly figures for a comparison (and a model summary), shared by the app and the HTML report.

Every function is pure: it reads measurements and returns a
``plotly.graph_objects.Figure``; nothing is measured or written here. The
figures are meant to be read on a projector: large type, titles that say what
was measured and how (subtitle), axis titles with units, one colour per
variant across every chart (the original is always grey), and an explicit
annotated empty state instead of a blank plot when there is nothing to show.

Variants that failed (no sizes, no parity), comparisons without latency and
outputs compared exactly (non-float: no samples) are all drawn or explained,
never raised on.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from shrinkray.advice import pareto, recommended
from shrinkray.inspect import ModelSummary
from shrinkray.measure.latency import LatencyStats
from shrinkray.measure.parity import OutputParity
from shrinkray.results import ORIGINAL, Comparison, VariantResult
from shrinkray.text_safety import plotly_label
from shrinkray.units import format_bytes
from shrinkray.verdict.speed import NOISY, stats_call, stats_words

TEMPLATE = "plotly_white"
#: The original is grey in every chart.
ORIGINAL_COLOR = "#7F7F7F"
#: Variant colours in order (Okabe-Ito without yellow and black, then Paul Tol's muted): colour-blind safe.
PALETTE = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9",
    "#882255", "#117733", "#AA4499", "#44AA99", "#999933", "#332288",
]  # fmt: skip
FONT_SIZE = 15
TITLE_SIZE = 21
HEIGHT = 470
TOLERANCE_COLOR = "#C0392B"
RECOMMENDED_COLOR = "#F5B700"
FRONTIER_COLOR = "#888888"
#: Secondary text and lines: a mid grey that reads on the light and the dark theme alike.
MUTED_COLOR = "#8a8a8a"
#: Behind labels drawn over data: a translucent grey, so the theme's text colour stays readable in both themes.
LABEL_BACKGROUND = "rgba(128,128,128,0.16)"
#: Subtitles are wrapped at this many characters: plotly never wraps titles, and a half-width chart clipped them.
SUBTITLE_CHARS = 64
#: Errors whose largest and smallest positive values differ by this factor get a log axis.
LOG_SPAN = 100.0
#: Dash patterns of the cost lines, one per file (the original is dotted): lines that nearly coincide on log axes
#: still show each colour through the other's gaps.
COST_DASHES = ["solid", "dash", "dashdot", "longdash", "longdashdot", "6px,3px,1px,3px,1px,3px"]


# ---------------------------------------------------------------- shared helpers


def variant_colors(c: Comparison) -> dict[str, str]:
    """Key -> colour for every result of a comparison: original grey, variants from :data:`PALETTE` in order."""
    colors = {ORIGINAL: ORIGINAL_COLOR}
    for index, result in enumerate(c.variants):
        colors[result.key] = PALETTE[index % len(PALETTE)]
    return colors


def _esc(text: object) -> str:
    """Plotly renders titles, annotations, ticks and hover labels as pseudo-HTML: escape names that come from
    models or users (see shrinkray.text_safety)."""
    return plotly_label(text)


def byte_unit(largest: float) -> tuple[float, str]:
    """Divisor and unit name that keep the largest value readable (binary units, as in format_bytes)."""
    if largest >= 2**20:
        return float(2**20), "MiB"
    if largest >= 1024:
        return 1024.0, "KiB"
    return 1.0, "bytes"


def _figure(
    title: str,
    subtitle: str = "",
    *,
    height: int = HEIGHT,
    notes: Iterable[str] = (),
    rows: int = 1,
    cols: int = 1,
    panel_titles: list[str] | None = None,
) -> go.Figure:
    """An empty figure with the shared look: template, fonts, title, subtitle, legend at the bottom.

    ``notes`` (e.g. which variants are missing) are appended to the subtitle;
    ``rows``/``cols`` > 1 make a grid of panels titled ``panel_titles``.
    """
    extra = [n for n in notes if n]
    sub = wrap_subtitle(" · ".join([subtitle, *extra]) if extra else subtitle)
    extra_lines = sub.count("<br>")
    if rows > 1 or cols > 1:
        fig = make_subplots(
            rows=rows, cols=cols, subplot_titles=panel_titles,
            vertical_spacing=min(0.25, 0.5 / rows) if rows > 1 else None,
            horizontal_spacing=min(0.1, 0.3 / cols) if cols > 1 else None,
        )  # fmt: skip
    else:
        fig = go.Figure()
    fig.update_layout(
        template=TEMPLATE,
        height=height,
        font={"size": FONT_SIZE},
        title={
            "text": title,
            "subtitle": {"text": sub, "font": {"size": FONT_SIZE - 1, "color": MUTED_COLOR}},
            "font": {"size": TITLE_SIZE},
            "x": 0.01,
            "xanchor": "left",
            # pinned to the top: centred in the top margin (plotly's default) its wrapped subtitle ran into
            # the panel titles below it (walkthrough 2026-11-27, the browser chart)
            "y": 1,
            "yref": "container",
            "yanchor": "top",
            "pad": {"t": 14},
        },
        legend={
            "orientation": "h",
            "yref": "container",
            "y": 0.0,
            "yanchor": "bottom",
            "x": 0.0,
            "xanchor": "left",
            "title": {"text": ""},
        },
        hoverlabel={"font_size": FONT_SIZE - 1},
        margin={"t": (125 if panel_titles else 100) + 19 * extra_lines, "l": 70, "r": 30, "b": 90},
    )
    if extra_lines:
        fig.update_layout(height=height + 19 * extra_lines)
    return fig


def wrap_subtitle(text: str, width: int = SUBTITLE_CHARS) -> str:
    """Break a subtitle into lines of at most ``width`` characters at spaces (``<br>``; escaped text has no
    spaces inside its entities, so a break never splits one)."""
    lines: list[str] = []
    for paragraph in text.split("<br>"):
        line = ""
        for word in paragraph.split(" "):
            if line and len(_visible(line)) + 1 + len(_visible(word)) > width:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        lines.append(line)
    return "<br>".join(lines)


def _visible(text: str) -> str:
    """Text as shown: an entity such as ``&lt;`` counts as one character."""
    import re

    return re.sub(r"&[#a-zA-Z0-9]+;", "x", text)


def empty_figure(title: str, message: str, subtitle: str = "") -> go.Figure:
    """A figure that says, in its middle, why there is nothing to plot."""
    fig = _figure(title, subtitle, height=320)
    fig.add_annotation(
        text=message, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
        font={"size": FONT_SIZE + 2, "color": MUTED_COLOR}, align="center",
    )  # fmt: skip
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(margin={"t": 100, "l": 30, "r": 30, "b": 30}, showlegend=False)
    return fig


def _failed_note(results: Iterable[VariantResult]) -> str:
    failed = [r.key for r in results if not r.ok]
    return "not shown (failed): " + ", ".join(_esc(k) for k in failed) if failed else ""


def _brotli_label(results: Iterable[VariantResult]) -> str:
    qualities = sorted({r.sizes.brotli_quality for r in results if r.sizes is not None})
    if len(qualities) == 1:
        return f"brotli q{qualities[0]}"
    if qualities:
        return f"brotli q{qualities[0]}-{qualities[-1]}"
    return "brotli"


def _delivery_label(c: Comparison, delivery: str) -> str:
    if delivery == "brotli":
        return _brotli_label(c.all)
    if delivery == "gzip":
        levels = {r.sizes.gzip_level for r in c.all if r.sizes is not None}
        return f"gzip -{levels.pop()}" if len(levels) == 1 else "gzip"
    if delivery == "zstd":
        levels = {r.sizes.zstd_level for r in c.all if r.sizes is not None}
        return f"zstd -{levels.pop()}" if len(levels) == 1 else "zstd"
    return "raw file"


# ---------------------------------------------------------------- sizes


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


# ---------------------------------------------------------------- latency


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


# ---------------------------------------------------------------- parity


def _output_names(c: Comparison, output: str | None) -> list[str]:
    names = [o.name for o in c.original.parity.outputs] if c.original.parity else []
    if output is None:
        return names
    if output not in names:
        raise KeyError(f"No output named {output!r}; outputs: {', '.join(names) or 'none'}")
    return [output]


def _output_of(result: VariantResult, name: str) -> OutputParity | None:
    if result.parity is None:
        return None
    return next((o for o in result.parity.outputs if o.name == name), None)


def _exact_text(c: Comparison, name: str) -> str:
    """What happened to an output compared for equality (labels, ids, masks)."""
    parts = []
    for result in c.variants:
        o = _output_of(result, name)
        if o is None:
            continue
        if o.passed:
            parts.append(f"{_esc(result.key)}: identical")
        else:
            parts.append(f"{_esc(result.key)}: {_esc(o.reason)}")
    ref = _output_of(c.original, name)
    dtype = ref.dtype if ref else "non-float"
    head = f"Output {_esc(name)} ({_esc(dtype)}) is compared exactly (must match), so it has no error distribution."
    return head + ("<br>" + "<br>".join(parts) if parts else "")


def _plottable(o: OutputParity | None) -> bool:
    return o is not None and not o.exact and bool(o.sample_reference)


def _exact_summary(c: Comparison, name: str) -> str:
    """One line for an exactly compared output: does every variant match?"""
    differ = [r.key for r in c.variants if (o := _output_of(r, name)) is not None and not o.passed]
    if differ:
        return f"{_esc(name)} compared exactly, differs in " + ", ".join(_esc(k) for k in differ)
    return f"{_esc(name)} compared exactly, identical in every variant"


def _abs_limit(c: Comparison, name: str) -> tuple[float, str] | None:
    """The verdict's largest allowed error of one output in its own units, when the verdict has one:
    an absolute ``max_abs_error``, or ``max_relative_error`` times the output's range."""
    ref = _output_of(c.original, name)
    if ref is None or ref.exact:
        return None
    criteria = {cr.name: cr.limit for cr in c.settings.verdict.criteria_for(name, ref.kind)}
    if "max_abs_error" in criteria:
        return criteria["max_abs_error"], f"max abs error allowed {criteria['max_abs_error']:g}"
    spread = ref.measures.get("range")
    if "max_relative_error" in criteria and spread:
        value = criteria["max_relative_error"] * spread
        return value, f"largest error allowed ({criteria['max_relative_error']:g} of the range)"
    return None


def parity_error_chart(c: Comparison, output: str | None = None) -> go.Figure:
    """Distribution of |variant - original| per float output (box per variant), with the abs tolerance marked.

    ``output=None`` draws one panel per float output; exact (non-float)
    outputs are summarised in the subtitle instead. The short vertical tick
    on each row is the maximum over all values, which the verdict uses (the
    box shows the sampled values).
    """
    title = "Output error per variant"
    names = _output_names(c, output)
    if not names:
        return empty_figure(title, "Parity was not measured.")
    float_names = [n for n in names if not getattr(_output_of(c.original, n), "exact", False)]
    exact_names = [n for n in names if n not in float_names]
    variants = [r for r in c.variants if r.ok and r.parity is not None]
    if not float_names:
        if len(exact_names) == 1:
            return empty_figure(title, _exact_text(c, exact_names[0]))
        return empty_figure(title, "Every output is compared exactly (non-float); none has an error distribution.")
    if not variants:
        return empty_figure(title, "No variant could be measured.<br>" + _failed_note(c.variants))
    colors = variant_colors(c)
    n_samples = max((len(o.sample_reference) for r in variants for n in float_names
                     if _plottable(o := _output_of(r, n))), default=0)  # fmt: skip
    notes = [_failed_note(c.variants), *(_exact_summary(c, n) for n in exact_names)]
    single = len(float_names) == 1
    fig = _figure(
        title,
        f"|variant - original| on up to {n_samples:,} sampled values" + (f" of output {_esc(float_names[0])}" if single
        else " per output") + "; tick: max over all values",
        height=max(HEIGHT, 200 + len(float_names) * (80 + 40 * len(variants))),
        notes=notes,
        rows=len(float_names),
        panel_titles=None if single else [f"output {_esc(n)}" for n in float_names],
    )  # fmt: skip
    all_zero = True
    limits: list[str] = []
    for row, name in enumerate(float_names, start=1):
        where = {} if single else {"row": row, "col": 1}
        missing, largest = [], 0.0
        for result in variants:
            o = _output_of(result, name)
            if not _plottable(o):
                missing.append(f"{_esc(result.key)}: {_esc(o.reason if o else 'not measured')}")
                continue
            errors = [abs(v - r) for r, v in zip(o.sample_reference, o.sample_variant, strict=True)]
            largest = max(largest, o.max_abs_error if math.isfinite(o.max_abs_error) else 0.0, *errors)
            color = colors[result.key]
            fig.add_trace(
                go.Box(
                    name=result.key, legendgroup=result.key, showlegend=row == 1, x=errors, orientation="h",
                    marker={"color": color, "size": 4, "opacity": 0.5}, line={"color": color},
                    boxpoints="outliers", hoverinfo="x",
                ),
                **where,
            )  # fmt: skip
            fig.add_trace(
                go.Scatter(
                    name=result.key, legendgroup=result.key, showlegend=False, x=[o.max_abs_error], y=[result.key],
                    mode="markers", marker={"symbol": "line-ns-open", "size": 22, "color": color,
                                            "line": {"width": 3, "color": color}},
                    customdata=[[o.mean_abs_error, "passes" if o.passed else "FAILS: " + _esc(o.reason)]],
                    hovertemplate="<b>%{y}</b><br>max abs error over all values: %{x:.4g}"
                    "<br>mean abs error %{customdata[0]:.4g}<br>%{customdata[1]}<extra></extra>",
                ),
                **where,
            )  # fmt: skip
        all_zero = all_zero and largest == 0.0
        limit = _abs_limit(c, name)
        if limit is not None:
            fig.add_vline(x=limit[0], line={"color": TOLERANCE_COLOR, "dash": "dash", "width": 2}, **where)
            limits.append(limit[1])
        fig.update_xaxes(range=[0, max(largest, limit[0] if limit else 0.0) * 1.08 or 1.0], **where)
        if missing:
            suffix = "" if row == 1 else str(row)
            fig.add_annotation(
                text="no samples: " + "; ".join(missing), x=1, y=1, xref=f"x{suffix} domain",
                yref=f"y{suffix} domain", xanchor="right", yanchor="bottom", showarrow=False,
                font={"size": FONT_SIZE - 3, "color": MUTED_COLOR},
            )  # fmt: skip
    if limits:
        fig.add_trace(
            go.Scatter(
                name=_esc(limits[0]) if len(set(limits)) == 1 else "largest error allowed", x=[None], y=[None],
                mode="lines", line={"color": TOLERANCE_COLOR, "dash": "dash", "width": 2}, hoverinfo="skip",
            ),
            **({} if single else {"row": 1, "col": 1}),
        )  # fmt: skip
    if all_zero:
        fig.add_annotation(
            text="Every variant reproduces the original exactly (error 0).", x=0.5, y=0.5, xref="paper",
            yref="paper", showarrow=False, font={"size": FONT_SIZE + 1}, bgcolor=LABEL_BACKGROUND,
        )  # fmt: skip
    fig.update_xaxes(title_text="|variant - original| (output units)")
    fig.update_yaxes(autorange="reversed")
    return fig


def parity_scatter_chart(c: Comparison, variant_key: str, output: str | None = None) -> go.Figure:
    """Original vs variant output values on sampled elements, with the y = x line (perfect agreement)."""
    result = c.get(variant_key)
    title = f"Original vs {_esc(variant_key)}"
    names = _output_names(c, output)
    if not result.ok:
        return empty_figure(title, f"{_esc(variant_key)} could not be used:<br>{_esc(result.error)}")
    if result.parity is None or not names:
        return empty_figure(title, "Parity was not measured.")
    plottable = [n for n in names if _plottable(_output_of(result, n))]
    if not plottable:
        if len(names) == 1:
            o = _output_of(result, names[0])
            if o is not None and o.exact:
                return empty_figure(title, _exact_text(c, names[0]))
            reason = o.reason if o is not None and o.reason else "no sampled values"
            return empty_figure(title, f"No values to plot for output {_esc(names[0])}: {_esc(reason)}.")
        return empty_figure(title, "No float output has sampled values to plot.")
    color = variant_colors(c)[result.key]
    skipped = [n for n in names if n not in plottable]
    n_samples = max(len(_output_of(result, n).sample_reference) for n in plottable)
    fig = _figure(
        title,
        f"Up to {n_samples:,} sampled values"
        + (f" of output {_esc(plottable[0])}" if len(plottable) == 1 else "")
        + ", same inputs; on the dashed line the variant agrees exactly",
        height=max(HEIGHT, 520),
        notes=["not plotted: " + ", ".join(_esc(n) for n in skipped)] if skipped else [],
        cols=len(plottable),
        panel_titles=[f"output {_esc(n)}" for n in plottable],
    )
    for col, name in enumerate(plottable, start=1):
        where = {"row": 1, "col": col} if len(plottable) > 1 else {}
        o = _output_of(result, name)
        finite = [v for v in o.sample_reference + o.sample_variant if math.isfinite(v)]
        low, high = (min(finite), max(finite)) if finite else (0.0, 1.0)
        pad = (high - low) * 0.03 or 1.0
        fig.add_trace(
            go.Scatter(
                name="y = x (identical)",
                legendgroup="identity",
                showlegend=col == 1,
                x=[low - pad, high + pad],
                y=[low - pad, high + pad],
                mode="lines",
                line={"color": MUTED_COLOR, "dash": "dash", "width": 1.5},
                hoverinfo="skip",
            ),
            **where,
        )
        fig.add_trace(
            go.Scatter(
                name=result.key,
                legendgroup=result.key,
                showlegend=col == 1,
                x=o.sample_reference,
                y=o.sample_variant,
                mode="markers",
                marker={"color": color, "size": 6, "opacity": 0.55},
                hovertemplate=f"<b>{_esc(result.key)}</b><br>original %{{x:.5g}}<br>variant %{{y:.5g}}<extra></extra>",
            ),
            **where,
        )
        suffix = "" if col == 1 else str(col)
        fig.update_yaxes(scaleanchor=f"x{suffix}", scaleratio=1, **where)
    fig.update_xaxes(title_text="Original output value (output units)")
    if len(plottable) > 1:
        fig.update_yaxes(title_text="Variant output value (output units)", row=1, col=1)
    else:
        fig.update_yaxes(title_text="Variant output value (output units)")
    return fig


# ---------------------------------------------------------------- pareto


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


# ---------------------------------------------------------------- model summary


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


# ---------------------------------------------------------------- all


PRECISION_COLORS = {"float32": "#888888", "float16": "#4C78A8", "int8": "#F58518", "int4": "#54A24B"}


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


def all_figures(c: Comparison) -> dict[str, go.Figure]:
    """Every chart of a comparison, in reading order (used by the HTML report).

    Keys: ``pareto``, ``size``, ``latency``, ``throughput`` (only with two or
    more batch sizes), ``parity_error``, then ``parity_scatter:<key>`` for each
    usable variant that changed something.
    """
    figures: dict[str, go.Figure] = {
        "pareto": pareto_chart(c),
        "size": size_chart(c),
        "latency": latency_chart(c),
    }
    threads, _ = _latency_threads(c, None)
    if len({s.batch for r in c.all for s in r.latency if s.threads == threads}) > 1:
        figures["throughput"] = throughput_chart(c)
    figures["parity_error"] = parity_error_chart(c)
    for result in c.variants:
        if not result.ok or result.parity is None or result.record.get("tensors_changed", 1) == 0:
            continue
        if any(_plottable(o) for o in result.parity.outputs):
            figures[f"parity_scatter:{result.key}"] = parity_scatter_chart(c, result.key)
    for result in c.variants:
        if result.ok and result.record.get("details", {}).get("precision_map"):
            figures[f"precision:{result.key}"] = precision_chart(c, result.key)
    if getattr(c, "browser", None):
        figures["browser"] = browser_chart(c)
    return figures


# ---------------------------------------------------------------- in the user's browser


def browser_chart(c: Comparison, runs: list | None = None) -> go.Figure:
    """Server CPU vs your browser: median run and session creation per model, ONNX Runtime on the server
    (1 thread) beside ONNX Runtime Web in the browser that ran the panel, on the same input."""
    from shrinkray.measure.browser import browser_name

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


__all__ = [
    "ORIGINAL_COLOR",
    "PALETTE",
    "all_figures",
    "browser_chart",
    "byte_unit",
    "empty_figure",
    "latency_chart",
    "op_histogram_chart",
    "pareto_chart",
    "parity_error_chart",
    "precision_chart",
    "parity_scatter_chart",
    "size_chart",
    "throughput_chart",
    "variant_colors",
    "weight_bytes_chart",
]


# ---------------------------------------------------------------- pricing


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

    ``curves`` comes from :func:`shrinkray.pricing.cost_curve`; the first
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

"""Parity charts: each output's error against its limit, and a variant's outputs against the original's."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from shrinkray.measure.parity import OutputParity
from shrinkray.measure.results import Comparison, VariantResult
from shrinkray.report.charts.style import (
    FONT_SIZE,
    HEIGHT,
    LABEL_BACKGROUND,
    MUTED_COLOR,
    TOLERANCE_COLOR,
    _esc,
    _failed_note,
    _figure,
    empty_figure,
    variant_colors,
)


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

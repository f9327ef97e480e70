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

import plotly.graph_objects as go

from shrinkray.measure.results import Comparison
from shrinkray.report.charts.browser import browser_chart
from shrinkray.report.charts.latency import _latency_threads, latency_chart, throughput_chart
from shrinkray.report.charts.model import op_histogram_chart, weight_bytes_chart
from shrinkray.report.charts.pareto import pareto_chart
from shrinkray.report.charts.parity import _plottable, parity_error_chart, parity_scatter_chart
from shrinkray.report.charts.precision import precision_chart
from shrinkray.report.charts.pricing import cost_curve_chart
from shrinkray.report.charts.sizes import size_chart
from shrinkray.report.charts.style import (
    COST_DASHES,
    HEIGHT,
    ORIGINAL_COLOR,
    PALETTE,
    byte_unit,
    empty_figure,
    variant_colors,
    wrap_subtitle,
)

__all__ = [
    "COST_DASHES", "HEIGHT", "ORIGINAL_COLOR", "PALETTE", "all_figures", "browser_chart", "byte_unit", "cost_curve_chart", "empty_figure", "latency_chart",
    "op_histogram_chart", "pareto_chart", "parity_error_chart", "parity_scatter_chart", "precision_chart",
    "size_chart", "throughput_chart", "variant_colors", "weight_bytes_chart", "wrap_subtitle",
]  # fmt: skip


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

"""Shared look of every chart: colours per variant, the template, byte units, wrapped subtitles, empty states."""

from __future__ import annotations

from collections.abc import Iterable

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from shrinkray.measure.results import ORIGINAL, Comparison, VariantResult
from shrinkray.text_safety import plotly_label

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
    wrap: int = SUBTITLE_CHARS,
) -> go.Figure:
    """An empty figure with the shared look: template, fonts, title, subtitle, legend at the bottom.

    ``notes`` (e.g. which variants are missing) are appended to the subtitle;
    ``rows``/``cols`` > 1 make a grid of panels titled ``panel_titles``; ``wrap``: the subtitle's characters
    per line (fewer for a chart drawn in half a page).
    """
    extra = [n for n in notes if n]
    sub = wrap_subtitle(" · ".join([subtitle, *extra]) if extra else subtitle, wrap)
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

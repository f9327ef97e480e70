"""What changes, drawn: a variant's worst examples per output (:mod:`shrinkray.measure.examples`) as HTML,
Markdown or one line of text, beside the original's.

One renderer for every front end: the app shows :func:`examples_html` (with :data:`CSS`), the one-page
export and the HTML report embed it, the Markdown report uses :func:`examples_markdown` and the CLI
:func:`worst_line`. No scripts: boxes are positioned boxes over the input picture, marks are ``<mark>``.
Text from a model (decoded lines, continuations, output names) is escaped and its control characters shown
(:func:`~shrinkray.text_safety.visible`) wherever it goes.
"""

from __future__ import annotations

import base64
import html
import math
import re

from shrinkray.measure.examples import Box, Example, OutputExamples, TopClass
from shrinkray.measure.results import VariantResult
from shrinkray.text_safety import markdown_code, markdown_text, one_line, visible

#: What each kind is called for a reader.
KIND_WORDS = {"scores": "class scores", "continuous": "values", "probability": "yes/no probabilities",
              "embedding": "embeddings", "map": "probability map",
              "detections": "detections", "exact": "exact values", "generation": "generated text"}  # fmt: skip
#: How each box status is said.
STATUS_WORDS = {"kept": "kept", "moved": "moved", "lost": "lost", "new": "new"}

#: Styles of the fragments (prefixed ``sr-``): colours that read on a light and a dark page alike.
CSS = """
.sr-changes { margin: 0 0 1rem; }
.sr-out { margin: .6rem 0 .3rem; font-size: 1rem; font-weight: 600; overflow-wrap: anywhere; }
.sr-out span { font-weight: 400; opacity: .75; font-size: .9em; }
.sr-ex { border-top: 1px solid rgba(128,128,128,.35); padding: .4rem 0; }
.sr-where { font-size: .85em; opacity: .75; margin-bottom: .2rem; }
.sr-pair { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 170px), 1fr)); gap: .4rem 1rem; }
.sr-side { min-width: 0; }
.sr-label { font-size: .8em; font-weight: 600; opacity: .8; overflow-wrap: anywhere; }
.sr-text { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .9em;
           white-space: pre-wrap; overflow-wrap: anywhere; }
.sr-changes mark { background: #ffd33d; color: #1f2328; border-radius: 2px; padding: 0 1px; }
.sr-changes table { border-collapse: collapse; font-size: .88em; width: 100%; max-width: 24rem; }
.sr-changes table.sr-values { max-width: 40rem; }
.sr-changes th, .sr-changes td { text-align: left; padding: .05rem .5rem .05rem 0; line-height: 1.3;
                                 border-bottom: 1px solid rgba(128,128,128,.25); }
.sr-changes td.n, .sr-changes th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.sr-frame { position: relative; width: 100%; max-width: 320px; background: rgba(128,128,128,.18);
            overflow: hidden; border-radius: 3px; }
.sr-frame img { position: absolute; inset: 0; width: 100%; height: 100%; display: block; }
.sr-box { position: absolute; border: 2px solid #0969da; box-sizing: border-box; }
.sr-box.moved { border-color: #f0883e; } .sr-box.lost { border-color: #e5534b; border-style: dashed; }
.sr-box.new { border-color: #c94fd6; }
.sr-legend { font-size: .8em; opacity: .85; margin-top: .2rem; }
.sr-mask { display: block; width: 100%; max-width: 320px; height: 128px; image-rendering: pixelated;
           border-radius: 3px; }
.sr-wave { display: block; width: 100%; max-width: 320px; height: 64px; background: rgba(128,128,128,.12);
           border-radius: 3px; }
.sr-k { color: #2f81f7; } .sr-m { color: #f0883e; } .sr-l { color: #e5534b; } .sr-n { color: #c94fd6; }
"""

_DATA_URI = re.compile(r"data:image/(jpeg|png);base64,[A-Za-z0-9+/]+={0,2}")


def _h(text: object) -> str:
    return html.escape(visible(text), quote=True)


def _num(value: float | None, spec: str = ".4g") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return format(value, spec)


def segments(text: str, marks: list[list[int]]) -> list[tuple[str, bool]]:
    """``text`` cut at its marks: (piece, marked) in order (marks out of range or overlapping are clipped)."""
    pieces, at = [], 0
    for span in sorted(marks):
        if len(span) != 2:
            continue
        start, end = max(int(span[0]), at), min(int(span[1]), len(text))
        if start >= end:
            continue
        if start > at:
            pieces.append((text[at:start], False))
        pieces.append((text[start:end], True))
        at = end
    if at < len(text):
        pieces.append((text[at:], False))
    return pieces


def marked_html(text: str, marks: list[list[int]]) -> str:
    """Escaped text with the marked characters in ``<mark>``."""
    return "".join(f"<mark>{_h(p)}</mark>" if marked else _h(p) for p, marked in segments(text, marks)) or "<i>(empty)</i>"


def summary(oe: OutputExamples) -> str:
    """'class scores · top-1 class changed on 6 of 512 inputs · worst first by ...' in words."""
    kind = "decoded text" if oe.view == "text" and oe.kind == "scores" else KIND_WORDS.get(oe.kind, oe.kind)
    kind = {"waveform": "waveform", "mask": "mask"}.get(oe.view, kind)
    if oe.view in ("values", "waveform", "mask"):
        told = f"{oe.inputs} input{'s' if oe.inputs != 1 else ''}"
    else:
        told = f"changed on {oe.changed} of {oe.inputs} input{'s' if oe.inputs != 1 else ''}"
    return f"{kind} · {told} · worst first by {oe.measure}"


# ---------------------------------------------------------------------------------------------- HTML


def _class_name(t: TopClass) -> str:
    return f"{t.label!r} ({t.index})" if t.label else f"class {t.index}"


def _classes_html(top: list[TopClass], other: list[TopClass]) -> str:
    first_other = other[0].index if other else None
    rows = []
    for rank, t in enumerate(top):
        name = _class_name(t)
        cell = f"<mark>{_h(name)}</mark>" if rank == 0 and first_other is not None and t.index != first_other else _h(name)
        rows.append(f'<tr><td>{cell}</td><td class="n">{_h(_num(t.score))}</td></tr>')
    return f'<table><tr><th>Top classes</th><th class="n">Score</th></tr>{"".join(rows)}</table>'


def _box_style(b: Box, frame: list[float]) -> str:
    width, height = (frame + [1.0, 1.0])[:2] if len(frame) >= 2 else (1.0, 1.0)
    width, height = max(float(width), 1e-9), max(float(height), 1e-9)

    def pct(v: float, size: float) -> float:
        return max(min(100.0 * v / size, 100.0), 0.0) if math.isfinite(v) else 0.0

    left, top = pct(b.x1, width), pct(b.y1, height)
    return (f"left:{left:.2f}%;top:{top:.2f}%;width:{max(pct(b.x2, width) - left, 0.3):.2f}%;"
            f"height:{max(pct(b.y2, height) - top, 0.3):.2f}%")  # fmt: skip


def _boxes_html(boxes: list[Box], frame: list[float], image: str) -> str:
    width, height = (frame[0], frame[1]) if len(frame) >= 2 and frame[0] > 0 and frame[1] > 0 else (4.0, 3.0)
    picture = f'<img alt="the input" src="{image}">' if image and _DATA_URI.fullmatch(image) else ""
    drawn = "".join(f'<div class="sr-box {_h(b.status if b.status in STATUS_WORDS else "kept")}" '
                    f'style="{_box_style(b, [width, height])}" title="{_h(_box_words(b))}"></div>' for b in boxes)  # fmt: skip
    counts = _counts(boxes)
    frame_html = (f'<div class="sr-frame" style="aspect-ratio:{width:.4g} / {height:.4g}">{picture}{drawn}</div>'
                  f'<div class="sr-legend">{counts}</div>')  # fmt: skip
    if picture or not boxes:
        return frame_html
    listed = "".join(f"<tr><td>{_h(_box_words(b))}</td></tr>" for b in boxes[:8])
    more = f"<tr><td>… {len(boxes) - 8} more</td></tr>" if len(boxes) > 8 else ""
    return frame_html + f"<table>{listed}{more}</table>"


#: A waveform's drawing: width and height in its own units (it scales to its column).
WAVE_WIDTH, WAVE_HEIGHT = 320, 64


def _wave_points(wave: list[list[float]], scale: float) -> str:
    """The envelope as one polygon: the highs left to right, then the lows back."""
    step = WAVE_WIDTH / max(len(wave) - 1, 1)
    mid = WAVE_HEIGHT / 2

    def y(v: float) -> str:
        v = v if math.isfinite(v) else 0.0
        return f"{mid - max(min(v / scale, 1.0), -1.0) * (mid - 2):.1f}"

    highs = [f"{i * step:.1f},{y(hi)}" for i, (_, hi) in enumerate(wave)]
    lows = [f"{i * step:.1f},{y(lo)}" for i, (lo, _) in reversed(list(enumerate(wave)))]
    return " ".join(highs + lows)


def _wave_html(own: list[list[float]], under: list[list[float]]) -> str:
    """An envelope (``own``, filled) over another's outline (``under``: the original's, beneath the variant's),
    on one vertical scale; no scripts."""
    if not own:
        return "<i>(no samples)</i>"
    values = [abs(v) for pair in (*own, *under) for v in pair if math.isfinite(v)]
    scale = max(values, default=0.0) or 1.0
    outline = (f'<polygon points="{_wave_points(under, scale)}" fill="none" stroke="#8b949e" stroke-width="1"/>'
               if under else "")  # fmt: skip
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WAVE_WIDTH} {WAVE_HEIGHT}" '
           f'preserveAspectRatio="none">{outline}<polygon points="{_wave_points(own, scale)}" fill="#2f81f7" '
           f'fill-opacity=".55" stroke="#2f81f7" stroke-width=".6"/></svg>')  # fmt: skip
    # an image, not inline SVG: the app's HTML element keeps images and drops inline SVG; an SVG image runs nothing
    data = base64.b64encode(svg.encode()).decode()
    return f'<img class="sr-wave" alt="waveform, peak {_h(_num(scale))}" src="data:image/svg+xml;base64,{data}">'



_STATUS_CLASS = {"kept": "sr-k", "moved": "sr-m", "lost": "sr-l", "new": "sr-n"}


def _counts(boxes: list[Box]) -> str:
    if not boxes:
        return "no box"
    parts = []
    for status in STATUS_WORDS:
        n = sum(b.status == status for b in boxes)
        if n:
            parts.append(f'<span class="{_STATUS_CLASS[status]}">■</span> {n} {STATUS_WORDS[status]}')
    return " · ".join(parts)


def _box_words(b: Box) -> str:
    return (f"class {b.label} ({b.score:.2f}) at {b.x1:.0f},{b.y1:.0f}–{b.x2:.0f},{b.y2:.0f}: "
            f"{STATUS_WORDS.get(b.status, b.status)}")  # fmt: skip


def _side(e: Example, oe: OutputExamples, original: bool) -> str:
    if oe.view == "text":
        return f'<div class="sr-text">{marked_html(*(( e.original_text, e.original_marks) if original else (e.variant_text, e.variant_marks)))}</div>'  # noqa: E501
    if oe.view == "classes":
        return _classes_html(*((e.original_top, e.variant_top) if original else (e.variant_top, e.original_top)))
    if oe.view == "waveform":
        return _wave_html(e.original_wave, []) if original else _wave_html(e.variant_wave, e.original_wave)
    if oe.view == "mask":
        picture = e.original_mask if original else e.variant_mask
        return (f'<img class="sr-mask" alt="mask" src="{picture}">' if picture and _DATA_URI.fullmatch(picture)
                else "<i>(no picture)</i>")  # fmt: skip
    return _boxes_html(e.original_boxes if original else e.variant_boxes, e.frame, e.image)


def examples_html(oe: OutputExamples, variant: str, most: int | None = None) -> str:
    """One output's worst examples, the original beside ``variant`` (an HTML fragment; style it with CSS)."""
    examples = oe.examples[:most] if most is not None else oe.examples
    head = f'<div class="sr-out"><code>{_h(oe.output)}</code> <span>{_h(summary(oe))}</span></div>'
    if oe.view == "values":
        rows = "".join(
            f'<tr><td>{_h(e.where)}</td><td class="n">{_h(_num(e.differs))}</td><td class="n">{_h(_num(e.max_abs_diff))}</td>'
            f'<td class="n">{_h(_num(e.cosine, ".6f"))}</td></tr>' for e in examples
        )  # fmt: skip
        table = (f'<table class="sr-values"><tr><th>Input</th><th class="n">{_h(oe.measure)}</th><th class="n">Max abs diff</th>'
                 f'<th class="n">Cosine</th></tr>{rows}</table>')  # fmt: skip
        return f'<div class="sr-changes">{head}{table}</div>'
    items = []
    for e in examples:
        same = "" if e.changed or e.original_marks or e.variant_marks else " (no visible change)"
        if oe.view in ("waveform", "mask"):  # what the eye may miss on a drawing: the numbers
            under = " (the original in grey under the variant)" if oe.view == "waveform" else ""
            same = (f" · {oe.measure} {_num(e.differs)}, max abs diff {_num(e.max_abs_diff)}, "
                    f"cosine {_num(e.cosine, '.6f')}{under}")  # fmt: skip
        items.append(
            f'<div class="sr-ex"><div class="sr-where">{_h(e.where + same)}</div><div class="sr-pair">'
            f'<div class="sr-side"><div class="sr-label">Original</div>{_side(e, oe, True)}</div>'
            f'<div class="sr-side"><div class="sr-label">{_h(variant)}</div>{_side(e, oe, False)}</div></div></div>'
        )
    return f'<div class="sr-changes">{head}{"".join(items)}</div>'


def variant_html(result: VariantResult, most: int | None = None) -> str:
    """Every output's worst examples of ``result`` ("" when none were kept)."""
    return "".join(examples_html(oe, result.key, most) for oe in result.examples)


# ---------------------------------------------------------------------------------------------- text


def _plain_marked(text: str, marks: list[list[int]]) -> str:
    """Text with the differing characters in [brackets], on one line."""
    return "".join(f"[{p}]" if marked else p for p, marked in segments(text, marks))


def _top_words(top: list[TopClass]) -> str:
    return f"{_class_name(top[0])} ({_num(top[0].score, '.3g')})" if top else "–"


def example_words(oe: OutputExamples, e: Example) -> str:
    """One example in one line of plain text (marks as [brackets])."""
    if oe.view == "text":
        a = _plain_marked(e.original_text, e.original_marks)
        b = _plain_marked(e.variant_text, e.variant_marks)
        return f'{e.where}: "{one_line(a)}" → "{one_line(b)}"'
    if oe.view == "classes":
        return f"{e.where}: top {_top_words(e.original_top)} → {_top_words(e.variant_top)}"
    if oe.view == "boxes":
        a = e.original_boxes
        new = sum(b.status == "new" for b in e.variant_boxes)
        parts = [f"{sum(b.status == s for b in a)} {s}" for s in ("moved", "lost") if any(b.status == s for b in a)]
        if new:
            parts.append(f"{new} new")
        kept = sum(b.status == "kept" for b in a)
        what = "text boxes" if oe.measure.startswith("text boxes") else "regions" if oe.kind == "map" else "boxes"
        return f"{e.where}: {', '.join(parts) or 'all kept'} ({kept} of {len(a)} {what} kept)"
    return (f"{e.where}: {oe.measure} {_num(e.differs)}, max abs diff {_num(e.max_abs_diff)}, "
            f"cosine {_num(e.cosine, '.6f')}")  # fmt: skip


def worst_line(oe: OutputExamples) -> str:
    """The worst example of an output in one line ("" without one): the CLI's compare output."""
    e = oe.worst
    if e is None:
        return ""
    return f"{one_line(oe.output)}: {example_words(oe, e)}"


def _md_piece(piece: str, marked: bool) -> str:
    """A piece of a marked text in Markdown, its spaces at either end kept (Markdown escaping trims them)."""
    lead = " " if piece[:1].isspace() else ""
    trail = " " if piece[-1:].isspace() and piece.strip() else ""
    body = markdown_text(piece)
    return lead + (f"**{body}**" if marked and body else body) + trail


def examples_markdown(oe: OutputExamples, variant: str, most: int | None = None) -> list[str]:
    """One output's worst examples as Markdown lines (differing characters in bold)."""
    examples = oe.examples[:most] if most is not None else oe.examples
    lines = [f"{markdown_code(oe.output)} ({markdown_text(summary(oe))}):", ""]
    for e in examples:
        if oe.view == "text":
            def md(text: str, marks: list[list[int]]) -> str:
                return "".join(_md_piece(p, m) for p, m in segments(text, marks)) or "(empty)"

            lines.append(f"- {markdown_text(e.where)}: original “{md(e.original_text, e.original_marks)}”, "
                         f"{markdown_code(variant)} “{md(e.variant_text, e.variant_marks)}”")  # fmt: skip
        else:
            lines.append(f"- {markdown_text(example_words(oe, e))}")
    return [*lines, ""]


__all__ = ["CSS", "example_words", "examples_html", "examples_markdown", "marked_html", "segments", "summary",
           "variant_html", "worst_line"]  # fmt: skip

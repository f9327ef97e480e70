"""The headline card as a PNG: size as served, the wait on a connection, the money a year and the verdict
sentence, drawn at 1200x630 (a link preview's size) to paste into a slide, a chat or a ticket.

The words are the headline's own (:class:`~shrinkray.verdict.headline.Headline`): its size, wait and money
sentences and the verdict sentence, never reworded; the big figures above them are the headline's numbers,
formatted as every other surface formats them. Long sentences wrap, and shrink to fit their box.

The font is the one Pillow ships (``ImageFont.load_default``, Aileron Regular): nothing is downloaded and the
picture is the same on every machine. Aileron lacks a few characters the headline uses: the arrow, minus
sign, dashes and multiplication sign are drawn as lines; accented letters lose their accents; anything else
missing shows as Pillow's empty box.
"""

from __future__ import annotations

import io
import unicodedata
from functools import cache

from PIL import Image, ImageDraw, ImageFont

from shrinkray import pricing as _pricing
from shrinkray.measure.confidence import FAIL, PASS, UNDECIDED
from shrinkray.measure.results import Comparison
from shrinkray.units import format_bytes, format_seconds
from shrinkray.verdict.headline import Headline, default_pricing, headline_of

#: The card's size in pixels: the Open Graph / link-preview size.
WIDTH, HEIGHT = 1200, 630
#: The four parts' regions, (left, top, right, bottom); the tests look for ink in each.
PAD, GAP = 48, 22
_BOX_W = (WIDTH - 2 * PAD - 2 * GAP) // 3
REGIONS: dict[str, tuple[int, int, int, int]] = {
    "size": (PAD, 132, PAD + _BOX_W, 370),
    "wait": (PAD + _BOX_W + GAP, 132, PAD + 2 * _BOX_W + GAP, 370),
    "money": (PAD + 2 * (_BOX_W + GAP), 132, WIDTH - PAD, 370),
    "verdict": (PAD, 392, WIDTH - PAD, 572),
}

BACKGROUND = (255, 255, 255)
INK, MUTED, BOX = (31, 35, 40), (87, 96, 106), (246, 248, 250)
#: status → (accent, tint); the original kept reads as "undecided" amber
_COLOURS = {
    PASS: ((26, 127, 55), (218, 251, 225)),
    FAIL: ((207, 34, 46), (255, 235, 233)),
    UNDECIDED: ((154, 103, 0), (255, 248, 197)),
}
_NEUTRAL = ((9, 105, 218), (221, 244, 255))

# ---------------------------------------------------------------- text with the glyphs Aileron lacks

#: ASCII stand-ins for characters the font lacks and that have an unambiguous plain form.
_PLAIN = {"≥": ">=", "≤": "<=", "≈": "~", "÷": "/", "µ": "u", "²": "^2", "³": "^3", "⟶": "→", "：": ":"}
#: Characters drawn as lines, and their width as a share of the font size.
_DRAWN = {"→": 0.95, "−": 0.55, "–": 0.5, "—": 0.9, "×": 0.6}


@cache
def _font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=size)  # type: ignore[return-value]  # FreeType: Pillow >= 10.1


@cache
def _has_glyph(size: int, char: str) -> bool:
    font = _font(size)
    return bytes(font.getmask(char)) != bytes(font.getmask("\uffff")) or char.isspace()


def _printable(text: str, size: int) -> str:
    """``text`` with the characters the font lacks replaced by a plain form or stripped of accents."""
    out = []
    for char in text:
        char = _PLAIN.get(char, char)
        if len(char) > 1 or char in _DRAWN or _has_glyph(size, char):
            out.append(char)
            continue
        base = "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
        out.append(base if base and all(_has_glyph(size, c) for c in base) else char)
    return "".join(out)


def _runs(text: str) -> list[str]:
    """``text`` split into runs of font text and single drawn characters."""
    runs: list[str] = []
    for char in text:
        if char in _DRAWN or not runs or runs[-1] in _DRAWN:
            runs.append(char)
        else:
            runs[-1] += char
    return runs


def _stroke(size: int) -> int:
    """The outline that makes the regular font read as bold (none under 30 px, where it smudges)."""
    return size // 28 if size >= 30 else 0


def _length(text: str, size: int, bold: bool = False) -> float:
    font = _font(size)
    total = 0.0
    for run in _runs(_printable(text, size)):
        total += _DRAWN[run] * size if run in _DRAWN else font.getlength(run)
    return total + (2 * _stroke(size) if bold else 0)


def _draw_glyph(draw: ImageDraw.ImageDraw, x: float, y: float, char: str, size: int, fill, bold: bool) -> None:
    """Draw one of :data:`_DRAWN` with its left edge at ``x`` on a line whose top is ``y``."""
    font = _font(size)
    top, bottom = font.getbbox("+")[1], font.getbbox("+")[3]
    mid = y + (top + bottom) / 2
    weight = max(2, round(size / (9 if bold else 13)))
    w = _DRAWN[char] * size
    left, right = x + 0.08 * size, x + w - 0.08 * size
    if char == "→":
        head = 0.22 * size
        draw.line([(left, mid), (right - weight / 2, mid)], fill=fill, width=weight)
        draw.line([(right - head, mid - head), (right, mid), (right - head, mid + head)], fill=fill, width=weight,
                  joint="curve")  # fmt: skip
    elif char == "×":
        half = (right - left) / 2
        draw.line([(left, mid - half), (right, mid + half)], fill=fill, width=weight)
        draw.line([(left, mid + half), (right, mid - half)], fill=fill, width=weight)
    else:  # minus and dashes
        draw.line([(left, mid), (right, mid)], fill=fill, width=weight)


def _draw_text(draw: ImageDraw.ImageDraw, xy: tuple[float, float], text: str, size: int, fill,
               bold: bool = False) -> None:  # fmt: skip
    x, y = xy
    font = _font(size)
    stroke = _stroke(size) if bold else 0
    for run in _runs(_printable(text, size)):
        if run in _DRAWN:
            _draw_glyph(draw, x, y, run, size, fill, bold)
            x += _DRAWN[run] * size
        else:
            draw.text((x, y), run, font=font, fill=fill, stroke_width=stroke, stroke_fill=fill)
            x += font.getlength(run)


def _wrap(text: str, size: int, width: float, bold: bool = False) -> list[str]:
    """Lines of ``text`` no wider than ``width``; a word longer than a line is cut where it must be."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        candidate = f"{line} {word}" if line else word
        if _length(candidate, size, bold) <= width:
            line = candidate
            continue
        if line:
            lines.append(line)
        line = ""
        while _length(word, size, bold) > width:  # a long file name: break it by characters
            cut = max(1, max(i for i in range(1, len(word) + 1) if _length(word[:i], size, bold) <= width or i == 1))
            lines.append(word[:cut])
            word = word[cut:]
        line = word
    if line:
        lines.append(line)
    return lines


def _ellipsize(line: str, size: int, width: float, bold: bool = False) -> str:
    while line and _length(line + "…", size, bold) > width:
        line = line[:-1]
    return line.rstrip() + "…"


def _fit(text: str, sizes: range | tuple[int, ...], width: float, height: float, bold: bool = False,
         spacing: float = 1.25) -> tuple[int, list[str]]:  # fmt: skip
    """The largest of ``sizes`` at which ``text`` wraps into ``width`` x ``height``; at the smallest, the
    lines that fit, the last one ending in an ellipsis."""
    sizes = tuple(sizes)
    for size in sizes:
        lines = _wrap(text, size, width, bold)
        if len(lines) * size * spacing <= height:
            return size, lines
    size = sizes[-1]
    lines = _wrap(text, size, width, bold)
    keep = max(1, int(height // (size * spacing)))
    if len(lines) > keep:
        lines = [*lines[: keep - 1], _ellipsize(lines[keep - 1], size, width, bold)]
    return size, lines


def _draw_lines(draw, x: float, y: float, lines: list[str], size: int, fill, bold: bool = False,
                spacing: float = 1.25) -> float:  # fmt: skip
    for line in lines:
        _draw_text(draw, (x, y), line, size, fill, bold)
        y += size * spacing
    return y


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


# ---------------------------------------------------------------- the card


def _part(draw, box, label: str, value: str, detail: str, accent) -> None:
    left, top, right, bottom = box
    draw.rounded_rectangle(box, radius=14, fill=BOX)
    draw.rectangle((left, top + 14, left + 5, bottom - 14), fill=accent)
    inner = right - left - 2 * 24
    x, y = left + 24, top + 20
    size, lines = _fit(label, (22, 20, 18), inner, 28)
    _draw_lines(draw, x, y, lines[:1], size, MUTED)
    y += 34
    size, lines = _fit(value, (54, 48, 42, 36, 30), inner, 62, bold=True)
    _draw_lines(draw, x, y, lines[:1], size, INK, bold=True)
    y += 70
    size, lines = _fit(detail, (22, 21, 20, 19, 18, 17, 16), inner, bottom - 16 - y, spacing=1.3)
    _draw_lines(draw, x, y, lines, size, INK, spacing=1.3)


def _title(h: Headline, width: float) -> tuple[int, str]:
    """The card's title on one line; a model name too long for it is cut in the middle, the variant kept."""
    model = h.model
    while True:
        title = f"Keep the original: {model}" if h.variant is None else f"{model} → {h.variant}"
        for size in (52, 46, 40, 34):
            if _length(title, size, bold=True) <= width:
                return size, title
        if len(model) <= 8:
            return 34, _ellipsize(title, 34, width, bold=True)
        half = (len(model.replace("…", "")) - 1) // 2
        model = model.replace("…", "")[:half] + "…" + model.replace("…", "")[-half:]


def card_image(h: Headline) -> Image.Image:
    """Draw ``h`` as a :data:`WIDTH` x :data:`HEIGHT` RGB picture."""
    keep = h.variant is None
    accent, tint = _COLOURS[UNDECIDED] if keep else _COLOURS.get(h.verdict_status, _NEUTRAL)
    image = Image.new("RGB", (WIDTH, HEIGHT), BACKGROUND)
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, WIDTH, 12), fill=accent)

    size, title = _title(h, WIDTH - 2 * PAD)
    _draw_text(draw, (PAD, 40 + (52 - size) / 2), title, size, INK, bold=True)

    shown = h.original_bytes if keep or h.variant_bytes is None else h.variant_bytes
    _part(draw, REGIONS["size"], f"Size as served ({h.delivery})", "–" if shown is None else format_bytes(shown),
          _sentence(h.size_text()), accent)  # fmt: skip
    w = h.wait
    if w is None:
        _part(draw, REGIONS["wait"], "Download", "–", "The wait was not measured: no size to download.", accent)
    else:
        detail = _sentence(w.sentence()) + (f". {_sentence(h.ready_text())}." if h.ready_text() else ".")
        _part(draw, REGIONS["wait"], f"Download on {w.connection.name}", format_seconds(w.variant_s or w.original_s),
              detail, accent)  # fmt: skip
    if h.saving_per_year is None:
        _part(draw, REGIONS["money"], "Saved a year", "–", "No variant is recommended, so nothing is saved."
              if keep else "Not priced.", accent)  # fmt: skip
    else:
        _part(draw, REGIONS["money"], "Saved a year", _pricing.format_money(h.saving_per_year, h.currency),
              _sentence(h.money_text()) + ".", accent)  # fmt: skip

    box = REGIONS["verdict"]
    left, top, right, bottom = box
    draw.rounded_rectangle(box, radius=14, fill=tint)
    draw.rectangle((left, top + 14, left + 8, bottom - 14), fill=accent)
    label = "Keep the original" if keep else f"Its verdict: {h.verdict_label}"
    _draw_text(draw, (left + 32, top + 20), label, 24, accent, bold=True)
    sentence = (h.reason or "No variant passed.") if keep else h.verdict_sentence
    size, lines = _fit(sentence, (30, 28, 26, 24, 22, 20, 18, 16), right - left - 64, bottom - top - 72)
    _draw_lines(draw, left + 32, top + 60, lines, size, INK)

    _draw_text(draw, (PAD, HEIGHT - 44), "Shrink Ray Studio", 20, MUTED, bold=True)
    return image


def headline_png(h: Headline) -> bytes:
    """``h`` drawn by :func:`card_image`, as PNG bytes."""
    out = io.BytesIO()
    card_image(h).save(out, format="PNG")
    return out.getvalue()


def to_card_png(c: Comparison, pricing: _pricing.PricingChoice | None = None, connection: str | None = None) -> bytes:
    """The headline card of ``c`` (as :func:`~shrinkray.verdict.headline.headline_of` makes it) as PNG bytes."""
    return headline_png(headline_of(c, pricing or default_pricing(), connection))


__all__ = ["HEIGHT", "REGIONS", "WIDTH", "card_image", "headline_png", "to_card_png"]

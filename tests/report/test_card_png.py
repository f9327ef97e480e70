"""The headline card as a PNG: 1200x630, the four parts each drawn in its region, the headline's own words."""

from __future__ import annotations

import dataclasses
import io

import pytest
from PIL import Image

from shrinkray.measure.results import CompareSettings
from shrinkray.pipeline.compare import compare
from shrinkray.report import card_png
from shrinkray.report.card_png import HEIGHT, REGIONS, WIDTH, card_image, headline_png, to_card_png
from shrinkray.report.formats import write_reports
from shrinkray.verdict.headline import headline_of


@pytest.fixture(scope="module")
def cnn():
    from helpers import cached_sample

    methods = [("weights-int8", {}), ("float16", {})]
    return compare(cached_sample("cnn"), CompareSettings(methods=methods, latency=False, brotli_quality=1))


def _drawn(monkeypatch, h) -> list[tuple[float, float, str]]:
    """Every piece of text the card draws, with where."""
    seen: list[tuple[float, float, str]] = []
    real = card_png._draw_text

    def record(draw, xy, text, size, fill, bold=False):
        seen.append((xy[0], xy[1], text))
        real(draw, xy, text, size, fill, bold)

    monkeypatch.setattr(card_png, "_draw_text", record)
    card_image(h)
    return seen


def _inside(box, x, y) -> bool:
    left, top, right, bottom = box
    return left <= x <= right and top <= y <= bottom


def test_the_png_opens_at_link_preview_size_with_ink_in_each_of_the_four_parts(cnn):
    image = Image.open(io.BytesIO(to_card_png(cnn)))
    assert image.format == "PNG" and image.size == (WIDTH, HEIGHT) == (1200, 630)
    rgb = image.convert("RGB")
    background = rgb.getpixel((5, HEIGHT - 5))
    assert set(REGIONS) == {"size", "wait", "money", "verdict"}
    for name, box in REGIONS.items():
        part = rgb.crop(box)
        colours = part.getcolors(maxcolors=1_000_000)
        assert len(colours) >= 20, name  # text is anti-aliased: many shades, not a flat box
        ink = sum(count for count, colour in colours if sum(colour) < 300)  # dark text
        assert ink > 500, (name, ink)
        assert sum(count for count, colour in colours if colour != background) > 0.5 * part.width * part.height


def test_the_words_are_the_headlines_own(cnn, monkeypatch):
    h = headline_of(cnn)
    drawn = _drawn(monkeypatch, h)
    text = " ".join(t for _, _, t in drawn)
    assert f"{h.model} → {h.variant}" in text
    for sentence in (h.size_text(), h.wait.sentence()[1:], h.money_text()[1:], h.verdict_sentence):
        assert sentence in text, sentence
    verdict_lines = [t for x, y, t in drawn if _inside(REGIONS["verdict"], x, y)]
    assert " ".join(verdict_lines).endswith(h.verdict_sentence) and h.verdict_label in verdict_lines[0]


def test_a_long_sentence_wraps_inside_its_box(cnn, monkeypatch):
    h = headline_of(cnn)
    long = dataclasses.replace(h, verdict_sentence="Fails: " + "output 'logits' changes the top token on 3 of 40 prompts; " * 6)
    drawn = [(x, y, t) for x, y, t in _drawn(monkeypatch, long) if _inside(REGIONS["verdict"], x, y)]
    assert len(drawn) >= 4  # the label and three or more lines
    left, top, right, bottom = REGIONS["verdict"]
    for _, y, line in drawn:
        assert card_png._length(line, 16) <= right - left and y < bottom - 16


def test_a_long_model_name_keeps_the_variant_in_the_title(cnn, monkeypatch):
    h = dataclasses.replace(headline_of(cnn), model="a-very-long-model-name-" * 6)
    size, title = card_png._title(h, WIDTH - 2 * card_png.PAD)
    assert title.endswith(f"→ {h.variant}") and "…" in title and size == 34


def test_keeping_the_original_says_why(cnn, monkeypatch):
    h = dataclasses.replace(headline_of(cnn), variant=None, variant_bytes=None, saving_per_year=None,
                            verdict_sentence="", reason="No variant passes: weights-int4 fails.")  # fmt: skip
    text = " ".join(t for _, _, t in _drawn(monkeypatch, h))
    assert f"Keep the original: {h.model}" in text and h.reason in text
    assert Image.open(io.BytesIO(headline_png(h))).size == (WIDTH, HEIGHT)


def test_characters_the_font_lacks_are_drawn_or_spelled_plainly():
    assert card_png._printable("très ≥ 0.99", 22) == "tres >= 0.99"
    assert card_png._runs("a → b −3%") == ["a ", "→", " b ", "−", "3%"]
    assert card_png._has_glyph(22, "a") and not card_png._has_glyph(22, "→")


def test_write_reports_writes_the_card(cnn, tmp_path):
    path = tmp_path / "card.png"
    assert write_reports(cnn, card_png_path=path) == [path]
    assert Image.open(path).size == (WIDTH, HEIGHT)

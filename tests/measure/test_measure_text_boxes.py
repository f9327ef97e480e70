"""A DB text detector's map judged by the text boxes its post-processing makes (binarized at 0.3, boxes scoring
0.5, expanded 1.6x), not by raw regions at two thresholds: a text line moved by one pixel row stays the same box
for the recognizer that crops it, and a line that drops under the box score is lost."""

from __future__ import annotations

import numpy as np
import pytest

from shrinkray.measure.decisions import DB_UNCLIP, map_decisions, text_boxes


def page(lines: list[tuple[int, int, int, int]], value: float = 0.9, shape=(128, 160)) -> np.ndarray:
    """A [1, 1, H, W] map: background 0.02, each line (y0, y1, x0, x1) at ``value``."""
    m = np.full((1, 1, *shape), 0.02, np.float32)
    for y0, y1, x0, x1 in lines:
        m[0, 0, y0:y1, x0:x1] = value
    return m


LINES = [(10, 26, 10, 110), (40, 56, 10, 150), (70, 86, 20, 90), (100, 116, 10, 130)]


def test_a_box_is_expanded_as_ocr_pipelines_expand_it():
    boxes, scores = text_boxes(page([(10, 20, 20, 60)])[0, 0])
    offset = 40 * 10 * DB_UNCLIP / (2 * (40 + 10))
    np.testing.assert_allclose(boxes, [[20 - offset, 10 - offset, 60 + offset, 20 + offset]])
    assert scores == pytest.approx([0.9])


def test_a_faint_region_is_not_a_text_box():
    faint = page([(10, 20, 20, 60)], value=0.4)[0, 0]  # above the binarization, under the box score
    assert len(text_boxes(faint)[0]) == 0


def test_a_line_one_pixel_lower_is_the_same_text_box_though_its_raw_region_moved():
    moved = [(y0 + 1, y1 + 1, x0, x1) for y0, y1, x0, x1 in LINES]
    raw = map_decisions(page(LINES), page(moved))
    assert raw.moved == len(LINES)  # 15 of 17 rows overlap: IoU 0.88 < 0.9
    text = map_decisions(page(LINES), page(moved), text=True)
    assert text.kept == len(LINES) and text.agreement == 1.0
    assert text.text() == "all 4 text boxes kept (IoU >= 0.9)"


def test_a_line_under_the_box_score_is_lost_and_said_so():
    variant = page(LINES[:3]) + 0.0
    variant[0, 0, 100:116, 10:130] = 0.35  # still above 0.3, its box no longer scores 0.5
    found = map_decisions(page(LINES), variant, text=True)
    assert (found.kept, found.lost, found.new) == (3, 1, 0)
    assert found.text() == "1 of 4 text boxes lost"


def test_a_line_split_in_two_is_a_lost_box_and_new_ones():
    split = [*LINES[:3], (100, 116, 10, 60), (100, 116, 75, 130)]
    found = map_decisions(page(LINES), page(split), text=True)
    assert found.kept == 3 and found.lost + found.moved == 1 and found.new + found.moved >= 1
    assert found.agreement < 1.0


def test_no_text_in_either_map_is_said_in_words():
    blank = page([])
    assert map_decisions(blank, blank, text=True) == "no text box scores 0.5 in either output"

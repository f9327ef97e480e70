"""Output parity on hand-computed cases: measures, criteria, profiles, exact outputs, failures."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from shrinkray.errors import OptionError
from shrinkray.measure.confidence import FAIL, PASS, UNDECIDED
from shrinkray.measure.parity import (
    ABSOLUTE_PROFILE,
    DEFAULT_PROFILE,
    FLOAT_KINDS,
    KINDS,
    MEASURES,
    PROFILES,
    RELATIVE_PROFILE,
    SAMPLE_POINTS,
    TIE_SHARE,
    Criterion,
    OutputKind,
    Parity,
    VerdictSettings,
    build_verdict,
    compare_output,
    compare_outputs,
    cosine_similarity,
    parse_criterion,
    robust_range,
    row_cosines,
)

SCORES = OutputKind("scores", -1, "test")
CONTINUOUS = OutputKind("continuous", why="test")
EMBEDDING = OutputKind("embedding", why="test")


def f32(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


def absolute(max_abs: float, max_mean: float, min_cosine: float | None = None) -> VerdictSettings:
    """The absolute profile (the original script's tolerances) with its limits set by hand."""
    criteria = {"max_abs_error": max_abs, "max_mean_abs_error": max_mean}
    if min_cosine is not None:
        criteria["min_cosine"] = min_cosine
    return VerdictSettings(profile="absolute", criteria=criteria)


def failing(out) -> list[str]:
    return [c.criterion for c in out.checks if not c.passed]


# ------------------------------------------------------------------ errors and cosine


def test_max_and_mean_abs_error_hand_computed():
    ref = f32([1.0, 2.0, 3.0, 4.0])
    var = f32([1.5, 2.0, 2.75, 4.0])  # diffs 0.5, 0, 0.25, 0 (exact in binary)
    out = compare_output("y", ref, var, verdict=absolute(1.0, 1.0, min_cosine=0.9))
    assert out.max_abs_error == 0.5
    assert out.mean_abs_error == 0.1875
    assert out.exact is False
    assert out.mismatch_fraction is None
    assert out.passed
    assert out.reason == ""
    assert out.dtype == "float32"
    assert out.shape == [4]
    # 1*1.5 + 2*2 + 3*2.75 + 4*4 = 29.75; |ref|^2 = 30; |var|^2 = 2.25 + 4 + 7.5625 + 16 = 29.8125
    assert out.cosine == pytest.approx(29.75 / math.sqrt(30 * 29.8125), rel=1e-12)
    assert [c.criterion for c in out.checks] == ["max_abs_error", "max_mean_abs_error", "min_cosine"]


def test_identical_outputs():
    ref = f32(np.random.default_rng(4).standard_normal((5, 10)))
    for verdict in (VerdictSettings(), VerdictSettings(profile="absolute")):
        for kind in (SCORES, CONTINUOUS, EMBEDDING):
            out = compare_output("y", ref, ref.copy(), kind, verdict)
            assert out.max_abs_error == 0.0
            assert out.mean_abs_error == 0.0
            assert out.cosine == 1.0  # exactly: not 1 +- rounding
            assert out.measures["row_cosine"] == 1.0
            assert out.top1_agreement == (1.0 if kind is SCORES else None)
            assert out.passed
            assert out.severity == 0.0  # identical outputs use none of the allowed error


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([1.0, 0.0], [0.0, 1.0], 0.0),
        ([1.0, 2.0], [2.0, 4.0], 1.0),
        ([1.0, 0.0], [-3.0, 0.0], -1.0),
        ([1.0, 1.0], [1.0, 0.0], 1 / math.sqrt(2)),
        ([0.0, 0.0], [0.0, 0.0], 1.0),  # both zero: identical
        ([0.0, 0.0], [1.0, 0.0], 0.0),  # one zero vector
        ([3.0, 4.0], [0.0, 0.0], 0.0),
    ],
)
def test_cosine_similarity(a, b, expected):
    assert cosine_similarity(np.array(a), np.array(b)) == pytest.approx(expected, abs=1e-12)


def test_cosine_of_zero_outputs_in_compare_output():
    zeros = np.zeros((2, 3), np.float32)
    assert compare_output("y", zeros, zeros, verdict=absolute(0.0, 0.0)).cosine == 1.0
    out = compare_output("y", zeros, np.full((2, 3), 0.01, np.float32), verdict=absolute(1.0, 1.0, 0.99))
    assert out.cosine == 0.0
    assert out.passed  # an all-zero reference has no direction: only the absolute tolerances judge it
    assert [c.criterion for c in out.checks] == ["max_abs_error", "max_mean_abs_error"]
    # ... but a cosine that is the only criterion is not dropped: nothing would judge the output
    alone = compare_output("y", zeros, np.full((2, 3), 0.01, np.float32), EMBEDDING)
    assert failing(alone) == ["min_row_cosine"]


def test_small_absolute_errors_do_not_hide_a_destroyed_output():
    rng = np.random.default_rng(0)
    reference = (rng.random((1, 1, 32, 32)) * 1e-4).astype(np.float32)  # a near-zero probability map
    destroyed = rng.permutation(reference.ravel()).reshape(reference.shape)  # same values, pattern gone
    out = compare_output("maps", reference, destroyed, CONTINUOUS, VerdictSettings(profile="absolute"))
    assert out.max_abs_error < 0.06 and out.mean_abs_error < 0.02
    assert out.cosine < 0.99
    assert not out.passed
    assert failing(out) == ["min_cosine"]
    assert "cosine" in out.reason
    assert compare_output("maps", reference, destroyed, CONTINUOUS, absolute(0.06, 0.02, -1.0)).passed
    # the relative profile sees it too: the error is of the order of the map's own range
    relative = compare_output("maps", reference, destroyed, CONTINUOUS)
    assert not relative.passed
    assert "min_cosine" in failing(relative)
    assert set(failing(relative)) == set(RELATIVE_PROFILE["continuous"])  # every criterion of the profile
    assert relative.measures["relative_rms_error"] > 0.1 and relative.measures["relative_error"] > 0.5


def test_cosine_flattens_multidimensional_arrays():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert cosine_similarity(a, a.T.copy().T) == pytest.approx(1.0)
    assert cosine_similarity(a, -a) == pytest.approx(-1.0)


# ------------------------------------------------------------------ relative measures


def test_robust_range_hand_computed():
    ramp = np.arange(1001.0)  # percentiles 0.1 and 99.9 fall on 1 and 999 exactly
    assert robust_range(ramp) == pytest.approx(998.0)
    spiked = ramp.copy()
    spiked[-1] = 1e6  # one outlier does not stretch the range
    assert robust_range(spiked) == pytest.approx(998.0, rel=1e-6)
    assert robust_range(np.full(5, 5.0)) == 5.0  # constant: its magnitude
    assert robust_range(np.zeros(3)) == 0.0
    assert robust_range(np.zeros(0)) == 0.0
    # two values: the percentiles interpolate between them (1 + 0.001, 2 - 0.001)
    assert robust_range(np.array([1.0, 2.0])) == pytest.approx(0.998)


def test_relative_rms_and_max_error_hand_computed():
    ref = np.arange(1001.0)  # robust range 998
    shifted = ref + 0.998  # every value off by 0.1% of the range
    out = compare_output("y", ref, shifted, CONTINUOUS)
    assert out.measures["range"] == pytest.approx(998.0)
    assert out.measures["relative_rms_error"] == pytest.approx(0.001)
    assert out.measures["relative_error"] == pytest.approx(0.001)
    assert out.max_abs_error == pytest.approx(0.998)
    assert out.passed
    one = ref.copy()
    one[500] += 9.98  # one value off by 1% of the range
    out = compare_output("y", ref, one, CONTINUOUS)
    assert out.measures["relative_error"] == pytest.approx(0.01)
    assert out.measures["relative_rms_error"] == pytest.approx(9.98 / math.sqrt(1001) / 998)
    assert out.measures["mean_abs_error"] == pytest.approx(9.98 / 1001)


def test_relative_verdict_is_blind_to_units_where_absolute_is_not():
    """0.5 px on boxes up to 640 px: absolute 0.06 fails, the relative profile passes."""
    rng = np.random.default_rng(3)
    boxes = rng.uniform(0, 640, size=(8, 100, 4))
    moved = boxes + rng.uniform(-0.5, 0.5, size=boxes.shape)
    relative = compare_output("boxes", boxes, moved, CONTINUOUS)
    assert relative.passed, relative.reason
    assert relative.measures["relative_error"] < 0.001
    absolute_out = compare_output("boxes", boxes, moved, CONTINUOUS, VerdictSettings(profile="absolute"))
    assert not absolute_out.passed
    assert failing(absolute_out) == ["max_abs_error", "max_mean_abs_error"]
    # the same error at 1000x the scale: the relative measures do not move
    scaled = compare_output("boxes", boxes * 1000, moved * 1000, CONTINUOUS)
    assert scaled.measures["relative_rms_error"] == pytest.approx(relative.measures["relative_rms_error"])


def test_row_cosine_is_the_worst_row():
    ref = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    var = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 1.0]])
    np.testing.assert_allclose(row_cosines(ref, var), [1.0, 1 / math.sqrt(2), 1.0])
    out = compare_output("emb", ref, var, EMBEDDING)
    assert out.measures["row_cosine"] == pytest.approx(1 / math.sqrt(2))
    assert out.measures["mean_row_cosine"] == pytest.approx((2 + 1 / math.sqrt(2)) / 3)
    # whole output: dot 4, |ref| 2, |var| sqrt(5)
    assert out.cosine == pytest.approx(4 / (2 * math.sqrt(5)))
    assert failing(out) == ["min_row_cosine"]


def test_one_bad_row_fails_an_embedding_whose_overall_cosine_is_high():
    rng = np.random.default_rng(1)
    ref = rng.standard_normal((400, 32))
    var = ref.copy()
    var[7] = rng.permutation(ref[7])  # one token's vector scrambled
    out = compare_output("hidden", ref, var, EMBEDDING)
    worst = cosine_similarity(ref[7], var[7])
    assert out.cosine > 0.99
    assert out.measures["row_cosine"] == pytest.approx(worst)
    assert worst < 0.9
    assert not out.passed and failing(out) == ["min_row_cosine"]


def test_row_cosines_of_zero_rows():
    np.testing.assert_allclose(row_cosines(np.zeros((2, 3)), np.zeros((2, 3))), [1.0, 1.0])
    np.testing.assert_allclose(row_cosines(np.zeros((1, 3)), np.ones((1, 3))), [0.0])
    assert row_cosines(np.array(2.0), np.array(2.0)).tolist() == [1.0]  # a scalar is one row


# ------------------------------------------------------------------ top-1 and top-5


def test_top1_agreement_one_row_of_four_flips():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((4, 10)).astype(np.float32)
    var = ref.copy()
    winner = int(np.argmax(ref[2]))
    other = (winner + 1) % 10
    var[2, other] = ref[2, winner] + 1.0  # only row 2 changes its arg-max
    assert np.sum(np.argmax(ref, -1) != np.argmax(var, -1)) == 1
    out = compare_output("scores", ref, var, SCORES)
    assert out.top1_agreement == 0.75
    assert out.measures["positions"] == 4 and out.measures["undecided_positions"] == 0
    assert not out.passed  # scores are judged by their decisions
    assert "min_top1_agreement" in failing(out)
    assert out.decided_by.startswith("top1 agreement 0.75")
    # the absolute profile does not look at decisions: the same output passes loose tolerances
    assert compare_output("scores", ref, var, SCORES, absolute(100.0, 100.0, -1.0)).passed


def test_top1_ties_in_the_original_are_skipped():
    ref = np.array([[1.0, 1.0005, 0.0], [2.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 1.0]])
    spread = robust_range(ref)
    assert 0.0005 < TIE_SHARE * spread  # row 0's two best are a coin toss in the original itself
    var = ref.copy()
    var[0] = [1.0005, 1.0, 0.0]  # the tie flips: not counted
    var[3] = [0.0, 1.5, 1.0]  # a decided row flips
    out = compare_output("scores", ref, var, SCORES)
    assert out.measures["undecided_positions"] == 1
    assert out.measures["positions"] == 4
    assert out.top1_agreement == pytest.approx(2 / 3)
    only_tie = ref.copy()
    only_tie[0] = [1.0005, 1.0, 0.0]
    assert compare_output("scores", ref, only_tie, SCORES).top1_agreement == 1.0


def test_top1_when_every_position_is_a_tie():
    ref = np.ones((3, 4))
    var = ref.copy()
    var[:, 2] += 0.5
    out = compare_output("scores", ref, var, SCORES)
    assert out.measures["undecided_positions"] == 3
    assert out.top1_agreement == 1.0  # nothing was decided, so nothing changed


def test_top5_overlap_hand_computed():
    ref = np.tile(np.arange(10.0), (2, 1))  # best five: classes 5..9 in both rows
    var = ref.copy()
    var[0, 4], var[0, 5] = 5.0, 4.0  # row 0: class 4 enters the best five, class 5 leaves
    out = compare_output("scores", ref, var, SCORES)
    assert out.measures["top5_overlap"] == pytest.approx((4 / 5 + 5 / 5) / 2)
    assert out.top1_agreement == 1.0
    small = compare_output("scores", ref[:, :9], var[:, :9], SCORES)
    assert "top5_overlap" not in small.measures  # fewer than 10 classes


def test_scores_on_another_axis():
    """[batch, classes, pixels] from a Softmax over axis 1: the decision is along that axis."""
    ref = np.zeros((1, 3, 4))
    ref[0, 0] = 1.0  # class 0 wins at every pixel
    var = ref.copy()
    var[0, 2, 1] = 2.0  # class 2 wins pixel 1
    out = compare_output("seg", ref, var, OutputKind("scores", -2, "softmax axis 1"))
    assert out.measures["positions"] == 4
    assert out.top1_agreement == 0.75
    along_last = compare_output("seg", ref, var, SCORES)
    assert along_last.measures["positions"] == 3  # a different decision entirely


def _ctc(paths: list[list[int]], classes: int = 6) -> np.ndarray:
    """[sequences, steps, classes] softmax-like scores whose top-1 per step follows ``paths``."""
    out = np.full((len(paths), len(paths[0]), classes), 0.01)
    for i, path in enumerate(paths):
        out[i, np.arange(len(path)), path] = 0.9
    return out


def test_ctc_blank_flips_next_to_a_character_are_not_changes():
    """A CTC reader (blank = class 0 on most steps): a character read one step earlier or later flips two
    steps (PP-OCR rec, int8: 45 of 475 steps, top-1 0.905) but decodes the same text."""
    ref_paths = [[0, 0, 3, 3, 0, 0, 2, 0, 0, 0, 4, 0], [0, 5, 0, 0, 0, 1, 1, 0, 0, 2, 0, 0]]
    var_paths = [[0, 3, 3, 0, 0, 0, 2, 2, 0, 0, 0, 4], [0, 5, 5, 0, 0, 0, 1, 0, 0, 2, 0, 0]]
    ref, var = _ctc(ref_paths), _ctc(var_paths)
    out = compare_output("ctc", ref, var, SCORES)
    assert out.measures["step_top1_agreement"] == pytest.approx(17 / 24)  # 7 of 24 steps flip
    assert out.top1_agreement == 1.0  # "3 2 4" and "5 1 2" read the same
    assert out.measures["decoded_character_agreement"] == 1.0
    assert out.measures["decoded_sequences_unchanged"] == 2 and out.measures["ctc_blank"] == 0
    assert out.status == "undecided" and out.checks[0].decisions == 2  # 2 lines, both the same: too few to pass
    # a character really changes (2 -> 1 at one step): 1 of 6 decoded characters, fails
    bad_paths = [list(p) for p in ref_paths]
    bad_paths[0][6] = 1
    bad = compare_output("ctc", ref, _ctc(bad_paths), SCORES)
    assert bad.measures["step_top1_agreement"] == pytest.approx(23 / 24)  # passed the old per-step measure
    assert bad.top1_agreement == 0.5  # one of two lines reads differently
    assert bad.measures["decoded_character_agreement"] == pytest.approx(1 - 1 / 6)
    assert bad.status == "fail" and "min_top1_agreement" in failing(bad)
    # a character dropped (merged into its neighbour: "3 3" -> "3", the blank between them gone)
    merged_ref = _ctc([[0, 0, 3, 0, 3, 0, 0, 0, 0, 0]])
    merged_var = _ctc([[0, 0, 3, 3, 3, 0, 0, 0, 0, 0]])
    merged = compare_output("ctc", merged_ref, merged_var, SCORES)
    assert merged.top1_agreement == 0.0 and merged.measures["decoded_character_agreement"] == 0.5


def test_a_space_read_at_a_lines_end_is_not_a_change_of_its_text():
    """rapidocr's recognizers, weights-int8 on 160 rendered lines: 37 lines gained a space read in the zero
    padding after the text, and the verdict failed a variant whose text (stripped) kept every line. With the
    model's alphabet (its metadata) whitespace at the ends is dropped; inside a line it still counts."""
    alphabet = ("a", "b", "c", "d", " ")  # classes 1-5 after the blank (PaddleOCR: the space class last)
    kind = OutputKind("scores", -1, "ctc", alphabet=alphabet)
    ref = _ctc([[0, 1, 0, 2, 0, 0, 0, 0, 0, 0], [0, 3, 0, 0, 4, 0, 0, 0, 0, 0]])
    trailing = _ctc([[0, 1, 0, 2, 0, 0, 0, 5, 0, 0], [5, 3, 0, 0, 4, 0, 0, 0, 0, 0]])  # "ab " and " cd"
    out = compare_output("rec", ref, trailing, kind)
    assert out.top1_agreement == 1.0 and out.measures["decoded_character_agreement"] == 1.0
    without = compare_output("rec", ref, trailing, OutputKind("scores", -1, "ctc"))  # no alphabet: class 5 counts
    assert without.top1_agreement == 0.0
    inside = compare_output("rec", ref, _ctc([[0, 1, 5, 2, 0, 0, 0, 0, 0, 0], [0, 3, 0, 0, 4, 0, 0, 0, 0, 0]]), kind)
    assert inside.top1_agreement == 0.5  # "a b" is not "ab"
    other = OutputKind("scores", -1, "ctc", alphabet=("a", "b", "c", " "))  # not this output's classes: ignored
    assert compare_output("rec", ref, trailing, other).top1_agreement == 0.0


def test_ctc_reading_needs_a_dominant_blank_and_a_sequence():
    no_blank = [[1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2]]  # no class on most steps: per-step top-1
    ref = _ctc(no_blank)
    var_paths = [list(no_blank[0])]
    var_paths[0][0] = 0
    out = compare_output("seq", ref, _ctc(var_paths), SCORES)
    assert "ctc_blank" not in out.measures and out.top1_agreement == pytest.approx(11 / 12)
    last_blank = _ctc([[5, 5, 2, 5, 5, 5, 3, 5, 5, 5]])  # the blank may be the last class
    shifted = _ctc([[5, 2, 5, 5, 5, 5, 5, 3, 5, 5]])
    out = compare_output("seq", last_blank, shifted, SCORES)
    assert out.measures["ctc_blank"] == 5 and out.top1_agreement == 1.0
    rows = _ctc([[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]])[0]  # [steps, classes] without a batch: per-row classes
    assert "ctc_blank" not in compare_output("rows", rows, rows, SCORES).measures


def test_top1_only_for_scores_with_a_class_axis():
    vector = f32([1, 2, 3])
    assert compare_output("v", vector, vector, CONTINUOUS).top1_agreement is None
    assert compare_output("v", vector, vector).top1_agreement is None  # no kind: continuous
    assert compare_output("v", vector, vector, SCORES).top1_agreement == 1.0  # one position, 3 classes
    column = f32([[1], [2]])
    assert compare_output("c", column, column, SCORES).top1_agreement is None  # one class: no decision
    assert compare_output("c", column, column, SCORES).passed


# ------------------------------------------------------------------ criteria


def test_criterion_parts_and_holds():
    low = Criterion("min_cosine", 0.99)
    high = Criterion("max_abs_error", 0.06)
    assert (low.measure, low.at_least) == ("cosine", True)
    assert (high.measure, high.at_least) == ("abs_error", False)
    assert low.holds(0.99) and low.holds(1.0) and not low.holds(0.989)
    assert high.holds(0.06) and high.holds(0.0) and not high.holds(0.0601)
    assert not low.holds(float("nan")) and not high.holds(float("nan"))
    assert low.text_limit() == "cosine >= 0.99"
    assert high.text_limit() == "abs error <= 0.06"


@pytest.mark.parametrize(
    ("name", "limit", "value", "severity"),
    [
        ("max_abs_error", 0.06, 0.03, 0.5),
        ("max_abs_error", 0.06, 0.06, 1.0),
        ("max_abs_error", 0.06, 0.12, 2.0),
        ("max_abs_error", 0.0, 0.0, 0.0),
        ("max_abs_error", 0.0, 0.1, math.inf),
        ("min_cosine", 0.99, 0.995, 0.5),  # half of the allowed distance from 1
        ("min_cosine", 0.99, 1.0, 0.0),
        ("min_cosine", 0.99, 0.98, 2.0),
        ("min_top1_agreement", 0.9, 0.75, 2.5),
        ("min_cosine", 1.0, 1.0, 0.0),  # no room at all
        ("min_cosine", 1.0, 0.999, math.inf),
        ("min_cosine", 0.99, float("nan"), math.inf),
    ],
)
def test_criterion_severity(name, limit, value, severity):
    got = Criterion(name, limit).severity(value)
    assert got == pytest.approx(severity) if math.isfinite(severity) else got == severity
    if math.isfinite(value):
        assert Criterion(name, limit).holds(value) == (got <= 1.0 + 1e-12)


def test_severity_and_decided_by_of_an_output():
    ref = np.zeros(4)
    var = np.array([0.03, 0.0, 0.0, 0.0])
    out = compare_output("y", ref, var, CONTINUOUS, absolute(0.06, 0.02))
    assert out.passed
    assert out.severity == pytest.approx(0.5)  # 0.03 of 0.06; mean 0.0075 of 0.02 is 0.375
    assert out.decided_by == "abs error 0.03 (needs <= 0.06)"  # the closest call
    out = compare_output("y", ref, var, CONTINUOUS, absolute(0.06, 0.005))
    assert not out.passed
    assert out.severity == pytest.approx(1.5)
    assert out.decided_by == "mean abs error 0.0075 (needs <= 0.005)"  # the failing check


def test_severity_of_broken_and_exact_outputs():
    broken = compare_output("y", np.zeros(2), np.zeros(3))
    assert broken.severity == math.inf and broken.decided_by.startswith("shape changed")
    same = compare_output("n", np.array([1, 2]), np.array([1, 2]))
    assert same.severity == 0.0 and same.decided_by == "exact match"


def test_parity_severity_and_decided_by():
    parity = compare_outputs(
        {"a": np.zeros(4), "b": np.zeros(4)},
        {"a": np.array([0.03, 0, 0, 0]), "b": np.array([0.045, 0, 0, 0])},
        verdict=absolute(0.06, 1.0),
    )
    assert parity.passed
    assert parity.severity == pytest.approx(0.75)
    assert parity.decided_by == "b (continuous): abs error 0.045 (needs <= 0.06)"
    assert compare_outputs({}, {}).decided_by == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("min_top1_agreement=0.995", (None, "min_top1_agreement", 0.995)),
        ("boxes:max_relative_error=0.02", ("boxes", "max_relative_error", 0.02)),
        (" max_abs_error = 1e-3 ", (None, "max_abs_error", 0.001)),
        ("encoder/out:0:min_row_cosine=0.98", ("encoder/out:0", "min_row_cosine", 0.98)),  # colons in a name
    ],
)
def test_parse_criterion(text, expected):
    assert parse_criterion(text) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("max_abs_error", "is not [OUTPUT:]CRITERION=VALUE"),
        ("max_speed=1", "Unknown tolerance 'max_speed'"),
        ("abs_error=1", "Unknown tolerance 'abs_error'"),  # no min_/max_
        ("most_abs_error=1", "Unknown tolerance"),
        ("max_abs_error=small", "is not a number"),
        ("max_abs_error=nan", "finite"),
        ("max_abs_error=inf", "finite"),
        ("logits:min_cosine=-inf", "finite"),
    ],
)
def test_parse_criterion_errors(text, problem):
    with pytest.raises(OptionError, match=problem.replace("[", r"\[").replace("]", r"\]")) as info:
        parse_criterion(text)
    assert info.value.hint  # says what to write instead


def test_unknown_criterion_hint_lists_every_measure():
    with pytest.raises(OptionError) as info:
        parse_criterion("max_speed=1")
    for measure in MEASURES:
        assert measure in info.value.hint


def test_build_verdict_from_front_end_text():
    verdict = build_verdict(
        "absolute",
        ["min_cosine=0.95", "boxes:max_relative_error=0.02", "boxes:max_abs_error=2"],
        ["logits=scores", " hidden = embedding "],
        max_abs_error=0.1,
        max_mean_abs_error=None,  # an unset shorthand is skipped
    )
    assert verdict.profile == "absolute"
    assert verdict.criteria == {"max_abs_error": 0.1, "min_cosine": 0.95}
    assert verdict.per_output == {"boxes": {"max_relative_error": 0.02, "max_abs_error": 2.0}}
    assert verdict.kinds == {"logits": "scores", "hidden": "embedding"}
    assert build_verdict() == VerdictSettings()


def test_a_tolerance_after_a_shorthand_wins():
    assert build_verdict(tolerances=["max_abs_error=0.2"], max_abs_error=0.1).criteria == {"max_abs_error": 0.2}


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"profile": "strict"}, "Unknown verdict profile 'strict'"),
        ({"kinds": ["logits=probabilities"]}, "Unknown output kind 'probabilities'"),
        ({"kinds": ["logits"]}, "is not OUTPUT=KIND"),
        ({"tolerances": ["logits:max_wobble=1"]}, "Unknown tolerance 'max_wobble'"),
        ({"tolerances": ["max_abs_error=nan"]}, "finite"),
        ({"max_wobble": 1.0}, "Unknown tolerance 'max_wobble'"),
    ],
)
def test_build_verdict_errors(kwargs, problem):
    with pytest.raises(OptionError, match=problem):
        build_verdict(**kwargs)


def test_verdict_settings_validate_themselves():
    with pytest.raises(OptionError, match="Unknown tolerance"):
        VerdictSettings(criteria={"max_nonsense": 1.0})
    with pytest.raises(OptionError, match="Unknown tolerance"):
        VerdictSettings(per_output={"y": {"cosine": 0.9}})
    with pytest.raises(OptionError, match="Unknown output kind"):
        VerdictSettings(kinds={"y": "logits"})
    with pytest.raises(OptionError, match="Unknown verdict profile"):
        VerdictSettings(profile="lenient")


def test_criteria_merge_profile_then_every_output_then_one_output():
    verdict = VerdictSettings(
        criteria={"min_top1_agreement": 0.995, "max_abs_error": 1.0},
        per_output={"logits": {"min_top1_agreement": 0.9}},
    )
    merged = {c.name: c.limit for c in verdict.criteria_for("logits", "scores")}
    assert merged == {**RELATIVE_PROFILE["scores"], "min_top1_agreement": 0.9, "max_abs_error": 1.0}
    other = {c.name: c.limit for c in verdict.criteria_for("probs", "scores")}
    assert other["min_top1_agreement"] == 0.995
    assert verdict.criteria_for("label", "exact") == []  # exact outputs are never judged by tolerances


def test_profiles():
    assert DEFAULT_PROFILE == "relative"
    assert set(PROFILES) == {"relative", "absolute"}
    assert PROFILES["relative"] is RELATIVE_PROFILE and PROFILES["absolute"] is ABSOLUTE_PROFILE
    assert set(KINDS) == {*FLOAT_KINDS, "exact", "generation", "perplexity"}
    # generated tokens are judged by continuations kept whole in both profiles: no tolerance of values fits them
    assert RELATIVE_PROFILE["generation"] == ABSOLUTE_PROFILE["generation"] == {"min_continuation_agreement": 0.95}
    for kind in FLOAT_KINDS:  # the original script's tolerances, on every float output
        assert ABSOLUTE_PROFILE[kind] == {"max_abs_error": 0.06, "max_mean_abs_error": 0.02, "min_cosine": 0.99}
        assert RELATIVE_PROFILE[kind]
        for name in RELATIVE_PROFILE[kind]:
            assert name[4:] in MEASURES
    assert "min_top1_agreement" in RELATIVE_PROFILE["scores"]
    assert "min_row_cosine" in RELATIVE_PROFILE["embedding"]


def test_verdict_settings_round_trip():
    verdict = build_verdict("absolute", ["y:min_cosine=0.9"], ["y=embedding"], max_abs_error=0.5)
    assert VerdictSettings.from_dict(json.loads(json.dumps(verdict.as_dict()))) == verdict
    assert VerdictSettings.from_dict(None) == VerdictSettings()


# ------------------------------------------------------------------ tolerance verdicts (absolute)


REF = np.zeros(4, np.float32)
VAR = f32([0.5, 0.25, 0.0, 0.0])  # max 0.5, mean 0.1875, both exact in binary


def test_at_the_tolerance_boundary_passes():
    out = compare_output("y", REF, VAR, verdict=absolute(0.5, 0.1875))
    assert out.passed
    assert out.reason == ""
    assert out.severity == pytest.approx(1.0)


def test_just_beyond_the_max_tolerance_fails():
    out = compare_output("y", REF, VAR, verdict=absolute(float(np.nextafter(0.5, 0.0)), 0.1875))
    assert not out.passed
    assert failing(out) == ["max_abs_error"]
    assert out.reason.startswith("abs error 0.5 (needs <= 0.49999")  # the limit is not printed as 0.5
    assert "mean abs error" not in out.reason


def test_just_beyond_the_mean_tolerance_fails():
    out = compare_output("y", REF, VAR, verdict=absolute(0.5, float(np.nextafter(0.1875, 0.0))))
    assert not out.passed
    assert failing(out) == ["max_mean_abs_error"]
    assert out.reason.startswith("mean abs error 0.1875 (needs <= 0.18749")


def test_both_tolerances_exceeded_gives_both_reasons():
    out = compare_output("y", REF, VAR, verdict=absolute(0.1, 0.1))
    assert not out.passed
    assert failing(out) == ["max_abs_error", "max_mean_abs_error"]
    assert out.reason == "abs error 0.5 (needs <= 0.1); mean abs error 0.1875 (needs <= 0.1)"


def test_absolute_profile_defaults():
    verdict = VerdictSettings(profile="absolute")
    parity = compare_outputs({"y": REF}, {"y": f32([0.06, 0, 0, 0])}, verdict=verdict)
    assert parity.verdict.profile == "absolute"
    # 0.06 in float32 is 0.0599999986...: at the limit, which passes
    assert parity.outputs[0].max_abs_error == pytest.approx(0.06, abs=1e-8)
    assert parity.passed
    assert parity.severity == pytest.approx(1.0, abs=1e-7)
    assert compare_outputs({"y": REF}, {"y": f32([0.05, 0, 0, 0])}, verdict=verdict).passed
    assert not compare_outputs({"y": REF}, {"y": f32([0.07, 0, 0, 0])}, verdict=verdict).passed
    mean = compare_outputs({"y": REF}, {"y": f32([0.05, 0.05, 0, 0])}, verdict=verdict)  # mean 0.025
    assert failing(mean.outputs[0]) == ["max_mean_abs_error"]


def test_default_verdict_is_relative():
    parity = compare_outputs({"y": REF}, {"y": REF})
    assert parity.verdict == VerdictSettings()
    assert parity.verdict.profile == "relative"
    assert parity.samples == 1


def test_float16_outputs_compared_in_float64():
    ref = np.array([1.0, 2.0], np.float16)
    var = np.array([1.0, 2.001953125], np.float16)  # one float16 ulp at 2.0
    out = compare_output("y", ref, var, verdict=absolute(0.01, 0.01))
    assert out.dtype == "float16"
    assert out.max_abs_error == 0.001953125
    assert out.passed


def test_per_output_criteria_apply_to_that_output_only():
    ref = {"a": np.zeros(4), "b": np.zeros(4)}
    var = {"a": np.array([0.1, 0, 0, 0]), "b": np.array([0.1, 0, 0, 0])}
    verdict = VerdictSettings(profile="absolute", per_output={"b": {"max_abs_error": 0.2, "max_mean_abs_error": 0.03}})
    parity = compare_outputs(ref, var, verdict=verdict)
    assert [o.passed for o in parity.outputs] == [False, True]  # mean 0.025 > 0.02 for a, <= 0.03 for b
    assert failing(parity.outputs[0]) == ["max_abs_error", "max_mean_abs_error"]


# ------------------------------------------------------------------ non-float outputs


def test_int_outputs_compared_exactly():
    ref = np.array([1, 2, 3, 4], np.int64)
    var = np.array([1, 2, 0, 4], np.int64)
    out = compare_output("label", ref, var, verdict=absolute(1e9, 1e9))
    assert out.exact is True
    assert out.kind == "exact"
    assert not out.passed
    assert out.checks == []  # no tolerance applies to exact outputs
    assert out.mismatch_fraction == 0.25
    assert out.max_abs_error == 3.0
    assert out.mean_abs_error == 0.75
    assert out.cosine is None and out.top1_agreement is None
    assert "25.0%" in out.reason and "exactly" in out.reason


def test_int_outputs_stay_exact_whatever_kind_is_asked():
    ref = np.array([1, 2, 3, 4], np.int64)
    verdict = VerdictSettings(criteria={"max_abs_error": 5})
    out = compare_output("label", ref, ref + 1, OutputKind("continuous"), verdict)
    assert out.exact and not out.passed
    assert "int64" in out.kind_reason


def test_float_output_judged_exactly_when_asked():
    ref = f32([1.0, 2.0])
    out = compare_output("ids", ref, f32([1.0, 2.0000002]), OutputKind("exact", why="set by you"))
    assert out.exact and not out.passed and out.mismatch_fraction == 0.5
    assert out.kind_reason == "set by you"


def test_int_outputs_equal_pass():
    ref = np.array([[7, 8], [9, 10]], np.int32)
    out = compare_output("label", ref, ref.copy())
    assert out.exact and out.passed
    assert out.mismatch_fraction == 0.0
    assert out.max_abs_error == 0.0


def test_bool_outputs_compared_exactly():
    ref = np.array([True, False, True, True, False])
    var = np.array([True, False, False, True, False])
    out = compare_output("mask", ref, var)
    assert out.exact and not out.passed
    assert out.mismatch_fraction == pytest.approx(0.2)


def test_empty_int_output_passes():
    out = compare_output("label", np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert out.passed and out.mismatch_fraction == 0.0


def test_string_outputs_compared_exactly():
    ref = np.array(["a", "b"], dtype=object)
    assert compare_output("s", ref, ref.copy()).passed
    out = compare_output("s", ref, np.array(["a", "c"], dtype=object))
    assert not out.passed
    assert out.mismatch_fraction == 0.5
    assert "abs_error" not in out.measures


# ------------------------------------------------------------------ structural failures


def test_shape_change_fails():
    out = compare_output("y", np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32), verdict=absolute(1e9, 1e9))
    assert not out.passed
    assert "shape changed" in out.reason
    assert "[2, 3]" in out.reason and "[3, 2]" in out.reason
    assert out.max_abs_error == float("inf")


def test_shape_change_fails_for_int_outputs():
    out = compare_output("label", np.zeros(3, np.int64), np.zeros(4, np.int64))
    assert not out.passed
    assert "shape" in out.reason


def test_missing_output_fails():
    ref = {"a": f32([1, 2]), "b": f32([3, 4])}
    parity = compare_outputs(ref, {"a": f32([1, 2])}, verdict=absolute(1e9, 1e9))
    assert not parity.passed
    by_name = {o.name: o for o in parity.outputs}
    assert by_name["a"].passed
    assert not by_name["b"].passed
    assert "missing" in by_name["b"].reason
    assert by_name["b"].shape == [2]
    assert parity.decided_by.startswith("b (continuous): output missing")


def test_extra_variant_outputs_are_ignored():
    parity = compare_outputs({"a": f32([1])}, {"a": f32([1]), "extra": f32([9])})
    assert [o.name for o in parity.outputs] == ["a"]
    assert parity.passed


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_nonfinite_where_original_is_finite_fails(bad):
    ref = f32([1.0, 2.0, 3.0])
    var = f32([1.0, bad, 3.0])
    for verdict in (absolute(1e9, 1e9), VerdictSettings()):
        out = compare_output("y", ref, var, verdict=verdict)
        assert not out.passed
        assert "NaN" in out.reason
        # the non-finite element is left out of the error numbers, which stay finite
        assert out.max_abs_error == 0.0
        assert math.isfinite(out.cosine)


def test_finite_where_original_is_nonfinite_fails():
    out = compare_output("y", f32([np.nan, 1.0]), f32([0.0, 1.0]), verdict=absolute(1e9, 1e9))
    assert not out.passed


def test_same_nan_positions_pass():
    ref = f32([np.nan, 1.0, 2.0])
    var = f32([np.nan, 1.0, 2.01])
    out = compare_output("y", ref, var, verdict=absolute(0.1, 0.1))
    assert out.passed
    assert out.max_abs_error == pytest.approx(0.01, abs=1e-6)
    assert all(math.isfinite(v) for v in out.sample_reference + out.sample_variant)


@pytest.mark.parametrize(("r", "v"), [(np.inf, -np.inf), (np.inf, np.nan), (np.nan, -np.inf)])
def test_different_nonfinite_values_fail(r, v):
    out = compare_output("y", f32([r, 1.0]), f32([v, 1.0]), verdict=absolute(1e9, 1e9))
    assert not out.passed


# ------------------------------------------------------------------ samples


def test_samples_capped_at_sample_points():
    ref = np.random.default_rng(1).standard_normal((50, 200)).astype(np.float32)
    var = ref + np.float32(0.5)
    out = compare_output("y", ref, var, verdict=absolute(1.0, 1.0))
    assert ref.size > SAMPLE_POINTS
    assert len(out.sample_reference) == SAMPLE_POINTS
    assert len(out.sample_variant) == SAMPLE_POINTS
    # the two samples are the same positions of both outputs
    diffs = np.array(out.sample_variant) - np.array(out.sample_reference)
    np.testing.assert_allclose(diffs, 0.5, atol=1e-6)
    # they are real values of the reference, without repeats
    assert set(out.sample_reference) <= set(ref.astype(np.float64).ravel().tolist())
    assert len(set(out.sample_reference)) == SAMPLE_POINTS


def test_small_outputs_keep_every_point():
    ref = f32([[1, 2, 3], [4, 5, 6]])
    out = compare_output("y", ref, ref * 2, verdict=absolute(100, 100))
    assert out.sample_reference == [1, 2, 3, 4, 5, 6]
    assert out.sample_variant == [2, 4, 6, 8, 10, 12]


def test_samples_deterministic():
    ref = np.random.default_rng(2).standard_normal(5000).astype(np.float32)
    a = compare_output("y", ref, ref)
    b = compare_output("y", ref, ref)
    assert a.sample_reference == b.sample_reference


# ------------------------------------------------------------------ Parity aggregate


def make_parity() -> Parity:
    ref = {
        "scores": f32([[1.0, 0.0], [0.0, 1.0]]),
        "other": f32([1.0, 1.0]),
        "label": np.array([1, 0], np.int64),
    }
    var = {
        "scores": f32([[1.0, 0.0], [0.0, 1.0]]),
        "other": f32([1.0, 0.0]),  # cosine 1/sqrt(2), max error 1
        "label": np.array([1, 5], np.int64),  # error 5 but exact: excluded from the float errors
    }
    return compare_outputs(ref, var, verdict=absolute(2.0, 1.0, min_cosine=0.5))


def test_parity_aggregates():
    parity = make_parity()
    assert [o.name for o in parity.outputs] == ["scores", "other", "label"]
    assert not parity.passed  # only the label fails (cosine 0.707 clears the 0.5 floor set above)
    assert [o.passed for o in parity.outputs] == [True, True, False]
    assert parity.worst_cosine == pytest.approx(1 / math.sqrt(2))
    assert parity.max_abs_error == 1.0
    assert parity.mean_abs_error == 0.5
    assert parity.severity == math.inf  # the exact output broke
    assert parity.decided_by == "label (exact): 50.0% of values differ (must match exactly)"


def test_parity_fails_on_the_default_cosine_floor():
    ref = {"other": f32([1.0, 1.0])}
    var = {"other": f32([1.0, 0.0])}  # cosine 0.707: within abs/mean 2.0/1.0, below the profile's 0.99
    parity = compare_outputs(ref, var, verdict=absolute(2.0, 1.0))
    assert not parity.passed
    assert {c.name: c.limit for c in parity.verdict.criteria_for("other", "continuous")}["min_cosine"] == 0.99
    assert parity.outputs[0].reason == "cosine 0.7071 (needs >= 0.99)"


def test_parity_passed_when_all_pass():
    parity = compare_outputs({"a": f32([1, 2]), "b": np.array([3])}, {"a": f32([1, 2.01]), "b": np.array([3])})
    assert parity.passed
    assert 0.999 < parity.worst_cosine < 1.0


def test_parity_worst_cosine_none_with_only_exact_outputs():
    parity = compare_outputs({"label": np.array([1, 2])}, {"label": np.array([1, 2])})
    assert parity.worst_cosine is None
    assert parity.max_abs_error == 0.0
    assert parity.mean_abs_error == 0.0
    assert parity.passed


def test_parity_of_no_outputs_passes():
    parity = compare_outputs({}, {})
    assert parity.passed and parity.worst_cosine is None and parity.max_abs_error == 0.0
    assert parity.severity == 0.0


def test_as_dict_is_json_serialisable():
    parity = make_parity()
    data = parity.as_dict()
    text = json.dumps(data, allow_nan=False)
    back = json.loads(text)
    assert back["passed"] is False
    assert back["profile"] == "absolute"
    assert back["verdict"]["criteria"] == {"max_abs_error": 2.0, "max_mean_abs_error": 1.0, "min_cosine": 0.5}
    assert back["samples"] == 1
    assert back["severity"] is None  # infinite: null in strict JSON
    assert back["decided_by"].startswith("label (exact)")
    assert back["worst_cosine"] == pytest.approx(1 / math.sqrt(2))
    assert [o["name"] for o in back["outputs"]] == ["scores", "other", "label"]
    assert "sample_reference" not in back["outputs"][0]
    assert back["outputs"][2]["mismatch_fraction"] == 0.5
    assert back["outputs"][1]["measures"]["cosine"] == pytest.approx(1 / math.sqrt(2))
    check = back["outputs"][1]["checks"][0]
    assert check == {"criterion": "max_abs_error", "value": 1.0, "limit": 2.0, "passed": True, "severity": 0.5,
                     "decisions": None, "low": None, "high": None, "status": "pass"}


def test_as_dict_with_samples():
    data = make_parity().as_dict(with_samples=True)
    assert data["outputs"][1]["sample_reference"] == [1.0, 1.0]
    assert data["outputs"][1]["sample_variant"] == [1.0, 0.0]
    json.dumps(data, allow_nan=False)


def test_as_dict_of_structural_failure_is_strict_json():
    """Missing / reshaped outputs have infinite errors: they become null, so strict JSON works."""
    parity = compare_outputs({"a": f32([1, 2]), "b": f32([1])}, {"b": f32([1, 2])})
    assert parity.max_abs_error == float("inf")
    data = parity.as_dict()
    assert data["max_abs_error"] is None and data["severity"] is None
    back = json.loads(json.dumps(data, allow_nan=False))
    assert back["passed"] is False
    assert back["outputs"][0]["reason"] == "output missing from the variant"
    assert "shape changed" in back["outputs"][1]["reason"]


def test_nonfinite_check_values_become_null():
    verdict = VerdictSettings(criteria={"max_relative_error": 0.1})
    out = compare_output("y", np.zeros(2), np.array([0.0, 1.0]), CONTINUOUS, verdict)  # relative to 0: inf
    assert out.measures["relative_error"] == math.inf
    data = out.as_dict()
    json.dumps(data, allow_nan=False)
    assert data["measures"]["relative_error"] is None
    assert any(c["value"] is None and c["severity"] is None for c in data["checks"])


def test_output_parity_as_dict_fields():
    out = compare_output("y", REF, VAR, verdict=absolute(1, 1))
    data = out.as_dict()
    assert set(data) == {
        "name", "dtype", "shape", "kind", "kind_reason", "measures", "checks", "passed", "reason",
        "mismatch_fraction", "decisions", "decided_by", "severity", "status", "unit",
    }  # fmt: skip
    assert data["measures"]["abs_error"] == 0.5
    assert data["kind"] == "continuous"
    assert "sample_variant" in out.as_dict(with_samples=True)


# ------------------------------------------------------------------ probability maps and detection heads

MAP = OutputKind("map", why="test")


def two_regions() -> np.ndarray:
    """[1, 1, 40, 60] probabilities: two text-line-like rectangles of 0.95 on a 0.01 background."""
    m = np.full((1, 1, 40, 60), 0.01)
    m[0, 0, 5:13, 5:55] = 0.95
    m[0, 0, 20:30, 10:40] = 0.95
    return m


def _flood_boxes(mask: np.ndarray) -> set[tuple[int, int, int, int]]:
    """Bounding boxes of 8-connected components by plain flood fill (the reference for regions())."""
    seen = np.zeros_like(mask, bool)
    out = set()
    for y, x in zip(*np.nonzero(mask), strict=True):
        if seen[y, x]:
            continue
        stack, ys, xs = [(y, x)], [], []
        seen[y, x] = True
        while stack:
            cy, cx = stack.pop()
            ys.append(cy)
            xs.append(cx)
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    ny, nx = cy + dy, cx + dx
                    if 0 <= ny < mask.shape[0] and 0 <= nx < mask.shape[1] and mask[ny, nx] and not seen[ny, nx]:
                        seen[ny, nx] = True
                        stack.append((ny, nx))
        box = (min(xs), min(ys), max(xs) + 1, max(ys) + 1)
        if min(box[2] - box[0], box[3] - box[1]) >= 3:
            out.add(box)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_regions_match_a_flood_fill(seed):
    from shrinkray.measure.decisions import regions

    rng = np.random.default_rng(seed)
    values = rng.uniform(0, 1, (24, 31)) * (rng.uniform(0, 1, (24, 31)) < 0.3 + 0.1 * seed)
    boxes, peaks = regions(values, 0.3)
    assert {tuple(int(v) for v in b) for b in boxes} == _flood_boxes(values > 0.3)
    assert np.all(peaks > 0.3) and np.all(peaks <= values.max())


def test_map_region_that_shrinks_fails_in_plain_words():
    ref = two_regions()
    var = ref.copy()
    var[0, 0, 20:30, 30:40] = 0.01  # the second line loses a third of its width
    out = compare_output("prob", ref, var, MAP)
    assert not out.passed
    assert out.decisions.startswith("1 of 2 regions moved (IoU 0.")
    assert out.reason.startswith("1 of 2 regions moved") and "region agreement 0.5 (needs >= 0.97)" in out.reason
    assert out.measures["regions"] == 2 and out.measures["regions_moved"] == 1


def test_map_judged_by_its_regions_not_its_values():
    ref = two_regions()
    var = ref.copy()
    var[0, 0, 5:13, 5:55] = 0.8  # lower inside the region (RMS 6.5% of the range), still above both thresholds
    var[0, 0, 5:13, 54] = 0.01  # and one pixel narrower: IoU 49/50
    out = compare_output("prob", ref, var, MAP)
    assert out.status == UNDECIDED and out.measures["region_agreement"] == 1.0, out.reason  # 2 regions: too few
    assert out.decisions == "all 2 regions kept (IoU >= 0.9)"
    assert out.decided_by.startswith("all 2 regions kept")
    # the same change judged as values fails: that is what made text detectors' variants fail before
    assert not compare_output("prob", ref, var, CONTINUOUS).passed


def test_map_region_lost_or_new_counts_unless_it_is_a_coin_toss():
    ref = two_regions()
    lost = ref.copy()
    lost[0, 0, 20:30, 10:40] = 0.01
    assert "1 of 2 regions lost" in compare_output("prob", ref, lost, MAP).reason
    ref_speck, var_speck = two_regions(), two_regions()
    ref_speck[0, 0, 34:38, 50:56] = 0.32  # just above 0.3 in the original, just below in the variant
    var_speck[0, 0, 34:38, 50:56] = 0.28
    out = compare_output("prob", ref_speck, var_speck, MAP)
    assert out.status == UNDECIDED and out.measures["region_agreement"] == 1.0, out.reason


def test_map_without_regions_is_judged_as_values():
    ref = np.full((1, 1, 32, 32), 0.02)
    var = ref + 0.2  # every pixel moves, none crosses 0.3
    out = compare_output("prob", ref, var, MAP)
    assert "judged as values" in out.kind_reason
    assert {c.criterion for c in out.checks} == set(RELATIVE_PROFILE["continuous"])
    assert not out.passed and out.decisions == ""


def yolo_head(boxes: list[tuple[float, float, float, float, int, float]], anchors: int = 200,
              classes: int = 3) -> np.ndarray:  # fmt: skip
    """[1, 4 + classes, anchors] like YOLOv8: background anchors (score <= 0.03) and the given boxes
    (cx, cy, w, h, class, score), each given twice (a near-duplicate NMS must remove)."""
    rng = np.random.default_rng(0)
    rows = np.column_stack([rng.uniform(20, 300, (anchors, 2)), rng.uniform(10, 60, (anchors, 2)),
                            rng.uniform(0, 0.03, (anchors, classes))])  # fmt: skip
    for k, (cx, cy, w, h, cls, score) in enumerate(boxes):
        for dup, shift in ((0, 0.0), (1, 1.5)):
            rows[2 * k + dup, :4] = (cx + shift, cy, w, h)
            rows[2 * k + dup, 4 + cls] = score - 0.1 * dup
    return rows.T[None]


DETECTIONS = OutputKind("detections", -2, "test")
THREE = [(60, 60, 40, 30, 0, 0.9), (200, 80, 60, 60, 1, 0.8), (150, 250, 30, 80, 2, 0.7)]


def test_detections_box_that_moves_fails_in_plain_words():
    moved = [THREE[0], (212, 80, 60, 60, 1, 0.8), THREE[2]]  # 12 px on a 60 px box: IoU 0.67
    out = compare_output("output0", yolo_head(THREE), yolo_head(moved), DETECTIONS)
    assert not out.passed
    assert out.reason.startswith("1 of 3 boxes moved (IoU 0.67 < 0.9); box agreement 0.6667 (needs >= 0.97)")
    assert out.measures["boxes"] == 3


def test_detections_box_lost_and_class_changed():
    lost = [THREE[0], (200, 80, 60, 60, 1, 0.05), THREE[2]]
    assert compare_output("o", yolo_head(THREE), yolo_head(lost), DETECTIONS).decisions == "1 of 3 boxes lost"
    relabelled = [THREE[0], (200, 80, 60, 60, 2, 0.8), THREE[2]]
    out = compare_output("o", yolo_head(THREE), yolo_head(relabelled), DETECTIONS)
    assert out.decisions == "1 of 3 boxes lost, 1 new box"


def test_detections_ignore_what_no_post_processing_keeps():
    ref = yolo_head(THREE)
    var = yolo_head([(c + 0.5, y, w, h, k, s - 0.02) for c, y, w, h, k, s in THREE])  # half a pixel, scores a hair lower
    var[0, :4, 6:] *= 1.3  # background anchors' boxes move a lot: nothing keeps them
    out = compare_output("o", ref, var, DETECTIONS)
    assert out.status == UNDECIDED and out.measures["box_agreement"] == 1.0, out.reason  # 3 boxes: too few
    assert out.decided_by.startswith("all 3 boxes kept (IoU >= 0.9)")
    assert not compare_output("o", ref, var, CONTINUOUS).passed  # judged as values it would fail
    # a box at 0.27 in the original and 0.23 in the variant is a coin toss at the 0.25 threshold
    near = [*THREE, (250, 200, 40, 40, 0, 0.27)]
    below = [*THREE, (250, 200, 40, 40, 0, 0.23)]
    assert compare_output("o", yolo_head(near), yolo_head(below), DETECTIONS).measures["box_agreement"] == 1.0


def test_raw_yolox_offsets_are_decoded_on_their_grid():
    # 64 x 64 input: 84 anchors; anchor 70 is on the stride-16 grid (cell 6 of 4x4), objectness layout
    rows = np.zeros((84, 6))
    rows[:, 2:4] = -1.0  # log sizes
    rows[:, 5] = 0.5
    rows[70] = (0.5, 0.5, 1.0, 0.8, 0.95, 0.9)
    kind = OutputKind("detections", -1, "test", (64, 64))
    shifted = rows.copy()
    shifted[70, 0] += 0.1  # a tenth of a 16 px cell on a 43 px box: IoU 0.93 (read as pixels, 0.1 of a 1.0 box: 0.82)
    assert compare_output("o", rows[None], shifted[None], kind).measures["box_agreement"] == 1.0
    grown = rows.copy()
    grown[70, 2] += 0.4  # exp(0.4) = 1.5x as wide
    out = compare_output("o", rows[None], grown[None], kind)
    assert out.decisions.startswith("1 of 1 box moved (IoU 0.67")


@pytest.mark.parametrize("shape", [(1, 0, 5), (5, 0), (7,)])
def test_an_output_set_to_map_that_has_no_grid_is_judged_as_values(shape):
    """An output the user set to ``map`` that is empty or flat on these inputs: judged as values, no crash."""
    ref = np.full(shape, 0.5, np.float32)
    result = compare_output("mask", ref, ref.copy(), OutputKind("map"))
    assert result.passed
    assert "not a grid of values: judged as values" in result.kind_reason


def test_pooled_cosine_is_the_worst_items_mean_over_positions():
    from shrinkray.measure.parity import pooled_cosine

    ref = np.zeros((2, 3, 4))
    ref[:, :, 0] = 1.0  # every token of both items points along x
    var = ref.copy()
    var[0, 0, 1], var[0, 1, 1] = 1.0, -1.0  # two tokens of item 0 turn 45 degrees, in opposite directions
    var[1, :, 1] = 1.0  # every token of item 1 turns 45 degrees: its mean does too
    assert pooled_cosine(ref, var) == pytest.approx(math.cos(math.pi / 4))  # item 1 decides
    var[1] = ref[1]
    assert pooled_cosine(ref, var) == pytest.approx(1.0)  # item 0's turns cancel in its mean
    assert float(row_cosines(ref, var).min()) == pytest.approx(math.cos(math.pi / 4))  # a row still turned
    tokens = compare_output("hidden", ref, var, EMBEDDING)
    assert [c.criterion for c in tokens.checks] == ["min_row_cosine", "min_pooled_cosine"]
    flat = compare_output("pooled", ref[:, 0], var[:, 0], EMBEDDING)  # rank 2: already pooled, no such check
    assert flat.measures["pooled_cosine"] is None and [c.criterion for c in flat.checks] == ["min_row_cosine"]


@pytest.mark.parametrize("value", [0.999996, 0.99999996, 0.9999999999999])
def test_a_cosine_just_short_of_one_prints_its_digits_not_a_bare_one(value):
    # 0.999996 printed as "cosine 1. (needs >= 0.999)" in the Shrink page's parity table
    text = Criterion("min_cosine", 0.999).text(value)
    shown = text.split()[1]
    assert not shown.endswith(".") and float(shown) < 1.0 and abs(float(shown) - value) < 1e-6, text


def test_a_pooled_cosine_reads_as_mean_pooled_not_as_an_output_named_pooled():
    from shrinkray.measure.parity import Criterion

    criterion = Criterion("min_pooled_cosine", 0.999)
    assert criterion.text(0.99996).startswith("mean-pooled cosine 0.99996")
    assert criterion.text_limit() == "mean-pooled cosine >= 0.999"


def test_a_decoders_own_kinds_cannot_be_given_to_another_output():
    """'generated tokens' and 'prompt loss' are made by the decoder driver: judging logits 'as generation' would
    read a [.., vocab] array as tokens and margins."""
    from shrinkray.measure.parity import USER_KINDS

    assert "generation" not in USER_KINDS and "perplexity" not in USER_KINDS
    for kind in ("generation", "perplexity"):
        with pytest.raises(OptionError, match="Unknown output kind"):
            build_verdict(kinds=[f"logits={kind}"])


def test_decisions_are_counted_in_chunks_as_in_one_piece(monkeypatch):
    """decision_measures takes positions a chunk at a time (a vocabulary's logits in float64 peaked the worker at
    8x a 100 MB model): the same counts and agreement as one piece, and decision_counts matches float_measures."""
    from shrinkray.measure import parity as parity_module
    from shrinkray.measure.parity import OutputKind, decision_counts, decision_measures, float_measures

    rng = np.random.default_rng(5)
    ref = rng.normal(size=(3, 4, 16, 300))
    var = ref + rng.normal(scale=0.3, size=ref.shape)
    whole = decision_measures(ref, var, -1, 8.0)
    monkeypatch.setattr(parity_module, "DECISION_CHUNK_BYTES", 300 * 8 * 7)  # 7 positions a chunk
    assert decision_measures(ref, var, -1, 8.0) == pytest.approx(whole)
    assert 0 < whole["top1_agreement"] < 1 and whole["positions"] == 3 * 4 * 16 and 0 < whole["top5_overlap"] < 1
    kind = OutputKind("scores", axis=-1)
    narrow = ref.astype(np.float32)
    counts = decision_counts(narrow, kind)
    measured = float_measures(narrow.astype(np.float64), narrow.astype(np.float64), kind)
    assert 0 < counts["undecided_positions"] < counts["positions"] == measured["positions"]
    assert counts["undecided_positions"] == measured["undecided_positions"]


# ------------------------------------------------------------------ boxes and regions judged by their interval


def grid_of_boxes(count: int, moved: int = 0, shift: float = 12.0) -> np.ndarray:
    """[1, 7, 4 * count] like YOLOv8: ``count`` confident 20 x 20 boxes on a grid, the first ``moved`` of them
    ``shift`` px to the right (IoU 0.25 at 12 px), and background anchors."""
    side = int(math.ceil(math.sqrt(count)))
    boxes = [(30 + 30 * (k % side) + (shift if k < moved else 0.0), 30 + 30 * (k // side), 20, 20, 0, 0.9)
             for k in range(count)]  # fmt: skip
    return yolo_head(boxes, anchors=4 * count)


def test_a_box_verdict_passes_only_on_enough_boxes():
    """21 of 21 boxes kept is at least 88.6% with 95% confidence: undecided at the 0.97 bar (a 4-bit text detector
    kept 21 of 21 on synthesized pages and lost 1 of 18 on rendered ones); 120 of 120 passes."""
    few = compare_output("o", grid_of_boxes(21), grid_of_boxes(21), DETECTIONS)
    assert few.status == PASS  # bit-identical outputs changed nothing: no interval needed
    few = compare_output("o", grid_of_boxes(21), grid_of_boxes(21) + 1e-4, DETECTIONS)
    assert few.status == UNDECIDED and few.measures["box_decisions"] == 21, few.reason
    many = compare_output("o", grid_of_boxes(120), grid_of_boxes(120) + 1e-4, DETECTIONS)
    assert many.status == PASS, many.reason
    assert many.checks[0].decisions == 120 and many.checks[0].low >= 0.97
    lost = compare_output("o", grid_of_boxes(120), grid_of_boxes(120, moved=12), DETECTIONS)
    assert lost.status == FAIL and "12 of 120 boxes lost, 12 new boxes" in lost.reason, lost.reason


def test_a_detector_with_no_box_passes_on_values_only_when_they_barely_moved():
    """No confident box on the inputs (a person detector on scenes without people): values that moved like
    int4's say nothing of boxes, so the verdict is undecided; float16-like changes pass."""
    empty = yolo_head([])
    rng = np.random.default_rng(1)
    nudged = empty * (1 + rng.normal(0, 2e-5, empty.shape))
    shaken = empty * (1 + rng.normal(0, 5e-3, empty.shape))
    assert compare_output("o", empty, nudged, DETECTIONS).status == PASS
    out = compare_output("o", empty, shaken, DETECTIONS)
    assert out.status == UNDECIDED and "no box scored 0.25 on these inputs" in out.reason, out.reason


def ctc_lines(lines: int, steps: int = 40, classes: int = 40, blank_share: float = 0.6, seed: int = 0) -> np.ndarray:
    """[lines, steps, classes] CTC-like logits: the blank (class 0) on ``blank_share`` of the steps, a character
    (1..classes-1) on the rest."""
    rng = np.random.default_rng(seed)
    top = np.where(rng.random((lines, steps)) < blank_share, 0, rng.integers(1, classes, (lines, steps)))
    logits = rng.normal(0, 0.1, (lines, steps, classes))
    np.put_along_axis(logits, top[..., None], 5.0, axis=-1)
    return logits


def test_a_reader_stays_a_reader_when_its_sets_are_stacked():
    """Several synthesized sets stack on a new first axis: [sets, batch, steps, classes] is still read line by
    line (it was judged by positions: PP-OCRv5's int8 passed on 794 of 799 positions and dropped spaces on 9 of
    160 real lines)."""
    one = ctc_lines(4)
    stacked = np.stack([one, ctc_lines(4, seed=1)])
    kind = OutputKind("scores", -1, "test", rank=3)
    out = compare_output("o", stacked, stacked + 1e-3, kind)
    assert out.measures.get("sequences") == 8, out.measures
    segmentation = OutputKind("scores", -1, "test", rank=4)  # [batch, H, W, classes]: not lines
    assert compare_output("o", stacked, stacked + 1e-3, segmentation).measures.get("sequences") is None


def test_a_reader_of_dense_lines_is_read_as_text():
    """Under half the steps blank (a line full of figures) and the blank still the most frequent class of a
    large alphabet: a CTC reader; a tagger's 12 classes with the same share are not."""
    dense = ctc_lines(4, classes=100, blank_share=0.45)
    assert compare_output("o", dense, dense + 1e-3, OutputKind("scores")).measures.get("sequences") == 4
    tagger = ctc_lines(4, classes=12, blank_share=0.45)
    assert compare_output("o", tagger, tagger + 1e-3, OutputKind("scores")).measures.get("sequences") is None


def test_top_two_is_each_positions_top_class_and_gap():
    from shrinkray.measure.parity import top_two

    scores = np.array([[[1.0, 3.0, 2.5], [np.nan, 0.5, 0.25]]], np.float32)
    tops = top_two(scores, -1)
    assert tops.shape == (1, 2, 2)
    assert tops[0, 0].tolist() == [1.0, 0.5] and tops[0, 1].tolist() == [1.0, 0.25]  # NaN counts as 0


def test_a_tally_of_top_classes_judges_as_the_full_outputs_would():
    """Sets kept as top classes alone (a big alphabet's outputs past the memory cap) give the verdict the full
    outputs give: the same lines, decoded characters and decided positions."""
    from shrinkray.measure.parity import top_two

    ref = np.stack([ctc_lines(4, classes=100, seed=s) for s in range(10)])
    var = ref.copy()
    var[7, 2, 5] = 0.0
    var[7, 2, 5, 9] = 9.0  # one character misread in the 8th set
    kind = OutputKind("scores", -1, "test", rank=3)
    whole = compare_output("o", ref, var, kind)
    tally = (top_two(ref[3:], -1), top_two(var[3:], -1))
    split = compare_output("o", ref[:3], var[:3], kind, tally=tally)
    for measure in ("sequences", "decoded_sequences_unchanged", "top1_agreement", "positions", "undecided_positions",
                    "step_top1_agreement", "decoded_character_agreement"):
        assert split.measures[measure] == pytest.approx(whole.measures[measure]), measure
    assert split.status == whole.status and split.measures["sequences"] == 40
    positions = OutputKind("scores", -1, "test")  # a per-position classifier: decided positions counted too
    flat, flat_var = ref.reshape(-1, 100), var.reshape(-1, 100)
    whole = compare_output("o", flat, flat_var, positions)
    split = compare_output("o", flat[:120], flat_var[:120], positions,
                           tally=(top_two(flat[120:], -1), top_two(flat_var[120:], -1)))
    assert split.measures["positions"] == whole.measures["positions"] == 1600
    assert split.measures["top1_agreement"] == pytest.approx(whole.measures["top1_agreement"])

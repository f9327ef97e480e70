"""Output parity on hand-computed cases: errors, cosine, top-1, tolerances, exact outputs, failures."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from shrinkray.measure.parity import (
    DEFAULT_ABS_TOL,
    DEFAULT_MEAN_TOL,
    SAMPLE_POINTS,
    Parity,
    compare_output,
    compare_outputs,
    cosine_similarity,
    looks_like_scores,
)


def f32(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


# ------------------------------------------------------------------ errors and cosine


def test_max_and_mean_abs_error_hand_computed():
    ref = f32([1.0, 2.0, 3.0, 4.0])
    var = f32([1.5, 2.0, 2.75, 4.0])  # diffs 0.5, 0, 0.25, 0 (exact in binary)
    out = compare_output("y", ref, var, abs_tol=1.0, mean_tol=1.0)
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


def test_identical_outputs():
    ref = f32(np.linspace(-3, 3, 50).reshape(5, 10))
    out = compare_output("y", ref, ref.copy(), DEFAULT_ABS_TOL, DEFAULT_MEAN_TOL)
    assert out.max_abs_error == 0.0
    assert out.mean_abs_error == 0.0
    assert out.cosine == pytest.approx(1.0)
    assert out.top1_agreement == 1.0
    assert out.passed


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
    assert compare_output("y", zeros, zeros, 0.0, 0.0).cosine == 1.0
    out = compare_output("y", zeros, np.full((2, 3), 0.01, np.float32), 1.0, 1.0)
    assert out.cosine == 0.0
    assert out.passed  # an all-zero reference has no direction: only the absolute tolerances judge it


def test_small_absolute_errors_do_not_hide_a_destroyed_output():
    rng = np.random.default_rng(0)
    reference = (rng.random((1, 1, 32, 32)) * 1e-4).astype(np.float32)  # a near-zero probability map
    destroyed = rng.permutation(reference.ravel()).reshape(reference.shape)  # same values, pattern gone
    out = compare_output("maps", reference, destroyed, 0.06, 0.02)
    assert out.max_abs_error < 0.06 and out.mean_abs_error < 0.02
    assert out.cosine < 0.99
    assert not out.passed
    assert "cosine similarity" in out.reason
    assert compare_output("maps", reference, destroyed, 0.06, 0.02, min_cosine=-1.0).passed


def test_cosine_flattens_multidimensional_arrays():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert cosine_similarity(a, a.T.copy().T) == pytest.approx(1.0)
    assert cosine_similarity(a, -a) == pytest.approx(-1.0)


# ------------------------------------------------------------------ top-1


def test_top1_agreement_one_row_of_four_flips():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((4, 10)).astype(np.float32)
    var = ref.copy()
    winner = int(np.argmax(ref[2]))
    other = (winner + 1) % 10
    var[2, other] = ref[2, winner] + 1.0  # only row 2 changes its arg-max
    assert np.sum(np.argmax(ref, -1) != np.argmax(var, -1)) == 1
    out = compare_output("scores", ref, var, abs_tol=100.0, mean_tol=100.0, min_cosine=-1.0)
    assert out.top1_agreement == 0.75
    assert out.passed  # top-1 is information, not part of the verdict (other rules switched off here)


def test_top1_only_for_score_like_shapes():
    assert looks_like_scores((4, 10))
    assert looks_like_scores((2, 3, 5))
    assert not looks_like_scores((10,))
    assert not looks_like_scores((4, 1))
    assert not looks_like_scores((4, 200_000))
    vector = f32([1, 2, 3])
    assert compare_output("v", vector, vector, 1, 1).top1_agreement is None
    column = f32([[1], [2]])
    assert compare_output("c", column, column, 1, 1).top1_agreement is None


# ------------------------------------------------------------------ tolerance verdicts


REF = np.zeros(4, np.float32)
VAR = f32([0.5, 0.25, 0.0, 0.0])  # max 0.5, mean 0.1875, both exact in binary


def test_at_the_tolerance_boundary_passes():
    out = compare_output("y", REF, VAR, abs_tol=0.5, mean_tol=0.1875)
    assert out.passed
    assert out.reason == ""


def test_just_beyond_the_max_tolerance_fails():
    out = compare_output("y", REF, VAR, abs_tol=float(np.nextafter(0.5, 0.0)), mean_tol=0.1875)
    assert not out.passed
    assert "max abs error" in out.reason
    assert "mean abs error" not in out.reason


def test_just_beyond_the_mean_tolerance_fails():
    out = compare_output("y", REF, VAR, abs_tol=0.5, mean_tol=float(np.nextafter(0.1875, 0.0)))
    assert not out.passed
    assert "mean abs error" in out.reason
    assert "max abs error" not in out.reason


def test_both_tolerances_exceeded_gives_both_reasons():
    out = compare_output("y", REF, VAR, abs_tol=0.1, mean_tol=0.1)
    assert not out.passed
    assert "max abs error" in out.reason and "mean abs error" in out.reason


def test_default_tolerances():
    assert (DEFAULT_ABS_TOL, DEFAULT_MEAN_TOL) == (0.06, 0.02)
    parity = compare_outputs({"y": REF}, {"y": f32([0.06, 0, 0, 0])})
    assert (parity.abs_tol, parity.mean_tol) == (0.06, 0.02)
    # 0.06 in float32 is slightly above 0.06
    assert parity.outputs[0].max_abs_error == pytest.approx(0.06, abs=1e-8)
    parity = compare_outputs({"y": REF}, {"y": f32([0.05, 0, 0, 0])})
    assert parity.passed
    parity = compare_outputs({"y": REF}, {"y": f32([0.07, 0, 0, 0])})
    assert not parity.passed


def test_float16_outputs_compared_in_float64():
    ref = np.array([1.0, 2.0], np.float16)
    var = np.array([1.0, 2.001953125], np.float16)  # one float16 ulp at 2.0
    out = compare_output("y", ref, var, 0.01, 0.01)
    assert out.dtype == "float16"
    assert out.max_abs_error == 0.001953125
    assert out.passed


# ------------------------------------------------------------------ non-float outputs


def test_int_outputs_compared_exactly():
    ref = np.array([1, 2, 3, 4], np.int64)
    var = np.array([1, 2, 0, 4], np.int64)
    out = compare_output("label", ref, var, abs_tol=1e9, mean_tol=1e9)
    assert out.exact is True
    assert not out.passed
    assert out.mismatch_fraction == 0.25
    assert out.max_abs_error == 3.0
    assert out.mean_abs_error == 0.75
    assert out.cosine is None and out.top1_agreement is None
    assert "25.0%" in out.reason and "exactly" in out.reason


def test_int_outputs_equal_pass():
    ref = np.array([[7, 8], [9, 10]], np.int32)
    out = compare_output("label", ref, ref.copy(), 0.0, 0.0)
    assert out.exact and out.passed
    assert out.mismatch_fraction == 0.0
    assert out.max_abs_error == 0.0


def test_bool_outputs_compared_exactly():
    ref = np.array([True, False, True, True, False])
    var = np.array([True, False, False, True, False])
    out = compare_output("mask", ref, var, 1.0, 1.0)
    assert out.exact and not out.passed
    assert out.mismatch_fraction == pytest.approx(0.2)


def test_empty_int_output_passes():
    out = compare_output("label", np.zeros(0, np.int64), np.zeros(0, np.int64), 0.0, 0.0)
    assert out.passed and out.mismatch_fraction == 0.0


def test_string_outputs_compared_exactly():
    ref = np.array(["a", "b"], dtype=object)
    assert compare_output("s", ref, ref.copy(), 0, 0).passed
    out = compare_output("s", ref, np.array(["a", "c"], dtype=object), 0, 0)
    assert not out.passed
    assert out.mismatch_fraction == 0.5


# ------------------------------------------------------------------ structural failures


def test_shape_change_fails():
    out = compare_output("y", np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32), 1e9, 1e9)
    assert not out.passed
    assert "shape changed" in out.reason
    assert "[2, 3]" in out.reason and "[3, 2]" in out.reason
    assert out.max_abs_error == float("inf")


def test_shape_change_fails_for_int_outputs():
    out = compare_output("label", np.zeros(3, np.int64), np.zeros(4, np.int64), 1e9, 1e9)
    assert not out.passed
    assert "shape" in out.reason


def test_missing_output_fails():
    ref = {"a": f32([1, 2]), "b": f32([3, 4])}
    parity = compare_outputs(ref, {"a": f32([1, 2])}, abs_tol=1e9, mean_tol=1e9)
    assert not parity.passed
    by_name = {o.name: o for o in parity.outputs}
    assert by_name["a"].passed
    assert not by_name["b"].passed
    assert "missing" in by_name["b"].reason
    assert by_name["b"].shape == [2]


def test_extra_variant_outputs_are_ignored():
    parity = compare_outputs({"a": f32([1])}, {"a": f32([1]), "extra": f32([9])})
    assert [o.name for o in parity.outputs] == ["a"]
    assert parity.passed


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_nonfinite_where_original_is_finite_fails(bad):
    ref = f32([1.0, 2.0, 3.0])
    var = f32([1.0, bad, 3.0])
    out = compare_output("y", ref, var, abs_tol=1e9, mean_tol=1e9)
    assert not out.passed
    assert "NaN" in out.reason
    # the non-finite element is left out of the error numbers, which stay finite
    assert out.max_abs_error == 0.0
    assert math.isfinite(out.cosine)


def test_finite_where_original_is_nonfinite_fails():
    out = compare_output("y", f32([np.nan, 1.0]), f32([0.0, 1.0]), 1e9, 1e9)
    assert not out.passed


def test_same_nan_positions_pass():
    ref = f32([np.nan, 1.0, 2.0])
    var = f32([np.nan, 1.0, 2.01])
    out = compare_output("y", ref, var, 0.1, 0.1)
    assert out.passed
    assert out.max_abs_error == pytest.approx(0.01, abs=1e-6)
    assert all(math.isfinite(v) for v in out.sample_reference + out.sample_variant)


@pytest.mark.parametrize(("r", "v"), [(np.inf, -np.inf), (np.inf, np.nan), (np.nan, -np.inf)])
def test_different_nonfinite_values_fail(r, v):
    out = compare_output("y", f32([r, 1.0]), f32([v, 1.0]), 1e9, 1e9)
    assert not out.passed


# ------------------------------------------------------------------ samples


def test_samples_capped_at_sample_points():
    ref = np.random.default_rng(1).standard_normal((50, 200)).astype(np.float32)
    var = ref + np.float32(0.5)
    out = compare_output("y", ref, var, 1.0, 1.0)
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
    out = compare_output("y", ref, ref * 2, 100, 100)
    assert out.sample_reference == [1, 2, 3, 4, 5, 6]
    assert out.sample_variant == [2, 4, 6, 8, 10, 12]


def test_samples_deterministic():
    ref = np.random.default_rng(2).standard_normal(5000).astype(np.float32)
    a = compare_output("y", ref, ref, 1, 1)
    b = compare_output("y", ref, ref, 1, 1)
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
    return compare_outputs(ref, var, abs_tol=2.0, mean_tol=1.0, min_cosine=0.5)


def test_parity_aggregates():
    parity = make_parity()
    assert [o.name for o in parity.outputs] == ["scores", "other", "label"]
    assert not parity.passed  # only the label fails (cosine 0.707 clears the 0.5 floor set above)
    assert [o.passed for o in parity.outputs] == [True, True, False]
    assert parity.worst_cosine == pytest.approx(1 / math.sqrt(2))
    assert parity.max_abs_error == 1.0
    assert parity.mean_abs_error == 0.5


def test_parity_fails_on_the_default_cosine_floor():
    ref = {"other": f32([1.0, 1.0])}
    var = {"other": f32([1.0, 0.0])}  # cosine 0.707: within abs/mean 2.0/1.0, below the default 0.99
    parity = compare_outputs(ref, var, abs_tol=2.0, mean_tol=1.0)
    assert not parity.passed
    assert parity.min_cosine == 0.99
    assert "cosine similarity 0.7071 < 0.99" in parity.outputs[0].reason


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


def test_as_dict_is_json_serialisable():
    parity = make_parity()
    data = parity.as_dict()
    text = json.dumps(data, allow_nan=False)  # all finite here: strict JSON works
    back = json.loads(text)
    assert back["passed"] is False
    assert back["abs_tol"] == 2.0 and back["mean_tol"] == 1.0
    assert back["worst_cosine"] == pytest.approx(1 / math.sqrt(2))
    assert [o["name"] for o in back["outputs"]] == ["scores", "other", "label"]
    assert "sample_reference" not in back["outputs"][0]
    assert back["outputs"][2]["mismatch_fraction"] == 0.5


def test_as_dict_with_samples():
    data = make_parity().as_dict(with_samples=True)
    assert data["outputs"][1]["sample_reference"] == [1.0, 1.0]
    assert data["outputs"][1]["sample_variant"] == [1.0, 0.0]
    json.dumps(data, allow_nan=False)


def test_as_dict_of_structural_failure_needs_allow_nan():
    """Missing / reshaped outputs carry inf errors: serialisable only with allow_nan (non-strict JSON)."""
    parity = compare_outputs({"a": f32([1, 2]), "b": f32([1])}, {"b": f32([1, 2])})
    data = parity.as_dict()
    assert data["max_abs_error"] == float("inf")
    text = json.dumps(data, allow_nan=True)
    back = json.loads(text)
    assert back["passed"] is False
    assert back["outputs"][0]["reason"] == "output missing from the variant"
    assert "shape changed" in back["outputs"][1]["reason"]


def test_output_parity_as_dict_fields():
    out = compare_output("y", REF, VAR, 1, 1)
    data = out.as_dict()
    assert set(data) == {
        "name", "dtype", "shape", "exact", "max_abs_error", "mean_abs_error", "cosine",
        "top1_agreement", "mismatch_fraction", "passed", "reason",
    }  # fmt: skip
    assert data["max_abs_error"] == 0.5
    assert "sample_variant" in out.as_dict(with_samples=True)

"""Property tests for shrinkray.methods.quant: linear 8-bit codes, palettes and error statistics.

The bounds checked here are the ones the module documents:

* symmetric int8: codes in [-127, 127], zero point 0, |x - decode(x)| <= scale / 2
* asymmetric uint8: 0.0 decodes to exactly 0.0, same half-step bound
* palettes: every value goes to its nearest level, at most N distinct values

Magnitudes in the property tests stop at 1e38: the two float32 overflow edges
above that are pinned by explicit tests at the end of the linear section.
"""

from __future__ import annotations

import math
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from shrinkray import arrays
from shrinkray.arrays import distinct_count, unique_values
from shrinkray.methods import quant
from shrinkray.methods.quant import (
    code_steps,
    error_stats,
    kmeans_levels,
    linear_levels,
    quantize_linear,
    ranges_by_axis,
    snap_to_levels,
    value_ranges,
)

#: 150 examples per property: the properties are in the fuzz tier (about a second each); the
#: hand-computed and edge-case tests below stay in the unit tier.
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: Largest magnitude in the property tests (float32 max has its own tests).
HUGE = float(np.float32(1e38))


# --------------------------------------------------------------------------- strategies


@st.composite
def float32_arrays(draw, min_dims: int = 1, max_dims: int = 4) -> np.ndarray:
    """float32 arrays of rank 1-4 with tiny, ordinary and huge magnitudes and some exact zeros."""
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=1, max_side=5))
    kind = draw(st.sampled_from(["any", "scaled", "scaled"]))
    if kind == "any":
        # Hypothesis mixes in subnormals, 0.0, -0.0 and values near the bounds.
        elements = st.floats(-HUGE, HUGE, allow_nan=False, allow_infinity=False, width=32)
        arr = draw(hnp.arrays(np.float32, shape, elements=elements))
    else:
        unit = st.floats(-1.0, 1.0, allow_nan=False, width=32)
        base = draw(hnp.arrays(np.float32, shape, elements=unit)).astype(np.float64)
        exponent = draw(st.integers(-42, 37))
        arr = (base * 10.0**exponent).astype(np.float32)
    zeros = draw(hnp.arrays(np.bool_, shape, elements=st.booleans()))
    if draw(st.booleans()):
        arr = np.where(zeros, np.float32(0.0), arr).astype(np.float32)
    assert np.all(np.isfinite(arr))
    return arr


@st.composite
def array_and_axis(draw) -> tuple[np.ndarray, int | None]:
    """An array, an axis (None, 0 or -1), and sometimes whole channels set to zero."""
    arr = draw(float32_arrays())
    axis = draw(st.sampled_from([None, 0, -1]))
    if axis is not None and draw(st.booleans()):
        channels = arr.shape[axis]
        dead = draw(st.lists(st.integers(0, channels - 1), min_size=1, max_size=channels, unique=True))
        moved = np.moveaxis(arr.copy(), axis, 0)
        moved[dead] = 0.0
        arr = np.ascontiguousarray(np.moveaxis(moved, 0, axis))
    return arr, axis


def _expected_scale_shape(shape: tuple[int, ...], axis: int | None) -> tuple[int, ...]:
    if axis is None:
        return (1,) * len(shape)
    axis = axis % len(shape)
    return tuple(n if a == axis else 1 for a, n in enumerate(shape))


def _assert_half_step(x: np.ndarray, codes) -> None:
    """|x - decode(x)| <= scale/2 elementwise with the element's own (channel) scale."""
    decoded = codes.decode(np.float32)
    assert decoded.shape == x.shape
    assert decoded.dtype == np.float32
    x64 = x.astype(np.float64)
    scale = np.broadcast_to(codes.scale.astype(np.float64), x.shape)
    error = np.abs(x64 - decoded.astype(np.float64))
    bound = scale / 2 + 1e-6 * np.abs(x64) + 1e-12
    bad = ~(error <= bound)
    assert not bad.any(), (
        f"half-step bound broken at {np.argwhere(bad)[:3].tolist()}: x={x64[bad][:3]}, "
        f"decoded={decoded[bad][:3]}, scale={scale[bad][:3]}"
    )


def _assert_scale_layout(x: np.ndarray, codes, axis: int | None) -> None:
    assert codes.codes.shape == x.shape
    assert codes.scale.dtype == np.float32
    assert codes.scale.shape == _expected_scale_shape(x.shape, axis)
    assert codes.zero_point.shape == codes.scale.shape
    assert np.all(np.isfinite(codes.scale)) and np.all(codes.scale > 0)
    assert codes.axis == (None if axis is None else axis % x.ndim)


# --------------------------------------------------------------------------- linear codes


@pytest.mark.fuzz
@PROPERTY
@given(array_and_axis())
def test_symmetric_codes_are_int8_in_range_with_zero_point_zero(case):
    x, axis = case
    codes = quantize_linear(x, symmetric=True, axis=axis)
    assert codes.symmetric
    assert codes.codes.dtype == np.int8
    assert codes.codes.min() >= -127 and codes.codes.max() <= 127
    assert codes.zero_point.dtype == np.int8
    assert np.all(codes.zero_point == 0)
    _assert_scale_layout(x, codes, axis)


@pytest.mark.fuzz
@PROPERTY
@given(array_and_axis())
def test_symmetric_error_is_at_most_half_a_step(case):
    x, axis = case
    _assert_half_step(x, quantize_linear(x, symmetric=True, axis=axis))


@pytest.mark.fuzz
@PROPERTY
@given(array_and_axis())
def test_symmetric_uses_the_full_code_range_per_channel(case):
    """The largest |value| of a (non-negligible) channel maps to code +-127: no wasted range."""
    x, axis = case
    codes = quantize_linear(x, symmetric=True, axis=axis)
    reduce = tuple(a for a in range(x.ndim) if axis is None or a != axis % x.ndim)
    amax = np.max(np.abs(x.astype(np.float64)), axis=reduce, keepdims=True)
    top = np.max(np.abs(codes.codes.astype(np.int64)), axis=reduce, keepdims=True)
    normal = amax >= 1e-30  # scale = amax / 127 stays a normal float32
    assert np.all(top[normal] == 127)
    # All-zero channels keep a usable scale (1.0) and decode to exact zeros.
    assert np.all(top[amax == 0] == 0)


@pytest.mark.fuzz
@PROPERTY
@given(array_and_axis())
def test_asymmetric_codes_are_uint8_and_zero_is_exact(case):
    x, axis = case
    codes = quantize_linear(x, symmetric=False, axis=axis)
    assert not codes.symmetric
    assert codes.codes.dtype == np.uint8
    assert codes.zero_point.dtype == np.uint8
    _assert_scale_layout(x, codes, axis)
    decoded = codes.decode(np.float32)
    zero_in = x == 0
    assert np.all(decoded[zero_in] == 0.0), "0.0 must be exactly representable"


@pytest.mark.fuzz
@PROPERTY
@given(array_and_axis())
def test_asymmetric_error_is_at_most_half_a_step(case):
    x, axis = case
    _assert_half_step(x, quantize_linear(x, symmetric=False, axis=axis))


@pytest.mark.fuzz
@PROPERTY
@given(array_and_axis(), st.booleans(), st.integers(1, 7))
def test_blocks_of_any_size_give_the_same_codes_decode_and_errors(case, symmetric, block):
    """The blocked loops (tiny blocks here, so every tensor spans many) match one whole-tensor pass."""
    x, axis = case
    whole = quantize_linear(x, symmetric=symmetric, axis=axis)
    with mock.patch.object(quant, "BLOCK_VALUES", block):
        blocked = quantize_linear(x, symmetric=symmetric, axis=axis)
        decoded = blocked.decode()
        stats = blocked.error_against(x)
    assert np.array_equal(blocked.codes, whole.codes) and np.array_equal(blocked.scale, whole.scale)
    assert np.array_equal(blocked.zero_point, whole.zero_point)
    # what the graph computes: Cast -> (Sub) -> Mul in float32, element by element
    expected = (whole.codes.astype(np.float32) - whole.zero_point.astype(np.float32)) * whole.scale
    assert np.array_equal(decoded, expected)
    reference = error_stats(x, expected)
    assert stats.max_abs == reference.max_abs
    assert stats.rms == pytest.approx(reference.rms, rel=1e-4, abs=1e-30)


def test_ranges_by_axis_match_numpy_for_every_axis():
    x = np.random.default_rng(0).normal(size=(6, 5, 3, 2)).astype(np.float32)
    ranges = ranges_by_axis(x, [None, 0, 1, 2, 3, -1])
    assert set(ranges) == {None, 0, 1, 2, 3}
    for axis, (lo, hi) in ranges.items():
        reduce = None if axis is None else tuple(a for a in range(4) if a != axis)
        assert np.array_equal(lo, x.min(axis=reduce, keepdims=True).astype(np.float64))
        assert np.array_equal(hi, x.max(axis=reduce, keepdims=True).astype(np.float64))
    assert np.array_equal(value_ranges(x, 1)[0], ranges[1][0])
    lo, hi = value_ranges(np.array([1.0, np.nan, 2.0], dtype=np.float32))
    assert np.isnan(lo).all() and np.isnan(hi).all()  # NaN shows up in the range: callers refuse the tensor


def test_error_stats_does_not_touch_its_inputs():
    a = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    b = np.array([1.5, 2.0, 2.0], dtype=np.float32)
    stats = error_stats(a, b)
    assert b.tolist() == [1.5, 2.0, 2.0] and a.tolist() == [1.0, 2.0, 3.0]
    assert stats.max_abs == 1.0 and stats.rms == pytest.approx(np.sqrt((0.25 + 1.0) / 3))


def test_quantize_linear_codes_non_finite_values_as_zero_and_scales_from_the_rest():
    x = np.array([[1.0, np.inf, -2.0], [np.nan, 0.5, 4.0]], dtype=np.float32)
    codes = quantize_linear(x, symmetric=True, axis=0)
    assert codes.codes[0, 1] == 0 and codes.codes[1, 0] == 0
    assert codes.scale.ravel().tolist() == pytest.approx([2.0 / 127, 4.0 / 127])


@pytest.mark.parametrize("symmetric", [True, False])
def test_all_zero_tensor_round_trips_exactly(symmetric):
    x = np.zeros((3, 4), np.float32)
    for axis in (None, 0, 1):
        codes = quantize_linear(x, symmetric=symmetric, axis=axis)
        assert np.all(codes.scale == 1.0)
        assert np.array_equal(codes.decode(), x)


def test_per_channel_scales_follow_each_channel_hand_computed():
    x = np.array([[1.0, -2.0, 0.5], [0.0, 0.0, 0.0], [-127.0, 10.0, 3.0]], np.float32)
    rows = quantize_linear(x, symmetric=True, axis=0)
    np.testing.assert_allclose(rows.scale.ravel(), [2.0 / 127, 1.0, 1.0], rtol=1e-7)
    assert rows.codes[2, 0] == -127 and rows.codes[0, 1] == -127
    cols = quantize_linear(x, symmetric=True, axis=-1)
    assert cols.axis == 1
    np.testing.assert_allclose(cols.scale.ravel(), [1.0, 10.0 / 127, 3.0 / 127], rtol=1e-7)
    tensor = quantize_linear(x, symmetric=True)
    assert tensor.scale.shape == (1, 1)
    assert tensor.scale.item() == pytest.approx(1.0, rel=1e-7)


def test_asymmetric_hand_computed_positive_only_range():
    x = np.array([0.0, 1.0, 2.55], np.float32)
    codes = quantize_linear(x, symmetric=False)
    assert codes.zero_point.item() == 0
    assert codes.scale.item() == pytest.approx(0.01, rel=1e-6)
    assert codes.codes.tolist() == [0, 100, 255]


def test_symmetric_float32_max_decodes_to_a_finite_value():
    x = np.array([np.finfo(np.float32).max, -1.0], np.float32)
    codes = quantize_linear(x, symmetric=True)
    with np.errstate(over="ignore", invalid="ignore"):
        decoded = codes.decode()
    assert np.all(np.isfinite(decoded)), decoded
    _assert_half_step(x, codes)


def test_asymmetric_range_wider_than_float32_max_stays_finite():
    x = np.array([-2e38, 2e38, 1.0, 0.0], np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        codes = quantize_linear(x, symmetric=False)
        decoded = codes.decode()
    assert np.all(np.isfinite(codes.scale)), codes.scale
    assert decoded[3] == 0.0
    _assert_half_step(x, codes)


# --------------------------------------------------------------------------- palettes


@st.composite
def palette_inputs(draw) -> tuple[np.ndarray, int]:
    """1-D float32 values (often with repeats) and a level count."""
    n = draw(st.integers(1, 32))
    size = draw(st.integers(1, 300))
    if draw(st.booleans()):
        pool = draw(st.lists(st.floats(-1e6, 1e6, allow_nan=False, width=32), min_size=1, max_size=40, unique=True))
        idx = draw(hnp.arrays(np.int64, size, elements=st.integers(0, len(pool) - 1)))
        x = np.asarray(pool, np.float32)[idx]
    else:
        x = draw(hnp.arrays(np.float32, size, elements=st.floats(-1e6, 1e6, allow_nan=False, width=32)))
    return x, n


@pytest.mark.fuzz
@PROPERTY
@given(palette_inputs())
def test_kmeans_levels_are_few_sorted_deterministic_and_inside_the_data(case):
    x, n = case
    levels = kmeans_levels(x, n)
    again = kmeans_levels(x.copy(), n)
    assert np.array_equal(levels, again), "kmeans_levels must be deterministic"
    assert 1 <= levels.size <= n
    assert np.all(np.diff(levels) > 0), "levels must be sorted and distinct"
    assert np.all(np.isfinite(levels))
    lo, hi = float(x.min()), float(x.max())
    # Cluster means come from float64 prefix sums: allow their rounding, nothing more.
    tol = 64 * np.finfo(np.float64).eps * float(np.sum(np.abs(x.astype(np.float64))))
    assert np.all(levels >= lo - tol) and np.all(levels <= hi + tol), (levels, lo, hi)


@pytest.mark.fuzz
@PROPERTY
@given(palette_inputs())
def test_kmeans_snap_is_exact_when_there_are_few_distinct_values(case):
    x, _ = case
    distinct = distinct_count(x)
    for n in (distinct, distinct + 3):
        levels = kmeans_levels(x, n)
        snapped = snap_to_levels(x, levels)
        assert snapped.dtype == x.dtype
        assert np.array_equal(snapped, x)


@pytest.mark.fuzz
@PROPERTY
@given(palette_inputs())
def test_kmeans_then_snap_has_at_most_n_distinct_values(case):
    x, n = case
    snapped = snap_to_levels(x, kmeans_levels(x, n))
    assert snapped.shape == x.shape and snapped.dtype == x.dtype
    assert distinct_count(snapped) <= n


@st.composite
def snap_inputs(draw) -> tuple[np.ndarray, np.ndarray]:
    dtype = draw(st.sampled_from([np.float32, np.float16, np.float64]))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6))
    values = st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False, width=16 if dtype is np.float16 else 32)
    x = draw(hnp.arrays(dtype, shape, elements=values))
    levels = draw(hnp.arrays(np.float64, st.integers(1, 10), elements=st.floats(-2e4, 2e4, allow_nan=False)))
    return x, levels


@pytest.mark.fuzz
@PROPERTY
@given(snap_inputs())
def test_snap_to_levels_picks_the_nearest_level_brute_force(case):
    x, levels = case
    out = snap_to_levels(x, levels)
    assert out.shape == x.shape
    assert out.dtype == x.dtype
    # The documented contract: levels are rounded to the array's dtype first.
    typed = unique_values(levels.astype(x.dtype)).astype(np.float64)
    assert distinct_count(out) <= levels.size
    flat_x = x.astype(np.float64).ravel()
    flat_out = out.astype(np.float64).ravel()
    assert np.all(np.isin(flat_out, typed)), "every result must be one of the levels"  # float16-safe: float64
    distances = np.abs(flat_x[:, None] - typed[None, :])
    best = distances[np.arange(flat_x.size), np.argmin(distances, axis=1)]
    chosen = np.abs(flat_x - flat_out)
    assert np.all(chosen <= best * (1 + 1e-12) + 1e-300), (flat_x, flat_out, typed)


def test_snap_to_levels_hand_computed():
    x = np.array([[-3.0, 0.4], [0.6, 10.0]], np.float32)
    out = snap_to_levels(x, np.array([0.0, 1.0, 5.0]))
    assert out.dtype == np.float32
    assert out.tolist() == [[0.0, 0.0], [1.0, 5.0]]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_snap_to_levels_leaves_nan_and_inf_alone(dtype):
    x = np.array([np.nan, 0.2, np.inf, -np.inf, 0.9, -7.0], dtype)
    out = snap_to_levels(x, np.array([0.0, 1.0]))
    assert out.dtype == dtype
    assert np.isnan(out[0])
    assert out[2] == np.inf and out[3] == -np.inf
    assert out[[1, 4, 5]].tolist() == [0.0, 1.0, 0.0]


def test_kmeans_and_linear_levels_ignore_non_finite_values():
    x = np.array([np.nan, 1.0, 2.0, np.inf, -np.inf, 3.0], np.float32)
    assert kmeans_levels(x, 8).tolist() == [1.0, 2.0, 3.0]
    assert linear_levels(x, 3).tolist() == [1.0, 2.0, 3.0]
    assert kmeans_levels(np.array([np.nan], np.float32), 4).tolist() == [0.0]


def test_kmeans_beats_linear_levels_on_outliers():
    """The palettize method's reason to exist: 0.1% outliers at 18 std must not wreck the palette."""
    rng = np.random.default_rng(1234)
    x = rng.standard_normal(200_000).astype(np.float32)
    outliers = rng.choice(x.size, size=200, replace=False)
    x[outliers] = (18.0 * rng.choice([-1.0, 1.0], size=outliers.size)).astype(np.float32)

    def rel_error(levels: np.ndarray) -> float:
        return error_stats(x, snap_to_levels(x, levels)).relative_rms

    k256 = rel_error(kmeans_levels(x, 256))
    lin256 = rel_error(linear_levels(x, 256))
    assert k256 < 0.02
    assert lin256 > 5 * k256
    k16 = rel_error(kmeans_levels(x, 16))
    assert k16 < 0.25
    assert len(kmeans_levels(x, 16)) == 16


def test_kmeans_level_of_small_cluster_survives_a_huge_negative_outlier():
    x = np.array([-1e17, 9, 9, 9, 10, 10], np.float32)
    levels = kmeans_levels(x, 2)
    assert levels.size == 2
    assert levels[0] == pytest.approx(-1e17, rel=1e-6)
    assert 9.0 <= levels[1] <= 10.0, levels


# --------------------------------------------------------------------------- palettes: same results in less memory


PALETTE_CASES = ["normal", "heavy", "few", "non_finite", "float16", "float64", "float64_overflow", "lumpy"]


def _palette_cases() -> dict[str, np.ndarray]:
    """Seeded tensors of every kind palettize meets (issue 12: the low-memory code must give the old results)."""
    rng = np.random.default_rng(20261127)
    n = 70_007  # 7 x 10_001: not a multiple of the prefix block nor of any chunk
    normal = rng.standard_normal(n).astype(np.float32)
    heavy = (rng.standard_t(1.5, n) * 0.02).astype(np.float32)
    heavy[rng.choice(n, 40, replace=False)] = rng.choice([-1e4, 3e4, 1e9, -1e17], 40).astype(np.float32)
    few = rng.choice(np.array([-0.5, 0.0, 0.125, 2.0, 7.0, -3.25, 1e-3, 9.5, 0.3, -0.7], np.float32), n)
    non_finite = rng.standard_normal(n).astype(np.float32)
    non_finite[rng.choice(n, 300, replace=False)] = rng.choice([np.nan, np.inf, -np.inf], 300)
    half = (rng.standard_normal(n) * 3).astype(np.float16)
    half[:50] = np.float16(np.nan)
    half[50:60] = np.float16(-np.inf)
    wide = rng.laplace(size=n) * np.exp(rng.standard_normal(n))  # float64
    wide[:5] = [1e30, -1e15, np.nan, np.inf, 0.0]
    overflow = wide.copy()
    overflow[:2] = [1e200, -1e150]  # squares overflow the prefix sums: NaN errors, in both versions alike
    lumpy = np.repeat(rng.standard_normal(2_000), rng.integers(1, 80, 2_000)).astype(np.float32)  # many ties
    return {"normal": normal.reshape(7, -1), "heavy": heavy, "few": few, "non_finite": non_finite,
            "float16": half, "float64": wide, "float64_overflow": overflow, "lumpy": lumpy}  # fmt: skip


@pytest.mark.parametrize("small_chunks", [False, True], ids=["default", "small-chunks"])
@pytest.mark.parametrize("levels", [2, 16, 256])
@pytest.mark.parametrize("case", PALETTE_CASES)
def test_low_memory_palette_gives_the_old_levels_and_snapped_values(case, levels, small_chunks):
    """kmeans_levels / snap_to_levels against the float64 code they replaced (tests/palette_reference.py).

    Equal bit for bit by construction: the block prefix sums redo np.cumsum's additions in
    order, the exact cluster sums split like numpy's pairwise sum, and comparisons of float32
    values with float64 bounds use the bounds rounded outward. ``small_chunks`` makes every
    chunked pass take many steps (and a cluster span several chunks) on these small tensors.
    """
    from palette_reference import kmeans_levels as old_kmeans_levels
    from palette_reference import snap_to_levels as old_snap_to_levels

    x = _palette_cases()[case]
    patches = [mock.patch.object(quant, "CHUNK_VALUES", 128), mock.patch.object(quant, "BLOCK_VALUES", 1000),
               mock.patch("shrinkray.arrays.RUN_BLOCK", 777)] if small_chunks else []  # fmt: skip
    for p in patches:
        p.start()
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # float64_overflow
            new_levels = kmeans_levels(x, levels)
            snapped, distinct = quant.snap_and_count(x, new_levels)
    finally:
        for p in patches:
            p.stop()
    with np.errstate(over="ignore", invalid="ignore"):
        old_levels = old_kmeans_levels(x, levels)
    np.testing.assert_allclose(new_levels, old_levels, rtol=1e-6, atol=0)
    assert new_levels.dtype == np.float64 and np.array_equal(new_levels, old_levels)
    old_snapped = old_snap_to_levels(x, old_levels)
    assert snapped.dtype == x.dtype and snapped.shape == x.shape
    assert np.array_equal(snapped, old_snapped, equal_nan=True)
    assert np.array_equal(np.signbit(snapped), np.signbit(old_snapped))  # inf keeps its sign
    assert np.array_equal(snap_to_levels(x, old_levels), old_snapped, equal_nan=True)
    assert distinct == distinct_count(old_snapped[np.isfinite(old_snapped)])


@pytest.mark.parametrize("case", PALETTE_CASES)
def test_linear_levels_and_distinct_count_give_the_old_results(case):
    x = _palette_cases()[case]
    flat = x.astype(np.float64).ravel()
    finite = flat[np.isfinite(flat)]
    assert np.array_equal(linear_levels(x, 16), np.linspace(finite.min(), finite.max(), 16))
    with mock.patch("shrinkray.arrays.RUN_BLOCK", 1000):
        assert distinct_count(x) == np.unique(arrays.sortable(x)).size  # float16-safe: widened
        finite = x[np.isfinite(x)]
        assert distinct_count(finite) == np.unique(arrays.sortable(finite)).size  # float16-safe: widened


def test_distinct_count_edge_cases():
    assert distinct_count(np.array([], np.float32)) == 0
    assert distinct_count(np.array([-0.0, 0.0, np.nan, np.nan, 1.0], np.float32)) == 3  # -0 == 0, NaNs once
    assert distinct_count(np.array([np.nan, np.nan])) == 1
    assert distinct_count(np.array([3, 1, 3, 2], np.int16)) == 3
    assert distinct_count(np.float32(2.5)) == 1
    assert distinct_count(np.array([1 + 1j, 1 + 1j, np.nan])) == 2  # complex: np.unique's rules
    assert distinct_count(np.array(["b", "a", "b"])) == 2


def _traced_peak(fn, *args) -> int:
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_palette_memory_stays_near_one_float32_copy():
    """Issue 12: kmeans_levels held ~7 float64-sized copies of a tensor, snap_to_levels ~5; now ~1 each."""
    x = np.random.default_rng(5).standard_normal(2_000_000).astype(np.float32)  # 8 MB
    levels = kmeans_levels(x, 256)
    assert _traced_peak(kmeans_levels, x, 256) < 1.5 * x.nbytes  # the sorted copy, block sums, small chunks
    # the output, then one block's int64 indices and mask at a time, whatever the tensor's size
    assert _traced_peak(snap_to_levels, x, levels) < x.nbytes + 12 * quant.BLOCK_VALUES
    assert _traced_peak(distinct_count, x) < 1.2 * x.nbytes  # the sorted copy


# --------------------------------------------------------------------------- error statistics


def test_error_stats_hand_computed():
    stats = error_stats(np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 2.0, 3.0, 6.0]))
    assert stats.max_abs == 2.0
    assert stats.rms == pytest.approx(1.0)  # sqrt(4 / 4)
    assert stats.relative_rms == pytest.approx(1.0 / math.sqrt(7.5))  # rms of original: sqrt(30 / 4)
    assert stats.as_dict() == {
        "max_abs_error": stats.max_abs,
        "rms_error": stats.rms,
        "relative_rms_error": stats.relative_rms,
    }


def test_error_stats_edge_cases():
    same = error_stats(np.array([0.5, -1.5]), np.array([0.5, -1.5]))
    assert (same.max_abs, same.rms, same.relative_rms) == (0.0, 0.0, 0.0)
    # Non-finite originals are left out of every statistic.
    masked = error_stats(np.array([1.0, np.nan, np.inf]), np.array([2.0, 5.0, 7.0]))
    assert (masked.max_abs, masked.rms, masked.relative_rms) == (1.0, 1.0, 1.0)
    # A zero original that moved has infinite relative error, never a silent 0.
    moved = error_stats(np.zeros(4), np.array([0.0, 0.0, 0.0, 2.0]))
    assert moved.rms == pytest.approx(1.0)
    assert moved.relative_rms == float("inf")
    nothing = error_stats(np.array([np.nan]), np.array([1.0]))
    assert (nothing.max_abs, nothing.rms, nothing.relative_rms) == (0.0, 0.0, 0.0)


def test_error_stats_near_the_float32_limit_stay_finite():
    big = np.array([1e38, -1e38, 3e38], dtype=np.float32)
    stats = error_stats(big, np.zeros(3, dtype=np.float32))
    assert stats.max_abs == pytest.approx(3e38, rel=1e-6)
    assert stats.rms == pytest.approx(np.sqrt((1e76 + 1e76 + 9e76) / 3), rel=1e-6)
    assert stats.relative_rms == pytest.approx(1.0)


def test_error_stats_reports_nan_when_the_approximation_has_nan():
    stats = error_stats(np.array([1.0, 2.0, 3.0], np.float32), np.array([1.0, np.nan, 3.0], np.float32))
    assert np.isnan(stats.max_abs) and np.isnan(stats.rms)


@pytest.mark.parametrize("axis", [None, 0, 1, 2])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_blocked_codes_on_every_axis_and_dtype_match_a_direct_computation(axis, dtype):
    x = (np.random.default_rng(3).normal(size=(7, 5, 6)) * 3).astype(dtype)
    with mock.patch.object(quant, "BLOCK_VALUES", 11):  # several rows per block, a ragged last block
        codes = quantize_linear(x, symmetric=False, axis=axis)
        decoded = codes.decode(dtype)
        stats = codes.error_against(x, dtype)
    expected = ((codes.codes.astype(np.float32) - codes.zero_point.astype(np.float32)) * codes.scale).astype(dtype)
    assert decoded.dtype == dtype and np.array_equal(decoded, expected)
    reference = error_stats(x, expected)
    assert stats.max_abs == pytest.approx(reference.max_abs, rel=1e-6)
    assert stats.rms == pytest.approx(reference.rms, rel=1e-4)
    if axis is not None:
        assert codes.scale.shape == tuple(n if a == axis else 1 for a, n in enumerate(x.shape))


def test_float64_values_beyond_float32_are_coded_as_zero_not_inf():
    x = np.array([1.0, -2.0, 1e39], dtype=np.float64)
    lo, hi = value_ranges(x)  # finite in float64, but not representable as a float32 scale
    codes = quantize_linear(x, symmetric=False, ranges=(lo, hi))
    decoded = codes.decode()
    assert np.all(np.isfinite(decoded)) and decoded[2] == 0.0
    assert decoded[0] == pytest.approx(1.0, abs=3 / 255) and decoded[1] == pytest.approx(-2.0, abs=3 / 255)


def test_error_stats_with_a_scratch_approximation_are_the_same_and_overwrite_only_it():
    rng = np.random.default_rng(5)
    original = rng.normal(size=(64, 33)).astype(np.float32)
    original[3, 4] = np.inf
    approx = original.astype(np.float16).astype(np.float32)
    kept = original.copy()
    expected = error_stats(original, approx.copy())
    assert error_stats(original, approx, approx_is_scratch=True) == expected
    np.testing.assert_array_equal(original, kept)  # the reference is never written


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("levels", [2, 3, 16, 32, 64, 128, 255, 256])
def test_fewer_levels_use_that_many_codes_and_stay_within_half_a_step(symmetric, levels):
    x = np.random.default_rng(levels).standard_normal((24, 80)).astype(np.float32)
    codes = quantize_linear(x, symmetric=symmetric, axis=0, levels=levels)
    q = codes.codes.astype(np.int64)
    if symmetric:
        half = code_steps(levels, True)
        assert 2 * half + 1 <= max(levels, 3) and q.min() >= -half and q.max() <= half
    else:
        assert q.min() >= 0 and q.max() <= levels - 1
    assert all(len(np.unique(row)) <= (max(levels, 3) if symmetric else levels) for row in q)  # float16-safe: int64 codes
    decoded = codes.decode(np.float64)
    assert np.all(np.abs(decoded - x) <= codes.scale.astype(np.float64) * (0.5 + 1e-6))


def test_code_steps_refuses_levels_outside_2_to_256():
    assert code_steps(256, True) == 127 and code_steps(256, False) == 255 and code_steps(64, True) == 31
    for bad in (1, 257):
        with pytest.raises(ValueError, match="2-256"):
            code_steps(bad, False)

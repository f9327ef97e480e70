"""Quantization maths on numpy arrays: 8-bit linear codes and palettes.

Pure functions with documented error bounds (checked by property tests):

* symmetric int8: |x - decode(x)| <= scale / 2 with scale = max|x| / 127
* asymmetric uint8: |x - decode(x)| <= scale / 2 with
  scale = (max(x, 0) - min(x, 0)) / 255, so 0.0 is exactly representable
* palettes: every value maps to its nearest level, so the error is at most
  half the gap between neighbouring levels (or the distance to the end level)
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from shrinkray import arrays

#: Values processed per block by the linear quantizer: temporaries stay a few
#: MB (cache-sized) instead of several full-size float copies of a big tensor.
BLOCK_VALUES = 1 << 18


def _row_blocks(shape: tuple[int, ...]) -> list:
    """Slices along axis 0 covering about BLOCK_VALUES values each (``...`` for a scalar)."""
    if len(shape) == 0:
        return [...]
    if shape[0] == 0:
        return [slice(0, 0)]
    step = _rows_per_block(shape)
    return [slice(i, min(i + step, shape[0])) for i in range(0, shape[0], step)]


def _rows_per_block(shape: tuple[int, ...]) -> int:
    row = max(1, int(np.prod(shape[1:], dtype=np.int64)))
    return max(1, min(shape[0], BLOCK_VALUES // row))


class _Scratch:
    """One block-sized buffer reused for every block: a fresh large array per block costs page faults."""

    def __init__(self, shape: tuple[int, ...], dtype: type = np.float32) -> None:
        head = (_rows_per_block(shape),) if shape else ()
        self.buffer = np.empty(head + tuple(shape[1:]), dtype=dtype)

    def view(self, rows) -> np.ndarray:
        return self.buffer if rows is ... else self.buffer[: rows.stop - rows.start]


def _param_block(param: np.ndarray, rows) -> np.ndarray:
    """The part of a per-channel parameter that broadcasts against ``x[rows]``."""
    return param[rows] if rows is not ... and param.ndim and param.shape[0] > 1 else param


@dataclass
class LinearCodes:
    """8-bit codes and the per-tensor or per-channel parameters to decode them.

    ``scale`` and ``zero_point`` have the tensor's rank with size 1 on every
    axis but the channel axis, so ``(codes - zero_point) * scale`` broadcasts.
    """

    codes: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None
    symmetric: bool

    def _decode_block(self, rows, out: np.ndarray) -> np.ndarray:
        """Decode ``codes[rows]`` into ``out`` exactly as the graph does: Cast, (Sub), Mul in float32."""
        codes = self.codes[rows]
        if self.symmetric:
            return np.multiply(codes, _param_block(self.scale, rows), out=out, dtype=np.float32)
        np.subtract(codes, _param_block(self.zero_point, rows), out=out, dtype=np.float32)
        return np.multiply(out, _param_block(self.scale, rows), out=out)

    def decode(self, dtype: np.dtype | type = np.float32) -> np.ndarray:
        """The float values the graph rebuilds: ``(float(codes) - zero_point) * scale`` in float32."""
        out = np.empty(self.codes.shape, dtype=dtype)
        scratch = _Scratch(self.codes.shape)
        for rows in _row_blocks(self.codes.shape):
            out[rows] = self._decode_block(rows, scratch.view(rows))
        return out

    def error_against(self, original: np.ndarray, dtype: np.dtype | type = np.float32) -> ErrorStats:
        """:func:`error_stats` of ``original`` against ``decode(dtype)``, block by block (no full-size copies).

        ``original`` must be finite (quantize_linear codes non-finite values as 0).
        """
        acc = _ErrorSums()
        narrow = np.dtype(dtype) != np.float32
        work = np.float64 if np.dtype(dtype) == np.float64 else np.float32
        scratch = _Scratch(self.codes.shape)
        for rows in _row_blocks(self.codes.shape):
            decoded = self._decode_block(rows, scratch.view(rows))
            if narrow:
                decoded = decoded.astype(dtype).astype(work)
            acc.add(np.asarray(original[rows], dtype=work), decoded, finite=True, overwrite_b=True)
        return acc.stats()


def _reduce_axes(rank: int, axis: int | None) -> tuple[int, ...]:
    return tuple(a for a in range(rank) if a != axis) if axis is not None else tuple(range(rank))


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _float32_scale(scale: np.ndarray, max_code: float) -> np.ndarray:
    """Round scales to float32 so that ``max_code * scale`` stays finite; 0 becomes 1."""
    scale32 = scale.astype(np.float32)
    too_big = scale32.astype(np.float64) * max_code > _FLOAT32_MAX
    scale32 = np.where(too_big, np.nextafter(scale32, np.float32(0)), scale32)
    return np.where(scale32 > 0, scale32, np.float32(1.0)).astype(np.float32)


def fits_float32(values: np.ndarray) -> bool:
    """Every value is finite and within float32's range (so float32 scales can reach it)."""
    return bool(np.all(np.abs(values) <= _FLOAT32_MAX))  # False for inf and NaN too


def value_ranges(x: np.ndarray, axis: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Min and max per slice along ``axis`` (or of the whole array), keepdims, as float64.

    NaN propagates, so a non-finite result means the slice holds inf or NaN.
    """
    return ranges_by_axis(x, [axis])[axis]


def ranges_by_axis(x: np.ndarray, axes: list[int | None]) -> dict[int | None, tuple[np.ndarray, np.ndarray]]:
    """:func:`value_ranges` for several axes (None = whole tensor).

    The whole tensor's range comes from any per-axis range, without another
    pass over ``x``. (Reducing cache-sized blocks for every axis in one sweep
    measured no faster than one numpy reduction per axis.)
    """
    x = np.asarray(x)
    axes = [None if a is None else a % x.ndim for a in axes]
    if x.size == 0:
        empty = np.zeros((1,) * x.ndim)
        return {a: (empty, empty) for a in axes}
    out: dict[int | None, tuple[np.ndarray, np.ndarray]] = {}
    for axis in sorted(set(axes), key=lambda a: a is None):  # per-axis ranges first, the whole tensor last
        if axis is None and out:
            lo, hi = next(iter(out.values()))
            out[None] = (np.min(lo, keepdims=True), np.max(hi, keepdims=True))
            continue
        reduce = _reduce_axes(x.ndim, axis)
        lo = np.min(x, axis=reduce, keepdims=True).astype(np.float64)
        out[axis] = (lo, np.max(x, axis=reduce, keepdims=True).astype(np.float64))
    return out


def quantize_linear(
    x: np.ndarray,
    *,
    symmetric: bool = True,
    axis: int | None = None,
    ranges: tuple[np.ndarray, np.ndarray] | None = None,
) -> LinearCodes:
    """Quantize a float array to 8-bit codes, per tensor (axis=None) or per channel.

    Symmetric gives int8 codes in [-127, 127] with zero point 0; asymmetric
    gives uint8 codes in [0, 255] with an integer zero point. Scales are float32.
    ``ranges`` is :func:`value_ranges` of ``x`` along ``axis`` when the caller
    has it already (it saves two passes over a large tensor). Non-finite
    values are coded as 0. Codes are computed in float32, block by block.
    """
    with np.errstate(over="ignore"):  # float64 values beyond float32 become inf, handled below
        x32 = np.asarray(x, dtype=np.float32)
    if axis is not None:
        axis = axis % x32.ndim
    lo, hi = ranges if ranges is not None else value_ranges(x32, axis)
    if not (fits_float32(lo) and fits_float32(hi)):  # inf/NaN, or float64 values beyond float32
        x32 = np.where(np.isfinite(x32), x32, np.float32(0.0))
        lo, hi = value_ranges(x32, axis)
    # Ranges and scales in float64: a float32 (hi - lo) can overflow near the float32 limit.
    if symmetric:
        scale = _float32_scale(np.maximum(np.abs(lo), np.abs(hi)) / 127.0, 127.0)
        zero_point = np.zeros_like(scale, dtype=np.int8)
        low_code, high_code, code_type = -127, 127, np.int8
    else:
        lo, hi = np.minimum(lo, 0.0), np.maximum(hi, 0.0)
        scale = _float32_scale((hi - lo) / 255.0, 255.0)
        zero_point = np.clip(np.rint(-lo / scale), 0, 255).astype(np.uint8)
        low_code, high_code, code_type = 0, 255, np.uint8
    codes = np.empty(x32.shape, dtype=code_type)
    zero32 = zero_point.astype(np.float32)
    scratch = _Scratch(x32.shape)
    for rows in _row_blocks(x32.shape):
        q = np.divide(x32[rows], _param_block(scale, rows), out=scratch.view(rows))
        np.rint(q, out=q)
        if not symmetric:
            q += _param_block(zero32, rows)
        np.clip(q, low_code, high_code, out=q)
        codes[rows] = q
    return LinearCodes(codes=codes, scale=scale, zero_point=zero_point, axis=axis, symmetric=symmetric)


def _nearest(sorted_levels: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Index of the nearest level for each value (levels sorted ascending)."""
    if sorted_levels.size == 1:
        return np.zeros(values.shape, dtype=np.int64)
    bounds = (sorted_levels[:-1] + sorted_levels[1:]) / 2.0
    return arrays.searchsorted(bounds, values, side="left")


def _split_init(flat: np.ndarray, prefix: np.ndarray, prefix_sq: np.ndarray, n_levels: int) -> np.ndarray:
    """Initial levels by repeatedly splitting the cluster with the largest squared error.

    Deterministic, and outliers (which carry large squared error) get levels of
    their own early instead of stretching a bulk level, unlike quantile seeding.
    """

    def sse(lo: int, hi: int) -> float:
        total = prefix[hi] - prefix[lo]
        return float(prefix_sq[hi] - prefix_sq[lo] - total * total / (hi - lo))

    heap = [(-sse(0, flat.size), 0, flat.size)]
    done: list[tuple[int, int]] = []
    while heap and len(heap) + len(done) < n_levels:
        neg, lo, hi = heapq.heappop(heap)
        if -neg <= 0 or flat[lo] == flat[hi - 1]:
            done.append((lo, hi))
            continue
        mean = (prefix[hi] - prefix[lo]) / (hi - lo)
        cut = int(np.clip(arrays.searchsorted(flat[lo:hi], mean, side="right") + lo, lo + 1, hi - 1))
        heapq.heappush(heap, (-sse(lo, cut), lo, cut))
        heapq.heappush(heap, (-sse(cut, hi), cut, hi))
    ranges = done + [(lo, hi) for _, lo, hi in heap]
    return arrays.unique_values(np.array([(prefix[hi] - prefix[lo]) / (hi - lo) for lo, hi in ranges]))


def kmeans_levels(x: np.ndarray, n_levels: int, *, max_iter: int = 60, tol: float = 1e-9) -> np.ndarray:
    """Deterministic 1-D k-means (Lloyd) levels for the values of ``x``.

    Every value counts, so frequent values pull levels towards them, and the
    split-based seeding gives isolated outliers levels of their own. Works on
    the sorted values with prefix sums: one iteration costs O(n_levels log n).
    """
    flat = arrays.sort(np.asarray(x, dtype=np.float64))
    flat = flat[np.isfinite(flat)]
    if flat.size == 0:
        return np.zeros(1)
    unique = arrays.unique_values(flat)
    if unique.size <= n_levels:
        return unique
    prefix = np.concatenate([[0.0], np.cumsum(flat)])
    prefix_sq = np.concatenate([[0.0], np.cumsum(flat * flat)])
    levels = _split_init(flat, prefix, prefix_sq, n_levels)
    spread = max(float(flat[-1] - flat[0]), 1e-30)
    for _ in range(max_iter):
        bounds = (levels[:-1] + levels[1:]) / 2.0
        edges = np.concatenate([[0], arrays.searchsorted(flat, bounds, side="left"), [flat.size]])
        counts = np.diff(edges)
        sums = prefix[edges[1:]] - prefix[edges[:-1]]
        keep = counts > 0
        new_levels = _cluster_means(flat, edges, sums, counts, keep)
        converged = new_levels.size == levels.size and np.max(np.abs(new_levels - levels)) <= tol * spread
        levels = new_levels
        if converged:
            break
    # Final means from exact per-cluster sums: running sums lose precision next to huge outliers.
    bounds = (levels[:-1] + levels[1:]) / 2.0
    edges = np.concatenate([[0], arrays.searchsorted(flat, bounds, side="left"), [flat.size]])
    counts = np.diff(edges)
    keep = counts > 0
    sums = np.zeros(counts.size)
    sums[keep] = np.add.reduceat(flat, edges[:-1][keep])
    return _cluster_means(flat, edges, sums, counts, keep)


def _cluster_means(
    flat: np.ndarray, edges: np.ndarray, sums: np.ndarray, counts: np.ndarray, keep: np.ndarray
) -> np.ndarray:
    """Mean of each non-empty cluster, clipped into the cluster's own value range."""
    means = sums[keep] / counts[keep]
    lows = flat[edges[:-1][keep]]
    highs = flat[edges[1:][keep] - 1]
    return arrays.unique_values(np.clip(means, lows, highs))


def linear_levels(x: np.ndarray, n_levels: int) -> np.ndarray:
    """Evenly spaced levels from min to max (what simple tools do; outliers stretch it)."""
    flat = np.asarray(x, dtype=np.float64).ravel()
    flat = flat[np.isfinite(flat)]
    if flat.size == 0:
        return np.zeros(1)
    lo, hi = float(flat.min()), float(flat.max())
    if lo == hi:
        return np.array([lo])
    return np.linspace(lo, hi, n_levels)


def snap_to_levels(x: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Replace every value by its nearest level, keeping shape and dtype.

    Levels are first rounded to the array's dtype so that the result has at
    most ``len(levels)`` distinct values. Non-finite values are left as they are.
    """
    arr = np.asarray(x)
    typed = arrays.unique_values(np.asarray(levels).astype(arr.dtype))
    out = typed[_nearest(typed.astype(np.float64), arr.astype(np.float64))]
    return np.where(np.isfinite(arr), out, arr).astype(arr.dtype)


@dataclass
class ErrorStats:
    """How far a rewritten tensor moved from the original."""

    max_abs: float
    rms: float
    relative_rms: float  # rms error / rms of the original values

    def as_dict(self) -> dict[str, float]:
        return {"max_abs_error": self.max_abs, "rms_error": self.rms, "relative_rms_error": self.relative_rms}


def _sum_squares(v: np.ndarray) -> float:
    """Sum of squares; a float32 dot that overflows (values near 1e19 and up) is redone in float64."""
    with np.errstate(over="ignore", invalid="ignore"):
        total = float(np.dot(v, v))
    return total if math.isfinite(total) else float(np.dot(v.astype(np.float64), v.astype(np.float64)))


class _ErrorSums:
    """Running max abs error and sums of squares, so error stats can be built block by block."""

    def __init__(self) -> None:
        self.count = 0
        self.sum_sq_diff = 0.0
        self.sum_sq_ref = 0.0
        self.max_abs = 0.0

    def add(self, a: np.ndarray, b: np.ndarray, *, finite: bool = False, overwrite_b: bool = False) -> None:
        """Add reference ``a`` against ``b``; with ``finite`` the caller vouches that ``a`` has no inf/NaN.

        With ``overwrite_b``, ``b`` (a scratch buffer) becomes the difference instead of a new array.
        """
        a, b = a.reshape(-1), b.reshape(-1)
        if not finite:
            mask = np.isfinite(a)
            if not mask.all():
                a, b = a[mask], b[mask]
        if a.size == 0:
            return
        diff = np.subtract(a, b, out=b) if overwrite_b and b.dtype == a.dtype else a - b
        self.count += diff.size
        self.sum_sq_diff += _sum_squares(diff)
        self.sum_sq_ref += _sum_squares(a)
        worst = float(np.max(np.abs(diff, out=diff)))  # diff is ours: a new array or the caller's scratch
        self.max_abs = worst if math.isnan(worst) else max(self.max_abs, worst)  # NaN must not hide

    def stats(self) -> ErrorStats:
        if not self.count:
            return ErrorStats(0.0, 0.0, 0.0)
        rms = float(np.sqrt(self.sum_sq_diff / self.count))
        ref = float(np.sqrt(self.sum_sq_ref / self.count))
        return ErrorStats(
            max_abs=self.max_abs,
            rms=rms,
            relative_rms=rms / ref if ref > 0 else (0.0 if rms == 0 else float("inf")),
        )


def error_stats(original: np.ndarray, approx: np.ndarray) -> ErrorStats:
    """Max abs, RMS and relative RMS error over the finite values of ``original``.

    Works in float32 for float32/float16 tensors (float64 only for float64 ones),
    without mask copies when every value is finite: this runs once per rewritten
    tensor, on tensors of up to hundreds of millions of values.
    """
    work = np.float64 if np.asarray(original).dtype == np.float64 else np.float32
    acc = _ErrorSums()
    acc.add(np.asarray(original, dtype=work), np.asarray(approx, dtype=work))
    return acc.stats()

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
from dataclasses import dataclass

import numpy as np


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

    def decode(self, dtype: np.dtype | type = np.float32) -> np.ndarray:
        values = (self.codes.astype(np.float32) - self.zero_point.astype(np.float32)) * self.scale
        return values.astype(dtype)


def _reduce_axes(rank: int, axis: int | None) -> tuple[int, ...]:
    return tuple(a for a in range(rank) if a != axis) if axis is not None else tuple(range(rank))


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _float32_scale(scale: np.ndarray, max_code: float) -> np.ndarray:
    """Round scales to float32 so that ``max_code * scale`` stays finite; 0 becomes 1."""
    scale32 = scale.astype(np.float32)
    too_big = scale32.astype(np.float64) * max_code > _FLOAT32_MAX
    scale32 = np.where(too_big, np.nextafter(scale32, np.float32(0)), scale32)
    return np.where(scale32 > 0, scale32, np.float32(1.0)).astype(np.float32)


def quantize_linear(x: np.ndarray, *, symmetric: bool = True, axis: int | None = None) -> LinearCodes:
    """Quantize a float array to 8-bit codes, per tensor (axis=None) or per channel.

    Symmetric gives int8 codes in [-127, 127] with zero point 0; asymmetric
    gives uint8 codes in [0, 255] with an integer zero point. Scales are float32.
    """
    x32 = np.asarray(x, dtype=np.float32)
    if axis is not None:
        axis = axis % x32.ndim
    reduce = _reduce_axes(x32.ndim, axis)
    # Ranges and scales in float64: a float32 (hi - lo) can overflow near the float32 limit.
    finite = np.where(np.isfinite(x32), x32, 0.0).astype(np.float64)
    empty = np.zeros((1,) * x32.ndim)
    if symmetric:
        amax = np.max(np.abs(finite), axis=reduce, keepdims=True) if x32.size else empty
        scale = _float32_scale(amax / 127.0, 127.0)
        codes = np.clip(np.rint(finite / scale), -127, 127).astype(np.int8)
        zero_point = np.zeros_like(scale, dtype=np.int8)
    else:
        lo = np.minimum(np.min(finite, axis=reduce, keepdims=True), 0.0) if x32.size else empty
        hi = np.maximum(np.max(finite, axis=reduce, keepdims=True), 0.0) if x32.size else empty
        scale = _float32_scale((hi - lo) / 255.0, 255.0)
        zero_point = np.clip(np.rint(-lo / scale), 0, 255).astype(np.uint8)
        codes = np.clip(np.rint(finite / scale) + zero_point, 0, 255).astype(np.uint8)
    return LinearCodes(codes=codes, scale=scale, zero_point=zero_point, axis=axis, symmetric=symmetric)


def _nearest(sorted_levels: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Index of the nearest level for each value (levels sorted ascending)."""
    if sorted_levels.size == 1:
        return np.zeros(values.shape, dtype=np.int64)
    bounds = (sorted_levels[:-1] + sorted_levels[1:]) / 2.0
    return np.searchsorted(bounds, values, side="left")


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
        cut = int(np.clip(np.searchsorted(flat[lo:hi], mean, side="right") + lo, lo + 1, hi - 1))
        heapq.heappush(heap, (-sse(lo, cut), lo, cut))
        heapq.heappush(heap, (-sse(cut, hi), cut, hi))
    ranges = done + [(lo, hi) for _, lo, hi in heap]
    return np.unique([(prefix[hi] - prefix[lo]) / (hi - lo) for lo, hi in ranges])


def kmeans_levels(x: np.ndarray, n_levels: int, *, max_iter: int = 60, tol: float = 1e-9) -> np.ndarray:
    """Deterministic 1-D k-means (Lloyd) levels for the values of ``x``.

    Every value counts, so frequent values pull levels towards them, and the
    split-based seeding gives isolated outliers levels of their own. Works on
    the sorted values with prefix sums: one iteration costs O(n_levels log n).
    """
    flat = np.sort(np.asarray(x, dtype=np.float64).ravel())
    flat = flat[np.isfinite(flat)]
    if flat.size == 0:
        return np.zeros(1)
    unique = np.unique(flat)
    if unique.size <= n_levels:
        return unique
    prefix = np.concatenate([[0.0], np.cumsum(flat)])
    prefix_sq = np.concatenate([[0.0], np.cumsum(flat * flat)])
    levels = _split_init(flat, prefix, prefix_sq, n_levels)
    spread = max(float(flat[-1] - flat[0]), 1e-30)
    for _ in range(max_iter):
        bounds = (levels[:-1] + levels[1:]) / 2.0
        edges = np.concatenate([[0], np.searchsorted(flat, bounds, side="left"), [flat.size]])
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
    edges = np.concatenate([[0], np.searchsorted(flat, bounds, side="left"), [flat.size]])
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
    return np.unique(np.clip(means, lows, highs))


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
    typed = np.unique(np.asarray(levels).astype(arr.dtype))
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


def error_stats(original: np.ndarray, approx: np.ndarray) -> ErrorStats:
    """Max abs, RMS and relative RMS error over the finite values of ``original``.

    Works in float32 for float32/float16 tensors (float64 only for float64 ones),
    without mask copies when every value is finite: this runs once per rewritten
    tensor, on tensors of up to hundreds of millions of values.
    """
    work = np.float64 if np.asarray(original).dtype == np.float64 else np.float32
    a = np.asarray(original, dtype=work).ravel()
    b = np.asarray(approx, dtype=work).ravel()
    finite = np.isfinite(a)
    if not finite.all():
        if not finite.any():
            return ErrorStats(0.0, 0.0, 0.0)
        a, b = a[finite], b[finite]
    diff = a - b
    count = diff.size
    rms = float(np.sqrt(float(np.dot(diff, diff)) / count)) if count else 0.0
    ref = float(np.sqrt(float(np.dot(a, a)) / count)) if count else 0.0
    return ErrorStats(
        max_abs=float(np.max(np.abs(diff))) if count else 0.0,
        rms=rms,
        relative_rms=rms / ref if ref > 0 else (0.0 if rms == 0 else float("inf")),
    )

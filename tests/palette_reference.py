"""The palette code as it was before issue 12's memory pass (commit 0adca7c), kept to pin the new code to it.

shrinkray.methods.quant's kmeans_levels and snap_to_levels now work on one sorted float32 copy with
block prefix sums and snap block by block; tests/methods/test_quant.py checks that they give what this
float64 version gives. Frozen: do not "fix" it.
"""

from __future__ import annotations

import heapq

import numpy as np

from shrinkray import arrays


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


def snap_to_levels(x: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Replace every value by its nearest level, keeping shape and dtype.

    Levels are first rounded to the array's dtype so that the result has at
    most ``len(levels)`` distinct values. Non-finite values are left as they are.
    """
    arr = np.asarray(x)
    typed = arrays.unique_values(np.asarray(levels).astype(arr.dtype))
    out = typed[_nearest(typed.astype(np.float64), arr.astype(np.float64))]
    return np.where(np.isfinite(arr), out, arr).astype(arr.dtype)

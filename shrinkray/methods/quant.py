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


def code_steps(levels: int, symmetric: bool) -> int:
    """Steps from zero to the largest code (symmetric: each side, of the odd count at most ``levels``, 3 at
    least, 255 at most) or from the lowest to the highest code (asymmetric) when ``levels`` (2-256) codes are used."""
    if not 2 <= levels <= 256:
        raise ValueError(f"levels must be within 2-256, not {levels}")
    return max(1, min(127, (levels - 1) // 2)) if symmetric else levels - 1


def quantize_linear(
    x: np.ndarray,
    *,
    symmetric: bool = True,
    axis: int | None = None,
    ranges: tuple[np.ndarray, np.ndarray] | None = None,
    levels: int = 256,
) -> LinearCodes:
    """Quantize a float array to 8-bit codes, per tensor (axis=None) or per channel.

    Symmetric gives int8 codes in [-127, 127] with zero point 0; asymmetric
    gives uint8 codes in [0, 255] with an integer zero point. Scales are float32.
    ``levels`` (2-256) below 256 uses that many codes of the 8-bit container (symmetric: the odd count
    at most ``levels`` around zero, 3 at least): a coarser step, so the raw size is the same but gzip and brotli,
    which code each byte by how often it occurs, shrink the file to about log2(levels) bits per value.
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
        half = code_steps(levels, symmetric)
        scale = _float32_scale(np.maximum(np.abs(lo), np.abs(hi)) / half, half)
        zero_point = np.zeros_like(scale, dtype=np.int8)
        low_code, high_code, code_type = -half, half, np.int8
    else:
        top = code_steps(levels, symmetric)
        lo, hi = np.minimum(lo, 0.0), np.maximum(hi, 0.0)
        scale = _float32_scale((hi - lo) / top, top)
        zero_point = np.clip(np.rint(-lo / scale), 0, top).astype(np.uint8)
        low_code, high_code, code_type = 0, top, np.uint8
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


#: Values per step of the palette passes over a sorted tensor (prefix sums, exact cluster sums):
#: float64 temporaries of 512 KB, whatever the tensor's size. A multiple of PREFIX_BLOCK and at
#: least 128 (numpy's pairwise-sum block), or the sums would not be numpy's bit for bit.
CHUNK_VALUES = 1 << 16

#: Values per stored prefix sum: a range sum is the stored sum plus at most this many values.
PREFIX_BLOCK = 64


def sorted_finite(x: np.ndarray) -> np.ndarray:
    """The finite values of ``x``, sorted, in float32 (float16/float32 input) or float64 (anything else).

    One sorted copy; the non-finite values (-inf first, +inf and NaN last) are sliced off,
    not filtered out. Every value of the float32 result is exactly the float64 one.
    """
    arr = np.asarray(x)
    work = np.float32 if arr.dtype in (np.float16, np.float32) else np.float64
    flat = arrays.sorted_copy(arr, work)
    lo = int(arrays.searchsorted(flat, flat.dtype.type(-np.inf), side="right"))
    hi = int(arrays.searchsorted(flat, flat.dtype.type(np.inf), side="left"))  # NaN sorts after +inf
    return flat[lo:hi]


def _toward(values: np.ndarray | float, dtype: np.dtype, *, up: bool) -> np.ndarray:
    """float64 ``values`` rounded to ``dtype`` toward +inf (``up``) or -inf, so that comparisons hold.

    For every value ``a`` of ``dtype``: ``a < v`` iff ``a < up(v)`` and ``a <= v`` iff ``a <= down(v)``.
    """
    wide = np.asarray(values, dtype=np.float64)
    if dtype == np.float64:
        return wide
    with np.errstate(over="ignore"):
        near = wide.astype(dtype)
    if up:
        return np.where(near < wide, np.nextafter(near, dtype.type(np.inf)), near)
    return np.where(near > wide, np.nextafter(near, dtype.type(-np.inf)), near)


def _search(flat: np.ndarray, bounds: np.ndarray | float, side: str) -> np.ndarray:
    """``searchsorted(flat, bounds)`` with float64 ``bounds`` compared exactly, without widening ``flat``."""
    return arrays.searchsorted(flat, _toward(bounds, flat.dtype, up=side == "left"), side=side)


class _PrefixSums:
    """``prefix[i] = cumsum(flat)[i - 1]`` (and of the squares), bit for bit, from one stored sum per block.

    Full float64 prefix-sum arrays would take 4x a float32 tensor's bytes. This keeps the
    running sum at every PREFIX_BLOCK-th value and adds the remaining values of a block
    in order, starting from it: the same additions in the same order as ``np.cumsum``.
    """

    def __init__(self, flat: np.ndarray) -> None:
        self.flat = flat
        n = flat.size
        self.sums = np.zeros(n // PREFIX_BLOCK + 1)
        self.squares = np.zeros(n // PREFIX_BLOCK + 1)
        carry = carry_sq = 0.0
        for start in range(0, n, CHUNK_VALUES):  # CHUNK_VALUES is a multiple of PREFIX_BLOCK
            part = flat[start : start + CHUNK_VALUES].astype(np.float64)
            sq = part * part
            if start:
                part[0] += carry
                sq[0] += carry_sq
            np.cumsum(part, out=part)
            np.cumsum(sq, out=sq)
            carry, carry_sq = part[-1], sq[-1]
            first = start // PREFIX_BLOCK + 1
            ends = part[PREFIX_BLOCK - 1 :: PREFIX_BLOCK]
            self.sums[first : first + ends.size] = ends
            self.squares[first : first + ends.size] = sq[PREFIX_BLOCK - 1 :: PREFIX_BLOCK]

    def at(self, i: int) -> tuple[float, float]:
        """``prefix[i]`` and ``prefix_sq[i]`` as Python floats (IEEE doubles, as numpy's float64)."""
        block, rest = divmod(i, PREFIX_BLOCK)
        total, total_sq = float(self.sums[block]), float(self.squares[block])
        start = block * PREFIX_BLOCK
        for v in self.flat[start : start + rest].tolist():
            total += v
            total_sq += v * v
        return total, total_sq

    def many(self, idx: np.ndarray) -> np.ndarray:
        """``prefix[idx]`` for an array of indices."""
        idx = np.asarray(idx, dtype=np.int64)
        out = np.empty(idx.size)
        offsets = np.arange(PREFIX_BLOCK)
        step = max(1, CHUNK_VALUES // PREFIX_BLOCK)
        for first in range(0, idx.size, step):
            part = idx[first : first + step]
            block, rest = np.divmod(part, PREFIX_BLOCK)
            rows = np.empty((part.size, PREFIX_BLOCK + 1))
            rows[:, 0] = self.sums[block]
            where = np.minimum(block[:, None] * PREFIX_BLOCK + offsets, max(self.flat.size - 1, 0))
            rows[:, 1:] = self.flat[where]
            np.cumsum(rows, axis=1, out=rows)  # row by row in order: the additions np.cumsum made
            out[first : first + part.size] = rows[np.arange(part.size), rest]
        return out


def _pairwise_sum(flat: np.ndarray, lo: int, hi: int) -> float:
    """``np.add.reduce(float64(flat[lo:hi]))`` without a float64 copy of the whole range.

    numpy sums pairwise: a range of more than 128 values is split at half its length
    rounded down to a multiple of 8 and the halves' sums are added. Splitting the same
    way down to CHUNK_VALUES gives the same additions, so the same result.
    """
    n = hi - lo
    if n <= CHUNK_VALUES:
        return float(np.add.reduce(flat[lo:hi].astype(np.float64), initial=0.0))
    half = n // 2
    half -= half % 8
    return _pairwise_sum(flat, lo, lo + half) + _pairwise_sum(flat, lo + half, hi)


def _segment_sums(flat: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``np.add.reduceat(float64(flat), starts)`` for non-empty, adjacent segments ending at ``ends``.

    Bit for bit (reduceat adds a segment's first value to numpy's pairwise sum of the
    rest), converting at most CHUNK_VALUES values to float64 at a time.
    """
    sums = np.empty(starts.size)
    i = 0
    while i < starts.size:
        lo = int(starts[i])
        if int(ends[i]) - lo > CHUNK_VALUES:
            sums[i] = float(flat[lo]) + _pairwise_sum(flat, lo + 1, int(ends[i]))
            i += 1
            continue
        j = int(np.searchsorted(ends, lo + CHUNK_VALUES, side="right"))  # float16-safe: int64 indices
        span = flat[lo : int(ends[j - 1])].astype(np.float64)
        sums[i:j] = np.add.reduceat(span, starts[i:j] - lo)
        i = j
    return sums


def _split_init(flat: np.ndarray, prefix: _PrefixSums, n_levels: int) -> np.ndarray:
    """Initial levels by repeatedly splitting the cluster with the largest squared error.

    Deterministic, and outliers (which carry large squared error) get levels of
    their own early instead of stretching a bulk level, unlike quantile seeding.
    """

    def sse(lo: int, hi: int) -> float:
        (s_lo, q_lo), (s_hi, q_hi) = prefix.at(lo), prefix.at(hi)
        total = s_hi - s_lo
        return float(q_hi - q_lo - total * total / (hi - lo))

    def mean(lo: int, hi: int) -> float:
        return (prefix.at(hi)[0] - prefix.at(lo)[0]) / (hi - lo)

    heap = [(-sse(0, flat.size), 0, flat.size)]
    done: list[tuple[int, int]] = []
    while heap and len(heap) + len(done) < n_levels:
        neg, lo, hi = heapq.heappop(heap)
        if -neg <= 0 or flat[lo] == flat[hi - 1]:
            done.append((lo, hi))
            continue
        cut = int(np.clip(_search(flat[lo:hi], mean(lo, hi), side="right") + lo, lo + 1, hi - 1))
        heapq.heappush(heap, (-sse(lo, cut), lo, cut))
        heapq.heappush(heap, (-sse(cut, hi), cut, hi))
    ranges = done + [(lo, hi) for _, lo, hi in heap]
    return arrays.unique_values(np.array([mean(lo, hi) for lo, hi in ranges]))


def kmeans_levels(x: np.ndarray, n_levels: int, *, max_iter: int = 60, tol: float = 1e-9) -> np.ndarray:
    """Deterministic 1-D k-means (Lloyd) levels for the values of ``x``.

    Every value counts, so frequent values pull levels towards them, and the
    split-based seeding gives isolated outliers levels of their own. Works on
    the sorted values with prefix sums: one iteration costs O(n_levels log n).
    """
    return kmeans_levels_sorted(sorted_finite(x), n_levels, max_iter=max_iter, tol=tol)


def kmeans_levels_sorted(flat: np.ndarray, n_levels: int, *, max_iter: int = 60, tol: float = 1e-9) -> np.ndarray:
    """:func:`kmeans_levels` of values already sorted and finite (:func:`sorted_finite`).

    Extra memory: a few percent of ``flat`` (block prefix sums) plus CHUNK_VALUES-sized
    temporaries; the levels are those full float64 prefix sums would give, bit for bit.
    """
    if flat.size == 0:
        return np.zeros(1)
    starts = arrays.run_starts(flat, limit=n_levels)
    if not isinstance(starts, int):  # at most n_levels distinct values: they are the levels
        return flat[starts].astype(np.float64)
    prefix = _PrefixSums(flat)
    levels = _split_init(flat, prefix, n_levels)
    spread = max(float(flat[-1]) - float(flat[0]), 1e-30)
    for _ in range(max_iter):
        edges = _edges(flat, levels)
        counts = np.diff(edges)
        sums = np.diff(prefix.many(edges))
        keep = counts > 0
        new_levels = _cluster_means(flat, edges, sums, counts, keep)
        converged = new_levels.size == levels.size and np.max(np.abs(new_levels - levels)) <= tol * spread
        levels = new_levels
        if converged:
            break
    # Final means from exact per-cluster sums: running sums lose precision next to huge outliers.
    edges = _edges(flat, levels)
    counts = np.diff(edges)
    keep = counts > 0
    sums = np.zeros(counts.size)
    sums[keep] = _segment_sums(flat, edges[:-1][keep], edges[1:][keep])
    return _cluster_means(flat, edges, sums, counts, keep)


def _edges(flat: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Cluster boundaries in ``flat``: each value goes to its nearest level (ties to the lower one)."""
    bounds = (levels[:-1] + levels[1:]) / 2.0
    return np.concatenate([[0], _search(flat, bounds, side="left"), [flat.size]])


def _cluster_means(
    flat: np.ndarray, edges: np.ndarray, sums: np.ndarray, counts: np.ndarray, keep: np.ndarray
) -> np.ndarray:
    """Mean of each non-empty cluster, clipped into the cluster's own value range."""
    means = sums[keep] / counts[keep]
    lows = flat[edges[:-1][keep]].astype(np.float64)
    highs = flat[edges[1:][keep] - 1].astype(np.float64)
    return arrays.unique_values(np.clip(means, lows, highs))


def linear_levels(x: np.ndarray, n_levels: int) -> np.ndarray:
    """Evenly spaced levels from min to max (what simple tools do; outliers stretch it)."""
    arr = np.asarray(x).reshape(-1)
    lo = hi = None
    for start in range(0, arr.size, BLOCK_VALUES):
        part = np.asarray(arr[start : start + BLOCK_VALUES], dtype=np.float64)
        part = part[np.isfinite(part)]
        if part.size:
            lo = float(part.min()) if lo is None else min(lo, float(part.min()))
            hi = float(part.max()) if hi is None else max(hi, float(part.max()))
    return linear_levels_between(lo, hi, n_levels)


def linear_levels_between(lo: float | None, hi: float | None, n_levels: int) -> np.ndarray:
    """:func:`linear_levels` for finite values from ``lo`` to ``hi`` (None: there are none)."""
    if lo is None or hi is None:
        return np.zeros(1)
    if lo == hi:
        return np.array([lo])
    return np.linspace(lo, hi, n_levels)


def snap_to_levels(x: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Replace every value by its nearest level, keeping shape and dtype.

    Levels are first rounded to the array's dtype so that the result has at
    most ``len(levels)`` distinct values. Non-finite values are left as they are.
    """
    return snap_and_count(x, levels)[0]


def snap_and_count(x: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, int]:
    """:func:`snap_to_levels`, and how many distinct finite values the result holds.

    Works block by block into one output array of ``x``'s dtype: no float64 copy of
    ``x``, no full-size index array. A value exactly halfway between two levels goes
    to the lower one. The count is the number of finite levels some finite value
    went to (the levels are distinct), so the result is not sorted to count it.
    """
    arr = np.asarray(x)
    typed = arrays.unique_values(np.asarray(levels).astype(arr.dtype))
    wide = typed.astype(np.float64)
    work = np.dtype(np.float32 if arr.dtype in (np.float16, np.float32) else np.float64)
    # value > (a + b) / 2 in float64 iff value > that bound rounded down to ``work``
    bounds = _toward((wide[:-1] + wide[1:]) / 2.0, work, up=False).astype(work)
    flat = arr.reshape(-1)
    out = np.empty(arr.shape, dtype=arr.dtype)
    out_flat = out.reshape(-1)
    used = np.zeros(typed.size, dtype=bool)
    for start in range(0, flat.size, BLOCK_VALUES):
        values = flat[start : start + BLOCK_VALUES]
        wide_values = values.astype(work, copy=False)
        idx = arrays.searchsorted(bounds, wide_values, side="left")
        chosen = out_flat[start : start + values.size]
        np.take(typed, idx, out=chosen, mode="clip")  # idx is in range; "raise" would buffer a copy
        finite = np.isfinite(values)
        if finite.all():
            used[idx] = True
        else:
            used[idx[finite]] = True
            np.copyto(chosen, values, where=~finite)
        del idx, finite  # before the next block's are made
    return out, int(np.count_nonzero(used & np.isfinite(typed)))


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


def error_stats(original: np.ndarray, approx: np.ndarray, *, approx_is_scratch: bool = False) -> ErrorStats:
    """Max abs, RMS and relative RMS error over the finite values of ``original``.

    Works in float32 for float32/float16 tensors (float64 only for float64 ones),
    without mask copies when every value is finite: this runs once per rewritten
    tensor, on tensors of up to hundreds of millions of values. ``approx_is_scratch``:
    the caller made ``approx`` for this call, so it becomes the difference (one copy less).
    """
    work = np.float64 if np.asarray(original).dtype == np.float64 else np.float32
    acc = _ErrorSums()
    acc.add(np.asarray(original, dtype=work), np.asarray(approx, dtype=work), overwrite_b=approx_is_scratch)
    return acc.stats()

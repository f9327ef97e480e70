"""Sorting, uniquing and searching numpy arrays without the float16 trap.

With numpy 2.4.6 on some x86 CPUs (seen on an AMD EPYC) ``np.sort`` and
``np.unique`` return wrong results on float16 arrays: the "sorted" array is not
monotonic, and ``np.unique`` of 16 distinct values gave 26. Widening to float32
is exact (every float16 value is a float32 value) and takes the correct path.
Every sort, unique and searchsorted in the project goes through this module;
tests/test_arrays.py fails if one bypasses it.
"""

from __future__ import annotations

import numpy as np


def sortable(a: np.ndarray) -> np.ndarray:
    """``a`` widened to float32 if it is float16, otherwise ``a`` itself (as an array)."""
    a = np.asarray(a)
    return a.astype(np.float32) if a.dtype == np.float16 else a


def sort(a: np.ndarray) -> np.ndarray:
    """Sorted copy of ``a`` (flattened if it is not 1-D), in ``a``'s dtype."""
    a = np.asarray(a)
    return np.sort(sortable(a), axis=None).astype(a.dtype, copy=False)


def unique_values(a: np.ndarray) -> np.ndarray:
    """The distinct values of ``a``, ascending, in ``a``'s dtype (NaNs count as one value)."""
    a = np.asarray(a)
    return np.unique(sortable(a)).astype(a.dtype, copy=False)


def sorted_copy(a: np.ndarray, dtype: np.dtype | type | None = None) -> np.ndarray:
    """Sorted 1-D copy of ``a`` in ``dtype`` (default: ``a``'s, float16 widened to float32).

    One copy of the values and an in-place sort: ``np.sort`` of a converted array
    would make two. ``dtype`` must not be float16.
    """
    a = np.asarray(a)
    dtype = np.dtype((np.float32 if a.dtype == np.float16 else a.dtype) if dtype is None else dtype)
    if dtype == np.float16:
        raise ValueError("sorted_copy cannot sort float16 (the float16 trap): ask for float32")
    if a.dtype == dtype:
        return np.sort(a, axis=None)
    out = np.empty(a.size, dtype=dtype)
    np.copyto(out.reshape(a.shape), a, casting="unsafe")
    out.sort()  # float16-safe: ``out`` is never float16 (checked above)
    return out


#: Values compared per step when counting runs in a sorted array (a bool temporary of this size).
RUN_BLOCK = 1 << 18


def run_starts(sorted_values: np.ndarray, limit: int | None = None) -> np.ndarray | int:
    """Count (or, with ``limit``, find) the starts of runs of equal values in a sorted 1-D array.

    Without ``limit``: how many runs there are (distinct values; NaNs are all distinct
    here). With ``limit``: the index of each run's first value when there are at most
    ``limit`` runs, else their count. Works block by block: no full-size temporaries.
    """
    s = sorted_values
    if s.size == 0:
        return 0 if limit is None else np.zeros(0, dtype=np.int64)
    count = 1
    for start in range(1, s.size, RUN_BLOCK):
        stop = min(s.size, start + RUN_BLOCK)
        count += int(np.count_nonzero(s[start:stop] != s[start - 1 : stop - 1]))
    if limit is None or count > limit:
        return count
    starts = [np.zeros(1, dtype=np.int64)]
    for start in range(1, s.size, RUN_BLOCK):
        stop = min(s.size, start + RUN_BLOCK)
        starts.append(np.flatnonzero(s[start:stop] != s[start - 1 : stop - 1]) + start)
    return np.concatenate(starts)


def distinct_count(a: np.ndarray) -> int:
    """How many distinct values ``a`` holds (NaNs count as one value).

    Sorts one copy and counts the runs in blocks (``np.unique`` holds a copy, a mask
    and the distinct values, which for a float tensor is often another full copy).
    """
    a = np.asarray(a)
    if a.dtype.kind not in "biuf":  # complex NaNs sort in several places: np.unique knows them
        return int(np.unique(sortable(a)).size)
    s = sorted_copy(a)
    nans = 0
    if s.dtype.kind == "f" and s.size and np.isnan(s[-1]):
        nans = s.size - int(searchsorted(s, s[-1:], side="left")[0])  # NaNs sort last
    return run_starts(s[: s.size - nans]) + (1 if nans else 0)


def searchsorted(sorted_values: np.ndarray, values: np.ndarray, side: str = "left") -> np.ndarray:
    """``np.searchsorted`` with float16 on either side widened first."""
    return np.searchsorted(sortable(sorted_values), sortable(values), side=side)

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


def distinct_count(a: np.ndarray) -> int:
    """How many distinct values ``a`` holds (NaNs count as one value)."""
    return int(np.unique(sortable(a)).size)


def searchsorted(sorted_values: np.ndarray, values: np.ndarray, side: str = "left") -> np.ndarray:
    """``np.searchsorted`` with float16 on either side widened first."""
    return np.searchsorted(sortable(sorted_values), sortable(values), side=side)

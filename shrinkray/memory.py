"""Give freed heap memory back to the operating system between the big steps of a conversion.

A conversion allocates in waves: decode and re-encode every weight, serialize
the result, open an ONNX Runtime session on it. glibc keeps freed blocks for
reuse, and after large numpy temporaries its adaptive mmap threshold puts
later big allocations on the heap, which stays resident after they are freed;
each wave then lands on top of the previous one's garbage. ``malloc_trim``
between waves returns that memory: on the 101 MB benchmark model it lowered
the resident size before validation by about 50 MB (bench/results.md).
Where the C library has no ``malloc_trim`` (macOS, Windows, musl) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_free_memory() -> bool:
    """Return the C heap's free memory to the OS; False where that is not available."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True

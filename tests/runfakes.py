"""Job functions for the worker process in tests (importable by name: the worker imports them)."""

from __future__ import annotations


def snapshots(count: int, progress=None, on_partial=None) -> int:
    """Send ``count`` snapshots and progress steps, then return the count."""
    for index in range(count):
        if progress:
            progress(f"step {index}", index / count)
        if on_partial:
            on_partial({"variants": index + 1})
    return count

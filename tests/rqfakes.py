"""Job functions for the Redis queue's tests (the RQ worker's capped child imports them by name)."""

from __future__ import annotations

import time

from shrinkray.errors import OptionError


def steps(count: int, delay: float, progress=None, on_partial=None) -> dict:
    """``count`` steps of ``delay`` seconds, each with progress and a snapshot; returns what it did."""
    for index in range(count):
        if progress:
            progress(f"step {index + 1} of {count}", index / count)
        if on_partial:
            on_partial({"step": index + 1})
        time.sleep(delay)
    return {"count": count}


def refuse(progress=None) -> None:
    """Fails the way the engine does: a message, what to do, and which setting."""
    raise OptionError("16 levels cannot hold this tensor's outliers", "Choose more palette levels", "levels")


def note(path: str, name: str, progress=None, on_partial=None) -> str:
    """Appends ``name`` to the file ``path`` (one line): the order jobs ran in, across worker processes."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(name + "\n")
    return name


def niceness(progress=None, on_partial=None) -> int:
    """The worker's own niceness (queued runs yield the CPU to interactive work)."""
    import os

    return os.nice(0)

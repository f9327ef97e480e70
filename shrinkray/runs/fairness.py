"""Who runs next: round-robin across visitors, and a cap on each visitor's live runs.

A queue that takes runs first in first out lets one visitor who queued many runs hold every slot for hours
while a second visitor's single run waits behind them. Both queue backends (:mod:`shrinkray.runs.queue`, and
:mod:`shrinkray.runs.queue_rq` on Redis) take their waiting runs by the same rule (:func:`fair_order`, and its
twin in Lua): the next free slot goes to the oldest waiting run of the visitor with the fewest runs running,
and among those to the visitor served least recently. So visitor A's five runs and visitor B's one are taken A, B, A, A, A, A (A's first was running
when B's came), and a second visitor's run starts within one job's time of being submitted, whatever the first
visitor queued.

Each visitor may also have at most ``Limits.max_live_runs`` runs queued or running (``SHRINKRAY_MAX_LIVE_RUNS``,
default 2): the run store counts them when a run is created (:meth:`shrinkray.runs.store.RunStore.create`),
so the cap holds across app replicas. The command line and the Python API are one visitor, :data:`LOCAL`,
taken in turn with the others but never capped (the machine's owner is not a visitor to defend against).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from shrinkray.errors import LimitExceededError

#: The visitor of runs started by the command line and the Python API.
LOCAL = "local"

T = TypeVar("T")


class TooManyRuns(LimitExceededError):
    """A visitor already has the most live runs a visitor may have (``max_live_runs``)."""


def too_many_runs(live: int) -> TooManyRuns:
    """The refusal, in one sentence: "You already have 2 runs going; wait for one to finish or cancel it"."""
    runs = "run" if live == 1 else "runs"
    return TooManyRuns(f"You already have {live} {runs} going; wait for one to finish or cancel it")


def capped(visitor: str) -> bool:
    """Whether ``visitor``'s live runs are capped (every visitor but :data:`LOCAL`)."""
    return visitor != LOCAL


def fair_order(items: Sequence[T], visitor_of: Callable[[T], str], running: Mapping[str, int],
               served: Mapping[str, int] | None = None) -> list[T]:
    """``items`` (waiting runs in arrival order) in the order they would start if none ended meanwhile.

    Round-robin across visitors: the next run is the oldest waiting run of the visitor with the fewest runs
    running; among those, the visitor served least recently (``served``: visitor -> a number that grows with
    each start; a visitor never served goes first), then the one whose oldest waiting run came first.
    """
    lines: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        lines.setdefault(visitor_of(item), []).append(index)
    running, served = dict(running), dict(served or {})
    tick = max(served.values(), default=0)
    out: list[T] = []
    while len(out) < len(items):
        visitor = min((v for v, line in lines.items() if line),
                      key=lambda v: (running.get(v, 0), served.get(v, -1), lines[v][0]))  # fmt: skip
        out.append(items[lines[visitor].pop(0)])
        running[visitor] = running.get(visitor, 0) + 1
        tick += 1
        served[visitor] = tick
    return out


def count(visitors: Iterable[str]) -> dict[str, int]:
    """How many times each visitor appears (the running runs' visitors -> runs running per visitor)."""
    counts: dict[str, int] = {}
    for visitor in visitors:
        counts[visitor] = counts.get(visitor, 0) + 1
    return counts


__all__ = ["LOCAL", "TooManyRuns", "capped", "count", "fair_order", "too_many_runs"]

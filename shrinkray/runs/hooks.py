"""What a run records as its job goes: progress, snapshots, the outcome, written to the run store.

One definition, used where a run is started (:class:`~shrinkray.runs.service.Runs`) and where a shared
queue's job ends (a worker, or the replica that finds it dead: :mod:`shrinkray.runs.queue_rq`).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from typing import Any

from shrinkray.io.limits import _parse_setting
from shrinkray.runs.queue import JobHooks, JobStatus
from shrinkray.runs.store import RunStore
from shrinkray.units import format_seconds

#: Progress is written at most this often (seconds): the store is SQLite, shared by replicas.
PROGRESS_EVERY_S = 1.0

#: A queued run that a page follows (the app marks it watched while it shows it, :meth:`RunStore.mark_watched`)
#: is not started when no page has shown it for this long: its visitor closed the tab, and nobody else is waiting
#: for it, while the visitors behind it are. A run that has started is never stopped for this; a run no page
#: ever followed (the CLI's, the API's) is never dropped.
UNWATCHED_ENV = "SHRINKRAY_QUEUE_UNWATCHED_SECONDS"
DEFAULT_UNWATCHED_S = 600.0


def unwatched_limit(environ: dict[str, str] | None = None) -> float:
    """Seconds a queued run may go unseen before it is dropped when its turn comes (``SHRINKRAY_QUEUE_UNWATCHED_SECONDS``)."""
    raw = (os.environ if environ is None else environ).get(UNWATCHED_ENV, "").strip()
    return float(_parse_setting(UNWATCHED_ENV, raw, integer=False)) if raw else DEFAULT_UNWATCHED_S


def abandoned(store: RunStore, run_id: str, limit_s: float | None = None) -> str:
    """Why run ``run_id`` should not start (nobody has shown it for longer than the limit), or ""."""
    unseen = store.unwatched_for(run_id)
    limit = unwatched_limit() if limit_s is None else limit_s
    if unseen is None or unseen <= limit:
        return ""
    return (f"This run was not started: its page had been closed for {format_seconds(unseen, rough=True)} when its "
            f"turn came (runs that wait in line are dropped after {format_seconds(limit, rough=True)} with no page "
            "showing them, so that the visitors behind them do not wait for nobody)")  # fmt: skip


def run_hooks(store: RunStore, run_id: str) -> JobHooks:
    """The hooks that write run ``run_id``'s progress, snapshots and outcome into ``store``."""
    last = [0.0]
    lock = threading.Lock()

    def progress(step: str, fraction: float) -> None:
        now = time.monotonic()
        with lock:
            if now - last[0] < PROGRESS_EVERY_S:
                return
            last[0] = now
        with contextlib.suppress(OSError, sqlite3.Error):  # best effort: the next one (or the end) says more
            store.update(run_id, step=str(step)[:300], fraction=float(fraction))

    def partial(snapshot: Any) -> None:
        # best effort: a store busy past its timeout (replicas) or briefly full must not fail the whole run
        # (the next snapshot holds everything this one did, and the outcome is written on its own)
        with contextlib.suppress(OSError, sqlite3.Error):
            store.set_snapshot(run_id, snapshot)

    def failed(status: JobStatus) -> None:
        store.fail(run_id, status.state, error=status.error, problem=status.problem, hint=status.hint,
                   setting=status.setting)  # fmt: skip

    return JobHooks(
        started=lambda: store.update(run_id, status="running", step="Starting", fraction=0.0),
        progress=progress,
        partial=partial,
        done=lambda comparison: store.finish(run_id, comparison),
        failed=failed,
        abandoned=lambda: abandoned(store, run_id),
    )

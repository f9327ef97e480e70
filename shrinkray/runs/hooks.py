"""What a run records as its job goes: progress, snapshots, the outcome, written to the run store.

One definition, used where a run is started (:class:`~shrinkray.runs.service.Runs`) and where a shared
queue's job ends (a worker, or the replica that finds it dead: :mod:`shrinkray.runs.queue_rq`).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from typing import Any

from shrinkray.runs.queue import JobHooks, JobStatus
from shrinkray.runs.store import RunStore

#: Progress is written at most this often (seconds): the store is SQLite, shared by replicas.
PROGRESS_EVERY_S = 1.0


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
    )

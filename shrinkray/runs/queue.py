"""A bounded pool of worker slots that runs jobs off the caller's thread.

The app must not do heavy work in a page's script thread: several users at
once would each hold a thread, the CPU and up to gigabytes of memory with no
limit. So a run is a *job*: :meth:`RunQueue.submit` returns an id at once, the
job waits in line for a free slot (one per usable core by default; the line is
taken round-robin across visitors, :mod:`shrinkray.runs.fairness`) and for
memory (its estimate plus what running jobs hold must fit the pool's budget,
else it waits rather than overcommit), then runs through
:func:`shrinkray.runs.sandbox.run_capped` in a background thread of this process,
so the work itself happens in a capped, killable child process. The page
polls :meth:`RunQueue.status` (queue position, step and fraction) and may
:meth:`RunQueue.cancel`.

:class:`RunQueue` is the interface; :class:`LocalQueue` keeps everything in
this process. Several app replicas would share a queue on an existing engine
(Redis with RQ, Celery): see docs/deployment.md.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from shrinkray.cores import usable_cores
from shrinkray.errors import OptionError, ShrinkRayError
from shrinkray.io.limits import Limits, _parse_setting, planned_memory
from shrinkray.runs.fairness import LOCAL, count, fair_order
from shrinkray.runs.sandbox import Cancelled, run_capped

QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
FINISHED = (DONE, FAILED, CANCELLED)

#: Environment variables: worker slots, and the memory all running jobs together may hold.
WORKERS_ENV = "SHRINKRAY_WORKERS"
QUEUE_MEMORY_ENV = "SHRINKRAY_QUEUE_MEMORY_BYTES"
#: How many jobs may wait at once; more are refused with a message rather than queued for hours.
MAX_WAITING_ENV = "SHRINKRAY_QUEUE_MAX_WAITING"
DEFAULT_MAX_WAITING = 64

#: What a worker holds before any model: the interpreter with onnx, ONNX Runtime and numpy imported.
WORKER_BASE_BYTES = 400 * 2**20

#: Finished jobs remembered for status calls (their results live in the run store).
KEEP_FINISHED = 1000


@dataclass(frozen=True)
class JobStatus:
    """What a page shows about one job."""

    id: str
    state: str  # queued, running, done, failed, cancelled
    position: int = 0  # 1 = next to start (queued only)
    queued: int = 0  # jobs waiting in all
    step: str = ""
    fraction: float = 0.0
    error: str = ""  # the engine's one-line message (failed)
    problem: str = ""
    hint: str = ""
    setting: str = ""  # which setting fixes it (ShrinkRayError.setting): each front end words its own
    memory_bytes: int = 0  # the admission estimate
    waiting_for: str = ""  # "a worker" or "memory" (queued only)

    @property
    def finished(self) -> bool:
        return self.state in FINISHED


@dataclass
class JobHooks:
    """Callbacks a job's owner receives (from the job's thread): progress, snapshots, the outcome."""

    started: Callable[[], None] | None = None
    progress: Callable[[str, float], None] | None = None
    partial: Callable[[Any], None] | None = None
    done: Callable[[Any], None] | None = None  # with the job's result
    failed: Callable[[JobStatus], None] | None = None  # failed or cancelled (state says which)
    #: Asked when the job's turn comes, before it starts: a sentence why it should not start at all (nobody has
    #: shown its run for a long while), or "" to start it. An error in asking starts it.
    abandoned: Callable[[], str] | None = None


def abandoned_reason(hooks: JobHooks) -> str:
    """``hooks.abandoned()``, or "" when there is no such hook or asking it failed (the job then starts)."""
    if hooks.abandoned is None:
        return ""
    try:
        return str(hooks.abandoned() or "")
    except Exception:  # noqa: BLE001 - a store that cannot be read must not stop the queue: the run starts
        return ""


def abandoned_status(status: JobStatus, reason: str) -> JobStatus:
    """A queued job that never started because nobody was following it."""
    return replace(status, state=CANCELLED, error=reason, problem=reason,
                   hint="Start it again, and keep its page open (or come back to it) while it waits")  # fmt: skip


class RunQueue(Protocol):
    """Where jobs wait and run. A second backend (e.g. Redis + RQ) implements the same four calls."""

    def submit(self, fn: Callable[..., Any], *args: Any, memory_bytes: int = 0, what: str = "This run",
               hooks: JobHooks | None = None, job_id: str | None = None, visitor: str = LOCAL,
               **kwargs: Any) -> str: ...  # fmt: skip

    def status(self, job_id: str) -> JobStatus | None: ...

    def cancel(self, job_id: str) -> bool: ...

    def shutdown(self, cancel_running: bool = True) -> None: ...


def estimate_job_memory(tensor_bytes: int, variants: int, limits: Limits | None = None, streamed: bool = False) -> int:
    """Peak memory a comparison's worker is expected to reach, from the model's tensor bytes.

    The same plan as :func:`shrinkray.io.limits.check_memory` (``streamed``: a model measured in its own files
    by methods that all stream), plus the interpreter, capped at the worker's hard limit (``RLIMIT_AS`` stops
    it there anyway).
    """
    limits = limits or Limits.from_env()
    planned = WORKER_BASE_BYTES + planned_memory(tensor_bytes, variants, streamed)
    return int(min(planned, limits.max_job_memory_bytes))


def default_max_waiting(environ: dict[str, str] | None = None) -> int:
    """How many runs may wait for a worker before new ones are refused (``SHRINKRAY_QUEUE_MAX_WAITING``)."""
    raw = (os.environ if environ is None else environ).get(MAX_WAITING_ENV, "").strip()
    return int(_parse_setting(MAX_WAITING_ENV, raw, integer=True)) if raw else DEFAULT_MAX_WAITING


def server_busy(waiting: int) -> ShrinkRayError:
    """A run refused because the queue is full: better than hours in line."""
    return ShrinkRayError(f"The server is busy: {waiting} runs are already waiting for a worker",
                          "Try again in a few minutes")  # fmt: skip


def _not_recorded(exc: BaseException) -> ShrinkRayError:
    """A cancel the run store could not record (full, read-only): the run was left as it was."""
    reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return ShrinkRayError(f"This run could not be cancelled because the server cannot write to its run folder "
                          f"({reason}), so it keeps its place in line",
                          "Press Cancel again in a moment; if it repeats, the server's run folder is full or "
                          "read-only and whoever runs the server needs to free space there")  # fmt: skip


def default_workers(environ: dict[str, str] | None = None) -> int:
    """``SHRINKRAY_WORKERS`` if set, else one slot per usable core."""
    raw = (os.environ if environ is None else environ).get(WORKERS_ENV, "").strip()
    if raw:
        return max(1, int(_parse_setting(WORKERS_ENV, raw, integer=True)))
    return usable_cores()


def default_memory_budget(limits: Limits | None = None, environ: dict[str, str] | None = None) -> int:
    """``SHRINKRAY_QUEUE_MEMORY_BYTES`` if set, else ``max_memory_bytes`` (half the machine's RAM)."""
    raw = (os.environ if environ is None else environ).get(QUEUE_MEMORY_ENV, "").strip()
    if raw:
        return int(_parse_setting(QUEUE_MEMORY_ENV, raw, integer=True))
    return int((limits or Limits.from_env()).max_memory_bytes)


@dataclass
class _Job:
    id: str
    fn: Callable[..., Any]
    args: tuple
    kwargs: dict[str, Any]
    memory_bytes: int
    what: str
    hooks: JobHooks
    order: int
    status: JobStatus
    visitor: str = LOCAL
    cancel: threading.Event = field(default_factory=threading.Event)


Runner = Callable[..., Any]


class _Abandoned(Exception):
    """A job whose turn came after everybody stopped following it: it ends cancelled without starting."""


def _background_run(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A queued run: in a capped worker that yields the CPU to interactive work (sandbox.BACKGROUND_NICENESS)."""
    return run_capped(fn, *args, background=True, **kwargs)


class LocalQueue:
    """Jobs in this process: ``workers`` slots, round-robin across visitors (:mod:`shrinkray.runs.fairness`),
    admitted by memory.

    ``runner`` runs one job (default :func:`shrinkray.runs.sandbox.run_capped`, so
    each job is a capped child process); tests pass a runner that calls the
    function in place. A job whose estimate alone exceeds the budget still runs
    when nothing else does (its worker's hard cap decides), so nothing waits
    for ever.
    """

    def __init__(self, workers: int | None = None, memory_budget: int | None = None, runner: Runner | None = None,
                 limits: Limits | None = None, max_waiting: int | None = None) -> None:  # fmt: skip
        self.limits = limits or Limits.from_env()
        self.workers = workers if workers is not None else default_workers()
        if self.workers < 1:
            raise OptionError(f"The number of worker slots must be at least 1, not {self.workers}", f"Set {WORKERS_ENV}")
        self.memory_budget = memory_budget if memory_budget is not None else default_memory_budget(self.limits)
        self.max_waiting = max_waiting if max_waiting is not None else default_max_waiting()
        self._runner = runner
        self._lock = threading.Lock()
        self._waiting: list[_Job] = []
        self._running: dict[str, _Job] = {}
        self._finished: OrderedDict[str, JobStatus] = OrderedDict()
        self._counter = itertools.count()
        self._idle = threading.Condition(self._lock)
        self._served: dict[str, int] = {}  # visitor -> when it last had a job started (fairness)
        self._ticks = itertools.count(1)
        self._closed = False

    # ------------------------------------------------------------------ the interface

    def submit(self, fn: Callable[..., Any], *args: Any, memory_bytes: int = 0, what: str = "This run",
               hooks: JobHooks | None = None, job_id: str | None = None, visitor: str = LOCAL,
               **kwargs: Any) -> str:  # fmt: skip
        """Queue ``fn(*args, **kwargs)`` for ``visitor``; returns its id at once (``job_id`` if given)."""
        job_id = job_id or secrets.token_urlsafe(16)
        with self._lock:
            if self._closed:
                raise ShrinkRayError("The job queue is shut down", "Restart the app")
            if len(self._waiting) >= self.max_waiting:
                raise server_busy(len(self._waiting))
            job = _Job(job_id, fn, args, kwargs, max(int(memory_bytes), 0), what, hooks or JobHooks(),
                       next(self._counter), JobStatus(job_id, QUEUED, memory_bytes=int(memory_bytes)),
                       visitor=str(visitor))  # fmt: skip
            self._waiting.append(job)
            self._dispatch()
        return job_id

    def status(self, job_id: str) -> JobStatus | None:
        """Where the job is now, or None for an id this queue does not know."""
        with self._lock:
            for index, job in enumerate(self._in_turn()):
                if job.id == job_id:
                    waiting_for = "a worker" if len(self._running) >= self.workers else "memory"
                    return replace(job.status, position=index + 1, queued=len(self._waiting), waiting_for=waiting_for)
            if job_id in self._running:
                return self._running[job_id].status
            return self._finished.get(job_id)

    def cancel(self, job_id: str) -> bool:
        """Stop a job: a queued one never starts, a running one's worker is killed. False if unknown or finished.

        A queued job's cancellation is recorded (its ``failed`` hook, the run
        store) before the queue lets it go. When that write fails (a full or
        read-only store) the job goes back to its place in line, so the queue and
        the record still agree, and :class:`ShrinkRayError` says so in one sentence.
        """
        with self._lock:
            job = next((j for j in self._waiting if j.id == job_id), None)
            if job is None:
                running = self._running.get(job_id)
                if running is None:
                    return False
                running.cancel.set()
                return True
            self._waiting.remove(job)  # out of line while its cancellation is written: it cannot start meanwhile
        cancelled = replace(job.status, state=CANCELLED, error="The run was cancelled before it started")
        try:
            if job.hooks.failed:
                job.hooks.failed(cancelled)
        except Exception as exc:  # noqa: BLE001 - the record cannot be written: the run goes on, as recorded
            with self._lock:
                if self._closed:  # shut down meanwhile: it would have been dropped with the rest
                    job.status = replace(cancelled, error="The server stopped before the run started")
                    self._remember(job.status)
                    return True
                self._waiting.append(job)
                self._waiting.sort(key=lambda j: j.order)
                self._dispatch()
            raise _not_recorded(exc) from exc
        with self._lock:
            job.status = cancelled
            self._remember(cancelled)
            self._dispatch()
        return True

    def shutdown(self, cancel_running: bool = True) -> None:
        """Refuse new jobs, drop waiting ones and (by default) kill running ones."""
        with self._lock:
            self._closed = True
            waiting, self._waiting = self._waiting, []
            if cancel_running:
                for job in self._running.values():
                    job.cancel.set()
        for job in waiting:
            job.status = replace(job.status, state=CANCELLED, error="The server stopped before the run started")
            with self._lock:
                self._remember(job.status)
                self._dispatch()
            if job.hooks.failed:
                job.hooks.failed(job.status)

    # ------------------------------------------------------------------ extras for pages and tests

    def counts(self) -> tuple[int, int]:
        """(running, waiting) jobs."""
        with self._lock:
            return len(self._running), len(self._waiting)

    def held_memory(self) -> int:
        with self._lock:
            return sum(job.memory_bytes for job in self._running.values())

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no job waits or runs (tests and shutdown)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._waiting or self._running:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._idle.wait(remaining)
        return True

    # ------------------------------------------------------------------ inside

    def _admits(self, job: _Job) -> bool:
        if len(self._running) >= self.workers:
            return False
        if not self._running:
            return True  # alone it may use what it needs; its worker's hard cap bounds it
        held = sum(j.memory_bytes for j in self._running.values())
        return held + job.memory_bytes <= self.memory_budget

    def _in_turn(self) -> list[_Job]:
        """The waiting jobs in the order they will start: round-robin across visitors (lock held)."""
        running = count(j.visitor for j in self._running.values())
        return fair_order(self._waiting, lambda j: j.visitor, running, self._served)

    def _dispatch(self) -> None:
        """Start waiting jobs in turn while the next one is admitted (called with the lock held)."""
        while self._waiting:
            job = self._in_turn()[0]
            if not self._admits(job):
                break
            self._waiting.remove(job)
            self._served[job.visitor] = next(self._ticks)
            job.status = replace(job.status, state=RUNNING, step="Starting", fraction=0.0)
            self._running[job.id] = job
            threading.Thread(target=self._run, args=(job,), daemon=True, name=f"shrinkray-job-{job.id[:6]}").start()
        live = {j.visitor for j in self._waiting} | {j.visitor for j in self._running.values()}
        for visitor in [v for v in self._served if v not in live]:
            del self._served[visitor]  # nothing of theirs is live: their next run comes in turn by its arrival
        if not self._waiting and not self._running:
            self._idle.notify_all()

    def _remember(self, status: JobStatus) -> None:
        self._finished[status.id] = status
        while len(self._finished) > KEEP_FINISHED:
            self._finished.popitem(last=False)

    def _run(self, job: _Job) -> None:
        hooks = job.hooks

        def progress(step: str, fraction: float) -> None:
            job.status = replace(job.status, step=str(step), fraction=min(max(float(fraction), 0.0), 1.0))
            if hooks.progress:
                hooks.progress(step, fraction)

        outcome: JobStatus | None = None
        result: Any = None
        reason = abandoned_reason(hooks)  # asked in the job's thread: a slow store never holds the queue's lock
        try:
            if reason:
                raise _Abandoned(reason)  # settled below like any other end, without starting
            if hooks.started:
                hooks.started()
            runner = self._runner or _background_run
            result = runner(job.fn, *job.args, what=job.what, limits=self.limits, progress=progress,
                            partial=hooks.partial, cancel=job.cancel, **job.kwargs)  # fmt: skip
        except _Abandoned:
            outcome = abandoned_status(job.status, reason)
        except Cancelled:
            outcome = replace(job.status, state=CANCELLED, error=f"{job.what} was cancelled")
        except ShrinkRayError as exc:
            state = CANCELLED if job.cancel.is_set() else FAILED
            outcome = replace(job.status, state=state, error=str(exc), problem=exc.problem, hint=exc.hint,
                              setting=getattr(exc, "setting", ""))  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - a job's bug must not take the queue down
            outcome = replace(job.status, state=FAILED, error=f"{job.what} failed: {type(exc).__name__}: {exc}",
                              problem=f"{job.what} failed because of an unexpected {type(exc).__name__}",
                              hint="This is a bug in Shrink Ray Studio, not in your model; try again or another method")  # fmt: skip
        if outcome is None:
            try:
                if hooks.done:
                    hooks.done(result)
                outcome = replace(job.status, state=DONE, step="Done", fraction=1.0)
            except Exception as exc:  # noqa: BLE001 - storing the result failed: the job failed
                outcome = replace(job.status, state=FAILED, error=f"Keeping the results failed: {exc}",
                                  problem="Keeping the results failed", hint="Try again")  # fmt: skip
        if outcome.state != DONE and hooks.failed:
            with contextlib.suppress(Exception):  # the status below is what the page shows
                hooks.failed(outcome)
        with self._lock:
            self._running.pop(job.id, None)
            job.status = outcome
            self._remember(outcome)
            self._dispatch()

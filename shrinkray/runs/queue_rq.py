"""The job queue on Redis with RQ: several app replicas share one queue and every job's status.

:class:`~shrinkray.runs.queue.LocalQueue` keeps its jobs in one process, so a
second app replica behind a load balancer would neither see a run started on
the first nor share its worker slots. :class:`RedisQueue` implements the same
:class:`~shrinkray.runs.queue.RunQueue` calls on Redis (``SHRINKRAY_QUEUE=
redis://host:6379/0``; ``pip install shrinkray-studio[redis]``):

- *Where jobs run*: RQ worker processes (``python -m shrinkray.runs.queue_rq``,
  or plain ``rq worker shrinkray``), one job at a time each, so N workers are
  N slots, on any host. Each job still runs through
  :func:`shrinkray.runs.sandbox.run_capped`: a capped, killable child process.
- *Status*: the RQ job's meta (state, step, fraction, the error's message,
  problem, hint and setting), written by the worker, read by any replica;
  the queue position is the job's place in the RQ list.
- *Turns*: round-robin across visitors, as in LocalQueue (:mod:`shrinkray.runs.fairness`): each job is
  put into the RQ list at its fair place (by its round, then arrival) by one Lua script, so workers that
  take the list's head take runs in turn; a visitor's running jobs count from RQ's own job states.
- *Cancel*: a flag in Redis that the worker polls every 0.2 s (its
  ``run_capped`` then kills the child); a queued job is taken off the list.
- *Memory admission*: per host, a job starts only when its estimate plus the
  estimates of the jobs running on that host fit the worker's
  ``SHRINKRAY_QUEUE_MEMORY_BYTES`` budget (or runs alone), as in LocalQueue.
- *Outcome*: a job's hooks (a :class:`~shrinkray.runs.service.Runs`' store writes)
  are closures of the replica that submitted it, which may be gone when the
  job ends. With a picklable factory (a submit's ``hooks_factory``, or the
  queue's ``worker_hooks``, ``job_id -> JobHooks``, which
  :func:`queue_from_env` sets for ``Runs``) the worker rebuilds them and
  writes the run's progress, snapshots and outcome into the shared store
  itself; without one, a thread of the submitting process follows the job and
  calls the hooks it was given. Either way the outcome is delivered once (a
  ``SET NX`` claim), also when a replica finds a job RQ marked failed because
  its worker died. Every write of a job's state is one WATCH/MULTI transaction
  that also checks the claim (:func:`_write_meta`), so a cancel, a start and an
  end racing each other cannot overwrite a settled outcome.

``rq`` and ``redis`` are imported only when this backend is used; the default
install needs neither.

*Pickles*: RQ pickles each job (the call and its arguments, settings included), and
this module pickles the snapshot and result it leaves in Redis for the replicas. That is
transport inside the operator's own Redis, read only by this queue's processes (whoever
can write that Redis can run code in the workers: keep it private, README "Trust"). What
is kept goes through the hooks into the run store, which holds JSON only
(:mod:`shrinkray.runs.store`), never these pickles.

Kept as one module (over 600 lines): both sides of one Redis protocol (the replica that submits and the
worker that runs) share its keys and meta fields, so they cannot drift apart.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import os
import pickle
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from shrinkray.errors import OptionError, ShrinkRayError
from shrinkray.io.limits import Limits
from shrinkray.runs.fairness import LOCAL
from shrinkray.runs.hooks import run_hooks
from shrinkray.runs.queue import (
    CANCELLED,
    DONE,
    FAILED,
    QUEUED,
    RUNNING,
    JobHooks,
    JobStatus,
    LocalQueue,
    RunQueue,
    abandoned_reason,
    abandoned_status,
    default_max_waiting,
    default_memory_budget,
    server_busy,
)
from shrinkray.runs.sandbox import Cancelled, run_capped
from shrinkray.runs.store import RunStore

#: ``redis://[:password@]host:6379/0`` (or ``rediss://``, ``unix://``): jobs go to RQ on that Redis.
QUEUE_ENV = "SHRINKRAY_QUEUE"
#: The RQ queue's name (several deployments can share one Redis under different names).
QUEUE_NAME_ENV = "SHRINKRAY_QUEUE_NAME"
DEFAULT_QUEUE_NAME = "shrinkray"

#: How long a finished job's status, result and flags stay in Redis (the run store keeps runs longer).
KEEP_S = 86400
#: How often workers look for a cancel flag and followers poll a job.
POLL_S = 0.2
#: Progress is written into the job's meta at most this often (the last step of a run is always written).
META_EVERY_S = 0.25
#: A run record left live this long with no job Redis knows is a leftover (the gap between create and submit is shorter).
RECOVER_AFTER_S = 120.0

#: Put the RQ list in turn (shrinkray.runs.fairness.fair_order, in Lua): the next job is the oldest waiting job
#: of the visitor with the fewest jobs running, then the one served least recently, then the one whose oldest
#: waiting job came first. Run when a job is submitted, when a worker takes one (ARGV[2], its visitor is served
#: now) and when one ends. KEYS: the RQ list, job -> visitor, job -> arrival number, visitor -> last served.
#: ARGV: RQ's job key prefix, the job just taken or ''. Running jobs are the live jobs RQ says have started;
#: entries of jobs that ended are dropped, and so are the served marks of visitors with nothing live.
_TURNS = """
local queue, visitors, arrivals, served = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local prefix, taken = ARGV[1], ARGV[2]
local tick_key = served .. ':tick'
if taken ~= '' then
  local v = redis.call('HGET', visitors, taken)
  if v then redis.call('HSET', served, v, redis.call('INCR', tick_key)) end
end
local ids = redis.call('LRANGE', queue, 0, -1)
local waiting = {}
for _, id in ipairs(ids) do waiting[id] = true end
local running, live = {}, {}
local all = redis.call('HGETALL', visitors)
for i = 1, #all, 2 do
  local id, v = all[i], all[i + 1]
  if waiting[id] then
    live[v] = true
  else
    local state = redis.call('HGET', prefix .. id, 'status')
    if state == 'started' then
      running[v] = (running[v] or 0) + 1
      live[v] = true
    elseif not state or state == 'finished' or state == 'failed' or state == 'canceled' or state == 'stopped' then
      redis.call('HDEL', visitors, id)
      redis.call('HDEL', arrivals, id)
    else
      live[v] = true
    end
  end
end
local marks = {}
local kept = redis.call('HGETALL', served)
for i = 1, #kept, 2 do
  if live[kept[i]] then marks[kept[i]] = tonumber(kept[i + 1]) else redis.call('HDEL', served, kept[i]) end
end
local lines, heads, names = {}, {}, {}
for _, id in ipairs(ids) do
  local v = redis.call('HGET', visitors, id) or ''
  if not lines[v] then lines[v] = {}; heads[v] = 1; names[#names + 1] = v end
  table.insert(lines[v], id)
end
local tick = tonumber(redis.call('GET', tick_key) or '0')
local out = {}
for _ = 1, #ids do
  local best, b1, b2, b3
  for _, v in ipairs(names) do
    local id = lines[v][heads[v]]
    if id then
      local k1, k2 = running[v] or 0, marks[v] or -1
      local k3 = tonumber(redis.call('HGET', arrivals, id) or '0')
      if not best or k1 < b1 or (k1 == b1 and (k2 < b2 or (k2 == b2 and k3 < b3))) then
        best, b1, b2, b3 = v, k1, k2, k3
      end
    end
  end
  out[#out + 1] = lines[best][heads[best]]
  heads[best] = heads[best] + 1
  running[best] = (running[best] or 0) + 1
  tick = tick + 1
  marks[best] = tick
end
local same = true
for i, id in ipairs(ids) do if out[i] ~= id then same = false end end
if not same then
  redis.call('DEL', queue)
  redis.call('RPUSH', queue, unpack(out))
end
return #ids
"""


def _turns(connection, keys: _Keys, queue_key: str, taken: str = "") -> None:
    """Put the RQ list in turn (round-robin across visitors); ``taken``: the job a worker has just taken."""
    import rq

    prefix = rq.job.Job.key_for("")
    prefix = prefix.decode() if isinstance(prefix, bytes) else str(prefix)
    script = connection.register_script(_TURNS)
    script(keys=[queue_key, keys.visitors(), keys.arrivals(), keys.served()], args=[prefix, taken])


_FINAL = (DONE, FAILED, CANCELLED)
log = logging.getLogger(__name__)

#: Admit a job on a host: HVALS of the running jobs' estimates; admitted when none runs or the total fits.
_ADMIT = """
local held = 0
local values = redis.call('HVALS', KEYS[1])
for _, v in ipairs(values) do held = held + tonumber(v) end
if #values == 0 or held + tonumber(ARGV[2]) <= tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  return 1
end
return 0
"""


def _modules():
    """``rq`` and ``redis``, or a message saying how to install them."""
    try:
        import redis
        import rq
    except ImportError as exc:
        raise OptionError(
            f"{QUEUE_ENV} names a Redis queue, but the packages for it are not installed ({exc.name})",
            "Install them with pip install 'shrinkray-studio[redis]', or unset " + QUEUE_ENV + " to run jobs in this process",
        ) from exc
    return rq, redis


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(a malformed address)"
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def connect(url: str):
    """A Redis connection for ``url``, checked with a PING; a one-line message when it cannot be reached."""
    _rq, redis = _modules()
    try:
        connection = redis.Redis.from_url(url, socket_connect_timeout=5, health_check_interval=30)
        connection.ping()
    except ValueError as exc:
        raise OptionError(
            f"{QUEUE_ENV} is not a Redis address ({exc})", "Write it like redis://host:6379/0"
        ) from exc
    except redis.RedisError as exc:
        raise ShrinkRayError(
            f"The job queue's Redis at {redact(url)} cannot be reached ({exc})",
            f"Start Redis there, or unset {QUEUE_ENV} to run jobs in this process",
        ) from exc
    return connection


@dataclass(frozen=True)
class _Keys:
    """Our own keys beside RQ's, one set per queue name."""

    queue: str

    def _key(self, kind: str, job_id: str) -> str:
        return f"shrinkray:{self.queue}:{kind}:{job_id}"

    def cancel(self, job_id: str) -> str:
        return self._key("cancel", job_id)

    def settled(self, job_id: str) -> str:
        return self._key("settled", job_id)

    def snapshot(self, job_id: str) -> str:
        return self._key("snapshot", job_id)

    def result(self, job_id: str) -> str:
        return self._key("result", job_id)

    def held(self, host: str) -> str:
        return self._key("held", host)

    def visitors(self) -> str:
        """For turns (:data:`_TURNS`): live jobs' visitors (job id -> visitor)."""
        return f"shrinkray:{self.queue}:visitors"

    def arrivals(self) -> str:
        """Live jobs' arrival numbers (job id -> n, from ``arrivals:tick``)."""
        return f"shrinkray:{self.queue}:arrivals"

    def served(self) -> str:
        """When each visitor with live jobs last had one taken (visitor -> n, from ``served:tick``)."""
        return f"shrinkray:{self.queue}:served"


@dataclass(frozen=True)
class _Spec:
    """One job as RQ stores it (pickled): the call, its name in messages, its memory estimate."""

    fn: Callable[..., Any]
    args: tuple
    kwargs: dict[str, Any]
    what: str
    memory_bytes: int
    queue: str
    keep_result: bool  # a follower in the submitting process wants the result (no worker hooks)
    wants_partial: bool  # the owner takes snapshots: ``fn`` is called with ``on_partial`` (as LocalQueue does)


# ---------------------------------------------------------------------------------------------- statuses


def _status_from_meta(job_id: str, meta: dict[str, Any]) -> JobStatus:
    return JobStatus(
        id=job_id,
        state=str(meta.get("state", QUEUED)),
        step=str(meta.get("step", "")),
        fraction=float(meta.get("fraction", 0.0)),
        error=str(meta.get("error", "")),
        problem=str(meta.get("problem", "")),
        hint=str(meta.get("hint", "")),
        setting=str(meta.get("setting", "")),
        memory_bytes=int(meta.get("memory_bytes", 0)),
        waiting_for=str(meta.get("waiting_for", "")),
    )


def _outcome_fields(status: JobStatus) -> dict[str, Any]:
    return {"state": status.state, "step": status.step, "fraction": status.fraction, "error": status.error,
            "problem": status.problem, "hint": status.hint, "setting": status.setting, "waiting_for": ""}  # fmt: skip


def _write_meta(job, keys: _Keys, fields: dict[str, Any], drop: tuple[str, ...] = (), owner: bool = False) -> bool:
    """Merge ``fields`` into the job's meta as it is in Redis, in one transaction; False when not written.

    Every write of a run's state is a read-modify-write, and several processes
    write it (the worker, the replica that cancels a queued job or settles a dead
    worker's). So the job's hash and its settled flag are WATCHed, the meta is read
    and merged and written in MULTI/EXEC, and a concurrent change retries: a
    worker's "running" can no longer land on an outcome a replica settled between
    the worker's check and its write, and a settle keeps the fields others wrote
    after it fetched the job. Without ``owner`` (the holder of the settled claim),
    nothing is written once the job is settled; nothing is written for a job
    Redis no longer holds (it expired: a half-written hash would outlive it).
    """
    _rq, redis = _modules()
    settled = keys.settled(job.id)
    with job.connection.pipeline() as pipe:
        while True:
            try:
                pipe.watch(job.key, settled)
                if not owner and pipe.exists(settled):
                    return False
                raw = pipe.hget(job.key, "meta")
                if raw is None and not pipe.exists(job.key):
                    return False
                meta = job.serializer.loads(raw) if raw else {}
                meta.update(fields)
                for name in drop:
                    meta.pop(name, None)
                pipe.multi()
                pipe.hset(job.key, "meta", job.serializer.dumps(meta))
                pipe.execute()
            except redis.WatchError:
                continue  # another process wrote the job or settled it meanwhile: read again
            job.meta = meta
            return True


def _flag_cancel(connection, keys: _Keys, job_id: str) -> bool:
    """Set the job's cancel flag unless it is settled, atomically (a job that just ended is not "cancelled")."""
    _rq, redis = _modules()
    settled = keys.settled(job_id)
    with connection.pipeline() as pipe:
        while True:
            try:
                pipe.watch(settled)
                if pipe.exists(settled):
                    return False
                pipe.multi()
                pipe.set(keys.cancel(job_id), b"1", ex=KEEP_S)
                pipe.execute()
                return True
            except redis.WatchError:
                continue


def _failure(status: JobStatus, exc: BaseException, what: str, cancelled: bool) -> JobStatus:
    """The same outcomes as LocalQueue: the engine's message, problem, hint and setting; a bug said as one."""
    if isinstance(exc, Cancelled):
        return replace(status, state=CANCELLED, error=f"{what} was cancelled", problem=f"{what} was cancelled",
                       hint="Start it again when you are ready")  # fmt: skip
    if isinstance(exc, ShrinkRayError):
        return replace(status, state=CANCELLED if cancelled else FAILED, error=str(exc), problem=exc.problem,
                       hint=exc.hint, setting=getattr(exc, "setting", ""))  # fmt: skip
    return replace(status, state=FAILED, error=f"{what} failed: {type(exc).__name__}: {exc}",
                   problem=f"{what} failed because of an unexpected {type(exc).__name__}",
                   hint="This is a bug in Shrink Ray Studio, not in your model; try again or another method")  # fmt: skip


# ---------------------------------------------------------------------------------------------- the worker side


def perform(spec: _Spec) -> None:
    """An RQ job: wait for memory, run ``spec.fn`` through run_capped, publish progress and the outcome.

    Runs in the RQ worker's work horse. Always returns normally (the outcome is
    in the job's meta), so RQ's own "failed" means only that the horse died.
    """
    import rq


    job = rq.get_current_job()
    connection, keys = job.connection, _Keys(spec.queue)
    meta = job.meta
    hooks_factory = meta.get("hooks")
    try:
        hooks: JobHooks = hooks_factory() if hooks_factory is not None else JobHooks()
    except Exception as exc:  # noqa: BLE001 - e.g. the store folder is not mounted here: a replica settles the run
        with contextlib.suppress(Exception):  # Redis failing too: the replica says the worker stopped
            _write_meta(job, keys, {"worker_error": f"{socket.gethostname()} cannot open the run store "
                                                    f"({type(exc).__name__}: {exc})"})  # fmt: skip
        raise
    status = _status_from_meta(job.id, meta)
    cancel = threading.Event()
    stop = threading.Event()
    lock = threading.Lock()
    last_save = [0.0]
    pending = threading.Event()
    unsaved: dict[str, Any] = {}

    def save(force: bool = False, **fields: Any) -> bool:
        """Publish fields in the job's meta (at most every META_EVERY_S unless forced; the flag watcher
        writes what waits), unless another process already settled the job (checked in the same transaction)."""
        with lock:
            unsaved.update(fields)
            now = time.monotonic()
            if not force and now - last_save[0] < META_EVERY_S:
                pending.set()
                return True
            pending.clear()
            last_save[0] = now
            written = dict(unsaved)
            unsaved.clear()
            try:
                return _write_meta(job, keys, written)
            except Exception:
                for name, value in written.items():  # Redis failed: the next write carries them (newer ones win)
                    unsaved.setdefault(name, value)
                pending.set()
                raise

    def watch_cancel() -> None:
        while not stop.wait(POLL_S):
            with contextlib.suppress(Exception):  # a Redis hiccup: look again at the next tick
                if pending.is_set() and time.monotonic() - last_save[0] >= META_EVERY_S:
                    save(force=True)
                if not cancel.is_set() and connection.exists(keys.cancel(job.id)):
                    cancel.set()

    watcher = threading.Thread(target=watch_cancel, daemon=True, name="shrinkray-cancel-flag")
    watcher.start()
    queue_key = rq.Queue(job.origin, connection=connection).key
    with contextlib.suppress(Exception):  # turns are best effort: a Redis hiccup must not fail the run
        _turns(connection, keys, queue_key, taken=job.id)  # its visitor is served now: the others come first
    host_key = keys.held(socket.gethostname())
    admitted = False
    result: Any = None
    outcome: JobStatus | None = None
    try:
        if connection.exists(keys.cancel(job.id)):
            outcome = replace(status, state=CANCELLED, error="The run was cancelled before it started",
                              problem="The run was cancelled before it started", hint="Start it again")  # fmt: skip
        else:
            admitted = _admit(connection, keys, host_key, job.id, spec.memory_bytes, cancel, save)
            if not admitted:
                outcome = replace(status, state=CANCELLED, error="The run was cancelled before it started",
                                  problem="The run was cancelled before it started", hint="Start it again")  # fmt: skip
            elif reason := abandoned_reason(hooks):  # its turn came after everybody stopped following it
                outcome = abandoned_status(status, reason)
    except Exception as exc:  # noqa: BLE001 - Redis failing during admission: the job fails with its words
        outcome = _failure(status, exc, spec.what, cancelled=False)
    if outcome is None and not save(force=True, state=RUNNING, step="Starting", fraction=0.0, waiting_for="",
                                    started_at=time.time()):  # fmt: skip
        # a replica settled it (cancelled while queued) since the check above: it never starts
        outcome = replace(status, state=CANCELLED, error="The run was cancelled before it started",
                          problem="The run was cancelled before it started", hint="Start it again")  # fmt: skip
    if outcome is None:
        status = replace(status, state=RUNNING, step="Starting", fraction=0.0, waiting_for="")

        def progress(step: str, fraction: float) -> None:
            fraction = min(max(float(fraction), 0.0), 1.0)
            save(step=str(step)[:300], fraction=fraction)
            if hooks.progress:
                hooks.progress(step, fraction)

        partials = [0]

        def partial(snapshot: Any) -> None:
            partials[0] += 1
            connection.set(keys.snapshot(job.id), pickle.dumps(snapshot, protocol=pickle.HIGHEST_PROTOCOL), ex=KEEP_S)
            save(force=True, partials=partials[0])
            if hooks.partial:
                hooks.partial(snapshot)

        try:
            if hooks.started:
                hooks.started()
            result = run_capped(spec.fn, *spec.args, what=spec.what, limits=Limits.from_env(), progress=progress,
                                partial=partial if spec.wants_partial else None, cancel=cancel, background=True,
                                **spec.kwargs)  # fmt: skip
        except BaseException as exc:  # noqa: BLE001 - every failure becomes the job's outcome
            outcome = _failure(status, exc, spec.what, cancelled=cancel.is_set())
    stop.set()
    watcher.join()  # its last meta write lands before the outcome's
    if admitted:
        with contextlib.suppress(Exception):
            connection.hdel(host_key, job.id)
    if outcome is None:
        outcome = replace(status, state=DONE, step="Done", fraction=1.0)
    _deliver(connection, keys, job, outcome, hooks, result, spec.keep_result)
    with contextlib.suppress(Exception):  # it no longer runs: the line is put in turn without it
        connection.hdel(keys.visitors(), job.id)
        connection.hdel(keys.arrivals(), job.id)
        _turns(connection, keys, queue_key)


def _admit(connection, keys: _Keys, host_key: str, job_id: str, memory_bytes: int, cancel: threading.Event,
           save: Callable[..., None]) -> bool:  # fmt: skip
    """Wait until the job's memory estimate fits beside the jobs running on this host. False if cancelled."""
    budget = default_memory_budget()
    admit = connection.register_script(_ADMIT)
    said = False
    while not cancel.is_set():
        _prune_held(connection, host_key)
        if admit(keys=[host_key], args=[job_id, max(int(memory_bytes), 0), int(budget)]):
            return True
        if not said:
            save(force=True, state=QUEUED, waiting_for="memory")
            said = True
        cancel.wait(POLL_S * 5)
    return False


def _prune_held(connection, host_key: str) -> None:
    """Entries of jobs that no longer run (their worker was killed) stop holding memory."""
    import rq

    for raw in connection.hkeys(host_key):
        job_id = raw.decode() if isinstance(raw, bytes) else str(raw)
        try:
            state = rq.job.Job.fetch(job_id, connection=connection).get_status(refresh=False)
        except Exception:  # noqa: BLE001 - the job is gone from Redis
            state = None
        if state != rq.job.JobStatus.STARTED:
            connection.hdel(host_key, job_id)


def _deliver(connection, keys: _Keys, job, outcome: JobStatus, hooks: JobHooks, result: Any,
             keep_result: bool) -> bool:  # fmt: skip
    """Settle the job once: the hooks first (the run store), then the result and the final meta.

    Returns False when another process had settled it already (then nothing is written).
    """
    if not connection.set(keys.settled(job.id), b"1", nx=True, ex=KEEP_S):
        return False
    if outcome.state == DONE and hooks.done:
        try:
            hooks.done(result)
        except Exception as exc:  # noqa: BLE001 - keeping the result failed: the job failed
            outcome = replace(outcome, state=FAILED, error=f"Keeping the results failed: {exc}",
                              problem="Keeping the results failed", hint="Try again")  # fmt: skip
    if outcome.state != DONE and hooks.failed:
        with contextlib.suppress(Exception):  # the status below is what the page shows
            hooks.failed(outcome)
    if keep_result and outcome.state == DONE:
        connection.set(keys.result(job.id), pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL), ex=KEEP_S)
    _write_meta(job, keys, _outcome_fields(outcome), drop=("hooks",), owner=True)
    return True


# ---------------------------------------------------------------------------------------------- the replica side


def store_hooks(root: str, max_bytes: int, max_age_s: float, job_id: str) -> JobHooks:
    """A run's hooks rebuilt where the job ends (a worker, or the replica that finds it dead): the same
    store writes as :class:`~shrinkray.runs.service.Runs`' own, on the shared store root."""
    return run_hooks(RunStore(root, max_bytes=max_bytes, max_age_s=max_age_s), job_id)



class RedisQueue:
    """:class:`~shrinkray.runs.queue.RunQueue` on Redis: jobs run in RQ workers, status is shared by replicas.

    ``worker_hooks`` (a picklable ``job_id -> JobHooks``, e.g.
    ``functools.partial(store_hooks, root, max_bytes, max_age_s)``) makes the
    worker deliver progress, snapshots and the outcome itself; then the
    ``hooks`` given to :meth:`submit` are not called (they would write the
    same things twice). Without it, a thread of this process follows each job
    it submitted and calls its hooks (lost if this process stops first).
    """

    def __init__(self, url: str | None = None, *, name: str | None = None, limits: Limits | None = None,
                 worker_hooks: Callable[[str], JobHooks] | None = None, connection: Any = None,
                 max_waiting: int | None = None) -> None:  # fmt: skip
        rq, _redis = _modules()
        self.url = url or os.environ.get(QUEUE_ENV, "").strip()
        if connection is None and not self.url:
            raise OptionError("No Redis address for the job queue", f"Set {QUEUE_ENV}=redis://host:6379/0")
        self.connection = connection if connection is not None else connect(self.url)
        self.name = name or os.environ.get(QUEUE_NAME_ENV, "").strip() or DEFAULT_QUEUE_NAME
        self.limits = limits or Limits.from_env()
        self.worker_hooks = worker_hooks
        self.max_waiting = max_waiting if max_waiting is not None else default_max_waiting()
        self.keys = _Keys(self.name)
        self._rq = rq
        self._queue = rq.Queue(self.name, connection=self.connection)
        self._lock = threading.Lock()
        self._mine: dict[str, threading.Thread | None] = {}
        self._closed = threading.Event()

    # ------------------------------------------------------------------ the interface

    def submit(self, fn: Callable[..., Any], *args: Any, memory_bytes: int = 0, what: str = "This run",
               hooks: JobHooks | None = None, job_id: str | None = None,
               hooks_factory: Callable[[], JobHooks] | None = None, visitor: str = LOCAL,
               **kwargs: Any) -> str:  # fmt: skip
        """Put ``fn(*args, **kwargs)`` on the shared queue for ``visitor`` at its fair place (round-robin across
        visitors); returns its id at once (``job_id`` if given).

        ``fn`` must be importable by the workers (a module-level function) and
        its arguments picklable; paths in them must mean the same on the workers.
        ``hooks_factory`` (picklable, no arguments) builds the job's hooks where
        it ends, like the queue's ``worker_hooks``; either way ``hooks`` are then
        not called here.
        """
        if self._closed.is_set():
            raise ShrinkRayError("The job queue is shut down", "Restart the app")
        job_id = job_id or secrets.token_urlsafe(16)
        if hooks_factory is None and self.worker_hooks is not None:
            hooks_factory = functools.partial(self.worker_hooks, job_id)
        follow = hooks is not None and hooks_factory is None
        spec = _Spec(fn, tuple(args), dict(kwargs), what, max(int(memory_bytes), 0), self.name, keep_result=follow,
                     wants_partial=hooks is not None and hooks.partial is not None)  # fmt: skip
        meta: dict[str, Any] = {"state": QUEUED, "what": what, "memory_bytes": spec.memory_bytes,
                                "visitor": str(visitor)}  # fmt: skip
        if hooks_factory is not None:
            meta["hooks"] = hooks_factory
        # no RQ timeout: run_capped's deadline (max_job_seconds) bounds the work, and a wait for memory is no work
        with self._reachable():
            waiting = self._queue.count  # shared by every replica: at most max_waiting in line, as with LocalQueue
            if waiting >= self.max_waiting:
                raise server_busy(waiting)
            arrival = self.connection.incr(self.keys.arrivals() + ":tick")
            self.connection.hset(self.keys.visitors(), job_id, str(visitor))
            self.connection.hset(self.keys.arrivals(), job_id, arrival)
            self._queue.enqueue(perform, spec, job_id=job_id, meta=meta, job_timeout=-1, result_ttl=KEEP_S,
                                failure_ttl=KEEP_S, description=f"{what} ({job_id[:6]})")  # fmt: skip
            _turns(self.connection, self.keys, self._queue.key)
        thread = None
        if follow:
            thread = threading.Thread(target=self._follow, args=(job_id, hooks), daemon=True,
                                      name=f"shrinkray-follow-{job_id[:6]}")  # fmt: skip
            thread.start()
        with self._lock:
            self._mine[job_id] = thread
        return job_id

    def status(self, job_id: str) -> JobStatus | None:
        """Where the job is now (from any replica), or None for an id Redis does not know (any more)."""
        with self._reachable():
            return self._status(job_id)

    def _status(self, job_id: str) -> JobStatus | None:
        job = self._fetch(job_id)
        if job is None:
            return None
        rq_state = job.get_status(refresh=False)
        status = _status_from_meta(job_id, job.meta)
        if status.state in _FINAL:
            return status
        states = self._rq.job.JobStatus
        if rq_state in (states.QUEUED, states.DEFERRED, states.SCHEDULED):
            position = self._queue.get_job_position(job_id)
            waiting = self._queue.count
            return replace(status, state=QUEUED, position=(position if position is not None else waiting) + 1,
                           queued=waiting, waiting_for="a worker")  # fmt: skip
        if rq_state == states.STARTED:
            if status.state == QUEUED:  # taken by a worker, waiting for memory on its host
                return replace(status, position=1, queued=self._queue.count + 1, waiting_for="memory")
            return status
        # RQ finished it without our outcome (the horse died, RQ stopped or cancelled it): settle it here
        cancelled = bool(self.connection.exists(self.keys.cancel(job_id))) or rq_state == states.CANCELED
        if cancelled:
            outcome = replace(status, state=CANCELLED, error="The run was cancelled", problem="The run was cancelled",
                              hint="Start it again when you are ready")  # fmt: skip
        elif job.meta.get("worker_error"):  # the worker could not record the run: say why (an operator's problem)
            problem = f"The worker on {job.meta['worker_error']}"  # the page puts the run's kind before it
            outcome = replace(status, state=FAILED, error=problem, problem=problem,
                              hint="Every worker must see the run store folder at the same path as the app")  # fmt: skip
        else:
            problem = "The worker process running it stopped without an answer"
            outcome = replace(status, state=FAILED, error=problem, problem=problem,
                              hint="Try again; if it repeats, the worker may be short of memory")  # fmt: skip
        self._settle(job, outcome)
        settled = self._fetch(job_id)  # this replica's outcome, or the one another process wrote first
        return _status_from_meta(job_id, settled.meta) if settled is not None else outcome

    def cancel(self, job_id: str) -> bool:
        """Stop a job from any replica: a queued one never starts, a running one's worker kills its child.

        False if unknown or finished.
        """
        with self._reachable():
            return self._cancel(job_id)

    def _cancel(self, job_id: str) -> bool:
        current = self._status(job_id)
        if current is None or current.finished or not _flag_cancel(self.connection, self.keys, job_id):
            return False  # unknown, or finished (also when it ended since the status was read)
        job = self._fetch(job_id)
        states = self._rq.job.JobStatus
        if job is not None and job.get_status(refresh=False) in (states.QUEUED, states.DEFERRED, states.SCHEDULED):
            with contextlib.suppress(Exception):  # a worker took it meanwhile: it sees the flag before starting
                job.cancel()
            outcome = replace(current, state=CANCELLED, position=0, queued=0, waiting_for="",
                              error="The run was cancelled before it started",
                              problem="The run was cancelled before it started", hint="Start it again")  # fmt: skip
            self._settle(job, outcome)
        return True

    def shutdown(self, cancel_running: bool = True) -> None:
        """Refuse new jobs from this object; with ``cancel_running``, cancel the live jobs it submitted.

        Jobs other replicas submitted are theirs: a replica going away does not stop them.
        """
        self._closed.set()
        with self._lock:
            mine = list(self._mine)
        if cancel_running:
            for job_id in mine:
                with contextlib.suppress(Exception):
                    self.cancel(job_id)

    # ------------------------------------------------------------------ extras for pages, tests and start-up

    def snapshot(self, job_id: str) -> Any:
        """The latest partial result the job sent, or None."""
        data = self.connection.get(self.keys.snapshot(job_id))
        return pickle.loads(data) if data else None  # noqa: S301 - written by our own workers

    def result(self, job_id: str) -> Any:
        """A finished job's result when a follower wanted it (no worker hooks), else None."""
        data = self.connection.get(self.keys.result(job_id))
        return pickle.loads(data) if data else None  # noqa: S301 - written by our own workers

    def counts(self) -> tuple[int, int]:
        """(running, waiting) jobs of this queue, on every worker."""
        running = self._rq.registry.StartedJobRegistry(self.name, connection=self.connection).count
        return running, self._queue.count

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until every job this object submitted has finished (tests and shutdown)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            mine = list(self._mine.items())
        for job_id, thread in mine:
            while True:
                status = self.status(job_id)
                following = thread is not None and thread.is_alive()
                if (status is None or status.finished) and not following:
                    break
                if deadline is not None and time.monotonic() > deadline:
                    return False
                time.sleep(POLL_S)
        return True

    def recover(self, store: Any, older_than_s: float = RECOVER_AFTER_S) -> list[str]:
        """Runs the store holds as live whose job Redis no longer knows: marked failed.

        The shared-queue version of :meth:`RunStore.recover`: a replica that
        starts must not fail the runs other replicas' jobs are working on, so
        only records with no job here (or one RQ ended without an outcome,
        settled by :meth:`status`) and not updated for ``older_than_s`` go.
        """
        now = time.time()
        with store._db() as db:  # the store's own connection helper (records are the store's business)
            rows = db.execute("SELECT id, updated FROM runs WHERE status IN ('queued', 'running')").fetchall()
        failed = []
        for run_id, updated in rows:
            status = self.status(run_id)
            if status is not None and not status.finished:
                continue
            if status is None and now - float(updated) < older_than_s:
                continue  # just created: its job is being submitted
            record = store.get(run_id)
            if record.live:
                store.fail(run_id, "failed", error="This run stopped: its job was lost. Start it again.",
                           problem="This run stopped: its job was lost", hint="Start it again")  # fmt: skip
                failed.append(run_id)
        return failed

    # ------------------------------------------------------------------ inside

    @contextlib.contextmanager
    def _reachable(self):
        """Redis failing mid-call becomes one sentence for the page (the details go to the server's log)."""
        _rq, redis = _modules()
        try:
            yield
        except redis.RedisError as exc:
            log.warning("the job queue's Redis at %s failed: %s", redact(self.url), exc)
            raise ShrinkRayError("The server's job queue cannot be reached just now",
                                 "Try again in a moment; if it lasts, the server's Redis needs attention") from exc  # fmt: skip

    def _fetch(self, job_id: str):
        rq = self._rq
        try:
            return rq.job.Job.fetch(job_id, connection=self.connection)
        except (rq.exceptions.NoSuchJobError, ValueError, TypeError):  # unknown here, or an id RQ refuses
            return None

    def _settle(self, job, outcome: JobStatus) -> bool:
        """Deliver an outcome this replica found (a queued job cancelled, a dead worker's job)."""
        factory = job.meta.get("hooks")
        try:
            hooks = factory() if factory is not None else JobHooks()
        except Exception as exc:  # noqa: BLE001 - this replica cannot open the store either: Redis still says why
            log.warning("run %s: the run store cannot be opened here: %s", job.id, exc)
            hooks = JobHooks()
        return _deliver(self.connection, self.keys, job, outcome, hooks, None, keep_result=False)

    def _follow(self, job_id: str, hooks: JobHooks) -> None:
        """Call ``hooks`` in this process as the job moves (no worker hooks)."""
        started = False
        seen: tuple[str, float] = ("Starting", 0.0)  # the worker's own first step, not the job's progress
        partials = 0
        while True:
            try:
                status = self.status(job_id)
                job = self._fetch(job_id)
            except Exception:  # noqa: BLE001 - Redis briefly unreachable: try again
                time.sleep(POLL_S * 5)
                continue
            if status is None:
                status = JobStatus(job_id, FAILED, error="The run's job was lost from the queue",
                                   problem="The run's job was lost from the queue", hint="Start it again")  # fmt: skip
            with contextlib.suppress(Exception):  # a hook's bug must not stop the following
                if status.state != QUEUED and not started:
                    started = True
                    if hooks.started:
                        hooks.started()
                if status.state == RUNNING and (status.step, status.fraction) != seen:
                    seen = (status.step, status.fraction)
                    if hooks.progress:
                        hooks.progress(status.step, status.fraction)
                count = int(job.meta.get("partials", 0)) if job is not None else 0
                if count > partials:
                    partials = count
                    snapshot = self.snapshot(job_id)
                    if hooks.partial and snapshot is not None:
                        hooks.partial(snapshot)
            if status.finished:
                if status.state == DONE:
                    try:
                        if hooks.done:
                            hooks.done(self.result(job_id))
                    except Exception:  # noqa: BLE001 - like LocalQueue: keeping the result failed
                        if hooks.failed:
                            with contextlib.suppress(Exception):
                                hooks.failed(replace(status, state=FAILED, error="Keeping the results failed"))
                elif hooks.failed:
                    with contextlib.suppress(Exception):
                        hooks.failed(status)
                return
            if self._closed.is_set() and status.state == QUEUED:
                return
            time.sleep(POLL_S)


# ---------------------------------------------------------------------------------------------- choosing the backend


def queue_from_env(store: Any = None, environ: dict[str, str] | None = None) -> RunQueue:
    """The server's queue: :class:`RedisQueue` when ``SHRINKRAY_QUEUE`` names a Redis, else a LocalQueue.

    With a ``store`` (a :class:`~shrinkray.runs.store.RunStore` on a folder
    every replica and worker sees at the same path), the workers write each
    run's progress and outcome into it.
    """
    env = os.environ if environ is None else environ
    url = env.get(QUEUE_ENV, "").strip()
    if not url:
        return LocalQueue()
    hooks = None
    if store is not None:
        hooks = functools.partial(store_hooks, str(store.root), int(store.max_bytes), float(store.max_age_s))
    return RedisQueue(url, name=env.get(QUEUE_NAME_ENV, "").strip() or None, worker_hooks=hooks)


def main(argv: list[str] | None = None) -> int:
    """``python -m shrinkray.runs.queue_rq``: one RQ worker on the shared queue (start as many as you want slots)."""
    parser = argparse.ArgumentParser(
        prog="python -m shrinkray.runs.queue_rq",
        description="Take Shrink Ray Studio runs from the shared queue on Redis and run them, one at a time, each "
        "in a memory-capped child process. Start one per slot; every app replica and worker must see the run "
        f"store ({'SHRINKRAY_RUNS_DIR'}) at the same path.",
    )  # fmt: skip
    parser.add_argument("--url", default=os.environ.get(QUEUE_ENV, ""), help=f"Redis address (default ${QUEUE_ENV})")
    parser.add_argument("--queue", default=os.environ.get(QUEUE_NAME_ENV, "") or DEFAULT_QUEUE_NAME,
                        help=f"queue name (default ${QUEUE_NAME_ENV} or {DEFAULT_QUEUE_NAME})")  # fmt: skip
    parser.add_argument("--name", default=None, help="worker name (default: RQ's, unique)")
    parser.add_argument("--burst", action="store_true", help="stop when the queue is empty")
    parser.add_argument("--verbose", action="store_true", help="log every job (default: warnings only)")
    args = parser.parse_args(argv)
    if not args.url:
        print(f"Set {QUEUE_ENV}=redis://host:6379/0 or pass --url.", file=sys.stderr)
        return 2
    try:
        rq, _redis = _modules()
        connection = connect(args.url)
    except ShrinkRayError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    worker = rq.Worker([rq.Queue(args.queue, connection=connection)], connection=connection, name=args.name)
    worker.work(burst=args.burst, logging_level="INFO" if args.verbose else "WARNING")
    return 0


if __name__ == "__main__":
    sys.exit(main())

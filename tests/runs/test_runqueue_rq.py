"""The Redis + RQ backend end to end: a real redis-server (Debian's) on a free port, real RQ worker processes.

Status, progress, queue positions, cancel and failures travel through Redis between processes; two replicas
(two Runs objects on the same Redis and run store) see and cancel the same run by id; a real compare runs.
"""

from __future__ import annotations

import functools
import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest
import rqfakes
from helpers import sample_path
from rqserver import MISSING, REDIS_SERVER, free_port, start_redis, start_worker, stop

import shrinkray
from shrinkray.errors import OptionError
from shrinkray.measure.results import CompareSettings
from shrinkray.runs.queue import JobHooks, LocalQueue
from shrinkray.runs.queue_rq import RedisQueue, queue_from_env, redact, store_hooks
from shrinkray.runs.sandbox import BACKGROUND_NICENESS
from shrinkray.runs.service import Runs
from shrinkray.runs.store import RunStore

# rq and redis come with requirements-dev.txt (without them these tests fail, saying so); the server is Debian's
pytestmark = pytest.mark.skipif(REDIS_SERVER is None, reason=MISSING)

WAIT = 240
QUICK = CompareSettings(methods=[("weights-int8", {}), ("float16", {})], latency=False, brotli_quality=1)


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    server, url = start_redis(tmp_path_factory.mktemp("redis"))
    yield url
    stop(server)


def stop_worker(process) -> None:
    stop(process, signal.SIGINT)  # RQ: warm shutdown (no job runs at the end of a test)


@pytest.fixture(scope="module")
def worker(redis_url, tmp_path_factory):
    """One RQ worker on the queue "tests": one slot."""
    process = start_worker(redis_url, "tests", tmp_path_factory.mktemp("worker") / "worker.log")
    yield process
    stop_worker(process)


def wait_for(check, timeout: float = WAIT, what: str = "the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def finished(queue: RedisQueue, job_id: str):
    return wait_for(lambda: (s := queue.status(job_id)) is not None and s.finished and s, what=f"{job_id} to end")


class Recorder:
    """JobHooks that remember every call (the follower thread calls them in this process)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def hooks(self) -> JobHooks:
        return JobHooks(
            started=lambda: self.calls.append(("started", None)),
            progress=lambda step, fraction: self.calls.append(("progress", (step, fraction))),
            partial=lambda snapshot: self.calls.append(("partial", snapshot)),
            done=lambda result: self.calls.append(("done", result)),
            failed=lambda status: self.calls.append(("failed", status)),
        )

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


def test_a_fast_job_reports_progress_snapshots_and_its_result(redis_url, worker):
    queue = RedisQueue(redis_url, name="tests")
    recorder = Recorder()
    job_id = queue.submit(rqfakes.steps, 4, 0.4, memory_bytes=1234, what="Counting", hooks=recorder.hooks())
    running = wait_for(lambda: (s := queue.status(job_id)).state == "running" and s.step.startswith("step") and s,
                       what="a running step")  # fmt: skip
    assert running.memory_bytes == 1234 and 0.0 <= running.fraction < 1.0
    status = finished(queue, job_id)
    assert status.state == "done" and status.fraction == 1.0 and status.error == ""
    assert queue.wait_idle(WAIT)  # the follower has delivered everything
    names = recorder.names()
    assert names[0] == "started" and names[-1] == "done" and "failed" not in names
    assert recorder.calls[-1][1] == {"count": 4}
    partials = [value for name, value in recorder.calls if name == "partial"]
    assert partials and partials[-1] == {"step": 4}  # the latest snapshot always arrives
    assert queue.snapshot(job_id) == {"step": 4}
    steps = [value[0] for name, value in recorder.calls if name == "progress"]
    assert steps and all(step.startswith("step ") for step in steps)


def test_any_replica_sees_positions_and_cancels_queued_and_running_jobs(redis_url, worker):
    first, second = RedisQueue(redis_url, name="tests"), RedisQueue(redis_url, name="tests")
    recorder = Recorder()
    running = first.submit(rqfakes.steps, 600, 0.1, what="Long", hooks=recorder.hooks())
    wait_for(lambda: second.status(running).state == "running", what="the long job to start")
    queued = [first.submit(rqfakes.steps, 2, 0.05, what=f"Job {i}") for i in range(3)]
    seen = [second.status(job_id) for job_id in queued]
    assert [s.state for s in seen] == ["queued"] * 3
    assert [s.position for s in seen] == [1, 2, 3] and {s.queued for s in seen} == {3}
    assert all(s.waiting_for == "a worker" for s in seen)

    assert second.cancel(queued[1]) is True  # another replica cancels a queued job: it never starts
    cancelled = second.status(queued[1])
    assert cancelled.state == "cancelled" and "before it started" in cancelled.error
    assert first.status(queued[2]).position == 2

    assert second.cancel(running) is True  # ... and a running one: its worker kills the child
    stopped = finished(first, running)
    assert stopped.state == "cancelled" and stopped.error == "Long was cancelled"
    for job_id in (queued[0], queued[2]):
        assert finished(first, job_id).state == "done"
    assert second.cancel(running) is False and second.cancel(queued[1]) is False  # finished: nothing to stop
    assert first.status("no-such-job-here-000000") is None and first.cancel("no-such-job-here-000000") is False
    assert first.wait_idle(WAIT)
    assert recorder.names()[-1] == "failed" and recorder.calls[-1][1].state == "cancelled"


def test_a_failure_keeps_the_engines_message_hint_and_setting(redis_url, worker):
    queue = RedisQueue(redis_url, name="tests")
    status = finished(queue, queue.submit(rqfakes.refuse, what="Palettizing"))
    assert status.state == "failed"
    assert status.problem == "16 levels cannot hold this tensor's outliers"
    assert status.hint == "Choose more palette levels" and status.setting == "levels"
    assert "16 levels" in status.error and "Traceback" not in status.error


def test_a_job_whose_worker_process_dies_is_failed_once_by_whoever_looks(redis_url, worker):
    from rq.command import send_stop_job_command

    queue = RedisQueue(redis_url, name="tests")
    job_id = queue.submit(rqfakes.steps, 30, 0.1, what="Doomed")
    wait_for(lambda: queue.status(job_id).state == "running", what="the job to start")
    send_stop_job_command(queue.connection, job_id)  # RQ kills the work horse: no outcome from the job itself
    status = finished(queue, job_id)
    assert status.state == "failed" and status.error == "The worker process running it stopped without an answer"
    assert RedisQueue(redis_url, name="tests").status(job_id) == status  # settled once, the same everywhere


def test_memory_admission_holds_a_job_that_does_not_fit_beside_a_running_one(redis_url, tmp_path):
    workers = [start_worker(redis_url, "memory", tmp_path / f"w{i}.log", SHRINKRAY_QUEUE_MEMORY_BYTES="1000")
               for i in range(2)]  # fmt: skip
    try:
        queue = RedisQueue(redis_url, name="memory")
        big = queue.submit(rqfakes.steps, 600, 0.1, memory_bytes=600, what="Big")
        wait_for(lambda: queue.status(big).state == "running", what="the first job to start")
        other = queue.submit(rqfakes.steps, 2, 0.05, memory_bytes=600, what="Other")
        waiting = wait_for(lambda: (s := queue.status(other)).waiting_for == "memory" and s, what="memory wait")
        assert waiting.state == "queued" and waiting.position == 1
        assert queue.status(big).state == "running"
        assert queue.cancel(big)
        assert finished(queue, big).state == "cancelled"
        assert finished(queue, other).state == "done"  # admitted once the memory was given back
    finally:
        for process in workers:
            stop_worker(process)


def test_two_replicas_share_a_real_run_by_id(redis_url, worker, tmp_path):
    environ = {"SHRINKRAY_QUEUE": redis_url, "SHRINKRAY_QUEUE_NAME": "tests"}
    replicas = []
    for _ in range(2):
        store = RunStore(tmp_path / "shared")
        replicas.append(Runs(store, queue_from_env(store, environ)))
    first, second = replicas
    loaded = shrinkray.load(sample_path("cnn"))
    run_id = first.start(loaded, QUICK)
    assert second.view(run_id).status in ("queued", "running")
    view = wait_for(lambda: (v := second.view(run_id)).status in ("done", "failed", "cancelled") and v,
                    what="the run to end")  # fmt: skip
    assert view.status == "done", view.record.error
    assert first.view(run_id).status == "done"
    comparison = second.comparison(run_id)
    assert [r.key for r in comparison.variants] == ["weights-int8", "float16"]
    for result in comparison.variants:
        assert Path(result.file).is_file() and Path(result.file).parent == view.record.folder / "variants"
    assert comparison.variants[0].sizes.raw < comparison.original.sizes.raw
    assert view.record.snapshot is None and view.record.model_sha256 == loaded.sha256


def test_a_replica_cancels_a_run_another_started_and_recovery_spares_live_runs(redis_url, worker, tmp_path):
    environ = {"SHRINKRAY_QUEUE": redis_url, "SHRINKRAY_QUEUE_NAME": "tests"}
    store = RunStore(tmp_path / "shared")
    first = Runs(store, queue_from_env(store, environ))
    second_store = RunStore(tmp_path / "shared")
    second = Runs(second_store, queue_from_env(second_store, environ))
    slow = CompareSettings(methods=[("weights-int8", {}), ("float16", {}), ("palettize", {})], latency=True)
    run_id = first.start(shrinkray.load(sample_path("cnn")), slow)
    wait_for(lambda: second.view(run_id).status == "running", what="the run to start")
    orphan = store.create(model_name="lost.onnx")  # a record whose job no queue holds
    assert second.queue.recover(second_store, older_than_s=0) == [orphan]  # the live run is spared
    assert second.view(run_id).status == "running"
    assert second.cancel(run_id) is True
    view = wait_for(lambda: (v := first.view(run_id)).status in ("done", "failed", "cancelled") and v,
                    what="the run to stop")  # fmt: skip
    assert view.status == "cancelled" and view.record.status == "cancelled"
    assert not (view.record.folder / "variants").exists()  # nothing half-made is offered


def test_the_backend_is_chosen_by_the_environment(redis_url, tmp_path):
    assert isinstance(queue_from_env(None, {}), LocalQueue)
    store = RunStore(tmp_path)
    queue = queue_from_env(store, {"SHRINKRAY_QUEUE": redis_url})
    assert isinstance(queue, RedisQueue) and queue.name == "shrinkray"
    assert queue.worker_hooks.func is store_hooks and queue.worker_hooks.args[0] == str(store.root)
    with pytest.raises(OptionError, match="not a Redis address"):
        queue_from_env(None, {"SHRINKRAY_QUEUE": "http://example.invalid"})
    port = free_port()
    with pytest.raises(shrinkray.ShrinkRayError, match="cannot be reached") as caught:
        RedisQueue(f"redis://:secret@127.0.0.1:{port}/0")
    assert "secret" not in str(caught.value)
    assert redact("redis://user:pw@host:1/0") == "redis://user:***@host:1/0"


def test_runs_take_the_backend_from_the_environment_and_recover_only_lost_runs(redis_url, tmp_path, monkeypatch):
    monkeypatch.setenv("SHRINKRAY_QUEUE", redis_url)
    monkeypatch.setenv("SHRINKRAY_QUEUE_NAME", "recovery")
    runs = Runs(RunStore(tmp_path))
    assert isinstance(runs.queue, RedisQueue) and runs.queue.name == "recovery"
    fresh = runs.store.create(model_name="fresh.onnx")
    assert runs.recover() == []  # just created: another replica may be submitting its job
    assert runs.store.get(fresh).status == "queued"
    monkeypatch.delenv("SHRINKRAY_QUEUE")
    local = Runs(RunStore(tmp_path))
    assert isinstance(local.queue, LocalQueue)
    assert local.recover() == [fresh]  # one process owns the store: every live run it holds was lost


def test_a_worker_that_cannot_open_the_run_store_says_so(redis_url, worker, tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    queue = RedisQueue(redis_url, name="tests", worker_hooks=functools.partial(store_hooks, str(blocked / "runs"),
                                                                               2**30, 86400.0))  # fmt: skip
    status = finished(queue, queue.submit(rqfakes.steps, 1, 0.0, what="Counting"))
    assert status.state == "failed" and "cannot open the run store" in status.problem
    assert "same path" in status.hint


def test_unknown_and_malformed_ids_are_unknown(redis_url):
    queue = RedisQueue(redis_url, name="tests")
    for job_id in ("A" * 22, "not/an:id", ""):
        assert queue.status(job_id) is None and queue.cancel(job_id) is False


def test_redis_going_away_is_one_sentence_for_the_page(tmp_path):
    server, url = start_redis(tmp_path)
    queue = RedisQueue(url, name="gone")
    job_id = queue.submit(rqfakes.steps, 1, 0.0)
    stop(server)
    for call in (lambda: queue.status(job_id), lambda: queue.cancel(job_id), lambda: queue.submit(rqfakes.steps, 1, 0.0)):
        with pytest.raises(shrinkray.ShrinkRayError, match="job queue cannot be reached just now"):
            call()


def test_a_submits_hooks_factory_records_the_outcome_where_the_job_ends(redis_url, worker, tmp_path):
    store = RunStore(tmp_path / "store")
    run_id = store.create(model_name="fake.onnx")
    queue = RedisQueue(redis_url, name="tests")  # no worker_hooks: the submit brings its own factory
    recorder = Recorder()
    factory = functools.partial(store_hooks, str(store.root), store.max_bytes, store.max_age_s, run_id)
    queue.submit(rqfakes.steps, 3, 0.2, hooks=recorder.hooks(), hooks_factory=factory, job_id=run_id)
    assert finished(queue, run_id).state == "done"
    record = store.get(run_id)
    assert record.status == "done" and record.result == {"count": 3}  # written by the worker
    assert queue.wait_idle(WAIT) and recorder.calls == []  # the local hooks would have written it twice


def test_a_queued_run_nobody_has_shown_for_too_long_is_not_started_by_a_worker(redis_url, worker, tmp_path):
    """The shared queue drops it like the local one (shrinkray/runs/hooks.py): the worker asks the run store."""
    store = RunStore(tmp_path / "store")
    run_id = store.create(model_name="fake.onnx")
    store.mark_watched(run_id, now=time.time() - 3600)  # its page closed an hour ago
    queue = RedisQueue(redis_url, name="tests")
    factory = functools.partial(store_hooks, str(store.root), store.max_bytes, store.max_age_s, run_id)
    queue.submit(rqfakes.steps, 3, 0.2, hooks_factory=factory, job_id=run_id)
    status = finished(queue, run_id)
    assert status.state == "cancelled" and status.problem.startswith("This run was not started"), status
    record = store.get(run_id)
    assert record.status == "cancelled" and record.result is None and "about 60 minutes" in record.problem


def test_a_full_shared_queue_refuses_a_run_like_the_local_one(redis_url):
    from shrinkray.errors import ShrinkRayError

    first, second = RedisQueue(redis_url, name="full", max_waiting=2), RedisQueue(redis_url, name="full", max_waiting=2)
    waiting = [first.submit(rqfakes.steps, 1, 0.0), second.submit(rqfakes.steps, 1, 0.0)]  # no worker on "full"
    with pytest.raises(ShrinkRayError, match="The server is busy: 2 runs are already waiting") as refused:
        second.submit(rqfakes.steps, 1, 0.0)
    assert refused.value.hint == "Try again in a few minutes"
    assert first.cancel(waiting[0])
    second.submit(rqfakes.steps, 1, 0.0)  # a place freed up: accepted again


class _Interleave:
    """Lets another process act at one chosen moment of a worker's conversation with Redis: right after the
    worker has read (EXISTS, GET or WATCH) a given key. Interleavings that are otherwise a matter of luck
    become one deterministic sequence."""

    def __init__(self, key: str, act, commands: tuple[bytes, ...] = (b"EXISTS", b"GET", b"WATCH")) -> None:
        self.key, self.act, self.commands, self.fired = key.encode(), act, commands, False

    def connection_class(self):
        hook = self

        import redis

        class Hooked(redis.Connection):
            def send_command(self, *args, **kwargs):
                self._sent = args
                return super().send_command(*args, **kwargs)

            def read_response(self, *args, **kwargs):
                response = super().read_response(*args, **kwargs)
                sent, self._sent = getattr(self, "_sent", ()), ()
                names = [a.encode() if isinstance(a, str) else a for a in sent]
                if not hook.fired and names and names[0].upper() in hook.commands and hook.key in names:
                    hook.fired = True
                    hook.act()
                return response

        return Hooked


def _hooked(redis_url: str, hook: _Interleave):
    import redis

    return redis.Redis(connection_pool=redis.ConnectionPool.from_url(redis_url, connection_class=hook.connection_class()))


def _perform_here(redis_url: str, job_id: str, hook: _Interleave, monkeypatch) -> None:
    """Run the job's ``perform`` in this process (as a worker's work horse would), on a hooked connection."""
    import rq

    from shrinkray.runs import queue_rq as runqueue_rq

    connection = _hooked(redis_url, hook)
    job = rq.job.Job.fetch(job_id, connection=connection)
    monkeypatch.setattr(rq, "get_current_job", lambda: job)
    runqueue_rq.perform(job.args[0])


def test_a_cancel_landing_between_a_workers_check_and_its_write_is_not_overwritten(redis_url, monkeypatch):
    """Cancel vs start: a replica cancels a queued job at the moment a worker has taken it and read that it is
    not settled. The worker's "running" must not overwrite the cancelled outcome (it stayed "running" for ever)."""
    replica = RedisQueue(redis_url, name="interleave")  # no worker on this queue: this test is the worker
    job_id = replica.submit(rqfakes.steps, 2, 0.05, what="Raced")
    cancelled = []
    hook = _Interleave(replica.keys.settled(job_id), lambda: cancelled.append(RedisQueue(redis_url, name="interleave").cancel(job_id)))
    _perform_here(redis_url, job_id, hook, monkeypatch)
    assert hook.fired and cancelled == [True]
    status = replica.status(job_id)
    assert status.state == "cancelled" and "before it started" in status.error
    assert RedisQueue(redis_url, name="interleave").status(job_id) == status


def test_a_settled_outcome_keeps_what_the_worker_wrote_meanwhile(redis_url):
    """The replica that settles a job writes the outcome into the job's state as it is in Redis, not over a
    copy it read earlier (which dropped the worker's later fields, e.g. how many snapshots it sent)."""
    import rq

    replica = RedisQueue(redis_url, name="interleave")
    job_id = replica.submit(rqfakes.steps, 2, 0.05, what="Raced")
    stale = replica._fetch(job_id)
    fresh = rq.job.Job.fetch(job_id, connection=replica.connection)
    fresh.meta.update(partials=3, started_at=1.0)  # the worker, meanwhile
    fresh.save_meta()
    outcome = replace(replica.status(job_id), state="cancelled", error="The run was cancelled")
    assert replica._settle(stale, outcome)  # what cancel and a dead worker's job do, with the copy they fetched
    assert not replica._settle(stale, replace(outcome, state="failed"))  # settled once
    meta = rq.job.Job.fetch(job_id, connection=replica.connection).meta
    assert meta["state"] == "cancelled" and meta["partials"] == 3 and meta["started_at"] == 1.0


def test_a_cancel_landing_as_the_job_ends_is_refused(redis_url):
    """Cancel vs finish: the job ends (its outcome settled) just after a replica read it as live. The cancel
    says False, and the outcome stays the job's own (the flag was set and the job called cancelled)."""
    from shrinkray.runs.queue import JobStatus
    from shrinkray.runs.queue_rq import _deliver

    owner = RedisQueue(redis_url, name="interleave")
    job_id = owner.submit(rqfakes.steps, 2, 0.05, what="Raced")

    def finish() -> None:  # what the worker's _deliver does when the job returns
        job = owner._fetch(job_id)
        _deliver(owner.connection, owner.keys, job, JobStatus(job_id, "done", step="Done", fraction=1.0), JobHooks(),
                 None, keep_result=False)  # fmt: skip

    hook = _Interleave(f"rq:job:{job_id}", finish, commands=(b"HGETALL",))
    replica = RedisQueue(redis_url, name="interleave", connection=_hooked(redis_url, hook))
    assert replica.cancel(job_id) is False
    assert hook.fired
    assert owner.status(job_id).state == "done"
    assert not owner.connection.exists(owner.keys.cancel(job_id))


def test_runs_are_taken_in_turn_across_visitors_not_first_in_first_out(redis_url, tmp_path):
    """Visitor A queues five runs, then visitor B one: B's is taken second (issue 27), by one worker."""
    queue = RedisQueue(redis_url, name="turns")
    log = tmp_path / "order.txt"
    a = [queue.submit(rqfakes.note, str(log), f"a{i}", visitor="cookie:a") for i in range(5)]
    b = queue.submit(rqfakes.note, str(log), "b0", visitor="cookie:b")
    assert [queue.status(j).position for j in [a[0], b, *a[1:]]] == [1, 2, 3, 4, 5, 6]
    worker = start_worker(redis_url, "turns", tmp_path / "worker.log")
    try:
        for job_id in [*a, b]:
            assert finished(queue, job_id).state == "done"
    finally:
        stop_worker(worker)
    assert log.read_text().split() == ["a0", "b0", "a1", "a2", "a3", "a4"]


def test_a_second_visitors_run_is_next_while_the_first_visitors_run(redis_url, worker):
    queue = RedisQueue(redis_url, name="tests")
    long = queue.submit(rqfakes.steps, 600, 0.1, what="Long", visitor="cookie:a")
    wait_for(lambda: queue.status(long).state == "running", what="the first visitor's run to start")
    more = [queue.submit(rqfakes.steps, 1, 0.0, visitor="cookie:a") for _ in range(3)]
    other = queue.submit(rqfakes.steps, 1, 0.0, visitor="cookie:b")
    assert queue.status(other).position == 1  # ahead of everything the first visitor queued
    assert [queue.status(j).position for j in more] == [2, 3, 4]
    for job_id in (long, *more, other):
        queue.cancel(job_id)
    assert queue.wait_idle(WAIT)


def test_a_queued_run_yields_the_cpu_to_interactive_work(redis_url, worker):
    queue = RedisQueue(redis_url, name="tests")
    recorder = Recorder()
    job_id = queue.submit(rqfakes.niceness, what="Asking", hooks=recorder.hooks())
    assert finished(queue, job_id).error == ""
    assert queue.wait_idle(WAIT)
    assert recorder.calls[-1] == ("done", min(19, os.nice(0) + BACKGROUND_NICENESS))

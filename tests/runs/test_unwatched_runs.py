"""A queued run whose page was closed long ago is not started when its turn comes (issue 27 follow-up): the
visitors behind it do not wait for nobody. Jobs are fake and in-process, gated by events; time is set on the
run's ``watched`` file, never waited for."""

from __future__ import annotations

import threading
import time

import pytest

from shrinkray.runs.hooks import DEFAULT_UNWATCHED_S, UNWATCHED_ENV, abandoned, run_hooks, unwatched_limit
from shrinkray.runs.queue import CANCELLED, DONE, JobHooks, LocalQueue
from shrinkray.runs.service import Runs
from shrinkray.runs.store import RunStore

WAIT = 20


def in_place(fn, *args, what, limits, progress, partial, cancel, **kwargs):
    return fn(*args, **kwargs)


class Gate:
    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, value):
        self.started.set()
        assert self.release.wait(WAIT)
        return value


def _queued_behind_a_running_job(store: RunStore, run_id: str):
    """A one-slot queue running a gated job, with run ``run_id`` (its store's hooks) waiting behind it."""
    queue = LocalQueue(workers=1, memory_budget=10**12, runner=in_place)
    first, second = Gate(), Gate()
    second.release.set()
    queue.submit(first, 1)
    assert first.started.wait(WAIT)
    queue.submit(second, 2, hooks=run_hooks(store, run_id), job_id=run_id)
    return queue, first, second


def test_a_queued_run_nobody_has_shown_for_too_long_is_not_started(tmp_path):
    store = RunStore(tmp_path)
    run_id = store.create(model_name="m")
    store.mark_watched(run_id, now=time.time() - DEFAULT_UNWATCHED_S - 60)  # its tab closed 11 minutes ago
    queue, first, second = _queued_behind_a_running_job(store, run_id)
    first.release.set()
    assert queue.wait_idle(WAIT)
    assert not second.started.is_set()
    status = queue.status(run_id)
    assert status.state == CANCELLED and status.problem.startswith("This run was not started: its page had been closed")
    record = store.get(run_id)  # the run store says so too (what a link to it shows)
    assert record.status == "cancelled" and "about 11 minutes" in record.problem and "about 10 minutes" in record.problem


def test_a_queued_run_shown_recently_starts(tmp_path):
    store = RunStore(tmp_path)
    run_id = store.create(model_name="m")
    store.mark_watched(run_id, now=time.time() - 60)
    queue, first, second = _queued_behind_a_running_job(store, run_id)
    first.release.set()
    assert queue.wait_idle(WAIT)
    assert second.started.is_set() and queue.status(run_id).state == DONE


def test_a_run_no_page_follows_is_never_dropped(tmp_path):
    """The CLI's and the API's runs are never marked watched: however long they wait, they start."""
    store = RunStore(tmp_path)
    run_id = store.create(model_name="m")
    assert store.unwatched_for(run_id) is None and abandoned(store, run_id, limit_s=0) == ""
    queue, first, second = _queued_behind_a_running_job(store, run_id)
    first.release.set()
    assert queue.wait_idle(WAIT)
    assert queue.status(run_id).state == DONE


def test_a_store_that_cannot_be_read_starts_the_job():
    def broken():
        raise OSError("gone")

    queue = LocalQueue(workers=1, memory_budget=10**12, runner=in_place)
    gate = Gate()
    gate.release.set()
    job = queue.submit(gate, 1, hooks=JobHooks(abandoned=broken))
    assert queue.wait_idle(WAIT) and queue.status(job).state == DONE


def test_watching_refreshes_only_runs_a_page_started(tmp_path):
    store = RunStore(tmp_path)
    followed, unfollowed = store.create(model_name="a"), store.create(model_name="b")
    store.mark_watched(followed, now=time.time() - 3600)
    runs = Runs(store, LocalQueue(workers=1, runner=in_place))
    runs.watch(followed)
    runs.watch(unfollowed)
    assert store.unwatched_for(followed) < 60 and store.unwatched_for(unfollowed) is None
    assert abandoned(store, followed) == ""


def test_the_limit_is_a_setting(monkeypatch):
    from shrinkray.errors import OptionError

    assert unwatched_limit({}) == DEFAULT_UNWATCHED_S
    assert unwatched_limit({UNWATCHED_ENV: "120"}) == 120
    with pytest.raises(OptionError, match=UNWATCHED_ENV):
        unwatched_limit({UNWATCHED_ENV: "soon"})


class _Submitted:
    """A queue that only records what was submitted (the run never starts here)."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def submit(self, fn, *args, job_id=None, **kwargs):
        self.ids.append(job_id)
        return job_id

    def status(self, job_id):
        return None


def test_a_run_the_app_starts_is_marked_watched_and_others_are_not(tmp_path):
    from helpers import sample_path

    import shrinkray
    from shrinkray.measure.results import CompareSettings

    store = RunStore(tmp_path)
    runs = Runs(store, _Submitted())
    loaded = shrinkray.load(sample_path("mlp"))
    followed = runs.start(loaded, CompareSettings(methods=[("float16", {})]), watched=True)
    unfollowed = runs.start(loaded, CompareSettings(methods=[("float16", {})]))
    assert runs.queue.ids == [followed, unfollowed]
    assert store.unwatched_for(followed) < 60 and store.unwatched_for(unfollowed) is None

"""The job queue: bounded slots, first in first out, positions, cancel, failures, memory admission.

Jobs here are fake and in-process (a runner that calls them in the job's thread), gated by events:
every assertion is about order and state, none about time.
"""

from __future__ import annotations

import errno
import os
import threading

import pytest
import rqfakes

from shrinkray.errors import OptionError, ShrinkRayError
from shrinkray.runs.queue import (
    CANCELLED,
    DONE,
    FAILED,
    QUEUED,
    RUNNING,
    JobHooks,
    LocalQueue,
    default_workers,
    estimate_job_memory,
)
from shrinkray.runs.sandbox import BACKGROUND_NICENESS, Cancelled

WAIT = 20  # seconds an event may take before the test fails (never reached when things work)


def in_place(fn, *args, what, limits, progress, partial, cancel, **kwargs):
    """A runner without a child process: the job gets progress/partial and must honour cancel."""
    return fn(*args, progress=progress, partial=partial, cancel=cancel, **kwargs)


class Gate:
    """A fake job that says when it started and finishes when the test opens its gate."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, value, progress=None, partial=None, cancel=None):
        self.started.set()
        progress("Working", 0.5)
        if partial:
            partial({"value": value, "step": "half"})
        while not self.release.wait(0.01):
            if cancel is not None and cancel.is_set():
                raise Cancelled("This run was cancelled", "Start it again")
        return value * 2


def _wait_state(queue, job_id, state):
    done = threading.Event()
    for _ in range(WAIT * 100):
        if queue.status(job_id).state == state:
            return
        done.wait(0.01)
    raise AssertionError(f"{job_id} never reached {state}: {queue.status(job_id)}")


def test_at_most_workers_jobs_run_and_the_rest_wait_in_order():
    queue = LocalQueue(workers=2, memory_budget=10**12, runner=in_place)
    gates = [Gate() for _ in range(4)]
    ids = [queue.submit(g, i) for i, g in enumerate(gates)]
    assert gates[0].started.wait(WAIT) and gates[1].started.wait(WAIT)
    assert [queue.status(i).state for i in ids] == [RUNNING, RUNNING, QUEUED, QUEUED]
    assert (queue.status(ids[2]).position, queue.status(ids[3]).position) == (1, 2)
    assert queue.status(ids[3]).queued == 2 and queue.status(ids[3]).waiting_for == "a worker"
    assert not gates[2].started.is_set()
    gates[1].release.set()
    assert gates[2].started.wait(WAIT)
    _wait_state(queue, ids[1], DONE)
    assert queue.status(ids[3]).position == 1 and not gates[3].started.is_set()
    for g in gates:
        g.release.set()
    assert queue.wait_idle(WAIT)
    assert [queue.status(i).state for i in ids] == [DONE] * 4


def test_progress_partial_and_result_reach_the_hooks():
    seen: dict[str, list] = {"progress": [], "partial": [], "done": []}
    hooks = JobHooks(progress=lambda s, f: seen["progress"].append((s, f)), partial=seen["partial"].append,
                     done=seen["done"].append)  # fmt: skip
    queue = LocalQueue(workers=1, memory_budget=10**12, runner=in_place)
    gate = Gate()
    job = queue.submit(gate, 21, hooks=hooks)
    assert gate.started.wait(WAIT)
    _wait_state(queue, job, RUNNING)
    status = queue.status(job)
    assert (status.step, status.fraction) == ("Working", 0.5)
    gate.release.set()
    assert queue.wait_idle(WAIT)
    assert seen == {"progress": [("Working", 0.5)], "partial": [{"value": 21, "step": "half"}], "done": [42]}
    assert queue.status(job).state == DONE and queue.status(job).fraction == 1.0


def test_cancel_a_queued_job_never_starts_it_and_a_running_one_stops():
    failed = []
    queue = LocalQueue(workers=1, memory_budget=10**12, runner=in_place)
    first, second = Gate(), Gate()
    a = queue.submit(first, 1, hooks=JobHooks(failed=failed.append))
    b = queue.submit(second, 2, hooks=JobHooks(failed=failed.append))
    assert first.started.wait(WAIT)
    assert queue.cancel(b) is True
    assert queue.status(b).state == CANCELLED
    assert queue.cancel(a) is True
    assert queue.wait_idle(WAIT)
    assert queue.status(a).state == CANCELLED and not second.started.is_set()
    assert sorted(s.id for s in failed) == sorted([a, b]) and {s.state for s in failed} == {CANCELLED}
    assert queue.cancel(a) is False  # finished
    assert queue.cancel("no-such-job") is False and queue.status("no-such-job") is None


def _fails(value, progress=None, partial=None, cancel=None):
    raise ShrinkRayError("The model cannot run on these inputs", "Set the free dimensions", setting="inputs")


def _bug(value, progress=None, partial=None, cancel=None):
    raise ZeroDivisionError("division by zero")


def test_a_failed_job_keeps_the_message_and_its_setting_and_the_queue_goes_on():
    queue = LocalQueue(workers=1, memory_budget=10**12, runner=in_place)
    bad = queue.submit(_fails, 1, what="Comparing")
    bug = queue.submit(_bug, 1, what="Comparing")
    gate = Gate()
    good = queue.submit(gate, 3)
    gate.release.set()
    assert queue.wait_idle(WAIT)
    status = queue.status(bad)
    assert status.state == FAILED
    assert (status.problem, status.hint, status.setting) == ("The model cannot run on these inputs",
                                                             "Set the free dimensions", "inputs")  # fmt: skip
    assert status.error == "The model cannot run on these inputs. Set the free dimensions."
    assert queue.status(bug).state == FAILED and "unexpected ZeroDivisionError" in queue.status(bug).problem
    assert queue.status(good).state == DONE


def test_memory_admission_holds_a_job_that_would_overcommit_until_memory_is_free():
    queue = LocalQueue(workers=3, memory_budget=1000, runner=in_place)
    big, second_big, small = Gate(), Gate(), Gate()
    a = queue.submit(big, 1, memory_bytes=700)
    b = queue.submit(second_big, 2, memory_bytes=700)  # 700 + 700 > 1000: waits although a slot is free
    c = queue.submit(small, 3, memory_bytes=100)  # fits, but first in first out: waits behind b
    assert big.started.wait(WAIT)
    assert queue.status(b).state == QUEUED and queue.status(b).waiting_for == "memory"
    assert queue.status(c).position == 2 and not small.started.is_set()
    assert queue.held_memory() == 700
    big.release.set()
    assert second_big.started.wait(WAIT) and small.started.wait(WAIT)  # 700 + 100 fit together
    assert queue.held_memory() == 800
    second_big.release.set()
    small.release.set()
    assert queue.wait_idle(WAIT)
    assert {queue.status(i).state for i in (a, b, c)} == {DONE}


def test_a_job_larger_than_the_budget_still_runs_alone():
    queue = LocalQueue(workers=2, memory_budget=100, runner=in_place)
    gate = Gate()
    job = queue.submit(gate, 5, memory_bytes=10**6)
    assert gate.started.wait(WAIT)
    gate.release.set()
    assert queue.wait_idle(WAIT) and queue.status(job).state == DONE


def test_shutdown_cancels_waiting_jobs_and_refuses_new_ones():
    queue = LocalQueue(workers=1, memory_budget=10**12, runner=in_place)
    gate, waiting = Gate(), Gate()
    a = queue.submit(gate, 1)
    b = queue.submit(waiting, 2)
    assert gate.started.wait(WAIT)
    queue.shutdown()
    assert queue.wait_idle(WAIT)
    assert queue.status(a).state == CANCELLED
    with pytest.raises(ShrinkRayError, match="shut down"):
        queue.submit(gate, 3)
    assert not waiting.started.is_set() and queue.status(b).state == CANCELLED


def test_workers_and_estimates_from_settings(monkeypatch):
    monkeypatch.setenv("SHRINKRAY_WORKERS", "3")
    assert default_workers() == 3
    monkeypatch.delenv("SHRINKRAY_WORKERS")
    assert default_workers() >= 1
    with pytest.raises(OptionError):
        LocalQueue(workers=0)
    from shrinkray.io.limits import GiB, Limits

    limits = Limits(max_job_memory_bytes=2 * GiB)
    small = estimate_job_memory(10 * 2**20, 4, limits)
    assert 400 * 2**20 < small < GiB  # interpreter + 11x the tensors
    assert estimate_job_memory(10 * GiB, 4, limits) == 2 * GiB  # never above the worker's hard cap


def test_a_full_queue_refuses_with_a_message_instead_of_waiting_for_hours():
    queue = LocalQueue(workers=1, memory_budget=10**12, runner=in_place, max_waiting=2)
    gates = [Gate() for _ in range(3)]
    ids = [queue.submit(g, i) for i, g in enumerate(gates)]  # one runs, two wait
    assert gates[0].started.wait(WAIT)
    with pytest.raises(ShrinkRayError, match="busy: 2 runs are already waiting"):
        queue.submit(Gate(), 9)
    for g in gates:
        g.release.set()
    assert queue.wait_idle(WAIT) and {queue.status(i).state for i in ids} == {DONE}


def test_a_cancel_the_run_store_cannot_record_leaves_the_run_in_line_and_says_why_in_one_sentence():
    """A full or read-only run store: the queued run is not half-cancelled (gone from the queue, 'queued' in the
    store for ever); it keeps its place, runs as any other, and the page gets one sentence, not a traceback."""
    queue = LocalQueue(workers=1, memory_budget=10**12, runner=in_place)
    first, second, third = Gate(), Gate(), Gate()

    def disk_full(status):
        raise OSError(errno.ENOSPC, "No space left on device")

    queue.submit(first, 1)
    b = queue.submit(second, 2, hooks=JobHooks(failed=disk_full))
    c = queue.submit(third, 3)
    assert first.started.wait(WAIT)
    with pytest.raises(ShrinkRayError) as refused:
        queue.cancel(b)
    message = str(refused.value)
    assert message.startswith("This run could not be cancelled") and "No space left on device" in message
    assert "Press Cancel again" in refused.value.hint and "\n" not in message and "Traceback" not in message
    assert message.count(". ") == 1  # what is wrong, then what to do
    assert (queue.status(b).state, queue.status(b).position) == (QUEUED, 1)  # its place in line, as recorded
    assert queue.status(c).position == 2
    first.release.set()
    assert second.started.wait(WAIT)  # a run still in line starts when its turn comes
    second.release.set()
    third.release.set()
    assert queue.wait_idle(WAIT) and queue.status(b).state == DONE


@pytest.mark.slow
def test_a_queued_run_yields_the_cpu_to_interactive_work(monkeypatch):
    """The default runner is a capped worker at BACKGROUND_NICENESS: a visitor's never-ending run on two cores
    had held another visitor's upload check for over a minute."""
    monkeypatch.setenv("PYTHONPATH", os.path.dirname(rqfakes.__file__))  # the worker imports the fake job
    results = []
    queue = LocalQueue(workers=1, memory_budget=10**12)
    queue.submit(rqfakes.niceness, hooks=JobHooks(done=results.append))
    assert queue.wait_idle(240)
    assert results == [min(19, os.nice(0) + BACKGROUND_NICENESS)]

"""map_tensors: per-tensor work on threads, results in order, a bounded number of results held at once."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from shrinkray.methods import base


@pytest.fixture
def four_workers(monkeypatch):
    monkeypatch.setattr(base, "MAX_TENSOR_WORKERS", 4)
    monkeypatch.setattr(base, "usable_cores", lambda: 4)


def test_results_come_back_in_order_even_when_later_work_finishes_first(four_workers):
    refs = list(range(12))

    def work(r):
        time.sleep(0.02 if r % 3 == 0 else 0.001)  # early items are the slow ones
        return r * 10

    assert list(base.map_tensors(work, refs)) == [r * 10 for r in refs]


def test_work_runs_on_several_threads(four_workers):
    seen = set()
    barrier = threading.Barrier(2, timeout=5)

    def work(r):
        seen.add(threading.current_thread().name)
        if r < 2:
            barrier.wait()  # only passes if two items run at the same time
        return r

    assert list(base.map_tensors(work, list(range(6)))) == list(range(6))
    assert len(seen) >= 2 and all(name.startswith("shrinkray-tensor") for name in seen)


def test_at_most_one_result_per_worker_is_started_ahead_of_the_consumer(four_workers):
    started = []

    def work(r):
        started.append(r)
        return r

    results = base.map_tensors(work, list(range(40)))
    first = next(results)
    time.sleep(0.1)  # let the pool run as far ahead as it may
    assert first == 0
    assert len(started) <= 4 + 1, started
    assert list(results) == list(range(1, 40))


def test_one_core_runs_in_the_calling_thread(monkeypatch):
    monkeypatch.setattr(base, "usable_cores", lambda: 1)
    names = []
    out = list(base.map_tensors(lambda r: names.append(threading.current_thread().name) or r, [1, 2, 3]))
    assert out == [1, 2, 3] and set(names) == {threading.current_thread().name}


def test_an_error_in_the_work_reaches_the_caller(four_workers):
    def work(r):
        if r == 5:
            raise ValueError("tensor 5 is broken")
        return r

    with pytest.raises(ValueError, match="tensor 5"):
        list(base.map_tensors(work, list(range(10))))


@pytest.mark.parametrize("method", ["weights-int8", "palettize"])
def test_threads_do_not_change_the_result(method, monkeypatch):
    from helpers import cached_sample

    import shrinkray

    monkeypatch.setattr(base, "usable_cores", lambda: 4)
    outputs = []
    for workers in (1, 4):
        monkeypatch.setattr(base, "MAX_TENSOR_WORKERS", workers)
        variant = shrinkray.shrink(cached_sample("transformer"), method)
        assert len(variant.changes) >= 5
        outputs.append((variant.model.SerializeToString(), [dataclasses.asdict(c) for c in variant.changes]))
    assert outputs[0] == outputs[1]


def test_closing_early_leaves_no_worker_running(four_workers):
    running = threading.Event()

    def work(r):
        running.set()
        time.sleep(0.01)
        return r

    results = base.map_tensors(work, list(range(50)))
    assert next(results) == 0
    results.close()  # the consumer stops (e.g. it raised): the pool shuts down after the tasks in flight
    time.sleep(0.05)
    assert not [t for t in threading.enumerate() if t.name.startswith("shrinkray-tensor")]

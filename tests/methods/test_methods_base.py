"""map_tensors: per-tensor work on threads, results in order, a bounded number of results held at once."""

from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from shrinkray.methods import base


@pytest.fixture
def four_workers(monkeypatch):
    monkeypatch.setattr(base, "MAX_TENSOR_WORKERS", 4)
    monkeypatch.setattr(base, "usable_cores", lambda: 4)


def test_results_come_back_in_order_even_when_later_work_finishes_first(four_workers):
    refs = list(range(12))
    later_done = {r: threading.Event() for r in refs}

    def work(r):
        if r % 4 == 0 and r + 1 in later_done:  # the first of each round of four waits for the next one
            assert later_done[r + 1].wait(timeout=10), f"item {r + 1} never finished while {r} was running"
        later_done[r].set()
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


class CountingPool(ThreadPoolExecutor):
    """A ThreadPoolExecutor that counts submit() calls: work handed to the pool, run or not yet."""

    submitted: list[int] = []

    def submit(self, fn, *args, **kwargs):
        CountingPool.submitted.append(args[0])
        return super().submit(fn, *args, **kwargs)


@pytest.fixture
def counting_pool(monkeypatch):
    CountingPool.submitted = []
    monkeypatch.setattr(base, "ThreadPoolExecutor", CountingPool)
    return CountingPool.submitted


def test_at_most_one_result_per_worker_is_started_ahead_of_the_consumer(four_workers, counting_pool):
    """map_tensors only submits inside next(), so after each next() the count is exact, whatever the timing."""
    results = base.map_tensors(lambda r: r, list(range(40)))
    assert counting_pool == []  # a generator: nothing happens before the first next()
    assert next(results) == 0
    assert counting_pool == list(range(5))  # one per worker, plus the one replacing the result just taken
    assert next(results) == 1
    assert counting_pool == list(range(6))
    assert list(results) == list(range(2, 40))
    assert counting_pool == list(range(40))  # each item submitted once


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


def test_closing_early_leaves_no_worker_running(four_workers, counting_pool):
    finished = []

    def work(r):
        time.sleep(0.01)  # still running when the consumer stops
        finished.append(r)
        return r

    results = base.map_tensors(work, list(range(50)))
    assert next(results) == 0
    results.close()  # the consumer stops (e.g. it raised): the pool shuts down after the tasks in flight
    # No waiting: leaving the pool's `with` block joined its threads before close() returned.
    assert not [t for t in threading.enumerate() if t.name.startswith("shrinkray-tensor")]
    assert counting_pool == list(range(5))  # nothing new was submitted after the first result
    assert sorted(finished) == list(range(5))  # the tasks in flight ran to the end, no more


def test_only_a_method_whose_spec_asks_for_it_receives_the_runs_context():
    import pickle

    from shrinkray.measure.results import CompareSettings

    got = []
    with_context = base.MethodSpec(
        name="t-ctx", title="t", summary="t", options_type=base.TensorSelection,
        apply=lambda model, options, context: got.append(context) or "made", candidates=lambda r, o: r,
        uses_context=True,
    )  # fmt: skip
    without = dataclasses.replace(with_context, apply=lambda model, options: got.append("none") or "made",
                                  uses_context=False)  # fmt: skip
    mine = base.RunContext(CompareSettings(inputs_path="mine.npz"), inputs=object())
    assert with_context.run(None, None, mine) == "made" and got[-1] is mine
    with_context.run(None, None)
    assert isinstance(got[-1], base.RunContext) and got[-1].judging_settings() == CompareSettings()  # the defaults
    without.run(None, None, mine)
    assert got[-1] == "none"
    sent = pickle.loads(pickle.dumps(mine))  # to a worker: the settings go, the samples are derived there
    assert sent.settings.inputs_path == "mine.npz" and sent.inputs is None


def test_a_large_tensor_is_worked_on_with_nothing_else_in_flight(four_workers):
    """Two large tensors' temporaries at once set compare's peak: one of ALONE_BYTES or more runs alone."""

    @dataclasses.dataclass(frozen=True)
    class Ref:
        name: str
        nbytes: int

    big = base.ALONE_BYTES
    refs = [Ref("a", 10), Ref("b", 10), Ref("big", big), Ref("c", 10), Ref("d", 10), Ref("huge", 2 * big), Ref("e", 1)]
    running, overlaps, lock = set(), [], threading.Lock()

    def work(ref):
        with lock:
            running.add(ref.name)
            overlaps.append(frozenset(running))
        time.sleep(0.02)
        with lock:
            running.discard(ref.name)
        return ref.name

    assert list(base.map_tensors(work, refs)) == [r.name for r in refs]
    assert all(len(seen) == 1 for seen in overlaps if {"big", "huge"} & seen), overlaps
    assert any(len(seen) > 1 for seen in overlaps)  # the small ones still share the workers

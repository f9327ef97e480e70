"""Per-visitor fairness (issue 27): runs taken round-robin across visitors, a cap on each visitor's live runs,
the store recording each run's visitor (older stores migrated), and signed visitor cookies.

Every assertion is about order and decisions, none about time.
"""

from __future__ import annotations

import os
import sqlite3
import threading

import pytest

from shrinkray.io.limits import Limits
from shrinkray.runs.fairness import LOCAL, TooManyRuns, fair_order, too_many_runs
from shrinkray.runs.queue import DONE, QUEUED, RUNNING, LocalQueue
from shrinkray.runs.store import RunStore, StoreNotPrivate
from shrinkray.runs.visitors import KEY_FILE, VisitorKeys

WAIT = 20


def in_place(fn, *args, what, limits, progress, partial, cancel, **kwargs):
    return fn(*args, **kwargs)


class Recorder:
    """Fake jobs that note the order they start in and end when the test releases them, one at a time."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.started = threading.Condition()
        self.release: dict[str, threading.Event] = {}

    def job(self, name: str):
        self.release[name] = threading.Event()

        def run():
            with self.started:
                self.order.append(name)
                self.started.notify_all()
            assert self.release[name].wait(WAIT)
            return name

        return run

    def wait_started(self, count: int) -> None:
        with self.started:
            assert self.started.wait_for(lambda: len(self.order) >= count, WAIT), self.order


# ---------------------------------------------------------------------------------------------- the rule


def test_the_visitor_with_fewest_running_then_least_recently_served_goes_next():
    waiting = [("a", 1), ("a", 2), ("a", 3), ("a", 4), ("b", 1)]
    visitor = lambda j: j[0]  # noqa: E731
    assert fair_order(waiting, visitor, {"a": 1}) == [("b", 1), ("a", 1), ("a", 2), ("a", 3), ("a", 4)]
    assert fair_order(waiting, visitor, {}) == [("a", 1), ("b", 1), ("a", 2), ("a", 3), ("a", 4)]
    assert fair_order(waiting, visitor, {}, {"a": 7}) == [("b", 1), ("a", 1), ("a", 2), ("a", 3), ("a", 4)]
    line = [("a", 1), ("a", 2), ("b", 1), ("c", 1), ("b", 2)]
    assert fair_order(line, visitor, {}, {"b": 1}) == [("a", 1), ("c", 1), ("b", 1), ("a", 2), ("b", 2)]


def test_the_refusal_is_one_sentence():
    assert str(too_many_runs(2)) == "You already have 2 runs going; wait for one to finish or cancel it."
    assert str(too_many_runs(1)) == "You already have 1 run going; wait for one to finish or cancel it."


# ---------------------------------------------------------------------------------------------- the local queue


def test_a_second_visitors_run_is_taken_second_whatever_the_first_queued():
    queue = LocalQueue(workers=1, memory_budget=10**12, runner=in_place)
    recorder = Recorder()
    a = [queue.submit(recorder.job(f"a{i}"), visitor="a") for i in range(5)]
    b = queue.submit(recorder.job("b0"), visitor="b")
    recorder.wait_started(1)
    assert queue.status(b).state == QUEUED and queue.status(b).position == 1  # next, ahead of a1..a4
    assert [queue.status(j).position for j in a[1:]] == [2, 3, 4, 5]
    for step in range(6):
        recorder.wait_started(step + 1)
        recorder.release[recorder.order[-1]].set()
    assert queue.wait_idle(WAIT)
    assert recorder.order == ["a0", "b0", "a1", "a2", "a3", "a4"]
    assert {queue.status(j).state for j in [*a, b]} == {DONE}


def test_three_visitors_take_turns_and_arrival_breaks_ties():
    queue = LocalQueue(workers=1, memory_budget=10**12, runner=in_place)
    recorder = Recorder()
    blocker = queue.submit(recorder.job("x"), visitor="x")  # holds the slot while the line forms
    recorder.wait_started(1)
    for name in ("a0", "a1", "a2", "b0", "b1", "c0", LOCAL):
        queue.submit(recorder.job(name), visitor=name[0] if name != LOCAL else LOCAL)
    assert queue.status(blocker).state == RUNNING
    for step in range(8):
        recorder.wait_started(step + 1)
        recorder.release[recorder.order[-1]].set()
    assert queue.wait_idle(WAIT)
    assert recorder.order == ["x", "a0", "b0", "c0", LOCAL, "a1", "b1", "a2"]


# ---------------------------------------------------------------------------------------------- the cap and the store


def test_a_visitor_has_at_most_n_live_runs_and_local_is_not_capped(tmp_path):
    store = RunStore(tmp_path / "runs")
    first = [store.create(model_name="m", visitor="cookie:a", max_live=2) for _ in range(2)]
    with pytest.raises(TooManyRuns, match="You already have 2 runs going; wait for one to finish or cancel it"):
        store.create(model_name="m", visitor="cookie:a", max_live=2)
    assert len(list((tmp_path / "runs" / "runs").iterdir())) == 2  # the refused run left no folder
    store.create(model_name="m", visitor="cookie:b", max_live=2)  # another visitor is not held back
    for _ in range(3):
        store.create(model_name="m", visitor=LOCAL, max_live=2)
    store.fail(first[0], "cancelled")  # one ended: a place is free again
    again = store.create(model_name="m", visitor="cookie:a", max_live=2)
    assert store.get(again).visitor == "cookie:a" and store.live_runs("cookie:a") == 2
    assert Limits().max_live_runs == 2 and Limits.from_env({"SHRINKRAY_MAX_LIVE_RUNS": "5"}).max_live_runs == 5


def test_runs_start_refuses_a_third_live_run_of_one_visitor(tmp_path, monkeypatch):
    from helpers import sample_path

    import shrinkray
    from shrinkray.measure.results import CompareSettings
    from shrinkray.runs.service import Runs

    monkeypatch.delenv("SHRINKRAY_MAX_LIVE_RUNS", raising=False)
    queue = LocalQueue(workers=1, memory_budget=10**12, runner=lambda *a, cancel, **k: cancel.wait(WAIT))
    runs = Runs(RunStore(tmp_path / "runs"), queue=queue)
    loaded = shrinkray.load(sample_path("mlp"))
    settings = CompareSettings(methods=[("float16", {})], latency=False)
    ids = [runs.start(loaded, settings, visitor="cookie:a") for _ in range(2)]
    with pytest.raises(TooManyRuns):
        runs.start(loaded, settings, visitor="cookie:a")
    other = runs.start(loaded, settings, visitor="cookie:b")
    assert [runs.store.get(i).visitor for i in [*ids, other]] == ["cookie:a", "cookie:a", "cookie:b"]
    assert queue.status(other).position == 1  # b's only run is next, ahead of a's second
    for run_id in [*ids, other]:
        queue.cancel(run_id)
    assert queue.wait_idle(WAIT)


def test_an_older_store_without_visitors_is_migrated_and_its_rows_read_with_no_visitor(tmp_path):
    root = tmp_path / "runs"
    root.mkdir(mode=0o700)
    (root / "runs").mkdir(mode=0o700)
    db_path = root / "runs.sqlite3"
    os.close(os.open(db_path, os.O_WRONLY | os.O_CREAT, 0o600))
    old_id = "A" * 21 + "b"
    with sqlite3.connect(db_path) as db:  # the schema before visitors were recorded
        db.execute(
            "CREATE TABLE runs (id TEXT PRIMARY KEY, created REAL, updated REAL, status TEXT, step TEXT, fraction "
            "REAL, error TEXT, problem TEXT, hint TEXT, setting TEXT, model_name TEXT, model_sha256 TEXT, "
            "model_bytes INTEGER, kind TEXT, bytes INTEGER, settings BLOB, snapshot BLOB, result BLOB)"
        )
        db.execute("INSERT INTO runs (id, created, updated, status, step, fraction, error, problem, hint, setting, "
                   "model_name, model_sha256, model_bytes, kind, bytes) VALUES (?, strftime('%s','now'), "
                   "strftime('%s','now'), 'queued', '', 0, '', '', '', '', 'old', '', 0, 'Shrinking', 0)",
                   (old_id,))  # fmt: skip
    db.close()
    (root / "runs" / old_id).mkdir(mode=0o700)
    store = RunStore(root)
    assert store.get(old_id).visitor == "" and store.get(old_id).model_name == "old"
    new = store.create(model_name="new", visitor="cookie:a", max_live=2)
    assert store.get(new).visitor == "cookie:a" and store.live_runs("") == 1
    assert RunStore(root).get(new).visitor == "cookie:a"  # opening it again migrates nothing twice


# ---------------------------------------------------------------------------------------------- cookies


def test_a_signed_cookie_names_its_visitor_and_a_tampered_one_gets_a_new_identity(tmp_path):
    keys = VisitorKeys(tmp_path)
    assert (os.stat(tmp_path / KEY_FILE).st_mode & 0o777) == 0o600
    visitor_id, cookie = keys.new_cookie()
    assert keys.verify(cookie) == visitor_id
    assert keys.identify(cookie, "10.0.0.1").key == f"cookie:{visitor_id}"
    assert keys.identify(cookie, "10.0.0.1").set_cookie == ""
    mac = cookie.split(".", 1)[1]

    def other(char: str) -> str:  # a different character, whatever the random cookie holds there
        return "A" if char != "A" else "B"

    middle = len(visitor_id) + 1 + len(mac) // 2  # a character of the MAC whose 6 bits all count (the last has padding)
    tampered = [cookie[:middle] + other(cookie[middle]) + cookie[middle + 1:], other(cookie[0]) + cookie[1:],
                f"{'x' * 22}.{mac}", visitor_id, "", None, cookie + "." + mac, "a" * 500]  # fmt: skip
    for bad in tampered:
        assert keys.verify(bad) is None, bad
        fresh = keys.identify(bad, "10.0.0.1")
        assert fresh.key == "address:10.0.0.1"  # this session: its address; its browser gets a new cookie
        assert keys.verify(fresh.set_cookie) not in (None, visitor_id)
    assert keys.identify(None, None).key == "address:unknown"
    assert VisitorKeys(tmp_path).verify(cookie) == visitor_id  # the secret is kept: cookies outlive a restart
    (tmp_path / "other").mkdir()
    assert VisitorKeys(tmp_path / "other").verify(cookie) is None  # another server's secret: not its cookie


def test_a_visitors_secret_others_may_read_or_write_is_refused(tmp_path):
    VisitorKeys(tmp_path)
    os.chmod(tmp_path / KEY_FILE, 0o644)
    with pytest.raises(StoreNotPrivate, match="can be read by other users"):
        VisitorKeys(tmp_path)
    os.chmod(tmp_path / KEY_FILE, 0o666)
    with pytest.raises(StoreNotPrivate, match="writable by other users"):
        VisitorKeys(tmp_path)


# ---------------------------------------------------------------------------------------------- disk per visitor


def test_a_visitors_runs_hold_at_most_their_disk_quota_their_oldest_finished_runs_making_room(tmp_path):
    from shrinkray.errors import LimitExceededError
    from shrinkray.runs.store import RunNotFound

    store = RunStore(tmp_path / "runs")
    old = store.create(model_name="m", visitor="cookie:a")
    store.write_file(old, "model.onnx", b"x" * 600)
    store.fail(old, "failed")  # finished, keeping 600 bytes
    newer = store.create(model_name="m", visitor="cookie:a", planned_bytes=300, max_visitor_bytes=1000)
    assert store.get(old).status == "failed"  # 600 + 300 fit: nothing removed
    store.create(model_name="m", visitor="cookie:a", planned_bytes=400, max_visitor_bytes=1000)
    with pytest.raises(RunNotFound, match="was removed"):  # its visitor's oldest finished run made room
        store.get(old)
    assert store.visitor_bytes("cookie:a") == 700  # two live runs, counted at what they may write
    with pytest.raises(LimitExceededError, match="beside the 700 B your runs going already hold") as refused:
        store.create(model_name="m", visitor="cookie:a", planned_bytes=400, max_visitor_bytes=1000)
    assert "SHRINKRAY_MAX_VISITOR_DISK_BYTES" in str(refused.value)
    assert "Wait for a run to finish or cancel one" in str(refused.value)
    store.create(model_name="m", visitor="cookie:b", planned_bytes=400, max_visitor_bytes=1000)  # not b's problem
    store.create(model_name="m", visitor=LOCAL, planned_bytes=10**9, max_visitor_bytes=1000)  # the CLI: not capped
    kept = store.create(model_name="m", visitor="cookie:a")
    store.write_file(kept, "model.onnx", b"x" * 50)
    store.fail(kept, "failed")
    with pytest.raises(LimitExceededError):  # refused because of live runs: no finished run is removed for nothing
        store.create(model_name="m", visitor="cookie:a", planned_bytes=400, max_visitor_bytes=1000)
    assert store.get(kept).status == "failed"
    store.fail(newer, "cancelled")  # one ended (nothing written): room again
    store.create(model_name="m", visitor="cookie:a", planned_bytes=400, max_visitor_bytes=1000)
    assert Limits.from_env({"SHRINKRAY_MAX_VISITOR_DISK_BYTES": "2GiB"}).max_visitor_disk_bytes == 2 * 2**30


def test_runs_going_for_every_visitor_count_against_the_stores_cap(tmp_path):
    """Live and queued runs cannot be removed to make room, so together they may not pass the store's cap: a
    visitor's run that would is refused in one sentence; a run alone is left to the visitor's quota."""
    from shrinkray.errors import LimitExceededError

    store = RunStore(tmp_path / "runs", max_bytes=1000)
    alone = store.create(model_name="m", visitor="cookie:a", planned_bytes=5000)  # nothing else going: allowed
    store.fail(alone, "cancelled")
    store.create(model_name="m", visitor="cookie:a", planned_bytes=700)
    with pytest.raises(LimitExceededError, match=r"space for runs \(1000 B\) is taken by the runs going now \(700 B\)"
                       ) as refused:  # fmt: skip
        store.create(model_name="m", visitor="cookie:b", planned_bytes=400)
    assert "Try again in a few minutes" in str(refused.value)
    store.create(model_name="m", visitor="cookie:b", planned_bytes=300)  # fits beside a's
    store.create(model_name="m", visitor=LOCAL, planned_bytes=10**6)  # the CLI and API: not capped

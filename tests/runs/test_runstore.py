"""The run store: records and files by unguessable id, atomic files, limits and cleanup, clear messages."""

from __future__ import annotations

import json
import os
import pickle
import stat
import time
from pathlib import Path

import pytest

from shrinkray.runs.hooks import run_hooks
from shrinkray.runs.store import (
    RunNotFound,
    RunStore,
    StoreNotPrivate,
    atomic_write,
    is_run_id,
    new_run_id,
    safe_file_name,
)


@pytest.fixture
def store(tmp_path):
    return RunStore(tmp_path / "runs", max_bytes=10_000, max_age_s=3600)


def _done(store: RunStore, payload: bytes = b"x" * 3000, name: str = "m") -> str:
    run_id = store.create(model_name=name, model_sha256="ab", model_bytes=len(payload), settings={"levels": 16})
    store.write_file(run_id, "variants/a.onnx", payload)
    store.finish(run_id, {"result": name})
    return run_id


def test_ids_are_unguessable_and_checked_before_any_lookup(store):
    ids = {new_run_id() for _ in range(200)}
    assert len(ids) == 200 and all(is_run_id(i) and len(i) == 22 for i in ids)
    for bad in ["", "x", "../../etc/passwd", "a" * 23, "a" * 21 + "/", None, 5]:
        assert not is_run_id(bad)
    with pytest.raises(RunNotFound, match="not valid"):
        store.get("../../etc/passwd")
    with pytest.raises(RunNotFound, match="No run with this id"):
        store.get(new_run_id())


def test_a_run_keeps_its_settings_status_snapshot_and_result(store):
    run_id = store.create(model_name="mlp", model_sha256="cafe", model_bytes=123, settings={"levels": 16})
    record = store.get(run_id)
    assert (record.status, record.model_name, record.model_sha256, record.settings) == ("queued", "mlp", "cafe",
                                                                                        {"levels": 16})  # fmt: skip
    assert record.live and record.folder.is_dir() and record.result is None
    store.update(run_id, status="running", step="Checking parity", fraction=0.4)
    store.set_snapshot(run_id, {"variants": 1})
    record = store.get(run_id)
    assert (record.status, record.step, record.fraction, record.snapshot) == ("running", "Checking parity", 0.4,
                                                                              {"variants": 1})  # fmt: skip
    store.finish(run_id, {"variants": 4})
    store.set_snapshot(run_id, {"variants": 2})  # a late snapshot never overwrites the end
    record = store.get(run_id)
    assert (record.status, record.result, record.snapshot, record.fraction) == ("done", {"variants": 4}, None, 1.0)
    with pytest.raises(ValueError):
        store.update(run_id, status="exploded")
    with pytest.raises(ValueError):
        store.update(run_id, bytes=0)


def test_a_finished_result_can_be_amended_but_a_live_one_cannot(store):
    live = store.create(model_name="m")
    assert store.amend_result(live, lambda r: {"changed": True}) is False
    assert store.get(live).result is None
    done = _done(store)
    assert store.amend_result(done, lambda r: {**r, "browser": ["chromium"]}) is True
    assert store.get(done).result == {"result": "m", "browser": ["chromium"]}


def test_files_are_written_whole_or_not_at_all(store, monkeypatch):
    run_id = store.create(model_name="m")
    path = store.write_file(run_id, "variants/a.onnx", b"complete")
    assert path.read_bytes() == b"complete"

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        store.write_file(run_id, "variants/b.onnx", b"half")
    monkeypatch.undo()
    names = sorted(p.name for p in (store.folder(run_id) / "variants").iterdir())
    assert names == ["a.onnx"]  # no b.onnx, no temporary file
    with pytest.raises(RunNotFound):
        store.file_path(run_id, "../../runs.sqlite3")
    with pytest.raises(RunNotFound, match="no longer kept"):
        store.file_path(run_id, "variants/b.onnx")


def test_a_failed_or_killed_run_leaves_no_partial_files_and_says_so(store):
    run_id = store.create(model_name="m")
    folder = store.folder(run_id)
    atomic_write(folder / "model.onnx", b"model")
    (folder / "variants" / ".shrinkray-stage-1").mkdir(parents=True)  # a writer killed with SIGKILL
    (folder / "variants" / ".shrinkray-stage-1" / "v.onnx").write_bytes(b"half")
    (folder / "variants" / "done.onnx").write_bytes(b"whole but the run did not finish")
    (folder / ".tmp-abc").write_bytes(b"half")
    store.fail(run_id, "cancelled", error="Shrinking and measuring was cancelled", problem="cancelled")
    record = store.get(run_id)
    assert record.status == "cancelled" and record.error == "Shrinking and measuring was cancelled"
    assert sorted(p.name for p in folder.iterdir()) == ["model.onnx"]


def test_recover_marks_runs_of_a_gone_process_failed(store):
    live = store.create(model_name="m")
    store.update(live, status="running")
    queued = store.create(model_name="m")
    finished = _done(store)
    assert sorted(store.recover()) == sorted([live, queued])
    for run_id in (live, queued):
        record = store.get(run_id)
        assert record.status == "failed" and "server restarted" in record.error
    assert store.get(finished).status == "done"


def test_old_runs_expire_with_a_message(store):
    old = _done(store)
    assert store.cleanup(now=time.time() + 3599) == []
    assert store.cleanup(now=time.time() + 3601) == [old]
    assert not store.folder(old).exists()
    with pytest.raises(RunNotFound, match=r"removed on .* \(runs are kept 0.0416667 days\)"):
        store.get(old)


def test_the_size_limit_removes_the_oldest_finished_runs_never_live_ones(store):
    live = store.create(model_name="live")
    store.write_file(live, "model.onnx", b"y" * 4000)
    first = _done(store, b"x" * 2500, name="first")
    second = _done(store, b"x" * 2500, name="second")
    third = _done(store, b"x" * 2500, name="third")  # 4,000 live + 3 x 2,500+ > 10,000: the oldest finished goes
    assert not store.exists(first) and store.exists(second) and store.exists(third) and store.exists(live)
    assert store.total_bytes() <= store.max_bytes
    with pytest.raises(RunNotFound, match="space for kept runs"):
        store.get(first)
    huge = store.create(model_name="huge")
    store.write_file(huge, "variants/a.onnx", b"z" * 20_000)
    store.finish(huge, {})
    with pytest.raises(RunNotFound, match="larger than the space"):
        store.get(huge)


def test_an_expired_run_is_removed_when_asked_for(tmp_path):
    store = RunStore(tmp_path, max_bytes=10**9, max_age_s=0.001)
    run_id = _done(store)
    time.sleep(0.01)  # past the age limit (the assertion is about the message, not the time)
    with pytest.raises(RunNotFound, match="removed"):
        store.get(run_id)


def test_the_root_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SHRINKRAY_RUNS_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("SHRINKRAY_RUNS_MAX_BYTES", "2GiB")
    monkeypatch.setenv("SHRINKRAY_RUNS_MAX_AGE_DAYS", "1.5")
    store = RunStore()
    assert store.root == tmp_path / "elsewhere" and (tmp_path / "elsewhere" / "runs.sqlite3").is_file()
    assert (store.max_bytes, store.max_age_s) == (2 * 2**30, 1.5 * 86400)
    assert oct(store.runs_dir.stat().st_mode & 0o777) == "0o700"


def test_a_store_that_cannot_keep_a_run_is_one_sentence_and_nothing_starts(tmp_path, monkeypatch):
    import shrinkray
    from shrinkray.errors import ShrinkRayError
    from shrinkray.runs.queue import LocalQueue
    from shrinkray.runs.service import Runs

    store = RunStore(tmp_path / "runs")
    queue = LocalQueue(workers=1, runner=lambda *a, **k: None)

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "create", full)
    loaded = shrinkray.load(Path(__file__).resolve().parents[2] / "sample_models" / "mlp.onnx")
    with pytest.raises(ShrinkRayError, match=r"could not keep this run \(No space left on device\)"):
        Runs(store, queue).start(loaded, None)
    assert queue.counts() == (0, 0)


def test_a_run_the_queue_refuses_leaves_no_record_or_model_copy(tmp_path):
    """'The server is busy' (a full queue): the run's id was never handed out, so nothing of it may stay (a live
    record no job serves would keep its model copy, and count against the space, until the server restarts)."""
    import shrinkray
    from shrinkray.errors import ShrinkRayError
    from shrinkray.runs.queue import LocalQueue
    from shrinkray.runs.service import Runs

    store = RunStore(tmp_path / "runs")
    queue = LocalQueue(workers=1, runner=lambda *a, **k: None, max_waiting=0)  # refuses every job
    loaded = shrinkray.load(Path(__file__).resolve().parents[2] / "sample_models" / "mlp.onnx")
    runs = Runs(store, queue)
    with pytest.raises(ShrinkRayError, match="The server is busy"):
        runs.start(loaded, None)
    assert list(store.runs_dir.iterdir()) == []
    with store._db() as db:
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners")
def test_a_store_folder_another_user_owns_is_refused_with_a_message(tmp_path, monkeypatch):
    """A folder someone else made first (the temp fallback's name is predictable) would let them feed the server
    records and files. The store says so instead of opening it."""
    from shrinkray.errors import ShrinkRayError

    RunStore(tmp_path / "mine")  # our own folder is fine
    monkeypatch.setattr(os, "getuid", lambda: os.stat(tmp_path).st_uid + 1)
    with pytest.raises(ShrinkRayError, match="belongs to another user") as caught:
        RunStore(tmp_path / "mine")
    assert "SHRINKRAY_RUNS_DIR" in caught.value.hint


def test_a_snapshot_or_progress_the_store_cannot_write_does_not_fail_the_run(tmp_path, monkeypatch):
    """A store busy past its timeout (replicas) while a snapshot is written: the run goes on and finishes (the
    worker's callbacks raising would have failed it as 'an unexpected OperationalError')."""
    import sqlite3

    from shrinkray.runs.queue import LocalQueue
    from shrinkray.runs.service import Runs

    store = RunStore(tmp_path / "runs")

    def locked(*args, **kwargs):
        raise sqlite3.OperationalError("database is locked")

    def in_place(fn, *args, what, limits, progress, partial, cancel, **kwargs):
        progress("step", 0.5)
        partial({"variants": 1})
        return fn(*args, **kwargs)

    runs = Runs(store, LocalQueue(workers=1, runner=in_place))
    run_id = store.create(model_name="m")
    monkeypatch.setattr(store, "set_snapshot", locked)
    started = store.update
    monkeypatch.setattr(store, "update", lambda rid, **f: started(rid, **f) if "status" in f else locked())
    runs.queue.submit(lambda: {"result": 1}, hooks=run_hooks(runs.store, run_id), job_id=run_id)
    assert runs.queue.wait_idle(30)
    assert runs.queue.status(run_id).state == "done"
    assert store.get(run_id).status == "done" and store.get(run_id).result == {"result": 1}


def test_a_late_running_never_replaces_an_end(store):
    """A replica settled a cancel while a worker was starting the job: the worker's 'running' comes after."""
    run_id = store.create(model_name="m")
    store.update(run_id, status="running", step="Starting")
    assert store.get(run_id).status == "running"
    store.fail(run_id, "cancelled", error="The run was cancelled")
    store.update(run_id, status="running", step="Starting", fraction=0.0)
    assert store.get(run_id).status == "cancelled"


def test_a_long_upload_name_keeps_its_suffix_in_the_run():
    """Kept inputs are read by their suffix (image, WAV, .npy vs .npz): truncating a long name must not drop it."""
    long = "a photo of my cat on the sofa taken with a phone in the evening light, uncropped and unedited.JPEG"
    kept = safe_file_name(long)
    assert len(kept) <= 80 and kept.endswith(".JPEG") and kept.startswith("a_photo_of_my_cat")
    assert safe_file_name("x" * 100 + ".npy").endswith(".npy")
    assert safe_file_name("../../etc/passwd") == "etc_passwd" and safe_file_name("short.wav") == "short.wav"


def test_a_finished_run_that_fits_alone_is_kept_while_live_runs_fill_the_space(store):
    """The limit is 10,000 bytes: another user's live run holds 8,000, this run 3,000. Removing the run its user
    is waiting for ("its files are larger than the space for kept runs") would be wrong: it fits alone."""
    live = store.create(model_name="live")
    store.write_file(live, "model.onnx", b"x" * 8000)
    run_id = _done(store)
    assert store.get(run_id).status == "done"
    assert store.get(live).status == "queued"
    too_big = store.create(model_name="big")
    store.write_file(too_big, "variants/a.onnx", b"x" * 12_000)
    store.finish(too_big, {"result": "big"})
    with pytest.raises(RunNotFound, match="larger than the space"):
        store.get(too_big)


# ---------------------------------------------------------------------------------------------- no code in the store


class _Planted:
    """Unpickling this creates ``marker``: what a planted record could do, done harmlessly."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _plant_pickles(store: RunStore, marker: Path, status: str = "done") -> str:
    """A run whose record holds pickles, as an older version (or someone who could write the database) left it."""
    run_id = store.create(model_name="planted")
    store.write_file(run_id, "model.onnx", b"not read")
    blob = pickle.dumps(_Planted(marker))
    with store._db() as db:
        db.execute("UPDATE runs SET status = ?, settings = ?, snapshot = ?, result = ? WHERE id = ?",
                   (status, blob, blob, blob, run_id))  # fmt: skip
    return run_id


def test_the_plant_would_run_code_if_it_were_unpickled(tmp_path):
    """The check behind the tests below: loading the planted pickle does create its marker."""
    marker = tmp_path / "ran"
    pickle.loads(pickle.dumps(_Planted(marker))).close()  # noqa: S301 - the test's own plant
    assert marker.exists()


def test_records_are_json_text_and_an_older_versions_pickles_are_never_loaded(store, tmp_path):
    from shrinkray.runs.service import Runs

    run_id = _done(store)
    with store._db() as db:
        settings, result = db.execute("SELECT settings, result FROM runs WHERE id = ?", (run_id,)).fetchone()
    assert isinstance(settings, str) and json.loads(settings)["data"] == {"levels": 16}
    assert json.loads(result)["schema"] == 1

    marker = tmp_path / "ran"
    old = _plant_pickles(store, marker)
    record = store.get(old)  # the record's plain columns are read: status, names, sizes
    assert record.status == "done" and record.model_name == "planted"
    for part in ("settings", "snapshot", "result"):
        with pytest.raises(RunNotFound) as caught:
            getattr(record, part)
        assert str(caught.value) == ("This run was kept by an older version of Shrink Ray Studio and cannot be "
                                     "shown. Start it again.")  # fmt: skip
    with pytest.raises(RunNotFound, match="older version"):
        Runs(store, queue=_NoQueue()).comparison(old)
    with pytest.raises(RunNotFound, match="older version"):
        store.amend_result(old, lambda r: r)
    assert not marker.exists()


def test_a_record_that_does_not_fit_its_types_reads_as_another_version(store):
    run_id = _done(store)
    with store._db() as db:
        db.execute("UPDATE runs SET settings = ? WHERE id = ?",
                   ('{"format": "shrinkray-data", "schema": 1, "type": "CompareSettings", "data": {"runs": "x"}}',
                    run_id))  # fmt: skip
    with pytest.raises(RunNotFound, match="kept by another version of Shrink Ray Studio and cannot be shown"):
        _ = store.get(run_id).settings


class _NoQueue:
    def status(self, run_id):
        return None


def _state(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every path under ``root`` with its mode and (files) bytes: refusing must change none of it."""
    out = {}
    for path in sorted(root.rglob("*")):
        info = os.lstat(path)
        out[str(path.relative_to(root))] = (info.st_mode, path.read_bytes() if path.is_file() else None)
    return out


@pytest.fixture
def planted(tmp_path):
    """A store with a run whose record holds pickles; returns (root, run id, marker)."""
    root = tmp_path / "store"
    marker = tmp_path / "ran"
    run_id = _plant_pickles(RunStore(root), marker)
    return root, run_id, marker


posix = pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners and modes")


@posix
@pytest.mark.parametrize("part, mode, words", [
    ("", 0o777, "The run store folder {path} is writable by other users. Make it private (chmod 700 {path}) or set "
                "SHRINKRAY_RUNS_DIR to a folder of your own."),
    ("", 0o720, "The run store folder {path} is writable by other users"),
    ("runs", 0o757, "The run store's folder of runs {path} is writable by other users. Make it private (chmod 700"),
    ("runs.sqlite3", 0o666, "The run store's database {path} is writable by other users. Make it private (chmod 600 "
                            "{path})"),
])  # fmt: skip
def test_a_store_others_may_write_is_refused_before_its_mode_changes_or_anything_is_read(planted, part, mode, words):
    root, _run_id, marker = planted
    path = root / part if part else root
    os.chmod(path, mode)
    before = _state(root)
    with pytest.raises(StoreNotPrivate) as caught:
        RunStore(root)
    assert str(caught.value).startswith(words.format(path=path)), str(caught.value)
    assert stat.S_IMODE(os.lstat(path).st_mode) == mode  # no chmod before the check
    assert _state(root) == before and not marker.exists()  # nothing opened, replayed or unpickled


@posix
def test_a_write_ahead_log_others_may_write_is_refused(planted):
    """SQLite replays a -wal file into the database when it opens it: a planted one is a planted record."""
    root, _run_id, marker = planted
    wal = root / "runs.sqlite3-wal"
    wal.write_bytes(b"planted")
    os.chmod(wal, 0o666)
    with pytest.raises(StoreNotPrivate, match="database .*-wal is writable by other users"):
        RunStore(root)
    assert wal.read_bytes() == b"planted" and not marker.exists()


@posix
def test_a_store_folder_or_database_that_is_a_link_is_refused(planted, tmp_path):
    root, _run_id, marker = planted
    link = tmp_path / "link"
    link.symlink_to(root)
    with pytest.raises(StoreNotPrivate, match=f"The run store folder {link} is a symbolic link. Remove the link, or "
                                              "set SHRINKRAY_RUNS_DIR"):  # fmt: skip
        RunStore(link)
    (root / "runs.sqlite3").rename(tmp_path / "elsewhere.sqlite3")
    (root / "runs.sqlite3").symlink_to(tmp_path / "elsewhere.sqlite3")
    with pytest.raises(StoreNotPrivate, match="database .* is a symbolic link"):
        RunStore(root)
    assert not marker.exists()


@posix
@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="chown to another user needs root")
@pytest.mark.parametrize("part", ["", "runs", "runs.sqlite3"])
def test_a_store_another_user_owns_is_refused(planted, part):
    """Another owner for real (the tests run as root: chown to nobody); the getuid test above covers other users."""
    root, _run_id, marker = planted
    path = root / part if part else root
    os.chown(path, 65534, 65534)
    before = _state(root)
    with pytest.raises(StoreNotPrivate, match=f"{path} belongs to another user. Set SHRINKRAY_RUNS_DIR to a folder"):
        RunStore(root)
    assert _state(root) == before and not marker.exists()


@posix
def test_a_run_folder_that_is_a_link_or_not_private_is_refused_before_it_is_read(tmp_path):
    from shrinkray.runs.service import Runs

    store = RunStore(tmp_path / "store")
    marker = tmp_path / "ran"
    linked, open_to_all, foreign = (_plant_pickles(store, marker) for _ in range(3))
    elsewhere = tmp_path / "elsewhere"
    (store.runs_dir / linked).rename(elsewhere)
    (store.runs_dir / linked).symlink_to(elsewhere)
    os.chmod(store.runs_dir / open_to_all, 0o777)
    cases = [(linked, "is a symbolic link"), (open_to_all, "is writable by other users")]
    if os.getuid() == 0:
        os.chown(store.runs_dir / foreign, 65534, 65534)
        cases.append((foreign, "belongs to another user"))
    runs = Runs(store, queue=_NoQueue())
    for run_id, words in cases:
        folder = store.runs_dir / run_id
        expected = f"This run's folder {folder} {words}. Start a new run on the Shrink page."
        for read in (store.get, store.folder, runs.view, runs.comparison, lambda i: store.file_path(i, "model.onnx")):
            with pytest.raises(RunNotFound) as caught:
                read(run_id)
            assert str(caught.value) == expected
    assert not marker.exists()
    store.discard(linked, "test")  # removing the run removes the link, never what it points at
    assert not (store.runs_dir / linked).is_symlink() and (elsewhere / "model.onnx").read_bytes() == b"not read"


@posix
def test_a_new_store_is_private_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        store = RunStore(tmp_path / "new" / "store")
        run_id = store.create(model_name="m")
        store.finish(run_id, {"result": 1})
        RunStore(store.root)  # opened again: its own files pass the checks
    finally:
        os.umask(old)
    for path, mode in ((store.root, 0o700), (store.runs_dir, 0o700), (store.runs_dir / run_id, 0o700),
                       (store.db_path, 0o600)):  # fmt: skip
        assert stat.S_IMODE(os.lstat(path).st_mode) == mode, path
    for extra in store.root.glob("runs.sqlite3-*"):
        assert not stat.S_IMODE(os.lstat(extra).st_mode) & 0o077, extra

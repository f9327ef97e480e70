"""Runs end to end through the capped worker: snapshots cross the process boundary, a finished run keeps its
variant files and reopens by id, a cancelled one leaves no variant files and says so."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from helpers import sample_path
from hostile.runtime_bombs import loop_bomb

import shrinkray
from shrinkray.measure.results import CompareSettings
from shrinkray.runs import sandbox
from shrinkray.runs.queue import LocalQueue
from shrinkray.runs.service import Runs, _compare_supports
from shrinkray.runs.store import RunStore

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parents[1]
QUICK = CompareSettings(methods=[("weights-int8", {}), ("float16", {})], latency=False, brotli_quality=1)
WAIT = 240


def test_the_worker_sends_snapshots_and_progress_to_the_caller(monkeypatch):
    import runfakes

    monkeypatch.setenv("PYTHONPATH", str(TESTS))  # the worker imports the job by name
    seen, steps = [], []
    result = sandbox.run_capped(runfakes.snapshots, 3, progress=lambda s, f: steps.append(s), partial=seen.append)
    assert result == 3
    assert seen == [{"variants": 1}, {"variants": 2}, {"variants": 3}]
    assert steps == ["step 0", "step 1", "step 2"]


class CountingStore(RunStore):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.snapshots: list = []
        self.running = threading.Event()

    def set_snapshot(self, run_id, snapshot) -> None:
        self.snapshots.append(snapshot)
        super().set_snapshot(run_id, snapshot)

    def update(self, run_id, **fields) -> None:
        super().update(run_id, **fields)
        if fields.get("status") == "running":
            self.running.set()


def test_a_run_keeps_its_files_and_reopens_by_id(tmp_path):
    store = CountingStore(tmp_path)
    runs = Runs(store, LocalQueue(workers=1))
    loaded = shrinkray.load(sample_path("cnn"))
    run_id = runs.start(loaded, QUICK)
    assert runs.view(run_id).status in ("queued", "running")
    assert runs.queue.wait_idle(WAIT)
    view = runs.view(run_id)
    assert view.status == "done", view.record.error
    record = view.record
    assert record.model_path.is_file() and record.model_sha256 == loaded.sha256 and record.snapshot is None
    comparison = runs.comparison(run_id)
    assert [r.key for r in comparison.variants] == ["weights-int8", "float16"]
    for result in comparison.variants:
        assert result.model is None and Path(result.file).is_file()
        assert Path(result.file).parent == record.folder / "variants"
        validate_file = shrinkray.load(result.file)
        assert validate_file.file_bytes < loaded.file_bytes
    assert comparison.variants[0].sizes.raw < comparison.original.sizes.raw
    if _compare_supports("on_partial"):  # the engine's hook (issue 12): a snapshot after each measured step
        assert len(store.snapshots) >= 3
        assert all(r.model is None for s in store.snapshots for r in s.all)
        assert store.snapshots[-1].variants[0].sizes is not None


def test_a_cancelled_run_leaves_no_variant_files_and_says_so(tmp_path):
    store = CountingStore(tmp_path)
    runs = Runs(store, LocalQueue(workers=1))
    loaded = shrinkray.load(loop_bomb().SerializeToString(), name="loop")
    settings = CompareSettings(methods=[("float16", {})], latency=False, brotli_quality=1)
    run_id = runs.start(loaded, settings)
    assert store.running.wait(WAIT)
    assert runs.cancel(run_id)
    assert runs.queue.wait_idle(WAIT)
    record = runs.view(run_id).record
    assert record.status == "cancelled" and "cancelled" in record.error
    assert not (record.folder / "variants").exists()
    assert [p.name for p in record.folder.iterdir()] == ["model.onnx"]
    assert not runs.cancel(run_id)  # already over


def test_a_model_loaded_as_its_graph_runs_from_links_to_its_files_and_streams(tmp_path):
    """An upload too large to load whole (the app keeps its graph): its run links the graph's files instead of
    copying them, and compares the methods that stream in them."""
    from tests.io.test_large_models import tiny_external_model

    path = tiny_external_model(tmp_path / "upload")
    loaded = shrinkray.load(path, lazy_external=True)
    assert loaded.is_lazy
    runs = Runs(RunStore(tmp_path / "store"), LocalQueue(workers=1))
    run_id = runs.start(loaded, QUICK)
    assert runs.queue.wait_idle(WAIT)
    view = runs.view(run_id)
    assert view.status == "done", view.record.error
    data = view.record.folder / "model.onnx.data"
    assert data.stat().st_ino == (path.parent / "model.onnx.data").stat().st_ino  # a link, not a second copy
    comparison = runs.comparison(run_id)
    assert [r.key for r in comparison.variants] == ["weights-int8", "float16"]
    for result in comparison.variants:
        assert result.ok and result.parity is not None, result.error
        assert "tensor by tensor" in " ".join(result.notes)
        assert Path(result.file).with_name(Path(result.file).name + ".data").is_file()
    assert (path.parent / "model.onnx.data").is_file()  # the upload's own files stay


def test_a_repeat_of_a_kept_model_shares_its_file_and_the_store_counts_it_once(tmp_path):
    """The same upload run twice (issue 27: 'a repeat upload adds no second copy'): the second run links the
    first run's model.onnx (found by the model's hash), each folder counts half of it, and removing the first
    run leaves the second's model whole."""
    from shrinkray.runs.store import folder_bytes

    store = RunStore(tmp_path / "store")
    runs = Runs(store, LocalQueue(workers=1))
    loaded = shrinkray.load(sample_path("cnn"))
    first = runs.start(loaded, QUICK)
    second = runs.start(shrinkray.load(sample_path("cnn")), QUICK)
    assert runs.queue.wait_idle(WAIT)
    a, b = (runs.view(rid).record for rid in (first, second))
    assert a.status == b.status == "done", (a.error, b.error)
    assert a.model_path.stat().st_ino == b.model_path.stat().st_ino and b.model_path.stat().st_nlink == 2
    size = b.model_path.stat().st_size
    variants = sum(p.stat().st_size for p in (b.folder / "variants").rglob("*") if p.is_file())
    assert folder_bytes(b.folder) <= size // 2 + variants + (1 << 16)  # its half of the model, its variants, inputs
    store.discard(first, "removed by the test")
    assert not a.folder.exists() and b.model_path.stat().st_nlink == 1 and b.model_path.stat().st_size == size
    assert shrinkray.load(b.model_path).model.graph == loaded.model.graph
    assert runs.comparison(second).variants[0].ok


def test_a_model_kept_the_other_way_is_written_again_not_linked(tmp_path):
    """A kept run holds a model's graph alone (it was loaded lazily); the same file loaded whole must not link
    that graph without its data: sizes differ, so the whole model is saved."""
    from shrinkray.runs.service import _linked_from, _model_files

    loaded = shrinkray.load(sample_path("cnn"))
    previous = tmp_path / "previous"
    previous.mkdir()
    (previous / "model.onnx").write_bytes(b"a graph alone: far smaller than the whole model")
    target = tmp_path / "new"
    target.mkdir()
    assert not _linked_from(previous, target, _model_files(loaded))
    assert list(target.iterdir()) == []


@pytest.mark.parametrize(("name", "refused"), [("variants/w.bin", True), ("inputs", True), ("tokenizer.json", True),
                                               ("weights/inputs", False), ("model.onnx.data", False)])  # fmt: skip
def test_a_kept_models_data_file_may_not_take_a_place_a_run_keeps_for_itself(tmp_path, name, refused):
    """A run folder holds model.onnx, inputs/, variants/ and the tokenizer beside the model's data files: a
    data file at one of those places is refused (variants/ was let through before); elsewhere it is kept."""
    from types import SimpleNamespace

    from shrinkray.errors import ShrinkRayError
    from shrinkray.runs.service import _keep_files

    upload = tmp_path / "upload"
    (upload / name).parent.mkdir(parents=True, exist_ok=True)
    (upload / "model.onnx").write_bytes(b"graph")
    (upload / name).write_bytes(b"weights")
    loaded = SimpleNamespace(path=str(upload / "model.onnx"), external_base=str(upload), external_data_files=[name])
    run = tmp_path / "run"
    run.mkdir()
    if refused:
        with pytest.raises(ShrinkRayError, match="where a run keeps its own"):
            _keep_files(loaded, run / "model.onnx")
    else:
        _keep_files(loaded, run / "model.onnx")
        assert (run / name).read_bytes() == b"weights"

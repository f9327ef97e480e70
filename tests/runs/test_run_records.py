"""Real comparisons kept as JSON in the run store read back equal: the settings, the snapshot, the finished
comparison (with latency, with auto's details, with the visitor's browser runs attached), never a model."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import sample_path

from shrinkray.measure.browser import BrowserRun
from shrinkray.measure.results import CompareSettings
from shrinkray.runs.service import Runs, compare_run
from shrinkray.runs.store import RunStore

pytestmark = pytest.mark.slow

CASES = {
    "mlp, the default methods, latency off": ("mlp", CompareSettings(latency=False, brotli_quality=1)),
    "mlp, auto and weights-int8": ("mlp", CompareSettings(latency=False, brotli_quality=1,
                                                          methods=[("auto", {}), ("weights-int8", {})])),
    "cnn, float16, latency on": ("cnn", CompareSettings(brotli_quality=1, runs=3, latency_budget_s=0.5,
                                                        methods=[("float16", {"min_elements": 16, "op_block_list": ["Softmax"]})])),
}  # fmt: skip


class _NoQueue:
    def status(self, run_id):
        return None


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return Runs(RunStore(tmp_path_factory.mktemp("store") / "runs"), queue=_NoQueue())


def _keep(store: RunStore, name: str, settings: CompareSettings):
    """What a run does, without the queue: the model in the run's folder, the worker's compare_run, the end."""
    run_id = store.create(model_name=name, settings=settings)
    folder = store.folder(run_id)
    shutil.copyfile(sample_path(name), folder / "model.onnx")
    comparison = compare_run(str(folder / "model.onnx"), name, settings, str(folder))
    store.finish(run_id, comparison)
    return run_id, comparison


@pytest.mark.parametrize("case", CASES)
def test_a_real_comparison_reads_back_equal(runs, case):
    name, settings = CASES[case]
    store = runs.store
    run_id, comparison = _keep(store, name, settings)
    record = store.get(run_id)
    assert record.settings == settings
    back = record.result
    assert back == comparison and back is not comparison
    assert [type(v.parity).__name__ for v in back.all] == [type(v.parity).__name__ for v in comparison.all]
    if settings.latency:
        assert back.original.latency and back.original.latency == comparison.original.latency
    if any(m == "auto" for m, _ in settings.methods):
        assert back.get("auto").record.get("details", {}).get("precision_map")  # auto's details came back
    with store._db() as db:
        text = db.execute("SELECT result FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
    stored = json.loads(text)
    assert stored["type"] == "Comparison" and "model" not in stored["data"]["original"]
    assert all(v["file"].startswith("variants/") for v in stored["data"]["variants"] if v["error"] is None)
    shown = runs.comparison(run_id)  # what a page shows: the files as absolute paths in the run's folder
    assert all(Path(v.file).is_file() for v in shown.variants if v.ok)

    live = store.create(model_name=name, settings=settings)
    store.set_snapshot(live, replace(comparison, variants=comparison.variants[:1]))
    assert store.get(live).snapshot == replace(comparison, variants=comparison.variants[:1])


def test_the_visitors_browser_runs_travel_with_the_run_and_read_back_equal(runs):
    name, settings = CASES["mlp, the default methods, latency off"]
    run_id, comparison = _keep(runs.store, name, settings)
    variant = next(v for v in comparison.variants if v.ok and v.parity is not None)
    browser = [
        BrowserRun("original", user_agent="Chromium 140", threads=1, runtime_start_ms=120.0, transfer_ms=8.5,
                   transfer_bytes=2048, model_bytes=4096, content_encoding="gzip", session_ms=14.0,
                   first_run_ms=3.0, median_ms=0.4, runs=30, batch=1, served_by="compressed on the fly"),
        BrowserRun(variant.key, threads=1, median_ms=0.5, runs=30, batch=1, parity=variant.parity),
        BrowserRun("float16", error="Cast(-1) is not a registered function/op", stage="session"),
    ]  # fmt: skip
    assert runs.keep_browser_runs(run_id, browser)
    back = runs.store.get(run_id).result
    assert back.browser == browser and replace(back, browser=[]) == comparison

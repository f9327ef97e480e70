"""A visitor's past runs (issue 29): listed newest first with their headline, only their own; removed only by them."""

from __future__ import annotations

import pytest
from helpers import cached_sample

from shrinkray.measure.results import CompareSettings
from shrinkray.pipeline.compare import compare
from shrinkray.runs.service import Runs
from shrinkray.runs.store import RunNotFound, RunStore


class _NoQueue:
    def status(self, job_id):
        return None

    def cancel(self, job_id):
        return False


@pytest.fixture(scope="module")
def finished_comparison():
    comparison = compare(cached_sample("mlp"), CompareSettings(methods=[("weights-int8", {})], latency=False,
                                                               brotli_quality=1))  # fmt: skip
    for result in comparison.all:
        result.model = None  # as a run keeps it
    return comparison


def test_a_visitor_sees_their_own_runs_newest_first_with_their_headline(tmp_path, finished_comparison):
    runs = Runs(RunStore(tmp_path), queue=_NoQueue())
    store = runs.store
    first = store.create(model_name="first.onnx", visitor="cookie:a")
    store.finish(first, finished_comparison)
    failed = store.create(model_name="second.onnx", visitor="cookie:a")
    store.fail(failed, error="The model could not be read")
    other = store.create(model_name="theirs.onnx", visitor="cookie:b")
    history = runs.history("cookie:a")
    assert [p.id for p in history] == [failed, first]
    assert history[0].status == "failed" and history[0].headline == "The model could not be read"
    done = history[1]
    assert done.status == "done" and done.model_name == "first.onnx"
    assert done.headline.startswith(finished_comparison.name) and "weights-int8" in done.headline
    assert [p.id for p in runs.history("cookie:b")] == [other]
    assert runs.history("cookie:nobody") == []


def test_only_its_visitor_removes_a_run_and_its_link_then_says_so(tmp_path, finished_comparison):
    runs = Runs(RunStore(tmp_path), queue=_NoQueue())
    store = runs.store
    mine = store.create(model_name="mine.onnx", visitor="cookie:a")
    store.finish(mine, finished_comparison)
    with pytest.raises(RunNotFound):
        runs.remove(mine, "cookie:b")
    assert store.exists(mine)
    runs.remove(mine, "cookie:a")
    assert not store.folder(mine).exists() or not any(store.folder(mine).iterdir())
    with pytest.raises(RunNotFound, match="removed"):
        store.get(mine)
    assert runs.history("cookie:a") == []

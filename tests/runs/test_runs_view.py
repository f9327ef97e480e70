"""What a page is told about a run when the queue and the run store disagree."""

from __future__ import annotations

from shrinkray.runs.queue import JobStatus
from shrinkray.runs.service import Runs
from shrinkray.runs.store import RunStore


class OneJobQueue:
    """A queue that knows one finished job (the run store never heard how it ended)."""

    def __init__(self, status: JobStatus) -> None:
        self._status = status

    def status(self, run_id: str) -> JobStatus | None:
        return self._status if run_id == self._status.id else None


def _running_run(tmp_path) -> tuple[RunStore, str]:
    store = RunStore(tmp_path)
    run_id = store.create(model_name="m.onnx")
    store.update(run_id, status="running", step="Measuring")
    return store, run_id


def test_a_run_whose_outcome_the_store_could_not_write_is_not_shown_running(tmp_path):
    store, run_id = _running_run(tmp_path)
    job = JobStatus(id=run_id, state="failed", error="boom", problem="Shrinking failed", hint="Try float16")
    view = Runs(store, OneJobQueue(job)).view(run_id)
    assert not view.live and view.status == "failed"
    assert view.record.problem.startswith("Shrinking failed") and "could not record" in view.record.problem
    assert view.record.hint == "Try float16"
    assert store.get(run_id).status == "running"  # the page's view only: the store is not rewritten here


def test_a_cancelled_run_the_store_missed_reads_cancelled(tmp_path):
    store, run_id = _running_run(tmp_path)
    job = JobStatus(id=run_id, state="cancelled", error="Shrinking and measuring was cancelled")
    view = Runs(store, OneJobQueue(job)).view(run_id)
    assert view.status == "cancelled" and "cancelled" in view.record.problem
    assert "run folder" in view.record.hint


def test_a_live_job_still_shows_the_queue_state(tmp_path):
    store, run_id = _running_run(tmp_path)
    job = JobStatus(id=run_id, state="running", step="Timing", fraction=0.5)
    view = Runs(store, OneJobQueue(job)).view(run_id)
    assert view.live and view.step == "Timing" and view.fraction == 0.5


def test_a_link_whose_run_id_is_not_one_we_make_is_refused_before_the_queue_is_asked(tmp_path):
    """A link's run= may hold anything (megabytes of it): refused in one sentence, never looked up in a queue."""
    import pytest

    from shrinkray.runs.store import RunNotFound

    class NoQueue:
        def status(self, run_id: str) -> JobStatus | None:
            raise AssertionError("the queue was asked about a malformed id")

    for junk in ["x" * 1_000_000, "../../etc/passwd", ""]:
        with pytest.raises(RunNotFound, match="not valid"):
            Runs(RunStore(tmp_path), NoQueue()).view(junk)

"""A compare whose latency would run past the job's time cap returns its sizes and parity, and says what was
not timed (a 40 MB detector at 1.9 s per run was stopped at 600 s with nothing to show)."""

from __future__ import annotations

from helpers import sample_path

import shrinkray
from shrinkray.measure.results import CompareSettings
from shrinkray.pipeline.compare import compare


def test_latency_that_would_pass_the_job_cap_is_not_timed_and_the_note_says_so(monkeypatch):
    """The plan (measure/budget.py) thought it fit; by the time latency starts its share of the cap is spent
    anyway (here: latency's reserve is the whole cap, so its deadline is the job's start)."""
    from shrinkray.pipeline import compare as compare_module

    monkeypatch.setenv("SHRINKRAY_WORKER", "1")  # as in the capped worker the app and the CLI run compare in
    monkeypatch.setenv("SHRINKRAY_MAX_JOB_SECONDS", "600")
    monkeypatch.setattr(compare_module, "LATENCY_RESERVE", 1.0)
    c = compare(shrinkray.load(sample_path("mlp")), CompareSettings(methods=[("float16", {})]))
    variant = c.variants[0]
    assert variant.ok and variant.parity.passed and variant.sizes is not None  # the rest of the work is kept
    assert variant.latency == [] and c.original.latency == []
    assert "not timed, to finish within the run's 10-minute limit" in c.latency_note
    assert "1 thread, batch 1" in c.latency_note


def test_with_time_left_every_setting_is_timed(monkeypatch):
    monkeypatch.setenv("SHRINKRAY_MAX_JOB_SECONDS", "600")
    c = compare(shrinkray.load(sample_path("mlp")), CompareSettings(methods=[("float16", {})], latency_budget_s=0.5))
    assert c.variants[0].latency and "not timed" not in c.latency_note


def test_a_direct_call_has_no_job_cap_so_latency_is_not_cut(monkeypatch):
    """The Python API's compare() runs in the caller's process: no worker, no time cap to finish within."""
    monkeypatch.delenv("SHRINKRAY_WORKER", raising=False)
    monkeypatch.setenv("SHRINKRAY_MAX_JOB_SECONDS", "0.01")
    c = compare(shrinkray.load(sample_path("mlp")), CompareSettings(methods=[("float16", {})], latency_budget_s=0.5))
    assert c.variants[0].latency and "not timed" not in c.latency_note


def test_a_batch_that_runs_past_the_inference_deadline_in_latency_is_stopped_and_noted(monkeypatch):
    """Latency's batch sweep runs the original on a batch nothing ran before: its first run there is bounded by
    the inference deadline (issue 27); the batch is noted as not run, with the limit's sentence."""
    from hostile.runtime_bombs import batch_loop

    monkeypatch.setenv("SHRINKRAY_MAX_INFERENCE_SECONDS", "0.5")
    model = batch_loop(4 * 10**6)  # batch 1: one trip; batch 2: about 11 s here (finite: unbounded, it fails)
    settings = CompareSettings(methods=[("float16", {})], batches=[1, 2], threads=[1], parity_batch=1,
                               latency_budget_s=0.3)  # fmt: skip
    c = compare(shrinkray.load(model.SerializeToString(), name="batch-loop"), settings)
    assert c.variants[0].ok and c.variants[0].parity.passed  # batch 1 judged and timed
    assert "batch 2 could not run (One run of the original (1 thread, batch 2) took longer than 0.5 s" in c.latency_note
    assert all(s.batch == 1 for s in c.original.latency)


def test_sizes_still_compressing_at_the_cap_are_given_up_with_a_note_and_the_rest_returned(monkeypatch):
    """A 2.5 GB model on a loaded machine was stopped at 600 s with nothing: gzip and brotli of its files had
    not finished. Past the budget's share of the cap the sizes still compressing are given up, each model says
    so, and the run returns its parity (here every compression waits until it is given up)."""
    import threading

    from shrinkray.measure import sizes as sizes_module
    from shrinkray.pipeline.compare import ComparePipeline

    monkeypatch.setenv("SHRINKRAY_WORKER", "1")
    monkeypatch.setenv("SHRINKRAY_MAX_JOB_SECONDS", "600")
    stuck = threading.Event()

    def never_done(source, stop=None):
        stuck.set()
        while not stop.is_set():
            stop.wait(0.05)
        raise sizes_module.Abandoned

    monkeypatch.setattr(sizes_module, "gzip_stream_size", never_done)
    settings = CompareSettings(methods=[("float16", {})], latency=False)
    with ComparePipeline(shrinkray.load(sample_path("mlp")), settings) as pipeline:
        pipeline.measure_original()
        pipeline.add_variant("float16", {})
        assert stuck.wait(30) and pipeline.sizes.pending() == {"original", "float16"}
        pipeline._job = (pipeline._job[0] - 600, 600.0)  # the cap is spent by now
        pipeline.wait_for_sizes()
        assert not pipeline.sizes.pending()
        pipeline.measure_latency()
        c = pipeline.result()
    for result in (c.original, c.variants[0]):
        assert result.sizes is None
        assert any(
            n.startswith("Download sizes not measured: gzip and brotli of its ")
            and "did not finish within the run's 10-minute limit" in n
            for n in result.notes
        ), result.notes
    assert c.variants[0].parity.passed

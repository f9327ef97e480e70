"""A compare whose latency would run past the job's time cap returns its sizes and parity, and says what was
not timed (a 40 MB detector at 1.9 s per run was stopped at 600 s with nothing to show)."""

from __future__ import annotations

from helpers import sample_path

import shrinkray
from shrinkray.measure.results import CompareSettings
from shrinkray.pipeline.compare import compare


def test_latency_that_would_pass_the_job_cap_is_not_timed_and_the_note_says_so(monkeypatch):
    """The plan (measure/budget.py) thought it fit; by the time latency starts the cap is spent anyway."""
    from shrinkray.measure.budget import Budget

    monkeypatch.setenv("SHRINKRAY_WORKER", "1")  # as in the capped worker the app and the CLI run compare in
    monkeypatch.setenv("SHRINKRAY_MAX_JOB_SECONDS", "0.01")  # spent before latency starts
    monkeypatch.setattr(Budget, "_fits", lambda self, seconds: True)
    c = compare(shrinkray.load(sample_path("mlp")), CompareSettings(methods=[("float16", {})]))
    variant = c.variants[0]
    assert variant.ok and variant.parity.passed and variant.sizes is not None  # the rest of the work is kept
    assert variant.latency == [] and c.original.latency == []
    assert "not timed, to finish within the run's 0.01 s limit" in c.latency_note
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

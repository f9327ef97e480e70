"""One inference stops at its deadline (ONNX Runtime's RunOptions.terminate), with the limit named."""

from __future__ import annotations

import time

import numpy as np
import pytest
from helpers import sample_path
from hostile.runtime_bombs import loop_bomb

import shrinkray
from shrinkray.errors import LimitExceededError
from shrinkray.graph.sessions import open_session
from shrinkray.measure.deadline import run_within


def test_a_never_ending_loop_is_stopped_at_its_deadline():
    session = open_session(loop_bomb())
    started = time.monotonic()
    with pytest.raises(LimitExceededError, match=r"took longer than 0\.5 s .*SHRINKRAY_MAX_INFERENCE_SECONDS"):
        run_within(session, {"x": np.zeros((1, 64), np.float32)}, seconds=0.5)
    assert time.monotonic() - started < 20  # stopped, not run to the job's 600 s


def test_an_ordinary_run_returns_its_outputs():
    session = open_session(shrinkray.load(sample_path("mlp")).model)
    feeds = {"features": np.zeros((2, 64), np.float32)}
    assert [o.shape for o in run_within(session, feeds)] == [o.shape for o in session.run(None, feeds)]


@pytest.mark.slow
def test_compare_of_a_never_ending_model_ends_with_the_limit(monkeypatch):
    """Through the CLI's path (the capped worker): one sentence naming the limit, long before the job's cap."""
    from shrinkray.measure.results import CompareSettings
    from shrinkray.pipeline.compare import compare
    from shrinkray.runs.sandbox import run_capped

    monkeypatch.setenv("SHRINKRAY_MAX_INFERENCE_SECONDS", "2")
    loaded = shrinkray.load(loop_bomb().SerializeToString(), name="loop")
    started = time.monotonic()
    with pytest.raises(LimitExceededError, match="took longer than 2 s"):
        run_capped(compare, loaded.model, CompareSettings(methods=[("float16", {})], latency=False))
    assert time.monotonic() - started < 120

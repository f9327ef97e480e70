"""Calibration runs the user's model too: each run within the inference deadline (measure/deadline.py), and a
run past it ends the build with the limit's sentence instead of holding the worker (issue 27)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hostile.runtime_bombs import loop_bomb

from shrinkray.errors import DeadlineExceededError, LimitExceededError
from shrinkray.methods.base import RunContext
from shrinkray.pipeline.shrink import shrink

#: A Loop of 4 million trips: about 11 s here, far past the 0.5 s deadline the tests set, and finite, so a
#: calibration run that is not bounded makes the test fail (no error raised) instead of hanging it.
TRIPS = 4 * 10**6

INT4_AWQ = {"min_elements": 1, "activation_aware": True, "gptq": "off", "form": "standard"}


@pytest.fixture
def half_second(monkeypatch):
    monkeypatch.setenv("SHRINKRAY_MAX_INFERENCE_SECONDS", "0.5")


def test_a_calibration_run_past_the_deadline_is_stopped_with_the_limit(half_second):
    """The samples come with the context (as compare hands them over), so the only runs are calibration's own."""
    samples = [{"x": np.zeros((1, 64), np.float32)}]
    context = RunContext(calibration=SimpleNamespace(samples=samples, user_data=False))
    with pytest.raises(DeadlineExceededError, match=r"One calibration run took longer than 0\.5 s") as caught:
        shrink(loop_bomb(TRIPS), "weights-int4", context=context, **INT4_AWQ)
    assert isinstance(caught.value, LimitExceededError)
    assert "SHRINKRAY_MAX_INFERENCE_SECONDS" in str(caught.value)


def test_gptq_statistics_are_bounded_too(half_second):
    samples = [{"x": np.zeros((1, 64), np.float32)}]
    context = RunContext(calibration=SimpleNamespace(samples=samples, user_data=True))
    options = {**INT4_AWQ, "gptq": "on"}
    with pytest.raises(DeadlineExceededError, match=r"One calibration run took longer than 0\.5 s"):
        shrink(loop_bomb(TRIPS), "weights-int4", context=context, **options)


def test_a_deadline_while_making_the_calibration_samples_is_not_turned_into_a_data_free_build(half_second):
    """Before: 'Calibration was skipped (blocks are data-free): One inference took longer ...' and the build
    went on; a model that cannot run here within the limit now ends the job with the limit's sentence."""
    with pytest.raises(DeadlineExceededError, match=r"took longer than 0\.5 s and was stopped"):
        shrink(loop_bomb(TRIPS), "weights-int4", context=RunContext(), **INT4_AWQ)


def test_other_problems_making_samples_still_leave_the_build_data_free(monkeypatch):
    """Only the deadline ends the build: any other problem making calibration samples keeps the old note."""
    from shrinkray.errors import ShrinkRayError

    def refuse(self, model, session=None):
        raise ShrinkRayError("no samples for this one")

    monkeypatch.setattr(RunContext, "calibration_inputs", refuse)
    variant = shrink(loop_bomb(1), "weights-int4", context=RunContext(), **INT4_AWQ)
    assert any("Calibration was skipped (blocks are data-free): no samples for this one" in n for n in variant.notes)

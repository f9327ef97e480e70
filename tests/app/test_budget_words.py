"""A run refused by its budget (issue 27) is worded as the app's controls, never as command-line flags."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from shrinkray.measure.budget import Budget


def test_the_refusal_names_the_apps_controls():
    from app_ui.controls import app_message

    text = app_message(Budget(methods=4, cap_s=600).refusal(2000.0, 160, 3.1))
    assert text.startswith("One run of this model takes 3.1 s; judging 4 methods on 160 inputs would take about "
                           "33 minutes in all, more than this server")  # fmt: skip
    assert '"Methods to compare" on the Shrink page' in text and '"Inputs used for parity"' in text
    assert "--" not in text and "SHRINKRAY_" not in text  # no flag, no server setting a visitor cannot change


@pytest.mark.slow
def test_a_slow_model_past_the_cap_is_refused_at_once_in_the_page(monkeypatch):
    """A model slow on purpose (about 1 s a run) under an 8 s cap, through the app's capped worker: one message
    naming the Shrink and Compare pages' controls, as soon as its first run is known."""
    from hostile.runtime_bombs import slow_loop_for

    model, _ = slow_loop_for(1.0)

    def page():
        import streamlit as st

        from app_ui.controls import friendly_errors
        from app_ui.state import run_comparison
        from shrinkray.io.files import load
        from shrinkray.measure.results import CompareSettings

        with friendly_errors("Shrinking and measuring"):
            loaded = load(st.session_state["model_bytes"], name="slow.onnx")
            run_comparison(loaded, CompareSettings(), progress=lambda step, fraction: None)

    monkeypatch.setenv("SHRINKRAY_MAX_JOB_SECONDS", "8")
    at = AppTest.from_function(page, default_timeout=120)
    at.session_state["model_bytes"] = model.SerializeToString()
    at.run()
    assert not at.exception, at.exception
    [error] = at.error
    assert error.value.startswith("Shrinking and measuring failed: One run of this model takes ")
    # refused by the plan once the first run was timed (stopped at the cap, the message would name the job's limit)
    assert "judging 5 methods on 4 inputs" in error.value and "8-second limit" in error.value
    assert "Methods to compare" in error.value and "--methods" not in error.value

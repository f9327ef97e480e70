"""A model that explodes at run time is stopped in its worker while another session's run completes."""

from __future__ import annotations

import threading
import time

import pytest
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.app


def _compare_page(model_bytes_key: str) -> AppTest:
    def page():
        import streamlit as st

        from app_ui.controls import friendly_errors
        from app_ui.state import run_comparison
        from shrinkray.io.files import load
        from shrinkray.measure.results import CompareSettings

        with friendly_errors("Shrinking and measuring"):
            loaded = load(st.session_state["model_bytes"], name=st.session_state["model_name"])
            settings = CompareSettings(methods=[("weights-int8", {})], latency=False, culprits=False, brotli_quality=1)
            comparison = run_comparison(loaded, settings, progress=lambda step, fraction: None)
            st.write(f"parity passed: {comparison.variants[0].parity.passed}")

    at = AppTest.from_function(page, default_timeout=120)
    return at


def test_a_memory_bomb_in_one_session_does_not_stop_another(monkeypatch):
    from helpers import sample_path
    from hostile.runtime_bombs import memory_bomb

    monkeypatch.setenv("SHRINKRAY_MAX_JOB_MEMORY_BYTES", "2GiB")
    good, bad = _compare_page("good"), _compare_page("bad")
    good.session_state["model_bytes"] = sample_path("mlp").read_bytes()
    good.session_state["model_name"] = "mlp"
    bad.session_state["model_bytes"] = memory_bomb().SerializeToString()
    bad.session_state["model_name"] = "bomb"
    threads = [threading.Thread(target=at.run) for at in (bad, good)]
    for thread in threads:
        thread.start()
        # Python 3.11's ast.parse is not safe in two threads at once ("AST constructor recursion depth
        # mismatch", seen in CI): the second page is compiled after the first, while the first one's worker runs
        time.sleep(3)
    for thread in threads:
        thread.join(180)
    assert not good.exception and not bad.exception
    assert [m.value for m in good.markdown] == ["parity passed: True"]
    assert len(bad.error) == 1
    assert bad.error[0].value.startswith(
        "Shrinking and measuring failed: Shrinking and measuring needs more than the 2.00 GiB of memory"
    )

""""Smallest that passes" (auto) on the Shrink page judges by the page's verdict on the inputs given on the
Compare page, and the result shown passes under the settings it is shown with."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from tests.app.test_compare_inputs import _finish, _latest, _remeasure, _shrunk


def _npz(seed: int = 5) -> bytes:
    rng = np.random.default_rng(seed)
    buffer = io.BytesIO()
    np.savez(buffer, image=rng.uniform(-1, 1, (3, 3, 32, 32)).astype(np.float32))
    return buffer.getvalue()


def test_smallest_that_passes_uses_the_pages_verdict_and_the_uploaded_inputs():
    at = _remeasure(_shrunk(sample="cnn"), [("mine.npz", _npz(), "application/octet-stream")])
    assert not at.error, [e.value for e in at.error]
    at.switch_page("app_pages/shrink.py").run()
    at.session_state["verdict_outputs"] = {
        "edited_rows": {0: {"Extra criteria": "max_relative_rms_error=0.01"}}, "added_rows": [], "deleted_rows": [],
    }  # fmt: skip
    at.run()
    next(t for t in at.toggle if t.label == "Measure latency").set_value(False).run()
    _finish(next(b for b in at.button if b.label == "Smallest that passes").click().run())
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    comparison = _latest(at)
    assert comparison.settings.inputs_path and comparison.settings.inputs_path.endswith(".npz")  # the run's copy
    assert comparison.settings.verdict.per_output == {"scores": {"max_relative_rms_error": 0.01}}
    auto = next(v for v in comparison.variants if v.method == "auto")
    # shown under the verdict and inputs it was chosen by: 2 held-out samples are too few for its top-1 share to
    # pass with 95% confidence, so no mix passed the search and compare says so (never a pass by construction)
    assert auto.ok and auto.parity.status == "undecided", auto.parity
    assert any("fell back to 8-bit everywhere" in n for n in auto.notes), auto.notes
    copy = Path(comparison.settings.inputs_path).name
    assert any(f"inputs loaded from {copy}" in n.lower() for n in auto.notes)  # auto judged on them too
    checks = {c.criterion for out in auto.parity.outputs for c in out.checks}
    assert "max_relative_rms_error" in checks
    assert auto.parity.samples == 2 and any("judged on the other 2" in n for n in auto.notes)  # of 3: held out
    shown = [m.value for e in at.expander if e.label == "How it was made" for m in e.markdown]
    assert any("judged on the other 2" in text for text in shown), shown  # the card says how it was judged

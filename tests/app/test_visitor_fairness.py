"""Per-visitor fairness in the app (issue 27): a visitor with ``max_live_runs`` runs going gets one sentence
instead of a third run, and the visitor is the signed cookie the browser sent (a tampered one is ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import shrinkray

pytestmark = pytest.mark.app

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


def _shrink_page(visitor: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=240)
    at.session_state["model"] = shrinkray.load(ROOT / "sample_models" / "mlp.onnx")
    at.session_state["model_source"] = "test"
    if visitor is not None:
        at.session_state["visitor"] = visitor
    at.switch_page("app_pages/shrink.py").run()
    at.multiselect[0].set_value(["float16"]).run()
    next(t for t in at.toggle if t.label == "Measure latency").set_value(False).run()
    return at


def test_a_visitor_with_two_runs_going_gets_one_sentence_instead_of_a_third(monkeypatch):
    from app_ui.runs import runs_service

    monkeypatch.delenv("SHRINKRAY_MAX_LIVE_RUNS", raising=False)
    store = runs_service().store
    visitor = "cookie:capped-visitor-in-app-test"
    going = [store.create(model_name="other tab", visitor=visitor) for _ in range(2)]  # two tabs' runs, in line
    try:
        at = _shrink_page(visitor)
        next(b for b in at.button if b.label == "Shrink and measure").click().run()
        assert not at.exception and not at.error, [e.value for e in at.error]
        assert [w.value for w in at.warning] == [
            "You already have 2 runs going; wait for one to finish or cancel it."
        ]
        assert "run_id" not in at.session_state  # nothing was started
        assert store.live_runs(visitor) == 2
    finally:
        for run_id in going:
            store.fail(run_id, "cancelled")


def test_a_signed_cookie_names_the_visitor_and_a_tampered_one_falls_back_to_the_address(monkeypatch):
    import app_ui.visitor as visitor_module
    from app_ui.runs import runs_service
    from app_ui.visitor import visitor_keys

    keys = visitor_keys(str(runs_service().store.root))
    visitor_id, cookie = keys.new_cookie()
    for sent, expected, offered in ((cookie, f"cookie:{visitor_id}", False),
                                    (cookie[:-2] + "xx", "address:unknown", True)):  # fmt: skip
        monkeypatch.setattr(visitor_module, "_cookie_sent", lambda sent=sent: sent)
        at = AppTest.from_file(APP, default_timeout=60).run()
        assert not at.exception
        assert at.session_state["visitor"] == expected
        offer = at.session_state["visitor_offer"]
        assert bool(offer) is offered  # a new signed cookie for the browser only when it sent none valid
        assert at.session_state["visitor_replace"] is offered  # ... replacing the tampered one
        assert not offer or keys.verify(offer) not in (None, visitor_id)

"""The Past runs page: this browser's runs with their headline, an Open link each, Remove; nobody else's."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from app_ui.runs import runs_service
from tests.runs.test_past_runs import finished_comparison  # noqa: F401 - the module's fixture

ROOT = Path(__file__).resolve().parents[2]


def _page(visitor: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app_pages" / "runs.py"), default_timeout=60)
    at.session_state["visitor"] = visitor  # app_ui.visitor's key: this session's signed-cookie visitor
    return at.run()


def test_past_runs_lists_this_visitors_runs_opens_and_removes_them(finished_comparison):  # noqa: F811
    store = runs_service().store
    mine = store.create(model_name="my-model.onnx", visitor="cookie:page-test")
    store.finish(mine, finished_comparison)
    theirs = store.create(model_name="their-model.onnx", visitor="cookie:someone-else")
    at = _page("cookie:page-test")
    assert not at.exception, at.exception
    text = " ".join(m.value for m in at.markdown)
    assert "my-model.onnx" in text and "Finished" in text and "their-model.onnx" not in text
    assert any("weights-int8" in c.value for c in at.caption)  # its headline
    assert [b for b in at.button if b.label == "Remove"]
    next(b for b in at.button if b.label == "Remove").click().run()
    assert not at.exception, at.exception
    assert not store.exists(mine) and store.exists(theirs)
    assert "No runs from this browser yet" in " ".join(i.value for i in at.info)


def test_a_visitor_without_runs_is_pointed_to_the_model_page():
    at = _page("cookie:never-ran")
    assert not at.exception
    assert "No runs from this browser yet" in at.info[0].value

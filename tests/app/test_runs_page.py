"""The Shrink page with runs as jobs (AppTest): a run's id reopens it in another session, bad ids get a
message, a live run shows its queue status and can be cancelled."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import shrinkray
from shrinkray.verdict import verdict_of

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


def _wait():
    from app_ui.runs import wait_until_idle

    assert wait_until_idle(600), "a run did not finish"


def _shrink_page(loaded: shrinkray.LoadedModel) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=240)
    at.session_state["model"] = loaded
    at.session_state["model_source"] = "test"
    at.switch_page("app_pages/shrink.py").run()
    at.multiselect[0].set_value(["float16"]).run()
    next(t for t in at.toggle if t.label == "Measure latency").set_value(False).run()
    return at


def test_a_run_reopens_by_id_in_another_session_and_bad_ids_get_a_message():
    at = _shrink_page(shrinkray.load(ROOT / "sample_models" / "mlp.onnx"))
    next(b for b in at.button if b.label == "Shrink and measure").click().run()
    run_id = at.session_state["run_id"]
    _wait()
    at.run()
    cards = [m.value for m in at.markdown if m.value.startswith("### ")]
    assert cards == ["### float16"]

    other = AppTest.from_file(APP, default_timeout=240)
    other.query_params["run"] = run_id
    other.switch_page("app_pages/shrink.py").run()
    assert not other.exception and not other.error, [e.value for e in other.error]
    assert other.session_state["run_id"] == run_id
    reopened = other.session_state["model"]
    assert reopened.sha256 == at.session_state["model"].sha256  # the model came back too
    # held as its graph (issue 27), pointing into this session's link of the run's file, which outlives the run
    assert reopened.in_place and reopened.path.is_file() and "uploads" in reopened.path.parts
    from shrinkray.io.external_data import values_in

    whole = shrinkray.load(ROOT / "sample_models" / "mlp.onnx").model.SerializeToString()
    assert values_in(reopened).SerializeToString() == whole
    assert [m.value for m in other.markdown if m.value.startswith("### ")] == cards
    assert "Download mlp.float16.onnx" in [b.label for b in other.get("download_button")]

    import shutil

    from app_ui.runs import runs_service

    shutil.rmtree(runs_service().store.folder(run_id))  # the run's files gone: the session's link still reads
    assert values_in(reopened).SerializeToString() == whole

    for bad, words in (("../../etc", "not valid"), ("A" * 22, "No run with this id")):
        third = AppTest.from_file(APP, default_timeout=60)
        third.query_params["run"] = bad
        third.run()
        assert not third.exception
        assert len(third.error) == 1 and words in third.error[0].value, [e.value for e in third.error]
        assert "run_id" not in third.session_state


def test_a_live_run_shows_its_progress_and_cancel_stops_it():
    from hostile.runtime_bombs import loop_bomb

    at = _shrink_page(shrinkray.load(loop_bomb().SerializeToString(), name="loop"))
    next(b for b in at.button if b.label == "Shrink and measure").click().run()
    run_id = at.session_state["run_id"]
    assert next(b for b in at.button if b.label == "Shrink and measure").disabled  # one run at a time
    cancel = next(b for b in at.button if b.label == "Cancel")
    cancel.click().run()
    said = [i.value for i in at.info]  # a cancel that lands at once is said in this very rerun (and only once)
    _wait()
    at.run()
    said += [i.value for i in at.info]
    assert any("This run was cancelled" in text for text in said), said
    assert not next(b for b in at.button if b.label == "Shrink and measure").disabled
    from app_ui.runs import runs_service

    record = runs_service().view(run_id).record
    assert record.status == "cancelled" and not (record.folder / "variants").exists()


def test_a_cancel_the_server_cannot_record_is_one_sentence_and_the_run_goes_on(monkeypatch):
    import errno

    from hostile.runtime_bombs import loop_bomb

    from shrinkray.runs.queue import _not_recorded
    from shrinkray.runs.service import Runs

    def store_full(self, run_id):
        raise _not_recorded(OSError(errno.ENOSPC, "No space left on device"))

    at = _shrink_page(shrinkray.load(loop_bomb().SerializeToString(), name="loop"))
    next(b for b in at.button if b.label == "Shrink and measure").click().run()
    run_id = at.session_state["run_id"]
    with monkeypatch.context() as patched:
        patched.setattr(Runs, "cancel", store_full)
        next(b for b in at.button if b.label == "Cancel").click().run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("This run could not be cancelled"), errors
    assert "No space left on device" in errors[0] and "Press Cancel again" in errors[0]
    from app_ui.runs import runs_service

    assert runs_service().view(run_id).live  # nothing was half-done: the run goes on
    next(b for b in at.button if b.label == "Cancel").click().run()  # the store writes again: cancelled
    _wait()
    at.run()
    assert not at.error and runs_service().view(run_id).record.status == "cancelled"


def test_shrink_settings_survive_a_visit_to_another_page():
    at = _shrink_page(shrinkray.load(ROOT / "sample_models" / "mlp.onnx"))  # float16 only, latency off
    at.multiselect[0].set_value(["palettize", "float16"]).run()
    levels = next(n for n in at.number_input if n.label == "Levels")
    levels.set_value(16).run()
    next(r for r in at.radio if r.label == "Parity verdict").set_value("absolute").run()
    at.switch_page("app_pages/compare.py").run()
    at.switch_page("app_pages/pricing.py").run()
    at.switch_page("app_pages/shrink.py").run()
    assert not at.exception, at.exception
    assert at.multiselect[0].value == ["palettize", "float16"]
    assert next(n for n in at.number_input if n.label == "Levels").value == 16
    assert next(t for t in at.toggle if t.label == "Measure latency").value is False
    assert next(r for r in at.radio if r.label == "Parity verdict").value == "absolute"


@pytest.fixture
def duplicate_value_warnings(monkeypatch):
    """Streamlit's "created with a default value but also had its value set via the Session State API" log lines,
    every one (Streamlit logs only the first of a process: the once-flag is reset before each widget's check)."""
    from streamlit.elements.lib import policies

    said: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "set via the Session State API" in record.getMessage():
                said.append(record.getMessage())

    original = policies.check_session_state_rules

    def every_time(*args, **kwargs):
        policies._shown_default_value_warning = False
        return original(*args, **kwargs)

    monkeypatch.setattr(policies, "check_session_state_rules", every_time)
    handler = Catch()
    policies._LOGGER.addHandler(handler)
    yield said
    policies._LOGGER.removeHandler(handler)


def test_kept_settings_never_draw_streamlits_default_value_warning(duplicate_value_warnings):
    """Settings that persist across pages (and those a run link brings) are set without the widgets also being
    given a default: Streamlit warns about every such widget on every rerun of the Shrink page otherwise."""
    from app_ui.runs import runs_service
    from shrinkray.measure.results import CompareSettings

    loaded = shrinkray.load(ROOT / "sample_models" / "mlp.onnx")
    at = _shrink_page(loaded)
    at.multiselect[0].set_value(["weights-int4", "palettize", "float16"]).run()
    next(n for n in at.number_input if n.label == "Levels").set_value(16).run()
    at.run()
    for page in ("compare", "pricing", "shrink", "model", "shrink"):
        at.switch_page(f"app_pages/{page}.py").run()
    at.run()
    assert not at.exception, at.exception
    assert next(n for n in at.number_input if n.label == "Levels").value == 16  # still kept

    service = runs_service()  # a colleague's run link, with settings that differ from every default
    settings = CompareSettings(methods=[("palettize", {"levels": 64, "min_elements": 32}), ("float16", {})], runs=7,
                               latency=False)  # fmt: skip
    rid = service.store.create(model_name="mlp", model_sha256=loaded.sha256, settings=settings)
    shrinkray.save(loaded.model, service.store.folder(rid) / "model.onnx", overwrite=True)
    service.store.fail(rid, "cancelled", error="The run was cancelled", problem="The run was cancelled")
    other = AppTest.from_file(APP, default_timeout=240)
    other.query_params["run"] = rid
    other.switch_page("app_pages/shrink.py").run()
    other.run()
    assert not other.exception, other.exception
    assert other.multiselect[0].value == ["palettize", "float16"]  # the link's settings, as before
    assert next(n for n in other.number_input if n.label == "Levels").value == 64
    assert next(n for n in other.number_input if n.label == "Timed runs per model (0 = adaptive)").value == 7
    assert next(t for t in other.toggle if t.label == "Measure latency").value is False
    assert duplicate_value_warnings == []


def test_a_run_link_to_the_model_page_points_to_the_results():
    at = _shrink_page(shrinkray.load(ROOT / "sample_models" / "mlp.onnx"))
    next(b for b in at.button if b.label == "Shrink and measure").click().run()
    run_id = at.session_state["run_id"]
    _wait()
    other = AppTest.from_file(APP, default_timeout=240)
    other.query_params["run"] = run_id
    other.run()  # the Model page, the default
    assert not other.exception
    assert any("opened a kept run" in i.value for i in other.info), [i.value for i in other.info]
    assert other.session_state["model"].sha256 == at.session_state["model"].sha256


def test_a_running_runs_cards_show_what_is_known_and_measuring_for_the_rest():
    """Results as they come: a snapshot where one variant is sized and judged and the next is only built."""
    import copy

    from app_ui.runs import runs_service
    from shrinkray.measure.results import CompareSettings
    from shrinkray.pipeline.compare import compare

    loaded = shrinkray.load(ROOT / "sample_models" / "mlp.onnx")
    settings = CompareSettings(methods=[("weights-int8", {}), ("float16", {})], latency=False)
    snapshot = copy.deepcopy(compare(loaded, settings))
    for result in snapshot.all:
        result.model = None
    built = snapshot.get("float16")
    built.sizes, built.parity = None, None  # built (its record is known), neither sized nor judged yet
    service = runs_service()
    rid = service.store.create(model_name="mlp", model_sha256=loaded.sha256, settings=settings)
    service.store.update(rid, status="running", step="Checking parity: float16", fraction=0.5)
    service.store.set_snapshot(rid, snapshot)

    at = AppTest.from_file(APP, default_timeout=240)
    at.session_state["model"] = loaded
    at.session_state["model_source"] = "test"
    at.session_state["run_id"] = rid
    at.switch_page("app_pages/shrink.py").run()
    assert not at.exception, at.exception
    assert [m.value for m in at.markdown if m.value.startswith("### ")] == ["### weights-int8", "### float16"]
    metrics = [(m.label, m.value) for m in at.metric]
    sized = snapshot.get("weights-int8").sizes
    from shrinkray.units import format_bytes

    assert ("Raw", format_bytes(sized.raw)) in metrics  # the sized variant shows its numbers...
    assert ("Verdict", verdict_of(snapshot.get("weights-int8")).label) in metrics
    assert metrics.count(("Verdict", "…")) == 1  # ...the built one says it is still being measured
    assert metrics.count(("Raw", "…")) == 1
    assert "Cancel" in [b.label for b in at.button]
    service.cancel(rid)


def _kept_run(service, name: str, settings) -> tuple[str, object]:
    """A finished run as a worker leaves it (compare_run into the run's folder), kept in the app's store."""
    import shutil

    from shrinkray.runs.service import compare_run

    loaded = shrinkray.load(ROOT / "sample_models" / f"{name}.onnx")
    rid = service.store.create(model_name=name, model_sha256=loaded.sha256, settings=settings)
    folder = service.store.folder(rid)
    shutil.copyfile(ROOT / "sample_models" / f"{name}.onnx", folder / "model.onnx")
    comparison = compare_run(str(folder / "model.onnx"), name, settings, str(folder))
    service.store.finish(rid, comparison)
    return rid, comparison


def test_every_page_renders_a_run_read_back_from_the_store():
    """The run store keeps JSON: a run read back (with the visitor's browser runs attached) draws every page, as
    the comparison the worker made did."""
    from app_ui.runs import runs_service
    from shrinkray.measure.browser import BrowserRun
    from shrinkray.measure.results import CompareSettings
    from shrinkray.verdict.headline import headline_of

    service = runs_service()
    settings = CompareSettings(methods=[("weights-int8", {}), ("float16", {})], latency=False, brotli_quality=1)
    rid, comparison = _kept_run(service, "mlp", settings)
    best = headline_of(comparison).variant
    assert best is not None
    browser = [BrowserRun("original", threads=1, session_ms=900.0, first_run_ms=300.0, median_ms=0.4, runs=30),
               BrowserRun(best, threads=1, session_ms=400.0, first_run_ms=200.0, median_ms=0.5, runs=30,
                          parity=comparison.get(best).parity)]  # fmt: skip
    assert service.keep_browser_runs(rid, browser)
    kept = service.comparison(rid)
    assert kept.browser == browser and [v.key for v in kept.variants] == ["weights-int8", "float16"]
    ready = headline_of(kept).ready_text()
    assert "first run in the browser" in ready  # the re-read browser runs feed the headline

    for page in ("model", "shrink", "compare", "pricing"):
        at = AppTest.from_file(APP, default_timeout=240)
        at.query_params["run"] = rid
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception, (page, at.exception)
        assert not at.error, (page, [e.value for e in at.error])
        assert at.session_state["run_id"] == rid
        text = "\n".join(str(m.value) for m in at.markdown)
        if page == "shrink":
            assert [m.value for m in at.markdown if m.value.startswith("### ")] == ["### weights-int8", "### float16"]
            labels = [m.value for m in at.metric if m.label == "Verdict"]
            assert sorted(labels) == sorted(verdict_of(v).label for v in kept.variants)
            assert "first run in the browser" in text, text  # the headline, from the browser runs kept with the run
        if page == "compare":
            assert "#### Parity per output" in text
            assert next(s for s in at.selectbox if s.label == "Variant for the scatter plot").options == [
                "weights-int8", "float16"]


def test_a_run_an_older_version_kept_as_pickles_reads_as_one_sentence(tmp_path):
    """Records an older version wrote are pickles: never loaded, the link says so in one sentence."""
    import pickle

    from app_ui.runs import runs_service

    marker = tmp_path / "ran"

    class Planted:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    service = runs_service()
    loaded = shrinkray.load(ROOT / "sample_models" / "mlp.onnx")
    rid = service.store.create(model_name="mlp", model_sha256=loaded.sha256)
    shrinkray.save(loaded.model, service.store.folder(rid) / "model.onnx", overwrite=True)
    blob = pickle.dumps(Planted())
    with service.store._db() as db:
        db.execute("UPDATE runs SET status = 'done', settings = ?, result = ? WHERE id = ?", (blob, blob, rid))
    for page in ("model", "shrink"):
        at = AppTest.from_file(APP, default_timeout=120)
        at.query_params["run"] = rid
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception, at.exception
        assert [e.value for e in at.error] == [
            "This run link cannot be opened: This run was kept by an older version of Shrink Ray Studio and cannot "
            "be shown. Start it again."
        ]
        assert "run_id" not in at.session_state
    assert not marker.exists()


def test_a_run_the_page_starts_is_followed_and_one_dropped_unwatched_says_why():
    """The page marks its run watched (a queued run nobody shows for 10 minutes is dropped when its turn comes,
    shrinkray/runs/hooks.py); a link to such a run says why it never started."""
    from hostile.runtime_bombs import loop_bomb

    from app_ui.runs import runs_service
    from shrinkray.measure.results import CompareSettings
    from shrinkray.runs.hooks import abandoned

    at = _shrink_page(shrinkray.load(loop_bomb().SerializeToString(), name="loop"))
    next(b for b in at.button if b.label == "Shrink and measure").click().run()
    run_id = at.session_state["run_id"]
    service = runs_service()
    assert service.store.unwatched_for(run_id) is not None  # started by a page: followed
    next(b for b in at.button if b.label == "Cancel").click().run()
    _wait()

    loaded = shrinkray.load(ROOT / "sample_models" / "mlp.onnx")
    rid = service.store.create(model_name="mlp", model_sha256=loaded.sha256,
                               settings=CompareSettings(methods=[("float16", {})], latency=False))  # fmt: skip
    shrinkray.save(loaded.model, service.store.folder(rid) / "model.onnx", overwrite=True)
    service.store.mark_watched(rid, now=0.0)  # shown last in 1970
    reason = abandoned(service.store, rid)
    service.store.fail(rid, "cancelled", error=reason, problem=reason, hint="Start it again")
    other = AppTest.from_file(APP, default_timeout=240)
    other.query_params["run"] = rid
    other.switch_page("app_pages/shrink.py").run()
    assert not other.exception, other.exception
    said = [i.value for i in other.info]
    assert any(text.startswith("This run was not started: its page had been closed") for text in said), said

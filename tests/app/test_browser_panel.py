"""The Compare page's "In your browser" panel through AppTest: the models and the parity inputs are published
under the app's static folder (one unguessable folder per session, removed with it) for the page's
ONNX Runtime Web to fetch. The browser side itself runs in tests/e2e/test_in_browser.py."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

import shrinkray
from shrinkray.measure.browser import decode_tensor

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


def _finish(at: AppTest) -> AppTest:
    from app_ui.runs import wait_until_idle

    assert wait_until_idle(600), "a run did not finish"
    return at.run()


def test_the_panel_publishes_the_models_and_inputs_then_removes_them_with_the_session():
    from app_ui import browser_panel

    at = AppTest.from_file(APP, default_timeout=240)
    at.run()
    at.selectbox[0].select("mlp").run()
    next(b for b in at.button if b.label == "Load sample").click().run()
    at.switch_page("app_pages/shrink.py").run()
    at.multiselect[0].set_value(["weights-int8", "float16", "palettize"]).run()
    at.toggle[-1].set_value(False).run()  # "Measure latency" off: this test is about the files
    _finish(next(b for b in at.button if b.label == "Shrink and measure").click().run())
    at.switch_page("app_pages/compare.py").run()
    assert any(m.value == "#### In your browser" for m in at.markdown)
    assert any("ONNX Runtime Web 1.30.0" in m.value for m in at.markdown)
    next(b for b in at.button if b.label == "Run the original and variants in this browser").click().run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])

    armed = next(iter(at.session_state["browser_panel"].values()))
    keys = [m["key"] for m in armed["models"]]
    assert keys[0] == "original" and sorted(keys[1:]) == ["float16", "palettize", "weights-int8"], keys
    # the run store keeps the palettized variant (the original's raw size) compressed; the page gets the model
    from shrinkray.io import kept_files

    kept = next(v for v in next(iter(at.session_state["comparisons"].values())).variants if v.key == "palettize")
    assert kept_files.is_compressed(kept.file), kept.file
    served = ROOT / "static" / armed["models"][keys.index("palettize")]["path"].removeprefix("app/static/")
    assert served.read_bytes() == kept_files.model_bytes(kept.file)
    folder = Path(at.session_state["_browser_folder"].path)
    assert folder.parent == browser_panel.RUNS_DIR and len(folder.name) >= 32  # unguessable
    for model in armed["models"]:
        assert model["path"].startswith(f"app/static/browser-runs/{folder.name}/")
        published = ROOT / "static" / model["path"].removeprefix("app/static/")
        assert shrinkray.load(published).model.graph.output[0].name == "logits"
    original = ROOT / "static" / armed["models"][0]["path"].removeprefix("app/static/")
    assert original.read_bytes() == shrinkray.load(ROOT / "sample_models" / "mlp.onnx").model.SerializeToString()

    payload = json.loads((ROOT / "static" / armed["inputsPath"].removeprefix("app/static/")).read_text())
    inputs = armed["inputs"]
    assert inputs.note == next(iter(at.session_state["comparisons"].values())).input_note
    for sample, encoded in zip(inputs.samples, payload["samples"], strict=True):
        assert all(np.array_equal(sample[t["name"]], decode_tensor(t)) for t in encoded)
    assert {t["name"] for t in payload["timing"]} == {"features"} and payload["timing"][0]["dims"][0] == 1

    del at.session_state["_browser_folder"]  # the session ends: its folder goes with it
    gc.collect()
    assert not folder.exists()


def test_a_sessions_folder_of_model_copies_is_private_to_the_servers_user(tmp_path, monkeypatch):
    """static/browser-runs is listable: the copies of a user's models must not be readable by other local users
    (the run store keeps the same models in a 0700 folder)."""
    import types

    from app_ui import browser_panel

    monkeypatch.setattr(browser_panel, "RUNS_DIR", tmp_path / "browser-runs")
    monkeypatch.setattr(browser_panel, "st", types.SimpleNamespace(session_state={}))
    folder, url = browser_panel._session_folder()
    assert folder.parent == tmp_path / "browser-runs" and url.endswith(folder.name)
    assert oct(folder.stat().st_mode & 0o777) == "0o700"


def test_the_session_key_of_finished_runs_results_has_one_owner():
    """Only app_ui/runs.py reads or writes the session's finished-run comparisons; the panel asks it which run a
    comparison is (a renamed key or a changed cache would otherwise silently stop keeping the browser's runs)."""
    users = sorted(str(p.relative_to(ROOT)) for folder in ("app_ui", "app_pages") for p in (ROOT / folder).rglob("*.py")
                   if '"run_results"' in p.read_text())  # fmt: skip
    assert users == ["app_ui/runs.py"]
    assert "run_links.run_of(comparison)" in (ROOT / "app_ui" / "browser_panel.py").read_text()


def test_run_of_names_the_current_finished_run_only_for_its_own_comparison(monkeypatch):
    import types

    from app_ui import runs

    class View:
        def __init__(self, status):
            self.status, self.record = status, types.SimpleNamespace(id="run-1")

    kept, other = object(), object()
    monkeypatch.setattr(runs, "st", types.SimpleNamespace(session_state={}))
    monkeypatch.setattr(runs, "runs_service", lambda: types.SimpleNamespace(comparison=lambda rid: kept))
    assert runs.comparison_of("run-1") is kept  # opened once: cached in the session
    monkeypatch.setattr(runs, "view", lambda: View("done"))
    assert runs.run_of(kept) == "run-1" and runs.run_of(other) is None
    monkeypatch.setattr(runs, "view", lambda: View("running"))
    assert runs.run_of(kept) is None
    monkeypatch.setattr(runs, "view", lambda: None)
    assert runs.run_of(kept) is None


def test_a_variant_kept_compressed_downloads_as_the_model_itself(tmp_path):
    from app_ui.results import _model_download
    from shrinkray.io import kept_files
    from shrinkray.measure.results import VariantResult

    data = (ROOT / "sample_models" / "mlp.onnx").read_bytes()
    (tmp_path / "mlp.palettize.onnx").write_bytes(data)
    kept = kept_files.compress(tmp_path / "mlp.palettize.onnx")
    download = _model_download(VariantResult(key="palettize", method="palettize", options={}, file=str(kept)))
    assert download() == data

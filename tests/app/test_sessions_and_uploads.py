"""Uploads from strangers in the app: zip with external data, hostile zips, and session isolation."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import onnx
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]


def _finish(at: AppTest) -> AppTest:
    """Runs are jobs off the page's script: wait for them to end, then redraw (what the page's poll does)."""
    from app_ui.runs import wait_until_idle

    if at.error:  # refused before any run started: the message is the answer
        return at
    assert wait_until_idle(600), "a run did not finish"
    return at.run()


def _zip_with_external_data(tmp_path: Path) -> bytes:
    model = onnx.load(str(ROOT / "sample_models" / "mlp.onnx"))
    folder = tmp_path / "export"
    folder.mkdir()
    onnx.save_model(model, str(folder / "mlp.onnx"), save_as_external_data=True, location="mlp.onnx.data",
                    size_threshold=0)  # fmt: skip
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for file in folder.iterdir():
            zf.write(file, file.name)
    return buffer.getvalue()


def _upload_page(data: bytes, name: str) -> AppTest:
    def page():
        import streamlit as st

        from app_ui.controls import friendly_errors
        from app_ui.runs import set_model
        from app_ui.state import load_upload, workspace

        with friendly_errors(f"Loading {st.session_state['upload_name']}"):
            loaded = load_upload(st.session_state["upload_name"], st.session_state["upload_data"])
            set_model(loaded, "upload")
            st.write(f"loaded {loaded.name} with {len(loaded.model.graph.initializer)} initializers")
        st.write("leftover files: " + ",".join(sorted(p.name for p in workspace().rglob("*"))))

    at = AppTest.from_function(page, default_timeout=60)
    at.session_state["upload_name"] = name
    at.session_state["upload_data"] = data
    at.run()
    assert not at.exception, at.exception
    return at


def test_a_zip_with_external_data_loads_and_leaves_no_files(tmp_path):
    at = _upload_page(_zip_with_external_data(tmp_path), "mlp_export.zip")
    texts = [m.value for m in at.markdown]
    assert "loaded mlp_export with 8 initializers" in texts
    assert "leftover files:" in texts  # nothing listed: the unpacked folder was removed after loading
    model = at.session_state["model"].model
    assert all(t.data_location == onnx.TensorProto.DEFAULT for t in model.graph.initializer)


def test_a_zip_escaping_its_folder_is_refused_with_a_message(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("../evil.onnx", b"x")
    at = _upload_page(buffer.getvalue(), "evil.zip")
    assert len(at.error) == 1
    assert at.error[0].value.startswith("Loading evil.zip failed:")
    assert "model" not in at.session_state


def test_a_single_onnx_with_external_data_asks_for_a_zip(tmp_path):
    model = onnx.load(str(ROOT / "sample_models" / "mlp.onnx"))
    onnx.save_model(model, str(tmp_path / "m.onnx"), save_as_external_data=True, location="m.onnx.data", size_threshold=0)
    at = _upload_page((tmp_path / "m.onnx").read_bytes(), "m.onnx")
    assert "Upload a .zip" in at.error[0].value


def test_two_sessions_never_see_each_others_model_or_results():
    first = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    second = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    first.run()
    second.run()
    first.selectbox[0].select("mlp").run()
    next(b for b in first.button if b.label == "Load sample").click().run()
    second.selectbox[0].select("cnn").run()
    next(b for b in second.button if b.label == "Load sample").click().run()
    assert first.session_state["model"].name == "mlp"
    assert second.session_state["model"].name == "cnn"
    first.switch_page("app_pages/shrink.py").run()
    first.multiselect[0].set_value(["float16"]).run()
    first.toggle[-1].set_value(False).run()
    _finish(next(b for b in first.button if b.label == "Shrink and measure").click().run())
    assert "comparisons" in first.session_state
    second.switch_page("app_pages/compare.py").run()
    assert "comparisons" not in second.session_state
    assert any("Run **Shrink**" in i.value for i in second.info)
    assert second.session_state["model"].name == "cnn"


def test_stale_session_folders_are_swept(tmp_path, monkeypatch):
    import os
    import tempfile
    import time

    from app_ui import state

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    old = tmp_path / "shrinkray-session-old"
    fresh = tmp_path / "shrinkray-session-fresh"
    old.mkdir()
    fresh.mkdir()
    (old / "inputs.npz").write_bytes(b"x")
    stale = time.time() - state.STALE_WORKSPACE_S - 60
    os.utime(old, (stale, stale))
    state._sweep_stale_workspaces(tmp_path)
    assert not old.exists()
    assert fresh.exists()

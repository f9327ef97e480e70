"""A model too large to measure here, uploaded as a zip: kept as its graph, shrunk tensor by tensor into a zip.

The model is tiny (260 KB); SHRINKRAY_MAX_MEMORY_BYTES is set low so the same path runs as for a multi-GB
upload. AppTest has no file uploader, so the upload is an UploadedFile built from the zip's bytes and handed
to the function the Model page calls; the Shrink page then runs as the visitor sees it.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
from streamlit.proto.Common_pb2 import FileURLs
from streamlit.runtime.uploaded_file_manager import UploadedFile, UploadedFileRec
from streamlit.testing.v1 import AppTest

from app_ui.large_models import load_uploaded, refusal
from shrinkray import cli
from shrinkray.errors import LimitExceededError
from tests.io.test_large_models import outputs, tiny_external_model, zip_folder

ROOT = Path(__file__).resolve().parents[2]


def _upload(path: Path) -> UploadedFile:
    return UploadedFile(UploadedFileRec("id-1", path.name, "application/zip", path.read_bytes()), FileURLs())


@pytest.fixture
def big_zip(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("SHRINKRAY_MAX_MEMORY_BYTES", "100KiB")  # 5 x 260 KB is "too much" here
    tiny_external_model(tmp_path / "model")
    return zip_folder(tmp_path / "model", tmp_path / "model.zip")


def test_large_zip_is_kept_as_its_graph_and_compare_refuses(big_zip: Path, tmp_path: Path) -> None:
    loaded = load_uploaded(_upload(big_zip), tmp_path / "ws")
    assert loaded.is_lazy and loaded.path is not None and loaded.path.is_file()
    assert all(not t.raw_data for t in loaded.model.graph.initializer)  # the weights stayed in their file
    from app_ui.large_models import job_input

    assert job_input(loaded).name == "model.onnx" and job_input(loaded).parent == loaded.external_base
    assert not list((tmp_path / "ws" / "uploads").rglob("*.zip"))  # unpacked: the zip is not kept beside it
    message = str(refusal(loaded, "comparing"))
    assert message.startswith("This model is ") and "comparing needs about" in message


def test_small_zip_loads_whole_and_leaves_no_copy(tmp_path: Path) -> None:
    tiny_external_model(tmp_path / "model")
    loaded = load_uploaded(_upload(zip_folder(tmp_path / "model", tmp_path / "model.zip")), tmp_path / "ws")
    assert not loaded.is_lazy and loaded.path is None
    assert not any((tmp_path / "ws" / "uploads").iterdir())


def test_single_file_too_large_is_told_to_use_external_data(tmp_path: Path, monkeypatch) -> None:
    import onnx

    monkeypatch.setenv("SHRINKRAY_MAX_MEMORY_BYTES", "100KiB")
    single = tmp_path / "single.onnx"
    onnx.save_model(onnx.load(str(tiny_external_model(tmp_path / "m"))), str(single))
    upload = UploadedFile(UploadedFileRec("id-2", "single.onnx", "", single.read_bytes()), FileURLs())
    with pytest.raises(LimitExceededError) as info:
        load_uploaded(upload, tmp_path / "ws")
    assert info.value.setting == "external_data"
    assert not any((tmp_path / "ws" / "uploads").iterdir())


def test_shrink_page_streams_and_offers_the_zip(big_zip: Path, tmp_path: Path) -> None:
    loaded = load_uploaded(_upload(big_zip), tmp_path / "ws")
    at = AppTest.from_file(str(ROOT / "app_pages" / "shrink.py"), default_timeout=180)
    at.session_state["model"] = loaded
    at.run()
    assert not at.exception
    info = " ".join(i.value for i in at.info)
    assert "This model is " in info and "comparing needs about" in info
    assert "Compare only weights-int8 and float16" in info and "SHRINKRAY" not in info and "--" not in info
    # the methods that stream can be compared, measured in the model's own files; the search cannot
    assert at.multiselect[0].options == ["Weights-only 8-bit", "float16 weights"]
    assert [b for b in at.button if b.label == "Shrink and measure"]
    assert not [b for b in at.button if b.label == "Smallest that passes"]
    next(b for b in at.button if b.label == "Shrink tensor by tensor").click()
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "Checked: onnx.checker passes" in at.success[0].value
    result = at.session_state["large_results"][(loaded.sha256, "weights-int8")]
    with zipfile.ZipFile(result["zip"]) as zf:
        assert sorted(zf.namelist()) == ["model.weights-int8.onnx", "model.weights-int8.onnx.data"]
        assert all(i.compress_type == zipfile.ZIP_STORED for i in zf.infolist())
        zf.extractall(tmp_path / "from_app")
    cli_out = tmp_path / "cli" / "model.int8.onnx"
    cli_out.parent.mkdir()
    assert cli.main(["shrink", str(big_zip), "-m", "weights-int8", "-o", str(cli_out), "-q"]) == 0
    np.testing.assert_array_equal(outputs(tmp_path / "from_app" / "model.weights-int8.onnx"), outputs(cli_out))
    assert not list(Path(result["zip"]).parent.glob("scratch-*"))  # the worker's scratch folder is gone


def test_a_run_of_a_model_kept_as_its_graph_is_refused_in_the_apps_words(big_zip: Path, tmp_path: Path) -> None:
    """Compare (and Shrink and measure) queue runs through start_run: it refuses before anything reads the weights."""

    def page() -> None:
        import streamlit as st

        from app_ui.controls import friendly_errors
        from app_ui.runs import start_run
        from shrinkray.measure.results import CompareSettings

        with friendly_errors("Starting the run"):
            start_run(st.session_state["model"], CompareSettings())

    loaded = load_uploaded(_upload(big_zip), tmp_path / "ws")
    at = AppTest.from_function(page, default_timeout=60)
    at.session_state["model"] = loaded
    at.run()
    assert not at.exception
    text = " ".join(e.value for e in at.error)
    assert "This model is " in text and "comparing needs about" in text
    assert "Compare only weights-int8 and float16" in text and "--" not in text and "SHRINKRAY" not in text


def test_a_model_kept_as_its_graph_leaves_no_files_once_another_replaces_it(big_zip: Path, tmp_path: Path,
                                                                             monkeypatch) -> None:  # fmt: skip
    """Its upload and unpacked folder (twice the model's size on disk) go when the visitor loads another model;
    the new model's own files stay."""
    import streamlit as st

    from app_ui import runs

    ws = tmp_path / "ws"
    first = load_uploaded(_upload(big_zip), ws)
    second = load_uploaded(_upload(big_zip), ws)
    assert first.is_lazy and second.is_lazy and len(list((ws / "uploads").iterdir())) == 2
    monkeypatch.setattr(st, "session_state", {})
    monkeypatch.setattr(runs, "workspace", lambda: ws)  # set_model looks it up where it is imported
    monkeypatch.setattr(runs, "forget_run", lambda: None)
    runs.set_model(first, "Uploaded: model.zip")
    runs.set_model(first, "Uploaded: model.zip")  # the same model again: nothing removed
    assert Path(first.path).is_file()
    runs.set_model(second, "Uploaded: model.zip")
    assert not Path(first.path).parent.exists()
    kept = next(p for p in Path(second.path).parents if p.parent == ws / "uploads")  # its upload-* folder
    assert [p.name for p in (ws / "uploads").iterdir()] == [kept.name]
    from app_ui.large_models import job_input

    assert job_input(second).is_file()
    elsewhere = tmp_path / "mine.zip"  # a zip that is not one of this workspace's uploads is never removed
    elsewhere.write_bytes(big_zip.read_bytes())
    second.path = elsewhere
    runs.set_model(first, "Uploaded: model.zip")
    assert elsewhere.is_file()


def test_a_saved_upload_keeps_the_users_file_name_made_safe(tmp_path):
    """Messages about an uploaded file name the file the user chose, never an internal name."""
    from app_ui.large_models import save_upload

    class Upload(io.BytesIO):
        def __init__(self, name: str) -> None:
            super().__init__(b"not a model")
            self.name = name

    assert save_upload(Upload("notamodel.onnx"), tmp_path).name == "notamodel.onnx"
    assert save_upload(Upload("../../etc/my model [v2].ONNX"), tmp_path).name == "my_model_v2_.ONNX"
    assert save_upload(Upload("weights.zip"), tmp_path).name == "weights.zip"
    assert save_upload(Upload("model"), tmp_path).name == "model.onnx"
    assert all(p.parent.parent == tmp_path for p in tmp_path.glob("*/*"))  # each in its own private folder


def test_the_methods_that_stream_are_compared_in_the_models_own_files(big_zip: Path, tmp_path: Path,
                                                                      monkeypatch) -> None:  # fmt: skip
    from app_ui.runs import runs_service, wait_until_idle

    # room for a comparison one session at a time (2x the model), not for one in memory (5x)
    monkeypatch.setenv("SHRINKRAY_MAX_MEMORY_BYTES", "800KiB")
    loaded = load_uploaded(_upload(big_zip), tmp_path / "ws")
    at = AppTest.from_file(str(ROOT / "app_pages" / "shrink.py"), default_timeout=180)
    at.session_state["model"] = loaded
    at.run()
    next(t for t in at.toggle if t.label == "Measure latency").set_value(False).run()
    next(b for b in at.button if b.label == "Shrink and measure").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert wait_until_idle(600), "the run did not finish"
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert loaded.is_lazy
    comparison = runs_service().comparison(at.session_state["run_id"])
    assert [r.key for r in comparison.variants] == ["weights-int8", "float16"]
    assert all(r.ok and r.parity is not None and "tensor by tensor" in " ".join(r.notes) for r in comparison.variants)


def test_a_one_file_upload_is_held_as_its_graph_and_every_method_runs_on_it(tmp_path: Path, monkeypatch) -> None:
    """Issue 27: the server holds an uploaded .onnx as its graph pointing into the saved copy (not its weights),
    yet it is no 'large model': every method and the search are offered, the run reads it whole in its worker and
    gives the variants a model held whole gives, and the saved copy goes once another model replaces it."""
    import streamlit as st

    from app_ui import runs
    from app_ui.runs import runs_service, wait_until_idle
    from shrinkray.io.files import load

    sample = ROOT / "sample_models" / "cnn.onnx"
    upload = UploadedFile(UploadedFileRec("id-3", "my cnn.onnx", "", sample.read_bytes()), FileURLs())
    loaded = load_uploaded(upload, tmp_path / "ws")
    assert loaded.in_place and not loaded.streams_only and loaded.path.read_bytes() == sample.read_bytes()
    assert loaded.model.ByteSize() < sample.stat().st_size / 10  # the graph, not the weights
    assert loaded.sha256 == load(sample).sha256 and loaded.name == "my cnn"
    at = AppTest.from_file(str(ROOT / "app_pages" / "shrink.py"), default_timeout=180)
    at.session_state["model"] = loaded
    at.run()
    assert not at.exception and not at.info
    assert len(at.multiselect[0].options) > 2 and [b for b in at.button if b.label == "Smallest that passes"]
    at.multiselect[0].set_value(["weights-int8", "palettize"]).run()
    next(t for t in at.toggle if t.label == "Measure latency").set_value(False).run()
    next(b for b in at.button if b.label == "Shrink and measure").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert wait_until_idle(600), "the run did not finish"
    comparison = runs_service().comparison(at.session_state["run_id"])
    assert [r.key for r in comparison.variants] == ["weights-int8", "palettize"]
    assert all(r.ok and r.parity is not None and r.parity.passed for r in comparison.variants)
    whole = cli.main(["shrink", str(sample), "-m", "weights-int8", "-o", str(tmp_path / "w8.onnx"), "-q"])
    assert whole == 0
    kept = runs_service().store.folder(at.session_state["run_id"]) / comparison.variants[0].file
    assert kept.read_bytes() == (tmp_path / "w8.onnx").read_bytes()  # the variant of the model held whole
    monkeypatch.setattr(st, "session_state", {})
    monkeypatch.setattr(runs, "workspace", lambda: tmp_path / "ws")  # set_model looks it up where it is imported
    monkeypatch.setattr(runs, "forget_run", lambda: None)
    runs.set_model(loaded, "Uploaded: my cnn.onnx")
    runs.set_model(load(sample), "Sample: cnn")
    assert not Path(loaded.path).exists()  # its saved copy went with it

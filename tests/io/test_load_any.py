"""One loader for the CLI and the app: an .onnx or a .zip, from a path or from bytes."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import onnx
import pytest

from shrinkray.errors import ModelLoadError, ShrinkRayError
from shrinkray.io.archive import load_any

SAMPLE = Path(__file__).resolve().parents[2] / "sample_models" / "mlp.onnx"


def _external_zip(tmp_path: Path) -> bytes:
    """mlp saved with its weights in a .data file, zipped in a folder (as users zip an export)."""
    folder = tmp_path / "export"
    folder.mkdir()
    model = onnx.load(str(SAMPLE))
    onnx.save(model, str(folder / "model.onnx"), save_as_external_data=True, location="model.onnx.data",
              size_threshold=1024)  # fmt: skip
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for f in folder.iterdir():
            zf.write(f, f"export/{f.name}")
    return buf.getvalue()


def test_onnx_bytes_and_path_give_the_same_model():
    from_path = load_any(SAMPLE)
    from_bytes = load_any(SAMPLE.read_bytes(), name="mlp.onnx")
    assert from_path.name == from_bytes.name == "mlp"
    assert from_path.sha256 == from_bytes.sha256
    assert from_path.path == SAMPLE and from_bytes.path is None


def test_a_zip_from_bytes_or_path_is_unpacked_loaded_and_its_folder_removed(tmp_path):
    data = _external_zip(tmp_path)
    work = tmp_path / "work"
    uploaded = load_any(data, name="detector.zip", workdir=work)
    assert uploaded.name == "detector" and uploaded.path is None
    assert list(work.iterdir()) == []  # nothing of the unpacked copy outlives the load
    archive = tmp_path / "detector.zip"
    archive.write_bytes(data)
    from_path = load_any(archive)
    assert from_path.name == "detector" and from_path.path == archive  # the archive is protected from writes
    assert from_path.sha256 == uploaded.sha256
    weights = {t.name: t.raw_data for t in uploaded.model.graph.initializer}
    assert weights == {t.name: t.raw_data for t in from_path.model.graph.initializer}
    assert any(len(raw) > 1024 for raw in weights.values())  # the external data came back into memory


def test_a_zip_without_the_extension_is_recognised_by_its_bytes(tmp_path):
    loaded = load_any(_external_zip(tmp_path), name="upload.bin", workdir=tmp_path / "w")
    assert loaded.model.graph.node


def test_an_onnx_upload_with_external_data_asks_for_a_zip(tmp_path):
    folder = tmp_path / "x"
    folder.mkdir()
    onnx.save(onnx.load(str(SAMPLE)), str(folder / "m.onnx"), save_as_external_data=True, size_threshold=1024)
    with pytest.raises(ShrinkRayError, match="Upload a .zip"):
        load_any((folder / "m.onnx").read_bytes(), name="m.onnx")


def _set_zip(tmp_path):
    """A transformers.js-like set: an encoder and a decoder in onnx/."""
    import zipfile

    from helpers import sample_path

    archive = tmp_path / "set.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(sample_path("cnn"), "onnx/encoder_model.onnx")
        zf.write(sample_path("mlp"), "onnx/decoder_model.onnx")
    return archive


def test_a_zip_of_several_models_lists_them_and_loads_the_one_chosen(tmp_path):
    """Not a dead end: the refusal carries the models' paths (a front end offers them; it survives the worker's
    pickling), and ``choose`` loads one, named after its file and told apart from its siblings by its hash."""
    import pickle

    from shrinkray.errors import CHOOSE_MODEL_SETTING, SeveralModels

    archive = _set_zip(tmp_path)
    with pytest.raises(SeveralModels) as refused:
        load_any(archive)
    assert refused.value.choices == ("onnx/encoder_model.onnx", "onnx/decoder_model.onnx")
    assert refused.value.setting == CHOOSE_MODEL_SETTING
    again = pickle.loads(pickle.dumps(refused.value))
    assert again.choices == refused.value.choices and str(again) == str(refused.value)
    decoder = load_any(archive, choose="onnx/decoder_model.onnx")
    encoder = load_any(archive.read_bytes(), name="set.zip", choose="./onnx/encoder_model.onnx")
    assert (decoder.name, encoder.name) == ("decoder_model", "encoder_model")
    assert decoder.model.graph.input[0].name == "features" and encoder.model.graph.node
    assert len({decoder.sha256, encoder.sha256, load_any(archive, choose="onnx/decoder_model.onnx").sha256}) == 2
    with pytest.raises(ModelLoadError, match="The archive has no model 'onnx/nope.onnx'"):
        load_any(archive, choose="onnx/nope.onnx")


def test_choosing_inside_a_single_model_is_refused(tmp_path):
    from helpers import sample_path

    with pytest.raises(ModelLoadError, match="is one model, not an archive of several"):
        load_any(sample_path("mlp"), choose="onnx/decoder_model.onnx")

"""The command line accepts a .zip holding a model and its external data."""

from __future__ import annotations

import zipfile

import onnx
import pytest
from helpers import sample_path

import shrinkray
from shrinkray import cli


def _zip(tmp_path):
    model = onnx.load(str(sample_path("mlp")))
    onnx.save_model(model, str(tmp_path / "mlp.onnx"), save_as_external_data=True, location="mlp.onnx.data",
                    size_threshold=0)  # fmt: skip
    archive = tmp_path / "bundle.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(tmp_path / "mlp.onnx", "mlp.onnx")
        zf.write(tmp_path / "mlp.onnx.data", "mlp.onnx.data")
    (tmp_path / "mlp.onnx").unlink()
    (tmp_path / "mlp.onnx.data").unlink()
    return archive


@pytest.mark.slow  # shrinks in a capped worker interpreter (shrinkray.runs.sandbox)
def test_inspect_and_shrink_a_zip(tmp_path, capsys):
    archive = _zip(tmp_path)
    before = archive.read_bytes()
    assert cli.main(["inspect", str(archive)]) == 0
    assert "fc2.weight" in capsys.readouterr().out
    assert cli.main(["shrink", str(archive), "-m", "weights-int8", "-q"]) == 0
    out = tmp_path / "bundle.weights-int8.onnx"
    assert out.exists() and (tmp_path / "bundle.weights-int8.onnx.data").exists()  # external data stays external
    loaded = shrinkray.load(out)
    shrinkray.validate(loaded.model)
    assert archive.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle.weights-int8.onnx", "bundle.weights-int8.onnx.data",
                                                          "bundle.zip"]  # fmt: skip


def test_a_hostile_zip_is_refused_on_one_line(tmp_path, capsys):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("/etc/evil.onnx", b"x")
    assert cli.main(["inspect", str(archive)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and err.count("\n") == 1
    assert "Traceback" not in err

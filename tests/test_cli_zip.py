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


def _set(tmp_path):
    """An encoder and a decoder, as transformers.js lays them out, zipped and as a folder."""
    folder = tmp_path / "set"
    (folder / "onnx").mkdir(parents=True)
    (folder / "onnx" / "encoder_model.onnx").write_bytes(sample_path("cnn").read_bytes())
    (folder / "onnx" / "decoder_model.onnx").write_bytes(sample_path("mlp").read_bytes())
    archive = tmp_path / "set.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted((folder / "onnx").iterdir()):
            zf.write(path, f"onnx/{path.name}")
    return folder, archive


def test_a_set_of_models_names_member_and_member_picks_one(tmp_path, capsys):
    """A zip or folder of several models: the error names --member with one of them (not a dead end), and
    --member loads that model from the zip or the folder; a single .onnx has nothing to pick from."""
    folder, archive = _set(tmp_path)
    two = tmp_path / "two.zip"  # two models that are no set (not an encoder and a decoder)
    with zipfile.ZipFile(two, "w") as zf:
        zf.write(sample_path("cnn"), "onnx/vision.onnx")
        zf.write(sample_path("mlp"), "onnx/head.onnx")
    assert cli.main(["inspect", str(two)]) == 1
    err = capsys.readouterr().err
    assert "Name the one to use with --member, e.g. --member onnx/" in err and "Traceback" not in err
    for given in (archive, folder):
        assert cli.main(["inspect", str(given)]) == 0  # an encoder and a decoder: one inspection of the set
        out, err = capsys.readouterr()
        assert "A set of models: encoder_model.onnx and decoder_model.onnx" in err and out.startswith("set:")
        assert cli.main(["inspect", str(given), "--member", "onnx/decoder_model.onnx"]) == 0
        assert capsys.readouterr().out.startswith("decoder_model:")
    assert cli.main(["inspect", str(archive), "--member", "onnx/missing.onnx"]) == 1
    assert "The archive has no model 'onnx/missing.onnx'" in capsys.readouterr().err
    assert cli.main(["inspect", str(folder), "--member", "../set.zip"]) == 1
    assert "has no model ../set.zip. Its models are: onnx/decoder_model.onnx, onnx/encoder_model.onnx" in (
        capsys.readouterr().err)
    assert cli.main(["inspect", str(sample_path("mlp")), "--member", "onnx/x.onnx"]) == 1
    assert "--member names a model inside a .zip or folder" in capsys.readouterr().err


@pytest.mark.slow  # shrinks in a capped worker interpreter (shrinkray.runs.sandbox)
def test_shrink_and_compare_one_model_of_a_zipped_set(tmp_path, capsys):
    _, archive = _set(tmp_path)
    before = archive.read_bytes()
    assert cli.main(["shrink", str(archive), "--member", "onnx/decoder_model.onnx", "-m", "float16", "-q"]) == 0
    written = tmp_path / "decoder_model.float16.onnx"  # named after the model, beside the zip
    assert shrinkray.load(written).model.graph.input[0].name == "features"
    capsys.readouterr()
    assert cli.main(["compare", str(archive), "--member", "onnx/encoder_model.onnx", "--methods", "weights-int8",
                     "--no-latency", "-q"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert out.startswith("encoder_model") and "weights-int8" in out
    assert archive.read_bytes() == before

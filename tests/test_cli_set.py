"""The command line compares an encoder–decoder folder or zip as one set, in its capped worker."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from test_cli_zip import _set as not_a_text_set

from shrinkray import cli
from tests.io.test_model_set import write_set


@pytest.mark.slow  # compares in a capped worker interpreter (shrinkray.runs.sandbox)
def test_compare_a_set_folder_and_zip_writes_each_variant_set_in_transformers_js_names(tmp_path, capsys):
    folder = write_set(tmp_path / "s2s", config={"decoder_start_token_id": 0, "eos_token_id": 0})
    archive = tmp_path / "s2s.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in folder.rglob("*"):
            zf.write(path, path.relative_to(folder).as_posix())
    before = {p: p.read_bytes() for p in [archive, *folder.rglob("*.onnx")]}
    for given, out in ((folder, tmp_path / "from-folder"), (archive, tmp_path / "from-zip")):
        assert cli.main(["compare", str(given), "--methods", "float16,weights-int8", "--save-dir", str(out),
                         "--json", str(out) + ".json"]) == 0  # fmt: skip
        printed = capsys.readouterr().out
        assert "judged through decoder_model.onnx" in printed and "generated tokens" in printed
        assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
            "config.json", "onnx/decoder_model_fp16.onnx", "onnx/decoder_model_quantized.onnx",
            "onnx/encoder_model_fp16.onnx", "onnx/encoder_model_quantized.onnx"]  # fmt: skip
        report = json.loads((tmp_path / (out.name + ".json")).read_text())
        fp16 = next(v for v in report["variants"] if v["key"] == "float16")
        assert fp16["parity"]["outputs"][0]["name"] == "generated tokens"
    assert all(p.read_bytes() == data for p, data in before.items())  # the user's files are never written


@pytest.mark.slow
def test_a_set_that_is_not_text_in_text_out_asks_for_one_file(tmp_path, capsys):
    _, archive = not_a_text_set(tmp_path)
    assert cli.main(["compare", str(archive), "--methods", "float16", "-q"]) == 1
    err = capsys.readouterr().err
    assert "not laid out as an encoder and a decoder" in err
    assert "--member onnx/" in err and "Traceback" not in err


@pytest.mark.slow  # shrinks in a capped worker interpreter
def test_shrink_a_set_writes_each_file_beside_its_own_in_transformers_js_names(tmp_path, capsys):
    folder = write_set(tmp_path / "s2s", config={"decoder_start_token_id": 0, "eos_token_id": 0})
    originals = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert cli.main(["shrink", str(folder), "-m", "weights-int8"]) == 0
    out = capsys.readouterr().out
    assert "onnx/encoder_model.onnx:" in out and "The set:" in out and "shrinkray compare" in out
    made = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and p not in originals)
    assert made == ["onnx/decoder_model_quantized.onnx", "onnx/encoder_model_quantized.onnx"]
    assert all(p.read_bytes() == data for p, data in originals.items())
    assert cli.main(["shrink", str(folder), "-m", "weights-int8"]) == 1  # never over a file without --force
    assert "already exists" in capsys.readouterr().err
    assert cli.main(["shrink", str(folder), "-m", "auto"]) == 1
    assert "works on one model file, not on a set" in capsys.readouterr().err
    archive = tmp_path / "zipped.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in originals:
            zf.write(path, path.relative_to(folder).as_posix())
    assert cli.main(["shrink", str(archive), "-m", "float16", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [Path(r["output"]).name for r in records] == ["encoder_model_fp16.onnx", "decoder_model_fp16.onnx"]
    assert sorted(p.relative_to(tmp_path / "zipped").as_posix() for p in (tmp_path / "zipped").rglob("*")
                  if p.is_file()) == ["config.json", "onnx/decoder_model_fp16.onnx", "onnx/encoder_model_fp16.onnx"]  # fmt: skip


@pytest.mark.slow
def test_shrink_writes_the_files_compare_judged_calibrated_alike(tmp_path, capsys):
    """weights-int4 learns from the set's held-out lines in both: `shrink` writes the very bytes `compare` judged."""
    import shutil

    from helpers import ROOT

    folder = tmp_path / "set"
    shutil.copytree(ROOT / "sample_models" / "tiny_seq2seq", folder)
    assert cli.main(["shrink", str(folder), "-m", "weights-int4"]) == 0
    assert "Note: Calibrated in the set on 32 inputs not judged" in capsys.readouterr().out
    judged = tmp_path / "judged"
    assert cli.main(["compare", str(folder), "--methods", "weights-int4", "--save-dir", str(judged)]) == 0
    capsys.readouterr()
    for name in ("encoder_model_q4.onnx", "decoder_model_q4.onnx"):
        assert (folder / "onnx" / name).read_bytes() == (judged / "onnx" / name).read_bytes()
    # a method that learns nothing refuses --text before any work, as for one model
    assert cli.main(["shrink", str(folder), "-m", "float16", "--text", str(folder / "prompts.txt")]) != 0
    said = capsys.readouterr()
    assert "would have no effect" in said.err and "Loading the set" not in said.err + said.out
    assert not list(folder.rglob("*_fp16.onnx"))

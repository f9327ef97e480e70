"""Model sets: which files form an encoder–decoder, opened from a folder or a zip."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import onnx
import pytest

from shrinkray.errors import ModelLoadError
from shrinkray.io.model_set import is_model_set, open_set, set_members
from tests.seq2seq_models import seq2seq_set


def write_set(folder: Path, *, config: dict | None = None) -> Path:
    (folder / "onnx").mkdir(parents=True, exist_ok=True)
    for stem, model in seq2seq_set(width=32, layers=1).items():
        onnx.save(model, str(folder / "onnx" / f"{stem}.onnx"))
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_an_encoder_and_a_decoder_in_one_folder_are_a_set_and_other_precisions_are_left_out():
    found = set_members(["onnx/encoder_model.onnx", "onnx/decoder_model.onnx", "onnx/decoder_model_q4.onnx",
                         "onnx/encoder_model_fp16.onnx", "onnx/decoder_with_past_model.onnx"])  # fmt: skip
    assert found == {"encoder": "onnx/encoder_model.onnx", "decoder": "onnx/decoder_model.onnx",
                     "decoder_with_past": "onnx/decoder_with_past_model.onnx"}  # fmt: skip


@pytest.mark.parametrize("names", [
    ["onnx/model.onnx", "onnx/model_q4.onnx"],  # one model in two precisions
    ["a/encoder_model.onnx", "b/decoder_model.onnx"],  # not side by side
    ["onnx/encoder_model_fp16.onnx", "onnx/decoder_model_fp16.onnx"],  # only other precisions
    ["onnx/decoder_model.onnx", "onnx/decoder_with_past_model.onnx"],  # no encoder
])  # fmt: skip
def test_files_that_are_no_encoder_decoder_are_no_set(names):
    assert set_members(names) is None


def test_a_folder_set_carries_its_settings_and_a_zip_of_it_opens_the_same(tmp_path):
    folder = write_set(tmp_path / "s2s", config={"decoder_start_token_id": 3, "eos_token_id": 2})
    assert is_model_set(folder)
    opened = open_set(folder, workdir=tmp_path / "work")
    assert opened.members == {"encoder": "onnx/encoder_model.onnx", "decoder": "onnx/decoder_model.onnx"}
    assert opened.config["decoder_start_token_id"] == 3
    assert opened.file_bytes == sum(p.stat().st_size for p in (folder / "onnx").iterdir())
    archive = tmp_path / "s2s.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in folder.rglob("*"):
            if path.is_file():
                zf.write(path, path.relative_to(tmp_path).as_posix())
    zipped = open_set(archive, workdir=tmp_path / "work")
    assert zipped.name == "s2s"
    assert {r: Path(p).name for r, p in zipped.members.items()} == {"encoder": "encoder_model.onnx",
                                                                     "decoder": "decoder_model.onnx"}  # fmt: skip
    assert zipped.config["eos_token_id"] == 2
    assert zipped.sha256 and (tmp_path / "work") in zipped.folder.parents


def test_a_folder_that_is_no_set_is_refused_in_words(tmp_path):
    (tmp_path / "one").mkdir()
    onnx.save(seq2seq_set(width=32, layers=1)["encoder_model"], str(tmp_path / "one" / "model.onnx"))
    with pytest.raises(ModelLoadError, match="not an encoder–decoder set") as caught:
        open_set(tmp_path / "one", workdir=tmp_path / "work")
    assert "encoder_model.onnx and decoder_model.onnx" in caught.value.hint

"""Variant files a run keeps compressed read back as the models they hold."""

from __future__ import annotations

import gzip

import pytest
from helpers import sample_path

from shrinkray.io import kept_files


def test_compressing_replaces_the_file_and_every_reader_gets_the_model_back(tmp_path):
    path = tmp_path / "model.palettize.onnx"
    data = sample_path("transformer").read_bytes()
    path.write_bytes(data)
    kept = kept_files.compress(path)
    assert kept.name == "model.palettize.onnx.gz" and kept_files.is_compressed(kept)
    assert not path.exists() and not list(tmp_path.glob("*.tmp"))
    assert kept.stat().st_size < len(data)
    assert gzip.decompress(kept.read_bytes()) == data  # a plain gzip file
    assert kept_files.model_bytes(kept) == data
    assert kept_files.model_size(kept) == len(data)
    kept_files.copy_model(kept, tmp_path / "copy.onnx")
    assert (tmp_path / "copy.onnx").read_bytes() == data


def test_a_plain_file_is_read_as_it_is(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"\x08\x07")
    assert not kept_files.is_compressed(path)
    assert kept_files.model_bytes(path) == b"\x08\x07" and kept_files.model_size(path) == 2
    kept_files.copy_model(path, tmp_path / "copy.onnx")
    assert (tmp_path / "copy.onnx").read_bytes() == b"\x08\x07"


@pytest.mark.parametrize("name", ["model.onnx.gz.tmp", "model.gz", "model.onnx"])
def test_only_a_kept_model_file_counts_as_compressed(name):
    assert not kept_files.is_compressed(name)

"""A one-file model's weights found in place: a header pointing into the file is the model, and any file that
is not what the parsed model says gives no places (the caller then writes a copy)."""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import read_sample, sample_path

from shrinkray.io.files import load
from shrinkray.io.inline_data import MIN_REFERENCED_BYTES, raw_data_places, referencing_header

SAMPLES = ["mlp", "cnn", "transformer", "rnn", "subgraph", "shared_weight"]


@pytest.mark.parametrize("name", SAMPLES)
def test_each_place_holds_its_tensors_raw_bytes(name):
    model = read_sample(name)
    places = raw_data_places(sample_path(name), model)
    data = sample_path(name).read_bytes()
    assert places is not None and len(places) == len(model.graph.initializer)
    for tensor, place in zip(model.graph.initializer, places, strict=True):
        if place is None:
            assert not tensor.raw_data
        else:
            assert data[place.offset:place.offset + place.length] == tensor.raw_data


def test_a_file_that_is_not_the_parsed_model_gives_no_places(tmp_path):
    model = read_sample("mlp")
    assert raw_data_places(sample_path("cnn"), model) is None  # another model's file
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(sample_path("mlp").read_bytes()[:-100])
    assert raw_data_places(cut, model) is None  # truncated
    renamed = read_sample("mlp")
    renamed.graph.initializer[0].name += "x"
    assert raw_data_places(sample_path("mlp"), renamed) is None
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    assert raw_data_places(empty, model) is None
    assert raw_data_places(tmp_path / "missing.onnx", model) is None


@pytest.mark.parametrize("name", ["mlp", "transformer"])
def test_a_header_pointing_into_a_link_of_the_file_is_the_same_model(name, tmp_path):
    model = read_sample(name)
    os.link(sample_path(name), tmp_path / "weights")
    header = referencing_header(model, raw_data_places(sample_path(name), model), "weights")
    referenced = [t for t in header.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    assert referenced and all(not t.raw_data for t in referenced)
    assert all(len(t.raw_data) < MIN_REFERENCED_BYTES for t in header.graph.initializer)
    onnx.save(header, str(tmp_path / "header.onnx"))
    assert (tmp_path / "header.onnx").stat().st_size < sample_path(name).stat().st_size / 10
    loaded = load(tmp_path / "header.onnx").model  # the engine's loader (onnx.load refuses a linked data file)
    for tensor in loaded.graph.initializer:
        tensor.ClearField("data_location")
    assert loaded.SerializeToString() == model.SerializeToString()
    feeds = {i.name: np.ones([d.dim_value or 2 for d in i.type.tensor_type.shape.dim],
                             onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type))
             for i in model.graph.input}  # fmt: skip
    ours = ort.InferenceSession(str(tmp_path / "header.onnx"), providers=["CPUExecutionProvider"]).run(None, feeds)
    theirs = ort.InferenceSession(str(sample_path(name)), providers=["CPUExecutionProvider"]).run(None, feeds)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)

"""A one-file model's weights found in place: a header pointing into the file is the model, and any file that
is not what the parsed model says gives no places (the caller then writes a copy)."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import read_sample, sample_path

from shrinkray.io.external_data import values_in, with_values
from shrinkray.io.files import load
from shrinkray.io.inline_data import MIN_REFERENCED_BYTES, hold_in_place, raw_data_places, referencing_header

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


@pytest.mark.parametrize("name", SAMPLES)
def test_a_model_held_in_place_keeps_its_graph_and_reads_the_same_weights(name, tmp_path):
    """The app holds an upload as a header into its saved file (issue 27): its graph's initializers point into
    the file (a subgraph's stay whole), and the worker's whole model (values_in) is the loaded one byte for byte."""
    copy = tmp_path / f"{name}.onnx"
    copy.write_bytes(sample_path(name).read_bytes())
    whole = load(copy)
    held = hold_in_place(whole)
    assert held.in_place and held.is_lazy and not held.streams_only
    assert held.sha256 == whole.sha256 and held.file_bytes == whole.file_bytes and held.path == copy
    assert all(len(t.raw_data) < MIN_REFERENCED_BYTES for t in held.model.graph.initializer)
    assert held.model.ByteSize() < (whole.model.ByteSize() if name == "subgraph" else whole.model.ByteSize() / 4)
    assert values_in(held).SerializeToString() == whole.model.SerializeToString()
    assert values_in(whole) is whole.model  # nothing to read: the model itself


def test_a_model_not_matching_its_file_or_without_one_is_held_whole(tmp_path):
    whole = load(sample_path("mlp"))
    assert hold_in_place(dataclasses.replace(whole, path=None)).in_place is False
    other = tmp_path / "cnn.onnx"
    other.write_bytes(sample_path("cnn").read_bytes())
    mismatched = dataclasses.replace(whole, path=other)
    assert hold_in_place(mismatched) is mismatched  # another file: its weights would be another model's


def test_a_worker_runs_on_the_whole_model_of_one_held_in_place(tmp_path):
    copy = tmp_path / "cnn.onnx"
    copy.write_bytes(sample_path("cnn").read_bytes())
    held = hold_in_place(load(copy))
    assert with_values(lambda m: sum(len(t.raw_data) for t in m.graph.initializer), held) == sum(
        len(t.raw_data) for t in read_sample("cnn").graph.initializer)
    os.link(copy, tmp_path / "linked.onnx")  # a run links the upload: the engine's reader still reads it
    assert values_in(held).SerializeToString() == read_sample("cnn").SerializeToString()

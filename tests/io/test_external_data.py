"""weights-int8 on a model kept in external data: tensor by tensor, same results as in memory.

Models are tiny (a few hundred KB) and built in tmp_path; bench/scaling.py runs the same path on 2.5 GB.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from shrinkray.errors import MethodError, ModelLoadError, OutputExistsError
from shrinkray.io import files as sr_io
from shrinkray.io.archive import load_any
from shrinkray.io.external_data import ALIGN_FROM_BYTES, ALIGNMENT, read_array
from shrinkray.io.files import load, save
from shrinkray.io.limits import is_external
from shrinkray.methods import weights_int8
from shrinkray.pipeline.streaming import can_stream, shrink_to_files
from shrinkray.runs.jobs import shrink_job


def _model(rng: np.random.Generator, opset: int = 17) -> onnx.ModelProto:
    """x[1,256] -> MatMul w1[256,1024] -> Add b -> MatMul w2[1024,256],
    plus an int64 table over ALIGN_FROM_BYTES used by a Gather (external, never quantized) and a float bias."""
    w1 = rng.standard_normal((256, 1024)).astype(np.float32) * 0.05
    w2 = rng.standard_normal((1024, 256)).astype(np.float32) * 0.05
    w2[3, 7] = 2.0  # an outlier, so per-channel scales differ
    bias = rng.standard_normal(1024).astype(np.float32) * 0.01
    table = np.arange(140_000, dtype=np.int64)  # 1.1 MB: written aligned
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
        helper.make_node("Add", ["h", "b"], ["hb"], name="add"),
        helper.make_node("MatMul", ["hb", "w2"], ["y"], name="mm2"),
        helper.make_node("Gather", ["table", "idx"], ["picked"], name="gather", axis=0),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256]),
         helper.make_tensor_value_info("idx", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 256]),
         helper.make_tensor_value_info("picked", TensorProto.INT64, [3])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
         numpy_helper.from_array(bias, "b"), numpy_helper.from_array(table, "table")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    return model


def _save_external(model: onnx.ModelProto, folder: Path, name: str = "model.onnx") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    path = folder / name
    onnx.save_model(copy, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=name + ".data", size_threshold=1024)  # fmt: skip
    return path


def _values(path: Path) -> dict[str, np.ndarray]:
    model = onnx.load(str(path))  # with its external data
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def _outputs(path: Path) -> list[np.ndarray]:
    feeds = {"x": np.random.default_rng(7).standard_normal((1, 256)).astype(np.float32),
             "idx": np.array([0, 5, 139_999], dtype=np.int64)}  # fmt: skip
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.fixture
def external_model(tmp_path: Path) -> tuple[onnx.ModelProto, Path]:
    model = _model(np.random.default_rng(0))
    return model, _save_external(model, tmp_path / "export")


@pytest.mark.parametrize("options", [{}, {"symmetric": True, "granularity": "per-tensor"},
                                     {"form": "dequantize-linear"}, {"exclude": ["w2"]}])  # fmt: skip
def test_streamed_result_has_the_same_weights_and_outputs_as_in_memory(tmp_path, external_model, options):
    model, path = external_model
    loaded = load(path, lazy_external=True)
    assert can_stream(loaded, "weights-int8")
    (tmp_path / "out").mkdir()
    variant, written, nbytes = shrink_to_files(loaded, "weights-int8", tmp_path / "out" / "small.onnx", **options)
    in_memory = weights_int8.apply(onnx.load(str(path)), weights_int8.WeightsInt8Options(**options))
    reference = save(in_memory.model, tmp_path / "reference.onnx", external_data=True)

    streamed, expected = _values(written), _values(reference)
    assert sorted(streamed) == sorted(expected)
    for name, values in expected.items():
        assert streamed[name].dtype == values.dtype and np.array_equal(streamed[name], values), name
    assert [c.name for c in variant.changes] == [c.name for c in in_memory.changes]
    for got, want in zip(_outputs(written), _outputs(reference), strict=True):
        assert np.array_equal(got, want)
    assert nbytes == written.stat().st_size + (written.parent / "small.onnx.data").stat().st_size


def test_the_written_model_points_only_at_its_own_data_file_with_large_tensors_aligned(tmp_path, external_model):
    _, path = external_model
    out = tmp_path / "model.onnx"  # the same file names as the input, in another folder
    shrink_to_files(load(path, lazy_external=True), "weights-int8", out)
    graph = onnx.load(str(out), load_external_data=False)
    places = {}
    for tensor in graph.graph.initializer:
        if is_external(tensor):
            entries = {e.key: e.value for e in tensor.external_data}
            places[tensor.name] = entries
            assert entries["location"] == "model.onnx.data"
            if int(entries["length"]) >= ALIGN_FROM_BYTES:
                assert int(entries["offset"]) % ALIGNMENT == 0
        else:
            assert len(tensor.raw_data) < 1024
    assert "table" in places  # kept as it was, copied into the output's file
    assert any(int(p["length"]) >= ALIGN_FROM_BYTES for p in places.values())
    assert np.array_equal(read_array(graph.graph.initializer[[t.name for t in graph.graph.initializer].index("table")],
                                     tmp_path), np.arange(140_000, dtype=np.int64))  # fmt: skip
    # the input is untouched and still loads
    assert np.array_equal(_values(path)["table"], np.arange(140_000, dtype=np.int64))


def test_a_lazy_load_reads_no_tensor_and_the_conversion_holds_no_weights_in_the_graph(
    tmp_path, external_model, monkeypatch
):
    _, path = external_model

    def refuse(refs):
        raise AssertionError("external data was read whole")

    monkeypatch.setattr(sr_io, "_read_external", refuse)
    loaded = load(path, lazy_external=True)
    assert loaded.is_lazy and loaded.external_base == path.parent.resolve()
    assert all(not t.HasField("raw_data") for t in loaded.model.graph.initializer if t.name in ("w1", "w2"))
    variant, _, _ = shrink_to_files(loaded, "weights-int8", tmp_path / "small.onnx")
    held = sum(len(t.raw_data) for t in variant.model.graph.initializer)
    assert held < 4096  # the codes went to the data file as they were made


def test_a_zip_and_a_folder_through_the_cli_job_give_the_same_files(tmp_path, external_model):
    _, path = external_model
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in path.parent.iterdir():
            zf.write(f, f"export/{f.name}")
    results = []
    for source, name in ((path, "a.onnx"), (archive, "b.onnx")):
        scratch = tmp_path / f"scratch-{name}"
        scratch.mkdir()
        variant, written, nbytes, input_bytes = shrink_job(source, tmp_path / name, "weights-int8", {}, False,
                                                           str(scratch))  # fmt: skip
        assert written == tmp_path / name and (tmp_path / f"{name}.data").is_file()
        assert variant.model.ByteSize() == 0 and len(variant.changes) == 2
        results.append(_values(written))
    assert all(np.array_equal(results[0][k], results[1][k]) for k in results[0])


def test_a_zip_loaded_lazily_keeps_its_unpacked_files_only_in_the_callers_folder(tmp_path, external_model):
    _, path = external_model
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in path.parent.iterdir():
            zf.write(f, f.name)
    work = tmp_path / "work"
    lazy = load_any(archive, workdir=work, lazy_external=True)
    assert lazy.is_lazy and work in lazy.external_base.parents
    whole = load_any(archive, lazy_external=True)  # no folder of the caller's: loaded whole, nothing kept
    assert not whole.is_lazy and all(not is_external(t) for t in whole.model.graph.initializer)


def test_a_failed_conversion_writes_nothing(tmp_path, external_model):
    model, _ = external_model
    old = _save_external(_model(np.random.default_rng(1), opset=11), tmp_path / "old")
    with pytest.raises(MethodError):
        shrink_to_files(load(old, lazy_external=True), "weights-int8", tmp_path / "small.onnx",
                        form="dequantize-linear")  # per-channel DequantizeLinear needs opset 13  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export", "old"]


def test_the_input_and_its_data_file_are_never_written(tmp_path, external_model):
    _, path = external_model
    loaded = load(path, lazy_external=True)
    protected = [path, path.parent / "model.onnx.data"]
    with pytest.raises(OutputExistsError):
        shrink_to_files(loaded, "weights-int8", path, protect=protected, overwrite=True)
    with pytest.raises(OutputExistsError):  # output x.onnx would write x.onnx.data: the input's data file
        shrink_to_files(loaded, "weights-int8", path.parent / "model.onnx", protect=protected, overwrite=True)


def test_a_lazily_loaded_tensor_whose_stored_length_disagrees_with_its_shape_is_refused(tmp_path, external_model):
    _, path = external_model
    graph = onnx.load(str(path), load_external_data=False)
    for tensor in graph.graph.initializer:
        if tensor.name == "w1":
            for entry in tensor.external_data:
                if entry.key == "length":
                    entry.value = str(int(entry.value) - 4)
    path.write_bytes(graph.SerializeToString())
    with pytest.raises(ModelLoadError, match="w1"):
        load(path, lazy_external=True)


def test_a_model_without_external_data_takes_the_in_memory_path(tmp_path):
    path = tmp_path / "inline.onnx"
    path.write_bytes(_model(np.random.default_rng(2)).SerializeToString())
    loaded = load(path, lazy_external=True)
    assert not loaded.is_lazy and not can_stream(loaded, "weights-int8")


def test_a_model_with_one_data_file_per_tensor_streams_into_one_file(tmp_path):
    model = _model(np.random.default_rng(3))
    folder = tmp_path / "per-tensor"
    folder.mkdir()
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    onnx.save_model(copy, str(folder / "model.onnx"), save_as_external_data=True, all_tensors_to_one_file=False,
                    size_threshold=1024)  # fmt: skip
    assert len(list(folder.iterdir())) > 2  # the model and a file per large tensor
    _, written, _ = shrink_to_files(load(folder / "model.onnx", lazy_external=True), "weights-int8",
                                    tmp_path / "small.onnx")  # fmt: skip
    in_memory = weights_int8.apply(onnx.load(str(folder / "model.onnx")), weights_int8.WeightsInt8Options())
    expected = _values(save(in_memory.model, tmp_path / "reference.onnx", external_data=True))
    got = _values(written)
    assert all(np.array_equal(got[k], v) for k, v in expected.items()) and sorted(got) == sorted(expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["per-tensor", "reference.onnx", "reference.onnx.data",
                                                          "small.onnx", "small.onnx.data"]  # fmt: skip


@pytest.mark.parametrize("options", [{}, {"exclude": ["w2"]}])
def test_float16_streams_the_same_halves_as_in_memory(tmp_path, external_model, options):
    from shrinkray.methods import float16

    model, path = external_model
    loaded = load(path, lazy_external=True)
    assert can_stream(loaded, "float16", options)
    variant, written, _ = shrink_to_files(loaded, "float16", tmp_path / "half.onnx", **options)
    in_memory = float16.apply(onnx.load(str(path)), float16.Float16Options(**options))
    reference = save(in_memory.model, tmp_path / "reference.onnx", external_data=True)
    streamed, expected = _values(written), _values(reference)
    assert sorted(streamed) == sorted(expected)
    for name, values in expected.items():
        assert streamed[name].dtype == values.dtype and np.array_equal(streamed[name], values), name
    assert [c.name for c in variant.changes] == [c.name for c in in_memory.changes] != []
    for got, want in zip(_outputs(written), _outputs(reference), strict=True):
        assert np.array_equal(got, want)


def test_float16_compute_mode_does_not_stream(tmp_path, external_model):
    _, path = external_model
    loaded = load(path, lazy_external=True)
    assert not can_stream(loaded, "float16", {"mode": "compute"})
    with pytest.raises(MethodError, match="tensor by tensor"):
        shrink_to_files(loaded, "float16", tmp_path / "half.onnx", mode="compute")
    assert not (tmp_path / "half.onnx").exists()

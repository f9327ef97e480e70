"""Tests for shrinkray.io.files: loading every kind of broken or hostile file, and safe saving.

Every broken file is built in tmp_path from code. Error tests check the
exception class *and* that the message says what is wrong.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import shrinkray.io.files as sio
from shrinkray.errors import (
    LimitExceededError,
    MissingModelError,
    ModelLoadError,
    OutputExistsError,
    ShrinkRayError,
    UnsafeModelError,
)
from shrinkray.graph.weights import iter_graphs
from shrinkray.io.files import LoadedModel, load, save

SAMPLES = Path(__file__).resolve().parents[2] / "sample_models"
SECRET = b"TOP-SECRET-PAYLOAD-7f3a9c" * 64


# --------------------------------------------------------------------------- helpers


def sample(name: str) -> onnx.ModelProto:
    return onnx.load(str(SAMPLES / f"{name}.onnx"))


def all_tensors(model: onnx.ModelProto) -> dict[tuple[str, str], np.ndarray]:
    """(scope, name) -> values for every initializer and Constant tensor."""
    found = {}
    for scope, graph in iter_graphs(model.graph):
        for t in graph.initializer:
            found[(scope, t.name)] = numpy_helper.to_array(t)
        for node in graph.node:
            for attr in node.attribute:
                if node.op_type == "Constant" and attr.name == "value":
                    found[(scope, node.output[0])] = numpy_helper.to_array(attr.t)
    return found


def assert_same_tensors(a: onnx.ModelProto, b: onnx.ModelProto) -> None:
    ta, tb = all_tensors(a), all_tensors(b)
    assert ta.keys() == tb.keys()
    for key, value in ta.items():
        assert tb[key].dtype == value.dtype, key
        np.testing.assert_array_equal(tb[key], value, err_msg=str(key))


def folder_listing(folder: Path) -> set[str]:
    """Every entry below folder, hidden ones included."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def message_of(excinfo) -> str:
    return str(excinfo.value)


def save_with_external_data(model: onnx.ModelProto, path: Path, location: str = "weights.bin") -> Path:
    onnx.save_model(
        model,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=location,
        size_threshold=1024,
    )
    return path


def stored_tensors(model: onnx.ModelProto, *, subgraphs_only: bool = False) -> list[onnx.TensorProto]:
    """Initializers and Constant tensors of every graph (or only of the nested ones)."""
    found = []
    for scope, graph in iter_graphs(model.graph):
        if subgraphs_only and not scope:
            continue
        found.extend(graph.initializer)
        found.extend(a.t for n in graph.node if n.op_type == "Constant" for a in n.attribute if a.name == "value")
    return found


def rewrite_external(
    path: Path,
    *,
    location: str | None = None,
    offset: int | None = None,
    length: int | None = None,
    subgraphs_only: bool = False,
):
    """Edit the external-data entries of the model at ``path`` (the first tensor for offset/length)."""
    model = onnx.load(str(path), load_external_data=False)
    tensors = [
        t for t in stored_tensors(model, subgraphs_only=subgraphs_only) if t.data_location == onnx.TensorProto.EXTERNAL
    ]
    assert tensors, "the model must use external data"
    for index, tensor in enumerate(tensors):
        entries = {e.key: e.value for e in tensor.external_data}
        if location is not None:
            entries["location"] = location
        if index == 0 and offset is not None:
            entries["offset"] = str(offset)
        if index == 0 and length is not None:
            entries["length"] = str(length)
        del tensor.external_data[:]
        for key, value in entries.items():
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
    path.write_bytes(model.SerializeToString())


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    return folder


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret.bin"
    path.write_bytes(SECRET * 400)  # larger than any tensor of mlp.onnx
    return path


def assert_no_secret(excinfo) -> None:
    exc = excinfo.value
    for text in (str(exc), repr(exc), exc.problem, exc.hint):
        assert SECRET[:19].decode() not in text


# --------------------------------------------------------------------------- loading good models


@pytest.mark.parametrize("as_str", [True, False])
def test_load_from_path(as_str):
    path = SAMPLES / "mlp.onnx"
    loaded = load(str(path) if as_str else path)
    assert isinstance(loaded, LoadedModel)
    assert loaded.name == "mlp"
    assert loaded.path == path
    assert loaded.file_bytes == path.stat().st_size
    assert loaded.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert loaded.external_data_files == [] and not loaded.has_external_data
    assert_same_tensors(loaded.model, sample("mlp"))


def test_load_from_bytes():
    data = (SAMPLES / "subgraph.onnx").read_bytes()
    loaded = load(data)
    assert loaded.name == "model"
    assert loaded.path is None
    assert loaded.file_bytes == len(data)
    assert loaded.sha256 == hashlib.sha256(data).hexdigest()
    assert_same_tensors(loaded.model, sample("subgraph"))
    assert load(bytearray(data), name="upload.onnx").name == "upload.onnx"
    assert load(memoryview(data)).sha256 == loaded.sha256


# --------------------------------------------------------------------------- broken files


def test_missing_path(tmp_path):
    missing = tmp_path / "nope" / "model.onnx"
    with pytest.raises(MissingModelError) as excinfo:
        load(missing)
    assert "Missing" in message_of(excinfo) and str(missing) in message_of(excinfo)


def test_dangling_symlink_is_missing(tmp_path):
    link = tmp_path / "model.onnx"
    link.symlink_to(tmp_path / "gone.onnx")
    with pytest.raises(MissingModelError):
        load(link)


def test_directory(tmp_path):
    with pytest.raises(ModelLoadError) as excinfo:
        load(tmp_path)
    assert "a folder without an .onnx model" in message_of(excinfo) and "Give the path" in message_of(excinfo)


def test_a_folder_stands_for_its_only_model_or_transformers_js_main_one(tmp_path):
    import shutil

    from helpers import sample_path

    from shrinkray.io.files import model_in_folder

    (tmp_path / "onnx").mkdir()
    for name in ("model.onnx", "model_quantized.onnx", "model_fp16.onnx"):
        shutil.copy(sample_path("mlp"), tmp_path / "onnx" / name)
    assert model_in_folder(tmp_path) == tmp_path / "onnx" / "model.onnx"
    assert load(tmp_path).path == tmp_path / "onnx" / "model.onnx"
    (tmp_path / "onnx" / "model.onnx").unlink()
    with pytest.raises(ModelLoadError) as excinfo:
        load(tmp_path)
    assert "holds several models (onnx/model_fp16.onnx, onnx/model_quantized.onnx)" in message_of(excinfo)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    with pytest.raises(ModelLoadError) as excinfo:
        load(path)
    assert "empty" in message_of(excinfo) and "0 bytes" in message_of(excinfo)
    with pytest.raises(ModelLoadError, match="empty"):
        load(b"")


@pytest.mark.parametrize("seed", range(6))
def test_random_bytes(tmp_path, seed):
    data = np.random.default_rng(seed).bytes(4096)
    path = tmp_path / "random.onnx"
    path.write_bytes(data)
    for source in (path, data):
        with pytest.raises(ModelLoadError) as excinfo:
            load(source)
        text = message_of(excinfo)
        assert "not" in text and "ONNX model" in text, text


@pytest.mark.parametrize("fraction", [0.5, 0.9])
@pytest.mark.parametrize("name", ["mlp", "subgraph"])
def test_truncated_protobuf(tmp_path, name, fraction):
    data = (SAMPLES / f"{name}.onnx").read_bytes()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(ModelLoadError) as excinfo:
        load(path)
    text = message_of(excinfo)
    assert "not a readable ONNX model" in text and "truncat" in text, text
    assert str(path) in text


def test_serialized_tensor_is_not_a_model():
    data = numpy_helper.from_array(np.ones((3, 3), np.float32), "t").SerializeToString()
    with pytest.raises(ModelLoadError) as excinfo:
        load(data)
    assert "not" in message_of(excinfo) and "ONNX model" in message_of(excinfo)


def test_serialized_graph_is_not_a_model():
    data = sample("mlp").graph.SerializeToString()
    with pytest.raises(ModelLoadError) as excinfo:
        load(data)
    assert "not an ONNX model" in message_of(excinfo) and "no graph" in message_of(excinfo)


def test_model_without_graph():
    model = onnx.ModelProto(ir_version=10, producer_name="x")
    model.opset_import.add().version = 17
    with pytest.raises(ModelLoadError, match="no graph"):
        load(model.SerializeToString())


def test_model_without_opset(tmp_path):
    model = sample("mlp")
    del model.opset_import[:]
    path = tmp_path / "noopset.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ModelLoadError) as excinfo:
        load(path)
    assert "no opset" in message_of(excinfo)


@pytest.mark.skipif(not Path("/dev/zero").exists() or sys.platform != "linux", reason="needs /dev/zero")
def test_device_file_is_refused_without_reading_it_all():
    # In a child with a 1.5 GB address-space cap, so the unbounded read ends in MemoryError quickly.
    code = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))\n"
        "from shrinkray.io.files import load\n"
        "try:\n"
        "    load('/dev/zero', max_file_bytes=1000)\n"
        "except BaseException as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120, cwd=SAMPLES.parent
    )
    assert result.stdout.strip() in {"ModelLoadError", "LimitExceededError"}, (result.stdout, result.stderr[-500:])


def test_size_limit(tmp_path):
    data = (SAMPLES / "mlp.onnx").read_bytes()
    with pytest.raises(LimitExceededError, match="above the limit"):
        load(data, max_file_bytes=1000)
    with pytest.raises(LimitExceededError, match="above the limit"):
        load(SAMPLES / "mlp.onnx", max_file_bytes=1000)


# --------------------------------------------------------------------------- external data


def test_external_data_next_to_the_model_loads(model_dir):
    path = save_with_external_data(sample("mlp"), model_dir / "model.onnx")
    loaded = load(path)
    assert loaded.external_data_files == ["weights.bin"]
    assert loaded.has_external_data
    assert loaded.file_bytes == path.stat().st_size + (model_dir / "weights.bin").stat().st_size
    assert loaded.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert_same_tensors(loaded.model, sample("mlp"))
    # The tensors are in memory now: nothing still points at the data file.
    assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in loaded.model.graph.initializer)


def test_external_data_in_a_subfolder_loads(model_dir):
    (model_dir / "data").mkdir()
    path = save_with_external_data(sample("mlp"), model_dir / "model.onnx", location="data/w.bin")
    assert load(path).external_data_files == [os.path.join("data", "w.bin")]


@pytest.mark.parametrize("kind", ["dotdot", "nested-dotdot", "absolute", "symlink-file", "symlink-dir"])
def test_external_data_outside_the_folder_is_refused(model_dir, secret, kind):
    path = save_with_external_data(sample("mlp"), model_dir / "model.onnx")
    if kind == "dotdot":
        location = "../secret.bin"
    elif kind == "nested-dotdot":
        (model_dir / "sub").mkdir()
        location = "sub/../../secret.bin"
    elif kind == "absolute":
        location = str(secret)
    elif kind == "symlink-file":
        (model_dir / "link.bin").symlink_to(secret)
        location = "link.bin"
    else:
        (model_dir / "escape").symlink_to(secret.parent, target_is_directory=True)
        location = "escape/secret.bin"
    rewrite_external(path, location=location, offset=0)
    with pytest.raises(UnsafeModelError) as excinfo:
        load(path)
    text = message_of(excinfo)
    assert "outside the model's own folder" in text
    assert location in text
    assert_no_secret(excinfo)


@pytest.mark.parametrize("location", ["../secret.bin", "ABSOLUTE"])
def test_hostile_location_inside_subgraphs_and_constants_is_refused(model_dir, secret, location):
    path = model_dir / "model.onnx"
    onnx.save_model(
        sample("subgraph"),
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="weights.bin",
        size_threshold=1024,
        convert_attribute=True,  # the Constant node inside the If branch goes external too
    )
    nested = stored_tensors(onnx.load(str(path), load_external_data=False), subgraphs_only=True)
    # then/W1, then/b1, then/W2 (Constant), else/W1, else/W2, body/W_in
    assert sum(t.data_location == onnx.TensorProto.EXTERNAL for t in nested) == 6
    assert load(path).external_data_files == ["weights.bin"]  # fine before the edit
    rewrite_external(path, location=str(secret) if location == "ABSOLUTE" else location, subgraphs_only=True)
    with pytest.raises(UnsafeModelError) as excinfo:
        load(path)
    assert_no_secret(excinfo)


def test_external_data_file_missing(model_dir):
    path = save_with_external_data(sample("mlp"), model_dir / "model.onnx")
    (model_dir / "weights.bin").unlink()
    with pytest.raises(ModelLoadError) as excinfo:
        load(path)
    assert "weights.bin" in message_of(excinfo) and "missing" in message_of(excinfo)


def test_external_data_location_names_a_file_that_does_not_exist(model_dir):
    path = save_with_external_data(sample("mlp"), model_dir / "model.onnx")
    rewrite_external(path, location="other.bin")
    with pytest.raises(ModelLoadError, match="'other.bin'.*missing"):
        load(path)


@pytest.mark.parametrize("where", ["offset", "length", "both"])
def test_external_data_range_beyond_the_file(model_dir, where):
    path = save_with_external_data(sample("mlp"), model_dir / "model.onnx")
    size = (model_dir / "weights.bin").stat().st_size
    if where == "offset":
        rewrite_external(path, offset=size + 64)
    elif where == "length":
        rewrite_external(path, offset=0, length=size + 1)
    else:
        rewrite_external(path, offset=size - 4, length=8)
    with pytest.raises(ModelLoadError) as excinfo:
        load(path)
    text = message_of(excinfo)
    assert "asks for bytes" in text and f"only {size} bytes" in text, text


def test_truncated_external_data_file(model_dir):
    path = save_with_external_data(sample("mlp"), model_dir / "model.onnx")
    data = model_dir / "weights.bin"
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    with pytest.raises(ModelLoadError, match="truncated"):
        load(path)


def test_bytes_with_external_data_are_refused(model_dir):
    path = save_with_external_data(sample("mlp"), model_dir / "model.onnx")
    with pytest.raises(UnsafeModelError) as excinfo:
        load(path.read_bytes(), name="model.onnx")
    assert "external data" in message_of(excinfo)


# --------------------------------------------------------------------------- saving


def test_save_and_load_back(tmp_path):
    model = sample("subgraph")
    out = save(model, tmp_path / "out.onnx")
    assert out == tmp_path / "out.onnx"
    assert folder_listing(tmp_path) == {"out.onnx"}
    loaded = load(out)
    assert_same_tensors(loaded.model, model)
    assert loaded.sha256 == hashlib.sha256(out.read_bytes()).hexdigest()
    assert out.read_bytes() == model.SerializeToString()


def test_save_refuses_to_overwrite_without_permission(tmp_path):
    target = tmp_path / "out.onnx"
    target.write_bytes(b"precious")
    with pytest.raises(OutputExistsError) as excinfo:
        save(sample("mlp"), target)
    assert "already exists" in message_of(excinfo)
    assert target.read_bytes() == b"precious"
    assert folder_listing(tmp_path) == {"out.onnx"}

    save(sample("mlp"), target, overwrite=True)
    assert_same_tensors(load(target).model, sample("mlp"))


@pytest.mark.parametrize("how", ["same", "dotted", "relative-protect", "symlink", "hardlink"])
def test_save_refuses_protected_paths(tmp_path, monkeypatch, how):
    (tmp_path / "sub").mkdir()
    original = tmp_path / "in.onnx"
    original.write_bytes((SAMPLES / "mlp.onnx").read_bytes())
    before = original.read_bytes()
    protect: list = [original]
    monkeypatch.chdir(tmp_path)
    if how == "same":
        target = original
    elif how == "dotted":
        target = Path("sub/../in.onnx")
    elif how == "relative-protect":
        target = original
        protect = ["./sub/../in.onnx"]
    elif how == "symlink":
        target = tmp_path / "sub" / "alias.onnx"
        target.symlink_to(original)
    else:
        target = tmp_path / "sub" / "hard.onnx"
        os.link(original, target)
    listing = folder_listing(tmp_path)
    with pytest.raises(OutputExistsError) as excinfo:
        save(sample("cnn"), target, protect=protect, overwrite=True)
    assert "Refusing" in message_of(excinfo) and "input model" in message_of(excinfo)
    assert original.read_bytes() == before
    assert folder_listing(tmp_path) == listing


def test_save_into_a_missing_folder(tmp_path):
    with pytest.raises(MissingModelError, match="does not exist"):
        save(sample("mlp"), tmp_path / "no" / "out.onnx")
    assert folder_listing(tmp_path) == set()


def test_failed_write_leaves_nothing_behind(tmp_path, monkeypatch):
    def broken(model):  # half the file written, then a failure
        yield b"\x08\x07" * 1000
        raise ShrinkRayError("simulated failure while serializing")

    monkeypatch.setattr(sio, "serialized_pieces", broken)
    with pytest.raises(ShrinkRayError, match="simulated"):
        save(sample("mlp"), tmp_path / "out.onnx")
    assert folder_listing(tmp_path) == set()


def test_existing_external_data_file_is_not_overwritten(tmp_path):
    data = tmp_path / "out.onnx.data"
    data.write_bytes(b"someone else's weights")
    with pytest.raises(OutputExistsError) as excinfo:
        save(sample("mlp"), tmp_path / "out.onnx", external_data=True)
    assert "out.onnx.data" in message_of(excinfo) and "already exists" in message_of(excinfo)
    assert data.read_bytes() == b"someone else's weights"
    assert folder_listing(tmp_path) == {"out.onnx.data"}


@pytest.mark.parametrize("name", ["mlp", "subgraph", "fp16"])
def test_save_with_external_data(tmp_path, name):
    model = sample(name)
    out = save(model, tmp_path / "out.onnx", external_data=True)
    assert folder_listing(tmp_path) == {"out.onnx", "out.onnx.data"}
    assert out.stat().st_size < (tmp_path / "out.onnx.data").stat().st_size
    loaded = load(out)
    assert loaded.external_data_files == ["out.onnx.data"]
    assert loaded.sha256 == hashlib.sha256(out.read_bytes()).hexdigest()
    assert_same_tensors(loaded.model, model)
    # The in-memory model was not switched to external data by saving it.
    assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)


def test_save_external_data_overwrite(tmp_path):
    save(sample("mlp"), tmp_path / "out.onnx", external_data=True)
    save(sample("cnn"), tmp_path / "out.onnx", external_data=True, overwrite=True)
    assert folder_listing(tmp_path) == {"out.onnx", "out.onnx.data"}
    assert_same_tensors(load(tmp_path / "out.onnx").model, sample("cnn"))


def test_save_never_writes_a_protected_external_data_file(tmp_path):
    source = save_with_external_data(sample("mlp"), tmp_path / "in.onnx", location="out.onnx.data")
    data = tmp_path / "out.onnx.data"
    before = data.read_bytes()
    protect = [source, data]  # what the CLI passes: the model and its data files
    with pytest.raises(OutputExistsError, match="out.onnx.data: it is the input model or one of its files"):
        save(sample("cnn"), tmp_path / "out.onnx", protect=protect, overwrite=True, external_data=True)
    assert not (tmp_path / "out.onnx").exists()  # refused before anything was written
    assert data.read_bytes() == before
    assert_same_tensors(load(source).model, sample("mlp"))


def test_sha256_of_loaded_file_matches_hashlib(tmp_path):
    for name in ("mlp", "tree", "messy"):
        path = SAMPLES / f"{name}.onnx"
        assert load(path).sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    built = helper.make_model(
        helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"])],
            "g",
            [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
            [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
        ir_version=10,
    )
    out = save(built, tmp_path / "relu.onnx")
    assert load(out).sha256 == hashlib.sha256(out.read_bytes()).hexdigest()


def test_tensor_payload_bytes_counts_every_storage_form_without_reading_raw_data():
    from shrinkray.io.limits import tensor_nbytes

    raw = numpy_helper.from_array(np.ones((3, 5), dtype=np.float32), "raw")  # raw_data, 60 bytes
    typed = helper.make_tensor("typed", onnx.TensorProto.FLOAT, [4], [1.0, 2.0, 3.0, 4.0])  # float_data, 16
    ints = helper.make_tensor("ints", onnx.TensorProto.INT64, [2], [7, 8])  # int64_data, 16
    half = numpy_helper.from_array(np.ones(3, dtype=np.float16), "half")  # raw, 6
    text = helper.make_tensor("text", onnx.TensorProto.STRING, [2], [b"abc", b"de"])  # 5 bytes of text
    const = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.zeros(7, np.int8), "c"))  # 7
    graph = helper.make_graph(
        [const, helper.make_node("Identity", ["raw"], ["y"])], "g", [],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3, 5])], [raw, typed, ints, half, text],
    )  # fmt: skip
    model = helper.make_model(graph)
    expected = {"raw": 60, "typed": 16, "ints": 16, "half": 6, "text": 5}
    for tensor in model.graph.initializer:
        assert tensor_nbytes(tensor) == expected[tensor.name], tensor.name
        if tensor.data_type != onnx.TensorProto.STRING:
            assert tensor_nbytes(tensor) == numpy_helper.to_array(tensor).nbytes
    assert tensor_nbytes(const.attribute[0].t) == 7
    assert sio.tensor_payload_bytes(model) == 60 + 16 + 16 + 6 + 5 + 7


# --------------------------------------------------------------------------- one atomic helper for every write


def test_outputs_are_written_all_or_none(tmp_path, monkeypatch):
    from shrinkray.errors import WriteError

    (tmp_path / "b.txt").write_text("old b")
    written = sio.write_outputs({tmp_path / "a.txt": b"new a", tmp_path / "b.txt": b"new b"})
    assert written == [tmp_path / "a.txt", tmp_path / "b.txt"]
    assert (tmp_path / "a.txt").read_text() == "new a" and (tmp_path / "b.txt").read_text() == "new b"

    def second_fails(path):
        raise OSError(28, "No space left on device", str(path))

    with pytest.raises(WriteError) as excinfo:
        sio.write_outputs({tmp_path / "a.txt": b"newer a", tmp_path / "c.txt": second_fails})
    assert str(excinfo.value) == (
        f"Could not write {tmp_path / 'c.txt'} (No space left on device). Nothing was written; check that the "
        "folder exists, is writable and has free space, or write elsewhere."
    )
    assert (tmp_path / "a.txt").read_text() == "new a", "the first output was not replaced alone"
    assert folder_listing(tmp_path) == {"a.txt", "b.txt"}


def test_a_read_only_folder_is_a_one_line_refusal(tmp_path):
    from shrinkray.errors import WriteError

    if os.geteuid() == 0:
        target = Path("/proc/shrinkray-test.onnx")  # root may write anywhere else
    else:
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
        target = folder / "out.onnx"
    with pytest.raises(WriteError) as excinfo:
        save(sample("mlp"), target)
    text = str(excinfo.value)
    assert text.startswith(f"Could not write {target} (") and "\n" not in text and ".shrinkray-" not in text


@pytest.mark.parametrize("force", [False, True])
def test_an_output_that_is_a_folder_is_refused(tmp_path, force):
    (tmp_path / "out").mkdir()
    with pytest.raises(OutputExistsError, match="is a folder. Give a file name with -o"):
        save(sample("mlp"), tmp_path / "out", overwrite=force)


def test_staging_folders_of_dead_processes_are_swept(tmp_path):
    dead = tmp_path / f"{sio.STAGING_PREFIX}999999999-x"
    dead.mkdir()
    (dead / "half.onnx").write_bytes(b"half")
    mine = tmp_path / f"{sio.STAGING_PREFIX}{os.getpid()}-busy"
    mine.mkdir()
    sio.write_bytes_atomic(tmp_path / "r.json", b"{}")
    assert folder_listing(tmp_path) == {"r.json", mine.name}


_WRITE_SLOWLY = r"""
import signal, sys, time
from pathlib import Path
from shrinkray.io.files import write_outputs

# a suite started in the background (`pytest &`, nohup) hands its children SIGINT ignored, and Python then
# installs no KeyboardInterrupt handler: restore the interactive default the test is about
signal.signal(signal.SIGINT, signal.default_int_handler)

target = Path(sys.argv[1])

def slowly(path):
    with open(path, "wb") as fh:
        fh.write(b"partial")
        fh.flush()
        print("writing", flush=True)
        time.sleep(60)

write_outputs({target.with_name("first.json"): b"{}", target: slowly})
"""


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT"])
def test_a_signal_during_a_write_leaves_nothing(tmp_path, how):
    import signal

    process = subprocess.Popen([sys.executable, "-c", _WRITE_SLOWLY, str(tmp_path / "out.bin")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert process.stdout.readline().strip() == "writing"
    assert any(p.name.startswith(sio.STAGING_PREFIX) for p in tmp_path.iterdir())
    process.send_signal(getattr(signal, how))
    _, err = process.communicate(timeout=30)
    assert process.returncode != 0
    assert ("Terminated" if how == "SIGTERM" else "KeyboardInterrupt") in err
    assert folder_listing(tmp_path) == set(), "the staging folder and its partial files were removed"


def test_reading_a_file_does_not_reserve_the_size_limit(tmp_path):
    """read(limit) reserves the limit up front: under a worker's address-space cap every load failed."""
    path = tmp_path / "m.onnx"
    onnx.save(sample("mlp"), str(path))
    code = (
        "import resource, sys\n"
        "from shrinkray.io.files import load\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
        "print(load(sys.argv[1], max_file_bytes=8 << 30).file_bytes)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-1500:]
    assert int(done.stdout) == path.stat().st_size


def test_several_models_are_saved_all_or_none(tmp_path, monkeypatch):
    from shrinkray.errors import WriteError

    real = sio.write_model_pieces
    calls = []

    def second_fails(model, path):
        calls.append(path.name)
        if len(calls) == 2:
            raise OSError(28, "No space left on device", str(path))
        real(model, path)

    monkeypatch.setattr(sio, "write_model_pieces", second_fails)
    with pytest.raises(WriteError, match=r"Could not write .*b\.onnx \(No space left on device\)"):
        sio.save_all([(sample("mlp"), tmp_path / "a.onnx"), (sample("cnn"), tmp_path / "b.onnx")])
    assert folder_listing(tmp_path) == set(), "a.onnx was not left alone"
    monkeypatch.setattr(sio, "write_model_pieces", real)
    written = sio.save_all([(sample("mlp"), tmp_path / "a.onnx"), (sample("cnn"), tmp_path / "b.onnx")])
    assert [p.name for p in written] == ["a.onnx", "b.onnx"] and folder_listing(tmp_path) == {"a.onnx", "b.onnx"}
    with pytest.raises(OutputExistsError, match="Two outputs would be written to the same file"):
        sio.save_all([(sample("mlp"), tmp_path / "c.onnx"), (sample("cnn"), tmp_path / "c.onnx")])


# ------------------------------------------------------------------ writing a model in pieces


@pytest.mark.parametrize("name", sorted(p.stem for p in SAMPLES.glob("*.onnx")))
def test_serialized_pieces_are_the_bytes_of_serialize_to_string(name):
    from shrinkray.io.files import serialized_pieces

    model = sample(name)
    assert b"".join(serialized_pieces(model)) == model.SerializeToString()


def test_pieces_hold_one_initializer_at_a_time_and_keep_unknown_fields():
    from shrinkray.io.files import serialized_pieces

    model = sample("transformer")
    pieces = list(serialized_pieces(model))
    assert len(pieces) == len(model.graph.initializer) + 2
    largest = max(t.ByteSize() for t in model.graph.initializer)
    assert largest < model.ByteSize() / 2 and max(map(len, pieces)) <= largest + 16_384  # nodes are small
    # field 11, which this onnx does not define (a newer exporter's): only the one-piece serializer keeps it
    unknown = onnx.ModelProto.FromString(model.SerializeToString() + bytes([11 << 3 | 0, 1]))
    assert b"".join(serialized_pieces(unknown)) == unknown.SerializeToString()
    assert unknown.SerializeToString() != model.SerializeToString()


def test_write_model_pieces_writes_what_onnx_save_writes_and_never_overwrites(tmp_path):
    from shrinkray.io.files import write_model_pieces

    model = sample("cnn")
    onnx.save(model, tmp_path / "saved.onnx")
    write_model_pieces(model, tmp_path / "pieces.onnx")
    assert (tmp_path / "pieces.onnx").read_bytes() == (tmp_path / "saved.onnx").read_bytes()
    with pytest.raises(FileExistsError):
        write_model_pieces(model, tmp_path / "saved.onnx")
    assert (tmp_path / "saved.onnx").read_bytes() == (tmp_path / "pieces.onnx").read_bytes()

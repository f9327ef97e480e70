"""Large models on the command line: early refusal from the file sizes, and ``shrink -o NAME.zip``.

The models are tiny (about 2 MB, weights in external data); the limits are set low so that the same code
paths run as for a 2.5 GB model (bench/scaling.py runs those sizes).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from shrinkray import cli
from shrinkray.io.limits import planned_memory
from shrinkray.io.size_check import check_fits, model_size
from shrinkray.runs import jobs


def tiny_external_model(folder: Path, name: str = "model.onnx") -> Path:
    """x[1,64] -> MatMul w1[64,512] -> Relu -> MatMul w2[512,64]; weights in NAME.data (about 260 KB)."""
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((64, 512)) * 0.05).astype(np.float32)
    w2 = (rng.standard_normal((512, 64)) * 0.05).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["y"])],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=name + ".data", size_threshold=1024)  # fmt: skip
    return path


def zip_folder(folder: Path, target: Path) -> Path:
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as zf:
        for f in sorted(folder.iterdir()):
            zf.write(f, f"{folder.name}/{f.name}")
    return target


def outputs(path: Path) -> np.ndarray:
    x = np.random.default_rng(3).standard_normal((1, 64)).astype(np.float32)
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_model_size_reads_files_not_tensors(tmp_path: Path) -> None:
    path = tiny_external_model(tmp_path / "m")
    data = path.with_name("model.onnx.data")
    size = model_size(path)
    assert size is not None and size.external
    assert size.bytes == path.stat().st_size + data.stat().st_size
    zipped = model_size(zip_folder(tmp_path / "m", tmp_path / "m.zip"))
    assert zipped == size  # the zip's members, unpacked


def test_an_inline_model_zipped_with_other_files_is_not_taken_for_external_data(tmp_path: Path) -> None:
    inline = onnx.load(str(tiny_external_model(tmp_path / "src")))  # loads the weights back inline
    folder = tmp_path / "inline"
    folder.mkdir()
    onnx.save_model(inline, str(folder / "model.onnx"))
    (folder / "README.txt").write_bytes(b"notes " * 50_000)  # larger than the graph
    size = model_size(zip_folder(folder, tmp_path / "inline.zip"))
    assert size is not None and not size.external  # streaming could not help: save it with external data
    assert size.bytes == sum(f.stat().st_size for f in folder.iterdir())


def test_compare_refuses_before_reading_the_model(tmp_path: Path, monkeypatch, capsys) -> None:
    path = tiny_external_model(tmp_path / "m")
    monkeypatch.setenv("SHRINKRAY_MAX_MEMORY_BYTES", "100KiB")

    def no_worker(*args, **kwargs):
        raise AssertionError("the model was handed to a worker before the refusal")

    monkeypatch.setattr(cli, "run_capped", no_worker)
    assert cli.main(["compare", str(path)]) == 1
    err = capsys.readouterr().err
    size = model_size(path).bytes
    assert "This model is " in err and "comparing needs about" in err and "more than this server allows" in err
    assert "--methods weights-int8,float16" in err and "tensor by tensor" in err
    assert planned_memory(size) > 100 * 1024
    assert err.count("\n") == 1  # one line, no traceback


def test_compare_of_methods_that_stream_plans_one_session_at_a_time(tmp_path: Path, monkeypatch, capsys) -> None:
    path = tiny_external_model(tmp_path / "m")
    size = model_size(path).bytes
    assert planned_memory(size, streamed=True) < 3 * size < planned_memory(size)
    monkeypatch.setenv("SHRINKRAY_MAX_MEMORY_BYTES", str(3 * size))
    assert cli.main(["compare", str(path), "--methods", "weights-int8,palettize"]) == 1  # palettize: in memory
    assert "comparing needs about" in capsys.readouterr().err
    report = tmp_path / "report.json"
    assert cli.main(["compare", str(path), "--methods", "weights-int8,float16", "--no-latency", "--json",
                     str(report)]) == 0  # fmt: skip
    import json

    variants = json.loads(report.read_text())["variants"][1:]  # the original first
    assert [v["key"] for v in variants] == ["weights-int8", "float16"]
    assert all("tensor by tensor" in " ".join(v["notes"]) for v in variants)


def test_in_memory_method_refused_early_but_weights_int8_streams(tmp_path: Path, monkeypatch, capsys) -> None:
    path = tiny_external_model(tmp_path / "m")
    monkeypatch.setenv("SHRINKRAY_MAX_MEMORY_BYTES", "100KiB")
    assert cli.main(["shrink", str(path), "-m", "palettize", "-o", str(tmp_path / "p.onnx")]) == 1
    assert "shrinking it with palettize needs about" in capsys.readouterr().err
    assert not (tmp_path / "p.onnx").exists()
    assert cli.main(["shrink", str(path), "-m", "float16", "-o", str(tmp_path / "f16.onnx")]) == 0  # streams too
    assert (tmp_path / "f16.onnx.data").is_file()
    assert cli.main(["shrink", str(path), "-m", "weights-int8", "-o", str(tmp_path / "int8.onnx")]) == 0
    assert (tmp_path / "int8.onnx.data").is_file()


def test_single_file_model_is_told_to_use_external_data(tmp_path: Path) -> None:
    path = tiny_external_model(tmp_path / "m")
    single = tmp_path / "single.onnx"
    onnx.save_model(onnx.load(str(path)), str(single))
    size = model_size(single)
    assert size is not None and not size.external
    from shrinkray.errors import LimitExceededError
    from shrinkray.io.limits import Limits

    with pytest.raises(LimitExceededError) as info:
        check_fits(size, "comparing", limits=Limits.from_env({}, max_memory_bytes=1024))
    assert info.value.setting == "external_data" and "external data" in info.value.hint


@pytest.mark.parametrize("source", ["folder", "zip"])
def test_shrink_to_zip_is_stored_and_loads_back_like_the_pair(tmp_path: Path, source: str, capsys) -> None:
    path = tiny_external_model(tmp_path / "m")
    model_arg = path if source == "folder" else zip_folder(tmp_path / "m", tmp_path / "m.zip")
    pair = tmp_path / "pair" / "model.int8.onnx"
    pair.parent.mkdir()
    assert cli.main(["shrink", str(model_arg), "-m", "weights-int8", "-o", str(pair)]) == 0
    out = tmp_path / "out.zip"
    assert cli.main(["shrink", str(model_arg), "-m", "weights-int8", "-o", str(out)]) == 0
    assert "out.zip" in capsys.readouterr().out
    with zipfile.ZipFile(out) as zf:
        infos = {i.filename: i for i in zf.infolist()}
        assert set(infos) == {"out.onnx", "out.onnx.data"}
        assert all(i.compress_type == zipfile.ZIP_STORED for i in infos.values())
        zf.extractall(tmp_path / "unzipped")
    unzipped = tmp_path / "unzipped" / "out.onnx"
    # the graph names its data file by the inner name, so the unzipped pair loads as it is
    np.testing.assert_array_equal(outputs(unzipped), outputs(pair))
    assert not list((tmp_path).glob(".shrinkray-*"))  # no staging left behind
    assert cli.main(["shrink", str(model_arg), "-m", "weights-int8", "-o", str(out)]) == 1  # never overwritten


def test_zip_output_of_an_in_memory_method(tmp_path: Path) -> None:
    path = tiny_external_model(tmp_path / "m")
    single = tmp_path / "single.onnx"
    onnx.save_model(onnx.load(str(path)), str(single))
    _, written, written_bytes, _ = jobs.shrink_job(single, tmp_path / "f16.zip", "float16", {}, False,
                                                   str(tmp_path / "scratch"))  # fmt: skip
    assert written == tmp_path / "f16.zip" and written.stat().st_size == written_bytes
    with zipfile.ZipFile(written) as zf:
        assert zf.namelist() == ["f16.onnx"]


@pytest.mark.parametrize("location", ["a\0b", "x" * 5000])
def test_model_size_of_a_hostile_location_is_not_a_traceback(tmp_path: Path, location: str, capsys) -> None:
    """A data file name the OS cannot take (NUL byte, too long) is the loader's to refuse, in its words."""
    path = tiny_external_model(tmp_path / "m")
    model = onnx.load(str(path), load_external_data=False)
    for entry in model.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = location
    path.write_bytes(model.SerializeToString())
    size = model_size(path)
    assert size is not None and size.external
    assert cli.main(["compare", str(path), "--no-latency"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1

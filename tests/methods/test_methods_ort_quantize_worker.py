"""The quantizer child measures what it did to each weight (the parent holds none of the floats)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import sample_path
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization.shape_inference import quant_pre_process

import shrinkray
from shrinkray.methods import ort_quantize_worker as worker


def _model(initializers: dict[str, np.ndarray], **graph_args) -> onnx.ModelProto:
    graph = helper.make_graph([], "g", [], [], [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    return helper.make_model(graph)


def test_changes_are_measured_against_what_the_quantizer_saw():
    # What the quantizer child reports: per original weight its quantized base (renamed by pre-processing
    # or not), channel axis, stored bytes and error against the pre-processed floats, which may differ.
    from shrinkray.methods.dynamic_int8 import measure_changes

    rng = np.random.default_rng(0)
    kept, folded = (rng.normal(0, 0.3, size=(8, 16)).astype(np.float32) for _ in range(2))
    scale = np.float32(0.05)
    codes = {name: np.clip(np.rint(v / scale), -127, 127).astype(np.int8) for name, v in
             (("kept", kept), ("Fused_folded", folded * 3))}  # fmt: skip
    quantized = _model({**{f"{n}_quantized": c for n, c in codes.items()},
                        **{f"{n}_scale": np.array(scale) for n in codes}})  # fmt: skip
    original = _model({"kept": kept, "folded": folded, "bias": np.zeros(4, np.float32)})
    pre = _model({"kept": kept, "Fused_folded": folded * 3})
    records = {r["name"]: r for r in measure_changes(original, quantized, pre)}
    assert sorted(records) == ["folded", "kept"]  # the bias was not quantized
    assert records["folded"]["base"] == "Fused_folded" and records["kept"]["base"] == "kept"
    scale_bytes = next(t for t in quantized.graph.initializer if t.name == "kept_scale").ByteSize()
    assert records["kept"]["axis"] is None and records["kept"]["stored"] == 8 * 16 + scale_bytes
    for name, reference in (("kept", kept), ("folded", folded * 3)):
        decoded = codes["kept" if name == "kept" else "Fused_folded"].astype(np.float32) * scale
        expected = np.sqrt(np.mean((reference - decoded) ** 2))
        assert records[name]["stats"]["rms_error"] == pytest.approx(expected, rel=1e-5)
    # judged against the unfolded original instead, the same codes look ~40x worse
    unfolded = {r["name"]: r for r in measure_changes(original, quantized, None)}
    assert unfolded["folded"]["stats"]["rms_error"] > 10 * records["folded"]["stats"]["rms_error"]


@pytest.mark.slow
def test_a_transposed_gemm_weight_is_judged_against_what_the_quantizer_saw():
    rng = np.random.default_rng(1)
    weight = rng.normal(0, 0.2, (32, 64)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="gemm", transB=1)], "gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(np.zeros(32, np.float32), "b")],
    )  # fmt: skip
    variant = shrinkray.shrink(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), "dynamic-int8")
    [change] = variant.changes
    assert change.name == "w" and change.shape == [32, 64]
    assert 0 < change.relative_rms_error < 0.02  # int8 per-tensor of a normal weight: ~0.7%


# dynamic-int8's pre-processing, step by step (issue 27): ONNX Runtime's quant_pre_process keeps three intermediate
# copies of the model in its temporary folder until it ends (3.5x the model, the peak of a 100 MB run's disk); ours
# removes the optimizer's file once read and keeps the rest in memory, and must give the same model.

@pytest.mark.parametrize("name", ["cnn", "transformer", "rnn", "subgraph", "shared_weight"])
def test_the_step_by_step_pre_processing_is_onnx_runtimes(name, tmp_path):
    ours, theirs = tmp_path / "ours" / "pre.onnx", tmp_path / "theirs.onnx"
    ours.parent.mkdir()
    assert worker._preprocess_in_memory_fits(str(sample_path(name)))
    worker.preprocess(str(sample_path(name)), str(ours))
    quant_pre_process(str(sample_path(name)), str(theirs))
    assert ours.read_bytes() == theirs.read_bytes()
    assert [p.name for p in ours.parent.iterdir()] == ["pre.onnx"]  # the optimizer's file is gone


def test_models_it_does_not_handle_are_left_to_onnx_runtime(tmp_path):
    old = onnx.load(str(sample_path("mlp")))
    old.opset_import[0].version = 10  # ORT rewrites Upsample and converts the opset first
    path = tmp_path / "old.onnx"
    onnx.save(old, str(path))
    assert not worker._preprocess_in_memory_fits(str(path))
    external = tmp_path / "ext" / "model.onnx"
    external.parent.mkdir()
    onnx.save(onnx.load(str(sample_path("mlp"))), str(external), save_as_external_data=True, location="w.data")
    assert not worker._preprocess_in_memory_fits(str(external))


# dynamic-int8's child on a model given through a pipe (issue 27): nothing but the quantized model on disk, and
# the very bytes the file route gives (ONNX Runtime's reloads made in memory, tensors marked as its files mark them).

def _quantized(name: str, piped: bool, monkeypatch) -> tuple[bytes, list, list]:
    from shrinkray.methods import dynamic_int8

    real = dynamic_int8.fits_in_memory
    monkeypatch.setattr(dynamic_int8, "fits_in_memory", real if piped else (lambda _model: False))
    variant = shrinkray.shrink(shrinkray.load(sample_path(name)), "dynamic-int8")
    return variant.model.SerializeToString(), [(c.name, c.relative_rms_error) for c in variant.changes], variant.notes


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer", "rnn", "shared_weight", "messy"])
def test_a_model_piped_to_the_quantizer_gives_the_bytes_its_files_give(name, monkeypatch):
    assert _quantized(name, True, monkeypatch) == _quantized(name, False, monkeypatch)


@pytest.mark.slow
def test_the_piped_quantizer_writes_nothing_but_its_output(tmp_path, monkeypatch):
    """Every file the child makes in its folder is listed as it appears: the spec, the optimizer's pipe, the
    quantized model and the result; no copy of the model (input, pre-processed, optimized, reloads)."""
    import os
    import subprocess

    from shrinkray.methods import dynamic_int8

    seen: set[str] = set()
    real_run = subprocess.run

    def watching(args, cwd=None, **kwargs):
        import threading

        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                for root, _, files in os.walk(cwd):
                    seen.update(os.path.relpath(os.path.join(root, f), cwd) for f in files)
                done.wait(0.005)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            return real_run(args, cwd=cwd, **kwargs)
        finally:
            done.set()
            watcher.join()

    monkeypatch.setattr(dynamic_int8.subprocess, "run", watching)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    variant = shrinkray.shrink(shrinkray.load(sample_path("transformer")), "dynamic-int8")
    assert variant.changes
    assert seen and seen <= {"spec.json", "optimized.onnx", "quantized.onnx", "result.json"}, seen


def test_a_pipe_no_writer_opens_ends_its_reader(tmp_path):
    """ONNX Runtime failing before it writes the optimized model must not leave the reader waiting."""
    with pytest.raises(OSError, match="wrote no model"), worker._written_to_memory(tmp_path / "p.onnx"):
        pass
    assert not (tmp_path / "p.onnx").exists()

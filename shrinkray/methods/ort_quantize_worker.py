"""Runs ONNX Runtime's pre-processing and quantize_dynamic in a child process.

Both write scratch files into the current directory when they fail
(``sym_shape_infer_temp.onnx`` and uuid-named ``.data`` files), and they can
crash the interpreter on odd graphs. The parent starts this worker with the
working directory set to a private temporary folder, so nothing lands next to
the user's files, and a crash becomes a clear error instead of a dead app.

Usage: python -m shrinkray.methods.ort_quantize_worker SPEC.json
The spec names the input/output files and options; a null input means the model's bytes come on standard
input, and then nothing but the quantized model is written to disk: the pre-processing keeps its models in
memory (ONNX Runtime's optimizer writes into a pipe) and the quantizer's shape-inference reloads are made in
memory. ONNX Runtime's own steps each wrote a copy of the model (input, pre-processed, optimized, two reloads:
3.5x the model at once), the peak of a 100 MB run's disk (issue 27). A result JSON is written
next to it with ``preprocess_error`` / ``quantize_error`` (or null) and, when the
quantizer succeeded, ``changes``: each rewritten weight's error against what the
quantizer saw, measured here so that the parent never loads the pre-processed
model or the weights' floats beside its own (issue 12, measured 2026-11-27; docs/benchmarks.md "Speed and memory").
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
from pathlib import Path


def run(spec: dict) -> dict:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from shrinkray.methods.ort_per_channel import vectorized  # start-up: ONNX Runtime's quantizer is loaded here

    logging.getLogger().setLevel(logging.ERROR)
    original = None
    if spec["input"] is None:  # the model's bytes on standard input: every step in memory
        import onnx

        original = onnx.load_from_string(sys.stdin.buffer.read())
    result: dict = {"preprocess_error": None, "quantize_error": None, "preprocessed": False}
    source = spec["input"] if original is None else original
    if spec["preprocess"] != "off":
        try:
            source = _preprocessed(spec, original)
            result["preprocessed"] = True
        except Exception as exc:  # noqa: BLE001 - pre-processing raises anything
            result["preprocess_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            if spec["preprocess"] == "on":
                return result
    try:
        with reloads_in_memory() if original is not None else contextlib.nullcontext(), vectorized():
            quantize_dynamic(
                source,
                spec["output"],
                op_types_to_quantize=spec["op_types"] or None,
                per_channel=spec["per_channel"],
                reduce_range=spec["reduce_range"],
                weight_type=QuantType.QInt8 if spec["weight_type"] == "int8" else QuantType.QUInt8,
                nodes_to_exclude=spec["exclude_nodes"] or None,
                use_external_data_format=spec["external"],
            )
    except Exception as exc:  # noqa: BLE001 - the quantizer raises anything
        result["quantize_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        return result
    pre = source if result["preprocessed"] else None
    result["changes"] = _changes(spec["input"] if original is None else original, spec["output"], pre)
    return result


def _preprocessed(spec: dict, original):
    """The pre-processed model: in memory for a model given so, else its file (ONNX Runtime's own function for
    models over 2 GB or at opset 10 and older, our step-by-step one otherwise)."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    if original is not None:
        return preprocessed(original, Path(spec["output"]).parent)
    if spec["external"] or not _preprocess_in_memory_fits(spec["input"]):
        quant_pre_process(spec["input"], spec["preprocessed"], save_as_external_data=spec["external"])
    else:
        preprocess(spec["input"], spec["preprocessed"])
    return spec["preprocessed"]


@contextlib.contextmanager
def reloads_in_memory():
    """ONNX Runtime's quantizer with its shape-inference reload (``save_and_reload_model_with_shape_infer``:
    the model saved with external data into a temporary folder, shape-inferred there and loaded back) made in
    memory: the same inference, and the same tensors marked as loaded from external data, so the quantized
    model is byte for byte the one its files give (tests/methods/test_methods_ort_quantize_worker.py). Only
    for a model protobuf can hold (under 2 GB), as the caller's own check ensures."""
    from onnxruntime.quantization import base_quantizer, onnx_quantizer, quantize

    modules = [m for m in (quantize, onnx_quantizer, base_quantizer) if hasattr(m, "save_and_reload_model_with_shape_infer")]
    saved = [m.save_and_reload_model_with_shape_infer for m in modules]
    for module in modules:
        module.save_and_reload_model_with_shape_infer = _reload_in_memory
    try:
        yield
    finally:
        for module, function in zip(modules, saved, strict=True):
            module.save_and_reload_model_with_shape_infer = function


#: onnx saves a tensor's raw data as external data from this many bytes (``sys.getsizeof``), and marks it as
#: loaded (``data_location`` DEFAULT) when it reads it back.
EXTERNAL_SIZE_THRESHOLD = 1024


def _reload_in_memory(model):
    """What ``save_and_reload_model_with_shape_infer`` returns, without its files (see :func:`reloads_in_memory`)."""
    from onnxruntime.quantization.quant_utils import add_infer_metadata

    inferred = infer_shapes_light(model, marked_loaded=True)
    add_infer_metadata(inferred)
    return inferred


#: Where a tensor set aside by :func:`infer_shapes_light` points while shape inference runs (no such file).
HELD = "shrinkray-held-in-memory"


def infer_shapes_light(model, *, marked_loaded: bool = False):
    """onnx's shape inference of ``model`` with the bytes of its large initializers set aside, as ONNX Runtime's
    file route gives it a model saved with external data: the same inferred graph without serializing and
    parsing the weights twice (0.8 s of a 100 MB model's 2.2 s pre-processing, measured 2026-12-06). The bytes go
    back into ``model`` as they were and into the inferred copy, there marked as loaded from external data
    (``data_location`` DEFAULT) when ``marked_loaded``, as onnx marks tensors it reads back from files."""
    import onnx

    from shrinkray.graph.weights import iter_graphs  # start-up: as measure_changes below

    held: list[tuple[bytes, bool]] = []
    for _, graph in iter_graphs(model.graph):  # every graph's initializers, as onnx's external-data helper walks
        for tensor in graph.initializer:
            if not tensor.HasField("raw_data"):
                continue
            data = tensor.raw_data  # read once: each read copies the bytes
            if sys.getsizeof(data) >= EXTERNAL_SIZE_THRESHOLD:
                held.append((data, tensor.HasField("data_location")))
                tensor.ClearField("raw_data")
                tensor.data_location = onnx.TensorProto.EXTERNAL
                tensor.external_data.add(key="location", value=HELD)
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    finally:
        _put_back(model, held, marked_loaded=False)
    _put_back(inferred, held, marked_loaded=marked_loaded)
    return inferred


def _put_back(model, held: list[tuple[bytes, bool]], *, marked_loaded: bool) -> None:
    """The bytes :func:`infer_shapes_light` set aside, back in ``model``'s tensors in the order they were taken;
    ``data_location`` as it was, or DEFAULT when ``marked_loaded``."""
    import onnx

    from shrinkray.graph.weights import iter_graphs  # start-up: as measure_changes below

    taken = iter(held)
    for _, graph in iter_graphs(model.graph):
        for tensor in graph.initializer:
            if len(tensor.external_data) == 1 and tensor.external_data[0].value == HELD:
                data, had_location = next(taken)
                del tensor.external_data[:]
                tensor.raw_data = data
                tensor.ClearField("data_location")
                if marked_loaded or had_location:
                    tensor.data_location = onnx.TensorProto.DEFAULT


def _preprocess_in_memory_fits(path: str) -> bool:
    """``dynamic_int8.fits_in_memory`` of the model in the file at ``path``."""
    import onnx

    from shrinkray.methods.dynamic_int8 import fits_in_memory  # start-up: as measure_changes below

    return fits_in_memory(onnx.load(path, load_external_data=False))


def preprocess(path: str, output: str) -> None:
    """ONNX Runtime's ``quant_pre_process`` for a one-file model into ``output``, its steps in its order with its
    settings (symbolic shape inference, ONNX Runtime's basic optimizations, ONNX shape inference), the
    optimizer's model read through a pipe and the rest in memory. ORT's own keeps three intermediate files until it
    ends: 3.5x the model on disk beside our input copy, the peak of a 100 MB run's disk (issue 27)."""
    import onnx

    onnx.save(preprocessed(onnx.load(path), Path(output).parent), output)


def preprocessed(original, folder: Path):
    """:func:`preprocess` of a model in memory, returned in memory (``original`` is not changed): ONNX Runtime's
    optimizer writes its model into a pipe in ``folder``, read here as it is written."""
    import onnx
    import onnxruntime
    from onnxruntime.quantization.quant_utils import add_pre_process_metadata
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    model = SymbolicShapeInference.infer_shapes(original, 2**31 - 1, False, False, 0)
    try:
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
        with _written_to_memory(folder / "optimized.onnx") as (path, written):
            options.optimized_model_filepath = str(path)
            session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                                   providers=["CPUExecutionProvider"])  # fmt: skip
            del session
        model = onnx.load_from_string(written[0])  # as ORT's: when the optimizer fails, the shape-inferred model goes on
    except Exception:  # noqa: BLE001, S110 - ORT's pre-processing logs and carries on too
        pass
    model = infer_shapes_light(model)
    add_pre_process_metadata(model)
    return model


@contextlib.contextmanager
def _written_to_memory(path: Path):
    """A named pipe at ``path`` and the bytes a writer puts through it (read in a thread as they come: nothing
    reaches the disk). Leaving it ends the reader whether or not anything opened the pipe, and removes it."""
    os.mkfifo(path)
    written: list[bytes] = []

    def read() -> None:
        with open(path, "rb") as pipe:
            written.append(pipe.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield path, written
    finally:
        while reader.is_alive():  # no writer came (ONNX Runtime failed first): end the reader's wait on the pipe
            with contextlib.suppress(OSError):  # (no reader in open() yet: try again once it is)
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            reader.join(0.01)
        path.unlink(missing_ok=True)
    if not written or not written[0]:
        raise OSError("ONNX Runtime's optimizer wrote no model")


def _changes(original, quantized: str, preprocessed) -> list[dict]:
    """What the quantizer did to each original weight (``dynamic_int8.measure_changes``), measured here,
    where the three models are at hand, so the parent never holds their floats beside its own model.
    ``original`` and ``preprocessed``: models or their files."""
    import onnx

    from shrinkray.methods.dynamic_int8 import measure_changes  # start-up: the child quantizes first, measures after

    def loaded(model):
        return onnx.load(model) if isinstance(model, str) else model

    pre = loaded(preprocessed) if preprocessed is not None else None
    return measure_changes(loaded(original), onnx.load(quantized), pre)


def main() -> None:
    spec_path = Path(sys.argv[1])
    spec = json.loads(spec_path.read_text())
    result = run(spec)
    spec_path.with_name("result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()

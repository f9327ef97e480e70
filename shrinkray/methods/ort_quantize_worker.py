"""Runs ONNX Runtime's pre-processing and quantize_dynamic in a child process.

Both write scratch files into the current directory when they fail
(``sym_shape_infer_temp.onnx`` and uuid-named ``.data`` files), and they can
crash the interpreter on odd graphs. The parent starts this worker with the
working directory set to a private temporary folder, so nothing lands next to
the user's files, and a crash becomes a clear error instead of a dead app.

Usage: python -m shrinkray.methods.ort_quantize_worker SPEC.json
The spec names the input/output files and options; a result JSON is written
next to it with ``preprocess_error`` / ``quantize_error`` (or null) and, when the
quantizer succeeded, ``changes``: each rewritten weight's error against what the
quantizer saw, measured here so that the parent never loads the pre-processed
model or the weights' floats beside its own (issue 12, measured 2026-11-27; docs/benchmarks.md "Speed and memory").
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path


def run(spec: dict) -> dict:
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    logging.getLogger().setLevel(logging.ERROR)
    result: dict = {"preprocess_error": None, "quantize_error": None, "preprocessed": False}
    source = spec["input"]
    if spec["preprocess"] != "off":
        try:
            if spec["external"] or not _preprocess_in_memory_fits(source):
                quant_pre_process(source, spec["preprocessed"], save_as_external_data=spec["external"])
            else:
                preprocess(source, spec["preprocessed"])
            source = spec["preprocessed"]
            result["preprocessed"] = True
        except Exception as exc:  # noqa: BLE001 - pre-processing raises anything
            result["preprocess_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            if spec["preprocess"] == "on":
                return result
    try:
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
    result["changes"] = _changes(spec["input"], spec["output"], source if result["preprocessed"] else None)
    return result


def _preprocess_in_memory_fits(path: str) -> bool:
    """A one-file model (under protobuf's 2 GB and with no external data) whose opset needs no Upsample rewrite
    (ONNX Runtime's pre-processing converts opsets up to 10 first: left to it)."""
    import onnx

    header = onnx.load(path, load_external_data=False)
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in header.graph.initializer):
        return False
    onnx_opsets = [o.version for o in header.opset_import if o.domain in ("", "ai.onnx")]
    return len(onnx_opsets) == 1 and onnx_opsets[0] > 10


def preprocess(path: str, output: str) -> None:
    """ONNX Runtime's ``quant_pre_process`` for a one-file model into ``output``, its steps in its order with its
    settings (symbolic shape inference, ONNX Runtime's basic optimizations, ONNX shape inference), the optimizer's
    file removed as soon as it is read and the rest in memory. ORT's own keeps three intermediate files until it
    ends: 3.5x the model on disk beside our input copy, the peak of a 100 MB run's disk (issue 27)."""
    import onnx
    import onnxruntime
    from onnxruntime.quantization.quant_utils import add_pre_process_metadata
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    model = SymbolicShapeInference.infer_shapes(onnx.load(path), 2**31 - 1, False, False, 0)
    folder = Path(output).parent
    optimized = folder / "optimized.onnx"
    try:
        options = onnxruntime.SessionOptions()
        options.optimized_model_filepath = str(optimized)
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
        session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        del session
        model = onnx.load(str(optimized))  # as ORT's: when the optimizer fails, the shape-inferred model goes on
    except Exception:  # noqa: BLE001, S110 - ORT's pre-processing logs and carries on too
        pass
    finally:
        for written in folder.glob("optimized.onnx*"):
            written.unlink()
    model = onnx.shape_inference.infer_shapes(model)
    add_pre_process_metadata(model)
    onnx.save(model, output)


def _changes(original: str, quantized: str, preprocessed: str | None) -> list[dict]:
    """What the quantizer did to each original weight (``dynamic_int8.measure_changes``), measured here,
    where the three models are at hand, so the parent never holds their floats beside its own model."""
    import onnx

    from shrinkray.methods.dynamic_int8 import measure_changes  # start-up: the child quantizes first, measures after

    pre = onnx.load(preprocessed) if preprocessed is not None else None
    return measure_changes(onnx.load(original), onnx.load(quantized), pre)


def main() -> None:
    spec_path = Path(sys.argv[1])
    spec = json.loads(spec_path.read_text())
    result = run(spec)
    spec_path.with_name("result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()

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
            quant_pre_process(source, spec["preprocessed"], save_as_external_data=spec["external"])
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

"""Runs ONNX Runtime's pre-processing and quantize_dynamic in a child process.

Both write scratch files into the current directory when they fail
(``sym_shape_infer_temp.onnx`` and uuid-named ``.data`` files), and they can
crash the interpreter on odd graphs. The parent starts this worker with the
working directory set to a private temporary folder, so nothing lands next to
the user's files, and a crash becomes a clear error instead of a dead app.

Usage: python -m shrinkray.methods.ort_quantize_worker SPEC.json
The spec names the input/output files and options; a result JSON is written
next to it with ``preprocess_error`` / ``quantize_error`` (or null). When
pre-processing ran, the float weights it changed (folded, transposed, renamed)
that the quantizer then rewrote are saved to ``spec["saw"]``: the parent judges
each quantized weight against what the quantizer saw without loading the whole
pre-processed model beside its own (bench/results.md, "Compare peak memory").
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
    if result["preprocessed"]:
        try:
            _save_changed_weights(spec["input"], spec["preprocessed"], spec["output"], spec["saw"])
        except Exception:  # noqa: BLE001 - without it the parent judges against the original's values
            logging.getLogger(__name__).exception("could not save the pre-processed weights")
    return result


def _save_changed_weights(original: str, preprocessed: str, quantized: str, target: str) -> None:
    """The pre-processed float initializers the quantizer rewrote whose name or values the original lacks."""
    import onnx

    from shrinkray.graph import FLOAT_TYPES

    rewritten = {t.name[: -len("_quantized")] for t in onnx.load(quantized, load_external_data=False).graph.initializer
                 if t.name.endswith("_quantized")}  # fmt: skip
    before = {t.name: t for t in onnx.load(original).graph.initializer}
    changed = onnx.GraphProto(name="saw")
    for tensor in onnx.load(preprocessed).graph.initializer:
        if tensor.data_type not in FLOAT_TYPES or tensor.name not in rewritten:
            continue
        kept = before.get(tensor.name)
        if kept is None or kept.SerializeToString() != tensor.SerializeToString():
            changed.initializer.append(tensor)
    onnx.save(onnx.helper.make_model(changed), target)


def main() -> None:
    spec_path = Path(sys.argv[1])
    spec = json.loads(spec_path.read_text())
    result = run(spec)
    spec_path.with_name("result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()

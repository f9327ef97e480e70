"""Dynamic INT8: ONNX Runtime's ``quantize_dynamic``.

Weights become int8 and activations are quantized per batch at run time
(DynamicQuantizeLinear + MatMulInteger/ConvInteger). The file shrinks like
weights-int8, but the compute changes too: on many CPUs it is *slower* than
float, so its speed must be measured, never assumed.

Two things make the stock quantizer work on real exports: Constant-node
weights are first moved into initializers (the quantizer ignores Constant
nodes), and ONNX Runtime's pre-processing (shape inference) runs when it can
and is skipped, with a note, when it fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from shrinkray.errors import MethodError
from shrinkray.graph import FLOAT_TYPES, WeightRef, constants_to_initializers, find_weights
from shrinkray.io import needs_external_data, save
from shrinkray.methods.base import MethodOptions, MethodSpec, TensorChange, Variant, option, register, warn_if_damaged
from shrinkray.quant import error_stats
from shrinkray.validate import ORT_MAX_IR_VERSION

QUANTIZABLE_OPS = ["Conv", "MatMul", "Attention", "LSTM", "Gather", "EmbedLayerNormalization"]


@dataclass
class DynamicInt8Options(MethodOptions):
    weight_type: str = option("int8", "Data type of the quantized weights", choices=["int8", "uint8"])
    per_channel: bool = option(False, "One scale per output channel instead of one per tensor")
    reduce_range: bool = option(
        False, "Use 7-bit weights, which avoids overflow on some older x86 CPUs (VNNI-less AVX2)"
    )
    op_types: list[str] = field(
        default_factory=list,
        metadata={"help": "Op types to quantize (comma-separated; default: " + ", ".join(QUANTIZABLE_OPS) + ")"},
    )
    exclude_nodes: list[str] = field(
        default_factory=list, metadata={"help": "Node names to leave in float (comma-separated)"}
    )
    preprocess: str = option(
        "auto",
        "Run ONNX Runtime's pre-processing (shape inference) first: auto = try it and go on without it "
        "if it fails",
        choices=["auto", "on", "off"],
    )


def candidates(refs: list[WeightRef], options: DynamicInt8Options) -> list[WeightRef]:
    """Float weights in the main graph feeding an op the quantizer handles."""
    ops = set(options.op_types or QUANTIZABLE_OPS)
    return [
        r
        for r in refs
        if r.is_float and not r.scope and not r.is_graph_input and any(c.op_type in ops for c in r.consumers)
    ]


def _channel_axis(shape: tuple[int, ...], n_scales: int) -> int | None:
    if n_scales == 1:
        return None
    matches = [a for a, d in enumerate(shape) if d == n_scales]
    if not matches:
        return None
    return matches[-1] if len(shape) == 2 and matches[-1] == 1 else matches[0]


def _record_changes(
    before: dict[str, np.ndarray], refs: dict[str, WeightRef], result: onnx.ModelProto, variant: Variant
) -> None:
    inits = {t.name: t for t in result.graph.initializer}
    for name, original in before.items():
        q = inits.get(f"{name}_quantized")
        if q is None or name in inits:
            continue
        codes = numpy_helper.to_array(q).astype(np.float32)
        scale = numpy_helper.to_array(inits[f"{name}_scale"]).astype(np.float32).reshape(-1)
        zp_t = inits.get(f"{name}_zero_point")
        zero = numpy_helper.to_array(zp_t).astype(np.float32).reshape(-1) if zp_t is not None else np.zeros(1)
        axis = _channel_axis(codes.shape, scale.size)
        if axis is not None:
            shape = [1] * codes.ndim
            shape[axis] = scale.size
            scale, zero = scale.reshape(shape), zero.reshape(shape)
        decoded = (codes - zero) * scale
        if decoded.shape != original.shape and decoded.ndim == 2 and decoded.T.shape == original.shape:
            decoded = decoded.T  # pre-processing turned Gemm(transB=1) into MatMul on the transposed weight
        if decoded.shape != original.shape:
            variant.notes.append(f"'{name}' was reshaped by ONNX Runtime's pre-processing; its error is not shown")
            decoded = original
        extra = (zp_t.ByteSize() if zp_t is not None else 0) + inits[f"{name}_scale"].ByteSize()
        where = f"per-channel (axis {axis})" if axis is not None else "per-tensor"
        change = TensorChange.of(
            refs[name],
            bytes_after=len(q.raw_data) + extra,
            stats=error_stats(original, decoded),
            encoding=f"{variant.options['weight_type']} {where}, dynamic activations",
        )
        variant.changes.append(change)
        warn_if_damaged(variant, change)


#: The quantizer is given this long before it is stopped (large models take minutes).
WORKER_TIMEOUT_S = 1800


def _worker_env() -> dict[str, str]:
    """The child must import this very package, installed or not."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def _run_worker(model: onnx.ModelProto, options: DynamicInt8Options, variant: Variant) -> onnx.ModelProto:
    """Quantize in a child process whose working directory is a private temp folder."""
    external = needs_external_data(model)
    with tempfile.TemporaryDirectory(prefix="shrinkray-dyn-") as tmp:
        folder = Path(tmp)
        save(model, folder / "input.onnx")
        spec = {
            "input": str(folder / "input.onnx"),
            "preprocessed": str(folder / "pre.onnx"),
            "output": str(folder / "quantized.onnx"),
            "external": external,
            "preprocess": options.preprocess,
            "op_types": list(options.op_types),
            "exclude_nodes": list(options.exclude_nodes),
            "per_channel": options.per_channel,
            "reduce_range": options.reduce_range,
            "weight_type": options.weight_type,
        }
        (folder / "spec.json").write_text(json.dumps(spec))
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "shrinkray.methods.ort_quantize_worker", str(folder / "spec.json")],
                cwd=folder,
                env=_worker_env(),
                check=False,
                capture_output=True,
                text=True,
                timeout=WORKER_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            raise MethodError(
                f"ONNX Runtime's quantizer did not finish within {WORKER_TIMEOUT_S} s", "Try weights-int8"
            ) from None
        result_path = folder / "result.json"
        if proc.returncode != 0 or not result_path.exists():
            last = (proc.stderr.strip().splitlines() or ["no message"])[-1][:200]
            raise MethodError(
                f"ONNX Runtime's quantizer stopped with exit code {proc.returncode} ({last})",
                "Try weights-int8, which does not depend on ONNX Runtime's quantizer",
            )
        result = json.loads(result_path.read_text())
        if result["preprocess_error"]:
            if options.preprocess == "on":
                raise MethodError(
                    f"ONNX Runtime's pre-processing failed ({result['preprocess_error']})",
                    "Run with --preprocess auto or off",
                )
            variant.notes.append(
                f"ONNX Runtime's pre-processing failed ({result['preprocess_error'].split(':')[0]}); "
                "quantized without it"
            )
        if result["quantize_error"]:
            raise MethodError(
                f"ONNX Runtime's quantize_dynamic failed on this model ({result['quantize_error']})",
                "Try weights-int8, which does not depend on ONNX Runtime's quantizer",
            )
        return onnx.load(str(folder / "quantized.onnx"))


def apply(model: onnx.ModelProto, options: DynamicInt8Options) -> Variant:
    variant = Variant(method="dynamic-int8", options=options.as_dict(), model=model)
    moved = constants_to_initializers(model)
    if moved:
        variant.notes.append(f"Moved {len(moved)} Constant-node weights into initializers so they can be quantized")
    refs = {r.name: r for r in find_weights(model) if r.kind == "initializer" and not r.scope}
    before = {name: r.array() for name, r in refs.items() if r.dtype in FLOAT_TYPES}
    result = _run_worker(model, options, variant)
    result.ir_version = min(result.ir_version, ORT_MAX_IR_VERSION)
    variant.model = result
    _record_changes(before, refs, result, variant)
    if not variant.changes:
        variant.notes.append(
            "ONNX Runtime's quantizer found nothing to quantize: it handles "
            + ", ".join(QUANTIZABLE_OPS)
            + " with constant float weights"
        )
    return variant


register(
    MethodSpec(
        name="dynamic-int8",
        title="Dynamic INT8 (ONNX Runtime)",
        summary="ONNX Runtime's quantize_dynamic: int8 weights (about 4x smaller) and activations "
        "quantized per batch at run time; speed varies by CPU and must be measured.",
        options_type=DynamicInt8Options,
        apply=apply,
        candidates=candidates,
        position=1,
    )
)

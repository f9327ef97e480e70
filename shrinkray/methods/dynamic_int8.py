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

import contextlib
import logging
import tempfile
from collections.abc import Iterator
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


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The quantizer logs advice meant for its own examples; keep the CLI readable."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


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


def apply(model: onnx.ModelProto, options: DynamicInt8Options) -> Variant:
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    variant = Variant(method="dynamic-int8", options=options.as_dict(), model=model)
    moved = constants_to_initializers(model)
    if moved:
        variant.notes.append(f"Moved {len(moved)} Constant-node weights into initializers so they can be quantized")
    refs = {r.name: r for r in find_weights(model) if r.kind == "initializer" and not r.scope}
    before = {name: r.array() for name, r in refs.items() if r.dtype in FLOAT_TYPES}
    external = needs_external_data(model)
    with tempfile.TemporaryDirectory(prefix="shrinkray-dyn-") as tmp, _quiet():
        source = save(model, Path(tmp) / "input.onnx")
        if options.preprocess != "off":
            try:
                quant_pre_process(str(source), str(Path(tmp) / "pre.onnx"), save_as_external_data=external)
                source = Path(tmp) / "pre.onnx"
            except Exception as exc:  # noqa: BLE001 - pre-processing raises anything
                if options.preprocess == "on":
                    raise MethodError(
                        f"ONNX Runtime's pre-processing failed ({type(exc).__name__}: {str(exc)[:160]})",
                        "Run with --preprocess auto or off",
                    ) from None
                variant.notes.append(
                    f"ONNX Runtime's pre-processing failed ({type(exc).__name__}); quantized without it"
                )
        output = Path(tmp) / "quantized.onnx"
        try:
            quantize_dynamic(
                str(source),
                str(output),
                op_types_to_quantize=list(options.op_types) or None,
                per_channel=options.per_channel,
                reduce_range=options.reduce_range,
                weight_type=QuantType.QInt8 if options.weight_type == "int8" else QuantType.QUInt8,
                nodes_to_exclude=list(options.exclude_nodes) or None,
                use_external_data_format=external,
            )
        except Exception as exc:  # noqa: BLE001 - the quantizer raises anything
            raise MethodError(
                f"ONNX Runtime's quantize_dynamic failed on this model ({type(exc).__name__}: {str(exc)[:200]})",
                "Try weights-int8, which does not depend on ONNX Runtime's quantizer",
            ) from None
        result = onnx.load(str(output))
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

"""Weights-only 8-bit: large float weights stored as 8-bit codes, compute stays float.

Each selected tensor becomes int8 (symmetric) or uint8 (asymmetric) codes
plus float32 scales, per tensor or per output channel, and a few nodes that
rebuild the float tensor under its original name. The default decode form is
``Cast -> (Sub) -> Mul``, which ONNX Runtime constant-folds when the session
starts, so inference runs on plain float weights at the original speed.
``DequantizeLinear`` is available as an option for tools that expect it, but
ONNX Runtime does not fold it: it runs it on every inference (1.4x slower on a
MatMul chain with int8 codes) or fuses it with MatMul into MatMulNBits, which
quantizes activations, so optimized results drift from unoptimized ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from shrinkray.errors import MethodError
from shrinkray.graph.checks import default_opset
from shrinkray.graph.weights import FLOAT_TYPES, GraphEditor, NameAllocator, WeightRef, channel_axis, find_weights
from shrinkray.methods.base import (
    MethodSpec,
    TensorChange,
    TensorSelection,
    Variant,
    map_tensors,
    option,
    register,
    warn_if_damaged,
)
from shrinkray.methods.quant import (
    ErrorStats,
    LinearCodes,
    code_steps,
    fits_float32,
    quantize_linear,
    ranges_by_axis,
)


@dataclass
class WeightsInt8Options(TensorSelection):
    granularity: str = option(
        "per-channel",
        "per-channel: one scale per channel, along the output-channel axis or whichever axis loses least; "
        "per-tensor: one scale for the whole tensor",
        choices=["per-channel", "per-tensor"],
    )
    symmetric: bool = option(
        False,
        "Symmetric int8 codes around zero; off (default, lower error on real models): "
        "asymmetric uint8 codes with a zero point",
    )
    form: str = option(
        "cast-mul",
        "How the graph rebuilds float weights: cast-mul (folded by ONNX Runtime at load, no slowdown) "
        "or dequantize-linear (standard op; ONNX Runtime runs it at every inference or fuses it into "
        "MatMulNBits, which quantizes activations)",
        choices=["cast-mul", "dequantize-linear"],
    )
    levels: int = option(
        256,
        "Codes used of the 256 an 8-bit value holds (2-256): fewer keep the same stored size but a coarser "
        "step, and gzip / brotli then serve about log2(levels) bits per value (64: about 6 bits)",
        min=2,
        max=256,
    )


def _decode_nodes(codes: LinearCodes, target: int, form: str) -> tuple[dict[str, np.ndarray], object]:
    """Stored arrays and the builder of the nodes that decode them."""
    symmetric = codes.symmetric
    if form == "dequantize-linear":
        scale = codes.scale.reshape(-1) if codes.axis is not None else codes.scale.reshape(())
        zero = codes.zero_point.reshape(scale.shape)
        stored = {"q": codes.codes, "scale": scale, "zero_point": zero}
    else:
        stored = {"q": codes.codes, "scale": codes.scale}
        if not symmetric:
            stored["zero_point"] = codes.zero_point.astype(np.float32)

    def build(names: list[str], output: str, alloc: NameAllocator) -> list[onnx.NodeProto]:
        final = output if target == onnx.TensorProto.FLOAT else alloc.new(f"{output}__f32")
        nodes: list[onnx.NodeProto] = []
        if form == "dequantize-linear":
            attrs = {"axis": codes.axis} if codes.axis is not None else {}
            nodes.append(
                helper.make_node("DequantizeLinear", names, [final], name=alloc.new(f"{output}_dequant"), **attrs)
            )
        else:
            as_float = alloc.new(f"{output}__codes_f32")
            nodes.append(
                helper.make_node("Cast", [names[0]], [as_float], name=alloc.new(f"{output}_cast"), to=1)
            )
            if not symmetric:
                centred = alloc.new(f"{output}__centred")
                nodes.append(
                    helper.make_node("Sub", [as_float, names[2]], [centred], name=alloc.new(f"{output}_sub"))
                )
                as_float = centred
            nodes.append(helper.make_node("Mul", [as_float, names[1]], [final], name=alloc.new(f"{output}_mul")))
        if final != output:
            nodes.append(helper.make_node("Cast", [final], [output], name=alloc.new(f"{output}_to_type"), to=target))
        return nodes

    return stored, build


#: Per-channel scales must stay small next to the codes: at most one float32
#: scale per 64 values, so the scales add at most 1/16 to the int8 size.
MIN_VALUES_PER_SCALE = 64


def expected_noise(ranges: tuple[np.ndarray, np.ndarray], symmetric: bool, levels: int = 256) -> float:
    """Mean squared rounding error of 8-bit codes with one scale per slice of ``ranges``.

    Uniform rounding noise is scale^2 / 12 per value, so comparing
    mean(scale_c^2) across axes picks the best axis from min/max reductions
    (:func:`value_ranges`) alone, without quantizing once per candidate.
    """
    lo, hi = ranges
    if symmetric:
        scale = np.maximum(np.abs(lo), np.abs(hi)) / code_steps(levels, symmetric)
    else:
        scale = (np.maximum(hi, 0.0) - np.minimum(lo, 0.0)) / code_steps(levels, symmetric)
    return float(np.mean(np.square(scale)))


def best_codes(values: np.ndarray, ref: WeightRef, symmetric: bool, per_channel: bool = True,
               levels: int = 256) -> LinearCodes | None:  # fmt: skip
    """Codes per tensor, or per channel along the axis that loses least; None if ``values`` holds inf, NaN
    or (float64) values beyond float32's range.

    The weight is rebuilt as a whole float tensor before any op sees it, so
    any axis is valid: every axis is a candidate (the consumer's output-channel
    axis first), and the one with the least expected rounding noise wins (ties
    go to the consumer's axis; e.g. the input axis of a 1x1 Conv often wins).
    Axes whose scales would be too many for the codes they serve are skipped.
    Each candidate costs one min/max pass, and the winner's ranges are reused.
    """
    preferred = channel_axis(ref)
    others = [a for a in range(values.ndim) if a != preferred] if values.ndim >= 2 else []
    axes = ([preferred] if preferred is not None else []) + others
    axes = [a for a in axes if per_channel and values.size // max(values.shape[a], 1) >= MIN_VALUES_PER_SCALE]
    per_axis = ranges_by_axis(values, [None, *axes])
    whole = per_axis.pop(None)
    if not (fits_float32(whole[0]) and fits_float32(whole[1])):
        return None  # inf, NaN, or float64 values that float32 scales cannot reach
    best_axis, best_ranges = None, whole
    best_noise = expected_noise(whole, symmetric, levels)
    for axis, ranges in per_axis.items():
        noise = expected_noise(ranges, symmetric, levels)
        if noise < best_noise:
            best_axis, best_ranges, best_noise = axis, ranges, noise
    return quantize_linear(values, symmetric=symmetric, axis=best_axis, ranges=best_ranges, levels=levels)


def approximate(values: np.ndarray, ref: WeightRef, levels: int = 256) -> np.ndarray | None:
    """The values the default encoding rebuilds (per-channel, asymmetric; ``levels`` codes)."""
    codes = best_codes(values, ref, symmetric=WeightsInt8Options.symmetric, levels=levels)
    return None if codes is None else codes.decode(np.float32).reshape(values.shape)


def candidates(refs: list[WeightRef], options: WeightsInt8Options) -> list[WeightRef]:
    return [r for r in refs if options.selects(r)]


def apply(model: onnx.ModelProto, options: WeightsInt8Options) -> Variant:
    return rewrite(model, options)


def rewrite(
    model: onnx.ModelProto,
    options: WeightsInt8Options,
    *,
    read: Callable[[WeightRef], np.ndarray] = WeightRef.array,
    editor: GraphEditor | None = None,
) -> Variant:
    """The conversion, with where values come from (``read``) and where replacements go (``editor``)
    left to the caller: in memory by default; :mod:`shrinkray.pipeline.streaming` reads each tensor from its
    external file and writes its codes to the output's data file at once, so the same codes come out
    while memory holds a few tensors at a time."""
    opset = default_opset(model)
    per_channel = options.granularity == "per-channel"
    if options.form == "dequantize-linear" and opset < (13 if per_channel else 10):
        raise MethodError(
            f"The dequantize-linear form needs opset {13 if per_channel else 10} or newer; this model uses {opset}",
            "Use the default form, cast-mul",
        )
    variant = Variant(method="weights-int8", options=options.as_dict(), model=model)

    def encode(ref: WeightRef) -> tuple[LinearCodes | None, ErrorStats | None]:
        values = read(ref)
        codes = best_codes(values, ref, options.symmetric, per_channel, options.levels)
        return (codes, codes.error_against(values, FLOAT_TYPES[ref.dtype])) if codes is not None else (None, None)

    editor = editor if editor is not None else GraphEditor(model)
    refs = candidates(find_weights(model), options)
    for ref, (codes, stats) in zip(refs, map_tensors(encode, refs), strict=True):
        if codes is None:
            variant.warnings.append(
                f"Kept '{ref.name}' as it was: it holds inf or NaN values, or values beyond float32's range"
            )
            continue
        stored, build = _decode_nodes(codes, ref.dtype, options.form)
        editor.replace(ref, stored, build)
        kind = "int8 symmetric" if options.symmetric else "uint8 asymmetric"
        where = f"per-channel (axis {codes.axis})" if codes.axis is not None else "per-tensor"
        change = TensorChange.of(
            ref,
            bytes_after=sum(int(np.asarray(a).nbytes) for a in stored.values()),
            stats=stats,
            encoding=f"{kind} {where}" + (f", {options.levels} levels" if options.levels < 256 else ""),
        )
        variant.changes.append(change)
        warn_if_damaged(variant, change)
    editor.apply()
    if variant.changes and options.levels < 256:
        variant.notes.append(f"The stored size is that of 8-bit codes; the saving of {options.levels} levels "
                             "shows in the gzip and brotli sizes")  # fmt: skip
    if not variant.changes:
        variant.notes.append(
            f"No float tensor has at least {options.min_elements:,} values, so nothing was quantized"
        )
    return variant


register(
    MethodSpec(
        name="weights-int8",
        transformers_js="quantized",  # its file in a transformers.js folder: model_quantized.onnx
        title="Weights-only 8-bit",
        summary="Stores large float weights as 8-bit codes (about 4x smaller) and rebuilds them as floats "
        "when the model loads; all compute stays in float, so speed is unchanged.",
        options_type=WeightsInt8Options,
        apply=apply,
        candidates=candidates,
        position=2,
        approximate=approximate,
        bytes_per_value=1.0,
        parity_hint="Try per-channel granularity.",
        parity_hint_done=("granularity", "per-channel"),
        alternatives=("float16",),
        alternatives_why="",
        keeps_speed=True,
        stream=rewrite,
    )
)

"""float16: float weights stored in half precision, inputs and outputs kept float32.

Two implementations, chosen by measurement:

* ``storage`` (default): each selected float32/float64 tensor is stored as
  float16 and a Cast node turns it back into its original type. ONNX Runtime
  folds that Cast when the session starts, so compute stays float32: same
  speed, same numerics apart from the rounding of the weights, and it loads
  wherever the original loads.
* ``compute``: onnxconverter-common's ``convert_float_to_float16`` with
  ``keep_io_types=True`` and an op block list, which also runs activations in
  float16. On CPU ONNX Runtime has few float16 kernels, so this inserts Casts
  and usually runs slower; it is offered for GPU/WebGPU targets and validated
  like every other result.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper

from shrinkray.errors import MethodError
from shrinkray.graph.weights import FLOAT_TYPES, GraphEditor, NameAllocator, WeightRef, find_weights
from shrinkray.methods.base import (
    MethodSpec,
    TensorChange,
    TensorSelection,
    Variant,
    option,
    register,
    warn_if_damaged,
)
from shrinkray.methods.quant import error_stats

FLOAT16_MAX = 65504.0

#: Ops that break or lose accuracy in float16 (onnxconverter-common's list plus
#: reductions and normalisations that overflow easily).
DEFAULT_BLOCK_LIST = [
    "ArrayFeatureExtractor", "Binarizer", "CastMap", "CategoryMapper", "DictVectorizer",
    "FeatureVectorizer", "Imputer", "LabelEncoder", "LinearClassifier", "LinearRegressor",
    "Normalizer", "OneHotEncoder", "RandomUniformLike", "SVMClassifier", "SVMRegressor",
    "Scaler", "TreeEnsembleClassifier", "TreeEnsembleRegressor", "ZipMap", "NonMaxSuppression",
    "TopK", "RoiAlign", "Resize", "Range", "CumSum", "Min", "Max", "Upsample",
    "DynamicQuantizeLinear", "QuantizeLinear", "DequantizeLinear", "ReduceSum", "ReduceMean",
    "Pow", "Exp", "Softmax", "LayerNormalization", "If", "Loop", "Scan",
]  # fmt: skip


@dataclass
class Float16Options(TensorSelection):
    min_elements: int = option(1024, "Only tensors with at least this many values are converted", min=1)
    mode: str = option(
        "storage",
        "storage: weights stored as float16, compute stays float32 (same speed on CPU); "
        "compute: activations in float16 too (for GPU targets, usually slower on CPU)",
        choices=["storage", "compute"],
    )
    op_block_list: list[str] = field(
        default_factory=lambda: list(DEFAULT_BLOCK_LIST),
        metadata={"help": "compute mode only: op types kept in float32 (comma-separated)"},
    )


def approximate(values: np.ndarray, ref: WeightRef) -> np.ndarray | None:
    """The values stored as float16 (None when some are beyond float16's range)."""
    if values.size and float(np.max(np.abs(values))) > float(np.finfo(np.float16).max):
        return None
    return values.astype(np.float16).astype(values.dtype)


def candidates(refs: list[WeightRef], options: Float16Options) -> list[WeightRef]:
    return [r for r in refs if options.selects(r) and r.dtype != onnx.TensorProto.FLOAT16]


def _cast_back(target: int):
    def build(names: list[str], output: str, alloc: NameAllocator) -> list[onnx.NodeProto]:
        return [helper.make_node("Cast", [names[0]], [output], name=alloc.new(f"{output}_cast"), to=target)]

    return build


def _apply_storage(model: onnx.ModelProto, options: Float16Options, variant: Variant, *,
                   read: Callable[[WeightRef], np.ndarray] = WeightRef.array,
                   editor: GraphEditor | None = None) -> None:  # fmt: skip
    editor = editor if editor is not None else GraphEditor(model)
    for ref in candidates(find_weights(model), options):
        values = read(ref)
        finite = np.isfinite(values)  # a mask, not a copy of the values
        if values.size and max(-float(np.min(values, where=finite, initial=0.0)),
                               float(np.max(values, where=finite, initial=0.0))) > FLOAT16_MAX:  # fmt: skip
            variant.warnings.append(
                f"Kept '{ref.name}' in {ref.dtype_name}: it holds values beyond float16's range (±65504)"
            )
            continue
        half = values.astype(np.float16)
        editor.replace(ref, {"fp16": half}, _cast_back(ref.dtype))
        change = TensorChange.of(
            ref,
            bytes_after=int(half.nbytes),
            stats=error_stats(values, half.astype(FLOAT_TYPES[ref.dtype]), approx_is_scratch=True),
            encoding="float16 storage",
        )
        variant.changes.append(change)
        warn_if_damaged(variant, change)
    editor.apply()


def _apply_compute(model: onnx.ModelProto, options: Float16Options, variant: Variant) -> onnx.ModelProto:
    from onnxconverter_common import float16

    before = {r.name: r for r in find_weights(model) if r.dtype == onnx.TensorProto.FLOAT}
    originals = {name: ref.array() for name, ref in before.items()}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            converted = float16.convert_float_to_float16(
                model, keep_io_types=True, op_block_list=list(options.op_block_list), max_finite_val=FLOAT16_MAX
            )
    except Exception as exc:  # noqa: BLE001 - the converter raises many kinds
        raise MethodError(
            f"The float16 converter failed on this model ({type(exc).__name__}: {str(exc)[:200]})",
            "Use --mode storage, which keeps compute in float32",
        ) from None
    converted.ir_version = model.ir_version
    _restore_float_outputs(model, converted)
    for ref in find_weights(converted):
        if ref.name in before and ref.dtype == onnx.TensorProto.FLOAT16:
            change = TensorChange.of(
                before[ref.name],
                bytes_after=ref.nbytes,
                stats=error_stats(originals[ref.name], ref.array().astype(np.float32)),
                encoding="float16 compute",
            )
            variant.changes.append(change)
            warn_if_damaged(variant, change)
    return converted


def _restore_float_outputs(original: onnx.ModelProto, converted: onnx.ModelProto) -> None:
    """Put a Cast back to the original type on outputs the converter left in float16.

    ``keep_io_types`` misses outputs produced by blocked ops (e.g. a final Softmax).
    """
    wanted = {o.name: o.type.tensor_type.elem_type for o in original.graph.output}
    names = NameAllocator(converted)
    graph = converted.graph
    for out in graph.output:
        target = wanted.get(out.name)
        if out.type.tensor_type.elem_type != onnx.TensorProto.FLOAT16 or target in (None, onnx.TensorProto.FLOAT16):
            continue
        inner = names.new(f"{out.name}__fp16")
        for node in graph.node:
            node.output[:] = [inner if o == out.name else o for o in node.output]
            node.input[:] = [inner if i == out.name else i for i in node.input]
        graph.node.append(helper.make_node("Cast", [inner], [out.name], name=names.new(f"{out.name}_cast"), to=target))
        out.type.tensor_type.elem_type = target


def apply(model: onnx.ModelProto, options: Float16Options) -> Variant:
    variant = Variant(method="float16", options=options.as_dict(), model=model)
    if options.mode == "storage":
        _apply_storage(model, options, variant)
    else:
        variant.model = _apply_compute(model, options, variant)
    return _noted(variant)


def stream(model: onnx.ModelProto, options: Float16Options, *, read: Callable[[WeightRef], np.ndarray],
           editor: GraphEditor) -> Variant:  # fmt: skip
    """Storage mode with where values come from (``read``) and where the halves go (``editor``) left to the
    caller (:mod:`shrinkray.pipeline.streaming`: one tensor at a time from and to data files)."""
    if options.mode != "storage":
        raise MethodError("float16's compute mode rewrites the whole graph, so it cannot convert tensor by tensor",
                          "Use the storage mode (the default)")  # fmt: skip
    variant = Variant(method="float16", options=options.as_dict(), model=model)
    _apply_storage(model, options, variant, read=read, editor=editor)
    return _noted(variant)


def _noted(variant: Variant) -> Variant:
    if not variant.changes:
        variant.notes.append("No float32/float64 weight was large enough to convert, so nothing changed")
    return variant


register(
    MethodSpec(
        name="float16",
        transformers_js="fp16",  # its file in a transformers.js folder: model_fp16.onnx
        title="float16 weights",
        summary="Stores float weights in half precision (2x smaller); by default compute stays float32, "
        "so speed and numerics barely move.",
        options_type=Float16Options,
        apply=apply,
        candidates=candidates,
        position=5,
        approximate=approximate,
        bytes_per_value=2.0,
        parity_hint="Leave the tensors that move the outputs most in float32 (exclude them).",
        alternatives=(),
        keeps_speed=True,
        stream=stream,
        streams_with=lambda options: options.mode == "storage",
    )
)

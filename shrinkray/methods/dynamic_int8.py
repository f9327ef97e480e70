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

import dataclasses
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
from shrinkray.graph.checks import ORT_MAX_IR_VERSION
from shrinkray.graph.weights import FLOAT_TYPES, NameAllocator, WeightRef, constants_to_initializers, find_weights
from shrinkray.io.files import needs_external_data, save
from shrinkray.io.limits import tensor_nbytes
from shrinkray.methods.base import MethodOptions, MethodSpec, TensorChange, Variant, option, register, warn_if_damaged
from shrinkray.methods.quant import ErrorStats, error_stats

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


#: (op type, input slot) pairs whose constant float32 weight ONNX Runtime's
#: dynamic quantizer rewrites (Gemm becomes MatMul in pre-processing).
QUANTIZED_SLOTS = {
    ("MatMul", 1), ("Gemm", 1), ("Conv", 1), ("Gather", 0), ("LSTM", 1), ("LSTM", 2),
    ("Attention", 1), ("EmbedLayerNormalization", 2), ("EmbedLayerNormalization", 3),
}  # fmt: skip


def candidates(refs: list[WeightRef], options: DynamicInt8Options) -> list[WeightRef]:
    """An estimate of what the quantizer will rewrite: float32 main-graph weights in a quantized slot."""
    ops = set(options.op_types or QUANTIZABLE_OPS) | ({"Gemm"} if not options.op_types else set())
    return [
        r
        for r in refs
        if r.dtype == onnx.TensorProto.FLOAT
        and not r.scope
        and not r.is_graph_input
        and any(
            (c.op_type, c.input_index) in QUANTIZED_SLOTS and c.op_type in ops and not c.nested for c in r.consumers
        )
    ]


def _channel_axis(shape: tuple[int, ...], n_scales: int) -> int | None:
    if n_scales == 1:
        return None
    matches = [a for a, d in enumerate(shape) if d == n_scales]
    if not matches:
        return None
    return matches[-1] if len(shape) == 2 and matches[-1] == 1 else matches[0]


def _decode(inits: dict[str, onnx.TensorProto], base: str) -> tuple[np.ndarray, int | None, int]:
    """Dequantized values of ``base``_quantized, its channel axis, and its stored bytes."""
    q = inits[f"{base}_quantized"]
    codes = numpy_helper.to_array(q).astype(np.float32)
    scale_t, zp_t = inits[f"{base}_scale"], inits.get(f"{base}_zero_point")
    scale = numpy_helper.to_array(scale_t).astype(np.float32).reshape(-1)
    zero = numpy_helper.to_array(zp_t).astype(np.float32).reshape(-1) if zp_t is not None else np.zeros(1)
    axis = _channel_axis(codes.shape, scale.size)
    if axis is not None:
        shape = [1] * codes.ndim
        shape[axis] = scale.size
        scale, zero = scale.reshape(shape), zero.reshape(shape)
    stored = tensor_nbytes(q) + scale_t.ByteSize() + (zp_t.ByteSize() if zp_t is not None else 0)
    codes -= zero  # in place, the same float32 operations as (codes - zero) * scale without two temporaries
    codes *= scale
    return codes, axis, stored


def _original_of(base: str, before: dict[str, WeightRef]) -> str | None:
    """The original weight behind a quantized tensor, also when pre-processing renamed it
    (e.g. ``ConvBnFusion_W_stem.conv.weight`` after folding a BatchNormalization)."""
    if base in before:
        return base
    matches = [name for name in before if base.endswith(name)]
    return max(matches, key=len) if matches else None


def main_initializers(model: onnx.ModelProto) -> dict[str, WeightRef]:
    """The main graph's initializers by name: what the quantizer sees."""
    return {r.name: r for r in find_weights(model) if r.kind == "initializer" and not r.scope}


def float_weights(refs: dict[str, WeightRef]) -> dict[str, WeightRef]:
    """The float ones: what the quantizer may rewrite, each recorded once."""
    return {name: r for name, r in refs.items() if r.dtype in FLOAT_TYPES}


def measure_changes(original: onnx.ModelProto, quantized: onnx.ModelProto,
                    preprocessed: onnx.ModelProto | None) -> list[dict]:  # fmt: skip
    """For each original weight the quantizer rewrote: its name, the quantized tensor's base name, channel
    axis, stored bytes and error statistics against the floats the quantizer saw (the pre-processed value,
    which may be folded or transposed), or None when pre-processing reshaped it. Runs in the quantizer's
    child process, which holds all three models anyway: the worker then holds none of their floats."""
    before = float_weights(main_initializers(original))
    saw = {t.name: t for t in preprocessed.graph.initializer} if preprocessed is not None else {}
    inits = {t.name: t for t in quantized.graph.initializer}
    bases = [n[: -len("_quantized")] for n in inits if n.endswith("_quantized") and f"{n[:-10]}_scale" in inits]
    bases.sort(key=lambda b: b not in before)  # exact names first, renamed ones after
    recorded: set[str] = set()
    records = []
    for base in bases:
        name = _original_of(base, before)
        if name is None or name in recorded or name in inits:
            continue
        recorded.add(name)
        decoded, axis, stored = _decode(inits, base)
        reference = numpy_helper.to_array(saw[base]) if base in saw else before[name].array()
        swapped = decoded.swapaxes(-1, -2) if decoded.ndim >= 2 else decoded
        if decoded.shape != reference.shape and swapped.shape == reference.shape:
            decoded = swapped  # stored transposed: Gemm(transB=1) made MatMul, LSTM/GRU weights for DynamicQuantizeLSTM
        stats = error_stats(reference, decoded).as_dict() if decoded.shape == reference.shape else None
        records.append({"name": name, "base": base, "axis": axis, "stored": stored, "stats": stats})
    return records


def _record_changes(before: dict[str, WeightRef], records: list[dict], variant: Variant) -> None:
    """One change per record of :func:`measure_changes`, in its order."""
    for record in records:
        axis, base, name = record["axis"], record["base"], record["name"]
        where = f"per-channel (axis {axis})" if axis is not None else "per-tensor"
        encoding = f"{variant.options['weight_type']} {where}, dynamic activations"
        if base != name:
            encoding += f"; folded by ONNX Runtime's pre-processing into '{base}' first"
        if record["stats"] is not None:
            values = record["stats"]
            stats = ErrorStats(values["max_abs_error"], values["rms_error"], values["relative_rms_error"])
        else:
            stats = ErrorStats(float("nan"), float("nan"), float("nan"))
            encoding += "; reshaped by pre-processing, so its error is not comparable"
        change = TensorChange.of(before[name], bytes_after=record["stored"], stats=stats, encoding=encoding)
        variant.changes.append(change)
        warn_if_damaged(variant, change)


#: The quantizer is given this long before it is stopped (large models take minutes).
WORKER_TIMEOUT_S = 1800


def fits_in_memory(header: onnx.ModelProto) -> bool:
    """Whether ONNX Runtime's pre-processing of this model (or its header) can run in memory in the child
    (ort_quantize_worker): one file under protobuf's 2 GB with no external data, whose opset needs no
    Upsample rewrite (ONNX Runtime's pre-processing converts opsets up to 10 first: left to it)."""
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in header.graph.initializer):
        return False
    onnx_opsets = [o.version for o in header.opset_import if o.domain in ("", "ai.onnx")]
    return len(onnx_opsets) == 1 and onnx_opsets[0] > 10


def _worker_env() -> dict[str, str]:
    """The child must import this very package, installed or not."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def _run_worker(
    model: onnx.ModelProto, options: DynamicInt8Options, variant: Variant
) -> tuple[onnx.ModelProto, list[dict]]:
    """Quantize in a child process whose working directory is a private temp folder.

    Returns the quantized model and the child's :func:`measure_changes` records (errors against the
    floats the quantizer actually saw, after pre-processing, which may fold BatchNormalization into a
    Conv weight or transpose a Gemm weight).
    """
    external = needs_external_data(model)
    # a model protobuf holds goes to the child through a pipe and stays in its memory (no input, pre-processed
    # or reloaded copies on disk: 3.5x the model at once before, issue 27); others go as files, as ORT takes them
    piped = not external and fits_in_memory(model)
    with tempfile.TemporaryDirectory(prefix="shrinkray-dyn-") as tmp:
        folder = Path(tmp)
        if not piped:
            save(model, folder / "input.onnx")
        spec = {
            "input": None if piped else str(folder / "input.onnx"),
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
                input=model.SerializeToString() if piped else b"",
                timeout=WORKER_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            raise MethodError(
                f"ONNX Runtime's quantizer did not finish within {WORKER_TIMEOUT_S} s", "Try weights-int8"
            ) from None
        result_path = folder / "result.json"
        if proc.returncode != 0 or not result_path.exists():
            last = (proc.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[-1][:200]
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
        return onnx.load(str(folder / "quantized.onnx")), result["changes"]


def _nodes_to_keep_float(model: onnx.ModelProto, refs: dict[str, WeightRef]) -> list[str]:
    """Main-graph nodes the quantizer must leave alone (unnamed ones get a name so they can be excluded).

    Two kinds: nodes reading an initializer that is also a graph input (it must stay overridable), and
    nodes whose quantizable slot holds a float16/float64 weight (ONNX Runtime makes invalid graphs of them).
    """
    overridable = {name for name, r in refs.items() if r.is_graph_input}
    other_float = {name for name, r in refs.items() if r.is_float and r.dtype != onnx.TensorProto.FLOAT}
    names = NameAllocator(model)
    found = []
    for node in model.graph.node:
        if overridable.intersection(node.input) or any(
            (node.op_type, i) in QUANTIZED_SLOTS and x in other_float for i, x in enumerate(node.input)
        ):
            if not node.name:
                node.name = names.new(f"{node.op_type}_kept_float")
            found.append(node.name)
    return found


def apply(model: onnx.ModelProto, options: DynamicInt8Options) -> Variant:
    variant = Variant(method="dynamic-int8", options=options.as_dict(), model=model)
    moved = constants_to_initializers(model)
    if moved:
        variant.notes.append(f"Moved {len(moved)} Constant-node weights into initializers so they can be quantized")
    refs = main_initializers(model)
    if not candidates(find_weights(model), options):
        variant.notes.append(
            "ONNX Runtime's quantizer has nothing to quantize here: it handles float32 weights of "
            + ", ".join(QUANTIZABLE_OPS)
            + " (and Gemm) in the main graph"
        )
        return variant
    protected = _nodes_to_keep_float(model, refs)
    if protected:
        options = dataclasses.replace(options, exclude_nodes=list(options.exclude_nodes) + protected)
        variant.notes.append(
            f"Left {len(protected)} nodes in float because they read initializers that are also graph inputs "
            "(overridable at run time) or float16/float64 weights, which the quantizer cannot handle"
        )
    result, records = _run_worker(model, options, variant)
    result.ir_version = min(result.ir_version, ORT_MAX_IR_VERSION)
    variant.model = result
    _record_changes(float_weights(refs), records, variant)
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
        transformers_js="int8",  # its file in a transformers.js folder: model_int8.onnx
        title="Dynamic INT8 (ONNX Runtime)",
        summary="ONNX Runtime's quantize_dynamic: int8 weights (about 4x smaller) and activations "
        "quantized per batch at run time; speed varies by CPU and must be measured.",
        options_type=DynamicInt8Options,
        apply=apply,
        candidates=candidates,
        position=1,
        changes_compute=True,
        alternatives=("weights-int8", "float16"),
        alternatives_why="which keep activations in float",
        runs_in_child_process=True,  # quantize_dynamic runs in a child process
    )
)

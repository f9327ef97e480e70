"""auto: the smallest download that keeps behaviour, choosing precision tensor by tensor.

Users try variants by hand; this searches for them. Each large float tensor
can stay float32 or become float16, 8-bit or 4-bit (the methods' own encodings,
through their ``approximate`` and ``bytes_per_value`` in the registry):

1. **Sensitivity.** One ONNX Runtime session of the original in which every
   candidate tensor is an overridable input; for each tensor and precision the
   tensor alone is replaced by its approximation and the outputs are judged by
   the default verdict, giving its *severity* (the share of the allowed error
   it uses). No model is rebuilt, so this costs one inference per try.
2. **Assignment.** Greedy: start from float32 and keep taking the move (a
   tensor to a cheaper precision) that saves the most bytes per unit of added
   squared severity, while the predicted total (independent errors add in
   quadrature) stays within ``target`` squared.
3. **Verification.** The methods build the mixed model (4-bit, then 8-bit,
   then float16 tensors, each by name) and the whole model is judged again; if
   it fails, the target halves and the assignment is redone, within ``budget``
   seconds. The very first try is every tensor at the lowest precision (the
   smallest file there is); without a passing mix it falls back to all 8-bit.

The result is an ordinary variant: every rewritten tensor's change records
its precision, and ``precision_map`` lists every candidate with its
precision, bytes and measured severities.
"""

from __future__ import annotations

import glob
import math
import time
from dataclasses import dataclass
from typing import Any

import onnx
from onnx import helper

from shrinkray.graph import WeightRef, constants_to_initializers, find_weights
from shrinkray.methods.base import MethodSpec, TensorSelection, Variant, get_method, option, register

#: Precisions from the most to the least bytes, and the method that makes each.
LEVELS = ("float32", "float16", "int8", "int4")
METHOD_OF = {"float16": "float16", "int8": "weights-int8", "int4": "weights-int4"}


@dataclass
class AutoOptions(TensorSelection):
    target: float = option(
        1.0, "Share of the verdict's allowed error the predicted total may use (below 1 leaves margin)", min=0.01,
        max=1.0,
    )
    budget: float = option(120.0, "Seconds for the search (sensitivity, assignment, verification)", min=1.0)
    lowest: str = option("int4", "The lowest precision a tensor may get", choices=["int4", "int8", "float16"])


@dataclass
class Choice:
    """One tensor's options: bytes and measured severity at each precision it can take."""

    ref: WeightRef
    bytes: dict[str, float]
    severity: dict[str, float]
    level: str = "float32"


def candidates(refs: list[WeightRef], options: AutoOptions) -> list[WeightRef]:
    return [r for r in refs if options.selects(r)]


def _overridable(model: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    """A copy of ``model`` whose named initializers are also graph inputs (so a run can replace them)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy.ir_version = max(copy.ir_version, 4)
    inits = {t.name: t for t in copy.graph.initializer}
    for name in names:
        tensor = inits[name]
        copy.graph.input.append(helper.make_tensor_value_info(name, tensor.data_type, list(tensor.dims)))
    return copy


def _severities(
    model: onnx.ModelProto, refs: list[WeightRef], lowest: str, deadline: float, settings: Any
) -> tuple[list[Choice], Any]:
    from shrinkray.compare import _parity, _session_outputs, parity_inputs
    from shrinkray.validate import open_session

    probe = _overridable(model, [r.name for r in refs])
    session = open_session(probe)
    inputs = parity_inputs(probe, settings, session=session)
    levels = LEVELS[1 : LEVELS.index(lowest) + 1]
    choices = []
    for ref in refs:
        values = ref.array()
        choice = Choice(ref, {"float32": values.size * 4.0}, {"float32": 0.0})
        for level in levels:
            spec = get_method(METHOD_OF[level])
            approx = spec.approximate(values, ref) if time.monotonic() < deadline else None
            if approx is None:
                continue
            feeds = [{**sample, ref.name: approx.astype(values.dtype)} for sample in inputs.samples]
            outputs = _session_outputs(session, feeds, probe)
            choice.severity[level] = sensitivity(_parity(inputs.reference, outputs, inputs, settings))
            choice.bytes[level] = values.size * spec.bytes_per_value
        choices.append(choice)
    return choices, inputs


#: What one tensor's change is scored by when the verdict itself is not graded: a decision kept on
#: a few samples says nothing about the margin left, so scores and maps are also scored by their RMS
#: error as a share of their range, embeddings by their worst row's cosine (1.0 = the verdict's limit).
RMS_SCALE, COSINE_SCALE = 0.02, 0.01


def sensitivity(parity) -> float:
    """The larger of the verdict's severity and a graded measure of how far the outputs moved."""
    graded = 0.0
    for out in parity.outputs:
        m = out.measures
        if out.kind in ("scores", "continuous") and m.get("relative_rms_error") is not None:
            graded = max(graded, m["relative_rms_error"] / RMS_SCALE)
        elif out.kind == "embedding" and m.get("row_cosine") is not None:
            graded = max(graded, (1.0 - m["row_cosine"]) / COSINE_SCALE)
    return max(parity.severity, graded)


def assign(choices: list[Choice], target: float) -> None:
    """Greedy: the move saving most bytes per added squared severity, while the quadrature sum <= target^2."""
    for c in choices:
        c.level = "float32"
    total = 0.0
    while True:
        best, best_gain = None, 0.0
        for c in choices:
            now = LEVELS.index(c.level)
            for level in LEVELS[now + 1 :]:
                if level not in c.severity:
                    continue
                added = c.severity[level] ** 2 - c.severity[c.level] ** 2
                if total + added > target**2:
                    continue
                saved = c.bytes[c.level] - c.bytes[level]
                gain = saved / max(added, 1e-12)
                if saved > 0 and gain > best_gain:
                    best, best_gain = (c, level, added), gain
        if best is None:
            return
        c, level, added = best
        c.level, total = level, total + added


def _build(model: onnx.ModelProto, choices: list[Choice], options: AutoOptions) -> Variant:
    """The mixed model, made by the methods themselves (lowest precision first), checked like any variant."""
    from shrinkray.shrink import shrink

    current = model
    variant = Variant(method="auto", options=options.as_dict(), model=model)
    for level in ("int4", "int8", "float16"):
        names = [glob.escape(c.ref.name) for c in choices if c.level == level]
        if not names:
            continue
        step = shrink(current, METHOD_OF[level], include=names, min_elements=options.min_elements, keep_session=True)
        for change in step.changes:
            change.encoding = f"{level}: {change.encoding}"
        variant.changes += step.changes
        variant.warnings += step.warnings
        current = step.model
        variant.session = step.session  # the last step's session runs the finished mix
    variant.model = current
    return variant


def apply(model: onnx.ModelProto, options: AutoOptions) -> Variant:
    from shrinkray.compare import CompareSettings, _parity, _session_outputs
    from shrinkray.validate import open_session

    deadline = time.monotonic() + options.budget
    settings = CompareSettings()  # the default verdict and synthesized inputs, as a plain compare judges
    constants_to_initializers(model, options.min_elements)  # Constant-node weights (older exporters) count too
    selected = candidates(find_weights(model), options)
    refs = [r for r in selected if r.kind == "initializer" and not r.scope]
    skipped = len(selected) - len(refs)
    if not refs:
        variant = Variant(method="auto", options=options.as_dict(), model=model)
        variant.notes.append("No large float initializer in the main graph, so there is nothing to choose")
        return variant
    choices, inputs = _severities(model, refs, options.lowest, deadline, settings)

    def passes(label: str) -> Variant | None:
        built = _build(model, choices, options)
        outputs = _session_outputs(built.session or open_session(built.model), inputs.samples, built.model)
        built.session = None
        parity = _parity(inputs.reference, outputs, inputs, settings)
        tries.append(f"{label}: {'passes' if parity.passed else 'fails'} ({parity.severity:.0%} of allowed)")
        return built if parity.passed else None

    tries: list[str] = []
    for c in choices:  # the smallest mix first: every tensor at the lowest precision it can take
        c.level = next((lv for lv in reversed(LEVELS) if lv in c.severity), "float32")
    variant = passes(f"all at the lowest precision ({options.lowest})")
    target = options.target
    while variant is None and time.monotonic() < deadline and target > 1e-3:
        assign(choices, target)
        if all(c.level == "float32" for c in choices):
            break
        variant = passes(f"target {target:.3g}")
        target /= 2
    if variant is None:  # no mix passed within the budget: the safe, uniform choice
        for c in choices:
            c.level = "int8" if "int8" in c.severity else "float32"
        variant = _build(model, choices, options)
        tries.append("fell back to 8-bit everywhere")
    counts = {level: sum(c.level == level for c in choices) for level in LEVELS}
    variant.notes.append(
        "Precision per tensor: " + ", ".join(f"{n} {level}" for level, n in counts.items() if n)
        + f" (search: {'; '.join(tries)})"
    )
    if skipped:
        variant.notes.append(f"{skipped} tensor(s) in subgraphs were left as they are")
    variant.details["precision_map"] = precision_map(choices)
    return variant


def precision_map(choices: list[Choice]) -> list[dict[str, Any]]:
    """Every candidate tensor: the precision chosen, its bytes and the severity each precision measured."""
    return [
        {
            "tensor": c.ref.name,
            "shape": list(c.ref.shape),
            "precision": c.level,
            "bytes_before": int(c.bytes["float32"]),
            "bytes_after": int(c.bytes[c.level]),
            "severity": {k: (round(v, 6) if math.isfinite(v) else None) for k, v in c.severity.items()},
        }
        for c in choices
    ]


register(
    MethodSpec(
        name="auto",
        title="Smallest that passes (per-tensor precision)",
        summary="Measures how much each tensor's precision moves the outputs, then gives every tensor the "
        "smallest of float16 / 8-bit / 4-bit that keeps the whole model within the parity verdict.",
        options_type=AutoOptions,
        apply=apply,
        candidates=candidates,
        position=6,
        in_default_set=False,
        parity_hint="Lower the target (more margin), or raise the lowest precision to 8-bit.",
    )
)


__all__ = ["AutoOptions", "Choice", "apply", "assign", "precision_map"]

"""auto: the smallest download that keeps behaviour, choosing precision tensor by tensor.

Users try variants by hand; this searches for them. Each large float tensor
can stay float32 or become float16, 8-bit or 4-bit (the methods' own encodings,
through their ``approximate`` and ``bytes_per_value`` in the registry):

0. **The smallest mix first.** Every tensor at the lowest precision is built and
   judged; when it passes nothing is smaller and nothing needs measuring.
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
   it fails, the target halves and the assignment is redone; after a pass, two
   bisection steps between the failing and the passing target look for a
   smaller mix that still passes. Uniform 8-bit and float16 are tried too when
   predicted smaller than the mix found, so the result is never larger than a
   single method that passes. All within ``budget`` seconds; without a passing
   mix it falls back to all 8-bit.

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
        1.0, "Share of the verdict's allowed error the result may use (below 1 leaves margin, e.g. 0.5 where the "
        "verdict is lenient for your task)", min=0.01,
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


def _run(session, samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Every sample through ``session``; several samples are stacked on a new first axis (as compare does)."""
    import numpy as np

    names = [o.name for o in session.get_outputs()]
    runs = [session.run(None, feeds) for feeds in samples]
    if len(runs) == 1:
        return dict(zip(names, runs[0], strict=True))
    return {name: np.stack([np.asarray(r[i]) for r in runs]) for i, name in enumerate(names)}


def _judge(inputs, outputs: dict[str, Any], settings: Any):
    """The default verdict on ``outputs`` against the original's (the public parity function compare uses)."""
    from shrinkray.measure.parity import compare_outputs

    return compare_outputs(inputs.reference, outputs, inputs.kinds, settings.verdict, samples=inputs.count)


def _choices(refs: list[WeightRef], lowest: str) -> list[Choice]:
    """Every tensor with the bytes each precision would take (severities are measured later, if needed)."""
    levels = LEVELS[1 : LEVELS.index(lowest) + 1]
    return [
        Choice(ref, {"float32": ref.elements * 4.0, **{lv: ref.elements * get_method(METHOD_OF[lv]).bytes_per_value
                                                      for lv in levels}}, {"float32": 0.0})  # fmt: skip
        for ref in refs
    ]


#: A tensor whose change at some precision uses less than this share of the allowed error is not
#: measured at higher precisions (they are bounded by it): most tensors of most models, a third of the runs.
NEGLIGIBLE = 0.01


def _measure(choices: list[Choice], session, inputs, settings: Any, deadline: float) -> None:
    """Each tensor alone at each precision: its severity under the verdict (one inference per try).

    Largest tensors first, lowest precision first; once a precision is negligible the higher ones
    take its severity as a bound instead of a run. A precision whose approximation cannot be made is
    dropped from the tensor's options; once the deadline passes, the remaining tries are left
    unmeasured (the greedy then skips those moves)."""
    for choice in sorted(choices, key=lambda c: -c.bytes["float32"]):
        if time.monotonic() >= deadline:
            return
        ref = choice.ref
        values = ref.array()
        bound = None
        for level in reversed([lv for lv in LEVELS[1:] if lv in choice.bytes]):
            if bound is not None:
                choice.severity[level] = bound
                continue
            spec = get_method(METHOD_OF[level])
            approx = spec.approximate(values, ref)
            if approx is None:
                del choice.bytes[level]
                continue
            feeds = [{**sample, ref.name: approx.astype(values.dtype)} for sample in inputs.samples]
            choice.severity[level] = sensitivity(_judge(inputs, _run(session, feeds), settings))
            if choice.severity[level] < NEGLIGIBLE:
                bound = choice.severity[level]


#: What one tensor's change is scored by when the verdict itself is not graded: a decision kept on
#: a few samples says nothing about the margin left, so scores and maps are also scored by their RMS
#: error as a share of their range, embeddings by their worst row's cosine (1.0 = the verdict's limit).
RMS_SCALE, COSINE_SCALE = 0.02, 0.01


def sensitivity(parity) -> float:
    """The larger of the verdict's severity and a graded measure of how far the outputs moved, as an
    *amplitude*: cosine-based shares (1 - cosine grows with the square of the error, so independent
    errors add up linearly in it) are square-rooted, so that the assignment's quadrature sum adds
    them up the way they really combine. (Summing them in quadrature unrooted predicted MiniLM's mix
    at <= 100% of allowed where the whole model used 305%.)"""
    graded = 0.0
    for out in parity.outputs:
        m = out.measures
        for check in out.checks:
            share = check.severity
            graded = max(graded, math.sqrt(share) if "cosine" in check.criterion and math.isfinite(share) else share)
        if not out.checks and not out.passed:
            graded = math.inf
        if out.kind in ("scores", "continuous") and m.get("relative_rms_error") is not None:
            graded = max(graded, m["relative_rms_error"] / RMS_SCALE)
        elif out.kind == "embedding" and m.get("row_cosine") is not None:
            graded = max(graded, math.sqrt(max(1.0 - m["row_cosine"], 0.0) / COSINE_SCALE))
    return graded


def assign(choices: list[Choice], target: float) -> None:
    """Greedy: the move saving most bytes per added squared severity, while the quadrature sum <= target^2."""
    for c in choices:
        c.level = "float32"
    total = 0.0  # squared severities of the moves taken so far
    while True:
        best, best_gain = None, 0.0
        for c in choices:
            now = LEVELS.index(c.level)
            for level in LEVELS[now + 1 :]:
                if level not in c.severity or level not in c.bytes:
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
        extra = BUILD_OPTIONS.get(level, {})
        step = shrink(current, METHOD_OF[level], include=names, min_elements=options.min_elements, keep_session=True,
                      **extra)  # fmt: skip
        for change in step.changes:
            change.encoding = f"{level}: {change.encoding}"
        variant.changes += step.changes
        variant.warnings += step.warnings
        current = step.model
        variant.session = step.session  # the last step's session runs the finished mix
    variant.model = current
    return variant


#: Options of the building methods: 4-bit blocks built data-free, exactly as ``approximate()`` measured
#: them (activation-aware scales would re-run the model on every build and differ from what was judged).
BUILD_OPTIONS: dict[str, dict[str, Any]] = {"int4": {"activation_aware": False}}
#: Verification builds between the last failing and the first passing target (each a whole build + run).
BISECT_STEPS = 2


def _predicted_bytes(choices: list[Choice]) -> float:
    return sum(c.bytes.get(c.level, c.bytes["float32"]) for c in choices)


def apply(model: onnx.ModelProto, options: AutoOptions) -> Variant:
    from shrinkray.compare import parity_inputs
    from shrinkray.results import CompareSettings
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
    probe = _overridable(model, [r.name for r in refs])
    session = open_session(probe)
    inputs = parity_inputs(probe, settings, session=session)
    choices = _choices(refs, options.lowest)
    tries: list[str] = []
    tried: set[tuple[str, ...]] = set()
    best: tuple[float, Variant, dict[str, str]] | None = None  # (predicted bytes, variant, levels)

    def attempt(label: str) -> bool:
        """Build the current mix, judge it whole; keep it when it passes and is the smallest so far."""
        nonlocal best
        key = tuple(c.level for c in choices)
        if key in tried:
            return False
        tried.add(key)
        built = _build(model, choices, options)
        done = {c.name for c in built.changes}
        for c in choices:  # a tensor the method could not take stays as it was
            if c.level != "float32" and c.ref.name not in done:
                c.level = "float32"
        outputs = _run(built.session or open_session(built.model), inputs.samples)
        built.session = None
        parity = _judge(inputs, outputs, settings)
        ok = parity.passed and parity.severity <= options.target  # a target below 1 keeps that margin
        tries.append(f"{label}: {'passes' if ok else 'fails'} ({parity.severity:.0%} of allowed)")
        size = _predicted_bytes(choices)
        if ok and (best is None or size < best[0]):
            best = (size, built, {c.ref.name: c.level for c in choices})
        return ok

    def uniform(level: str) -> None:
        for c in choices:
            c.level = level if level in c.bytes else "float32"

    # The smallest mix first: every tensor at the lowest precision. When it passes nothing is smaller,
    # and no tensor needs measuring (most of a search's time).
    uniform(options.lowest)
    if not attempt(f"all at the lowest precision ({options.lowest})"):
        _measure(choices, session, inputs, settings, deadline)
        target, failed = options.target, None
        while best is None and time.monotonic() < deadline and target > 1e-3:
            assign(choices, target)
            if all(c.level == "float32" for c in choices):
                break
            if not attempt(f"target {target:.3g}"):
                failed = target
                target /= 2
        # Halving overshoots: between the last target that failed and the one that passed, a larger
        # target may still pass with a smaller mix (two geometric bisection steps, time permitting).
        passed = target
        for _ in range(BISECT_STEPS if best is not None and failed is not None else 0):
            middle = math.sqrt(passed * failed)
            assign(choices, middle)
            if time.monotonic() >= deadline or _predicted_bytes(choices) >= best[0]:
                break
            if attempt(f"target {middle:.3g}"):
                passed = middle
            else:
                failed = middle
        # Never larger than a single method that passes: a uniform precision predicted smaller than the
        # mix found (or any, when none passed) is tried too, smallest first.
        for level in sorted(LEVELS[1 : LEVELS.index(options.lowest)], key=lambda lv: -LEVELS.index(lv)):
            uniform(level)
            if time.monotonic() < deadline and (best is None or _predicted_bytes(choices) < best[0]):
                attempt(f"all {level}")
    del session
    if best is None:  # no mix passed within the budget: the safe, uniform choice
        uniform("int8")
        variant = _build(model, choices, options)
        variant.session = None
        tries.append("fell back to 8-bit everywhere")
    else:
        _, variant, levels = best
        for c in choices:
            c.level = levels[c.ref.name]
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
    """Every candidate tensor: the precision chosen, its bytes and the severity each precision measured
    (none when the first, smallest mix passed and nothing needed measuring)."""
    return [
        {
            "tensor": c.ref.name,
            "shape": list(c.ref.shape),
            "precision": c.level,
            "bytes_before": int(c.bytes["float32"]),
            "bytes_after": int(c.bytes.get(c.level, c.bytes["float32"])),
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

"""auto: the smallest download that keeps behaviour, choosing precision tensor by tensor.

Users try variants by hand; this searches for them. Each large float tensor
can stay float32 or become float16, 8-bit or 4-bit (the methods' own encodings,
through their ``approximate`` and ``bytes_per_value`` in the registry). It judges
by the run's verdict on the run's inputs (:class:`RunContext`: the user's
tolerances and inputs when compare, the CLI or the app has them, else the
defaults), so the result passes where it is shown.

0. **The smallest mix first.** Every tensor at the lowest precision is judged;
   when it passes nothing is smaller and nothing needs measuring.
1. **Sensitivity.** One ONNX Runtime session of the original in which every
   candidate tensor is an overridable input; each tensor alone is replaced by
   its approximation and the outputs are judged, giving its *severity* (the
   share of the allowed error it uses). No model is rebuilt, and the runs use
   one sample of the judging inputs (a quarter of the time of the batch).
   The lowest precision is measured; a higher one is measured only when the
   lower one was far from negligible, else predicted from it by the ratio of
   their weight errors (severities are amplitudes, linear in small errors).
2. **Assignment.** Greedy: start from float32 and keep taking the move (a
   tensor to a cheaper precision) that saves the most bytes per unit of added
   squared severity, while the predicted total (independent errors add in
   quadrature) stays within ``target`` squared.
3. **Verification.** Each candidate mix is first judged in the overridable
   session on the full judging inputs (one inference); only a mix that passes
   there is built by the methods (4-bit, then 8-bit, then float16 tensors, each
   by name, validated once) and judged again as a whole model. A failing mix
   halves the target and the assignment is redone; when the first one passes,
   the target doubles until a mix fails; then two bisection steps between the
   failing and the passing target look for a smaller mix.
   Uniform 8-bit and float16 are tried too when predicted smaller than the mix
   found, so the result is never larger than a single method that passes
   (a fixed candidate is judged without the search's margin, ``SEARCH_MARGIN``). All
   within ``budget`` seconds; without a passing mix it falls back to all 8-bit.

The result is an ordinary variant: every rewritten tensor's change records
its precision, and ``precision_map`` lists every candidate with its
precision, bytes and severities (which of them were predicted, not run).

Kept as one module (over 600 lines): the search's plan, its tries and their notes share one state;
the maths it uses lives in the other methods and in measure.
"""

from __future__ import annotations

import glob
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import onnx
from onnx import helper

from shrinkray.errors import ShrinkRayError
from shrinkray.graph.sessions import open_session
from shrinkray.graph.validate import validate
from shrinkray.graph.weights import WeightRef, constants_to_initializers, find_weights
from shrinkray.measure import recurrent
from shrinkray.measure.confidence import UNDECIDED
from shrinkray.measure.deadline import run_within
from shrinkray.measure.inputs import first_axis_dynamic
from shrinkray.measure.parity import over_limit
from shrinkray.measure.parity_inputs import (
    DECISIONS_MAX_BYTES,
    MIN_DECISIONS,
    decisions_given,
    judge,
    session_outputs,
    split_for_calibration,
    tally_outputs,
)
from shrinkray.methods.base import MethodSpec, RunContext, TensorSelection, Variant, get_method, option, register
from shrinkray.units import format_bytes

#: Precisions from the most to the least bytes, and the method that makes each. int7, int6 and int5 are
#: weights-int8's 8-bit codes using 128, 64 and 32 of their 256 values: stored at 8 bits, but brotli and gzip,
#: which code each byte by how often it occurs, serve them in about one, two and three bits less per value.
LEVELS = ("float32", "float16", "int8", "int7", "int6", "int5", "int4")
CODES = {"int7": 128, "int6": 64, "int5": 32}
METHOD_OF = {"float16": "float16", "int8": "weights-int8", **dict.fromkeys(CODES, "weights-int8"),
             "int4": "weights-int4"}  # fmt: skip
#: Bits per value each precision is served in with brotli, as measured on the 22.7M weights of a sentence
#: encoder (all-MiniLM-L6-v2, the whole file at quality 9, scales and graph included; ``bench/`` auto-bench):
#: the search's objective when it minimizes served bytes (each halving of the codes saves about one bit).
SERVED_BITS = {"float32": 29.1, "float16": 14.6, "int8": 7.57, "int7": 6.58, "int6": 5.64, "int5": 4.92,
               "int4": 4.36}  # fmt: skip


#: The default target: the share of the allowed error a searched mix may use on the samples it searched on.
#: A mix picked among many that pass there is the luckiest of them (at 1.0 MiniLM's passed at 97% and failed
#: on the samples compare judged it on); one fixed candidate is not picked, so it needs no such allowance.
SEARCH_MARGIN = 0.8


@dataclass
class AutoOptions(TensorSelection):
    target: float = option(
        SEARCH_MARGIN, "Share of the verdict's allowed error a mix it searched for may use on the samples it "
        "searches on (below 1 leaves margin for the samples it is judged on, which it never sees; e.g. 0.4 "
        "where the verdict is lenient for your task). Every tensor at one precision, a candidate it did not "
        "search for, may use this share divided by 0.8 (at the default, the verdict's whole allowance)",
        min=0.01,
        max=1.0,
    )
    budget: float = option(120.0, "Seconds for the search (sensitivity, assignment, verification)", min=1.0)
    lowest: str = option("int4", "The lowest precision a tensor may get", choices=["int4", "int8", "float16"])
    size: str = option(
        "served",
        "What the search makes smallest: served (bytes as delivered with brotli or gzip; may use 8-bit codes "
        "with fewer levels, int7 to int5, which compress further) or stored (bytes on disk and in memory)",
        choices=["served", "stored"],
    )


@dataclass
class Choice:
    """One tensor's options: bytes and measured severity at each precision it can take."""

    ref: WeightRef
    bytes: dict[str, float]  # stored bytes at each precision it can take
    severity: dict[str, float]
    cost: dict[str, float] = field(default_factory=dict)  # what the search minimizes: served or stored bytes
    level: str = "float32"
    predicted: set[str] = field(default_factory=set)  # severities derived from a lower precision's, not run

    def __post_init__(self) -> None:
        if not self.cost:  # no objective given: the stored bytes
            self.cost = dict(self.bytes)


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


def _run(session, samples: list[dict[str, Any]], decoder=None) -> dict[str, Any]:
    """Every sample through ``session``; several samples are stacked on a new first axis (as compare does).
    A decoder LM (``decoder``, its layout) generates from each, as compare judges it."""
    import numpy as np

    if decoder is not None:
        return session_outputs(session, samples, None, decoder)
    names = [o.name for o in session.get_outputs()]
    runs = [run_within(session, feeds) for feeds in samples]
    if len(runs) == 1:
        return dict(zip(names, runs[0], strict=True))
    return {name: np.stack([np.asarray(r[i]) for r in runs]) for i, name in enumerate(names)}


def _judge(inputs, outputs: dict[str, Any], settings: Any, tally: dict[str, Any] | None = None):
    """The run's verdict on ``outputs`` against the original's, as compare judges it (``tally``: the variant's
    top classes on the sets past the output memory, :func:`tally_outputs`; None: the held sets alone)."""
    return judge(inputs.reference, outputs, inputs, settings, tally)


def _served_bytes(ref: WeightRef, level: str) -> float:
    """The bytes brotli serves ``ref`` in at ``level``, estimated by :data:`SERVED_BITS`."""
    return ref.elements * SERVED_BITS[level] / 8


def _choices(refs: list[WeightRef], lowest: str, size: str = "served") -> list[Choice]:
    """Every tensor with the bytes each precision would take, stored and as the search counts them (``size``:
    served, by :data:`SERVED_BITS`; stored, where the fewer-level codes save nothing and are left out).
    Severities are measured later, if needed."""
    levels = [lv for lv in LEVELS[: LEVELS.index(lowest) + 1] if size == "served" or lv not in CODES]
    choices = []
    for ref in refs:
        stored = {lv: ref.elements * (4.0 if lv == "float32" else get_method(METHOD_OF[lv]).bytes_per_value)
                  for lv in levels}  # fmt: skip
        cost = {lv: _served_bytes(ref, lv) for lv in levels} if size == "served" else dict(stored)
        choices.append(Choice(ref, stored, {"float32": 0.0}, cost=cost))
    return choices


#: A tensor whose change at some precision uses less than this share of the allowed error is not
#: measured at higher precisions (they are bounded by it): most tensors of most models, a third of the runs.
NEGLIGIBLE = 0.01
#: Below this severity a higher precision's severity is not run but
#: predicted from it by the ratio of the two weight errors (measured on ppocr-det: within 2x, mostly above).
LINEAR = 2.0
#: Samples of the judging inputs the per-tensor runs use (the verification uses them all).
QUICK_SAMPLES = 1


def quick_inputs(inputs, session, model: onnx.ModelProto):
    """The first ``QUICK_SAMPLES`` samples of the judging inputs with the original's outputs on them, for
    the per-tensor runs (a quarter of a batch of 4: the same ranking for a quarter of the time); the
    inputs themselves when they cannot be split (a fixed batch, one sample)."""
    import numpy as np


    samples = inputs.samples
    if len(samples) > QUICK_SAMPLES:
        quick = samples[:QUICK_SAMPLES]
    else:
        count = inputs.count
        feeds = samples[0] if samples else {}
        splittable = count > QUICK_SAMPLES and first_axis_dynamic(model) and all(
            np.ndim(v) and np.shape(v)[0] == count for v in feeds.values()
        )
        if not splittable:
            return inputs
        quick = [{k: v[:QUICK_SAMPLES] for k, v in feeds.items()}]
    try:
        reference = _run(session, quick, inputs.decoder)
    except Exception:  # noqa: BLE001 - ORT's own exception types: the full inputs still work
        return inputs
    return replace(inputs, samples=quick, reference=reference)


def _relative_error(values, approx) -> float:
    import numpy as np

    diff = np.asarray(approx, dtype=np.float64) - values
    return float(np.sqrt(np.sum(diff * diff) / max(float(np.sum(np.square(values, dtype=np.float64))), 1e-30)))


class Approximations:
    """Each tensor's approximation per precision, made once: 4-bit encodings are the costly ones and are
    kept up to ``cap`` bytes (the override checks reuse them); the others are cheap to redo."""

    def __init__(self, cap: float = 256e6) -> None:
        self.kept: dict[tuple[str, str], Any] = {}
        self.cap, self.held = cap, 0.0

    def get(self, ref: WeightRef, level: str, values=None):
        key = (ref.name, level)
        if key in self.kept:
            return self.kept[key]
        values = ref.array() if values is None else values
        extra = {"levels": CODES[level]} if level in CODES else {}
        approx = get_method(METHOD_OF[level]).approximate(values, ref, **extra)
        approx = None if approx is None else approx.astype(values.dtype)
        if level == "int4" and approx is not None and self.held + approx.nbytes <= self.cap:
            self.kept[key], self.held = approx, self.held + approx.nbytes
        return approx


def _measure(choices: list[Choice], session, inputs, settings: Any, deadline: float,
             approx: Approximations) -> int:  # fmt: skip
    """Each tensor alone at each precision: its severity under the verdict; returns the inferences run.

    Largest tensors first, lowest precision first. A higher precision is run only when the lower one
    was beyond the linear regime (``LINEAR``); otherwise its severity is the lower one's scaled by the
    ratio of their weight errors (a bound once the lower one is negligible). A precision whose
    approximation cannot be made is dropped from the tensor's options; once the deadline passes, the
    remaining tries are left unmeasured (the greedy then skips those moves)."""
    runs = 0
    for choice in sorted(choices, key=lambda c: -c.bytes["float32"]):
        if time.monotonic() >= deadline:
            break
        ref = choice.ref
        values = ref.array()
        below: tuple[float, float] | None = None  # (severity, weight error) of the last precision measured
        for level in reversed([lv for lv in LEVELS[1:] if lv in choice.bytes]):
            if below is not None and below[0] < NEGLIGIBLE:
                choice.severity[level] = below[0]  # bounded by the lower precision: nothing to run
                choice.predicted.add(level)
                continue
            approximation = approx.get(ref, level, values)
            if approximation is None:
                del choice.bytes[level], choice.cost[level]
                continue
            error = _relative_error(values, approximation)
            if below is not None and below[0] < LINEAR:
                # not capped at the lower precision's: 32-level codes per channel can lose more than 4-bit blocks
                choice.severity[level] = below[0] * error / max(below[1], 1e-30)
                choice.predicted.add(level)
                below = (choice.severity[level], error)
                continue
            feeds = [{**sample, ref.name: approximation} for sample in inputs.samples]
            choice.severity[level] = sensitivity(_judge(inputs, _run(session, feeds, inputs.decoder), settings))
            runs += 1
            below = (choice.severity[level], error)
    return runs


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
        if out.kind in ("scores", "probability", "continuous") and m.get("relative_rms_error") is not None:
            graded = max(graded, m["relative_rms_error"] / RMS_SCALE)
        elif out.kind == "embedding" and m.get("row_cosine") is not None:
            graded = max(graded, math.sqrt(max(1.0 - m["row_cosine"], 0.0) / COSINE_SCALE))
    return graded


def assign(choices: list[Choice], target: float, base: float | None = None) -> None:
    """Greedy: the move saving most bytes per added squared severity, while the quadrature sum <= target^2.
    ``base``: start from the choices' current levels, whose whole model measured this severity (moves add
    their predicted squared severities to its square), instead of from float32."""
    total = 0.0 if base is None else base**2  # squared severities of the moves taken so far
    if base is None:
        for c in choices:
            c.level = "float32"
    while True:
        best, best_gain = None, 0.0
        for c in choices:
            now = LEVELS.index(c.level)
            for level in LEVELS[now + 1 :]:
                if level not in c.severity or level not in c.cost:
                    continue
                added = c.severity[level] ** 2 - c.severity.get(c.level, 0.0) ** 2  # unknown: counted as 0
                if total + added > target**2:
                    continue
                saved = c.cost[c.level] - c.cost[level]
                gain = saved / max(added, 1e-12)
                if saved > 0 and gain > best_gain:
                    best, best_gain = (c, level, added), gain
        if best is None:
            return
        c, level, added = best
        c.level, total = level, total + added


def _build(model: onnx.ModelProto, choices: list[Choice], options: AutoOptions, context: RunContext) -> Variant:
    """The mixed model, made by the methods themselves (lowest precision first) on one copy, validated once
    (with the session that runs it), like any variant."""
    current = onnx.ModelProto()
    current.CopyFrom(model)
    variant = Variant(method="auto", options=options.as_dict(), model=current)
    for level in reversed(LEVELS[1:]):
        names = [glob.escape(c.ref.name) for c in choices if c.level == level]
        if not names:
            continue
        step = _level_step(current, names, level, options, context)
        variant.changes += step.changes
        variant.warnings += step.warnings
        current = step.model
    variant.model = current
    variant.session = validate(current, keep_session=True)
    return variant


def _level_step(model: onnx.ModelProto, names: list[str], level: str, options: AutoOptions,
                context: RunContext) -> Variant:  # fmt: skip
    """The tensors ``names`` (globs) of ``model`` rewritten in place by the method of ``level``, with the
    options auto builds with; each change's encoding names its precision."""
    spec = get_method(METHOD_OF[level])
    opts = spec.make_options(include=names, min_elements=options.min_elements, **BUILD_OPTIONS.get(level, {}))
    step = spec.run(model, opts, context)
    for change in step.changes:
        change.encoding = f"{level}: {change.encoding}"
    return step


#: Options of the building methods: 4-bit blocks built data-free, exactly as ``approximate()`` measured
#: them (activation-aware scales would re-run the model on every build and differ from what was judged).
#: The fewer-level 8-bit precisions are weights-int8 with that many levels.
BUILD_OPTIONS: dict[str, dict[str, Any]] = {"int4": {"activation_aware": False, "gptq": "off"},
                                            **{lv: {"levels": n} for lv, n in CODES.items()}}  # fmt: skip
#: Verification builds between the last failing and the first passing target (each a whole build + run).
BISECT_STEPS = 2
#: Doublings of the target tried after the first assignment passed (stops at the first that fails).
RAISE_STEPS = 3
#: Refinement builds below the smallest passing result, each using this share of the error left between its
#: measured severity and the target (a failing one is retried with the next, smaller share).
REFINE_ROOM = (1.0, 0.5)
#: A bisection step whose mix is predicted to save less than this share of the best mix's bytes is not
#: tried: below what a build and a verification are worth.
MIN_SAVING = 0.005


def _predicted_bytes(choices: list[Choice]) -> float:
    """The mix's size as the search counts it (served or stored bytes, :class:`AutoOptions` ``size``)."""
    return sum(c.cost.get(c.level, c.cost["float32"]) for c in choices)


def apply(model: onnx.ModelProto, options: AutoOptions, context: RunContext | None = None) -> Variant:
    """``context``: the run's verdict and inputs (compare's, the CLI's or the app's); None: the defaults."""
    context = context or RunContext()
    deadline = time.monotonic() + options.budget
    settings = context.judging_settings()
    constants_to_initializers(model, options.min_elements)  # Constant-node weights (older exporters) count too
    selected = candidates(find_weights(model), options)
    refs = [r for r in selected if r.kind == "initializer" and not r.scope]
    rest = [r for r in selected if r.scope or r.kind != "initializer"]  # no override reaches them: chosen together
    if not refs:
        variant = Variant(method="auto", options=options.as_dict(), model=model)
        if not rest:
            variant.notes.append("No large float initializer, so there is nothing to choose")
            return variant
        inputs = context.calibration_inputs(model, tally=True)
        tries: list[str] = []
        level = _rest_together(variant, rest, options, context, inputs, settings, tries, deadline)
        variant.notes.append(f"Precision of the {len(rest)} tensor(s) in subgraphs, chosen together: {level} "
                             f"(search: {'; '.join(tries)}; searched on {_lower(inputs.note)})")  # fmt: skip
        variant.details["precision_map"] = precision_map(_rest_choices(rest, level, options.lowest))
        return variant
    probe = _overridable(model, [r.name for r in refs])
    session = open_session(probe)
    # the run's calibration samples: compare judges the result on others, so the search is not fitted to them
    inputs = context.calibration_inputs(probe, session=session, tally=True)
    approx = Approximations()
    choices = _choices(refs, options.lowest, options.size)
    tries: list[str] = []
    tried: dict[tuple[str, ...], bool] = {}  # mixes judged, and whether they passed
    passing: list[tuple[float, dict[str, str], bool]] = []  # every mix that passed: (bytes, levels, searched)
    best: tuple[float, Variant, dict[str, str], float] | None = None  # (predicted bytes, variant, levels, severity)
    counts = {"runs": 0, "builds": 0}
    fixed_limit = min(1.0, options.target / SEARCH_MARGIN)  # a fixed candidate: the user's margin, not the search's

    def overridden_severity(on=inputs, firm: bool = True) -> float | None:
        """The current mix judged in the overridable session on the search's inputs with their tally (or ``on``:
        one inference, no build); None when a tensor's approximation cannot be made (the build will say what it
        does). Not ``firm`` (a filter before a build, on the samples alone): a verdict their few decisions leave
        undecided gives its measured severity, since the build is judged on the tally too."""
        overrides = {}
        for c in choices:
            if c.level != "float32":
                values = approx.get(c.ref, c.level)
                if values is None:
                    return None
                overrides[c.ref.name] = values
        tally = None
        if firm and on.tally:
            tally = tally_outputs(session, replace(on, tally=[{**s, **overrides} for s in on.tally]), None)
        parity = _judge(on, _run(session, [{**sample, **overrides} for sample in on.samples], on.decoder), settings,
                        tally)  # fmt: skip
        counts["runs"] += 1
        if parity.passed or (not firm and parity.status == UNDECIDED):
            return parity.severity
        return max(parity.severity, 1.0 + 1e-9)

    def attempt(label: str, margin: bool = True) -> bool:
        """Judge the current mix without building it; build and judge the whole model only when that passes;
        keep it when it passes and is the smallest so far. ``margin``: the mix must stay within ``target``
        (a mix the search picked among many); without it, within ``target / SEARCH_MARGIN`` (one fixed
        candidate: at the default target the verdict itself, as compare judges a single method)."""
        nonlocal best
        limit = options.target if margin else fixed_limit
        key = tuple(c.level for c in choices)
        if key in tried and (tried[key] or margin):  # kept already, or failed and would fail again
            return False
        tried[key] = False
        early = overridden_severity(firm=False)
        if early is not None and early > limit:
            tries.append(f"{label}: fails ({over_limit(early)}, before building)")
            return False
        try:
            built = _build(model, choices, options, context)
        except ShrinkRayError as exc:
            tries.append(f"{label}: could not be built ({exc.problem})")
            return False
        counts["builds"] += 1
        done = {c.name for c in built.changes}
        for c in choices:  # a tensor the method could not take stays as it was
            if c.level != "float32" and c.ref.name not in done:
                c.level = "float32"
        outputs = _run(built.session, inputs.samples, inputs.decoder)
        tally = tally_outputs(built.session, inputs, built.model)
        built.session = None
        parity = _judge(inputs, outputs, settings, tally)
        ok = parity.passed and parity.severity <= limit  # a target below 1 keeps that margin
        said = "passes" if ok else "undecided" if parity.status == UNDECIDED else "fails"
        tries.append(f"{label}: {said} ({over_limit(parity.severity)})")
        tried[key] = ok
        if ok:
            passing.append((_predicted_bytes(choices), {c.ref.name: c.level for c in choices}, margin))
        if ok and (best is None or _predicted_bytes(choices) < best[0]):
            best = (_predicted_bytes(choices), built, {c.ref.name: c.level for c in choices}, parity.severity)
        return ok

    def uniform(level: str) -> None:
        for c in choices:
            c.level = level if level in c.bytes else "float32"

    # The smallest mix first: every tensor at the lowest precision. When it passes nothing is smaller,
    # and no tensor needs measuring (most of a search's time).
    uniform(options.lowest)
    if not attempt(f"all at the lowest precision ({options.lowest})", margin=False):
        quick = quick_inputs(inputs, session, probe)
        counts["runs"] += _measure(choices, session, quick, settings, deadline, approx)
        target, failed = options.target, None
        while best is None and time.monotonic() < deadline and target > 1e-3:
            assign(choices, target)
            if all(c.level == "float32" for c in choices):
                break
            if not attempt(f"target {target:.3g}"):
                failed = target
                target /= 2
        passed = target
        # The first assignment passed: the predictions were conservative (one sample, predicted higher
        # precisions), and a larger budget may pass too. A mix that fails costs one inference (judged
        # before building), so doubling until one fails is cheap.
        for _ in range(RAISE_STEPS if best is not None and failed is None else 0):
            assign(choices, passed * 2)
            if time.monotonic() >= deadline or _predicted_bytes(choices) >= best[0] * (1 - MIN_SAVING):
                break
            if not attempt(f"target {passed * 2:.3g}"):
                failed = passed * 2
                break
            passed *= 2
        # Halving overshoots: between the last target that failed and the one that passed, a larger
        # target may still pass with a smaller mix (two geometric bisection steps, time permitting).
        for _ in range(BISECT_STEPS if best is not None and failed is not None else 0):
            middle = math.sqrt(passed * failed)
            assign(choices, middle)
            if time.monotonic() >= deadline or _predicted_bytes(choices) >= best[0] * (1 - MIN_SAVING):
                break
            if attempt(f"target {middle:.3g}"):
                passed = middle
            else:
                failed = middle
        # Never larger than a single method that passes: a uniform precision predicted smaller than the mix
        # found (or any, when none passed) is tried too, smallest first, judged without the search's margin
        # (one fixed, data-free candidate is not picked among many; at the default target it is judged as
        # compare judges a single method). weights-int4's
        # calibrated build is not among them: judged on the samples it calibrated on, GPTQ passed a strict
        # verdict at 75% of allowed where its data-free blocks used 386x (its fit, not its quality).
        for level in reversed(LEVELS[1 : LEVELS.index(options.lowest)]):
            if not any(level in c.cost for c in choices):  # fewer-level codes when the search counts stored bytes
                continue
            uniform(level)
            if time.monotonic() < deadline and (best is None or _predicted_bytes(choices) < best[0]):
                attempt(f"all {level}", margin=False)
        # From the smallest result that passed, further down: its measured severity is the base the moves'
        # predicted severities add to (predictions from single tensors on one sample overstate a whole mix:
        # MiniLM's all-8-bit measured 74% where its tensors added up to over 80%, so no mix below it was built).
        for room in REFINE_ROOM if best is not None else ():
            size, _, levels, severity = best
            if time.monotonic() >= deadline or severity >= options.target:
                break
            for c in choices:
                c.level = levels[c.ref.name]
            assign(choices, math.sqrt(severity**2 + room * (options.target**2 - severity**2)), base=severity)
            if _predicted_bytes(choices) >= size * (1 - MIN_SAVING):
                break
            attempt(f"below the best ({room:.0%} of the room left)")
        uniform(options.lowest)
        if options.lowest == "int4" and time.monotonic() < deadline and (best is None or best[0] > _predicted_bytes(choices)):
            found = _calibrated_int4(model, choices, options, context, inputs, settings, fixed_limit, tries)
            if found is not None and (best is None or found[0] < best[0]):
                best = found
                counts["builds"] += 1
    if best is not None and passing:
        best = _confirmed(best, passing, choices, lambda on: overridden_severity(on or inputs), fixed_limit, tries,
                          lambda: _build(model, choices, options, context),
                          lambda: _other_samples(inputs, model, settings, session),
                          "served (brotli, estimated)" if options.size == "served" else "stored")  # fmt: skip
    session = approx = None  # the probe session and the 4-bit approximations go before the result is kept
    if best is None:  # no mix passed within the budget: the safe, uniform choice
        uniform("int8")
        variant = _build(model, choices, options, context)
        variant.session = None
        tries.append("fell back to 8-bit everywhere")
    else:
        _, variant, levels, _ = best
        for c in choices:
            c.level = levels[c.ref.name]
    per_level = {level: sum(c.level == level for c in choices) for level in LEVELS}
    variant.notes.append(
        "Precision per tensor: " + ", ".join(f"{n} {level}" for level, n in per_level.items() if n)
        + f" (search: {'; '.join(tries)}; {counts['runs']} inference runs, {counts['builds']} model(s) built; "
        f"searched on {_lower(inputs.note)})"
    )
    used = [level for level, n in per_level.items() if n]
    fewer = [level for level in used if level in CODES]
    if fewer:
        variant.notes.append("; ".join(f"{lv}: 8-bit codes using {CODES[lv]} of their 256 values, served with "
                                       f"brotli in about {SERVED_BITS[lv]:.1f} bits per value" for lv in fewer)
                             + " (stored at 8 bits, as int8)")  # fmt: skip
    if len(used) == 1 and used[0] in METHOD_OF:  # say so plainly: the card looks like that method's
        how = f" with {CODES[used[0]]} levels" if used[0] in CODES else ""
        variant.notes.append(f"Every tensor came out {used[0]}, as {METHOD_OF[used[0]]} stores them{how}: the "
                             "search found no smaller mix that passes")  # fmt: skip
    extra = []
    if rest:
        level = _rest_together(variant, rest, options, context, inputs, settings, tries, deadline)
        extra = _rest_choices(rest, level, options.lowest)
        variant.notes.append(f"The {len(rest)} tensor(s) in subgraphs (which the search cannot replace one by one) "
                             f"got one precision together: {level}")  # fmt: skip
    variant.details["precision_map"] = precision_map(choices + extra)
    return variant


#: Decisions (top-1 positions, decoded lines) the confirmation wants on unseen samples: with one flip allowed
#: in about 40, whether a mix with a few near-tied flips passes is luck; on 160 the share decides (the same count
#: a verdict asks for before it judges top-1 agreement).
CONFIRM_DECISIONS = MIN_DECISIONS
#: Sets of unseen samples at most (each the size of the search's, other seeds).
CONFIRM_SETS = 4


def _other_samples(inputs, model: onnx.ModelProto, settings: Any, session):
    """Synthesized samples the search has not seen (other seeds: sets the size of the search's until they give
    ``CONFIRM_DECISIONS`` decisions), with the original's outputs from the probe session (its weights are
    overridable inputs it need not be fed); None when none can be made, or when the search ran on the user's
    own samples (parts of them were all seen, and synthesized ones would judge another distribution:
    compare's held-out part of the user's samples is the check then)."""
    from dataclasses import replace

    import numpy as np


    if inputs.user_data:
        return None
    sets, seed = [], inputs.options.seed
    while len(sets) < CONFIRM_SETS:
        shifted = replace(inputs, options=replace(inputs.options, seed=seed))
        other = split_for_calibration(shifted, model, settings, session).calibration
        if other is shifted:
            break
        sets.append(other)
        seed = other.options.seed
        given = decisions_given(other.reference, other.kinds)
        held = sum(np.asarray(v).nbytes for v in other.reference.values()) * (len(sets) + 1)
        if given is None or given * len(sets) >= CONFIRM_DECISIONS or held > DECISIONS_MAX_BYTES \
                or recurrent.model_pairs(model):  # fmt: skip
            break
    if not sets:
        return None
    if len(sets) == 1:
        return sets[0]

    def stacked(part, name: str):
        value = np.asarray(part.reference[name])
        return value if len(part.samples) > 1 else value[None]  # one sample's outputs are not stacked

    reference = {name: np.concatenate([stacked(p, name) for p in sets]) for name in sets[0].reference}
    return replace(sets[0], samples=[s for p in sets for s in p.samples], reference=reference)


def _confirmed(best, passing: list[tuple[float, dict[str, str], bool]], choices: list[Choice], severity_on,
               limit: float, tries: list[str], build, other_samples, counted: str = "stored"):  # fmt: skip
    """The smallest passing mix that holds: a mix the search picked among many must also pass, by the verdict
    itself, on samples the search never saw; a fixed candidate (every tensor at one precision) was not picked
    among many and is kept as judged, as compare judges a single method.

    Picking the smallest of many mixes that passed picks the luckiest: on the generated transformer a mix
    passed the search's samples and failed the run's own (5 of 63 near-tied next tokens changed where one is
    allowed). Each check costs one inference in the overridable session (``severity_on(samples)``; None: the
    search's own); the one kept is rebuilt if it is not the one already built. weights-int4's calibrated
    candidate (``best`` when it is not among ``passing``) was judged apart from its calibration samples
    already. When no mix holds, every tensor at 8-bit, then at float16, judged on the search's samples (fixed
    candidates); when those fail too, the search's best stays and compare's verdict says how it fares."""
    built_levels = best[2]
    if not any(levels == built_levels for _, levels, _ in passing):
        return best
    other = None
    for size, levels, searched in sorted(passing, key=lambda p: p[0]):
        for c in choices:
            c.level = levels[c.ref.name]
        found = None
        if searched:
            other = other or other_samples()
            if other is None:
                return best
            found = severity_on(other)
            if found is not None and found > limit:
                tries.append(f"a mix of {format_bytes(size)} {counted} fails on other samples ({over_limit(found)})")
                continue
            tries.append(f"a mix of {format_bytes(size)} {counted} holds on other samples "
                         f"({'not measured' if found is None else over_limit(found)})")  # fmt: skip
        if levels == built_levels:
            return best
        return _rebuilt(choices, build, found)
    for level in ("int8", "float16"):
        for c in choices:
            c.level = level if level in c.bytes else "float32"
        found = severity_on(None)
        if found is not None and found <= limit:
            tries.append(f"every tensor at {level} passes ({over_limit(found)})")
            return _rebuilt(choices, build, found)
    tries.append("no mix held on other samples: the search's smallest is kept")
    for c in choices:
        c.level = built_levels[c.ref.name]
    return best


def _rebuilt(choices: list[Choice], build, severity: float | None):
    """The current mix built, as a search result ``(bytes, variant, levels, severity)``."""
    variant = build()
    variant.session = None
    return _predicted_bytes(choices), variant, {c.ref.name: c.level for c in choices}, severity or 0.0


def _calibrated_int4(model: onnx.ModelProto, choices: list[Choice], options: AutoOptions, context: RunContext,
                     inputs, settings: Any, limit: float, tries: list[str]):  # fmt: skip
    """weights-int4 itself (activation-aware scales, GPTQ, its 8-bit budget) on the search's tensors, as one
    more fixed candidate: calibrated on samples apart from those it is judged on here (the search's samples
    split again, or other synthesized ones), since judged on its own calibration samples GPTQ passes by
    fitting them (a strict verdict at 75% of allowed where its data-free 4-bit blocks used 386x).
    Returns (bytes, variant, levels, severity) when it passes within ``limit``, else None."""
    names = {c.ref.name: c for c in choices}
    spec = get_method("weights-int4")
    current = onnx.ModelProto()
    current.CopyFrom(model)
    try:
        split = split_for_calibration(inputs, model, settings)
        inner = RunContext(settings=context.settings, inputs=split.judged, calibration=split.calibration)
        opts = spec.make_options(include=[glob.escape(n) for n in names], min_elements=options.min_elements)
        built = spec.run(current, opts, inner)
        session = validate(built.model, keep_session=True)
        parity = _judge(split.judged, _run(session, split.judged.samples, split.judged.decoder), settings)
    except ShrinkRayError as exc:
        tries.append(f"weights-int4 itself: could not be built ({exc.problem})")
        return None
    del session
    ok = parity.passed and parity.severity <= limit
    tries.append(f"weights-int4 itself (calibrated apart): {'passes' if ok else 'fails'} ({over_limit(parity.severity)})")
    if not ok:
        return None
    built.method, built.options = "auto", options.as_dict()
    levels = {n: "float32" for n in names}
    for change in built.changes:
        levels[change.name] = "int8" if "8-bit" in change.encoding else "int4"
        change.encoding = f"{levels[change.name]}: {change.encoding}"
    size = sum(c.cost.get(levels[n], c.cost["float32"]) for n, c in names.items())
    return size, built, levels, parity.severity


def _lower(text: str) -> str:
    return text[:1].lower() + text[1:]


def _rest_together(variant: Variant, rest: list[WeightRef], options: AutoOptions, context: RunContext, inputs,
                   settings: Any, tries: list[str], deadline: float) -> str:  # fmt: skip
    """Give the tensors in subgraphs (If/Loop bodies, which the overridable session cannot replace) one
    precision together: the lowest whose whole build still passes on ``inputs``, lowest first (a build and a
    run each); ``variant`` takes it. Returns the precision chosen ("float32" when none passed)."""
    names = [glob.escape(r.name) for r in rest]
    for level in [lv for lv in reversed(LEVELS[1 : LEVELS.index(options.lowest) + 1]) if lv not in CODES]:
        if time.monotonic() >= deadline:
            tries.append(f"subgraph tensors at {level}: not tried (out of time)")
            break
        current = onnx.ModelProto()
        current.CopyFrom(variant.model)
        try:
            step = _level_step(current, names, level, options, context)
            session = validate(step.model, keep_session=True)
            parity = _judge(inputs, _run(session, inputs.samples, inputs.decoder), settings)
        except ShrinkRayError as exc:
            tries.append(f"subgraph tensors at {level}: could not be built ({exc.problem})")
            continue
        del session
        ok = parity.passed and parity.severity <= options.target
        tries.append(f"subgraph tensors at {level}: {'passes' if ok else 'fails'} ({over_limit(parity.severity)})")
        if ok and step.changes:
            variant.model = step.model
            variant.changes += step.changes
            variant.warnings += step.warnings
            return level
    return "float32"


def _rest_choices(rest: list[WeightRef], level: str, lowest: str) -> list[Choice]:
    """Rows of the precision map for the subgraph tensors: their common precision, no per-tensor severity."""
    choices = _choices(rest, lowest)
    for c in choices:
        c.level = level
    return choices


def precision_map(choices: list[Choice]) -> list[dict[str, Any]]:
    """Every candidate tensor: the precision chosen, its bytes and the severity each precision measured
    (none when the first, smallest mix passed and nothing needed measuring; ``predicted`` lists the
    precisions whose severity was derived from a lower one's instead of run)."""
    return [
        {
            "tensor": c.ref.name,
            "shape": list(c.ref.shape),
            "precision": c.level,
            "bytes_before": int(c.bytes["float32"]),
            "bytes_after": int(c.bytes.get(c.level, c.bytes["float32"])),
            "served_after": int(_served_bytes(c.ref, c.level)),
            "severity": {k: (round(v, 6) if math.isfinite(v) else None) for k, v in c.severity.items()},
            **({"predicted": sorted(c.predicted, key=LEVELS.index)} if c.predicted else {}),
        }
        for c in choices
    ]


register(
    MethodSpec(
        name="auto",
        title="Smallest that passes (per-tensor precision)",
        summary="Measures how much each tensor's precision moves the outputs, then gives every tensor the "
        "smallest of float16 / 8-bit (256 down to 32 levels, which brotli serves smaller) / 4-bit that keeps "
        "the whole model within the parity verdict.",
        options_type=AutoOptions,
        apply=apply,
        candidates=candidates,
        position=6,
        in_default_set=False,
        parity_hint="Lower the target (more margin), or raise the lowest precision to 8-bit.",
        alternatives=(),
        uses_context=True,  # judges by the run's verdict on the run's inputs
        judges_candidates=True,
    )
)


__all__ = ["AutoOptions", "Choice", "apply", "assign", "precision_map"]

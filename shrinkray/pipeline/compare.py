"""Measure the original and every variant side by side: sizes, parity, latency, culprits.

One function, :func:`compare`, serves the CLI (``shrinkray compare``), the app
and the Python API. It reports progress through a callback and never raises
for a method that fails: that variant carries its error and the others go on.

Kept as one module (over 600 lines): it is the order of a comparison's steps (:class:`ComparePipeline`);
the inputs, measures and verdicts it sequences live in measure and verdict.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from shrinkray.errors import DeadlineExceededError, OptionError, ShrinkRayError
from shrinkray.graph.checks import check_file, explain_runtime_error
from shrinkray.graph.prefold import MeasuringCopies
from shrinkray.graph.sessions import open_file_session, open_session
from shrinkray.io import kept_files
from shrinkray.io.external_data import read_in, values_in
from shrinkray.io.files import (
    LoadedModel,
    load,
    needs_external_data,
    save,
    sweep_orphans,
    tensor_payload_bytes,
    write_model_pieces,
    write_outputs,
)
from shrinkray.io.inline_data import raw_data_places, referencing_header
from shrinkray.io.limits import check_memory, tensor_nbytes
from shrinkray.measure import decoder_lm
from shrinkray.measure.budget import PLAN_MARGIN, Budget, job_clock, limit_words
from shrinkray.measure.confidence import UNDECIDED
from shrinkray.measure.deadline import run_within
from shrinkray.measure.generation import GENERATED_TOKENS
from shrinkray.measure.inputs import (
    InputOptions,
    first_axis_dynamic,
    load_inputs,
    samples_digest,
    synthesize,
)
from shrinkray.measure.latency import SAME_BAND, WARMUP_S, Alone, Timing, stats_apart, time_alone, time_pairwise
from shrinkray.measure.parity_inputs import (
    CalibrationSplit,
    ParityInputs,
    as_sets,
    batch_dim_fixed,
    judge,
    parity_inputs,
    session_outputs,
    split_for_calibration,
    tally_outputs,
)
from shrinkray.measure.results import ORIGINAL, CompareSettings, Comparison, Culprit, VariantResult
from shrinkray.measure.sample_files import load_sample_files
from shrinkray.measure.sizes import BackgroundSizes
from shrinkray.measure.what_changes import examples_of
from shrinkray.memory import release_free_memory
from shrinkray.methods import Variant, all_methods, default_methods, get_method
from shrinkray.methods.base import RunContext
from shrinkray.pipeline.inspect import inspect_model
from shrinkray.pipeline.shrink import shrink
from shrinkray.pipeline.streaming import all_stream, data_file, shrink_to_files
from shrinkray.units import format_bytes, format_seconds

#: Share of the job's time cap kept free when latency starts (results, report): latency times what fits
#: before the rest of the cap, so a slow model's compare still returns its sizes and parity. The budget's plan
#: keeps the same share free (measure/budget.py).
LATENCY_RESERVE = PLAN_MARGIN

Progress = Callable[[str, float], None]


#: Measuring copies a comparison keeps for reuse, or the model's own size if larger: each holds a variant's
#: decoded weights (about the float model), so a 100 MB upload's five were 5x its size in scratch (issue 27).
#: A smaller model keeps every copy; a larger one's are made again for latency (about 1 s per 100 MB each).
KEPT_COPIES_BYTES = 128 << 20


def _label(method: str, options: dict[str, Any], taken: set[str]) -> str:
    key = method if not options else method + " " + " ".join(f"{k}={_short(v)}" for k, v in options.items())
    base, n = key, 2
    while key in taken:
        key, n = f"{base} #{n}", n + 1
    taken.add(key)
    return key


def _quick(method: str) -> bool:
    """A method built in this process from the model alone, nothing to learn or prepare (its spec says)."""
    spec = get_method(method)
    return not (spec.uses_context or spec.runs_in_child_process or spec.prepare is not None)


def _short(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)




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
            outputs = session_outputs(variant.session, inputs.samples, variant.model, inputs.decoder)
        except ShrinkRayError:
            continue  # this tensor alone cannot be tested; the others still can
        parity = judge(inputs.reference, outputs, inputs, settings)
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
        outputs = session_outputs(session, inputs.samples, model, inputs.decoder)
        tally = tally_outputs(session, inputs, model)
        result.parity = judge(inputs.reference, outputs, inputs, settings, tally)
        judged = inputs
        if result.parity.status == UNDECIDED and (inputs.reserve or inputs.tally_reserve):
            judged = inputs.with_reserve().with_tally_reserve()
            if inputs.reserve:
                more = session_outputs(session, inputs.reserve, model, inputs.decoder)
                outputs = {k: np.concatenate([as_sets(v, len(inputs.samples)), as_sets(more[k], len(inputs.reserve))])
                           for k, v in outputs.items()}  # fmt: skip
            if inputs.tally_reserve:
                held = tally_outputs(session, replace(inputs, tally=inputs.tally_reserve), model)
                tally = {k: np.concatenate([v, held[k]]) for k, v in tally.items()}
            result.parity = judge(judged.reference, outputs, judged, settings, tally)
        result.examples = examples_of(result.parity, judged.reference, outputs, judged, model, tally)  # what changes
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
            outputs = session_outputs(variant.session, inputs.samples, variant.model, inputs.decoder)
            tally = tally_outputs(variant.session, inputs, variant.model)
        except ShrinkRayError:
            continue
        parity = judge(inputs.reference, outputs, inputs, settings, tally)
        if parity.passed:
            auto = VariantResult(
                examples=examples_of(parity, inputs.reference, outputs, inputs, variant.model, tally),
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
    *,
    owns_model: bool = False,
    spare_disk: bool = False,
) -> Comparison:
    """Shrink with every requested method and measure everything against the original.

    A short pipeline (:class:`ComparePipeline`): the original's inputs and outputs, then per
    variant shrink, sizes (compressed in background threads) and parity, then culprits (on
    request) and latency. ``on_partial(snapshot)`` receives the whole comparison so far, small
    and picklable (no models), after the original is measured, when a variant is built (its card
    can show what was rewritten), when its sizes are known, when its parity is judged (whichever of
    the two lands first), and after latency. ``owns_model``: the caller hands ``loaded`` over (see
    :class:`ComparePipeline`): a model loaded as its graph alone is then measured in its own files.
    ``spare_disk`` (a server's run, whose disk every visitor shares): measuring copies hold their weights in
    memory instead of scratch files, and a variant file about the original's size that compresses well is kept
    gzip-compressed in ``variants_dir`` once its sizes are known (:meth:`ComparePipeline.keep_small`). It costs
    the worker about the model's size in memory while a variant is measured (its decoded weights in memory
    rather than in the page cache): 4.8x -> 6.4x the file on the 101 MB transformer, for a run's disk of
    2.75x instead of 4.75x (issue 27, measured 2026-12-06).
    """
    with ComparePipeline(loaded, settings, progress, on_partial, owns_model=owns_model,
                         spare_disk=spare_disk) as pipeline:  # fmt: skip
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
                 owns_model: bool = False, spare_disk: bool = False) -> None:  # fmt: skip
        self.settings = settings = settings or CompareSettings()
        self.spare_disk = spare_disk and settings.variants_dir is not None
        if not settings.inputs.tokenizer and isinstance(loaded, LoadedModel) and loaded.tokenizer:
            # a decoder LM's tokenizer.json came with it (a transformers.js folder, a zip): prompts of real text,
            # of its own prompts.txt when one is beside it
            text = settings.inputs.text or loaded.prompts
            self.settings = settings = replace(settings, inputs=replace(settings.inputs, tokenizer=loaded.tokenizer,
                                                                        text=text))  # fmt: skip
        if isinstance(loaded, onnx.ModelProto):
            loaded = LoadedModel(model=loaded, name=loaded.graph.name or "model", file_bytes=loaded.ByteSize())
        # A model kept in external data files and loaded as its graph alone (the capped worker loads so): its own
        # files are what sessions open and sizes read, never copied, and methods that stream convert them tensor
        # by tensor into their own files (a 1 GB model's compare had 6.2x its size on scratch disk at its peak).
        self.in_files = bool(loaded.streams_only and owns_model and settings.variants_dir is not None
                             and loaded.path is not None and loaded.path.is_file())  # fmt: skip
        # A one-file model this worker loaded itself (the app's runs, the CLI): that file is the original for
        # sizes, sessions and each shrink's reload, never copied (two copies of a 100 MB model in scratch before).
        self.own_file = bool(not self.in_files and owns_model and settings.variants_dir is not None
                             and not loaded.external_data_files and loaded.path is not None
                             and loaded.path.is_file() and loaded.path.stat().st_size == loaded.file_bytes)  # fmt: skip
        if loaded.is_lazy and self.in_files:
            _small_values_in(loaded)
        elif loaded.is_lazy:
            _all_values_in(loaded)
        self.loaded = loaded
        self.owns_model = owns_model
        self._session = None  # the session _store opened on the variant it wrote
        self.say = progress or (lambda _step, _fraction: None)
        self.on_partial = on_partial
        self.source = loaded.model
        self.requested = settings.methods or default_methods()
        for method, _ in self.requested:
            get_method(method)  # unknown names fail before any work
        # with variants_dir one variant is held at a time; otherwise the result keeps every model
        streamed = self.in_files and all_stream(self.requested)  # one session at a time
        check_memory(tensor_payload_bytes(self.source), variants=1 if settings.variants_dir else len(self.requested),
                     streamed=streamed)  # fmt: skip
        self.summary = inspect_model(loaded)
        self.keep_models = settings.variants_dir is None
        # an owned model with variants written to files is dropped once its own file exists (the first step)
        self.reload_source = owns_model and not self.keep_models
        self._reload_from: Path | None = None  # the original as header + data file (see _write_reloadable)
        self._referenced: list[Path] | None = None  # a header pointing into the model's own file, and its link
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
        self._positions: dict[str, int] = {}  # variant key -> its place among the requested methods
        self._write_s = 0.0  # seconds writing (or linking) the original took: each variant's overhead
        self._parity_spent = 0.0
        self._started = time.perf_counter()
        clock = job_clock()  # a capped worker's time counts from its start (None: no cap, a direct call)
        self._job = (min(clock[0], self._started), clock[1]) if clock is not None else None
        self.budget: Budget | None = None  # made from the original's first run (measure_original)
        upper = self.loaded.file_bytes or tensor_payload_bytes(self.source)
        self.sizes = BackgroundSizes.planned([upper] * (1 + len(self.requested)), settings.brotli_quality,
                                             settings.zstd_level)  # fmt: skip
        # last: nothing above can fail after it exists. The process id in its name lets the next run
        # remove what a killed worker (memory or time cap) left behind.
        sweep_orphans(tempfile.gettempdir(), SCRATCH_PREFIX)
        self._scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
        # what sessions open (decodes folded); those of a model over KEPT_COPIES_BYTES are kept up to its size. A
        # server's run holds their weights in memory, not on disk (a decoded copy beside the run's variants put a
        # 100 MB upload's run over 3x its size), except for a model measured in its own files (1 GB and more)
        self.copies = MeasuringCopies(self._scratch / "measuring", keep_bytes=max(upper, KEPT_COPIES_BYTES),
                                      in_memory=self.spare_disk and not self.in_files)  # fmt: skip

    def __enter__(self) -> ComparePipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sizes.close()
        shutil.rmtree(self._scratch, ignore_errors=True)
        release_free_memory()  # serialized blobs, sessions and temporaries: the app process lives on

    # ------------------------------------------------------------ steps

    def run(self) -> Comparison:
        """Every step in order; the finished comparison."""
        self._settle_original()
        early = self._build_early()  # a first card before the original's runs (a page waits for it)
        self._run_original()
        # One variant at a time, in the requested order. A method that works in a child process (dynamic-int8)
        # was built in a background thread meanwhile, but its side of the worker holds the original about
        # three times over (ONNX Runtime's pre-processed copy, the quantized model, the values before), and
        # stacked on another variant's session opening it set the worker's peak (issue 12, measured 2026-11-23;
        # docs/benchmarks.md "Speed and memory"); the child itself still runs beside the original's size measurement.
        if early is not None:  # judged first: its card is the one on the page, and its model is held till then
            self._complete(early[1], early[2], time.perf_counter())
        for position, (method, options) in enumerate(self.requested):
            if early is None or early[0] != position:
                self.add_variant(method, options, position)
        self.find_culprits()
        self.wait_for_sizes()
        self.measure_latency()
        return self.result()

    def measure_original(self) -> None:
        """Inputs the original accepts and its outputs on them; its sizes start in the background."""
        self._settle_original()
        self._run_original()

    def _settle_original(self) -> None:
        """The original's files as sessions and sizes read them, and (an owned model) the held copy dropped:
        each shrink reloads it from its file."""
        lap = time.perf_counter()
        self.say("Running the original on its inputs", 0.02)
        # the file first: every session opens from a file, and an owned model is not held while they do
        if self.in_files:  # its own files: the graph, then its data files
            base = self.loaded.external_base
            self.files[ORIGINAL] = [self.loaded.path, *(base / name for name in self.loaded.external_data_files)]
        else:
            self._referenced = self._reference_original() if self.own_file else None
            self.files[ORIGINAL] = self._referenced or _write_model(self.source, self._scratch / "original.onnx",
                                                                    atomic=False)  # fmt: skip
        self._write_s = time.perf_counter() - lap
        _lap(self.timings, "sizes", lap)
        if self.in_files:  # the graph alone is held (small values in it); shrink reloads from its own files
            self._reload_from = self.loaded.path
        elif self.reload_source:
            skeleton = _skeleton(self.source)  # inputs and signature only; shrink reloads the original
            self._reload_from = (self._referenced[0] if self._referenced else
                                 _write_reloadable(self.source, self._scratch / "reload" / "original.onnx"))
            self.source = skeleton
            self.loaded.model = None
            release_free_memory()

    def _run_original(self) -> None:
        """The original run on its inputs (the budget of the rest comes from its first run); its sizes start."""
        lap = time.perf_counter()
        self.say("Running the original on its inputs", 0.05)
        # sizes are the delivered file's: the model's own file when sessions read a header pointing into it
        self.sizes.submit(ORIGINAL, [self.loaded.path] if self._referenced else self.files[ORIGINAL])
        opened = time.perf_counter()
        session = _open_file_session(self.files[ORIGINAL], 1, self.copies)
        # the original's first run sets the budget of the rest: a plan that fits the job's cap, or a refusal now
        self.budget = self._budget(per_variant_s=2 * self._write_s + time.perf_counter() - opened)
        self.inputs = parity_inputs(self.source, self.settings, session, budget=self.budget)
        if any(get_method(method).uses_context for method, _ in self.requested):
            tally = any(get_method(method).judges_candidates for method, _ in self.requested)
            self.split = split_for_calibration(self.inputs, self.source, self.settings, session, tally=tally)
        del session
        if self.in_files:  # its copy (a tied embedding folded, say) is made again for latency: one copy on disk at a time
            self.copies.drop(self.files[ORIGINAL][0])
        self.input_note = self.inputs.note
        self.inputs_digest = samples_digest(self.inputs.samples)
        self.original.parity = judge(self.inputs.reference, self.inputs.reference, self.inputs, self.settings,
                                     self.inputs.tally_reference)  # fmt: skip
        release_free_memory()  # the original's session and its temporaries, before the first variant
        _lap(self.timings, "parity", lap)
        self._emit()
        self._flush()

    def _budget(self, per_variant_s: float) -> Budget:
        """What this comparison is asked to run and the time its worker has left (measure/budget.py); each
        variant costs besides its inferences about what writing the original twice and opening it took."""
        settings = self.settings
        time_left = None
        if self._job is not None:
            deadline = self._job[0] + self._job[1] * (1 - PLAN_MARGIN)
            time_left = lambda: deadline - time.perf_counter()  # noqa: E731 - read at each check
        batches = len(settings.batches or [1]) if not batch_dim_fixed(self.source, settings) else 1
        methods = len(self.requested)
        return Budget(
            methods=methods, calibrating=sum(get_method(m).uses_context for m, _ in self.requested),
            latency=settings.latency, latency_settings=len(settings.threads) * batches,
            latency_budget_s=settings.latency_budget_s, latency_runs=settings.runs, overhead_s=per_variant_s,
            culprits_s=settings.culprit_budget_s * methods if settings.culprits or settings.auto else 0.0,
            time_left=time_left or (lambda: None), cap_s=self._job[1] if self._job is not None else None,
        )  # fmt: skip

    @property
    def latency_planned(self) -> bool:
        """Whether the budget's plan keeps latency (no plan: as the settings say)."""
        plan = self.budget.made if self.budget is not None else None
        return plan is None or plan.latency

    def add_variant(self, method: str, options: dict[str, Any], position: int | None = None) -> VariantResult:
        """Shrink (checked, in one ONNX Runtime session), write, start its sizes, judge parity in that session.
        ``position``: its place among the requested methods (default: after those added)."""
        assert self.inputs is not None, "measure_original() first"
        result = self._reserve(method, options, position)
        lap = time.perf_counter()
        return self._complete(result, self._shrink(method, options, result.key), lap)

    def _reserve(self, method: str, options: dict[str, Any], position: int | None = None) -> VariantResult:
        """The variant's place in the results (requested order), before it is built."""
        index, count = len(self.variants), max(len(self.requested), 1)
        self.say(f"Shrinking: {method}", 0.05 + 0.4 * index / count)
        result = VariantResult(key=_label(method, options, self.taken), method=method, options=dict(options))
        self._positions[result.key] = index if position is None else position
        self.variants.append(result)
        self.variants.sort(key=lambda r: self._positions.get(r.key, len(self.requested)))  # auto's: after them
        return result

    def _build_early(self) -> tuple[int, VariantResult, Streamed | ShrinkRayError] | None:
        """A first card within seconds, where a page waits for cards (``on_partial``): the first requested
        method that learns nothing, runs in this process and has no preparing step (weights-int8, float16:
        under a second on 100 MB, where dynamic-int8's child process takes 4 s) is built from a fresh load of
        the original before the original runs on its inputs (3 s on 100 MB), and its card shows what it
        rewrote meanwhile. It is written to its file and dropped at once (one variant held at a time, as the
        worker's memory check assumes); its check, parity and sizes come after, as any variant's. None: nothing
        to build early (else its place, its result and the written variant or its error)."""
        if self.on_partial is None or self.in_files or not self.reload_source:
            return None
        pick = next((i for i, (method, _) in enumerate(self.requested) if _quick(method)), None)
        if pick is None:
            return None
        method, options = self.requested[pick]
        result = self._reserve(method, options, pick)
        lap = time.perf_counter()
        built = self._shrink(method, options, result.key)
        _lap(self.timings, "shrink", lap)
        if isinstance(built, ShrinkRayError):
            return pick, result, built
        result.record, result.warnings, result.notes = built.summary(), list(built.warnings), list(built.notes)
        self._emit()
        files = self._write_variant(built.model, result.key)
        built.model = None
        release_free_memory()
        return pick, result, Streamed(built, files)

    def _shrink(self, method: str, options: dict[str, Any], key: str = "") -> Variant | Streamed | ShrinkRayError:
        """Build and check (onnx.checker); :meth:`_complete` opens its session from the written file."""
        try:
            # the run's verdict and its calibration samples: a method that calibrates or searches (auto,
            # weights-int4) learns from samples its result is not judged on; one built before the original ran
            # (_build_early) learns nothing
            context = self._judging(method)[0] if self.inputs is not None else RunContext(self.settings)
            spec = get_method(method)
            if self.in_files and spec.streams(spec.make_options(**options)):
                return self._stream(method, options, key)
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

    def _stream(self, method: str, options: dict[str, Any], key: str) -> Streamed:
        """The variant converted tensor by tensor from the original's files into its own model and data file
        in ``variants_dir`` (pipeline/streaming.py): memory holds the graph and a few tensors."""
        loaded = self.loaded
        header = LoadedModel(model=onnx.load(str(loaded.path), load_external_data=False), name=loaded.name,
                             path=loaded.path, external_data_files=list(loaded.external_data_files),
                             external_base=loaded.external_base)  # fmt: skip
        target = Path(self.settings.variants_dir) / variant_file_name(self._stem, key)
        target.parent.mkdir(parents=True, exist_ok=True)
        variant, path, _ = shrink_to_files(header, method, target, overwrite=True, **options)
        return Streamed(variant, [path, data_file(path)])

    def _complete(self, result: VariantResult, built: Variant | Streamed | ShrinkRayError,
                  lap: float) -> VariantResult:  # fmt: skip
        """Store a built variant (or its error), then judge its parity in the session validation opened."""
        files = None
        if isinstance(built, Streamed):
            built, files = built.variant, built.files
        variant = built
        if isinstance(variant, ShrinkRayError):
            result.error = str(variant)
            _lap(self.timings, "shrink", lap)
            self._emit()
            return result
        result.record = variant.summary()
        result.warnings = list(variant.warnings)
        result.notes = list(variant.notes)
        if not self._store(result, variant, files=files):  # written, dropped, then checked and opened from the file
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
        if self.in_files and result.key in self.files:  # a large model's copies: one on disk at a time
            self.copies.drop(self.files[result.key][0])
        variant.model = None
        del variant, built
        now = _lap(self.timings, "parity", lap)
        self._parity_spent += now - lap
        release_free_memory()
        self._flush()
        if self.spare_disk:
            self.keep_small(result)
        return result

    def keep_small(self, result: VariantResult) -> None:
        """A one-file variant of at least :data:`KEEP_COMPRESSED_FROM` of the original's size (a palettized
        model keeps the raw size) is kept gzip-compressed when that makes it under :data:`KEEP_COMPRESSED_BELOW`
        of its size: its sizes are measured first (they are of the model itself), then the file is replaced
        before the next variant is written, so the run's disk holds it once and small. Sessions, downloads and
        the browser panel read it through io/kept_files.py."""
        files = self.files.get(result.key, [])
        original = self.loaded.file_bytes or 0
        if len(files) != 1 or not original or files[0].stat().st_size < KEEP_COMPRESSED_FROM * original:
            return
        lap = time.perf_counter()
        while result.key in self.sizes.pending():
            self.sizes.wait_any(timeout=1.0)
            self._flush()
        self._flush()
        sizes = result.sizes
        if sizes is None or sizes.gzip > KEEP_COMPRESSED_BELOW * sizes.raw:
            return
        self.copies.drop(files[0])
        self.files[result.key] = [kept_files.compress(files[0])]
        result.file = str(self.files[result.key][0])
        _lap(self.timings, "sizes", lap)

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
        """Every size known (each published as it lands). In a capped worker, sizes still compressing when the
        budget's share of the cap is spent are given up with a note, so the run returns what it measured (a
        2.5 GB model on a loaded machine) instead of being stopped at the cap with nothing."""
        lap = time.perf_counter()
        self.say("Measuring sizes (gzip -9, brotli; a server sends the smaller)", 0.6)
        until = self._job[0] + self._job[1] * (1 - PLAN_MARGIN) if self._job is not None else None
        while self.sizes.pending():
            if until is not None and time.perf_counter() >= until:
                self._give_up_sizes()
                break
            self.sizes.wait_any(timeout=1.0 if until is None else max(min(1.0, until - time.perf_counter()), 0.01))
            self._flush()
        self._flush()
        _lap(self.timings, "sizes", lap)

    def _give_up_sizes(self) -> None:
        """Each model whose sizes are still compressing says so (its raw size is known: its files)."""
        assert self._job is not None
        for key in sorted(self.sizes.abandon()):
            raw = sum(os.path.getsize(f) for f in self.files.get(key, []) if os.path.exists(f))
            self._get(key).notes.append(
                f"Download sizes not measured: gzip and brotli of its {format_bytes(raw)} did not finish within "
                f"the run's {limit_words(self._job[1])}, so the savings and costs leave it out"
            )

    def measure_latency(self) -> None:
        """Each variant against the original, pairwise, from the files (the model itself is not needed)."""
        lap = time.perf_counter()
        if self.inputs is not None:  # parity and culprits are done: the original's outputs can go
            self.inputs.reference, self.inputs.samples = {}, []
            self.inputs.tally, self.inputs.tally_reserve, self.inputs.reserve = [], [], []
        if self.settings.latency and not self.latency_planned:  # the budget's plan left it out, and says why
            self.latency_note = self.budget.made.latency_note
        elif self.settings.latency:
            plan = _latency_plan(self.source, self.settings, self.inputs.options if self.inputs else None)
            if self.owns_model:  # the files are all latency reads: give the original's memory back first
                self.loaded.model = self.source = None
                release_free_memory()
            deadline = None
            if self._job is not None:  # a capped worker (the app, the CLI): its time cap is real
                start, cap = self._job
                deadline = (start + cap * (1 - LATENCY_RESERVE), cap)
            decoder = self.inputs.decoder if self.inputs is not None else None
            # a model measured in its own files is too large for two sessions at once: each is timed alone
            measure = _measure_latency_apart if self.in_files else _measure_all_latency
            self.latency_note = measure(plan, [self.original, *self.variants], self.files, self.settings, self.say,
                                        self.copies, deadline, decoder)  # fmt: skip
        _lap(self.timings, "latency", lap)
        self.say("Done", 1.0)
        self._emit()

    def result(self) -> Comparison:
        return self._comparison(lambda result: result)

    # ------------------------------------------------------------ helpers

    def _store(self, result: VariantResult, held: Variant | HandedOver, *, validated: bool = False,
               files: list[Path] | None = None) -> bool:  # fmt: skip
        """Write ``held.model`` (to ``variants_dir``: the user's copy), check the file (onnx.checker) and open
        its session from it (``self._session``: its validation, where parity runs), start its sizes.
        False (the result carries the error, the file is removed) when either refuses it.

        The model is taken out of ``held`` and not held while the file is checked and its session opens
        (unless the caller keeps models): those are the costliest moments of a variant (the checker's parsed
        copy, constant folding). ``validated`` skips both (a session already proved it). ``files``: the model
        is written there already (streamed), and only checked and opened.
        """
        model, held.model = held.model, None
        if files is None and self.settings.variants_dir is not None:  # (streamed variants are written already)
            files = self._write_variant(model, result.key)
        elif files is None:
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

    def _write_variant(self, model: onnx.ModelProto, key: str) -> list[Path]:
        """A variant's model written (atomically) as the user's copy in ``variants_dir``; the files written."""
        folder = Path(self.settings.variants_dir)
        folder.mkdir(parents=True, exist_ok=True)
        return _write_model(model, folder / variant_file_name(self._stem, key), atomic=True)

    def _reference_original(self) -> list[Path] | None:
        """The original as a header whose weights point into its own file (hard-linked into the scratch folder):
        sessions, measuring copies and each shrink's reload read it, and none of its weights is written again
        (a 100 MB upload's run wrote three copies: the original, its reload copy, its measuring copy). None,
        and a copy is written as before, when the file cannot be linked here or its layout is not understood."""
        places = raw_data_places(self.loaded.path, self.source)
        if places is None:
            return None
        folder = self._scratch / "original"
        weights, header = folder / "original.onnx.weights", folder / "original.onnx"
        try:
            folder.mkdir()
            os.link(self.loaded.path, weights)  # another file system: no link, the copy below
            onnx.save(referencing_header(self.source, places, weights.name), str(header))
        except OSError:
            shutil.rmtree(folder, ignore_errors=True)
            return None
        return [header, weights]

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
        # onnx.load refuses a data file with several links (the referencing header's is one): the engine's
        # loader reads it, each place checked inside its folder
        model = load(self._reload_from).model if self._referenced else onnx.load(str(self._reload_from))
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


@dataclass
class Streamed:
    """A variant written tensor by tensor into ``files`` (its model, then its data file) as it was made."""

    variant: Variant
    files: list[Path]


def _small_values_in(loaded: LoadedModel) -> None:
    """Read the values of a lazily loaded model's small external tensors (shapes, constants: what input
    synthesis and the signature read) into its graph; its weights stay in their files."""
    for tensor in loaded.model.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL and tensor_nbytes(tensor) <= SKELETON_KEEP_BYTES:
            read_in(tensor, loaded.external_base)


def _all_values_in(loaded: LoadedModel) -> None:
    """A lazily loaded model's weights read into its graph (compare holds it whole unless it owns files): from
    its data files, or from its own file when it was held in place."""
    loaded.model = values_in(loaded)
    loaded.external_base, loaded.in_place = None, False


#: A variant file at least this share of the original's is worth keeping compressed in a run store (a palettized
#: model keeps the raw size; float16 halves it and compresses little)...
KEEP_COMPRESSED_FROM = 0.75
#: ...when gzip makes it smaller than this share of itself.
KEEP_COMPRESSED_BELOW = 0.6

#: Seconds a shrink step waits for the large-window brotli encoders still running before it loads the original
#: (50-120 MB each beside the step's own memory; they run at 30-45 MB/s, so this is seldom reached).
LARGE_SIZES_WAIT_S = 10.0


def variant_file_name(stem: str, key: str, naming: str = "shrinkray") -> str:
    """``model.weights-int8.onnx``, ``model.palettize_levels-16.onnx``: safe on every file system. With
    ``naming`` "transformers.js", a method's default variant takes the name transformers.js loads for its dtype
    (``model_quantized.onnx``, ``model_q4.onnx``, ``model_fp16.onnx``: ``stem`` + ``_`` + dtype), so the files
    drop into the model's ``onnx/`` folder; other variants keep the first form."""
    if naming not in NAMINGS:
        raise OptionError(f"Unknown file naming '{naming}'", "Use one of: " + ", ".join(NAMINGS))
    if naming == "transformers.js" and key in {spec.name for spec in all_methods()}:
        dtype = get_method(key).transformers_js
        if dtype:
            return f"{stem}_{dtype}.onnx"
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", key.replace("=", "-")).strip("._") or "variant"
    return f"{stem}.{slug}.onnx"


#: How saved variants are named: Shrink Ray's own (model.METHOD.onnx) or transformers.js's (model_DTYPE.onnx).
NAMINGS = ("shrinkray", "transformers.js")
#: transformers.js's own file stems: a variant of one keeps it; any other model is its main file, ``model``
TRANSFORMERS_JS_STEMS = ("model", "encoder_model", "decoder_model", "decoder_model_merged", "decoder_with_past_model",
                         "vision_encoder", "text_encoder", "audio_encoder", "embed_tokens")  # fmt: skip


def naming_stem(name: str, naming: str) -> str:
    """The stem a model called ``name`` (an upload's or a sample's name) gives its variants' files under
    ``naming``: its own, except under transformers.js naming where a name that is none of its stems is ``model``."""
    return name if naming != "transformers.js" or name in TRANSFORMERS_JS_STEMS else "model"


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
    fixed_by_user = settings.inputs_path is not None or bool(settings.sample_files) or batch_dim_fixed(source, settings)
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
    decoder: decoder_lm.DecoderLayout | None = None,
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
    untimed: list[str] = []  # past the job's deadline
    over_budget: list[str] = []  # not one round fitted the latency budget
    too_slow: dict[int, tuple[int, float]] = {}  # batch -> (threads, first run ms) of a setting nothing fitted
    slowest_ms = 0.0
    for index, (threads, batch, feeds) in enumerate(combos):
        if threads in refused and batch >= refused[threads]:
            continue
        label = _setting_label(threads, batch)
        if deadline is not None and time.perf_counter() >= deadline[0]:
            untimed.append(label)
            continue
        if batch in too_slow and settings.latency_budget_s is not None:
            fewer, ms = too_slow[batch]  # even running `threads / fewer` times faster, no pair would fit
            if LEAST_PAIR_RUNS * ms * fewer / threads > settings.latency_budget_s * 1000:
                over_budget.append(label)
                continue
        say(f"Timing: {threads} thread(s), batch {batch or 'as given'}", 0.7 + 0.3 * index / len(combos))
        try:
            start = time.perf_counter()
            original = _open_file_session(files[ORIGINAL], threads, copies)
            opened_ms = (time.perf_counter() - start) * 1000
            run_original = _run_of(original, feeds, decoder)
            start = time.perf_counter()
            # a batch the model refuses fails here, before any variant opens; within the inference deadline, as
            # this batch (or thread count) has not run before: the timed runs that follow are not (a timer each
            # would weigh on runs under a millisecond), and they take about as long as this one did
            _run_of(original, feeds, decoder, bounded=f"One run of the original ({label})")()
            first_ms = (time.perf_counter() - start) * 1000
            slowest_ms = max(slowest_ms, first_ms)
            openers = [(key, partial(_runner, files[key], threads, feeds, copies, decoder)) for key in runnable]
            stats = time_pairwise(
                ORIGINAL, run_original, openers, batch=_batch_of(feeds), threads=threads,
                session_ms={ORIGINAL: opened_ms}, runs=settings.runs, warmup=settings.warmup,
                budget_s=settings.latency_budget_s, target=settings.latency_target,
                deadline=deadline[0] if deadline is not None else None,
                # a run of a second or more warms a model (latency.WARMUP_S): that one is its warm-up, in the budget
                reference_ms=first_ms if first_ms >= WARMUP_S * 1000 else None,
            )  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - a batch size the model refuses is reported, not fatal
            refused[threads] = batch
            notes.append(_batch_refused(exc, batch) + "; larger batches skipped")
            continue
        finally:
            original = run_original = None
        for key, stat in stats.items():
            by_key[key].latency.append(stat)
        if len(stats) < len(runnable) + 1:
            missed = [key for key in runnable if key not in stats]
            late = deadline is not None and time.perf_counter() >= deadline[0]
            (untimed if late else over_budget).append(label + (f" ({', '.join(missed)})" if stats else ""))
            if not stats and not late:
                too_slow[batch] = (threads, first_ms)
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
    if decoder is not None:  # what a run is, for a decoder: what its users wait for
        text += (f"; a decoder LM's run writes {GENERATED_TOKENS} tokens from one prompt (its pass, then "
                 f"{GENERATED_TOKENS - 1} steps {'through its cache' if decoder.cached else 'over the whole sequence'})")
    if untimed and deadline is not None:
        notes.insert(0, f"not timed, to finish within the run's {limit_words(deadline[1])} (the model runs slowly "
                     f"here): {'; '.join(untimed)}")  # fmt: skip
    if over_budget:
        budget = f"{settings.latency_budget_s:g} s" if settings.latency_budget_s is not None else "time"
        notes.insert(0, f"not timed within the {budget} budget per setting (one run of the original takes "
                     f"{format_seconds(slowest_ms / 1000)} here, and a variant needs a warm-up run and a round of both within "
                     f"its share; a larger latency budget would time it): {'; '.join(over_budget)}")  # fmt: skip
    if noisy:
        notes.insert(0, _noisy_note(settings, noisy))
    return text + ("; " + "; ".join(notes) if notes else "")


def _noisy_note(settings: CompareSettings, noisy: list[str]) -> str:
    return (f"too noisy to tell (interval wider than ±{settings.latency_target:.0%} and not wholly within "
            f"{SAME_BAND[0]:.2f}-{SAME_BAND[1]:.2f}x when the budget ended): " + ", ".join(noisy))


def _measure_latency_apart(
    plan: list[tuple[int, dict[str, np.ndarray]]],
    results: list[VariantResult],
    files: dict[str, list[Path]],
    settings: CompareSettings,
    say: Progress,
    copies: MeasuringCopies,
    deadline: tuple[float, float] | None = None,
    decoder: decoder_lm.DecoderLayout | None = None,
) -> str:
    """Latency of a model too large for two sessions at once (one measured in its own files): the original
    timed alone at each (threads, batch), then each variant alone at each, its measuring copy made once and
    dropped after it (one copy on disk at a time). The latency budget per setting is shared equally by the
    models. ``deadline`` as in :func:`_measure_all_latency`."""
    runnable = [r.key for r in results if r.ok and r.key in files and r.key != ORIGINAL]
    combos = [(t, b, feeds) for t in settings.threads for b, feeds in plan]
    share = None if settings.latency_budget_s is None else settings.latency_budget_s / (1 + len(runnable))
    notes: list[str] = []
    untimed: list[str] = []
    originals: dict[tuple[int, int], Alone] = {}

    def timing(threads: int, feeds: dict[str, np.ndarray]) -> Timing:
        return Timing(batch=_batch_of(feeds), threads=threads, runs=settings.runs, warmup=settings.warmup,
                      budget_s=share, target=settings.latency_target)  # fmt: skip

    def late() -> bool:
        return deadline is not None and time.perf_counter() >= deadline[0]

    for index, (threads, batch, feeds) in enumerate(combos):
        label = _setting_label(threads, batch)
        if late():
            untimed.append(label)
            continue
        say(f"Timing the original alone: {label}", 0.7 + 0.15 * index / len(combos))
        try:
            start = time.perf_counter()
            session = _open_file_session(files[ORIGINAL], threads, copies)
            opened_ms = (time.perf_counter() - start) * 1000
            _run_of(session, feeds, decoder, bounded=f"One run of the original ({label})")()  # a refused batch fails here
            held = [_run_of(session, feeds, decoder)]
            session = None
            originals[(threads, batch)] = time_alone(held.pop, timing(threads, feeds), session_ms=opened_ms)
        except Exception as exc:  # noqa: BLE001 - a batch size the model refuses is reported, not fatal
            notes.append(_batch_refused(exc, batch))
    copies.drop(files[ORIGINAL][0])
    timed: dict[str, dict[tuple[int, int], Alone]] = {}
    for index, key in enumerate(runnable):
        say(f"Timing {key} alone", 0.85 + 0.15 * index / max(len(runnable), 1))
        timed[key] = {}
        for threads, batch, feeds in combos:
            if (threads, batch) in originals and not late():
                opener = partial(_runner, files[key], threads, feeds, copies, decoder)
                timed[key][(threads, batch)] = time_alone(opener, timing(threads, feeds))
        copies.drop(files[key][0])
        if len(timed[key]) < len(originals):
            untimed.append(key)
    by_key = {r.key: r for r in results}
    noisy: list[str] = []
    for (threads, batch), original in originals.items():
        feeds = next(f for t, b, f in combos if (t, b) == (threads, batch))
        stats = stats_apart(original, {k: got[(threads, batch)] for k, got in timed.items() if (threads, batch) in got},
                            ORIGINAL, timing(threads, feeds))  # fmt: skip
        for key, stat in stats.items():
            by_key[key].latency.append(stat)
        noisy += [f"{key} ({threads} thread{'s' if threads > 1 else ''}, batch {s.batch})"
                  for key, s in stats.items() if key != ORIGINAL and s.too_noisy]  # fmt: skip
    budget = f"{settings.latency_budget_s:g} s" if settings.latency_budget_s is not None else "no time limit"
    text = (f"ONNX Runtime CPU, each model timed alone, one session at a time (the model is too large to hold "
            f"two: runs are not interleaved, so load that changes between them shows in the ratios), after up to "
            f"{settings.warmup} warm-up runs, until its median is known within ±{settings.latency_target:.0%} or "
            f"its share of the budget is spent ({budget} per setting, shared by the models); median and p90; "
            f"threads {settings.threads}")  # fmt: skip
    if decoder is not None:
        text += f"; a decoder LM's run writes {GENERATED_TOKENS} tokens from one prompt"
    if untimed:
        notes.insert(0, f"not timed, to finish within the run's time limit: {'; '.join(untimed)}")
    if noisy:
        notes.insert(0, _noisy_note(settings, noisy))
    return text + ("; " + "; ".join(notes) if notes else "")


def _setting_label(threads: int, batch: int) -> str:
    """'2 threads, batch 8' (batch 0: 'as given')."""
    return f"{threads} thread{'s' if threads > 1 else ''}, batch {batch or 'as given'}"


def _batch_refused(exc: Exception, batch: int) -> str:
    """The note for a batch the original could not run at; at batch 1 nothing can be timed: ``exc`` is raised,
    the deadline's own sentence (which names the limit) or ONNX Runtime's error explained."""
    if batch <= 1:
        if isinstance(exc, DeadlineExceededError):
            raise exc
        raise explain_runtime_error(exc) from None
    return f"batch {batch} could not run ({str(exc).splitlines()[0][:100]})"


#: Runs of a model the least timing of one variant takes: the original's first run (its warm-up when it runs
#: for a second or more), the variant's warm-up and one round of both (measure.latency.time_pairwise).
LEAST_PAIR_RUNS = 4


def _runner(files: list[Path], threads: int, feeds: dict[str, np.ndarray], copies: MeasuringCopies | None = None,
            decoder: decoder_lm.DecoderLayout | None = None) -> Callable[[], Any]:  # fmt: skip
    return _run_of(_open_file_session(files, threads, copies), feeds, decoder)


def _run_of(session, feeds: dict[str, np.ndarray], decoder: decoder_lm.DecoderLayout | None,
            bounded: str = "") -> Callable[[], Any]:  # fmt: skip
    """One timed run: the feeds through the session, or, for a decoder LM, writing GENERATED_TOKENS tokens
    from its prompt as its users wait for them (the prompt's pass, then the steps). ``bounded``: the run's
    subject, each inference then held to the inference deadline (``run_within``)."""
    def one(fed: dict[str, np.ndarray]) -> list:
        return run_within(session, fed, what=bounded) if bounded else session.run(None, fed)

    if decoder is None:  # timed runs call the session directly: no frame of ours in a sub-millisecond run
        return partial(run_within, session, feeds, what=bounded) if bounded else partial(session.run, None, feeds)
    names = [o.name for o in session.get_outputs()]

    def step(fed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(zip(names, one(fed), strict=True))

    return partial(decoder_lm.generate, step, decoder, feeds)


def _batch_of(feeds: dict[str, np.ndarray]) -> int:
    """The batch that really ran: the first axis of the first input (1 for scalars)."""
    first = next(iter(feeds.values()), None)
    return int(first.shape[0]) if first is not None and first.ndim else 1

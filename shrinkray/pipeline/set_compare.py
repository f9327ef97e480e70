"""A model set compared whole: every file shrunk by each method, the set judged by what it writes.

An encoder–decoder (io/model_set.py) is one model to its user: a method is applied to every file of the
set, the variant is the set of those files (its size their sum, as a page downloads them all), and its
verdict comes from running the set as it is used (measure/seq2seq.py): the variant's encoder feeding the
variant's decoder, greedy, against the original's outputs on the same inputs, judged by the same verdict
as a decoder LM's continuations (the share kept token for token, with its 95% bound; next-token agreement and
KL divergence over the original's own output). The result is a :class:`Comparison` like any other, so every
report, the app's cards and the headline read it unchanged. Saved variants take transformers.js's names
(``encoder_model_quantized.onnx``, ``decoder_model_q4.onnx``), so the folder drops into place.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from shrinkray.cores import usable_cores
from shrinkray.errors import ModelLoadError, OptionError, SeveralModels, ShrinkRayError
from shrinkray.graph.sessions import open_file_session
from shrinkray.io.files import save
from shrinkray.io.model_set import ModelSet
from shrinkray.measure import seq2seq
from shrinkray.measure.browser import BrowserInputs
from shrinkray.measure.budget import PLAN_MARGIN, job_clock, limit_words
from shrinkray.measure.deadline import run_within
from shrinkray.measure.generation import GENERATED
from shrinkray.measure.inputs import samples_digest
from shrinkray.measure.parity import GENERATION, UNDECIDED, OutputKind, compare_outputs
from shrinkray.measure.parity_inputs import ParityInputs
from shrinkray.measure.results import ORIGINAL, CompareSettings, Comparison, VariantResult
from shrinkray.measure.sample_files import load_sample_files
from shrinkray.measure.sizes import Sizes, brotli_stream_size, brotli_window, gzip_stream_size, plan
from shrinkray.measure.what_changes import worst_examples
from shrinkray.methods.base import RunContext, default_methods, get_method
from shrinkray.pipeline.compare import _label, variant_file_name
from shrinkray.pipeline.inspect import MethodReach, ModelSummary, inspect_model
from shrinkray.pipeline.shrink import shrink

Progress = Callable[[str, float], None]
#: Methods a set is not shrunk by: ``auto`` searches one file's tensors against that file's own verdict.
NOT_FOR_SETS = {"auto"}
#: Options a method takes inside a set: activation-aware scales and GPTQ learn from a file's own inputs,
#: which a decoder of a set gets only from the encoder (said in the variant's notes).
SET_OPTIONS = {"weights-int4": {"activation_aware": False, "gptq": "off"}}
#: The role whose decoder the set is judged through, in order of preference (what transformers.js runs).
JUDGED_DECODERS = ("decoder_merged", "decoder")


def default_set_methods() -> list[tuple[str, dict[str, Any]]]:
    return [(name, options) for name, options in default_methods() if name not in NOT_FOR_SETS]


def compare_set(model_set: ModelSet, settings: CompareSettings | None = None, progress: Progress | None = None,
                on_partial: Callable[[Comparison], None] | None = None, *,
                naming: str = "transformers.js") -> Comparison:  # fmt: skip
    """Every method on every file of the set, each variant set judged end to end (see the module's text).

    ``settings.variants_dir``: where each variant's files are written (``naming``: transformers.js's file
    names, or Shrink Ray's ``NAME.METHOD.onnx``); without it they go to a private folder that is removed.
    ``on_partial``: the comparison so far, after the original and after each variant is judged (sizes come
    last), so a page can draw each variant's card as it lands.
    """
    settings = settings or CompareSettings()
    say = progress or (lambda _step, _fraction: None)
    methods = settings.methods or default_set_methods()
    for method, _ in methods:
        if method in NOT_FOR_SETS:
            raise ModelLoadError(f"The method {method} works on one model file, not on a set",
                                 "Choose other methods, or one file of the set")  # fmt: skip
        get_method(method)
    started = time.perf_counter()
    clock = job_clock()  # a capped worker's (start, cap); None in a direct call: no time limit
    timings: dict[str, float] = {}
    scratch = Path(tempfile.mkdtemp(prefix="shrinkray-set-"))
    try:
        say("Reading the set", 0.02)
        originals = {role: model_set.load(role) for role in model_set.members}
        route, layout = set_layout(model_set, originals)
        judged = route.judged
        summary = set_summary(model_set, originals)
        files = {ORIGINAL: {role: model_set.path(role) for role in model_set.members}}
        say("Running the original set on its inputs", 0.05)
        tokenizer, text = _text_of(model_set, settings)
        batches, source = set_input_batches(layout, model_set, settings, originals["encoder"].model)
        digest = samples_digest(batches)  # the inputs as planned: the browser panel rebuilds them and checks
        lap = time.perf_counter()
        reference = _generate(files[ORIGINAL], route, layout, batches[:1], None)
        fits = _batches_that_fit(len(batches), time.perf_counter() - lap, len(methods), clock)
        budget_note = ""
        if fits < len(batches):  # the job's time allows fewer inputs: the verdict says what it rests on
            budget_note = (f"; {fits * len(batches[0][layout.encoder_ids])} inputs, not "
                           f"{sum(len(b[layout.encoder_ids]) for b in batches)}: the run's "
                           f"{limit_words(clock[1])} allows no more through every variant")  # fmt: skip
            batches = batches[:fits]
        if len(batches) > 1:
            reference = _joined(reference, _generate(files[ORIGINAL], route, layout, batches[1:], None), layout)
        kinds = _kinds(layout)
        count = sum(len(b[layout.encoder_ids]) for b in batches)
        note = (f"Inputs: {count} inputs, {source}, through {layout.words}; "
                f"judged through {Path(model_set.members[judged]).name}")  # fmt: skip
        if route.step is not None:
            then = ("its cache branch" if route.step == judged
                    else f"{Path(model_set.members[route.step]).name} through the cache")  # fmt: skip
            note += f", then {then} a token at a time, as runtimes run a set"
        note += budget_note
        unjudged = [Path(model_set.members[r]).name for r in model_set.members
                    if r not in ("encoder", judged, route.step)]  # fmt: skip
        if unjudged:
            note += f" ({', '.join(unjudged)} shrunk and sized too, not run)"
        reserve = _Reserve(files[ORIGINAL], route, layout, reference, tokenizer, text, settings.inputs.seed,
                           time_left=_time_left(clock))  # fmt: skip
        reserve.per_batch_s = (time.perf_counter() - lap) / max(len(batches), 1)
        original = VariantResult(key=ORIGINAL, method=None, options={})
        original.parity = compare_outputs(reference, reference, kinds, settings.verdict, samples=count)
        timings["parity"] = time.perf_counter() - started
        variants: list[VariantResult] = []
        taken = {ORIGINAL}
        calibration: tuple[dict[str, RunContext], str] | None | bool = False  # made when a method first needs it
        out_dir = Path(settings.variants_dir) if settings.variants_dir else scratch / "variants"

        def partial() -> None:
            if on_partial is not None:
                on_partial(Comparison(name=model_set.name, summary=summary, settings=replace(settings, latency=False),
                                      original=original, variants=[replace(v) for v in variants], input_note=note,
                                      inputs_digest=digest))  # fmt: skip

        partial()
        for index, (method, options) in enumerate(methods):
            result = VariantResult(key=_label(method, options, taken), method=method, options=dict(options))
            variants.append(result)
            say(f"Shrinking the set: {method}", 0.1 + 0.8 * index / len(methods))
            lap = time.perf_counter()
            if get_method(method).uses_context and calibration is False:
                calibration = _calibration(model_set, route, layout, settings)  # once, for every method that learns
            made = _shrink_set(model_set, originals, method, options, result, out_dir, naming, calibration or None)
            timings["shrink"] = timings.get("shrink", 0.0) + time.perf_counter() - lap
            if made is None:
                continue
            files[result.key] = made
            result.file = str(out_dir / _folder_name(result.key))  # the variant set's folder, laid out as the set
            lap = time.perf_counter()
            say(f"Running the set: {result.key}", 0.1 + 0.8 * (index + 0.5) / len(methods))
            try:
                outputs = _generate(made, route, layout, batches, reference[GENERATED])
            except ShrinkRayError as exc:
                result.error = f"The shrunk set does not run: {exc}"
                continue
            result.parity = compare_outputs(reference, outputs, kinds, settings.verdict, samples=count)
            judged_on, judged_reference = batches, reference
            if result.parity.status == UNDECIDED and reserve.batches(settings):  # more inputs, as a model's verdict gets
                more = _generate(made, route, layout, reserve.feeds, reserve.reference[GENERATED])
                outputs = _joined(outputs, more, layout)
                judged_on, judged_reference = batches + reserve.feeds, reserve.all_reference
                result.parity = compare_outputs(judged_reference, outputs, kinds, settings.verdict,
                                                samples=count + reserve.count)  # fmt: skip
            _tell_change(result, judged_on, layout, judged_reference, outputs, tokenizer)
            result.examples = _what_changes(result, judged_on, layout, judged_reference, outputs, tokenizer, kinds)
            timings["parity"] = timings.get("parity", 0.0) + time.perf_counter() - lap
            partial()
        say("Measuring sizes", 0.92)
        lap = time.perf_counter()
        for key, paths in files.items():
            target = original if key == ORIGINAL else next(v for v in variants if v.key == key)
            target.sizes = _set_sizes(paths, settings)
        timings["sizes"] = time.perf_counter() - lap
        latency_note = ("Latency is not timed for a set of models: each file's own comparison times it, and the "
                        "browser panel times the set's generation")  # fmt: skip
        return Comparison(name=model_set.name, summary=summary, settings=replace(settings, latency=False, methods=methods),
                          original=original, variants=variants, input_note=note, latency_note=latency_note,
                          timings=timings, inputs_digest=digest)  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def set_layout(model_set: ModelSet, originals: dict | None = None) -> tuple[_Route, seq2seq.Seq2SeqLayout]:
    """How the set is run (which decoder, with its cache or not) and what its inputs and outputs do; a
    :class:`SeveralModels` naming its files when it is not laid out as optimum lays a set out."""
    originals = originals or {role: model_set.load(role) for role in model_set.members}
    judged = next(role for role in JUDGED_DECODERS if role in model_set.members)  # a ModelSet always has one
    layout = seq2seq.layout_of(originals["encoder"].model, originals[judged].model, model_set.config)
    if layout is None:
        raise SeveralModels(
            f"The set's {model_set.words()} are not laid out as an encoder and a decoder (input_ids or "
            "input_features to last_hidden_state; input_ids and encoder_hidden_states to logits), so they are "
            "compared one at a time", "Choose one of them", choices=tuple(model_set.members.values()))  # fmt: skip
    step = judged if judged == "decoder_merged" else "decoder_with_past" if "decoder_with_past" in model_set.members else None
    cache = seq2seq.cache_step(originals[judged].model, originals[step].model) if step else None
    return _Route(judged, step if cache else None, cache), layout


def set_input_batches(layout: seq2seq.Seq2SeqLayout, model_set: ModelSet, settings: CompareSettings,
                      encoder: onnx.ModelProto | None = None) -> tuple[list[dict[str, np.ndarray]], str]:  # fmt: skip
    """The encoder's feeds in batches, and where they come from in words: the user's WAV files for a speech
    encoder (each clip one input), else text lines (the user's, else the set's prompts.txt through its tokenizer),
    else synthesized ones. An .npz of arrays, or files a text encoder cannot read, are refused in one sentence."""
    if settings.inputs_path:
        raise OptionError("A set of models is fed text, one input per line (or clips, when its encoder takes speech), "
                          f"not arrays like {Path(settings.inputs_path).name}",
                          "Give a text file, or WAV files for a speech encoder")  # fmt: skip
    if settings.sample_files:
        names = ", ".join(Path(p).name for p in settings.sample_files)
        if layout.features is None:
            raise OptionError(f"This set's encoder reads text, so it cannot be fed {names}",
                              "Give a text file, one input per line")  # fmt: skip
        encoder = encoder if encoder is not None else model_set.load("encoder").model
        clips = load_sample_files(settings.sample_files, encoder, settings.inputs)
        size = seq2seq.INPUTS_PER_BATCH
        batches = [{name: np.concatenate([c[name] for c in clips[start:start + size]]) for name in clips[0]}
                   for start in range(0, len(clips), size)]  # fmt: skip
        return batches, f"your {len(clips)} clip{'s' if len(clips) > 1 else ''} ({names}) as log-mel features"
    tokenizer, text = _text_of(model_set, settings)
    batches = seq2seq.input_batches(layout, tokenizer=tokenizer, text=text, seed=settings.inputs.seed)
    return batches, seq2seq.source_words(tokenizer, text, layout)


def _text_of(model_set: ModelSet, settings: CompareSettings) -> tuple[str, str]:
    """The tokenizer and the text a set's inputs come from: the user's, else the set's own."""
    return settings.inputs.tokenizer or model_set.tokenizer, settings.inputs.text or model_set.prompts


#: Inputs the browser panel runs through a set (each on its own, unpadded, as a page would): the first ones.
BROWSER_INPUTS = 48


def browser_inputs(model_set: ModelSet, settings: CompareSettings) -> BrowserInputs:
    """What the browser panel runs through the set (runs ONNX Runtime: call it in a capped worker): the first
    :data:`BROWSER_INPUTS` of the comparison's inputs, each on its own, and the server original's outputs on
    them, judged by the same verdict as the comparison's (``generated tokens``)."""
    route, layout = set_layout(model_set)
    batches, _ = set_input_batches(layout, model_set, settings)
    singles = []
    for batch in batches:
        for row in range(len(batch[layout.encoder_ids])):
            if len(singles) < BROWSER_INPUTS:
                singles.append(_one_input(batch, row, layout))
    paths = {role: model_set.path(role) for role in model_set.members}
    reference = _generate(paths, route, layout, [*singles], None)[GENERATED]
    running = reference[:, :, 1] < seq2seq.FINISHED_MARGIN
    steps = [int(np.nonzero(r)[0][-1]) + 1 if r.any() else 1 for r in running]  # up to each one's end token
    return BrowserInputs(
        singles, {GENERATED: reference}, {GENERATED: _kinds(layout)[GENERATED]}, "", len(singles), settings.verdict,
        timing=singles[0], timing_batch=1, digest=samples_digest(batches),
        model_set={"encoderInput": layout.encoder_ids, "encoderMask": layout.encoder_mask,
                   "encoderOutput": layout.encoder_output, "decoderIds": layout.decoder_ids,
                   "decoderStates": layout.decoder_states, "decoderMask": layout.decoder_mask, "logits": layout.logits,
                   "start": layout.start_token, "end": layout.end_token, "steps": steps, "useCache": layout.use_cache,
                   "past": [[name, list(shape), np.dtype(dtype).name] for name, shape, dtype in layout.past]},
    )  # fmt: skip


def _one_input(batch: dict[str, np.ndarray], row: int, layout: seq2seq.Seq2SeqLayout) -> dict[str, np.ndarray]:
    """One input of a batch on its own: a text's padding cut off (as a page would feed it), a clip as it is."""
    feeds = {name: value[row:row + 1] for name, value in batch.items()}
    if layout.features is None and layout.encoder_mask:
        length = int(feeds[layout.encoder_mask].sum())
        feeds = {name: value[:, :length] for name, value in feeds.items()}
    return feeds


def variant_paths(model_set: ModelSet, result: VariantResult) -> dict[str, Path]:
    """Where a variant set's files are (its folder, laid out as the set's, in transformers.js's names), by role;
    the original's own files for the original."""
    if result.method is None:
        return {role: model_set.path(role) for role in model_set.members}
    folder = Path(result.file or "")
    found = {}
    for role, member in model_set.members.items():
        relative = Path(*member.split("/"))
        path = folder / relative.parent / variant_file_name(relative.name.removesuffix(".onnx"), result.key,
                                                             "transformers.js")  # fmt: skip
        if path.is_file():
            found[role] = path
    return found


#: Inputs a calibrating method (weights-int4's activation-aware scales) learns from in a set: held out of the
#: judged ones and of their reserve (the text's last lines; clips of another seed).
CALIBRATION_INPUTS = 32


def _calibration(model_set: ModelSet, route: _Route, layout: seq2seq.Seq2SeqLayout, settings: CompareSettings,
                 ) -> tuple[dict[str, RunContext], str] | None:  # fmt: skip
    """Per file of the set, the inputs a calibrating method learns from, as the set itself feeds that file: the
    encoder the held-out inputs, the decoder (and its cached form) the original encoder's states and the
    original's own outputs on them. None when there are no inputs like the set's own to learn from (token ids
    drawn without a tokenizer, as for a decoder LM; the user's clips, all judged)."""
    tokenizer, text = _text_of(model_set, settings)
    if settings.sample_files or (layout.features is None and not held_out(layout, tokenizer, text)):
        return None  # no inputs like the set's own beyond those judged
    lines = seq2seq.text_lines(text) if layout.features is None else 0
    batches = seq2seq.input_batches(layout, tokenizer=tokenizer, text=text, seed=settings.inputs.seed + 104729,
                                    batches=CALIBRATION_INPUTS // seq2seq.INPUTS_PER_BATCH,
                                    skip=lines - CALIBRATION_INPUTS if lines else 0)  # fmt: skip
    paths = {role: model_set.path(role) for role in model_set.members}
    feeds: dict[str, list[dict[str, np.ndarray]]] = {"encoder": batches}
    encoder = open_file_session(paths["encoder"], optimized=True, threads=1)
    decoder = open_file_session(paths[route.judged], optimized=True, threads=1)
    names = [o.name for o in decoder.get_outputs()]
    written = _generate(paths, route, layout, batches, None)[GENERATED][..., 0].astype(np.int64)
    done = 0
    for batch in batches:
        rows = len(batch[layout.encoder_ids])
        states = run_within(encoder, batch, names=[layout.encoder_output], what="One calibration run")[0]
        mask = batch.get(layout.encoder_mask) if layout.encoder_mask else None
        forced = np.concatenate([np.full((rows, 1), layout.start_token, np.int64), written[done:done + rows, :-1]], axis=1)
        feeds.setdefault(route.judged, []).append(seq2seq.decoder_feeds(layout, forced, states, mask))
        if route.step is not None and route.step != route.judged and forced.shape[1] > 1:  # decoder_with_past:
            first = run_within(decoder, seq2seq.decoder_feeds(layout, forced[:, :-1], states, mask), names=names)
            past = {n: v for n, v in zip(names, first, strict=True) if n.startswith("present")}  # its last step
            feeds.setdefault(route.step, []).append(seq2seq.cached_feeds(layout, route.cache, forced[:, -1], past,
                                                                         states, mask))  # fmt: skip
        done += rows
    settings = replace(settings, inputs=replace(settings.inputs, tokenizer=tokenizer, text=text))
    contexts = {role: RunContext(settings=settings, calibration=ParityInputs(samples=samples, reference={}, kinds={},
                                                                              note="")) for role, samples in feeds.items()}  # fmt: skip
    source = "clips of voiced audio" if layout.features is not None else f"the last lines of {Path(text).name}"
    return contexts, f"{CALIBRATION_INPUTS} inputs not judged ({source})"


def held_out(layout: seq2seq.Seq2SeqLayout, tokenizer: str, text: str) -> int:
    """The text's last lines a calibrating method learns from, never judged: :data:`CALIBRATION_INPUTS` when the
    text has that many beyond the judged ones (0 otherwise, and for clips, which come from another seed)."""
    if layout.features is not None or not (tokenizer and text):
        return 0
    enough = seq2seq.text_lines(text) >= seq2seq.BATCHES * seq2seq.INPUTS_PER_BATCH + CALIBRATION_INPUTS
    return CALIBRATION_INPUTS if enough else 0


def _shrink_set(model_set: ModelSet, originals: dict, method: str, options: dict[str, Any], result: VariantResult,
                out_dir: Path, naming: str, calibration: tuple[dict[str, RunContext], str] | None = None,
                ) -> dict[str, Path] | None:  # fmt: skip
    """Every file of the set shrunk by one method and written under ``out_dir/<key>/`` with the set's own
    layout; the written paths by role, or None (``result.error`` says why). ``calibration``: per file, what a
    calibrating method learns from (:func:`_calibration`); a file without it is shrunk uncalibrated."""
    folder = out_dir / _folder_name(result.key)
    written: dict[str, Path] = {}
    contexts, told = calibration or ({}, "")
    spec = get_method(method)
    resolved = spec.make_options(**options)  # weights-int4 learns unless its options turn it off
    calibrating = spec.uses_context and (getattr(resolved, "activation_aware", True) or getattr(resolved, "gptq", "") == "on")
    extra = {} if contexts or not calibrating else SET_OPTIONS.get(method, {})
    if calibrating and contexts:
        uncalibrated = [Path(model_set.members[r]).name for r in model_set.members if r not in contexts]
        result.notes.append(f"Calibrated in the set on {told}: the encoder on them, the decoder (and its cached "
                            "form) on the encoder's states and the original's own outputs"
                            + (f"; {', '.join(uncalibrated)} data-free" if uncalibrated else ""))  # fmt: skip
    elif extra:
        result.notes.append("Uncalibrated in a set: activation-aware scales and GPTQ learn from a file's own "
                            "inputs, and this set has no inputs like its own beyond those judged (its tokenizer.json "
                            "and a prompts.txt of more lines, or clips)")  # fmt: skip
    record: dict[str, Any] = {"method": method, "options": dict(options), "tensors_changed": 0,
                              "weight_bytes_before": 0, "weight_bytes_after": 0, "changes": [], "files": {}}
    protect = [model_set.path(role) for role in model_set.members]
    for role, loaded in originals.items():
        try:
            context = contexts.get(role)
            more = extra if context is not None or not calibrating else {**SET_OPTIONS.get(method, {}), **extra}
            variant = shrink(loaded, method, open_runtime=False, context=context, **{**more, **options})
        except ShrinkRayError as exc:
            result.error = f"{Path(model_set.members[role]).name}: {exc}"
            return None
        relative = Path(*model_set.members[role].split("/"))
        stem = relative.name.removesuffix(".onnx")
        target = folder / relative.parent / variant_file_name(stem, result.key, naming)
        target.parent.mkdir(parents=True, exist_ok=True)
        save(variant.model, target, protect=protect, overwrite=True)
        written[role] = target
        own = variant.summary()
        for field in ("tensors_changed", "weight_bytes_before", "weight_bytes_after"):
            record[field] += int(own.get(field) or 0)
        record["changes"].extend({**c, "name": f"{relative.name}: {c.get('name', '')}"} for c in own["changes"])
        record["files"][role] = str(target)
        result.warnings.extend(f"{relative.name}: {w}" for w in variant.warnings)
        result.notes.extend(f"{relative.name}: {n}" for n in variant.notes)
    for companion in model_set.companions():  # the folder is a whole model folder: it loads as it is
        target = folder / companion.relative_to(model_set.folder)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(companion, target)
    result.record = record
    return written


def _folder_name(key: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in key) or "variant"


@dataclass(frozen=True)
class _Route:
    """Which files a set's generation runs: ``judged`` on the first step (and every step without a cache),
    ``step`` with ``cache`` a token at a time after it (None: the whole sequence again each step)."""

    judged: str
    step: str | None = None
    cache: seq2seq.CacheStep | None = None


def _generate(paths: dict[str, Path], route: _Route, layout: seq2seq.Seq2SeqLayout, batches: list[dict],
              teacher: np.ndarray | None) -> dict[str, np.ndarray]:  # fmt: skip
    """The set's outputs on every batch (the original's when ``teacher`` is None; else forced over its tokens)."""
    encoder = open_file_session(paths["encoder"], optimized=True, threads=1)
    decoder = open_file_session(paths[route.judged], optimized=True, threads=1)
    step = None
    if route.step is not None:
        step = decoder if route.step == route.judged else open_file_session(paths[route.step], optimized=True, threads=1)

    def runner(session) -> seq2seq.Run:
        names = [o.name for o in session.get_outputs()]
        return lambda feeds: dict(zip(names, run_within(session, feeds, names=names), strict=True))

    outs = []
    done = 0
    for batch in batches:
        rows = len(batch[layout.encoder_ids])
        forced = None if teacher is None else teacher[done:done + rows]
        outs.append(seq2seq.generate(runner(encoder), runner(decoder), layout, batch, forced,
                                     runner(step) if step is not None else None, route.cache))  # fmt: skip
        done += rows
    width = max(o[GENERATED].shape[1] for o in outs)
    generated = np.concatenate([_pad(o[GENERATED], width, layout) for o in outs])
    logit_width = min(o[seq2seq.LOGITS].shape[1] for o in outs)
    logits = np.concatenate([o[seq2seq.LOGITS][:, :logit_width] for o in outs])
    return {GENERATED: generated, seq2seq.LOGITS: logits}


def _time_left(clock: tuple[float, float] | None) -> Callable[[], float]:
    """Seconds the capped worker has left before its plan's margin (infinite outside one)."""
    if clock is None:
        return lambda: float("inf")
    deadline = clock[0] + clock[1] * (1 - PLAN_MARGIN)
    return lambda: deadline - time.perf_counter()


def _batches_that_fit(batches: int, first_s: float, methods: int, clock: tuple[float, float] | None) -> int:
    """Batches of inputs every variant can be run on in the capped worker's time, from the original's first
    batch (``first_s``; each variant's run costs about as much, its shrink as much again): all of them, or
    fewer (at least one)."""
    if clock is None:
        return batches
    left = _time_left(clock)() + first_s  # the first batch is already run for the original
    per_batch = first_s * (1 + 2 * methods)
    return max(1, min(batches, int(left // max(per_batch, 1e-9))))


class _Reserve:
    """More inputs and the original's outputs on them, made the first time a variant's verdict is undecided."""

    def __init__(self, paths: dict[str, Path], route: _Route, layout: seq2seq.Seq2SeqLayout, reference: dict,
                 tokenizer: str, text: str, seed: int, time_left: Callable[[], float]) -> None:  # fmt: skip
        self.paths, self.route, self.layout, self.first = paths, route, layout, reference
        self.tokenizer, self.text, self.seed, self.time_left = tokenizer, text, seed, time_left
        self.per_batch_s = 0.0  # the original's time per batch, told by compare_set
        self.feeds: list[dict] = []
        self.reference: dict = {}
        self.all_reference: dict = {}
        self.made = False

    @property
    def count(self) -> int:
        return sum(len(b[self.layout.encoder_ids]) for b in self.feeds)

    def batches(self, settings: CompareSettings) -> bool:
        """Whether there are reserve inputs (made now, once)."""
        if not self.made:
            self.made = True
            if settings.sample_files:  # the user's own clips are judged whole: there is no reserve of them
                return False
            wanted = seq2seq.BATCHES * seq2seq.RESERVE_BATCHES
            if self.time_left() < 2 * wanted * self.per_batch_s:  # the original's and the variant's runs on them
                return False  # no time for them: the verdict stays undecided and says more inputs would decide it
            first = len(self.first[GENERATED])
            self.feeds = seq2seq.input_batches(self.layout, tokenizer=self.tokenizer, text=self.text, seed=self.seed,
                                               batches=seq2seq.BATCHES * seq2seq.RESERVE_BATCHES, skip=first,
                                               hold_out=held_out(self.layout, self.tokenizer, self.text))  # fmt: skip
            if self.feeds:
                self.reference = _generate(self.paths, self.route, self.layout, self.feeds, None)
                self.all_reference = _joined(self.first, self.reference, self.layout)
        return bool(self.feeds)


def _joined(first: dict, more: dict, layout: seq2seq.Seq2SeqLayout) -> dict[str, np.ndarray]:
    """Two runs' outputs as one: outputs widened to the longer, logits cut to the shorter."""
    width = max(first[GENERATED].shape[1], more[GENERATED].shape[1])
    logits = min(first[seq2seq.LOGITS].shape[1], more[seq2seq.LOGITS].shape[1])
    return {GENERATED: np.concatenate([_pad(first[GENERATED], width, layout), _pad(more[GENERATED], width, layout)]),
            seq2seq.LOGITS: np.concatenate([first[seq2seq.LOGITS][:, :logits], more[seq2seq.LOGITS][:, :logits]])}


def _pad(generated: np.ndarray, width: int, layout: seq2seq.Seq2SeqLayout) -> np.ndarray:
    """A batch's outputs widened to ``width`` tokens: its end token, certain (every output there has ended)."""
    if generated.shape[1] == width:
        return generated
    pad = np.zeros((generated.shape[0], width - generated.shape[1], 2))
    pad[..., 0] = layout.end_token if layout.end_token is not None else -1
    pad[..., 1] = seq2seq.FINISHED_MARGIN
    return np.concatenate([generated, pad], axis=1)


def _kinds(layout: seq2seq.Seq2SeqLayout) -> dict[str, OutputKind]:
    return {
        GENERATED: OutputKind(GENERATION, why=f"each input's output, greedy, through {layout.words}: judged by "
                              "the share of outputs kept token for token", unit="input"),
        seq2seq.LOGITS: OutputKind("scores", -1, "the decoder's next-token logits over the original's own output "
                                   "(the variant reads the same tokens): the next token kept at each position; "
                                   "the KL divergence of the distributions is measured too", tokens=True),
    }  # fmt: skip


def _tell_change(result: VariantResult, batches: list[dict], layout: seq2seq.Seq2SeqLayout,
                 reference: dict, outputs: dict, tokenizer: str) -> None:  # fmt: skip
    """A changed output, read through the tokenizer, joins what the verdict says."""
    generated = next((o for o in result.parity.outputs if o.name == GENERATED), None)
    if generated is None or generated.status == "pass" or not tokenizer:
        return
    inputs = None  # a clip's features are no text to show
    if layout.features is None:
        width = max(b[layout.encoder_ids].shape[1] for b in batches)
        inputs = np.concatenate([np.pad(b[layout.encoder_ids], ((0, 0), (0, width - b[layout.encoder_ids].shape[1])))
                                 for b in batches])  # fmt: skip
    example = seq2seq.first_change(inputs, reference[GENERATED], outputs[GENERATED], tokenizer)
    if example:
        generated.decisions = f"{generated.decisions}; {example}" if generated.decisions else example


def _what_changes(result: VariantResult, batches: list[dict], layout: seq2seq.Seq2SeqLayout, reference: dict,
                  outputs: dict, tokenizer: str, kinds: dict[str, OutputKind]) -> list:  # fmt: skip
    """The inputs whose outputs changed most, as text (what the app's "What changes" and the reports show): each
    told after its input's last words (a text's padding moved before it), the tokens that differ marked."""
    samples = []
    if layout.features is None:
        rows = [row[mask.astype(bool)] if layout.encoder_mask else row for b in batches
                for row, mask in zip(b[layout.encoder_ids], b.get(layout.encoder_mask, b[layout.encoder_ids]), strict=True)]  # fmt: skip
        width = max(len(r) for r in rows)
        pad = layout.end_token if layout.end_token is not None else 0
        samples = [{layout.encoder_ids: np.stack([np.pad(r, (width - len(r), 0), constant_values=pad) for r in rows])}]
    ref, var = np.array(reference[GENERATED]), np.array(outputs[GENERATED])
    if layout.end_token is not None:  # where both had ended: no tokens to show (not a run of end tokens)
        ended = (np.cumsum(ref[..., 0] == layout.end_token, axis=-1) > 0) & (
            np.cumsum(var[..., 0] == layout.end_token, axis=-1) > 0)  # fmt: skip
        ref[..., 0][ended], var[..., 0][ended] = -1, -1
    try:
        return worst_examples(result.parity, {GENERATED: ref}, {GENERATED: var}, samples, kinds, tokenizer,
                              prompts=layout.encoder_ids if samples else "")  # fmt: skip
    except Exception:  # noqa: BLE001 - showing what changes never fails the comparison it illustrates
        return []


def _set_sizes(paths: dict[str, Path], settings: CompareSettings) -> Sizes:
    """The set's bytes as a page downloads it: every file with its external data, raw and compressed (one brotli
    quality for all), each read in chunks (a 2 GB decoder is never held whole), two files at a time."""
    files = [f for path in paths.values() for f in (path, *_data_files(path))]
    raw = [f.stat().st_size for f in files]
    quality, _ = plan(raw, settings.brotli_quality, None, workers=usable_cores())
    with ThreadPoolExecutor(max_workers=usable_cores()) as pool:  # zlib and brotli release the GIL
        gz = list(pool.map(gzip_stream_size, files))
        br = list(pool.map(lambda f, n: brotli_stream_size(f, quality, brotli_window(n)), files, raw))
    served = [min(b, g) for b, g in zip(br, gz, strict=True)]
    return Sizes(raw=sum(raw), gzip=sum(gz), brotli=sum(served), brotli_quality=quality,
                 brotli_window=max(brotli_window(n) for n in raw), brotli_encoded=sum(br),
                 brotli_encoding="br" if all(b <= g for b, g in zip(br, gz, strict=True)) else "gzip")  # fmt: skip


def _data_files(path: Path) -> list[Path]:
    """A model file's external data beside it, under either naming (``NAME.onnx.data``, optimum's ``NAME.onnx_data``)."""
    return [p for p in (path.with_name(path.name + ".data"), path.with_name(path.name + "_data")) if p.is_file()]


def check_set_runs(model_set: ModelSet) -> None:
    """Every file of the set opens in ONNX Runtime (a ShrinkRayError says which does not and why)."""
    from shrinkray.graph.validate import validate

    for role in model_set.members:
        try:
            validate(model_set.load(role).model)
        except ShrinkRayError as exc:
            raise type(exc)(f"{Path(model_set.members[role]).name}: {exc.problem}", exc.hint) from None


def set_summary(model_set: ModelSet, originals: dict | None = None) -> ModelSummary:
    """One inspection for the set: the encoder's inputs, the judged decoder's outputs, every file's ops and
    weights (each weight named with its file). ``originals``: the members already loaded, by role."""
    originals = originals or {role: model_set.load(role) for role in model_set.members}
    parts = {role: inspect_model(loaded) for role, loaded in originals.items()}
    encoder = parts["encoder"]
    decoder = parts[next(r for r in JUDGED_DECODERS if r in parts)]
    total = model_set.file_bytes
    ops: Counter = Counter()
    weights = []
    for role, part in parts.items():
        ops.update(dict(part.op_histogram))
        name = Path(model_set.members[role]).name
        weights.extend(replace(w, name=f"{name}: {w.name}", share_of_file=w.bytes / total if total else 0.0)
                       for w in part.weights)  # fmt: skip
    weights.sort(key=lambda w: -w.bytes)
    reach: dict[str, MethodReach] = {}
    for part in parts.values():  # what each method would rewrite in the whole set
        for m in part.methods:
            before = reach.get(m.method, MethodReach(m.method, 0, 0, 0.0))
            done = before.bytes + m.bytes
            reach[m.method] = MethodReach(m.method, before.tensors + m.tensors, done, done / total if total else 0.0)
    return ModelSummary(
        name=model_set.name, file_bytes=total, ir_version=encoder.ir_version, opsets=encoder.opsets,
        producer=encoder.producer, inputs=encoder.inputs, outputs=decoder.outputs,
        overridable_initializers=[], node_count=sum(p.node_count for p in parts.values()),
        subgraph_count=sum(p.subgraph_count for p in parts.values()), op_histogram=ops.most_common(),
        weights=weights, weight_bytes=sum(p.weight_bytes for p in parts.values()),
        custom_ops=sorted({op for p in parts.values() for op in p.custom_ops}),
        quantized_ops=sorted({op for p in parts.values() for op in p.quantized_ops}), methods=list(reach.values()),
    )  # fmt: skip

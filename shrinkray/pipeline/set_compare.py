"""A model set compared whole: every file shrunk by each method, the set judged by what it writes.

An encoder–decoder (io/model_set.py) is one model to its user: a method is applied to every file of the
set, the variant is the set of those files (its size their sum, as a page downloads them all), and its
verdict comes from running the set as it is used (measure/seq2seq.py): the variant's encoder feeding the
variant's decoder, greedy, against the original's outputs on the same inputs, judged by the same verdict
as a decoder LM's continuations (the share kept token for token, with its 95% bound; next-token agreement and
KL divergence over the original's own output). The result is a :class:`Comparison` like any other, so every
report, the app's cards and the headline read it unchanged. Saved variants take transformers.js's names
(``encoder_model_quantized.onnx``, ``decoder_model_q4.onnx``), so the folder drops into place. A method that
learns from inputs (weights-int4) learns each file from what the set itself feeds it on held-out inputs.
pipeline/set_run.py runs a set; pipeline/set_inputs.py makes what it is fed.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from shrinkray.errors import ShrinkRayError
from shrinkray.io.model_set import ModelSet, data_files
from shrinkray.measure import seq2seq
from shrinkray.measure.budget import PLAN_MARGIN, job_clock, limit_words
from shrinkray.measure.generation import GENERATED
from shrinkray.measure.inputs import samples_digest
from shrinkray.measure.parity import UNDECIDED, OutputKind, compare_outputs
from shrinkray.measure.results import ORIGINAL, CompareSettings, Comparison, VariantResult
from shrinkray.measure.sizes import BackgroundSizes, Sizes, combined
from shrinkray.measure.what_changes import worst_examples
from shrinkray.methods.base import default_methods, get_method
from shrinkray.pipeline.compare import _label
from shrinkray.pipeline.inspect import MethodReach, ModelSummary, inspect_model
from shrinkray.pipeline.set_inputs import calibration_contexts, held_out, set_input_batches, text_of
from shrinkray.pipeline.set_run import JUDGED_DECODERS, Route, joined, run_set, set_kinds, set_layout
from shrinkray.pipeline.set_shrink import NOT_FOR_SETS, Calibration, check_set_method, shrink_set

Progress = Callable[[str, float], None]
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
        check_set_method(method)
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
        tokenizer, text = text_of(model_set, settings)
        batches, source = set_input_batches(layout, model_set, settings, originals["encoder"].model)
        digest = samples_digest(batches)  # the inputs as planned: the browser panel rebuilds them and checks
        lap = time.perf_counter()
        reference = run_set(files[ORIGINAL], route, layout, batches[:1], None)
        fits = _batches_that_fit(len(batches), time.perf_counter() - lap, len(methods), clock)
        budget_note = ""
        if fits < len(batches):  # the job's time allows fewer inputs: the verdict says what it rests on
            budget_note = (f"; {fits * len(batches[0][layout.encoder_ids])} inputs, not "
                           f"{sum(len(b[layout.encoder_ids]) for b in batches)}: the run's "
                           f"{limit_words(clock[1])} allows no more through every variant")  # fmt: skip
            batches = batches[:fits]
        if len(batches) > 1:
            reference = joined(reference, run_set(files[ORIGINAL], route, layout, batches[1:], None), layout)
        kinds = set_kinds(layout)
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
        calibration: Calibration | None | bool = False  # made when a method first needs it
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
                calibration = calibration_contexts(model_set, route, layout, settings)  # once, for every method that learns
            made = _shrink_set(model_set, originals, method, options, result, out_dir, naming, calibration or None)
            timings["shrink"] = timings.get("shrink", 0.0) + time.perf_counter() - lap
            if made is None:
                continue
            files[result.key] = made
            result.file = str(out_dir / _folder_name(result.key))  # the variant set's folder, laid out as the set
            lap = time.perf_counter()
            say(f"Running the set: {result.key}", 0.1 + 0.8 * (index + 0.5) / len(methods))
            try:
                outputs = run_set(made, route, layout, batches, reference[GENERATED])
            except ShrinkRayError as exc:
                result.error = f"The shrunk set does not run: {exc}"
                continue
            result.parity = compare_outputs(reference, outputs, kinds, settings.verdict, samples=count)
            judged_on, judged_reference = batches, reference
            if result.parity.status == UNDECIDED and reserve.batches(settings):  # more inputs, as a model's verdict gets
                more = run_set(made, route, layout, reserve.feeds, reserve.reference[GENERATED])
                outputs = joined(outputs, more, layout)
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


def _shrink_set(model_set: ModelSet, originals: dict, method: str, options: dict[str, Any], result: VariantResult,
                out_dir: Path, naming: str, calibration: Calibration | None = None) -> dict[str, Path] | None:  # fmt: skip
    """The set shrunk by one method (set_shrink.py) under ``out_dir/<key>/``, with the set's settings and tokenizer
    files beside it; the written paths by role, or None (``result.error`` says why)."""
    folder = out_dir / _folder_name(result.key)
    try:
        made = shrink_set(model_set, method, options, folder, key=result.key, naming=naming, calibration=calibration,
                          originals=originals)  # fmt: skip
    except ShrinkRayError as exc:
        result.error = str(exc)
        return None
    result.record = made.record(method, options)
    result.warnings.extend(made.warnings)
    result.notes.extend(made.notes)
    for companion in model_set.companions():  # the folder is a whole model folder: it loads as it is
        target = folder / companion.relative_to(model_set.folder)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(companion, target)
    return made.paths


def _folder_name(key: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in key) or "variant"


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

    def __init__(self, paths: dict[str, Path], route: Route, layout: seq2seq.Seq2SeqLayout, reference: dict,
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
                self.reference = run_set(self.paths, self.route, self.layout, self.feeds, None)
                self.all_reference = joined(self.first, self.reference, self.layout)
        return bool(self.feeds)


def _tell_change(result: VariantResult, batches: list[dict], layout: seq2seq.Seq2SeqLayout,
                 reference: dict, outputs: dict, tokenizer: str) -> None:  # fmt: skip
    """A changed output, read through the tokenizer, joins what the verdict says."""
    generated = next((o for o in result.parity.outputs if o.name == GENERATED), None)
    if generated is None or generated.status == "pass" or not tokenizer:
        return
    example = seq2seq.first_change(_shown_inputs(batches, layout), reference[GENERATED], outputs[GENERATED], tokenizer)
    if example:
        generated.decisions = f"{generated.decisions}; {example}" if generated.decisions else example


def _shown_inputs(batches: list[dict], layout: seq2seq.Seq2SeqLayout) -> np.ndarray | None:
    """Every judged input's token ids, its padding moved before it (so its last words are its own), one row each;
    None for a clip's features (no text to show)."""
    if layout.features is None:
        rows = [row[mask.astype(bool)] if layout.encoder_mask else row for b in batches
                for row, mask in zip(b[layout.encoder_ids], b.get(layout.encoder_mask, b[layout.encoder_ids]), strict=True)]  # fmt: skip
        width = max(len(r) for r in rows)
        pad = layout.end_token if layout.end_token is not None else 0
        return np.stack([np.pad(r, (width - len(r), 0), constant_values=pad) for r in rows])
    return None


def _what_changes(result: VariantResult, batches: list[dict], layout: seq2seq.Seq2SeqLayout, reference: dict,
                  outputs: dict, tokenizer: str, kinds: dict[str, OutputKind]) -> list:  # fmt: skip
    """The inputs whose outputs changed most, as text (what the app's "What changes" and the reports show): each
    told after its input's last words (a text's padding moved before it), the tokens that differ marked."""
    shown = _shown_inputs(batches, layout)
    samples = [{layout.encoder_ids: shown}] if shown is not None else []
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
    quality for all, each file its own window and a server's choice of encoding), each read in chunks (a 2 GB
    decoder is never held whole), side by side."""
    files = [f for path in paths.values() for f in (path, *data_files(path))]
    sizes = BackgroundSizes.planned([f.stat().st_size for f in files], settings.brotli_quality)
    try:
        for index, f in enumerate(files):
            sizes.submit(str(index), [f])
        return combined([sizes.result(str(index)) for index in range(len(files))])
    finally:
        sizes.close()


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

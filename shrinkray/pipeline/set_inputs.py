"""What a set of models is fed: its judged inputs, the held-out ones a calibrating method learns from, and the
first ones the browser panel runs.

Inputs like the set's own (measure/seq2seq.py makes them): the lines of its prompts.txt through its
tokenizer.json, the user's text or WAV clips, else synthesized ones. The judged lines, their reserve and the
calibration lines never overlap (a method is never judged on what it learned from).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx

from shrinkray.errors import OptionError
from shrinkray.graph.sessions import open_file_session
from shrinkray.io.model_set import ModelSet
from shrinkray.measure import seq2seq
from shrinkray.measure.browser import BrowserInputs
from shrinkray.measure.deadline import run_within
from shrinkray.measure.generation import GENERATED
from shrinkray.measure.inputs import samples_digest
from shrinkray.measure.parity_inputs import ParityInputs
from shrinkray.measure.results import CompareSettings
from shrinkray.measure.sample_files import load_sample_files
from shrinkray.methods.base import RunContext
from shrinkray.pipeline.set_run import Route, run_set, set_kinds, set_layout


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
    tokenizer, text = text_of(model_set, settings)
    batches = seq2seq.input_batches(layout, tokenizer=tokenizer, text=text, seed=settings.inputs.seed)
    return batches, seq2seq.source_words(tokenizer, text, layout)


def text_of(model_set: ModelSet, settings: CompareSettings) -> tuple[str, str]:
    """The tokenizer and the text a set's inputs come from: the user's, else the set's own."""
    return settings.inputs.tokenizer or model_set.tokenizer, settings.inputs.text or model_set.prompts


def held_out(layout: seq2seq.Seq2SeqLayout, tokenizer: str, text: str) -> int:
    """The text's last lines a calibrating method learns from, never judged: :data:`CALIBRATION_INPUTS` when the
    text has that many beyond the judged ones (0 otherwise, and for clips, which come from another seed)."""
    if layout.features is not None or not (tokenizer and text):
        return 0
    enough = seq2seq.text_lines(text) >= seq2seq.BATCHES * seq2seq.INPUTS_PER_BATCH + CALIBRATION_INPUTS
    return CALIBRATION_INPUTS if enough else 0


#: Inputs a calibrating method (weights-int4's activation-aware scales) learns from in a set: held out of the
#: judged ones and of their reserve (the text's last lines; clips of another seed).
CALIBRATION_INPUTS = 32


def calibration_contexts(model_set: ModelSet, route: Route, layout: seq2seq.Seq2SeqLayout, settings: CompareSettings,
                 ) -> tuple[dict[str, RunContext], str] | None:  # fmt: skip
    """Per file of the set, the inputs a calibrating method learns from, as the set itself feeds that file: the
    encoder the held-out inputs, the decoder (and its cached form) the original encoder's states and the
    original's own outputs on them. None when there are no inputs like the set's own to learn from (token ids
    drawn without a tokenizer, as for a decoder LM; the user's clips, all judged)."""
    tokenizer, text = text_of(model_set, settings)
    if settings.sample_files or (layout.features is None and not held_out(layout, tokenizer, text)):
        return None  # no inputs like the set's own beyond those judged
    lines = seq2seq.text_lines(text) if layout.features is None else 0
    batches = seq2seq.input_batches(layout, tokenizer=tokenizer, text=text, seed=settings.inputs.seed + 104729,
                                    batches=CALIBRATION_INPUTS // seq2seq.INPUTS_PER_BATCH,
                                    skip=lines - CALIBRATION_INPUTS if lines else 0)  # fmt: skip
    paths = {role: model_set.path(role) for role in model_set.members}
    feeds: dict[str, list[dict[str, np.ndarray]]] = {"encoder": batches}
    encoded: list[np.ndarray] = []  # the encoder's states of each batch, as the set's own run made them
    written = run_set(paths, route, layout, batches, None, states=encoded)[GENERATED][..., 0].astype(np.int64)
    decoder = open_file_session(paths[route.judged], optimized=True, threads=1)
    names = [o.name for o in decoder.get_outputs()]
    done = 0
    for batch, states in zip(batches, encoded, strict=True):
        rows = len(batch[layout.encoder_ids])
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
    reference = run_set(paths, route, layout, [*singles], None)[GENERATED]
    running = reference[:, :, 1] < seq2seq.FINISHED_MARGIN
    steps = [int(np.nonzero(r)[0][-1]) + 1 if r.any() else 1 for r in running]  # up to each one's end token
    return BrowserInputs(
        singles, {GENERATED: reference}, {GENERATED: set_kinds(layout)[GENERATED]}, "", len(singles), settings.verdict,
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

"""An encoder–decoder set, run as it is used: the encoder once on the input, then the decoder writing the output
token by token from the encoder's states, greedy, until its end token.

optimum's names (transformers.js reads the same): the encoder takes ``input_ids`` and ``attention_mask`` and
gives ``last_hidden_state``; the decoder takes ``input_ids`` (what it wrote so far), ``encoder_hidden_states``
and ``encoder_attention_mask`` and gives ``logits``. A merged decoder takes ``use_cache_branch`` and empty
``past_key_values.*`` on its first step. Every step here runs the whole written sequence again (the
no-cache path both decoder forms have): slower than a cache, the same tokens.

The run gives what measure/generation.py judges a decoder LM by: :data:`GENERATED` (each input's output
tokens and how sure the original was of each), and the decoder's logits over the original's own output
(teacher-forced: the variant reads the same tokens), judged position by position with their KL divergence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx

from shrinkray.errors import OptionError
from shrinkray.measure import audio_features, lm_text
from shrinkray.measure.decoder_lm import embedding_rows, token_text_ids
from shrinkray.measure.generation import GENERATED, greedy_pick

Run = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]
#: Inputs per batch, and the batches judged: 160 outputs, the decisions a verdict wants (parity_inputs).
INPUTS_PER_BATCH = 16
BATCHES = 10
#: Reserve batches per judged batch, run only for a variant the judged ones leave undecided (as parity_inputs'
#: RESERVE_SETS): up to 4x the decisions before the verdict says "undecided".
RESERVE_BATCHES = 3
#: Input length in tokens when no text comes with the set; output tokens beyond the input's length allowed.
INPUT_TOKENS = 16
EXTRA_TOKENS = 8
MAX_OUTPUT_TOKENS = 64
#: Output tokens judged per clip of a speech encoder (Whisper writes a few special tokens, then the words).
AUDIO_TOKENS = 24
#: A finished output's further steps: its end token, counted as certain (they cannot part there).
FINISHED_MARGIN = 1e9
#: The decoder's logits kept per batch for the KL divergence (all positions of a small vocabulary).
JUDGED_LOGITS_BYTES = 4 << 20
#: What the decoder's teacher-forced logits are called among the outputs.
LOGITS = "decoder logits"


@dataclass(frozen=True)
class Seq2SeqLayout:
    """Which inputs and outputs of the encoder and decoder do what."""

    encoder_ids: str
    encoder_mask: str | None
    encoder_output: str
    decoder_ids: str
    decoder_states: str
    decoder_mask: str | None
    logits: str
    vocab: int
    start_token: int
    end_token: int | None
    past: tuple[tuple[str, tuple[int, ...], np.dtype], ...] = ()  # a merged decoder's empty past: name, shape, dtype
    use_cache: str | None = None
    #: A speech encoder's log-mel features (``input_features``, Whisper's): their shape with the batch axis
    #: first, as (mel axis, time axis, bins, frames); None for an encoder of token ids.
    features: tuple[int, int, int, int] | None = None

    @property
    def words(self) -> str:
        return "an encoder and a decoder (the encoder once, then each output token greedily from its states)"

    def tokens_for(self, length: int) -> int:
        """Output tokens at most: a text's length and a few more (its translation, its words reversed); a clip's
        first ``AUDIO_TOKENS`` (a transcript's first words)."""
        if self.features is not None:
            return AUDIO_TOKENS
        return min(length + EXTRA_TOKENS, MAX_OUTPUT_TOKENS)


def _names(values) -> dict[str, onnx.ValueInfoProto]:
    return {v.name: v for v in values}


def _dim(value: onnx.ValueInfoProto, axis: int) -> int | None:
    dims = value.type.tensor_type.shape.dim
    return dims[axis].dim_value if len(dims) > axis and dims[axis].HasField("dim_value") else None


def layout_of(encoder: onnx.ModelProto, decoder: onnx.ModelProto, config: dict | None = None) -> Seq2SeqLayout | None:
    """The roles of an encoder's and its decoder's inputs and outputs, or None when the pair is not laid out as
    optimum exports one: the encoder takes token ids (``input_ids``, with or without ``attention_mask``) or
    log-mel features (``input_features``, as Whisper's), the decoder ``input_ids`` and ``encoder_hidden_states``
    and gives ``logits``. Any other pair (an encoder of raw samples, say) is judged file by file."""
    config = config or {}
    enc_in, enc_out = _names(encoder.graph.input), list(encoder.graph.output)
    dec_in, dec_out = _names(decoder.graph.input), _names(decoder.graph.output)
    initializers = {t.name for t in encoder.graph.initializer}
    enc_in = {k: v for k, v in enc_in.items() if k not in initializers}
    features = None
    if "input_ids" not in enc_in:  # a speech encoder: log-mel features (Whisper's input_features)
        value = enc_in.get("input_features")
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in value.type.tensor_type.shape.dim] if value is not None else []  # fmt: skip
        bins = config.get("num_mel_bins")  # Whisper's export leaves its mel bins and frames symbolic: its config
        if len(dims) == 3 and isinstance(bins, int) and not isinstance(dims[1], int):  # names them
            dims = [dims[0], bins, dims[2]]
        axes = audio_features.feature_axes(dims) if len(dims) == 3 else None
        if axes is None:
            return None
        positions = config.get("max_source_positions")  # Whisper: its encoder's positions, after a stride-2 Conv
        frames = (dims[axes[1]] if isinstance(dims[axes[1]], int)
                  else 2 * positions if isinstance(positions, int) else audio_features.DEFAULT_FRAMES)  # fmt: skip
        features = (axes[0], axes[1], int(dims[axes[0]]), int(frames))
    if not enc_out:
        return None
    states = next((o.name for o in enc_out if o.name == "last_hidden_state"), enc_out[0].name)
    if "input_ids" not in dec_in or "encoder_hidden_states" not in dec_in or "logits" not in dec_out:
        return None
    vocab = _dim(dec_out["logits"], 2) or int(config.get("vocab_size") or 0) or embedding_rows(decoder, "input_ids")
    if not vocab:
        return None
    past = []
    for name, value in dec_in.items():
        if name.startswith("past_key_values"):
            shape = [d.dim_value if d.HasField("dim_value") else 0 for d in value.type.tensor_type.shape.dim]
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type))
            past.append((name, tuple(shape), dtype))
    start = config.get("decoder_start_token_id")
    if start is None:
        start = config.get("bos_token_id", 0)
    end = config.get("eos_token_id")
    if isinstance(end, list):
        end = end[0] if end else None
    return Seq2SeqLayout(
        encoder_ids="input_ids" if features is None else "input_features",
        encoder_mask="attention_mask" if "attention_mask" in enc_in else None, features=features,
        encoder_output=states, decoder_ids="input_ids", decoder_states="encoder_hidden_states",
        decoder_mask="encoder_attention_mask" if "encoder_attention_mask" in dec_in else None, logits="logits",
        vocab=int(vocab), start_token=int(start or 0), end_token=int(end) if end is not None else None,
        past=tuple(past), use_cache="use_cache_branch" if "use_cache_branch" in dec_in else None,
    )  # fmt: skip



# ---- inputs ---------------------------------------------------------------------------------------------


def input_batches(layout: Seq2SeqLayout, *, tokenizer: str = "", text: str = "", batches: int = BATCHES,
                  per_batch: int = INPUTS_PER_BATCH, seed: int = 0, skip: int = 0,
                  hold_out: int = 0) -> list[dict[str, np.ndarray]]:  # fmt: skip
    """Encoder feeds, ``batches`` of ``per_batch`` inputs: the lines of ``text`` (a prompts.txt) through the
    tokenizer when there are both, padded at the end and masked; else token sequences drawn like text.
    ``skip``: inputs given before (the reserve follows the first batches: other lines, another seed);
    ``hold_out``: the text's last lines, never given here (a calibrating method learns from them)."""
    rows = batches * per_batch
    if layout.features is not None:
        return _clip_batches(layout, batches, per_batch, seed + 7919 * skip)
    if tokenizer and text:
        ids = _text_lines(tokenizer, text, rows, layout.vocab, skip, hold_out)
    else:
        ids = [row for row in token_text_ids(layout.vocab, rows, INPUT_TOKENS, seed + 7919 * skip)]
    out: list[dict[str, np.ndarray]] = []
    for start in range(0, len(ids), per_batch):
        group = ids[start:start + per_batch]
        width = max(len(r) for r in group)
        padded = np.full((len(group), width), layout.end_token or 0, np.int64)
        mask = np.zeros((len(group), width), np.int64)
        for i, row in enumerate(group):
            padded[i, :len(row)], mask[i, :len(row)] = row, 1
        feeds = {layout.encoder_ids: padded}
        if layout.encoder_mask:
            feeds[layout.encoder_mask] = mask
        out.append(feeds)
    return out


def _clip_batches(layout: Seq2SeqLayout, batches: int, per_batch: int, seed: int) -> list[dict[str, np.ndarray]]:
    """Clips of voiced audio as normalised log-mel features, laid out as the encoder takes them."""
    mel, time, bins, frames = layout.features
    out = []
    for index in range(batches):
        feats = audio_features.features(per_batch, frames, bins, seed=seed + index).astype(np.float32)  # [n, frames, bins]
        if (mel, time) == (1, 2):
            feats = np.ascontiguousarray(feats.transpose(0, 2, 1))
        feeds = {layout.encoder_ids: feats}
        if layout.encoder_mask:
            feeds[layout.encoder_mask] = np.ones((per_batch, frames), np.int64)
        out.append(feeds)
    return out


def _text_lines(tokenizer: str, text: str, rows: int, vocab: int, skip: int = 0, hold_out: int = 0) -> list[np.ndarray]:
    """The first ``rows`` non-empty lines of ``text``, as token ids: fewer lines, fewer inputs (a line given
    twice would count as two decisions)."""
    from pathlib import Path

    lines = [line.strip() for line in Path(text).read_text(encoding="utf-8", errors="replace").splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        raise OptionError(f"The text {Path(text).name} has no lines to feed the set", "Give text, one input per line")
    lines = lines[: len(lines) - hold_out][skip:skip + rows]
    return [np.asarray(lm_text.encode(tokenizer, line), np.int64)[: 4 * INPUT_TOKENS] for line in lines]


def text_lines(text: str) -> int:
    """The non-empty lines of a text file (the inputs it can give)."""
    from pathlib import Path

    return sum(1 for line in Path(text).read_text(encoding="utf-8", errors="replace").splitlines() if line.strip())


def source_words(tokenizer: str, text: str, layout: Seq2SeqLayout | None = None) -> str:
    """Where the inputs come from, as the input note says it."""
    from pathlib import Path

    if layout is not None and layout.features is not None:
        mel, time, bins, frames = layout.features
        return f"clips of voiced audio as log-mel features ({bins} bins x {frames} frames)"
    if tokenizer and text:
        return f"the lines of {Path(text).name} through {Path(tokenizer).name}"
    return "token ids drawn like text (no tokenizer.json and prompts.txt came with the set)"


# ---- generation -----------------------------------------------------------------------------------------


def decoder_feeds(layout: Seq2SeqLayout, ids: np.ndarray, states: np.ndarray, mask: np.ndarray | None) -> dict:
    """The decoder's feeds for ``ids`` (everything written so far) without its cache (a merged decoder: its
    no-cache branch, with an empty past)."""
    feeds = {layout.decoder_ids: ids, layout.decoder_states: states}
    if layout.decoder_mask and mask is not None:
        feeds[layout.decoder_mask] = mask
    batch = ids.shape[0]
    for name, shape, dtype in layout.past:  # a merged decoder's no-cache branch: an empty past
        full = [batch if i == 0 else (0 if i == 2 else d) for i, d in enumerate(shape)]
        feeds[name] = np.zeros(full, dtype)
    if layout.use_cache:
        feeds[layout.use_cache] = np.array([False])
    return feeds


@dataclass(frozen=True)
class CacheStep:
    """How a decoder takes one token with the cache (optimum's ``decoder_with_past_model.onnx``, or a merged
    decoder's cache branch): its inputs by name. Each ``past_key_values.N.*`` input is fed the output named
    ``present.N.*`` of the step before (the encoder's keys and values: of the first step, which alone gives them)."""

    past: tuple[str, ...]
    takes_states: bool  # a merged decoder takes encoder_hidden_states on every step; decoder_with_past does not
    use_cache: str | None = None


def cache_step(first: onnx.ModelProto, step: onnx.ModelProto) -> CacheStep | None:
    """The cached steps of a pair (``first`` gives the past, ``step`` takes it: decoder_model and
    decoder_with_past_model, or a merged decoder twice), or None when ``first`` gives no past that ``step``
    takes (a decoder exported without ``present.*`` outputs: every step then runs the whole sequence)."""
    given = {o.name for o in first.graph.output if o.name.startswith("present")}
    inputs = {i.name for i in step.graph.input}
    past = tuple(name for name in inputs if name.startswith("past_key_values"))
    if not past or "input_ids" not in inputs or any(_present(name) not in given for name in past):
        return None
    return CacheStep(past=past, takes_states="encoder_hidden_states" in inputs,
                     use_cache="use_cache_branch" if "use_cache_branch" in inputs else None)  # fmt: skip


def _present(past: str) -> str:
    return "present" + past[len("past_key_values"):]


def cached_feeds(layout: Seq2SeqLayout, cache: CacheStep, token: np.ndarray, past: dict, states: np.ndarray,
                 mask: np.ndarray | None) -> dict[str, np.ndarray]:  # fmt: skip
    """One step's feeds through the cache: ``token`` [batch] after ``past`` (the ``present.*`` outputs so far)."""
    feeds = {layout.decoder_ids: token[:, None], **{name: past[_present(name)] for name in cache.past}}
    if layout.decoder_mask and mask is not None:
        feeds[layout.decoder_mask] = mask
    if cache.takes_states:
        feeds[layout.decoder_states] = states
    if cache.use_cache:
        feeds[cache.use_cache] = np.array([True])
    return feeds


def generate(encoder: Run, decoder: Run, layout: Seq2SeqLayout, feeds: dict[str, np.ndarray],
             teacher: np.ndarray | None = None, step: Run | None = None,
             cache: CacheStep | None = None) -> dict[str, np.ndarray]:  # fmt: skip
    """One batch through the set: the encoder once, then greedy steps until every output has its end token or
    ``MAX_OUTPUT_TOKENS``: with ``step`` and ``cache`` (decoder_with_past_model, or a merged decoder's cache
    branch) the first step by ``decoder`` and each later one a token at a time through the cache, as runtimes
    run a set; without, each step the whole sequence again. Returns :data:`GENERATED` [batch, tokens, 2]
    (tokens, the original's margin; an ended output repeats its end token, certain) and :data:`LOGITS`: the
    decoder's logits over ``teacher`` (the original's own :data:`GENERATED`, of as many steps as the original's
    batch took; its own output when None), for the KL divergence."""
    states = np.asarray(encoder(feeds)[layout.encoder_output])
    mask = feeds.get(layout.encoder_mask) if layout.encoder_mask else None
    batch, length = feeds[layout.encoder_ids].shape[:2]
    if teacher is not None:  # the original's outputs [batch, tokens, 2], cut where its batch had ended
        running = np.nonzero((np.asarray(teacher)[:, :, 1] < FINISHED_MARGIN).any(axis=0))[0]
        teacher = np.asarray(teacher)[:, : int(running[-1]) + 1 if len(running) else 1, 0]
    tokens = layout.tokens_for(length) if teacher is None else teacher.shape[1]
    sequence = np.full((batch, 1), layout.start_token, np.int64)
    done = np.zeros(batch, bool)
    made, margins = [], []
    past: dict[str, np.ndarray] = {}
    for index in range(tokens):
        if step is not None and cache is not None and index:
            out = step(cached_feeds(layout, cache, sequence[:, -1], past, states, mask))
        else:
            out = decoder(decoder_feeds(layout, sequence, states, mask))
        # the encoder's keys and values come from the first step alone: a merged decoder's cache branch returns
        # empty placeholders for them (optimum's merge), which must not replace the real ones
        past.update({name: value for name, value in out.items()
                     if name.startswith("present") and (index == 0 or ".encoder." not in name)})  # fmt: skip
        token, margin = greedy_pick(np.asarray(out[layout.logits])[:, -1, :])
        if layout.end_token is not None:
            token = np.where(done, layout.end_token, token)
            margin = np.where(done, FINISHED_MARGIN, margin)
            done |= token == layout.end_token
        made.append(token)
        margins.append(margin)
        sequence = np.concatenate([sequence, token[:, None]], axis=1)
        if teacher is None and done.all():
            break
    generated = np.stack([np.stack(made, axis=1), np.stack(margins, axis=1)], axis=-1).astype(np.float64)
    forced = np.concatenate([np.full((batch, 1), layout.start_token, np.int64),
                             (teacher if teacher is not None else generated[:, :, 0]).astype(np.int64)[:, :-1]], axis=1)  # fmt: skip
    logits = np.asarray(decoder(decoder_feeds(layout, forced, states, mask))[layout.logits])
    kept = min(logits.shape[1], max(1, JUDGED_LOGITS_BYTES // max(batch * logits.shape[-1] * logits.dtype.itemsize, 1)))
    return {GENERATED: generated, LOGITS: logits[:, :kept].copy()}


def first_change(inputs: np.ndarray | None, reference: np.ndarray, variant: np.ndarray, tokenizer: str) -> str:
    """The changed output the original was surest of, as text: ``"…walked to the river"`` came out as
    "A" and now as "B" (up to a few tokens past where they part; ``inputs`` None: a clip, not text, so the
    output alone). "" when none changed or no tokenizer."""
    if not tokenizer:
        return ""
    ref = np.asarray(reference, np.float64)
    var = np.asarray(variant, np.float64)
    best = None
    for row in range(len(ref)):
        same = ref[row, :, 0] == var[row, :, 0]
        if not same.all():
            part = int(np.argmin(same))
            if best is None or ref[row, part, 1] > best[0]:
                best = (float(ref[row, part, 1]), row, part)
    if best is None:
        return ""
    _, row, part = best
    end = min(part + 4, ref.shape[1])
    before = lm_text.decode(tokenizer, ref[row, :end, 0].astype(np.int64))
    after = lm_text.decode(tokenizer, var[row, :end, 0].astype(np.int64))
    if inputs is None:
        return f'e.g. an output came out as "{_clip(before)}" and now as "{_clip(after)}"'
    read = lm_text.decode(tokenizer, np.asarray(inputs[row], np.int64)[-8:])
    return f'e.g. "…{_clip(read)}" came out as "{_clip(before)}" and now as "{_clip(after)}"'


def _clip(text: str, most: int = 60) -> str:
    text = " ".join(text.replace("<|endoftext|>", " ").split())
    return text if len(text) <= most else text[: most - 1] + "…"

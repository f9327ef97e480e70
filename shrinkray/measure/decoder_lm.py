"""Decoder language models: recognized from their signature, fed prompts, judged by what they generate.

The web ships decoder LMs in the optimum / transformers.js layouts: ``input_ids`` (and ``attention_mask``,
``position_ids``) in, ``logits`` out, either plain (the whole sequence every step), with a KV cache
(``past_key_values.N.key/value`` in, ``present.N.key/value`` out) or merged (both paths behind a
``use_cache_branch`` flag). Judged as a classifier on random token ids, such a model passes variants that
change what it writes (issue 28: a 4-bit build kept the next token on 95.2% of positions and changed 11 of
20 greedy continuations). So a decoder is fed prompts (real text through its tokenizer when one travels with
the model, else token sequences drawn like text), and every run is a *generation*: the prompt in one
pass with an empty past (its logits judged position by position, as llama.cpp's KL-divergence mode does),
then ``GENERATED_TOKENS`` greedy tokens through the cache (or the whole sequence again, without one). The
tokens become an output of their own, :data:`GENERATED`, judged by the share of continuations kept whole.

Everything here works on one batch of prompts; measure/parity_inputs.py stacks batches like any samples.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from shrinkray.measure import lm_text
from shrinkray.measure.generation import (  # noqa: F401 - re-exported: the names a decoder's outputs go by
    GENERATED,
    GENERATED_TOKENS,
    PROMPT_LOSS,
    TIE_LOGODDS,
    continuation_count,
    continuation_measures,
    greedy_pick,
    mean_kl,
    prompt_loss,
)

#: Prompt length in tokens, and prompts per batch when the batch axis is free.
PROMPT_TOKENS = 32
PROMPTS_PER_BATCH = 8
#: The prompt's logits kept per batch to judge (the last positions, at least ``MIN_JUDGED_POSITIONS``): every
#: position of a small vocabulary, the last few of a 50k one (its logits are 200 KB a position in float32).
JUDGED_LOGITS_BYTES = 2 << 20
MIN_JUDGED_POSITIONS = 1

_IDS = re.compile(r"(^|[._/])input_ids$")
_PAST = re.compile(r"^past_key_values[._](\d+)[._](?:decoder[._])?(key|value)$")
_CAUSAL_OPS = {"Trilu"}
_MASK_NAMES = re.compile(r"mask|bias|causal|tril", re.IGNORECASE)
_COMPARISONS = {"Less", "LessOrEqual", "Greater", "GreaterOrEqual"}
#: A plain export's logits with fewer entries than this per position are labels (token classification).
MIN_VOCABULARY = 256

Run = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


@dataclass(frozen=True)
class PastInput:
    """One cache tensor: the input fed the past, the output returning it one step longer, and its shape."""

    input: str
    output: str
    heads: int
    head_dim: int
    dtype: np.dtype


@dataclass(frozen=True)
class DecoderLayout:
    """Which inputs and outputs of a decoder do what."""

    input_ids: str
    logits: str
    vocab: int
    attention_mask: str | None = None
    position_ids: str | None = None
    past: tuple[PastInput, ...] = ()
    use_cache: str | None = None  # a merged decoder's flag: False on the prompt, True on the steps
    text: bool = False  # the prompts are real text (a tokenizer came with the model): measure their perplexity

    @property
    def cached(self) -> bool:
        return bool(self.past)

    @property
    def words(self) -> str:
        """The layout as the input note says it."""
        if self.use_cache:
            return f"a merged decoder with a cache of {len(self.past) // 2} layers"
        if self.past:
            return f"a decoder with a cache of {len(self.past) // 2} layers"
        return "a decoder without a cache (the whole sequence every step)"


def _dims(value: onnx.ValueInfoProto) -> list[int | str | None]:
    shape = value.type.tensor_type.shape
    if not value.type.tensor_type.HasField("shape"):
        return []
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in shape.dim]


def _dtype(value: onnx.ValueInfoProto) -> np.dtype:
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type))


def _is_causal(model: onnx.ModelProto) -> bool:
    """Evidence of a causal mask in a plain export: a Trilu, a comparison of positions built by Range, or a
    triangular constant (a GPT-2 ``bias`` buffer). A masked LM or a token classifier has none."""
    ops = {n.op_type for n in model.graph.node}
    if ops & _CAUSAL_OPS or ("Range" in ops and ops & _COMPARISONS):
        return True
    return any(_triangular(t) for t in model.graph.initializer)


def _triangular(tensor: onnx.TensorProto) -> bool:
    """A causal mask held as a constant: ones on and below the diagonal (bool / uint8, GPT-2's ``bias``), or
    0 there and a large negative number above it (an additive float mask)."""
    dims = list(tensor.dims)
    if len(dims) < 2 or dims[-1] != dims[-2] or dims[-1] < 8 or int(np.prod(dims)) > 1 << 24:
        return False
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        return False
    integral = tensor.data_type in (onnx.TensorProto.BOOL, onnx.TensorProto.UINT8, onnx.TensorProto.INT64,
                                    onnx.TensorProto.INT32)  # fmt: skip
    if not integral and not _MASK_NAMES.search(tensor.name):  # weights are square too: never decode those
        return False
    side = dims[-1]
    try:  # a skeleton's initializers (compare's workers keep the graph without its weights) hold no values
        square = onnx.numpy_helper.to_array(tensor).reshape(-1, side, side)[0]
    except ValueError:
        return False
    lower = np.tril(np.ones((side, side), bool))
    if square.dtype.kind in "biu":
        return bool(np.array_equal(square.astype(bool), lower))
    if square.dtype.kind == "f":
        return bool(np.all(square[lower] == 0) and np.all(square[~lower] < -1e3))
    return False


def layout_of(model: onnx.ModelProto) -> DecoderLayout | None:
    """The decoder layout of ``model``, or None when it is not a decoder LM this module can drive.

    A decoder: integer ``input_ids`` and a float ``logits`` output of rank 3 ([batch, sequence, vocab]);
    with a cache when every ``past_key_values.N.key/value`` input has its ``present.N.key/value`` output,
    else plain when the graph shows a causal mask. Encoder-decoder halves (an ``encoder_hidden_states``
    input) and models with inputs it cannot fill are left to the general path.
    """
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    outputs = {o.name: o for o in model.graph.output}
    ids = next((i for i in inputs if _IDS.search(i.name) and _dtype(i).kind in "iu"), None)
    logits = outputs.get("logits") or next((o for n, o in outputs.items() if "logits" in n.lower()), None)
    if ids is None or logits is None or _dtype(logits).kind != "f" or len(_dims(logits)) not in (0, 3):
        return None
    vocab = _dims(logits)[-1] if _dims(logits) else None
    mask = position = use_cache = None
    past: list[PastInput] = []
    for value in inputs:
        name, lname = value.name, value.name.lower()
        if value is ids:
            continue
        if lname == "attention_mask" or lname.endswith("attention_mask"):
            mask = name
        elif lname == "position_ids":
            position = name
        elif lname == "use_cache_branch":
            use_cache = name
        elif match := _PAST.match(name):
            present = _present_name(name, match, outputs)
            dims = _dims(value)
            if present is None or len(dims) != 4 or not all(isinstance(d, int) and d > 0 for d in (dims[1], dims[3])):
                return None
            past.append(PastInput(name, present, int(dims[1]), int(dims[3]), _dtype(value)))
        else:
            return None  # encoder states, token types, anything a prompt cannot fill
    if not past and (use_cache or not _is_causal(model)):
        return None
    if not isinstance(vocab, int) or vocab <= 0:
        vocab = embedding_rows(model, ids.name)
    if vocab is None or vocab < MIN_VOCABULARY:
        return None
    return DecoderLayout(ids.name, logits.name, int(vocab), mask, position, tuple(past), use_cache)


def _present_name(name: str, match: re.Match, outputs: dict[str, onnx.ValueInfoProto]) -> str | None:
    layer, which = match.group(1), match.group(2)
    for candidate in (f"present.{layer}.{which}", f"present_key_values.{layer}.{which}",
                      name.replace("past_key_values", "present", 1)):  # fmt: skip
        if candidate in outputs:
            return candidate
    return None


def embedding_rows(model: onnx.ModelProto, ids: str) -> int | None:
    """Rows of the table ``ids`` index (a Gather of an initializer): the vocabulary when logits say nothing."""
    tables = {t.name: list(t.dims) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == ids and node.input[0] in tables:
            dims = tables[node.input[0]]
            return int(dims[0]) if dims else None
    return None


# ---- prompts ------------------------------------------------------------------------------------------


def prompt_feeds(layout: DecoderLayout, ids: np.ndarray) -> dict[str, np.ndarray]:
    """The feeds of one pass over ``ids`` [batch, tokens] with an empty past: the prompt's prefill."""
    batch, length = ids.shape
    feeds = {layout.input_ids: ids.astype(np.int64)}
    if layout.attention_mask:
        feeds[layout.attention_mask] = np.ones((batch, length), np.int64)
    if layout.position_ids:
        feeds[layout.position_ids] = np.tile(np.arange(length, dtype=np.int64), (batch, 1))
    for p in layout.past:
        feeds[p.input] = np.zeros((batch, p.heads, 0, p.head_dim), p.dtype)
    if layout.use_cache:
        feeds[layout.use_cache] = np.array([False])
    return feeds


def prompt_ids(feeds: dict[str, np.ndarray], layout: DecoderLayout) -> np.ndarray:
    return np.asarray(feeds[layout.input_ids], np.int64)


def synthesize_prompts(layout: DecoderLayout, options, batch: int | None,
                       ) -> tuple[dict[str, np.ndarray], dict[str, int]]:  # fmt: skip
    """One batch of prompts and its prefill feeds: ``batch`` prompts (``PROMPTS_PER_BATCH`` when free) of
    ``PROMPT_TOKENS`` tokens (or the ``sequence_length`` the user set), real text through ``options.tokenizer``
    when given (windows of ``options.text``, else of the bundled English text). ``options``: the run's
    measure.inputs.InputOptions. Returns the feeds and the dims chosen (:func:`prompt_source` says how)."""
    dims, tokenizer, seed = options.dims, options.tokenizer, options.seed
    rows = batch or dims.get("batch_size") or dims.get("batch") or 1
    length = dims.get("sequence_length") or dims.get("sequence") or PROMPT_TOKENS
    if tokenizer:
        ids = lm_text.text_prompts(tokenizer, layout.vocab, rows, length, seed, options.text)
    else:
        ids = token_text_ids(layout.vocab, rows, length, seed)
    return prompt_feeds(layout, ids), {"batch_size": rows, "sequence_length": length}


def prompt_source(options) -> str:
    """How :func:`synthesize_prompts` makes prompts for these ``options``, as the input note says it."""
    if options.tokenizer:
        source = f"of {Path(options.text).name}" if options.text else "of an English text"
        return f"windows {source} through {Path(options.tokenizer).name}"
    return "token ids drawn like text (no tokenizer.json came with the model: a few ids most often, phrases repeated)"


def token_text_ids(vocab: int, batch: int, length: int, seed: int) -> np.ndarray:
    """Token sequences drawn like text when no tokenizer travels with the model: Zipf-distributed ranks
    (a few ids are most of any text) over a seeded order of the vocabulary, avoiding its first ids (special
    tokens and control bytes in most vocabularies), with the repeats text has (a phrase comes back)."""
    rng = np.random.default_rng(seed)
    low = min(8, vocab // 4)
    order = np.random.default_rng(vocab).permutation(np.arange(low, vocab))
    ranks = np.minimum(rng.zipf(1.2, size=(batch, length)) - 1, len(order) - 1)
    ids = order[ranks]
    for row in ids:  # one phrase repeated per prompt
        if length >= 12:
            start, span = int(rng.integers(0, length // 2)), int(rng.integers(3, 6))
            at = int(rng.integers(start + span, length - span + 1)) if start + 2 * span <= length else None
            if at is not None:
                row[at:at + span] = row[start:start + span]
    return ids.astype(np.int64)


# ---- generation ---------------------------------------------------------------------------------------


def generate(run: Run, layout: DecoderLayout, feeds: dict[str, np.ndarray],
             tokens: int = GENERATED_TOKENS) -> dict[str, np.ndarray]:  # fmt: skip
    """The prompt's logits from one pass with an empty past, and ``tokens`` greedy tokens after it: through
    the cache (each step one token, the past it returned, a mask one longer, the next position) or, without
    one, by running the whole sequence again. Returns {logits: [batch, positions, vocab], GENERATED: [batch,
    tokens]}: the logits of the prompt's last positions (all of them unless the vocabulary is large)."""
    out = run(feeds)
    logits = np.asarray(out[layout.logits])
    ids = prompt_ids(feeds, layout)
    batch, length = ids.shape
    step, margin = greedy_pick(logits[:, -1, :])
    made, margins = [step], [margin]
    past = {p.input: out[p.output] for p in layout.past}
    sequence = ids
    for _ in range(tokens - 1):
        sequence = np.concatenate([sequence, step[:, None]], axis=1)
        if layout.cached:
            total = sequence.shape[1]
            fed = {layout.input_ids: step[:, None], **past}
            if layout.attention_mask:
                fed[layout.attention_mask] = np.ones((batch, total), np.int64)
            if layout.position_ids:
                fed[layout.position_ids] = np.full((batch, 1), total - 1, np.int64)
            if layout.use_cache:
                fed[layout.use_cache] = np.array([True])
            out = run(fed)
            past = {p.input: out[p.output] for p in layout.past}
        else:
            out = run(prompt_feeds(layout, sequence))
        step, margin = greedy_pick(np.asarray(out[layout.logits])[:, -1, :])
        made.append(step)
        margins.append(margin)
    made_out = {}
    if layout.text and length > 1:
        made_out[PROMPT_LOSS] = prompt_loss(logits, ids)
    batch_vocab = max(batch * logits.shape[-1] * logits.dtype.itemsize, 1)
    kept = min(length, max(MIN_JUDGED_POSITIONS, JUDGED_LOGITS_BYTES // batch_vocab))
    generated = np.stack([np.stack(made, axis=1), np.stack(margins, axis=1)], axis=-1).astype(np.float64)
    # a copy: a view of the last positions would keep every prompt's whole [batch, prompt, vocab] logits alive
    return {layout.logits: logits[:, length - kept:].copy(), GENERATED: generated, **made_out}


def first_change(prompts: np.ndarray, reference: np.ndarray, variant: np.ndarray,
                 tokenizer: str) -> str:  # fmt: skip
    """The changed continuation the original was surest of, as text: ``…walked to`` ⟶ `` the market`` became
    `` the beach`` (the prompt's last words, then both continuations up to where they part and a few tokens
    after). "" when none changed or there is no tokenizer to read them with."""
    if not tokenizer:
        return ""
    ref = np.asarray(reference, np.float64).reshape(-1, np.shape(reference)[-2], 2)
    var = np.asarray(variant, np.float64).reshape(ref.shape)
    ids = np.asarray(prompts).reshape(len(ref), -1)
    tie = ref[:, :, 1] < TIE_LOGODDS
    decided = np.where(tie.any(axis=1), np.argmax(tie, axis=1), ref.shape[1])
    changed = []  # (the original's margin where they part, row, step): the surest change is the one to show
    for row in range(len(ref)):
        same = ref[row, :, 0] == var[row, :, 0]
        part = int(np.argmin(same)) if not same.all() else None
        if part is not None and part < decided[row]:
            changed.append((float(ref[row, part, 1]), row, part))
    for _, row, part in sorted(changed, reverse=True)[:1]:
        end = min(part + 4, ref.shape[1])
        lead = lm_text.decode(tokenizer, ids[row, -6:])
        before = lm_text.decode(tokenizer, ref[row, :end, 0].astype(np.int64))
        after = lm_text.decode(tokenizer, var[row, :end, 0].astype(np.int64))
        return f'e.g. "…{_clip(lead)}" went on "{_clip(before)}" and now "{_clip(after)}"'
    return ""


def _clip(text: str, most: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= most else text[: most - 1] + "…"

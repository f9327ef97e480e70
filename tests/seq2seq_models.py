"""Small encoder-decoder (seq2seq) models built from scratch here, in the optimum / transformers.js layout.

Not our sample (sample_models/tiny_seq2seq is trained with torch): the same graphs
(sample_models/seq2seq_graph.py) over seeded weights: ``encoder_model`` (input_ids, attention_mask ->
last_hidden_state) and ``decoder_model`` without a cache (encoder_attention_mask, input_ids,
encoder_hidden_states -> logits), or with ``cached=True`` optimum's cached pair: ``decoder_model`` that also
gives the ``present.N.*`` cache and ``decoder_with_past_model`` that takes it. Same seed, same weights.

:func:`speech_set` is a Whisper-like speech-to-text set on the same blocks: ``encoder_model`` (input_features
[batch_size, bins, frames] -> last_hidden_state [batch_size, frames/2, width]) and a decoder without
``encoder_attention_mask`` (input_ids, encoder_hidden_states -> logits), plain or cached.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sample_models"))
from seq2seq_graph import (  # noqa: E402
    audio_encoder_graph,
    audio_frames_out,
    decoder_graph,
    decoder_layer_names,
    encoder_feeds,
    encoder_graph,
    encoder_layer_names,
    greedy,
    mask_feed,
)

# greedy, decoder_graph: seq2seq_graph's, for tests that run a set or rebuild a decoder from its weights
__all__ = ["decoder_graph", "greedy", "greedy_cached", "seq2seq_set", "speech_set"]


def _block_weights(normal, weights: dict[str, np.ndarray], names, layers: int, width: int) -> None:
    """Every block's weights under ``names(layer)``, drawn in that order (LayerNorm gains near 1, biases small,
    matrices scaled to keep unit variance)."""
    for layer in range(layers):
        for key in names(layer):
            if key.endswith(".weight"):  # LayerNorm gains near 1, biases small
                weights[key] = 1.0 + normal((width,), 0.05)
            elif key.endswith(".bias"):
                weights[key] = normal((width,), 0.02)
            elif key.endswith("mlp.fc"):
                weights[key] = normal((width, 4 * width), width ** -0.5)
            elif key.endswith("mlp.proj"):
                weights[key] = normal((4 * width, width), (4 * width) ** -0.5)
            else:
                weights[key] = normal((width, width), width ** -0.5)


def seq2seq_set(*, vocab: int = 512, width: int = 64, layers: int = 2, heads: int = 4, seed: int = 0,
                logit_scale: float = 3.0, cached: bool = False) -> dict[str, onnx.ModelProto]:  # fmt: skip
    """``{"encoder_model": ..., "decoder_model": ...}`` with seeded weights; the LM head's spread
    (``logit_scale`` times the unit-variance normed state) keeps greedy steps clear of ties. With ``cached``,
    the decoder_model is optimum's cached one and ``decoder_with_past_model`` joins it (the same weights)."""
    rng = np.random.default_rng(seed)

    def normal(shape: tuple[int, ...], scale: float) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    weights: dict[str, np.ndarray] = {}
    for side, names in (("encoder", encoder_layer_names), ("decoder", decoder_layer_names)):
        weights[f"{side}.wte"], weights[f"{side}.wpe"] = normal((vocab, width), 1.0), normal((64, width), 0.3)
        _block_weights(normal, weights, names, layers, width)
        weights[f"{side}.ln_f.weight"], weights[f"{side}.ln_f.bias"] = np.ones(width, np.float32), np.zeros(width, np.float32)
    weights["lm_head"] = normal((width, vocab), logit_scale * width ** -0.5)
    models = {"encoder_model": encoder_graph(weights, layers, heads, name="encoder"),
              "decoder_model": decoder_graph(weights, layers, heads, name="decoder",
                                             layout="cached" if cached else "plain")}  # fmt: skip
    if cached:
        models["decoder_with_past_model"] = decoder_graph(weights, layers, heads, name="decoder_with_past",
                                                          layout="with_past")  # fmt: skip
    return models


def greedy_cached(encoder, decoder, with_past, input_ids: np.ndarray, attention_mask: np.ndarray | None, start: int,
                  eos: int, max_length: int) -> tuple[list[list[int]], np.ndarray]:  # fmt: skip
    """:func:`greedy` as runtimes run a cached set: the encoder once, ``decoder`` (the cached decoder_model)
    on the start token, then ``with_past`` (decoder_with_past_model) one token at a time, fed each step's
    ``present.N.decoder.*`` as ``past_key_values.N.decoder.*`` and the first step's ``present.N.encoder.*`` as
    ``past_key_values.N.encoder.*``. Returns greedy's tokens and the logits of every step [batch, steps, vocab].
    ``attention_mask`` None: a speech set (``input_ids`` are the ``input_features``; no encoder_attention_mask)."""
    states = encoder.run(None, encoder_feeds(input_ids, attention_mask))[0]
    seq = np.full((len(input_ids), 1), start, np.int64)
    done = np.zeros(len(input_ids), bool)
    past: dict[str, np.ndarray] = {}
    steps = []
    while seq.shape[1] < max_length and not done.all():
        if past:
            session = with_past
            feeds = {**mask_feed(attention_mask), "input_ids": seq[:, -1:],
                     **{"past_key_values" + n[len("present"):]: a for n, a in past.items()}}  # fmt: skip
        else:
            session = decoder
            feeds = {**mask_feed(attention_mask), "input_ids": seq, "encoder_hidden_states": states}
        names = [o.name for o in session.get_outputs()]
        out = dict(zip(names, session.run(None, feeds), strict=True))
        past.update((n, a) for n, a in out.items() if n.startswith("present."))  # the encoder's: of the first step
        steps.append(out["logits"][:, -1])
        token = np.where(done, eos, out["logits"][:, -1].argmax(-1))
        seq = np.concatenate([seq, token[:, None].astype(np.int64)], axis=1)
        done |= token == eos
    made = []
    for row in seq[:, 1:].tolist():
        made.append(row[: row.index(eos)] if eos in row else row)
    return made, np.stack(steps, axis=1)


def speech_set(*, vocab: int = 512, width: int = 64, layers: int = 2, heads: int = 4, bins: int = 80,
               frames: int = 200, seed: int = 0, cached: bool = False) -> dict[str, onnx.ModelProto]:  # fmt: skip
    """A Whisper-like speech-to-text set with seeded weights: ``encoder_model`` (input_features [batch_size,
    bins, frames], both fixed -> last_hidden_state [batch_size, frames/2, width]) and ``decoder_model`` without
    ``encoder_attention_mask``; with ``cached``, optimum's cached decoder_model and ``decoder_with_past_model``
    (the same weights). The LM head is spread as :func:`seq2seq_set`'s, to keep greedy steps clear of ties."""
    rng = np.random.default_rng(seed)

    def normal(shape: tuple[int, ...], scale: float) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    weights: dict[str, np.ndarray] = {
        "encoder.conv1.weight": normal((width, bins, 3), (3 * bins) ** -0.5),  # unit-variance features stay so
        "encoder.conv1.bias": normal((width,), 0.02),
        "encoder.conv2.weight": normal((width, width, 3), (3 * width) ** -0.5),
        "encoder.conv2.bias": normal((width,), 0.02),
        "encoder.wpe": normal((audio_frames_out(frames), width), 0.3),
    }
    _block_weights(normal, weights, encoder_layer_names, layers, width)
    weights["decoder.wte"], weights["decoder.wpe"] = normal((vocab, width), 1.0), normal((64, width), 0.3)
    _block_weights(normal, weights, decoder_layer_names, layers, width)
    for side in ("encoder", "decoder"):
        weights[f"{side}.ln_f.weight"], weights[f"{side}.ln_f.bias"] = np.ones(width, np.float32), np.zeros(width, np.float32)
    weights["lm_head"] = normal((width, vocab), 3.0 * width ** -0.5)
    models = {"encoder_model": audio_encoder_graph(weights, layers, heads, bins, frames, name="encoder"),
              "decoder_model": decoder_graph(weights, layers, heads, name="decoder",
                                             layout="cached" if cached else "plain", encoder_mask=False)}  # fmt: skip
    if cached:
        models["decoder_with_past_model"] = decoder_graph(weights, layers, heads, name="decoder_with_past",
                                                          layout="with_past", encoder_mask=False)  # fmt: skip
    return models

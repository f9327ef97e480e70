"""Small encoder-decoder (seq2seq) models built from scratch here, in the optimum / transformers.js layout.

Not our sample (sample_models/tiny_seq2seq is trained with torch): the same graphs
(sample_models/seq2seq_graph.py) over seeded weights: ``encoder_model`` (input_ids, attention_mask ->
last_hidden_state) and ``decoder_model`` without a cache (encoder_attention_mask, input_ids,
encoder_hidden_states -> logits), or with ``cached=True`` optimum's cached pair: ``decoder_model`` that also
gives the ``present.N.*`` cache and ``decoder_with_past_model`` that takes it. Same seed, same weights.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sample_models"))
from seq2seq_graph import decoder_graph, decoder_layer_names, encoder_graph, encoder_layer_names, greedy  # noqa: E402

__all__ = ["greedy", "greedy_cached", "seq2seq_set"]  # greedy: seq2seq_graph's, for tests that run a set


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
        weights[f"{side}.ln_f.weight"], weights[f"{side}.ln_f.bias"] = np.ones(width, np.float32), np.zeros(width, np.float32)
    weights["lm_head"] = normal((width, vocab), logit_scale * width ** -0.5)
    models = {"encoder_model": encoder_graph(weights, layers, heads, name="encoder"),
              "decoder_model": decoder_graph(weights, layers, heads, name="decoder",
                                             layout="cached" if cached else "plain")}  # fmt: skip
    if cached:
        models["decoder_with_past_model"] = decoder_graph(weights, layers, heads, name="decoder_with_past",
                                                          layout="with_past")  # fmt: skip
    return models


def greedy_cached(encoder, decoder, with_past, input_ids: np.ndarray, attention_mask: np.ndarray, start: int,
                  eos: int, max_length: int) -> tuple[list[list[int]], np.ndarray]:  # fmt: skip
    """:func:`greedy` as runtimes run a cached set: the encoder once, ``decoder`` (the cached decoder_model)
    on the start token, then ``with_past`` (decoder_with_past_model) one token at a time, fed each step's
    ``present.N.decoder.*`` as ``past_key_values.N.decoder.*`` and the first step's ``present.N.encoder.*`` as
    ``past_key_values.N.encoder.*``. Returns greedy's tokens and the logits of every step [batch, steps, vocab]."""
    states = encoder.run(None, {"input_ids": input_ids, "attention_mask": attention_mask})[0]
    seq = np.full((len(input_ids), 1), start, np.int64)
    done = np.zeros(len(input_ids), bool)
    past: dict[str, np.ndarray] = {}
    steps = []
    while seq.shape[1] < max_length and not done.all():
        if past:
            session = with_past
            feeds = {"encoder_attention_mask": attention_mask, "input_ids": seq[:, -1:],
                     **{"past_key_values" + n[len("present"):]: a for n, a in past.items()}}  # fmt: skip
        else:
            session = decoder
            feeds = {"encoder_attention_mask": attention_mask, "input_ids": seq, "encoder_hidden_states": states}
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

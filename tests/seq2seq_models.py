"""Small encoder-decoder (seq2seq) models built from scratch here, in the optimum / transformers.js layout.

Not our sample (sample_models/tiny_seq2seq is trained with torch): the same graphs
(sample_models/seq2seq_graph.py) over seeded weights: ``encoder_model`` (input_ids, attention_mask ->
last_hidden_state) and ``decoder_model`` without a cache (encoder_attention_mask, input_ids,
encoder_hidden_states -> logits). Same seed, same weights.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sample_models"))
from seq2seq_graph import decoder_graph, decoder_layer_names, encoder_graph, encoder_layer_names, greedy  # noqa: E402

__all__ = ["greedy", "seq2seq_set"]  # greedy: seq2seq_graph's, for tests that run a set


def seq2seq_set(*, vocab: int = 512, width: int = 64, layers: int = 2, heads: int = 4, seed: int = 0,
                logit_scale: float = 3.0) -> dict[str, onnx.ModelProto]:  # fmt: skip
    """``{"encoder_model": ..., "decoder_model": ...}`` with seeded weights; the LM head's spread
    (``logit_scale`` times the unit-variance normed state) keeps greedy steps clear of ties."""
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
    return {"encoder_model": encoder_graph(weights, layers, heads, name="encoder"),
            "decoder_model": decoder_graph(weights, layers, heads, name="decoder")}  # fmt: skip

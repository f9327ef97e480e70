"""Small decoder LMs built from scratch here, in the optimum / transformers.js layouts.

Not our sample (sample_models/tiny_lm is trained with torch): the same GPT-style graph
(sample_models/lm_graph.py) over seeded weights, in three layouts: ``cached`` (past_key_values.N.key/value
in, present.N.* out), ``plain`` (input_ids, attention_mask -> logits) and ``merged`` (the cached graph with
a ``use_cache_branch`` flag, as optimum's merged decoders take it). Same seed, same weights in every layout.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sample_models"))
from lm_graph import decoder_graph, layer_names  # noqa: E402


def decoder_lm(layout: str = "cached", *, vocab: int = 512, width: int = 64, layers: int = 2, heads: int = 4,
               seed: int = 0, logit_scale: float = 3.0) -> onnx.ModelProto:  # fmt: skip
    """A GPT-style decoder in ``layout`` (cached, plain or merged) with seeded weights."""
    rng = np.random.default_rng(seed)

    def normal(shape: tuple[int, ...], scale: float) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    weights = {"wte": normal((vocab, width), 1.0), "wpe": normal((256, width), 0.3)}
    for layer in range(layers):
        ln1_g, ln1_b, wq, wk, wv, wo, ln2_g, ln2_b, fc, proj = layer_names(layer)
        for key in (wq, wk, wv, wo):
            weights[key] = normal((width, width), width ** -0.5)
        weights[fc], weights[proj] = normal((width, 4 * width), width ** -0.5), normal((4 * width, width), (4 * width) ** -0.5)
        for gain, bias in ((ln1_g, ln1_b), (ln2_g, ln2_b)):
            weights[gain], weights[bias] = np.ones(width, np.float32), np.zeros(width, np.float32)
    weights["ln_f.weight"], weights["ln_f.bias"] = np.ones(width, np.float32), np.zeros(width, np.float32)
    weights["lm_head"] = normal((width, vocab), logit_scale * width ** -0.5)
    return decoder_graph(weights, layers, heads, layout, name="decoder")


def damaged(model: onnx.ModelProto, noise: float, seed: int = 1) -> onnx.ModelProto:
    """A copy with every weight matrix disturbed by ``noise`` times its own spread: a variant that changes
    what the model writes, for tests that a verdict fails it."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    rng = np.random.default_rng(seed)
    for tensor in out.graph.initializer:
        array = numpy_helper.to_array(tensor)
        if array.dtype == np.float32 and array.ndim == 2 and array.size >= 1024:
            array = array + rng.standard_normal(array.shape).astype(np.float32) * noise * float(array.std())
            tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))
    return out

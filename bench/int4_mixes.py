"""Which precision mixes can pass the default verdict on a model (issue 13: auto's floor).

Each mix gives every candidate weight a precision (float32 / float16 / int8 / int4, the registry's
``approximate()``), fed into one session with overridable weights (bench/int4_quality.py's ``Probe``)
on compare's own synthesized parity inputs; prints the logits' top-1 agreement over decided positions
(the default verdict's check for scores) and the hidden state's cosine.

Run: python bench/int4_mixes.py [synthetic]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import int4_quality as q  # noqa: E402

import shrinkray.methods  # noqa: E402, F401  (fills the registry)
from shrinkray.graph.weights import find_weights  # noqa: E402
from shrinkray.measure.results import CompareSettings  # noqa: E402
from shrinkray.methods.base import get_method  # noqa: E402
from shrinkray.pipeline.compare import parity_inputs  # noqa: E402

METHOD = {"f16": "float16", "i8": "weights-int8", "i4": "weights-int4"}


def main(key: str = "synthetic") -> None:
    model, _, _, _ = q.load_case(key)
    refs = [r for r in find_weights(model) if r.kind == "initializer" and not r.scope and r.elements >= 16384
            and r.dtype == 1]  # fmt: skip
    feeds = parity_inputs(model, CompareSettings()).samples[0]
    probe = q.Probe(model, refs, feeds)
    cache: dict[tuple[str, str], np.ndarray] = {}

    def approx(r, level: str) -> np.ndarray:
        if level == "f32":
            return r.array()
        if (r.name, level) not in cache:
            cache[r.name, level] = get_method(METHOD[level]).approximate(r.array(), r).astype(np.float32)
        return cache[r.name, level]

    def judge(mix) -> tuple[float, float]:
        got = probe.run({r.name: approx(r, mix(r)) for r in refs})
        a, b = probe.ref["logits"], got["logits"]
        top2 = np.sort(a, axis=-1)[..., -2:]  # float16-safe: float32 logits
        decided = (top2[..., 1] - top2[..., 0]) >= 1e-3 * (a.max(-1) - a.min(-1))
        agree = float((a.argmax(-1) == b.argmax(-1))[decided].mean())
        h, g = probe.ref["last_hidden_state"].ravel(), got["last_hidden_state"].ravel()
        return agree, float(h @ g / np.linalg.norm(h) / np.linalg.norm(g))

    def emb(r) -> bool:
        return r.name == "embed_tokens.weight"

    mixes = {
        "all 8-bit": lambda r: "i8",
        "embedding float16, rest 8-bit": lambda r: "f16" if emb(r) else "i8",
        "embedding 8-bit, rest float16": lambda r: "i8" if emb(r) else "f16",
        "embedding 4-bit, rest float16": lambda r: "i4" if emb(r) else "f16",
        "embedding float16, rest 4-bit": lambda r: "f16" if emb(r) else "i4",
        "all float16": lambda r: "f16",
    }
    for label, mix in mixes.items():
        agree, cos = judge(mix)
        print(f"| {label} | {agree:.3f} | {cos:.5f} |", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:2])

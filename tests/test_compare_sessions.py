"""One ONNX Runtime session per variant: validation, parity (and culprits) share it."""

from __future__ import annotations

import onnxruntime as ort
import pytest
from helpers import sample_path

import shrinkray
from shrinkray.compare import CompareSettings, compare
from shrinkray.methods import all_methods


@pytest.fixture
def opened(monkeypatch):
    """Counts every session ONNX Runtime opens."""
    count = {"n": 0}
    real = ort.InferenceSession

    def counting(*args, **kwargs):
        count["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", counting)
    return count


def test_each_variant_is_opened_once_for_validation_and_parity(opened):
    methods = [(name, {}) for name in ("weights-int8", "palettize", "float16")]
    result = compare(shrinkray.load(sample_path("mlp")), CompareSettings(methods=methods, latency=False))
    assert all(v.parity is not None for v in result.variants)
    assert opened["n"] == 1 + len(methods)  # the original once, each variant once


def test_a_failing_variant_is_judged_before_the_next_is_made(opened):
    """Parity follows each shrink, so at most one variant's session is alive at a time."""
    seen = []
    compare(
        shrinkray.load(sample_path("mlp")),
        CompareSettings(methods=[(s.name, {}) for s in all_methods()][:3], latency=False),
        progress=lambda step, fraction: seen.append(step),
    )
    shrinking = [i for i, step in enumerate(seen) if step.startswith("Shrinking")]
    checking = [i for i, step in enumerate(seen) if step.startswith("Checking parity")]
    assert len(shrinking) == len(checking) == 3
    assert all(s < c < (shrinking[k + 1] if k + 1 < len(shrinking) else 10**9)
               for k, (s, c) in enumerate(zip(shrinking, checking, strict=True)))  # fmt: skip

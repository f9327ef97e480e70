"""One ONNX Runtime session per variant: validation, parity (and culprits) share it."""

from __future__ import annotations

import onnxruntime as ort
import pytest
from helpers import sample_path

import shrinkray
from shrinkray.compare import CompareSettings, compare
from shrinkray.methods import all_methods, get_method


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
    """Parity follows each shrink made in this process, so at most one such variant's session is alive at a
    time; a method working in a child process is built in the background meanwhile and judged after them."""
    seen = []
    methods = [(s.name, {}) for s in all_methods()][:3]
    compare(
        shrinkray.load(sample_path("mlp")),
        CompareSettings(methods=methods, latency=False),
        progress=lambda step, fraction: seen.append(step),
    )
    shrinking = [i for i, step in enumerate(seen) if step.startswith("Shrinking")]
    checking = [i for i, step in enumerate(seen) if step.startswith("Checking parity")]
    assert len(shrinking) == len(checking) == 3
    local = [name for name, _ in methods if not get_method(name).runs_in_child_process]
    background = [name for name, _ in methods if get_method(name).runs_in_child_process]
    order = [seen[i].split(": ", 1)[1] for i in checking]
    assert order == local + background
    for name in local:  # shrink, then its parity, before the next shrink
        s = seen.index(f"Shrinking: {name}")
        c = seen.index(f"Checking parity: {name}")
        assert s < c and not any(step.startswith("Shrinking") for step in seen[s + 1:c])

"""One ONNX Runtime session per variant: validation, parity (and culprits) share it.

Sessions on models open from files (the model's measuring copy, measure/prefold.py). The only other
sessions are the copy's fold chains: one decoded weight's nodes each, run unoptimized, from bytes."""

from __future__ import annotations

import onnx
import onnxruntime as ort
import pytest
from helpers import sample_path

import shrinkray
from shrinkray.measure.results import CompareSettings
from shrinkray.methods import all_methods, get_method
from shrinkray.pipeline.compare import compare


def _chain(source) -> bool:
    """A fold chain's session (measure/prefold.py): from bytes, one output, graph "fold"."""
    if not isinstance(source, bytes):
        return False
    model = onnx.load_from_string(source)
    return model.graph.name == "fold" and len(model.graph.output) == 1


@pytest.fixture
def opened(monkeypatch):
    """Counts every session ONNX Runtime opens on a model ("n"), and fold chains apart ("chains")."""
    count = {"n": 0, "chains": 0}
    real = ort.InferenceSession

    def counting(source, *args, **kwargs):
        count["chains" if _chain(source) else "n"] += 1
        return real(source, *args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", counting)
    return count


def test_each_variant_is_opened_once_for_validation_and_parity(opened):
    methods = [(name, {}) for name in ("weights-int8", "palettize", "float16")]
    result = compare(shrinkray.load(sample_path("mlp")), CompareSettings(methods=methods, latency=False))
    assert all(v.parity is not None for v in result.variants)
    assert opened["n"] == 1 + len(methods)  # the original once, each variant once
    assert opened["chains"] > 0  # weights-int8's Cast/Mul decodes were folded before its session opened


def test_each_variant_is_built_and_judged_before_the_next_is_made():
    """Parity follows each shrink, in the requested order, so at most one variant's session is alive at a
    time; a method working in a child process is no exception (built beside another variant, its side of
    the worker stacked on that variant's session opening: the worker's peak)."""
    seen = []
    methods = [(s.name, {}) for s in all_methods()][:3]
    assert any(get_method(name).runs_in_child_process for name, _ in methods)
    compare(
        shrinkray.load(sample_path("mlp")),
        CompareSettings(methods=methods, latency=False),
        progress=lambda step, fraction: seen.append(step),
    )
    shrinking = [seen[i].split(": ", 1)[1] for i, step in enumerate(seen) if step.startswith("Shrinking")]
    checking = [seen[i].split(": ", 1)[1] for i, step in enumerate(seen) if step.startswith("Checking parity")]
    assert shrinking == checking == [name for name, _ in methods]
    for name, _ in methods:  # shrink, then its parity, before the next shrink
        s = seen.index(f"Shrinking: {name}")
        c = seen.index(f"Checking parity: {name}")
        assert s < c and not any(step.startswith("Shrinking") for step in seen[s + 1:c])


def test_sessions_open_from_files_never_from_bytes(monkeypatch):
    """Every session compare opens reads a file: no serialized copy of a model is held beside it."""
    sources = []
    real = ort.InferenceSession

    def recording(source, *args, **kwargs):
        sources.append(source)
        return real(source, *args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", recording)
    methods = [(name, {}) for name in ("weights-int8", "float16")]
    compare(shrinkray.load(sample_path("mlp")), CompareSettings(methods=methods, runs=2, warmup=0, threads=[1]))
    models = [s for s in sources if not _chain(s)]
    assert models and all(isinstance(s, str) and s.endswith(".onnx") for s in models)
    chains = [s for s in sources if _chain(s)]
    assert chains and all(len(s) < shrinkray.load(sample_path("mlp")).file_bytes for s in chains)

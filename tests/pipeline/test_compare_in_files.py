"""compare of a model kept in external data files (issue 28, big models): measured where it is, streamed, judged
the same as the same model loaded whole."""

from __future__ import annotations

import hashlib
from pathlib import Path

import onnx
import pytest
from helpers import sample_path

from shrinkray.measure.results import CompareSettings
from shrinkray.pipeline import compare as compare_module
from shrinkray.runs.jobs import compare_job

pytestmark = pytest.mark.slow

METHODS = [("weights-int8", {}), ("float16", {}), ("palettize", {"levels": 16})]


def _external_copy(folder: Path) -> Path:
    """The transformer sample saved as a graph plus one data file (what a 1 GB export looks like)."""
    folder.mkdir()
    path = folder / "model.onnx"
    onnx.save_model(onnx.load(str(sample_path("transformer"))), str(path), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="model.onnx.data", size_threshold=1024)  # fmt: skip
    return path


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_a_model_in_external_data_is_measured_in_its_files_and_judged_as_when_loaded_whole(tmp_path, monkeypatch):
    path = _external_copy(tmp_path / "user")
    before = _digests(path.parent)
    written: list[str] = []
    real_write = compare_module._write_model
    monkeypatch.setattr(compare_module, "_write_model", lambda m, p, **kw: written.append(p.name) or real_write(m, p, **kw))
    settings = CompareSettings(methods=METHODS, latency=False, brotli_quality=5)
    (tmp_path / "a").mkdir()
    in_files = compare_job(path, settings, tmp_path / "out", False, str(tmp_path / "a"))
    assert "original.onnx" not in written  # its own files were measured, not a copy
    assert any("palettize" in w for w in written)  # a method that cannot stream builds in memory, as before
    assert not any("weights-int8" in w or "float16" in w for w in written)  # streamed, not written from memory
    notes = {r.key: " ".join(r.notes) for r in in_files.variants}
    assert "tensor by tensor" in notes["weights-int8"] and "tensor by tensor" in notes["float16"]
    assert "tensor by tensor" not in notes["palettize levels=16"]
    assert _digests(path.parent) == before  # the user's files are only read
    for result in in_files.variants:  # each variant is a model and its data file, in the user's folder of choice
        assert result.ok and Path(result.file).parent == tmp_path / "out", result.error

    (tmp_path / "b").mkdir()
    whole = compare_job(sample_path("transformer"), settings, None, False, str(tmp_path / "b"))
    for ours, theirs in zip(in_files.variants, whole.variants, strict=True):
        assert ours.key == theirs.key and ours.parity.status == theirs.parity.status
        for a, b in zip(ours.parity.outputs, theirs.parity.outputs, strict=True):
            assert a.cosine == pytest.approx(b.cosine, abs=1e-6) and a.max_abs_error == pytest.approx(b.max_abs_error, rel=1e-4)


def test_latency_of_a_model_in_external_data_is_timed_from_its_files(tmp_path):
    path = _external_copy(tmp_path / "user")
    settings = CompareSettings(methods=METHODS[:1], threads=[1], latency_budget_s=1.0, brotli_quality=5)
    (tmp_path / "a").mkdir()
    comparison = compare_job(path, settings, None, False, str(tmp_path / "a"))
    assert comparison.original.latency and comparison.variants[0].latency
    assert not list(Path(tmp_path / "a").rglob("measuring-*"))  # the scratch folder went with the run

"""Every registered method through every front end, on every sample: the CLI (its capped worker process), the
Python API and the app's job path (Runs: the queue and the sandboxed worker).

A method that works in-process and crashes in a worker is broken (``shrinkray shrink -m weights-int4`` did, for
every model: the worker's RunContext lost what ``prepare`` had worked out). Each front end either writes a model
that ONNX Runtime opens, or says in one clear line why the method has nothing to do on this sample; never that it
is a bug.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import SAMPLE_NAMES, sample_path

import shrinkray
from shrinkray import cli
from shrinkray.errors import ShrinkRayError
from shrinkray.graph.sessions import open_session
from shrinkray.measure.results import CompareSettings
from shrinkray.runs.queue import LocalQueue
from shrinkray.runs.service import Runs
from shrinkray.runs.store import RunStore
from shrinkray.verdict import verdict_of

pytestmark = pytest.mark.slow

METHODS = [spec.name for spec in shrinkray.all_methods()]
BUG_WORDS = ("bug in Shrink Ray Studio", "Traceback", "AttributeError", "KeyError", "TypeError")


def _clear_refusal(text: str) -> None:
    assert text.strip(), "a refusal must say why"
    assert not any(word in text for word in BUG_WORDS), text


@pytest.mark.parametrize("sample", SAMPLE_NAMES)
@pytest.mark.parametrize("method", METHODS)
def test_cli_shrink_through_its_worker(method, sample, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    source = shutil.copyfile(sample_path(sample), tmp_path / f"{sample}.onnx")
    output = tmp_path / "out.onnx"
    code = cli.main(["shrink", "-m", method, str(source), "-o", str(output)])
    captured = capsys.readouterr()
    if code == 0:
        assert output.is_file()
        open_session(shrinkray.load(output).model)
    else:
        assert not output.exists()
        _clear_refusal(captured.err)
        assert len([line for line in captured.err.splitlines() if line.strip()]) == 1, captured.err


@pytest.mark.parametrize("sample", SAMPLE_NAMES)
@pytest.mark.parametrize("method", METHODS)
def test_api_shrink(method, sample):
    try:
        variant = shrinkray.shrink(shrinkray.load(sample_path(sample)).model, method)
    except ShrinkRayError as exc:
        _clear_refusal(str(exc))
        return
    open_session(variant.model)


@pytest.mark.parametrize("sample", SAMPLE_NAMES)
def test_app_job_runs_every_method(sample, tmp_path):
    """One run per sample with every method, as the app's Shrink page starts it: each variant is measured and
    judged, or carries a clear reason it was not made."""
    runs = Runs(RunStore(tmp_path), LocalQueue(workers=1))
    settings = CompareSettings(methods=[(m, {}) for m in METHODS], latency=False, brotli_quality=1)
    run_id = runs.start(shrinkray.load(sample_path(sample)), settings)
    assert runs.queue.wait_idle(300)
    view = runs.view(run_id)
    assert view.status == "done", view.record.error
    comparison = runs.comparison(run_id)
    assert {r.key for r in comparison.variants} == set(METHODS)
    for result in comparison.variants:
        if result.error:
            _clear_refusal(result.error)
            continue
        assert Path(result.file).is_file(), result.key
        assert result.parity is not None, result.key
        if result.method == "auto":  # auto accepts a mix only when the verdict compare gives passes
            assert verdict_of(result).status == "pass", verdict_of(result).sentence


SET_METHODS = [m for m in METHODS if m != "auto"]  # auto searches one file's tensors: refused for a set


@pytest.mark.parametrize("method", METHODS)
def test_cli_shrink_of_a_set_through_its_worker(method, tmp_path, capsys):
    """Every method on the set sample (an encoder and a decoder) through the CLI's worker: each file written and
    opened, or one clear line (auto: it works on one file)."""
    folder = shutil.copytree(sample_path("mlp").parent / "tiny_seq2seq", tmp_path / "tiny_seq2seq")
    code = cli.main(["shrink", str(folder), "-m", method])
    captured = capsys.readouterr()
    written = sorted(p for p in (folder / "onnx").iterdir() if p.name not in ("encoder_model.onnx", "decoder_model.onnx"))
    if method in SET_METHODS:
        assert code == 0, captured.err
        assert len(written) == 2 and all(open_session(shrinkray.load(p).model) for p in written)
    else:
        assert code == 1 and not written
        _clear_refusal(captured.err)


def test_app_job_runs_every_method_on_a_set(tmp_path):
    """The set sample through the app's job path with every method a set takes: each variant set judged."""
    from shrinkray.io.model_set import as_loaded, open_set

    runs = Runs(RunStore(tmp_path / "store"), LocalQueue(workers=1))
    loaded = as_loaded(open_set(sample_path("mlp").parent / "tiny_seq2seq", workdir=tmp_path / "w"))
    run_id = runs.start(loaded, CompareSettings(methods=[(m, {}) for m in SET_METHODS], brotli_quality=1))
    assert runs.queue.wait_idle(300)
    view = runs.view(run_id)
    assert view.status == "done", view.record.error
    comparison = runs.comparison(run_id)
    assert [r.key for r in comparison.variants] == SET_METHODS
    assert all(r.ok and verdict_of(r).status in ("pass", "fail", "undecided") for r in comparison.variants)
    assert all(Path(r.file).is_dir() for r in comparison.variants)  # each variant a folder of models

"""The command line under hostile input and hostile conditions: reports never land on inputs, every
OS-level failure is one line with exit 1, signals and closed pipes leave nothing behind, model text
cannot drive the terminal."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import ROOT, sample_path
from hostile.build_corpus import INJECTIONS, external_model_bytes, injection_model

from shrinkray import cli


def _run(capsys, *args) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _env(extra_path: Path | None = None) -> dict[str, str]:
    paths = [str(ROOT)] + ([str(extra_path)] if extra_path else []) + [os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))


def _listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


# --------------------------------------------------------------------------- reports never land on inputs


@pytest.fixture
def inputs(tmp_path) -> dict[str, Path]:
    """A model named .pb, a zip input, an external-data model folder and an .npz, each with its bytes noted."""
    pb = tmp_path / "model.pb"
    shutil.copyfile(sample_path("mlp"), pb)
    folder = tmp_path / "ext"
    folder.mkdir()
    onnx_bytes, data = external_model_bytes()
    (folder / "model.onnx").write_bytes(onnx_bytes)
    (folder / "weights.bin").write_bytes(data)
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("model.onnx", onnx_bytes)
        zf.writestr("weights.bin", data)
    npz = tmp_path / "real.npz"
    np.savez(npz, x=np.zeros((1, 32), np.float32))
    return {"pb": pb, "external": folder / "model.onnx", "weights": folder / "weights.bin", "zip": archive, "npz": npz}


@pytest.mark.parametrize("flag", ["--json", "--markdown", "--csv", "--html"])
@pytest.mark.parametrize(("model", "target"), [("pb", "pb"), ("zip", "zip"), ("external", "npz"), ("pb", "npz")])
def test_a_report_path_equal_to_an_input_is_refused_whatever_its_name(capsys, inputs, flag, model, target):
    before = {name: path.read_bytes() for name, path in inputs.items()}
    code, out, err = _run(capsys, "compare", inputs[model], "--inputs", inputs["npz"], flag, inputs[target], "-q")
    assert code == 1, err
    assert err.strip() == (f"Error: Refusing to write a report to {inputs[target]}: it is one of the input files. "
                           "Give the report another file name.")  # fmt: skip
    assert out == ""
    assert {name: path.read_bytes() for name, path in inputs.items()} == before


def test_external_data_of_the_input_is_protected_from_reports(tmp_path, inputs):
    from shrinkray.report import formats as report

    weights = inputs["weights"]
    with pytest.raises(Exception, match="it is one of the input files"):
        report.check_report_paths([weights], protect=[inputs["external"], weights])
    alias = tmp_path / "alias.bin"
    os.link(weights, alias)  # the same file under another name
    with pytest.raises(Exception, match="it is one of the input files"):
        report.check_report_paths([alias], protect=[weights])


# --------------------------------------------------------------------------- OS-level failures: one line, exit 1


def test_output_that_is_a_folder_is_a_refusal(capsys, tmp_path):
    (tmp_path / "out").mkdir()
    model = tmp_path / "mlp.onnx"
    shutil.copyfile(sample_path("mlp"), model)
    code, _, err = _run(capsys, "shrink", model, "-m", "float16", "-o", tmp_path / "out", "--force", "-q")
    assert code == 1
    assert err.strip() == f"Error: {tmp_path / 'out'} is a folder. Give a file name with -o, e.g. -o model.small.onnx."


def test_an_unwritable_place_is_a_one_line_refusal(capsys, tmp_path):
    model = tmp_path / "mlp.onnx"
    shutil.copyfile(sample_path("mlp"), model)
    code, _, err = _run(capsys, "shrink", model, "-m", "float16", "-o", "/proc/shrinkray-out.onnx", "-q")
    assert code == 1, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: Could not write /proc/shrinkray-out.onnx ("), err
    assert "bug" not in err and ".shrinkray-" not in err


def test_reports_on_a_full_disk_are_all_or_nothing(capsys, tmp_path, monkeypatch):
    from shrinkray.errors import WriteError
    from shrinkray.io import files as sio
    from shrinkray.io.files import load
    from shrinkray.measure.results import CompareSettings
    from shrinkray.pipeline.compare import compare
    from shrinkray.report import formats as report

    comparison = compare(load(sample_path("mlp")), CompareSettings(methods=[("float16", {})], latency=False))
    real = sio._write_synced

    def full_on_html(path, data):
        if path.name.endswith(".html"):
            raise OSError(28, "No space left on device", str(path))
        real(path, data)

    monkeypatch.setattr(sio, "_write_synced", full_on_html)
    with pytest.raises(WriteError, match=r"Could not write .*r\.html \(No space left on device\)"):
        report.write_reports(comparison, json_path=tmp_path / "r.json", html_path=tmp_path / "r.html")
    assert _listing(tmp_path) == set(), "r.json was not written without r.html"


# --------------------------------------------------------------------------- signals and pipes

_SLOW_WRITES = """
import sys, time
import shrinkray.io.files as sio

_real = sio._write_synced

def _slow(path, data):
    with open(path, "wb") as fh:
        fh.write(data[: len(data) // 2])
    print("SHRINKRAY-WRITING", file=sys.stderr, flush=True)
    time.sleep(60)

def _slow_model(model, path, exclusive=True):
    _slow(path, model.SerializeToString())

sio._write_synced = _slow
sio.write_model_pieces = _slow_model
"""


def test_sigterm_while_shrink_writes_leaves_nothing(tmp_path):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_SLOW_WRITES)  # runs in the CLI and in its worker
    work = tmp_path / "work"
    work.mkdir()
    shutil.copyfile(sample_path("mlp"), work / "mlp.onnx")
    before = set(os.listdir("/tmp"))
    process = subprocess.Popen(
        [sys.executable, "-m", "shrinkray.cli", "shrink", "mlp.onnx", "-m", "float16", "-o", "small.onnx"],
        cwd=work, env=_env(hook), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    for line in process.stderr:
        if "SHRINKRAY-WRITING" in line:
            break
    assert any(p.startswith(".shrinkray-") for p in os.listdir(work)), "the write is under way"
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 143, err
    assert "Stopped; nothing was written." in err
    assert _listing(work) == {"mlp.onnx"}
    assert not [p for p in set(os.listdir("/tmp")) - before if p.startswith(f"shrinkray-zip-{process.pid}-")]


def test_a_closed_pipe_is_not_a_bug(tmp_path):
    process = subprocess.Popen(
        # ~300 KB of table: more than a pipe holds, so the writer is still writing when the reader leaves
        [sys.executable, "-m", "shrinkray.cli", "price", "--downloads", "1000",
         "--size", ",".join(str(k) for k in range(1000, 4000))],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    process.stdout.readline()
    process.stdout.close()  # like `| head -1`
    err = process.stderr.read().decode()
    process.wait(60)
    assert err == ""
    assert process.returncode == 141


# --------------------------------------------------------------------------- model text in the terminal


def test_inspect_shows_control_characters_escaped(capsys, tmp_path):
    path = tmp_path / "names.onnx"
    onnx.save(injection_model(), str(path))
    code, out, err = _run(capsys, "inspect", path)
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in out  # shown, not obeyed
    code, out, _ = _run(capsys, "inspect", path, "--json")
    assert "\x1b" not in out and json.loads(out)["producer"].startswith(INJECTIONS["markdown_link"])


def test_error_messages_show_control_characters_escaped(capsys, tmp_path):
    path = tmp_path / "bad\x1b[2J.onnx"
    path.write_bytes(b"")
    code, _, err = _run(capsys, "inspect", path)
    assert code == 1
    assert "\x1b" not in err and "\\x1b[2J" in err

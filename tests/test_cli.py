"""The ``shrinkray`` command, in-process through ``shrinkray.cli.main`` and as a real subprocess.

Every test works in its own temporary folder holding copies of the sample
models; nothing is ever written into sample_models/.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import ROOT, sample_path

import shrinkray
from shrinkray import cli
from shrinkray.graph.sessions import open_session

METHODS = [spec.name for spec in shrinkray.all_methods()]
MISSING_DEFAULT = "Error: Missing artifacts/model.onnx. Run export first."


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    """An empty working folder (also the cwd) for one test."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _copy(name: str, folder: Path, as_name: str | None = None) -> Path:
    target = folder / (as_name or f"{name}.onnx")
    shutil.copyfile(sample_path(name), target)
    return target


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


def _subprocess(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "shrinkray.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# ------------------------------------------------------------------ inspect


def test_inspect_text_shows_opset_inputs_and_weights(work, capsys):
    code, out, err = _run_cli(capsys, "inspect", _copy("mlp", work))
    assert code == 0
    assert err == ""
    assert out.startswith("mlp: ")
    assert "(1,096,595 bytes), IR version 10" in out
    assert "Opsets: ai.onnx 17" in out
    assert re.search(r"^  features\s+float\s+\[batch, 64\]\s+dynamic: batch$", out, re.MULTILINE)
    assert re.search(r"^  probs\s+float\s+\[batch, 10\]", out, re.MULTILINE)
    assert re.search(r"^Ops \(\d+ nodes, 0 subgraphs\): .*Gemm \d", out, re.MULTILINE)
    assert re.search(r"^Weights: 8 tensors, .* of the file, largest first$", out, re.MULTILINE)
    assert re.search(r"^  name\s+dtype\s+shape\s+bytes\s+share\s+where$", out, re.MULTILINE)
    rows = re.findall(r"^  (\S+)\s+float\s+\[[\d, ]+\]\s+([\d,]+)\s+[\d.]+%\s+initializer$", out, re.MULTILINE)
    assert rows[0] == ("fc2.weight", "589,824")  # largest first
    assert len(rows) == 8
    for method in METHODS:
        assert re.search(rf"^  {method}\s+\d+ tensors", out, re.MULTILINE)


def test_inspect_text_of_messy_and_shared_weight(work, capsys):
    code, out, _ = _run_cli(capsys, "inspect", _copy("messy", work))
    assert code == 0
    assert "Opsets: ai.onnx 11" in out
    assert re.search(r"^  input\.1\s+float\s+\[\?, 64\]", out, re.MULTILINE)
    assert re.search(r"^  scale\s+int64\s+\[\]$", out, re.MULTILINE)
    code, out, _ = _run_cli(capsys, "inspect", _copy("shared_weight", work))
    assert code == 0
    assert "+ 1 initializers that are also inputs (overridable)" in out
    inputs = out.split("Inputs:")[1].split("Outputs:")[0]
    assert "input_ids" in inputs and "W_override" not in inputs.split("+")[0]


def test_inspect_top_and_all(work, capsys):
    path = _copy("messy", work)  # 9 weights
    _, out, _ = _run_cli(capsys, "inspect", path, "--top", "2")
    assert "(top 2; --all shows every one)" in out
    table = out.split("largest first")[1].split("What each method")[0]
    assert len(re.findall(r"Constant node$", table, re.MULTILINE)) == 2
    _, out, _ = _run_cli(capsys, "inspect", path, "--all")
    table = out.split("largest first")[1].split("What each method")[0]
    assert len(re.findall(r"Constant node$", table, re.MULTILINE)) == 9


def test_inspect_reports_custom_ops(work, capsys):
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")],
        "custom",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    path = work / "custom.onnx"
    onnx.save(model, str(path))
    code, out, _ = _run_cli(capsys, "inspect", path)
    assert code == 0
    assert "Custom ops (ONNX Runtime cannot run these here): com.example::Frobnicate" in out


def test_inspect_json_parses_and_matches_the_api(work, capsys):
    path = _copy("subgraph", work)
    code, out, err = _run_cli(capsys, "inspect", path, "--json")
    assert code == 0 and err == ""
    data = json.loads(out)
    expected = json.loads(json.dumps(shrinkray.inspect(shrinkray.load(path)).to_dict()))
    assert data == expected
    assert data["opsets"] == {"ai.onnx": 17}
    assert data["op_histogram"]["If"] == 1 and data["op_histogram"]["Loop"] == 1
    assert data["inputs"][1] == {"name": "use_branch_a", "dtype": "bool", "shape": [], "dynamic_axes": {}}


# ------------------------------------------------------------------ shrink: outputs and protection


@pytest.mark.slow  # shrinks in a capped worker interpreter (shrinkray.runs.sandbox): about a second each
def test_shrink_writes_name_method_onnx_next_to_the_input(work, capsys):
    source = _copy("mlp", work)
    before = _sha(source)
    code, out, err = _run_cli(capsys, "shrink", source, "--method", "weights-int8")
    assert code == 0, err
    target = work / "mlp.weights-int8.onnx"
    assert sorted(p.name for p in work.iterdir()) == ["mlp.onnx", "mlp.weights-int8.onnx"]  # no temp files left
    assert f"written to {target}" in out
    assert "weights-int8: rewrote 3 tensors" in out
    assert "Loading" in err and "Traceback" not in err
    assert _sha(source) == before
    loaded = shrinkray.load(target)
    onnx.checker.check_model(loaded.model)
    assert loaded.file_bytes <= 0.30 * source.stat().st_size
    session = open_session(loaded.model)
    (logits, probs) = session.run(None, {"features": np.zeros((2, 64), np.float32)})
    assert logits.shape == (2, 10) and probs.shape == (2, 10)


@pytest.mark.slow  # shrinks in a capped worker interpreter (shrinkray.runs.sandbox): about a second each
def test_shrink_refuses_to_replace_an_existing_output_without_force(work, capsys):
    source = _copy("mlp", work)
    target = work / "mlp.weights-int8.onnx"
    assert _run_cli(capsys, "shrink", source, "-m", "weights-int8", "-q")[0] == 0
    target.write_bytes(b"an older output")

    code, out, err = _run_cli(capsys, "shrink", source, "-m", "weights-int8", "-q")
    assert code == 1
    assert out == ""
    assert _error_lines(err) == [
        f"Error: {target} already exists. Choose another output path with -o, or pass --force to replace it."
    ]
    assert target.read_bytes() == b"an older output"

    code, _, err = _run_cli(capsys, "shrink", source, "-m", "weights-int8", "-q", "--force")
    assert code == 0, err
    assert target.read_bytes() != b"an older output"
    assert shrinkray.load(target).file_bytes < source.stat().st_size


@pytest.mark.parametrize("force", [False, True], ids=["plain", "with-force"])
def test_output_equal_to_the_input_is_refused(work, capsys, force):
    source = _copy("mlp", work)
    before = _sha(source)
    for spelling in (str(source), "mlp.onnx", "./sub/../mlp.onnx"):
        (work / "sub").mkdir(exist_ok=True)
        args = ["shrink", source, "-m", "weights-int8", "-q", "-o", spelling] + (["--force"] if force else [])
        code, _, err = _run_cli(capsys, *args)
        assert code == 1, spelling
        assert len(_error_lines(err)) == 1 and "Refusing to write" in err and "input model" in err
        assert _sha(source) == before


def test_output_symlink_to_the_input_is_refused(work, capsys):
    source = _copy("mlp", work)
    before = _sha(source)
    (work / "link.onnx").symlink_to(source)
    code, _, err = _run_cli(capsys, "shrink", source, "-m", "float16", "-q", "-o", "link.onnx", "--force")
    assert code == 1
    assert "Refusing to write" in err
    assert _sha(source) == before


@pytest.mark.slow  # shrinks in a capped worker interpreter (shrinkray.runs.sandbox): about a second each
def test_output_folder_must_exist(work, capsys):
    source = _copy("mlp", work)
    code, _, err = _run_cli(capsys, "shrink", source, "-m", "float16", "-q", "-o", work / "nowhere" / "x.onnx")
    assert code == 1
    assert len(_error_lines(err)) == 1 and "does not exist" in err
    assert not (work / "nowhere").exists()


# ------------------------------------------------------------------ shrink: method options


def _shrink_json(capsys, work: Path, method: str, *flags: str) -> dict:
    source = work / "mlp.onnx"
    if not source.exists():
        _copy("mlp", work)
    output = work / f"out-{len(list(work.iterdir()))}.onnx"
    code, out, err = _run_cli(capsys, "shrink", source, "-m", method, "-q", "--json", "-o", output, *flags)
    assert code == 0, err
    record = json.loads(out)  # stdout holds only the JSON record
    assert record["method"] == method
    assert record["output"] == str(output)
    assert record["output_bytes"] == output.stat().st_size
    assert record["input_bytes"] == source.stat().st_size
    assert record["tensors_changed"] == len(record["changes"])
    return record


@pytest.mark.slow  # shrinks in a capped worker interpreter (shrinkray.runs.sandbox): about a second each
def test_palettize_flags_reach_the_method(work, capsys):
    record = _shrink_json(capsys, work, "palettize", "--levels", "16", "--algorithm", "linear")
    assert record["options"]["levels"] == 16  # coerced from the flag's string
    assert record["options"]["algorithm"] == "linear"
    assert record["warnings"], "16 linear levels on outlier-heavy weights must warn"
    assert len(record["changes"]) == 3 and all(int(c["encoding"].split()[0]) <= 16 for c in record["changes"])


@pytest.mark.slow  # shrinks in a capped worker interpreter (shrinkray.runs.sandbox): about a second each
def test_weights_int8_flags_reach_the_method(work, capsys):
    record = _shrink_json(
        capsys, work, "weights-int8", "--granularity", "per-tensor", "--no-symmetric", "--exclude", "fc2*"
    )
    options = record["options"]
    assert options["granularity"] == "per-tensor"
    assert options["symmetric"] is False
    assert options["exclude"] == ["fc2*"]
    assert {c["name"] for c in record["changes"]} == {"fc1.weight", "fc3.weight"}
    assert all(c["encoding"] == "uint8 asymmetric per-tensor" for c in record["changes"])

    record = _shrink_json(capsys, work, "weights-int8", "--symmetric", "--include", "fc1*,fc2*", "--min-elements", "1")
    assert record["options"]["symmetric"] is True
    assert record["options"]["include"] == ["fc1*", "fc2*"]
    assert record["options"]["min_elements"] == 1
    assert {c["name"] for c in record["changes"]} == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    assert all(c["encoding"].startswith("int8 symmetric") for c in record["changes"])


@pytest.mark.slow
def test_dynamic_int8_per_channel_flag_reaches_the_method(work, capsys):
    record = _shrink_json(capsys, work, "dynamic-int8", "--per-channel")
    assert record["options"]["per_channel"] is True
    assert any("per-channel" in c["encoding"] for c in record["changes"])
    plain = _shrink_json(capsys, work, "dynamic-int8")
    assert plain["options"]["per_channel"] is False
    assert plain["changes"] and all("per-tensor" in c["encoding"] for c in plain["changes"])


@pytest.mark.slow  # shrinks in a capped worker interpreter (shrinkray.runs.sandbox): about a second each
def test_float16_flags_reach_the_method(work, capsys):
    record = _shrink_json(capsys, work, "float16", "--min-elements", "100000")
    assert record["options"]["min_elements"] == 100000
    assert [c["name"] for c in record["changes"]] == ["fc2.weight"]


@pytest.mark.parametrize(
    "method, flags, message",
    [
        ("float16", ["--levels", "16"], "The float16 method has no option --levels"),
        ("dynamic-int8", ["--exclude", "fc*"], "The dynamic-int8 method has no option --exclude"),
        ("weights-int8", ["--per-channel"], "The weights-int8 method has no option --per-channel"),
        ("palettize", ["--levels", "1"], "--levels must be at least 2"),
        ("palettize", ["--levels", "70000"], "--levels must be at most 65536"),
        ("weights-int8", ["--granularity", "bogus"], "--granularity must be one of per-channel, per-tensor"),
        ("weights-int8", ["--min-elements", "abc"], "--min-elements expects an int"),
    ],
)
@pytest.mark.slow  # shrinks in a capped worker interpreter (shrinkray.runs.sandbox): about a second each
def test_option_errors_are_one_clear_line_and_write_nothing(work, capsys, method, flags, message):
    source = _copy("mlp", work)
    code, out, err = _run_cli(capsys, "shrink", source, "-m", method, "-q", *flags)
    assert code == 1
    assert out == ""
    lines = _error_lines(err)
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0]
    assert sorted(p.name for p in work.iterdir()) == ["mlp.onnx"]


def test_unknown_method_is_an_argparse_error(work, capsys):
    source = _copy("mlp", work)
    with pytest.raises(SystemExit) as info:
        cli.main(["shrink", str(source), "--method", "int4"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice" in err and "weights-int8" in err


# ------------------------------------------------------------------ shrink: default paths


def test_shrink_without_arguments_and_without_artifacts(work, capsys):
    code, out, err = _run_cli(capsys, "shrink")
    assert code == 1
    assert out == ""
    assert err.strip() == MISSING_DEFAULT
    assert list(work.iterdir()) == []


@pytest.mark.slow
def test_shrink_without_arguments_uses_artifacts_model(work, capsys):
    (work / "artifacts").mkdir()
    source = _copy("mlp", work / "artifacts", "model.onnx")
    before = _sha(source)
    code, out, err = _run_cli(capsys, "shrink")
    assert code == 0, err
    target = work / "artifacts" / "model.int8.onnx"
    assert target.exists()
    assert "written to artifacts/model.int8.onnx" in out
    assert "dynamic-int8" in out  # the default method
    assert _sha(source) == before
    ops = {n.op_type for n in shrinkray.load(target).model.graph.node}
    assert "DynamicQuantizeLinear" in ops
    assert target.stat().st_size < 0.35 * source.stat().st_size

    code, _, err = _run_cli(capsys, "shrink")
    assert code == 1 and "already exists" in err


# ------------------------------------------------------------------ bad input files


def _bad_file(kind: str, folder: Path) -> Path:
    path = folder / f"{kind}.onnx"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "random":
        path.write_bytes(np.random.default_rng(1234).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    elif kind == "truncated":
        data = sample_path("mlp").read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif kind == "text":
        path.write_text("This is not a model.\nIt is a text file with two lines.\n")
    return path


BAD_KINDS = ["empty", "random", "truncated", "text"]


@pytest.mark.parametrize("command", ["inspect", pytest.param("shrink", marks=pytest.mark.slow)])  # shrink: a worker
@pytest.mark.parametrize("kind", BAD_KINDS)
def test_bad_files_give_one_line_errors(work, capsys, kind, command):
    path = _bad_file(kind, work)
    args = [command, path] + (["-q"] if command == "shrink" else [])
    code, out, err = _run_cli(capsys, *args)
    assert code == 1
    assert out == ""
    lines = _error_lines(err)
    assert len(lines) == 1, err
    assert lines[0].startswith(f"Error: {path}")
    assert "Traceback" not in err
    assert sorted(p.name for p in work.iterdir()) == [path.name]


def test_missing_file_and_folder_give_one_line_errors(work, capsys):
    code, _, err = _run_cli(capsys, "inspect", work / "nope.onnx")
    assert code == 1 and _error_lines(err) == [
        f"Error: Missing {work / 'nope.onnx'}. Check the path, or export the model first."
    ]
    code, _, err = _run_cli(capsys, "inspect", work)
    assert code == 1 and len(_error_lines(err)) == 1 and "a folder without an .onnx model" in err and "Give the path" in err


def test_debug_shows_the_traceback(work, capsys):
    path = _bad_file("empty", work)
    code, _, err = _run_cli(capsys, "--debug", "inspect", path)
    assert code == 1
    assert "Traceback (most recent call last)" in err
    assert "ModelLoadError" in err
    assert err.rstrip().splitlines()[-1].startswith("Error: ")


def test_unexpected_errors_are_reported_as_bugs_without_traceback(work, capsys, monkeypatch):
    def explode(*_args, **_kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(cli, "inspect_model", explode)
    path = _copy("mlp", work)
    code, _, err = _run_cli(capsys, "inspect", path)
    assert code == 3
    assert _error_lines(err) == [
        "Error: unexpected RuntimeError: boom. This is a bug in shrinkray; rerun with --debug and report the traceback."
    ]
    code, _, err = _run_cli(capsys, "--debug", "inspect", path)
    assert code == 3 and "Traceback" in err and "RuntimeError: boom" in err


# ------------------------------------------------------------------ methods


def test_methods_lists_all_four_with_their_options(capsys):
    code, out, _ = _run_cli(capsys, "methods")
    assert code == 0
    listed = [line.split()[0] for line in out.splitlines() if line and not line.startswith(" ")]
    assert listed == METHODS
    for flag in ("--levels", "--algorithm", "--granularity", "--symmetric", "--form", "--per-channel", "--mode"):
        assert re.search(rf"^    {flag}\s", out, re.MULTILINE), flag


# ------------------------------------------------------------------ real subprocesses (slow tier: each starts Python)


@pytest.mark.slow
def test_subprocess_shrink_succeeds_without_traceback(work):
    source = _copy("mlp", work)
    result = _subprocess(["shrink", "mlp.onnx", "--method", "weights-int8"], work)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "written to mlp.weights-int8.onnx" in result.stdout
    assert (work / "mlp.weights-int8.onnx").stat().st_size < source.stat().st_size

    again = _subprocess(["shrink", "mlp.onnx", "--method", "weights-int8"], work)
    assert again.returncode == 1
    assert "already exists" in again.stderr and "Traceback" not in again.stderr


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["truncated", "text"])
def test_subprocess_bad_file_exits_1_with_one_line(work, kind):
    path = _bad_file(kind, work)
    result = _subprocess(["shrink", path.name, "-q"], work)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = _error_lines(result.stderr)
    assert len(lines) == 1 and lines[0].startswith(f"Error: {path.name} is not a readable ONNX model")


@pytest.mark.slow
def test_subprocess_missing_default_model(work):
    result = _subprocess(["shrink"], work)
    assert result.returncode == 1
    assert result.stderr.strip() == MISSING_DEFAULT
    assert result.stdout == ""


@pytest.mark.slow
def test_subprocess_debug_shows_traceback(work):
    _bad_file("empty", work)
    result = _subprocess(["--debug", "inspect", "empty.onnx"], work)
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr


@pytest.mark.slow
def test_console_script_runs(work):
    # `pip install -r requirements-dev.txt` installs the package (-e .) and with it the console script.
    installed = Path(sysconfig.get_path("scripts")) / ("shrinkray.exe" if os.name == "nt" else "shrinkray")
    script = str(installed) if installed.exists() else shutil.which("shrinkray")
    assert script, f"the shrinkray console script is not installed ({installed} missing, not on PATH)"
    result = subprocess.run([script, "methods"], cwd=work, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines() if line and not line[0].isspace()] == METHODS

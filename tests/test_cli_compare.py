"""`shrinkray compare` on every sample model, through the real command line entry point."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from helpers import SAMPLE_NAMES, sample_path

from shrinkray import cli
from shrinkray.measure.parity import RELATIVE_PROFILE
from shrinkray.methods import all_methods

FAST = ["--runs", "3", "--latency-budget", "1", "--brotli-quality", "5", "--culprit-budget", "3", "--quiet"]


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_compare_every_sample(name, tmp_path, capsys):
    out = tmp_path / "r.json"
    extra = [] if name == "mlp" else ["--no-latency"]
    code = cli.main(["compare", str(sample_path(name)), *FAST, *extra, "--json", str(out), "--csv", str(tmp_path / "r.csv")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Traceback" not in captured.err
    report = json.loads(out.read_text())
    keys = [v["key"] for v in report["variants"]]
    assert keys == ["original", *(spec.name for spec in all_methods() if spec.in_default_set)]
    assert keys == ["original", "dynamic-int8", "weights-int8", "weights-int4", "palettize", "float16"]
    # The original is measured as loaded: its bytes are the file's, for messy (opset 11, Constant-node
    # weights) as for every other sample.
    assert report["variants"][0]["sizes"]["raw"] == sample_path(name).stat().st_size
    for variant in report["variants"]:
        assert variant["error"] is None, variant["error"]  # every method handles every sample
        assert variant["sizes"]["brotli_quality"] == 5
        parity = variant["parity"]
        assert parity["outputs"]
        assert parity["passed"] is all(o["passed"] for o in parity["outputs"]), parity
    verdicts = {v["key"]: v["parity"]["passed"] for v in report["variants"]}
    assert verdicts["original"] is True  # against itself
    assert verdicts["float16"] is True  # near-lossless on every sample (cosine > 0.9999)
    rows = list(csv.DictReader(io.StringIO((tmp_path / "r.csv").read_text())))
    assert [r["key"] for r in rows] == keys
    for key in keys:
        assert key in captured.out  # the terminal table names every variant
    if name == "mlp":
        assert report["variants"][0]["latency"], "latency measured when not disabled"
    if name == "tree":
        assert "no float weight tensors large enough" in captured.out


def test_compare_with_method_options_and_reports(tmp_path, capsys):
    html = tmp_path / "r.html"
    code = cli.main(["compare", str(sample_path("cnn")), *FAST, "--no-latency",
                     "--methods", "palettize:levels=16,palettize:levels=256", "--html", str(html)])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "palettize levels=16" in out and "palettize levels=256" in out
    assert html.read_text().count("palettize levels=16") >= 1


def test_compare_writes_the_one_page_with_the_headline_it_prints(tmp_path, capsys):
    page = tmp_path / "send.html"
    code = cli.main(["compare", str(sample_path("cnn")), *FAST, "--no-latency", "--methods", "weights-int8,float16",
                     "--downloads", "250000", "--provider", "s3", "--one-page", str(page)])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    headline = out.splitlines()[0]
    assert "250,000 downloads a month" in headline and headline.startswith("cnn with ")
    text = page.read_text()
    assert "<script" not in text and "250,000 downloads a month" in text
    assert headline.split(". ", 1)[1] in text  # the verdict sentence


def test_compare_writes_the_headline_card_png(tmp_path, capsys):
    from PIL import Image

    card = tmp_path / "card.png"
    code = cli.main(["compare", str(sample_path("mlp")), *FAST, "--no-latency", "--methods", "weights-int8,float16",
                     "--card-png", str(card)])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    with Image.open(card) as image:
        assert image.format == "PNG" and image.size == (1200, 630)


def test_compare_refuses_a_card_png_path_that_is_the_model_before_working(tmp_path, capsys):
    model = tmp_path / "m.onnx"
    model.write_bytes(sample_path("mlp").read_bytes())
    code = cli.main(["compare", str(model), "--card-png", str(model)])
    assert code == 1 and "Refusing to write a report" in capsys.readouterr().err
    assert model.read_bytes() == sample_path("mlp").read_bytes()
    code = cli.main(["compare", str(model), "--card-png", str(tmp_path / "r.png"), "--one-page", str(tmp_path / "r.png")])
    assert code == 1 and "named for two reports" in capsys.readouterr().err


def test_compare_refuses_a_one_page_path_that_is_the_model(tmp_path, capsys):
    model = tmp_path / "m.onnx"
    model.write_bytes(sample_path("mlp").read_bytes())
    code = cli.main(["compare", str(model), "--one-page", str(model)])
    assert code == 1 and "Refusing to write a report" in capsys.readouterr().err
    assert model.read_bytes() == sample_path("mlp").read_bytes()


def test_compare_refuses_a_report_path_that_is_a_model(tmp_path, capsys):
    code = cli.main(["compare", str(sample_path("mlp")), "--json", str(tmp_path / "x.onnx")])
    assert code == 1
    assert "Refusing to write a report" in capsys.readouterr().err


def test_compare_unknown_method_is_a_clear_error(capsys):
    code = cli.main(["compare", str(sample_path("mlp")), "--methods", "zip-it"])
    assert code == 1
    assert "Unknown method 'zip-it'" in capsys.readouterr().err


# ---------------------------------------------------------------- verdicts from the command line

QUICK = [*FAST, "--no-latency", "--no-culprits", "--methods", "weights-int8,float16"]


def compare_json(args: list[str], tmp_path, capsys) -> tuple[dict, str]:
    out = tmp_path / "r.json"
    code = cli.main(["compare", str(sample_path("mlp")), *QUICK, *args, "--json", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(out.read_text()), captured.out


def parity_of(report: dict, key: str) -> dict:
    return next(v for v in report["variants"] if v["key"] == key)["parity"]


def test_default_verdict_is_relative(tmp_path, capsys):
    report, text = compare_json([], tmp_path, capsys)
    int8 = parity_of(report, "weights-int8")
    assert int8["profile"] == "relative" and int8["passed"] is True
    assert int8["max_abs_error"] > 0.06  # what the absolute profile would fail
    assert [o["kind"] for o in int8["outputs"]] == ["scores", "scores"]
    assert int8["samples"] in (160, 640)  # 40 batches of 4 (and the reserve's 120 when those left it undecided)
    assert report["settings"]["verdict"]["profile"] == "relative"
    assert "Parity verdict: relative profile" in text


def test_verdict_absolute(tmp_path, capsys):
    report, text = compare_json(["--verdict", "absolute"], tmp_path, capsys)
    int8 = parity_of(report, "weights-int8")
    assert int8["profile"] == "absolute" and int8["passed"] is False
    assert int8["decided_by"].startswith("logits (scores): abs error")
    assert parity_of(report, "float16")["passed"] is True
    assert "Parity verdict: absolute profile" in text and "abs error <= 0.06" in text


def test_tolerance_for_every_output_and_for_one(tmp_path, capsys):
    report, text = compare_json(
        ["--tolerance", "max_abs_error=1e-9", "--tolerance", "probs:max_abs_error=1"], tmp_path, capsys
    )
    assert report["settings"]["verdict"]["criteria"] == {"max_abs_error": 1e-9}
    assert report["settings"]["verdict"]["per_output"] == {"probs": {"max_abs_error": 1.0}}
    for key in ("weights-int8", "float16"):
        outputs = {o["name"]: o for o in parity_of(report, key)["outputs"]}
        assert outputs["logits"]["passed"] is False  # nothing passes 1e-9
        probs_checks = {c["criterion"]: c for c in outputs["probs"]["checks"]}
        assert probs_checks["max_abs_error"]["passed"] is True  # its own limit is 1
        assert {c["criterion"]: c["limit"] for c in outputs["probs"]["checks"]}["max_abs_error"] == 1.0
    assert "Every output also: abs error <= 1e-09" in text and "Output probs: abs error <= 1" in text


def test_shorthands_add_criteria_to_the_profile(tmp_path, capsys):
    report, _ = compare_json(["--abs-tol", "1e-9", "--min-cosine", "0.5"], tmp_path, capsys)
    assert report["settings"]["verdict"]["criteria"] == {"max_abs_error": 1e-9, "min_cosine": 0.5}
    int8 = parity_of(report, "weights-int8")
    assert int8["profile"] == "relative" and int8["passed"] is False
    checks = {c["criterion"] for c in int8["outputs"][0]["checks"]}
    assert checks == {*RELATIVE_PROFILE["scores"], "max_abs_error", "min_cosine"}  # the profile's and the shorthands'


def test_output_kind(tmp_path, capsys):
    report, _ = compare_json(["--output-kind", "logits=embedding", "--output-kind", "probs=exact"], tmp_path, capsys)
    outputs = {o["name"]: o for o in parity_of(report, "float16")["outputs"]}
    assert outputs["logits"]["kind"] == "embedding" and outputs["logits"]["kind_reason"] == "set by you"
    assert [c["criterion"] for c in outputs["logits"]["checks"]] == ["min_row_cosine"]
    assert outputs["probs"]["kind"] == "exact" and outputs["probs"]["passed"] is False  # float16 changes bits
    assert outputs["probs"]["mismatch_fraction"] > 0


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--tolerance", "max_speed=2"], "Unknown tolerance 'max_speed'"),
        (["--tolerance", "max_abs_error"], "is not [OUTPUT:]CRITERION=VALUE"),
        (["--tolerance", "max_abs_error=nan"], "must be a finite number"),
        (["--output-kind", "logits=probabilities"], "Unknown output kind 'probabilities'"),
        (["--output-kind", "logits"], "is not OUTPUT=KIND"),
    ],
)
def test_bad_verdict_options_are_one_line_errors(args, problem, capsys, tmp_path):
    out = tmp_path / "r.json"
    code = cli.main(["compare", str(sample_path("mlp")), *QUICK, *args, "--json", str(out)])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("Error: ") and problem in err and err.count("\n") == 1
    assert not out.exists()  # refused before any work


def test_unknown_verdict_profile_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["compare", str(sample_path("mlp")), "--verdict", "lenient"])
    assert info.value.code == 2
    assert "invalid choice: 'lenient'" in capsys.readouterr().err


# ---------------------------------------------------------------- --save-dir


def test_save_dir_writes_every_variant_and_the_json_gives_its_file(tmp_path, capsys):
    import onnx

    model = tmp_path / "in" / "mlp.onnx"
    model.parent.mkdir()
    model.write_bytes(sample_path("mlp").read_bytes())
    before = model.read_bytes()
    out_dir = tmp_path / "variants"  # created when missing
    out = tmp_path / "r.json"
    args = ["compare", str(model), *FAST, "--no-latency", "--no-culprits",
            "--methods", "float16,palettize:levels=16", "--save-dir", str(out_dir), "--json", str(out)]  # fmt: skip
    assert cli.main(args) == 0, capsys.readouterr().err
    report = json.loads(out.read_text())
    files = {v["key"]: v["file"] for v in report["variants"]}
    assert files["original"] is None  # the input is never rewritten
    assert files["float16"] == str(out_dir / "mlp.float16.onnx")
    assert files["palettize levels=16"] == str(out_dir / "mlp.palettize_levels-16.onnx")
    assert sorted(p.name for p in out_dir.iterdir()) == ["mlp.float16.onnx", "mlp.palettize_levels-16.onnx"]
    for key in ("float16", "palettize levels=16"):
        saved = onnx.load(files[key])
        onnx.checker.check_model(saved)
        size = next(v for v in report["variants"] if v["key"] == key)["sizes"]["raw"]
        assert Path(files[key]).stat().st_size == size  # the file is the variant that was measured
    assert model.read_bytes() == before

    # a second run refuses to replace them, before writing anything
    stamps = {p: p.stat().st_mtime_ns for p in out_dir.iterdir()}
    assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert "already exists" in err and "--force" in err
    assert {p: p.stat().st_mtime_ns for p in out_dir.iterdir()} == stamps
    # --force replaces them
    assert cli.main([*args, "--force"]) == 0, capsys.readouterr().err
    assert any(p.stat().st_mtime_ns != stamps[p] for p in out_dir.iterdir())
    assert model.read_bytes() == before


def test_save_dir_next_to_the_input_never_writes_the_input(tmp_path, capsys):
    model = tmp_path / "mlp.onnx"
    model.write_bytes(sample_path("mlp").read_bytes())
    before = model.read_bytes()
    # a variant's file name that is a link to the input: even --force must not write through it
    (tmp_path / "mlp.float16.onnx").symlink_to(model)
    code = cli.main(["compare", str(model), *FAST, "--no-latency", "--no-culprits", "--methods", "float16",
                     "--save-dir", str(tmp_path), "--force"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1
    assert "Refusing to write" in err and "input model" in err
    assert model.read_bytes() == before


def test_save_dir_that_is_a_file_is_refused_before_any_work(tmp_path, capsys):
    target = tmp_path / "taken"
    target.write_text("not a folder")
    code = cli.main(["compare", str(sample_path("mlp")), "--save-dir", str(target)])
    assert code == 1
    assert "is a file, not a folder" in capsys.readouterr().err
    assert target.read_text() == "not a folder"


# ---------------------------------------------------------------- inputs the model refuses


def test_probing_through_the_cli_is_quiet_and_says_what_it_tried(tmp_path, capfd):
    import onnx
    from helpers import framed_audio_model

    path = tmp_path / "vad.onnx"
    onnx.save(framed_audio_model(512), str(path))
    out = tmp_path / "r.json"
    code = cli.main(["compare", str(path), *FAST, "--no-latency", "--methods", "float16", "--json", str(out)])
    captured = capfd.readouterr()
    assert code == 0, captured.err
    assert captured.err == ""  # no ONNX Runtime log lines, no progress (--quiet)
    assert "found by trying other sizes: length 512" in captured.out
    assert "found by trying other sizes: length 512" in json.loads(out.read_text())["input_note"]


def test_a_model_refusing_every_probe_gets_one_line_with_the_flags(tmp_path, capfd):
    import onnx
    from helpers import framed_audio_model

    path = tmp_path / "vad.onnx"
    onnx.save(framed_audio_model(511), str(path))
    code = cli.main(["compare", str(path), *FAST, "--no-latency", "--methods", "float16"])
    err = capfd.readouterr().err
    assert code == 1
    assert err.count("\n") == 1, err  # one line, nothing from ONNX Runtime
    assert err.startswith("Error: The original model could not run on the synthesized inputs (as guessed: ")
    assert "Reshape node: The input tensor cannot be reshaped" in err
    assert "--dim NAME=VALUE" in err and "--range NAME=LOW:HIGH" in err and "--inputs" in err
    # and the flag it names fixes it
    assert cli.main(["compare", str(path), *FAST, "--no-latency", "--methods", "float16", "--dim", "audio:1=1022"]) == 0

"""`shrinkray compare` on every sample model, through the real command line entry point."""

from __future__ import annotations

import csv
import io
import json

import pytest
from helpers import SAMPLE_NAMES, sample_path

from shrinkray import cli

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
    assert keys == ["original", "dynamic-int8", "weights-int8", "palettize", "float16"]
    assert report["variants"][0]["sizes"]["raw"] == sample_path(name).stat().st_size or name == "messy"
    for variant in report["variants"]:
        assert variant["error"] is None or isinstance(variant["error"], str)
        if variant["error"] is None:
            assert variant["sizes"]["brotli_quality"] == 5
            assert variant["parity"]["passed"] in (True, False)
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


def test_compare_refuses_a_report_path_that_is_a_model(tmp_path, capsys):
    code = cli.main(["compare", str(sample_path("mlp")), "--json", str(tmp_path / "x.onnx")])
    assert code == 1
    assert "Refusing to write a report" in capsys.readouterr().err


def test_compare_unknown_method_is_a_clear_error(capsys):
    code = cli.main(["compare", str(sample_path("mlp")), "--methods", "zip-it"])
    assert code == 1
    assert "Unknown method 'zip-it'" in capsys.readouterr().err

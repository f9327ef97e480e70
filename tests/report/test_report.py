"""Reports from real comparisons: strict JSON, Markdown and CSV tables, one offline HTML file, safe writing.

Two comparisons are measured once for the module: the MLP with one method
forced to fail (and latency at three batch sizes), and the tree model, where
nothing changes and latency is off.
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import html
import io
import json
import math
import os
import re
from html.parser import HTMLParser

import pytest
from helpers import sample_path, steady_timings
from plotly.offline import get_plotlyjs

import shrinkray
from shrinkray.errors import MethodError, ShrinkRayError, WriteError
from shrinkray.measure.parity import Check, VerdictSettings
from shrinkray.measure.results import ORIGINAL, CompareSettings, Comparison
from shrinkray.pipeline.compare import compare
from shrinkray.report import charts
from shrinkray.report import formats as report
from shrinkray.verdict.advice import advise, latency_ratio, pareto, recommended

FAST = {"runs": 5, "latency_budget_s": 2, "culprit_budget_s": 5, "brotli_quality": 5, "threads": [1], "culprits": True}
BROKEN = "dynamic-int8"
SCHEMA_KEYS = {
    "schema_version", "generator", "name", "model", "settings", "input_note", "latency_note", "sizes_note", "delivery",
    "variants", "advice", "pareto", "recommended", "timings", "headline",
}  # fmt: skip
VARIANT_KEYS = {
    "key", "is_original", "method", "options", "resolved_options", "ok", "error", "file", "sizes", "saving_vs_original",
    "parity", "verdict", "speed", "latency", "latency_ratio", "changes", "warnings", "notes", "culprits", "what_changes",
}  # fmt: skip


@pytest.fixture(scope="module")
def mlp() -> Comparison:
    import shrinkray.pipeline.compare as compare_module

    real = compare_module.shrink

    def shrink(source, method, **options):
        if method == BROKEN:
            raise MethodError("the quantizer crashed on this graph", "Try another method")
        return real(source, method, **options)

    methods = [("weights-int8", {}), ("float16", {}), ("palettize", {"levels": 2, "algorithm": "linear"}), (BROKEN, {})]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compare_module, "shrink", shrink)
        # the absolute profile (max abs 0.06): weights-int8 fails on the MLP and gets culprits
        settings = CompareSettings(methods=methods, verdict=VerdictSettings(profile="absolute"), **FAST)
        return steady_timings(compare(shrinkray.load(sample_path("mlp")), settings))


@pytest.fixture(scope="module")
def tree() -> Comparison:
    return compare(shrinkray.load(sample_path("tree")), CompareSettings(**(FAST | {"latency": False})))


@pytest.fixture(scope="module")
def evil(mlp) -> Comparison:
    """The MLP comparison with a variant key and output text full of Markdown/HTML/CSV syntax."""
    c = copy.deepcopy(mlp)
    result = c.get("float16")
    result.key = 'f16 | <script>alert("x")</script> & `tick`'
    result.warnings = ["line one\nline two | <b>bold</b>"]
    return c


def without_bundle(page: str) -> str:
    return page.replace(get_plotlyjs(), "")


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def html_tags(page: str) -> list[tuple[str, dict[str, str | None]]]:
    """Every element of the page with its attributes, as a browser's tokenizer sees them."""
    parser = _Tags()
    parser.feed(page)
    parser.close()
    return parser.tags


# ---------------------------------------------------------------- JSON


def test_json_is_strict_and_has_the_schema(mlp):
    data = report.to_json(mlp)
    text = json.dumps(data, allow_nan=False)  # raises on NaN or infinity
    assert json.loads(text) == data
    assert set(data) == SCHEMA_KEYS
    assert data["schema_version"] == 1
    assert data["recommended"] == recommended(mlp).key
    assert [v["key"] for v in data["variants"]] == [r.key for r in mlp.all]
    assert data["variants"][0]["is_original"] is True
    assert all(set(v) == VARIANT_KEYS for v in data["variants"])
    assert [a["text"] for a in data["advice"]] == [a.text for a in advise(mlp)]
    assert [p["key"] for p in data["pareto"]] == [p.key for p in pareto(mlp)]
    assert data["model"]["name"] == "mlp" and data["model"]["file_bytes"] == mlp.summary.file_bytes
    assert data["input_note"] == mlp.input_note and data["latency_note"] == mlp.latency_note
    assert data["settings"]["methods"][0] == ["weights-int8", {}]


def test_json_variant_details_match_the_comparison(mlp):
    data = {v["key"]: v for v in report.to_json(mlp)["variants"]}
    for result in mlp.variants:
        entry = data[result.key]
        if not result.ok:
            assert entry["ok"] is False and "quantizer crashed" in entry["error"]
            assert entry["sizes"] is None and entry["parity"] is None and entry["latency"] == []
            continue
        assert entry["sizes"]["brotli"] == result.sizes.brotli and entry["sizes"]["brotli_quality"] == 5
        assert entry["parity"]["passed"] == result.parity.passed
        assert entry["parity"]["max_abs_error"] == result.parity.max_abs_error
        assert entry["parity"]["profile"] == "absolute"
        assert entry["parity"]["decided_by"] == result.parity.decided_by
        assert entry["parity"]["severity"] == pytest.approx(result.parity.severity)
        assert entry["parity"]["samples"] == result.parity.samples >= 4
        assert entry["file"] is None  # not written anywhere (compare --save-dir sets it)
        outputs = entry["parity"]["outputs"]
        assert [o["name"] for o in outputs] == ["logits", "probs"]
        assert [o["kind"] for o in outputs] == ["scores", "scores"]
        for o, mine in zip(outputs, result.parity.outputs, strict=True):
            assert o["measures"]["abs_error"] == mine.max_abs_error
            assert [c["criterion"] for c in o["checks"]] == ["max_abs_error", "max_mean_abs_error", "min_cosine"]
        assert all("sample_reference" not in o and "sample_variant" not in o for o in outputs)
        assert [(s["threads"], s["batch"]) for s in entry["latency"]] == [(s.threads, s.batch) for s in result.latency]
        assert entry["latency"][0]["throughput_per_s"] == pytest.approx(result.latency[0].throughput)
        assert entry["latency_ratio"] == pytest.approx(latency_ratio(mlp, result))
        changes = entry["changes"]
        assert changes["tensors_changed"] == result.record["tensors_changed"] == len(changes["tensors"])
        assert changes["weight_bytes_before"] == result.record["weight_bytes_before"]
        assert changes["weight_bytes_after"] == result.record["weight_bytes_after"]
        assert [x["tensor"] for x in entry["culprits"]] == [x.tensor for x in result.culprits]
        saving = entry["saving_vs_original"]["brotli"]
        assert saving == pytest.approx(1 - result.sizes.brotli / mlp.original.sizes.brotli)
    assert data["weights-int8"]["culprits"], "weights-int8 fails parity on the MLP, so it has culprits"


def test_json_turns_nan_and_infinity_into_null(mlp):
    c = copy.deepcopy(mlp)
    result = c.get("weights-int8")
    first = result.parity.outputs[0]
    result.parity.outputs[0] = dataclasses.replace(
        first, measures={**first.measures, "abs_error": math.inf, "mean_abs_error": math.nan},
        checks=[Check("max_abs_error", math.inf, 0.06, False, math.inf)], passed=False,
        reason="output missing from the variant",
    )  # fmt: skip
    data = report.to_json(c)
    json.dumps(data, allow_nan=False)
    entry = next(v for v in data["variants"] if v["key"] == "weights-int8")
    output = entry["parity"]["outputs"][0]
    assert output["measures"]["abs_error"] is None
    assert output["measures"]["mean_abs_error"] is None
    assert output["checks"][0]["value"] is None and output["checks"][0]["severity"] is None
    assert output["severity"] is None
    assert entry["parity"]["max_abs_error"] is None
    assert entry["parity"]["severity"] is None
    assert json.loads(report.to_json_text(c)) == data


def test_plain_converts_what_json_cannot_hold():
    import numpy as np

    value = {1: (np.float32(1.5), np.int64(3), np.bool_(True)), "x": [math.nan, -math.inf], "p": os.sep}
    assert report.plain(value) == {"1": [1.5, 3, True], "x": [None, None], "p": os.sep}


# ---------------------------------------------------------------- Markdown and text


def summary_rows(markdown: str) -> list[str]:
    section = markdown.split("## Summary", 1)[1].split("## Advice", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| `")]


def test_markdown_has_a_row_per_variant_advice_and_details(mlp):
    md = report.to_markdown(mlp)
    assert md.startswith("# Shrink Ray report: mlp")
    assert mlp.input_note in md
    rows = summary_rows(md)
    assert len(rows) == len(mlp.all)
    for row, result in zip(rows, mlp.all, strict=True):
        assert row.startswith(f"| `{result.key}` |")
    assert "| brotli (q5) |" in md and "Saving vs original (brotli)" in md and "Worst cosine" in md
    header = md.split("## Summary", 1)[1].splitlines()[2]
    assert header.count("|") == rows[0].count("|")  # same number of cells
    f16 = next(r for r in rows if r.startswith("| `float16`"))
    saving = 1 - mlp.get("float16").sizes.brotli / mlp.original.sizes.brotli
    assert f"| {saving:.1%} | pass |" in f16
    advice = md.split("## Advice", 1)[1].split("## Variants", 1)[0]
    assert len([line for line in advice.splitlines() if line.startswith("- **")]) == len(advise(mlp))
    assert "**Could not be used**: the quantizer crashed" in md
    culprits = next(r for r in mlp.variants if r.culprits).culprits
    assert all(f"| `{x.tensor}` |" in md for x in culprits)


def test_markdown_escapes_table_syntax(evil):
    md = report.to_markdown(evil)
    rows = summary_rows(md)
    assert len(rows) == len(evil.all)
    header_cells = md.split("## Summary", 1)[1].splitlines()[2].count("|")
    for row in rows:
        assert len(re.findall(r"(?<!\\)\|", row)) == header_cells  # escaped pipes do not split cells
    assert "line one line two" in md  # one line per bullet


def test_text_report_for_the_terminal(mlp):
    text = report.to_text(mlp)
    for result in mlp.all:
        assert result.key in text
    assert advise(mlp)[0].text in text
    assert "brotli (q5)" in text


# ---------------------------------------------------------------- CSV


def parse_csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def number(cell: str) -> float | None:
    return None if cell == "" else float(cell)


def test_csv_has_one_row_per_variant_with_numbers_that_match(mlp):
    rows = parse_csv(report.to_csv(mlp))
    assert [r["key"] for r in rows] == [r.key for r in mlp.all]
    columns = list(rows[0])
    assert columns[: len(report.FIXED_COLUMNS)] == report.FIXED_COLUMNS
    batches = sorted({s.batch for s in mlp.original.latency})
    for b in batches:
        assert {f"latency_median_ms_t1_b{b}", f"latency_p90_ms_t1_b{b}", f"throughput_per_s_t1_b{b}"} <= set(columns)
    numeric = [c for c in columns if c.endswith(("_bytes", "_percent", "_error", "_ms_t1_b1", "_quality"))]
    numeric += ["worst_cosine", "tensors_changed", "latency_ratio_vs_original"]
    for row, result in zip(rows, mlp.all, strict=True):
        for column in numeric:
            if row[column] != "":
                float(row[column])  # every numeric cell parses
        if not result.ok:
            assert row["ok"] == "false" and "quantizer crashed" in row["error"]
            assert row["brotli_bytes"] == row["max_abs_error"] == row["latency_median_ms_t1_b1"] == ""
            continue
        assert row["ok"] == "true"
        assert int(row["raw_bytes"]) == result.sizes.raw
        assert int(row["gzip_bytes"]) == result.sizes.gzip
        assert int(row["brotli_bytes"]) == result.sizes.brotli
        assert int(row["brotli_quality"]) == 5
        assert row["zstd_bytes"] == ""  # not measured
        assert number(row["max_abs_error"]) == result.parity.max_abs_error
        assert number(row["worst_cosine"]) == result.parity.worst_cosine
        assert row["parity_passed"] == ("true" if result.parity.passed else "false")
        for b in batches:
            stats = result.latency_at(1, b)
            assert number(row[f"latency_median_ms_t1_b{b}"]) == stats.median_ms
            assert number(row[f"latency_p90_ms_t1_b{b}"]) == stats.p90_ms
            assert number(row[f"throughput_per_s_t1_b{b}"]) == pytest.approx(stats.throughput)
        saving = number(row["brotli_saving_percent"])
        assert saving == pytest.approx(100 * (1 - result.sizes.brotli / mlp.original.sizes.brotli))
    assert json.loads(rows[3]["options_json"]) == {"algorithm": "linear", "levels": 2}


def test_csv_survives_hostile_text(evil):
    rows = parse_csv(report.to_csv(evil))
    assert len(rows) == len(evil.all)
    assert any(r["key"].startswith("f16 | <script>") for r in rows)


def test_csv_without_latency_has_no_latency_columns(tree):
    rows = parse_csv(report.to_csv(tree))
    assert len(rows) == len(tree.all)
    assert not any(c.startswith(("latency_median", "throughput")) for c in rows[0])
    assert all(r["tensors_changed"] == "0" for r in rows)


# ---------------------------------------------------------------- HTML


@pytest.mark.slow  # parses the 4.6 MB page with the plotly bundle inlined
def test_html_is_one_offline_file_with_every_variant_and_chart(mlp):
    page = report.to_html(mlp)
    bundle = get_plotlyjs()
    assert page.count(bundle) == 1
    assert page.count('<script type="text/javascript">') == 1  # the bundle, inlined once
    rest = without_bundle(page)
    assert "http://" not in rest and "https://" not in rest and "cdn" not in rest.lower()
    tags = html_tags(page)  # real elements: JavaScript strings inside the bundle are not attributes
    assert not [(t, a) for t, a in tags if "src" in a or "href" in a]
    scripts = [a for t, a in tags if t == "script"]
    assert len(scripts) == 1 + len(charts.all_figures(mlp)) + 1  # the bundle, one per chart, the JSON data
    assert {t for t, _ in tags}.isdisjoint({"link", "img", "iframe", "object", "embed", "base"})
    for result in mlp.all:
        assert f"<code>{result.key}</code>" in rest
    assert rest.count('class="chart"') == len(charts.all_figures(mlp))
    assert rest.count("Plotly.newPlot(") == len(charts.all_figures(mlp))
    for item in advise(mlp):
        assert html.escape(item.text) in rest
    embedded = re.search(r'<script type="application/json" id="shrinkray-report">(.*?)</script>', rest, re.DOTALL)
    assert json.loads(embedded.group(1))["recommended"] == recommended(mlp).key
    assert "quantizer crashed" in rest


@pytest.mark.slow  # renders the HTML report with the 4.6 MB plotly bundle inlined
def test_html_escapes_names_and_text(evil):
    rest = without_bundle(report.to_html(evil))
    assert "<script>alert" not in rest
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; `tick`" in rest
    assert "&lt;b&gt;bold&lt;/b&gt;" in rest
    embedded = re.search(r'<script type="application/json" id="shrinkray-report">(.*?)</script>', rest, re.DOTALL)
    keys = [v["key"] for v in json.loads(embedded.group(1))["variants"]]
    assert 'f16 | <script>alert("x")</script> & `tick`' in keys


def test_tree_reports_where_nothing_changes(tree):
    data = report.to_json(tree)
    json.dumps(data, allow_nan=False)
    assert data["recommended"] is None
    assert all(v["changes"]["tensors_changed"] == 0 for v in data["variants"])
    assert all(v["latency"] == [] for v in data["variants"])
    md = report.to_markdown(tree)
    assert len(summary_rows(md)) == len(tree.all)
    assert "Latency: not measured" in md
    page = report.to_html(tree)
    assert page.count(get_plotlyjs()) == 1
    assert "Latency was not measured" in page


# ---------------------------------------------------------------- writing


@pytest.mark.slow  # writes the HTML report with the 4.6 MB plotly bundle inlined
def test_write_reports_writes_every_format_atomically(mlp, tmp_path):
    paths = {
        "json_path": tmp_path / "r.json",
        "markdown_path": tmp_path / "r.md",
        "csv_path": tmp_path / "r.csv",
        "html_path": tmp_path / "r.html",
    }
    (tmp_path / "r.md").write_text("old report")  # named explicitly: replaced
    written = report.write_reports(mlp, **paths)
    assert written == list(paths.values())
    assert json.loads(paths["json_path"].read_text()) == report.to_json(mlp)
    assert paths["markdown_path"].read_text() == report.to_markdown(mlp)
    assert paths["csv_path"].read_bytes().decode() == report.to_csv(mlp)
    assert paths["html_path"].read_text().count(get_plotlyjs()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv", "r.html", "r.json", "r.md"]  # no temp files
    umask = os.umask(0o022)
    os.umask(umask)
    assert all(p.stat().st_mode & 0o777 == 0o666 & ~umask for p in written)


def test_write_reports_with_no_paths_writes_nothing(mlp, tmp_path):
    assert report.write_reports(mlp) == []
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["model.onnx", "MODEL.ONNX", "model.onnx.data"])
def test_write_reports_never_writes_a_model_file(mlp, tmp_path, name):
    model = tmp_path / name
    model.write_bytes(b"model bytes")
    with pytest.raises(ShrinkRayError, match="Refusing"):
        report.write_reports(mlp, json_path=tmp_path / "ok.json", html_path=model)
    assert model.read_bytes() == b"model bytes"
    assert not (tmp_path / "ok.json").exists()  # checked before anything is written


def test_write_reports_refuses_a_link_to_a_model(mlp, tmp_path):
    model = tmp_path / "model.onnx"
    model.write_bytes(b"model bytes")
    link = tmp_path / "report.html"
    link.symlink_to(model)
    with pytest.raises(ShrinkRayError, match="Refusing"):
        report.write_reports(mlp, html_path=link)
    assert model.read_bytes() == b"model bytes"


def test_write_reports_refuses_folders_missing_folders_and_one_path_twice(mlp, tmp_path):
    with pytest.raises(ShrinkRayError, match="folder"):
        report.write_reports(mlp, json_path=tmp_path)
    with pytest.raises(ShrinkRayError, match="does not exist"):
        report.write_reports(mlp, json_path=tmp_path / "missing" / "r.json")
    with pytest.raises(ShrinkRayError, match="two reports"):
        report.write_reports(mlp, json_path=tmp_path / "r.txt", markdown_path=tmp_path / "r.txt")
    assert list(tmp_path.iterdir()) == []


def test_failed_write_leaves_no_temp_file(mlp, tmp_path, monkeypatch):
    target = tmp_path / "r.json"
    target.write_text("previous")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(WriteError, match=r"Could not write .*r\.json \(disk full\)\. Nothing was written"):
        report.write_reports(mlp, json_path=target)
    assert target.read_text() == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_original_row_is_the_baseline(mlp):
    header, rows = report.summary_table(mlp)
    original = rows[0]
    assert original[0] == ORIGINAL
    assert original[header.index("Saving vs original (brotli)")] == "—"
    assert original[header.index("Parity")] == "pass"


BROWSER_COLUMNS = ["browser_backend", "browser_median_ms", "browser_latency_ratio_vs_original", "browser_parity_passed"]


def test_browser_measurements_kept_with_a_run_reach_the_csv_and_json(mlp):
    """The app keeps ONNX Runtime Web runs with the comparison: per variant its backend, median and ratio to the
    original's median in the same browser (empty where not measured), as the JSON, Markdown and HTML carry them."""
    from shrinkray.measure.browser import BrowserRun

    passed = mlp.get("float16").parity  # a verdict in the browser is the same kind of object as the server's
    said = "true" if passed.passed else "false"
    runs = [BrowserRun(key="original", backend="wasm", median_ms=2.0, runs=30, parity=passed),
            BrowserRun(key="weights-int8", backend="wasm", median_ms=3.0, runs=30, parity=passed),
            BrowserRun(key="float16", backend="wasm", error="com.microsoft:X(-1) is not a registered function/op",
                       stage="session")]  # fmt: skip  (palettize and the broken method: not run in the browser)
    measured = dataclasses.replace(mlp, browser=runs)
    rows = {row["key"]: row for row in parse_csv(report.to_csv(measured))}
    header = next(csv.reader(io.StringIO(report.to_csv(measured))))
    assert header[-len(BROWSER_COLUMNS):] == BROWSER_COLUMNS == report.csv_columns(measured)[-len(BROWSER_COLUMNS):]
    assert [rows["original"][c] for c in BROWSER_COLUMNS] == ["wasm", "2.0", "", said]
    assert [rows["weights-int8"][c] for c in BROWSER_COLUMNS] == ["wasm", "3.0", "1.5", said]
    assert [rows["float16"][c] for c in BROWSER_COLUMNS] == ["wasm", "", "", ""]  # did not load: nothing measured
    not_run = [key for key in rows if key not in ("original", "weights-int8", "float16")]
    assert len(not_run) == 2  # palettize and the broken method
    for key in not_run:
        assert [rows[key][c] for c in BROWSER_COLUMNS] == ["", "", "", ""]
    assert not set(BROWSER_COLUMNS) & set(report.csv_columns(mlp))  # no browser runs: no browser columns

    data = report.to_json(measured)
    ratios = {run["key"]: run["median_ratio_vs_original"] for run in data["browser"]["runs"]}
    assert ratios == {"original": None, "weights-int8": 1.5, "float16": None}
    assert {run["key"]: run["backend"] for run in data["browser"]["runs"]}["weights-int8"] == "wasm"
    assert "In your browser" in report.to_markdown(measured) and "<h2>In your browser</h2>" in report.to_html(measured)


def test_every_report_says_when_gzip_sizes_were_estimated(mlp):
    assert report.to_json(mlp)["sizes_note"] == ""  # small files: every byte compressed
    assert "Sizes:" not in report.to_text(mlp)
    estimated = copy.copy(mlp)
    estimated.variants = [dataclasses.replace(r, sizes=dataclasses.replace(r.sizes, gzip_margin=r.sizes.gzip // 400,
                                                                           gzip_share=0.06))
                          for r in mlp.variants if r.sizes is not None]  # fmt: skip
    line = "gzip -9 sizes of files over 32 MiB are estimated from 256 KiB blocks sampled across each file (6.0% of"
    assert f"Sizes: {line}" in report.to_text(estimated)
    assert "±0.25% with 95% confidence" in report.to_text(estimated)
    assert line in report.to_markdown(estimated)
    assert html.escape(line) in report.to_html(estimated)
    data = report.to_json(estimated)
    assert data["sizes_note"].startswith(line)
    assert data["variants"][1]["sizes"]["gzip_margin"] > 0 and data["variants"][1]["sizes"]["gzip_share"] == 0.06

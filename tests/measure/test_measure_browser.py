"""The in-browser runs' engine side: tensors to and from JavaScript, and judging the browser's outputs."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from shrinkray.measure.browser import (
    BrowserInputError,
    BrowserInputs,
    BrowserRun,
    decode_tensor,
    encode_tensor,
    judge,
    judge_all,
)
from shrinkray.measure.parity import OutputKind, VerdictSettings
from shrinkray.verdict.browser import advice_lines

DTYPES = ["float32", "float64", "float16", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "bool"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_round_trips_exactly(dtype):
    rng = np.random.default_rng(1)
    value = (rng.normal(0, 100, (2, 3, 4)) if dtype.startswith("float") else rng.integers(0, 100, (2, 3, 4))).astype(dtype)
    encoded = encode_tensor("x", value)
    assert encoded["name"] == "x" and encoded["dims"] == [2, 3, 4]
    back = decode_tensor(encoded)
    assert back.dtype == value.dtype and back.shape == value.shape
    assert np.array_equal(back, value)


def test_bytes_are_little_endian_as_javascript_typed_arrays_read_them():
    encoded = encode_tensor("x", np.array([1], dtype=">i4"))  # a big-endian array still travels little-endian
    assert base64.b64decode(encoded["data"]) == b"\x01\x00\x00\x00" and encoded["type"] == "int32"


def test_scalars_empty_tensors_and_strings():
    assert decode_tensor(encode_tensor("s", np.array(3.5, np.float32))).shape == ()
    assert decode_tensor(encode_tensor("e", np.zeros((0, 4), np.float32))).shape == (0, 4)
    words = np.array([["a", "bé"], ["c", ""]], dtype=object)
    encoded = encode_tensor("w", words)
    assert encoded["type"] == "string" and encoded["data"] == ["a", "bé", "c", ""]
    assert np.array_equal(decode_tensor(encoded), words)


def test_tensors_that_do_not_add_up_are_refused():
    good = encode_tensor("x", np.ones((2, 2), np.float32))
    with pytest.raises(BrowserInputError, match="bytes for shape"):
        decode_tensor({**good, "dims": [3, 2]})
    with pytest.raises(BrowserInputError, match="not a known tensor type"):
        decode_tensor({**good, "type": "complex64"})
    with pytest.raises(BrowserInputError, match="negative"):
        decode_tensor({**good, "dims": [-1, 4]})
    with pytest.raises(BrowserInputError, match="ONNX Runtime Web cannot take"):
        encode_tensor("c", np.ones(2, np.complex64))


def _inputs(samples: int = 1) -> BrowserInputs:
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.normal(size=(4, 8)).astype(np.float32)} for _ in range(samples)]
    one = {"emb": rng.normal(size=(4, 16)).astype(np.float32), "label": np.arange(4, dtype=np.int64)}
    reference = one if samples == 1 else {k: np.stack([v] * samples) for k, v in one.items()}
    kinds = {"emb": OutputKind("embedding"), "label": OutputKind("exact")}
    return BrowserInputs(feeds, reference, kinds, "note", 4 if samples == 1 else samples, VerdictSettings())


def _page_result(key: str, outputs: list[dict[str, np.ndarray]], **extra) -> dict:
    return {
        "key": key, "userAgent": "Chromium/1", "threads": 1, "backend": "wasm", "runtime": "onnxruntime-web 1.30.0",
        "transferMs": 12.5, "transferBytes": 1000, "modelBytes": 4000, "contentEncoding": "gzip", "sessionMs": 40.0,
        "firstRunMs": 3.0, "medianMs": 1.5, "runs": 10,
        "outputs": [[encode_tensor(n, v) for n, v in o.items()] for o in outputs], **extra,
    }  # fmt: skip


def _per_run(inputs: BrowserInputs) -> list[dict[str, np.ndarray]]:
    """The original's outputs as the page returns them: one set per run (several runs are stacked on axis 0)."""
    if len(inputs.samples) == 1:
        return [inputs.reference]
    return [{k: v[i] for k, v in inputs.reference.items()} for i in range(len(inputs.samples))]


def test_outputs_equal_to_the_servers_pass_and_timings_are_kept():
    inputs = _inputs()
    run = judge(inputs, _page_result("original", [inputs.reference]))
    assert run.ok and run.passed is True
    assert (run.transfer_bytes, run.model_bytes, run.content_encoding, run.threads) == (1000, 4000, "gzip", 1)
    assert (run.session_ms, run.first_run_ms, run.median_ms, run.runs) == (40.0, 3.0, 1.5, 10)
    assert run.as_dict()["parity"]["passed"] is True


def test_outputs_judged_with_the_same_verdict_fail_when_they_move():
    inputs = _inputs()
    moved = {"emb": -inputs.reference["emb"], "label": inputs.reference["label"]}
    run = judge(inputs, _page_result("weights-int8", [moved]))
    assert run.ok and run.passed is False
    assert "emb (embedding): row cosine" in run.parity.decided_by
    changed = {"emb": inputs.reference["emb"], "label": inputs.reference["label"] + 1}
    assert judge(inputs, _page_result("x", [changed])).parity.decided_by.startswith("label (exact)")


def test_several_runs_are_stacked_like_the_servers_parity():
    inputs = _inputs(samples=3)
    per_run = [{k: v[i] for k, v in inputs.reference.items()} for i in range(3)]
    run = judge(inputs, _page_result("original", per_run))
    assert run.passed is True and run.parity.samples == 3
    short = judge(inputs, _page_result("original", per_run[:2]))
    assert not short.ok and short.stage == "outputs" and "2 runs' outputs for 3 inputs" in short.error


def test_a_model_that_failed_in_the_browser_keeps_its_error_and_gets_the_plain_advice():
    inputs = _inputs()
    error = "Can't create a session. ERROR_MESSAGE: com.microsoft:ScaledSiLU(-1) is not a registered function/op"
    failed = _page_result("float16", [], error=error, stage="session")
    runs = judge_all(inputs, [_page_result("original", [inputs.reference]), failed], served_by="this app")
    assert runs[1].error == error and runs[1].parity is None and runs[1].passed is None
    assert runs[1].problem() == f"float16 did not load in onnxruntime-web 1.30.0 (wasm): {error}"

    class _Result:
        def __init__(self, key: str, ok: bool = True):
            self.key, self.ok, self.parity = key, ok, None

    class _Comparison:
        variants = [_Result("float16")]

    lines = advice_lines(_Comparison(), runs)
    assert lines[0].startswith("! float16 runs on the server but not in onnxruntime-web 1.30.0 (wasm)")
    assert "ScaledSiLU" in lines[0] and lines[-1] == "Files were sent by this app."


def test_unreadable_outputs_are_a_failure_not_a_crash():
    inputs = _inputs()
    bad = _page_result("original", [inputs.reference])
    bad["outputs"][0][0]["data"] = "not base64!"
    run = judge(inputs, bad)
    assert not run.ok and run.stage == "outputs" and "could not be read" in run.error


def test_prepare_rebuilds_the_comparisons_inputs_and_the_servers_timing_input(load_sample):
    from shrinkray.measure.browser_inputs import prepare
    from shrinkray.measure.parity_inputs import parity_inputs
    from shrinkray.measure.results import CompareSettings

    model = load_sample("transformer")
    first, second = prepare(model, CompareSettings()), prepare(model, CompareSettings())
    expected = parity_inputs(model, CompareSettings())
    assert first.note == second.note == expected.note
    for a, b in zip(first.samples, expected.samples, strict=True):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert all(np.array_equal(first.reference[k], expected.reference[k]) for k in expected.reference)
    assert first.timing_batch == 1 and all(v.shape[0] == 1 for v in first.timing.values())
    payload = first.payload()
    assert len(payload["samples"]) == len(first.samples) and {t["name"] for t in payload["timing"]} == set(first.timing)


def test_browser_run_as_dict_is_json_ready():
    import json

    run = BrowserRun(key="original", error="boom", stage="run")
    data = json.loads(json.dumps(run.as_dict()))
    assert data["error"] == "boom" and data["parity"] is None and data["passed"] is None


@pytest.mark.slow
def test_browser_runs_travel_into_the_reports_and_the_chart(load_sample):
    import json

    from shrinkray.measure.browser_inputs import prepare
    from shrinkray.measure.results import CompareSettings
    from shrinkray.pipeline.compare import compare
    from shrinkray.report import charts
    from shrinkray.report import formats as report

    model = load_sample("mlp")
    settings = CompareSettings(methods=[("float16", {})], latency=False)
    comparison = compare(model, settings)
    inputs = prepare(model, settings)
    ua = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/142.0.0.0 Safari/537.36"
    results = [
        _page_result("original", _per_run(inputs), userAgent=ua),
        _page_result("float16", [], userAgent=ua, error="com.microsoft:ScaledSiLU(-1) is not a registered function/op",
                     stage="session"),
    ]  # fmt: skip
    comparison.browser = judge_all(inputs, results, served_by="this app's server")
    data = json.loads(report.to_json_text(comparison))
    assert [r["key"] for r in data["browser"]["runs"]] == ["original", "float16"]
    assert data["browser"]["runs"][0]["passed"] is True and data["browser"]["runs"][1]["stage"] == "session"
    notes = " ".join(data["browser"]["notes"])
    assert "HeadlessChrome/142" in notes and "1 thread" in notes and "received 1000 B as gzip" in notes
    assert "a host serving precompressed files would send" in notes
    advice = [a["text"] for a in data["advice"] if a["level"] == "bad"]
    assert any(a.startswith("float16 runs on the server but not in onnxruntime-web 1.30.0 (wasm)") for a in advice)
    assert data["recommended"] != "float16"  # a variant that fails in the browser is never the best trade-off
    markdown = report.to_markdown(comparison)
    assert "## In your browser" in markdown and "did not run (session)" in markdown
    html = report.to_html(comparison)
    assert "<h2>In your browser</h2>" in html and 'data-chart="browser"' in html
    figure = charts.browser_chart(comparison)
    assert "HeadlessChrome 142" in figure.layout.title.subtitle.text and "float16" in figure.layout.title.subtitle.text
    assert [list(t.x) for t in figure.data][:2] == [["original"], ["original"]]  # the failed model is not drawn
    comparison.browser = []
    assert "browser" not in report.to_json(comparison) and "In your browser" not in report.to_markdown(comparison)


def test_variants_failing_like_the_original_are_named_in_one_sentence():
    inputs = _inputs()
    error = "com.microsoft:ScaledSiLU(-1) is not a registered function/op"
    other = "no kernel for float16 X"
    runs = judge_all(inputs, [
        _page_result("original", [], error=error, stage="session"),
        _page_result("weights-int8", [], error=error, stage="session"),
        _page_result("float16", [], error=other, stage="run"),
    ])  # fmt: skip

    class _Result:
        def __init__(self, key: str):
            self.key, self.ok, self.parity = key, True, None

    class _Comparison:
        variants = [_Result("weights-int8"), _Result("float16")]

    lines = advice_lines(_Comparison(), runs)
    assert lines[0].startswith("! The original runs on the server but not in onnxruntime-web 1.30.0 (wasm): " + error)
    assert "Nor do its variants (weights-int8), with the same error." in lines[0]
    assert lines[1].startswith(f"! float16 runs on the server but not in onnxruntime-web 1.30.0 (wasm): {other}")
    assert len(lines) == 2


def test_a_model_whose_outputs_were_too_large_to_send_ran_but_is_not_judged():
    inputs = _inputs()
    result = _page_result("original", [], outputsTooLarge=250_000_000)
    result.pop("outputs")
    run = judge(inputs, result)
    assert run.ok and run.parity is None and run.passed is None and "too large" in run.note


def test_what_the_page_sends_is_data_not_markup_or_a_crash():
    """The page's report is kept with the run and shown to whoever opens its link: the backend (printed as is in
    the panel's caption) is one of the two we ship, and a count that is not a number is not a traceback."""
    inputs = _inputs()
    run = judge(inputs, _page_result("original", [inputs.reference], backend="wasm](http://evil.example/x.png)", runs="x"))
    assert (run.backend, run.runs) == ("wasm", 0)
    assert judge(inputs, _page_result("original", [inputs.reference], backend="webgpu")).backend == "webgpu"


def test_runs_whose_outputs_differ_in_shape_are_a_failure_not_a_crash():
    inputs = _inputs(samples=2)
    per_run = [{k: v[i] for k, v in inputs.reference.items()} for i in range(2)]
    per_run[1] = {k: v[:2] for k, v in per_run[1].items()}  # the second run sent shorter outputs
    run = judge(inputs, _page_result("original", per_run))
    assert not run.ok and run.stage == "outputs" and "could not be read" in run.error

    one = _inputs()
    text = {"emb": one.reference["emb"], "label": np.array(["a"] * 4)}  # text where the server has numbers
    run = judge(one, _page_result("original", [text]))
    assert not run.ok and run.stage == "outputs" and "could not be read" in run.error


def test_the_browser_table_gives_each_variants_median_over_the_originals(load_sample):
    from shrinkray.measure.browser_inputs import prepare
    from shrinkray.measure.results import CompareSettings
    from shrinkray.pipeline.compare import compare
    from shrinkray.verdict.browser import median_ratio, report_table

    model = load_sample("mlp")
    settings = CompareSettings(methods=[("float16", {})], latency=False)
    comparison = compare(model, settings)
    inputs = prepare(model, settings)
    results = [_page_result("original", [inputs.reference], medianMs=8.0, runs=5),
               _page_result("float16", [inputs.reference], medianMs=6.0, runs=5)]  # fmt: skip
    runs = judge_all(inputs, results, served_by="this app's server")
    header, rows = report_table(comparison, runs)
    column = header.index("vs original")
    assert [row[column] for row in rows] == ["–", "0.75x"]
    assert median_ratio({r.key: r for r in runs}, "float16") == 0.75
    assert median_ratio({r.key: r for r in runs[1:]}, "float16") is None  # no original timed: no ratio


def test_the_delivery_line_names_gzip_when_brotli_lost_to_it():
    # A server sends the smaller file: when brotli came out larger than gzip -9, what it sends is gzip -9,
    # not "gzip, quality 6" (brotli's setting; walkthrough 2026-11-27).
    from shrinkray.measure.sizes import Sizes
    from shrinkray.verdict.browser import delivery_line

    run = BrowserRun(key="palettize", transfer_bytes=600_000, model_bytes=1_100_000, content_encoding="gzip")
    as_gzip = Sizes(raw=1_100_000, gzip=578_680, brotli=578_680, brotli_quality=6, brotli_encoded=578_900,
                    brotli_encoding="gzip")  # fmt: skip
    as_br = Sizes(raw=1_100_000, gzip=578_680, brotli=500_000, brotli_quality=6, brotli_encoded=500_000,
                  brotli_encoding="br")  # fmt: skip
    assert delivery_line(run, as_gzip).endswith("would send 565.12 KiB (gzip -9)")
    assert delivery_line(run, as_br).endswith("would send 488.28 KiB (br, quality 6)")


def test_rebuilt_inputs_are_matched_by_their_values_not_their_note():
    """A note can carry a measured time ("more samples would take the original 0.6 s a set"), so the one the
    panel rebuilds never equals the comparison's: the samples' digest decides (a real upload was refused)."""
    import dataclasses

    from helpers import sample_path

    import shrinkray
    from shrinkray.measure.browser_inputs import prepare
    from shrinkray.measure.results import CompareSettings
    from shrinkray.pipeline.compare import compare

    model = shrinkray.load(sample_path("cnn")).model
    settings = CompareSettings(methods=[("float16", {})], latency=False, brotli_quality=1)
    comparison = compare(model, settings)
    inputs = prepare(model, settings)
    assert inputs.same_as(comparison) and inputs.first_sets == 40 and len(inputs.samples) == 160
    timed = dataclasses.replace(comparison, input_note=comparison.input_note + " (0.61 s a set)")
    assert inputs.same_as(timed)
    other = dataclasses.replace(comparison, inputs_digest="0" * 64)
    assert not inputs.same_as(other)


def _set_inputs(reference_tokens: list[list[int]], margins: float = 2.0, end: int = 0) -> BrowserInputs:
    """Browser inputs of a set: the server original's outputs (tokens, then its end token, certain)."""
    from shrinkray.measure.generation import GENERATED
    from shrinkray.measure.seq2seq import FINISHED_MARGIN

    width = max(len(t) for t in reference_tokens) + 1
    ref = np.full((len(reference_tokens), width, 2), [end, FINISHED_MARGIN], np.float64)
    for row, tokens in enumerate(reference_tokens):
        ref[row, : len(tokens)] = [[t, margins] for t in tokens]
        ref[row, len(tokens), 1] = margins  # the end token itself is written, not yet certain
    kind = OutputKind("generation")
    return BrowserInputs([{}] * len(reference_tokens), {GENERATED: ref}, {GENERATED: kind}, "", len(reference_tokens),
                         VerdictSettings(), model_set={"end": end, "steps": [width] * len(reference_tokens)})  # fmt: skip


def test_a_sets_outputs_written_in_the_page_are_judged_token_for_token_against_the_servers():
    written = [[5, 6, 7], [8, 9]] * 100
    inputs = _set_inputs(written)
    same = judge(inputs, {"key": "float16", "generatedRows": [row + [0] for row in written]})
    assert same.ok and same.parity.status == "pass"
    changed = [row if index % 4 else [row[0], 42] for index, row in enumerate(written)]  # a quarter part at token 2
    moved = judge(inputs, {"key": "palettize", "generatedRows": [row + [0] for row in changed]})
    assert moved.parity.status == "fail"
    generated = moved.parity.outputs[0]
    assert generated.measures["continuation_agreement"] == pytest.approx(0.75) and generated.measures["first_divergence"] == 2
    short = judge(inputs, {"key": "float16", "generatedRows": [[5, 6, 7]]})  # one output for 200 inputs
    assert not short.ok and short.stage == "outputs" and "1 outputs for 200 inputs" in short.error


def test_a_tally_the_page_sends_as_top_classes_is_judged_with_the_samples():
    """The server's tally (sets past its output memory, kept as top classes): the page sends each position's
    top class and gap for them, and the verdict counts them as the server's did; a tally missing is an error."""
    from shrinkray.measure.parity import top_two

    rng = np.random.default_rng(0)
    scores = rng.normal(size=(10, 4, 100)).astype(np.float32)  # 10 sets of [4 positions, 100 classes]
    kinds = {"s": OutputKind("scores")}
    feeds = [{"x": np.zeros((4, 8), np.float32)} for _ in range(2)]
    tally = [{"x": np.ones((4, 8), np.float32)} for _ in range(8)]
    inputs = BrowserInputs(feeds, {"s": scores[:2]}, kinds, "note", 2, VerdictSettings(), tally=tally,
                           tally_reference={"s": top_two(scores[2:], -1)}, tally_count=8)
    assert [t["name"] for t in inputs.payload()["tally"][0]] == ["x"] and inputs.payload()["tallied"] == {"s": -1}
    page_tops = [[encode_tensor("s", top_two(scores[k], -1))] for k in range(2, 10)]
    run = judge(inputs, _page_result("float16", [{"s": scores[0]}, {"s": scores[1]}], tally=page_tops))
    assert run.ok and run.parity.outputs[0].measures["positions"] == 40 and run.parity.samples == 10
    short = judge(inputs, _page_result("float16", [{"s": scores[0]}, {"s": scores[1]}], tally=page_tops[:3]))
    assert short.error and "3 sets of top classes for 8" in short.error

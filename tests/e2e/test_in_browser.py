"""The Compare page's "In your browser" panel in a real Chromium: every bundled sample's original and its
weights-int8 / float16 / palettize variants run in ONNX Runtime Web (served by the app), the browser's
outputs pass the server's verdict, a model with an operator ONNX Runtime Web lacks gets the plain message,
and no request leaves localhost. One browser walks every sample (the suite's time budget)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import press
from onnx import TensorProto, helper, numpy_helper

from shrinkray.methods import all_methods
from tests.e2e.conftest import upload
from tests.e2e.test_browser import ROOT, SHOTS, _no_traceback, app_url

__all__ = ["app_url"]  # the fixture: this module gets its own `streamlit run`

WANTED = ("weights-int8", "float16", "palettize")
SAMPLES = sorted(p for p in (ROOT / "sample_models").glob("*.onnx"))
TIMINGS: list[str] = []
MEASURED: list[str] = []


def _unsupported_op_model(path: Path) -> Path:
    """A model ONNX Runtime 1.31 (server) runs and ONNX Runtime Web 1.30 cannot load: com.microsoft
    ScaledSiLU (measured: "com.microsoft:ScaledSiLU(-1) is not a registered function/op")."""
    weight = numpy_helper.from_array(np.random.default_rng(0).normal(0, 0.05, (128, 256)).astype(np.float32), "w")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("ScaledSiLU", ["h"], ["y"], domain="com.microsoft", alpha=1.0),
    ]
    graph = helper.make_graph(
        nodes, "scaled_silu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 128])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 256])], [weight],
    )  # fmt: skip
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _dynamic_axes_model(path: Path) -> Path:
    """A per-position tagger with symbolic batch and sequence axes (tokens [batch, seq] -> logits [batch, seq,
    32]): its parity inputs are guessed, and its top class per position is judged on 160+ decisions."""
    rng = np.random.default_rng(3)
    table = numpy_helper.from_array(rng.normal(0, 1, (1000, 128)).astype(np.float32), "embed")
    weight = numpy_helper.from_array(rng.normal(0, 0.2, (128, 32)).astype(np.float32), "w")
    nodes = [helper.make_node("Gather", ["embed", "tokens"], ["h"]), helper.make_node("MatMul", ["h", "w"], ["logits"])]
    graph = helper.make_graph(
        nodes, "tagger", [helper.make_tensor_value_info("tokens", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", 32])], [table, weight],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _title(name: str) -> str:
    return next(spec.title for spec in all_methods() if spec.name == name)


def _shrink(pg, sample: Path, latency: bool) -> None:
    pg.get_by_role("link", name="Model").click()
    pg.wait_for_selector("text=Load an ONNX model", timeout=30_000)
    upload(pg, str(sample))
    pg.locator("[data-testid='stSidebar']").get_by_text(sample.stem, exact=True).wait_for(timeout=60_000)
    pg.get_by_role("link", name="Shrink").click()
    pg.wait_for_selector("text=Shrink and measure", timeout=30_000)
    chosen = pg.locator("[data-testid=stMultiSelect]").first
    chosen.get_by_role("button", name=f"Remove {_title(WANTED[0])}").wait_for(timeout=30_000)
    for spec in all_methods():  # the choice may persist across models: remove what is there
        remove = chosen.get_by_role("button", name=f"Remove {spec.title}")
        if spec.name not in WANTED and remove.count():
            remove.click()
            pg.wait_for_timeout(300)
    for spec in all_methods():
        assert chosen.get_by_role("button", name=f"Remove {spec.title}").count() == (spec.name in WANTED), spec.name
    if not pg.get_by_text("Measure latency", exact=True).first.is_visible():
        pg.get_by_text("Measurement settings", exact=True).first.click()
    toggle = pg.get_by_label("Measure latency").first
    if toggle.is_checked() != latency:
        pg.get_by_text("Measure latency", exact=True).first.click()
        pg.wait_for_timeout(300)
    press(pg, "Shrink and measure")
    pg.wait_for_selector("text=Reports", timeout=240_000)


def _run_in_browser(pg, expected: int, problems: bool = False) -> str:
    pg.get_by_role("link", name="Compare").click()
    pg.wait_for_selector("text=In your browser", timeout=60_000)
    started = time.perf_counter()
    pg.get_by_role("button", name="Run the original and variants in this browser").click()
    table = pg.locator("[data-testid=stTable]").first
    failed = pg.locator("[data-testid=stAlertContentError]").first
    pg.get_by_text("Measured in:").or_(failed).first.wait_for(timeout=180_000)
    TIMINGS.append(f"{time.perf_counter() - started:.1f} s")
    if failed.is_visible() and not problems:
        pg.screenshot(path=str(SHOTS / "in_browser_failure.png"))
        raise AssertionError(failed.inner_text())
    table.wait_for(timeout=30_000)
    frame = pg.frame_locator("iframe[title*='in_browser']")
    assert f"Done: {expected} models" in frame.locator("#status").inner_text()
    return pg.inner_text("body")


def _shot_panel(pg, name: str) -> None:
    """The panel at the top of the viewport (the app scrolls inside its own container, not the page)."""
    pg.get_by_role("heading", name="In your browser").first.evaluate("e => e.scrollIntoView({block: 'start'})")
    pg.wait_for_timeout(1500)  # plotly draws after the page
    pg.screenshot(path=str(SHOTS / f"{name}.png"))


def test_every_sample_runs_in_onnx_runtime_web(app_url, pages, tmp_path):  # noqa: F811 - the fixture imported above
    SHOTS.mkdir(exist_ok=True)
    requests: list[str] = []  # the component's frame too
    pg = pages.open(app_url, height=2400, requests=requests)
    for index, sample in enumerate(SAMPLES):
        _shrink(pg, sample, latency=index == 0)  # server latency once (the chart), not nine times
        body = _run_in_browser(pg, expected=1 + len(WANTED))
        runs = pg.frame_locator("iframe[title*='in_browser']").locator("#log li")
        assert runs.count() == 1 + len(WANTED)
        texts = [runs.nth(i).inner_text() for i in range(runs.count())]
        assert all("failed" not in t for t in texts), (sample.name, texts)
        MEASURED.append(f"{sample.stem}: " + "; ".join(texts))
        table = pg.locator("[data-testid=stTable]").first.inner_text()
        assert "fails" not in table.lower() and "did not run" not in table, (sample.name, table)
        # each model's browser verdict and its server verdict, in the one verdict's words
        assert table.count("Passes") >= 2 * (1 + len(WANTED)), (sample.name, table)
        assert "ONNX Runtime Web" in body and "as gzip" in table
        if index == 0:
            _shot_panel(pg, "10_in_your_browser")
        _no_traceback(pg)

    unsupported = _unsupported_op_model(tmp_path / "scaled_silu.onnx")
    _shrink(pg, unsupported, latency=False)
    body = _run_in_browser(pg, expected=1 + len(WANTED), problems=True)
    assert "The original runs on the server but not in onnxruntime-web 1.30.0 (wasm)" in body, body
    assert "ScaledSiLU(-1) is not a registered function/op" in body
    assert "Nor do its variants (weights-int8, palettize, float16), with the same error" in body
    _shot_panel(pg, "11_in_your_browser_unsupported_op")
    _no_traceback(pg)

    dynamic = _dynamic_axes_model(tmp_path / "dynamic_tagger.onnx")  # an upload, not a sample: the same verdict
    _shrink(pg, dynamic, latency=False)
    _run_in_browser(pg, expected=1 + len(WANTED))
    table = pg.locator("[data-testid=stTable]").first.inner_text()
    assert "differ from the ones the comparison used" not in pg.inner_text("body")
    assert "did not run" not in table and table.count("Passes") >= 2, table
    _no_traceback(pg)
    pg.get_by_role("link", name="Pricing").click()  # every page has been visited: none fetched from elsewhere
    pg.wait_for_selector("text=Cost per variant", timeout=60_000)
    pg.wait_for_timeout(1000)
    print("\nPanel button to results, per sample: " + ", ".join(TIMINGS))
    print("\n".join(MEASURED))
    elsewhere = [u for u in requests if not u.startswith((app_url, "data:", "blob:"))]
    assert not elsewhere, elsewhere
    assert not pages.errors, pages.errors


def test_a_decoder_lm_writes_in_the_browser(app_url, pages, tmp_path):  # noqa: F811 - the fixture imported above
    """The generative sample, uploaded as a zip of its transformers.js folder: every variant runs in ONNX
    Runtime Web, generates through its cache from the timing prompt and reports tokens a second; its next
    tokens are judged against the server original's, and the page says whether it wrote the original's text."""
    import zipfile

    folder = ROOT / "sample_models" / "tiny_lm"
    archive = tmp_path / "tiny_lm.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(folder).as_posix())
    requests: list[str] = []
    pg = pages.open(app_url, height=2400, requests=requests)
    _shrink(pg, archive, latency=False)
    assert "continues the same way on" in pg.inner_text("body")  # judged by what it writes, on the server
    _run_in_browser(pg, expected=1 + len(WANTED))
    log = pg.frame_locator("iframe[title*='in_browser']").locator("#log li")
    texts = [log.nth(i).inner_text() for i in range(log.count())]
    assert len(texts) == 1 + len(WANTED) and all("tokens/s" in t for t in texts), texts
    table = pg.locator("[data-testid=stTable]").first.inner_text()
    assert "tokens/s" in table and "the original's 16 tokens" in table, table
    assert "did not run" not in table and "fails" not in table.lower(), table
    _shot_panel(pg, "12_in_your_browser_decoder")
    _no_traceback(pg)
    assert not [u for u in requests if not u.startswith((app_url, "data:", "blob:"))]
    assert not pages.errors, pages.errors


pytestmark = pytest.mark.e2e

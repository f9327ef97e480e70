"""An encoder–decoder uploaded as one zip is shrunk and judged as a set in the app, and a downloaded variant set
is a model folder ONNX Runtime Web runs as it is: the encoder, then the decoder token by token, in Chromium,
writing what ONNX Runtime writes on the server."""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import threading
import zipfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
from helpers import whole_page_screenshot

from tests.e2e.conftest import DOWNLOAD_MS, go_to, upload_model, wait_idle
from tests.e2e.test_browser import ROOT, SHOTS, _no_traceback, app_url  # noqa: F401 - app_url is a fixture
from tests.io.test_model_set import write_set

RUNTIME = ROOT / "app_ui" / "browser_component" / "ort"
START, END = 0, 0
#: What the page runs: both sessions from the folder's own files, then greedy steps (each the whole sequence
#: again, as decoder_model.onnx takes it) until the end token or ``steps``.
GENERATE_JS = """
async ([folder, encoder, decoder, rows, start, end, steps]) => {
  const ort = await import('/ort/ort.wasm.min.mjs');
  ort.env.wasm.wasmPaths = new URL('/ort/', location.href).href;
  ort.env.wasm.numThreads = 1;
  const enc = await ort.InferenceSession.create(`/${folder}/onnx/${encoder}`);
  const dec = await ort.InferenceSession.create(`/${folder}/onnx/${decoder}`);
  const out = [];
  for (const ids of rows) {
    const shape = [1, ids.length];
    const inputIds = new ort.Tensor('int64', BigInt64Array.from(ids.map(BigInt)), shape);
    const mask = new ort.Tensor('int64', BigInt64Array.from(ids.map(() => 1n)), shape);
    const states = (await enc.run({input_ids: inputIds, attention_mask: mask})).last_hidden_state;
    const made = [start];
    for (let step = 0; step < steps; step++) {
      const seq = new ort.Tensor('int64', BigInt64Array.from(made.map(BigInt)), [1, made.length]);
      const logits = (await dec.run({input_ids: seq, encoder_hidden_states: states, encoder_attention_mask: mask})).logits;
      const vocab = logits.dims[2], last = logits.data.subarray((made.length - 1) * vocab, made.length * vocab);
      let best = 0;
      for (let i = 1; i < vocab; i++) if (last[i] > last[best]) best = i;
      made.push(best);
      if (best === end) break;
    }
    out.push(made.slice(1));
  }
  return out;
}
"""


def _greedy(folder: Path, encoder: str, decoder: str, rows: list[list[int]], steps: int) -> tuple[list, list]:
    """The same greedy steps through ONNX Runtime on this machine, and each output's smallest margin (how sure
    the model was of its least sure token: a near tie may go either way on another kernel)."""
    enc = ort.InferenceSession(str(folder / "onnx" / encoder), providers=["CPUExecutionProvider"])
    dec = ort.InferenceSession(str(folder / "onnx" / decoder), providers=["CPUExecutionProvider"])
    outputs, margins = [], []
    for ids in rows:
        feeds = {"input_ids": np.array([ids], np.int64), "attention_mask": np.ones((1, len(ids)), np.int64)}
        states = enc.run(None, feeds)[0]
        made, sure = [START], np.inf
        for _ in range(steps):
            logits = dec.run(None, {"input_ids": np.array([made], np.int64), "encoder_hidden_states": states,
                                    "encoder_attention_mask": feeds["attention_mask"]})[0][0, -1]  # fmt: skip
            top2 = np.sort(logits.astype(np.float64))[-2:]  # float16-safe: float64 logits
            sure = min(sure, top2[1] - top2[0])
            made.append(int(np.argmax(logits)))
            if made[-1] == END:
                break
        outputs.append(made[1:])
        margins.append(sure)
    return outputs, margins


class _Files(http.server.SimpleHTTPRequestHandler):
    """Static files with the types a module script and WebAssembly need, quietly."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".mjs": "text/javascript",
                      ".wasm": "application/wasm"}  # fmt: skip

    def log_message(self, *args) -> None:
        pass


def _serve(root: Path) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Files, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_zipped_set_is_judged_whole_and_its_download_runs_in_onnx_runtime_web(app_url, pages, tmp_path):  # noqa: F811
    folder = write_set(tmp_path / "s2s", config={"decoder_start_token_id": START, "eos_token_id": END})
    archive = tmp_path / "s2s.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(folder.rglob("*")):
            zf.write(path, path.relative_to(folder).as_posix())
    pg = pages.open(app_url, height=2400, accept_downloads=True)
    upload_model(pg, archive, ready="text=holds 2 models: which one?")
    pg.locator("[data-testid=stSelectbox]").filter(has_text="which one?").click()
    pg.get_by_role("option", name="The whole set: 2 files shrunk together").click()
    pg.get_by_role("button", name="Load this model").click()
    pg.wait_for_selector("text=Weight tensors", timeout=60_000)
    main = pg.inner_text("[data-testid=stMain]")
    assert "A set of models: encoder_model.onnx and decoder_model.onnx" in main
    go_to(pg, "Shrink", "text=is a set of models")
    assert "Smallest that passes" not in pg.inner_text("[data-testid=stMain]")
    pg.get_by_role("button", name="Shrink and measure").click()
    pg.get_by_role("button", name="Download s2s.float16.zip").wait_for(timeout=240_000)
    text = pg.inner_text("[data-testid=stMain]")
    assert "generated tokens" in text and "writes the same output for" in text
    SHOTS.mkdir(exist_ok=True)
    whole_page_screenshot(pg, SHOTS / "model_set_results.png")  # looked at: cards, what changes, downloads
    _no_traceback(pg)

    served = tmp_path / "served"
    shutil.copytree(RUNTIME, served / "ort")
    assert "Each download is a .zip of the set's folder" in text and "Name model downloads" not in text
    for key, name in (("float16", "fp16"), ("weights-int8", "quantized")):
        wait_idle(pg)  # a click while the page still redraws is dropped
        with pg.expect_download(timeout=DOWNLOAD_MS) as download:
            pg.get_by_role("button", name=f"Download s2s.{key}.zip").click()
        saved = tmp_path / f"{key}.zip"
        download.value.save_as(saved)
        with zipfile.ZipFile(saved) as zf:
            names = sorted(zf.namelist())
            assert names == ["config.json", f"onnx/decoder_model_{name}.onnx", f"onnx/encoder_model_{name}.onnx"]
            zf.extractall(served / key)
        assert json.loads((served / key / "config.json").read_text())["eos_token_id"] == END
    (served / "index.html").write_text("<!doctype html><title>set</title><p>served</p>")
    server = _serve(served)
    try:
        web = pages.open(f"http://127.0.0.1:{server.server_address[1]}/", ready="text=served")
        rng = np.random.default_rng(3)
        rows = [[int(t) for t in rng.integers(8, 500, size=int(n))] for n in rng.integers(6, 14, size=6)]
        for key, name in (("float16", "fp16"), ("weights-int8", "quantized")):
            encoder, decoder = f"encoder_model_{name}.onnx", f"decoder_model_{name}.onnx"
            in_browser = web.evaluate(GENERATE_JS, [key, encoder, decoder, rows, START, END, 12])
            on_server, margins = _greedy(served / key, encoder, decoder, rows, 12)
            sure = [i for i, m in enumerate(margins) if m > 0.05]  # a near tie may go either way on another kernel
            assert len(sure) >= 3, margins
            assert [in_browser[i] for i in sure] == [on_server[i] for i in sure], key
            assert all(len(o) >= 1 for o in in_browser)
    finally:
        server.shutdown()
    assert not pages.errors


def test_the_set_sample_runs_in_the_browser_panel_and_is_judged_as_the_server_judged_it(app_url, pages):  # noqa: F811
    """tiny_seq2seq picked as a bundled sample, shrunk with two methods, then the Compare page's panel: each
    model's encoder and decoder downloaded into the page, its outputs written token by token in ONNX Runtime
    Web and judged against the server original's, with its time and tokens a second."""
    pg = pages.open(app_url, height=2400)
    pg.locator("[data-testid=stSelectbox]").filter(has_text="pick a bundled sample").click()
    pg.get_by_role("option", name="tiny_seq2seq").click()
    pg.get_by_role("button", name="Load sample").click()
    pg.wait_for_selector("text=A set of models", timeout=60_000)
    go_to(pg, "Shrink", "text=is a set of models")
    chosen = pg.locator("[data-testid=stMultiSelect]").first
    for title in ("Dynamic INT8 (ONNX Runtime)", "Weights-only 4-bit", "N-value palettization"):
        chosen.get_by_role("button", name=f"Remove {title}").click()
        wait_idle(pg)
    pg.get_by_role("button", name="Shrink and measure").click()
    pg.wait_for_selector("text=Reports", timeout=240_000)
    go_to(pg, "Compare", "text=In your browser")
    pg.get_by_role("button", name="Run the original and variants in this browser").click()
    failed = pg.locator("[data-testid=stAlertContentError]").first
    pg.get_by_text("Measured in:").or_(failed).first.wait_for(timeout=180_000)
    assert not failed.is_visible(), failed.inner_text()
    log = pg.frame_locator("iframe[title*='in_browser']").locator("#log li")
    texts = [log.nth(i).inner_text() for i in range(log.count())]
    assert len(texts) == 3 and all("failed" not in t and "tokens/s" in t for t in texts), texts
    table = pg.locator("[data-testid=stTable]").first.inner_text()
    assert table.count("Passes") >= 6 and "fails" not in table.lower(), table  # each model: browser and server
    pg.get_by_role("heading", name="In your browser").first.evaluate("e => e.scrollIntoView({block: 'start'})")
    pg.wait_for_timeout(1500)
    pg.screenshot(path=str(SHOTS / "model_set_in_browser.png"))
    _no_traceback(pg)
    assert not pages.errors

"""End to end in a real browser: Debian's Chromium driven by Playwright against `streamlit run`.

Uploads a sample through the real file input, runs two methods, checks the
charts, downloads a shrunk model and validates it, and visits every page.
Screenshots go to tests/e2e/screenshots/ (not committed): look at them.
Needs /usr/bin/chromium (apt-get install chromium) and the playwright package;
locally the test is skipped without them, under CI=true it fails instead.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import press

import shrinkray
from shrinkray.graph.validate import validate
from tests.e2e.conftest import DOWNLOAD_MS, upload, upload_model

ROOT = Path(__file__).resolve().parents[2]
SHOTS = Path(__file__).resolve().parent / "screenshots"
STARTED = time.time() - 1  # screenshots written after this were taken by this run (1 s for coarse mtimes)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(env: dict[str, str] | None, log, timeout_s: float = 90) -> tuple[subprocess.Popen, str]:
    """`streamlit run app.py` as deployed (no file watcher: an edit to the sources during the run, e.g. other work
    in the same checkout, would reload shrinkray modules, and objects already in a session would no longer pickle
    for the capped worker), on a free port, with ``env``; its process and URL once its health check answers."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.headless", "true",
         "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.5)
    proc.terminate()
    pytest.fail(f"streamlit did not start within {timeout_s:g} s")


def stop_app(proc: subprocess.Popen, grace_s: float = 30) -> None:
    """Stop an app started by :func:`start_app`: SIGTERM, then SIGKILL when it has not exited within ``grace_s``
    (on a loaded machine a session's script still drawing can hold Streamlit's shutdown past 20 s; its run
    workers watch it and exit with it)."""
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=grace_s)


@pytest.fixture(scope="module")
def app_url(chromium):
    """The app (:func:`start_app`). After ``chromium``: without a browser nothing is started."""
    log = open(SHOTS.parent / "streamlit.log", "w")  # noqa: SIM115 - closed below
    proc, url = start_app(None, log)
    yield url
    stop_app(proc)
    log.close()


@pytest.fixture(scope="module")
def page(app_url, module_pages):
    SHOTS.mkdir(exist_ok=True)
    yield module_pages.open(app_url, height=2400, accept_downloads=True)
    assert not module_pages.errors, module_pages.errors


def _shot(page, name: str) -> Path:
    page.wait_for_timeout(1500)  # let plotly finish drawing
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def _wait_for_charts(page, at_least: int) -> None:
    """Plotly draws after the page: wait until at least this many charts have rendered."""
    page.wait_for_function(
        f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {at_least}", timeout=60_000
    )


def _no_traceback(page) -> None:
    assert page.locator("[data-testid='stException']").count() == 0
    assert "Traceback" not in page.inner_text("body")


def test_full_flow_in_a_real_browser(page, tmp_path):
    _shot(page, "1_model_empty")
    sample = ROOT / "sample_models" / "cnn.onnx"
    upload_model(page, str(sample))
    assert "cnn" in page.locator("[data-testid='stSidebar']").inner_text()
    _wait_for_charts(page, 2)
    _shot(page, "2_model_loaded")
    _no_traceback(page)

    page.get_by_role("link", name="Shrink").click()
    page.wait_for_selector("text=Shrink and measure", timeout=30_000)
    for name in ("Dynamic INT8 (ONNX Runtime)", "N-value palettization"):
        page.get_by_role("button", name=f"Remove {name}").click()
        page.wait_for_timeout(500)
    press(page, "Shrink and measure")
    page.wait_for_selector("text=Reports", timeout=240_000)
    body = page.inner_text("body")
    assert "weights-int8" in body and "float16" in body
    # exactly one headline: the recommendation, or why there is none (timings decide which)
    assert ("Best trade-off" in body) != ("No variant is " in body)
    _shot(page, "3_shrink_results")
    _no_traceback(page)

    with page.expect_download(timeout=DOWNLOAD_MS) as info:
        page.get_by_role("button", name="Download cnn.weights-int8.onnx").click()
    target = tmp_path / "downloaded.onnx"
    info.value.save_as(str(target))
    downloaded = shrinkray.load(target)
    validate(downloaded.model)
    assert target.stat().st_size < 0.35 * sample.stat().st_size

    page.get_by_role("link", name="Compare").click()
    page.wait_for_selector("text=Inputs used for parity", timeout=60_000)
    _wait_for_charts(page, 5)
    _shot(page, "4_compare")
    _no_traceback(page)

    page.get_by_role("link", name="Pricing").click()
    page.wait_for_selector("text=Cost per variant", timeout=60_000)
    _wait_for_charts(page, 1)
    body = page.inner_text("body")
    assert "weights-int8" in body and "original (reference)" in body and "per month" in body
    assert "provider=gcs" in page.url and "downloads=" in page.url  # the what-if is in the link
    _shot(page, "5_pricing")
    _no_traceback(page)

    page.get_by_role("link", name="Model").click()
    page.wait_for_selector("text=Weight tensors", timeout=30_000)
    _no_traceback(page)


def test_a_broken_upload_shows_a_message_and_the_app_keeps_working(page, tmp_path):
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"this is not an onnx model at all")
    page.get_by_role("link", name="Model").click()
    page.wait_for_selector("text=Load an ONNX model", timeout=30_000)
    upload(page, str(broken))
    page.wait_for_selector("text=Loading broken.onnx failed", timeout=30_000)
    _shot(page, "6_broken_upload")
    _no_traceback(page)
    # The failed upload left the previous model in place; a good upload replaces it.
    assert "cnn" in page.locator("[data-testid='stSidebar']").inner_text()
    upload(page, str(ROOT / "sample_models" / "mlp.onnx"))
    page.locator("[data-testid='stSidebar']").get_by_text("mlp", exact=True).wait_for(timeout=60_000)
    page.wait_for_selector("text=fc2.weight", timeout=60_000)
    _no_traceback(page)


def test_screenshots_are_written(chromium):  # skipped with the others when there is no browser
    # Written by this run: files left by an earlier run do not count.
    fresh = {p.name for p in SHOTS.glob("*.png") if p.stat().st_mtime >= STARTED}
    assert {"1_model_empty.png", "2_model_loaded.png", "3_shrink_results.png", "4_compare.png"} <= fresh, fresh
    shutil.rmtree(SHOTS / "__pycache__", ignore_errors=True)


def _png_file(path: Path, color: tuple[int, int, int]) -> Path:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (96, 80), color)
    ImageDraw.Draw(img).ellipse((20, 14, 76, 66), fill=(255 - color[0], 255 - color[1], 255 - color[2]))
    img.save(path)
    return path


def test_real_samples_and_parity_settings_in_a_real_browser(pages, app_url, tmp_path):
    """A fresh session: Shrink cnn with the default settings, re-measure on two uploaded PNGs on Compare,
    then the parity settings and the per-output table on Shrink; nothing leaves localhost."""
    requests: list[str] = []
    pg = pages.open(app_url, height=2400, accept_downloads=True, requests=requests)
    errors = pages.errors
    upload(pg, str(ROOT / "sample_models" / "cnn.onnx"))
    pg.wait_for_selector("text=Weight tensors", timeout=60_000)

    pg.get_by_role("link", name="Shrink").click()
    pg.wait_for_selector("text=Shrink and measure", timeout=30_000)
    started = time.perf_counter()
    press(pg, "Shrink and measure")
    pg.locator("h3", has_text="weights-int8").first.wait_for(timeout=300_000)
    first_card_s = time.perf_counter() - started
    print(f"\n'Shrink and measure' to the first variant card (cnn, default settings): {first_card_s:.1f} s")
    pg.wait_for_selector("text=Reports", timeout=60_000)
    _no_traceback(pg)

    pg.get_by_role("link", name="Compare").click()
    pg.wait_for_selector("text=Inputs used for parity", timeout=60_000)
    pngs = [_png_file(tmp_path / "red.png", (200, 30, 30)), _png_file(tmp_path / "sky.png", (40, 120, 230))]
    upload(pg, [str(p) for p in pngs])
    pg.wait_for_selector("text=sky.png", timeout=30_000)  # both listed in the uploader before submitting
    pg.get_by_role("button", name="Re-measure with these inputs").click()
    note = pg.get_by_text("Real samples (2)", exact=False).first
    failed = pg.locator("[data-testid=stAlertContentError]").first
    note.or_(failed).wait_for(timeout=300_000)
    assert not failed.is_visible(), failed.inner_text()
    assert "red.png, sky.png" in note.inner_text()
    pg.wait_for_function("document.querySelectorAll('[data-testid=stImage] img').length >= 2", timeout=30_000)
    note.scroll_into_view_if_needed()
    path = SHOTS / "7_compare_real_samples.png"
    pg.wait_for_timeout(1500)
    pg.screenshot(path=str(path), full_page=True)
    _no_traceback(pg)

    pg.get_by_role("link", name="Shrink").click()
    pg.wait_for_selector("text=Shrink and measure", timeout=30_000)
    pg.get_by_text("Measurement settings", exact=True).click()
    pg.wait_for_selector("text=Parity verdict", timeout=30_000)
    pg.wait_for_selector("[data-testid=stDataFrame], [data-testid=stDataFrameResizable]", timeout=30_000)
    body = pg.inner_text("body")
    assert "Real samples (2)" in body  # the cards show the re-measured comparison
    # 2 samples are 2 decisions for the cnn's top class: too few to pass or fail, and the app asks for more in its
    # own words (never a command-line flag)
    assert "Undecided: keeps the top class on 2 of 2 inputs" in body and "upload more inputs of your own" in body
    assert "--inputs" not in body
    _shot(pg, "8_shrink_measurement_settings")
    pg.get_by_text("Parity per output").first.click()
    pg.wait_for_timeout(1000)
    pg.get_by_text("Parity per output").first.scroll_into_view_if_needed()
    _shot(pg, "9_parity_per_output")
    _no_traceback(pg)

    elsewhere = [u for u in requests if not u.startswith((app_url, "data:", "blob:"))]
    assert not elsewhere, elsewhere
    assert not errors, errors
    pg.close()

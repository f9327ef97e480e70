"""A zip of several models (an encoder and a decoder, as transformers.js lays them out) is not a dead end: the
Model page lists its models, and the one picked is loaded and named after its file."""

from __future__ import annotations

import zipfile

from tests.e2e.conftest import upload
from tests.e2e.test_browser import ROOT, SHOTS, _no_traceback, _wait_for_charts, app_url  # noqa: F401 - app_url is a fixture


def test_a_zip_of_two_models_offers_them_and_loads_the_one_picked(app_url, pages, tmp_path):  # noqa: F811
    archive = tmp_path / "whisper-tiny-like.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(ROOT / "sample_models" / "cnn.onnx", "onnx/encoder_model.onnx")
        zf.write(ROOT / "sample_models" / "mlp.onnx", "onnx/decoder_model.onnx")
    pg = pages.open(app_url, height=1600)
    upload(pg, archive)
    pg.get_by_text("whisper-tiny-like.zip holds 2 models: which one?").wait_for(timeout=60_000)
    assert "failed" not in pg.inner_text("[data-testid=stMain]")
    pg.locator("[data-testid=stSelectbox]").filter(has_text="which one?").click()
    pg.get_by_role("option", name="onnx/decoder_model.onnx").click()
    pg.get_by_role("button", name="Load this model").click()
    pg.locator("[data-testid='stSidebar']").get_by_text("decoder_model", exact=True).wait_for(timeout=60_000)
    pg.wait_for_selector("text=Weight tensors", timeout=60_000)
    _wait_for_charts(pg, 2)
    SHOTS.mkdir(exist_ok=True)
    pg.screenshot(path=str(SHOTS / "archive_of_models.png"))
    # the next model of the set, from the same upload
    pg.locator("[data-testid=stSelectbox]").filter(has_text="which one?").click()
    pg.get_by_role("option", name="onnx/encoder_model.onnx").click()
    pg.get_by_role("button", name="Load this model").click()
    pg.locator("[data-testid='stSidebar']").get_by_text("encoder_model", exact=True).wait_for(timeout=60_000)
    _no_traceback(pg)
    assert not pages.errors

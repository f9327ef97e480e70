"""Issue 27: the memory the app's server holds for one uploaded model once it is loaded, in Chromium.

Starts ``streamlit run app.py`` (its own run store), opens the Model page, uploads the generated ~100 MB
transformer (after a bundled sample through the same pages, so that what any upload loads once is not
counted), waits for its inspection, then switches pages twice (the rerun after which Streamlit's copy of
the upload is gone) and reads the server's resident memory (VmRSS) before the upload, once loaded and after
the switches. Target (the issue's): once an upload is saved the server holds at most 0.2x its size for it.

    python -m bench upload-memory
    python -m bench upload-memory --size small
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

from app_first_load import CHROMIUM, CHROMIUM_ARGS, READY, _free_port, start_app  # noqa: E402
from common import results, synthetic  # noqa: E402

TARGET_X = 0.2
#: The sample uploaded first, so that what the server loads once for any upload is not counted as this one's.
WARM_UP = ROOT / "sample_models" / "transformer.onnx"


def _rss(pid: int) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(text.split("VmRSS:")[1].split()[0]) * 1024


def _switch_pages(page) -> None:
    """Shrink, then back to Model: the reruns after which Streamlit's copy of the last upload is gone."""
    for link, ready in (("Shrink", "text=Shrink and measure"), ("Model", "text=Weight tensors")):
        page.get_by_role("link", name=link).click()
        page.wait_for_selector(ready, timeout=60_000)
        page.wait_for_timeout(3000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    synthetic.add_size_option(parser)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from tests.e2e.conftest import upload  # once the app is idle (a file given while it draws is dropped)

    result = results.begin("upload-memory", argv)
    model = synthetic.sized_model(args.size)
    size = model.stat().st_size
    port = _free_port()
    app = start_app(port)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_selector(READY, timeout=60_000)
            page.wait_for_timeout(3000)
            cold = _rss(app.pid)
            # a bundled sample through the same pages first: the modules and caches every upload's pages load once
            # (plotly, the inspection, the Shrink page) are the server's, not the upload's
            upload(page, WARM_UP)
            page.wait_for_selector("text=Weight tensors", timeout=60_000)
            _switch_pages(page)
            before = _rss(app.pid)
            upload(page, model)
            page.wait_for_selector("text=Weight tensors", timeout=180_000)
            page.wait_for_timeout(3000)
            loaded = _rss(app.pid)
            _switch_pages(page)
            settled = _rss(app.pid)
            upload(page, WARM_UP)  # the visitor moves on to another model: what was the upload's goes with it
            page.get_by_role("heading", name=WARM_UP.stem, exact=True).wait_for(timeout=60_000)  # not the last one's
            _switch_pages(page)
            replaced = _rss(app.pid)
            browser.close()
    finally:
        app.terminate()
        app.wait(timeout=30)
    held = settled - before
    rows = [["app opened", f"{cold / 1e6:.0f} MB", ""],
            [f"before the upload (after a {WARM_UP.stat().st_size / 1e6:.1f} MB sample went through the same pages)",
             f"{before / 1e6:.0f} MB", ""],
            ["model loaded and inspected", f"{loaded / 1e6:.0f} MB", f"{(loaded - before) / 1e6:+.0f} MB ({(loaded - before) / size:+.2f}x)"],
            ["after two page switches", f"{settled / 1e6:.0f} MB", f"{held / 1e6:+.0f} MB ({held / size:+.2f}x)"],
            ["after the sample replaced it", f"{replaced / 1e6:.0f} MB", f"{(replaced - before) / 1e6:+.0f} MB"]]  # fmt: skip
    for row in rows:
        print(" | ".join(row), flush=True)
    results.finish(
        result, ["moment", "server resident memory", "held for the upload (x file)"], rows,
        targets=[results.Target(f"the server holds <= {TARGET_X:g}x an upload once it is loaded", held <= TARGET_X * size,
                                f"{model.stem}, {size / 1e6:.1f} MB")],
        notes=["One browser session; VmRSS of the `streamlit run` process. The session holds an uploaded .onnx as "
               "its graph pointing into its saved copy (its weights are read there by the workers), and Streamlit's "
               "own copy of the upload goes once it is loaded."],
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

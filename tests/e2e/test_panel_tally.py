"""The browser panel's top classes of a tally, in Chromium, byte for byte as the server keeps them."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import numpy as np
import pytest

from shrinkray.measure.parity import top_two

pytestmark = pytest.mark.e2e

PANEL = Path(__file__).resolve().parents[2] / "app_ui" / "browser_component" / "panel.js"


def _functions(*names: str) -> str:
    source = PANEL.read_text()
    return "".join(re.search(rf"function {name}\(.*?\n}}\n", source, re.S).group(0) for name in names)


def test_the_pages_top_two_matches_the_servers(chromium):
    """float32 and float16 scores, class axis last or inside, a NaN among them: the page's top classes and gaps
    are the bytes numpy's top_two gives (a verdict on the tally would otherwise differ from the server's)."""
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(2, 5, 7)).astype(np.float32)
    scores[0, 1, 3] = np.nan
    page = chromium.new_page()
    try:
        code = _functions("bytesFromBase64", "base64FromBytes", "halfToFloat", "topTwo")
        for values, kind, array in ((scores, "float32", np.float32), (scores.astype(np.float16), "float16", np.uint16)):
            for axis in (-1, 1):
                data = base64.b64encode(np.ascontiguousarray(values).view(array).tobytes()).decode()
                script = """(args) => { CODE
                    const [data, dims, axis, kind] = args;
                    const bytes = bytesFromBase64(data);
                    const Kind = kind === "float16" ? Uint16Array : Float32Array;
                    const tensor = { dims, type: kind, data: new Kind(bytes.buffer, 0, bytes.byteLength / Kind.BYTES_PER_ELEMENT) };
                    return topTwo("s", tensor, axis);
                }""".replace("CODE", code)  # fmt: skip
                got = page.evaluate(script, [data, list(values.shape), axis, kind])
                want = top_two(values, axis)
                assert got["dims"] == list(want.shape)
                assert base64.b64decode(got["data"]) == want.astype("<f8").tobytes(), (kind, axis)
    finally:
        page.close()

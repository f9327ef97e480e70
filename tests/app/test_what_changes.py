"""The finished run's "What changes" section: the recommended variant's outputs beside the original's, another
variant on request, model text escaped (issue 29, item 2)."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))


def _show(path: str) -> None:
    import pickle

    from app_ui.results import show_results

    with open(path, "rb") as fh:
        show_results(pickle.load(fh))


@pytest.fixture(scope="module")
def comparison():
    """The cnn sample: weights-int8 passes (recommended), 4-level palettization moves the top class; a line
    reader's output with a hostile alphabet joins both, as a CTC model would give it."""
    import numpy as np
    from helpers import cached_sample

    from shrinkray.measure.parity import OutputKind, compare_outputs
    from shrinkray.measure.results import CompareSettings
    from shrinkray.measure.what_changes import worst_examples
    from shrinkray.pipeline.compare import compare

    c = compare(cached_sample("cnn"), CompareSettings(methods=[("weights-int8", {}), ("palettize", {"levels": 4})],
                                                       latency=False, brotli_quality=1))  # fmt: skip
    steps = np.full((2, 12, 4), 0.01)
    steps[:, :, 0] = 0.9  # the blank everywhere, then one character per line
    ref, var = steps.copy(), steps.copy()
    ref[:, 3, 1] = var[0, 3, 1] = var[1, 3, 2] = 2.0
    kinds = {"rec": OutputKind("scores", -1, "test")}
    parity = compare_outputs({"rec": ref}, {"rec": var}, kinds)
    line = worst_examples(parity, {"rec": ref}, {"rec": var}, [{"x": np.zeros((2, 1), np.float32)}], kinds,
                          alphabet=["<img src=x onerror=alert(1)>", "ok"])  # fmt: skip
    for r in c.variants:
        r.examples += line
    for r in c.all:
        r.model = None
    return c


def _html(at) -> str:
    return "\n".join(str(getattr(e.proto, "body", "")) for e in at.get("html"))


def test_the_recommended_variant_is_shown_first_and_another_on_request(comparison, tmp_path):
    from shrinkray.verdict.advice import recommended

    best = recommended(comparison).key
    assert best == "weights-int8"
    path = tmp_path / "comparison.pkl"
    path.write_bytes(pickle.dumps(comparison))
    at = AppTest.from_function(_show, args=(str(path),), default_timeout=120).run()
    assert not at.exception, at.exception
    assert "#### What changes" in [m.value for m in at.markdown]
    picker = at.selectbox(key="what-changes:variant")
    assert picker.value == best and picker.options == ["weights-int8 (recommended)", "palettize levels=4"]
    page = _html(at)
    assert "sr-changes" in page and "<code>scores</code>" in page
    assert page.count('class="sr-ex"') == 3 + 2  # 3 inputs of the scores (the default), both lines
    assert "<mark>" in page  # the changed line's character
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "<img src=x" not in page  # model text, escaped
    worst = comparison.get(best).examples[0].examples[0]
    assert f'<div class="sr-where">{worst.where}</div>' in page  # the worst input first
    at.selectbox(key="what-changes:variant").set_value("palettize levels=4").run()
    assert not at.exception, at.exception
    other = _html(at)
    assert '<div class="sr-label">palettize levels=4</div>' in other
    assert comparison.variants[1].examples[0].examples[0].where in other
    at.radio(key="what-changes:shown").set_value(1).run()
    assert _html(at).count('class="sr-ex"') == 1 + 1

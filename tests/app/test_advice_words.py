"""The app speaks the app's language: the result cards of failing and slower variants name the app's
controls, never a command-line flag (the CLI words the same hints as flags)."""

from __future__ import annotations

import dataclasses
import pickle
import re
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _show(path: str) -> None:
    import pickle

    from app_ui.results import show_results

    with open(path, "rb") as fh:
        show_results(pickle.load(fh))


@pytest.fixture(scope="module")
def failing_and_slower(tmp_path_factory) -> Path:
    """mlp under the absolute verdict: weights-int8 fails (culprits found), palettize at 8 levels fails (no
    search: the culprit-search hint) and moves tensors a lot (warnings), float16 passes but is made 1.5x slower."""
    from helpers import cached_sample, steady_timings

    from shrinkray.measure.parity import VerdictSettings
    from shrinkray.measure.results import CompareSettings
    from shrinkray.pipeline.compare import compare

    settings = CompareSettings(
        methods=[("weights-int8", {}), ("palettize", {"levels": 8}), ("float16", {})], batches=[1], threads=[1],
        verdict=VerdictSettings(profile="absolute"), runs=3, warmup=1, latency_budget_s=1, culprit_budget_s=5,
        brotli_quality=5, culprits=True,
    )  # fmt: skip
    c = steady_timings(compare(cached_sample("mlp"), settings))
    c.get("palettize levels=8").culprits = []
    base = c.original.latency[0]
    f16 = c.get("float16")
    f16.latency = [dataclasses.replace(s, median_ms=base.median_ms * 1.5, ratio=1.5, ratio_low=1.45, ratio_high=1.55)
                   if (s.threads, s.batch) == (base.threads, base.batch) else s for s in f16.latency]  # fmt: skip
    path = tmp_path_factory.mktemp("advice") / "comparison.pkl"
    path.write_bytes(pickle.dumps(c))
    return path


def _texts(at: AppTest) -> list[str]:
    kinds = ("markdown", "caption", "info", "warning", "error", "success")
    texts = [str(e.value) for kind in kinds for e in at.get(kind)]
    texts += [str(m.proto.help) for m in at.metric] + [str(m.label) for m in at.metric]
    return texts


def test_failing_and_slower_cards_name_no_flag(failing_and_slower):
    from shrinkray.verdict.advice import advise

    c = pickle.loads(failing_and_slower.read_bytes())
    hints = {h.setting for a in advise(c) for h in a.hints}
    assert {"exclude", "auto", "culprits"} <= hints, hints  # every kind of hint is on the page
    assert "methods" not in hints, hints  # weights-int8 and float16 were both measured: never suggested again
    at = AppTest.from_function(_show, args=(str(failing_and_slower),), default_timeout=120).run()
    assert not at.exception, at.exception
    texts = _texts(at)
    page = "\n".join(texts)
    assert "Fails: " in page and "1.50x slower" in page
    leaks = [t for t in texts if FLAG.search(t.replace("\\", ""))]
    assert not leaks, leaks
    # ...and the app's own controls are named instead.
    assert '"Exclude"' in page.replace("\\", "") and "Smallest that passes" in page
    assert "find the tensors that" in page
    assert "prefer" not in page.lower()  # the float-compute methods are on this page already (tests/verdict/test_advice.py)


def test_the_cli_words_the_same_hints_as_flags(failing_and_slower):
    from shrinkray.cli import advice_lines

    lines = "\n".join(advice_lines(pickle.loads(failing_and_slower.read_bytes())))
    assert "--exclude" in lines and "-m auto" in lines and "--culprits" in lines and "--methods weights-int8" not in lines


def test_a_surely_slower_variant_shows_its_change_even_when_timing_was_too_noisy(failing_and_slower, tmp_path):
    """Timing can end "too noisy to tell" with its whole interval far beyond 1 (3.7-4.2x): the advice says
    "slower", so the card's Latency must not look unchanged (it showed no change beside "4.07x slower")."""
    c = pickle.loads(failing_and_slower.read_bytes())
    base = c.original.latency[0]
    f16 = c.get("float16")
    f16.latency = [dataclasses.replace(s, settled=False) if (s.threads, s.batch) == (base.threads, base.batch) else s
                   for s in f16.latency]  # fmt: skip
    path = tmp_path / "noisy.pkl"
    path.write_bytes(pickle.dumps(c))
    at = AppTest.from_function(_show, args=(str(path),), default_timeout=120).run()
    assert not at.exception, at.exception
    assert "1.50x slower" in "\n".join(_texts(at))
    cards = [m for m in at.metric if m.label == "Latency" and "1.50x slower than the original" in str(m.proto.help)]
    assert [m.delta for m in cards] == ["+50% time"], [m.delta for m in at.metric]


def _with_float16_timing(comparison_file, tmp_path, **timing):
    """The page of a comparison whose float16 timing at the first setting is replaced by ``timing``."""
    c = pickle.loads(comparison_file.read_bytes())
    base = c.original.latency[0]
    f16 = c.get("float16")
    f16.latency = [dataclasses.replace(s, **timing) if (s.threads, s.batch) == (base.threads, base.batch) else s
                   for s in f16.latency]  # fmt: skip
    path = tmp_path / "timing.pkl"
    path.write_bytes(pickle.dumps(c))
    at = AppTest.from_function(_show, args=(str(path),), default_timeout=120).run()
    assert not at.exception, at.exception
    return at


def test_a_latency_too_noisy_to_call_says_so_on_the_card(failing_and_slower, tmp_path):
    """Timing that ended too noisy with its interval around 1 showed a bare "0.26 ms" (no change, no word):
    next to a card with "-20% time" it read as unchanged. The card says "too noisy to tell", uncoloured."""
    at = _with_float16_timing(failing_and_slower, tmp_path, ratio=0.8, ratio_low=0.6, ratio_high=1.1, settled=False)
    noisy = [m for m in at.metric if m.label == "Latency" and "too noisy to tell" in str(m.proto.help)]
    latency = [m for m in at.metric if m.label == "Latency"]
    assert len(latency) == 3 and latency[-1] in noisy, [m.delta for m in latency]  # float16 is the third card
    assert latency[-1].delta == "too noisy to tell", latency[-1].delta
    assert all(m.delta == "too noisy to tell" or m.delta.endswith("% time") for m in noisy), [m.delta for m in noisy]
    assert latency[-1].proto.color == latency[-1].proto.MetricColor.GRAY  # neither better (green) nor worse (red)


def test_a_latency_within_the_noise_shows_its_ratio_to_the_original(failing_and_slower, tmp_path):
    """A bare "0.23 ms" compared with nothing (walkthrough 2026-11-27): a settled ratio inside +-5% shows
    "0.97x the original's", uncoloured, so the time reads against the original's."""
    at = _with_float16_timing(failing_and_slower, tmp_path, ratio=0.97, ratio_low=0.95, ratio_high=0.99, settled=True)
    card = [m for m in at.metric if m.label == "Latency"][-1]  # float16 is the third card
    assert card.delta == "0.97x the original's", card.delta
    assert card.proto.color == card.proto.MetricColor.GRAY

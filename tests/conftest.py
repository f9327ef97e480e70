"""Shared fixtures (where the sample models live and a loader for them) and the test tiers.

Every test gets exactly one tier marker (registered in pyproject.toml, run with -m):
unit (the default: fast), app (Streamlit AppTest), e2e (Chromium), fuzz (hypothesis
fuzzing) and slow (full comparisons, child processes). A whole file or folder gets its
tier from FILE_TIERS below; a single slow test carries ``@pytest.mark.slow`` itself.
"""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

TESTS = Path(__file__).resolve().parent
SAMPLES = TESTS.parent / "sample_models"

TIERS = ("unit", "app", "e2e", "fuzz", "slow")
#: A folder under tests/ or a test file's name -> tier, for files and folders that belong to one tier whole.
FILE_TIERS = {
    "app": "app",  # Streamlit AppTest
    "e2e": "e2e",  # a real browser against `streamlit run`
    "test_fuzz_loader.py": "fuzz",  # hypothesis mutations of valid models
    "test_cli_compare.py": "slow",  # `shrinkray compare` on every sample through the CLI
    "test_runqueue_rq.py": "slow",  # a redis-server and RQ worker processes
}


def tier_of(item: pytest.Item) -> str:
    """The tier a test belongs to: its own tier marker, else its file's or folder's, else unit."""
    own = {m.name for m in item.iter_markers() if m.name in TIERS}
    if len(own) > 1:
        raise pytest.UsageError(f"{item.nodeid} is marked {sorted(own)}: a test belongs to exactly one tier")
    if own:
        return own.pop()
    path = Path(item.path).resolve()
    try:
        first = path.relative_to(TESTS).parts[0]
    except ValueError:
        return "unit"
    return FILE_TIERS.get(first) or FILE_TIERS.get(path.name, "unit")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = tier_of(item)
        if not any(m.name == tier for m in item.iter_markers()):
            item.add_marker(tier)


@pytest.fixture
def load_sample():
    """``load_sample("mlp")`` returns a fresh ModelProto of sample_models/mlp.onnx."""

    def _load(name: str) -> onnx.ModelProto:
        return onnx.load(str(SAMPLES / f"{name}.onnx"))

    return _load

"""Shared fixtures: where the sample models live and a loader for them."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

SAMPLES = Path(__file__).resolve().parent.parent / "sample_models"


@pytest.fixture
def load_sample():
    """``load_sample("mlp")`` returns a fresh ModelProto of sample_models/mlp.onnx."""

    def _load(name: str) -> onnx.ModelProto:
        return onnx.load(str(SAMPLES / f"{name}.onnx"))

    return _load

"""Measurements of a model and its variants: download sizes, inputs, parity and latency.

Names are imported on first use (PEP 562), so ``import shrinkray.measure.parity``
does not load the input synthesizer (onnx, Pillow) or anything else it does not need.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "InputOptions": "inputs",
    "load_inputs": "inputs",
    "synthesize": "inputs",
    "LatencyStats": "latency",
    "measure_latency": "latency",
    "Parity": "parity",
    "compare_outputs": "parity",
    "Sizes": "sizes",
    "measure_many": "sizes",
    "measure_sizes": "sizes",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"shrinkray.measure.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'shrinkray.measure' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])

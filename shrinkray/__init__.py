"""Shrink Ray Studio: make ONNX models smaller and show what it costs.

The public Python API::

    import shrinkray
    loaded = shrinkray.load("model.onnx")
    summary = shrinkray.inspect(loaded)
    variant = shrinkray.shrink(loaded, "weights-int8", granularity="per-channel")
    shrinkray.save(variant.model, "model.weights-int8.onnx", protect=[loaded.path])

Names load on first use (PEP 562), so ``import shrinkray.measure.results`` or
``shrinkray.verdict.advice`` does not pull in ONNX Runtime and every method.
The engine's layers are subpackages, lowest first: ``io`` and ``pricing``,
``graph``, ``measure``, ``methods``, ``verdict``, ``pipeline``, ``runs``,
``report``, then the ``cli`` (docs/architecture.md draws them).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

__version__ = "0.1.0"

#: public name -> (module, attribute)
_API = {
    "LoadedModel": ("shrinkray.io.files", "LoadedModel"),
    "ModelSummary": ("shrinkray.pipeline.inspect", "ModelSummary"),
    "ShrinkRayError": ("shrinkray.errors", "ShrinkRayError"),
    "Variant": ("shrinkray.methods", "Variant"),
    "all_methods": ("shrinkray.methods", "all_methods"),
    "get_method": ("shrinkray.methods", "get_method"),
    "inspect": ("shrinkray.pipeline.inspect", "inspect_model"),
    "load": ("shrinkray.io.files", "load"),
    "load_any": ("shrinkray.io.archive", "load_any"),
    "save": ("shrinkray.io.files", "save"),
    "shrink": ("shrinkray.pipeline.shrink", "shrink"),
    "validate": ("shrinkray.graph.validate", "validate"),
}

__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    if name not in _API:
        if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
            return importlib.import_module(f"{__name__}.{name}")  # shrinkray.io.archive, shrinkray.report.formats...
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _API[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})

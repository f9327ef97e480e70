"""Shrink Ray Studio: make ONNX models smaller and show what it costs.

The public Python API::

    import shrinkray
    loaded = shrinkray.load("model.onnx")
    summary = shrinkray.inspect(loaded)
    variant = shrinkray.shrink(loaded, "weights-int8", granularity="per-channel")
    shrinkray.save(variant.model, "model.weights-int8.onnx", protect=[loaded.path])

Names load on first use (PEP 562), so ``import shrinkray.results`` or
``shrinkray.advice`` does not pull in ONNX Runtime and every method.
``shrink``, ``inspect`` and ``validate`` are both API functions and
submodules: the package keeps the function under that name even after the
submodule is imported (as the eager imports used to).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

__version__ = "0.1.0"

#: public name -> (module, attribute)
_API = {
    "LoadedModel": ("shrinkray.io", "LoadedModel"),
    "ModelSummary": ("shrinkray.inspect", "ModelSummary"),
    "ShrinkRayError": ("shrinkray.errors", "ShrinkRayError"),
    "Variant": ("shrinkray.methods", "Variant"),
    "all_methods": ("shrinkray.methods", "all_methods"),
    "get_method": ("shrinkray.methods", "get_method"),
    "inspect": ("shrinkray.inspect", "inspect_model"),
    "load": ("shrinkray.io", "load"),
    "save": ("shrinkray.io", "save"),
    "shrink": ("shrinkray.shrink", "shrink"),
    "validate": ("shrinkray.validate", "validate"),
}

#: API functions that share their name with a submodule.
_SHADOWED = {name for name, (module, _) in _API.items() if module == f"{__name__}.{name}"}

__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    if name not in _API:
        if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
            return importlib.import_module(f"{__name__}.{name}")  # shrinkray.archive, shrinkray.report...
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _API[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})


class _Package(types.ModuleType):
    """Importing ``shrinkray.shrink`` sets the package attribute ``shrink`` to the submodule; keep the function."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            return  # the submodule stays in sys.modules; the package name is the API function
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

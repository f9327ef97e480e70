"""Shrink Ray Studio: make ONNX models smaller and show what it costs.

The public Python API::

    import shrinkray
    loaded = shrinkray.load("model.onnx")
    summary = shrinkray.inspect(loaded)
    variant = shrinkray.shrink(loaded, "weights-int8", granularity="per-channel")
    shrinkray.save(variant.model, "model.weights-int8.onnx", protect=[loaded.path])
"""

from shrinkray.errors import ShrinkRayError
from shrinkray.inspect import ModelSummary
from shrinkray.inspect import inspect_model as inspect
from shrinkray.io import LoadedModel, load, save
from shrinkray.methods import Variant, all_methods, get_method
from shrinkray.shrink import shrink
from shrinkray.validate import validate

__version__ = "0.1.0"

__all__ = [
    "LoadedModel",
    "ModelSummary",
    "ShrinkRayError",
    "Variant",
    "all_methods",
    "get_method",
    "inspect",
    "load",
    "save",
    "shrink",
    "validate",
]

"""The method registry. Importing this package registers every method."""

from shrinkray.methods import (  # noqa: F401 - registration
    auto,
    dynamic_int8,
    float16,
    palettize,
    weights_int4,
    weights_int8,
)
from shrinkray.methods.base import (
    MethodOptions,
    MethodSpec,
    TensorChange,
    Variant,
    all_methods,
    default_methods,
    get_method,
)

__all__ = ["MethodOptions", "MethodSpec", "TensorChange", "Variant", "all_methods", "default_methods", "get_method"]

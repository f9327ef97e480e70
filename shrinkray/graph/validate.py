"""Checking that a model is valid ONNX and that ONNX Runtime can open it.

Every model we produce goes through :func:`validate` before it is offered to
the user.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import onnx

from shrinkray.graph.checks import check_structure
from shrinkray.graph.prefold import measuring_session
from shrinkray.graph.sessions import open_session
from shrinkray.io.files import needs_external_data
from shrinkray.memory import release_free_memory

if TYPE_CHECKING:
    import onnxruntime as ort

#: Models from this size on are validated with ``keep_session`` from a measuring copy (measure/prefold.py):
#: ONNX Runtime's own constant folding held every decoded weight of a 26 MB weights-int8 model at once
#: (+390 MB while opening; +136 MB from its copy). Smaller ones open from their bytes (no file written).
MEASURING_COPY_MIN_BYTES = 16 << 20


def validate(model: onnx.ModelProto, *, keep_session: bool = False,
             open_runtime: bool = True) -> ort.InferenceSession | None:
    """Raise unless the model passes onnx.checker and opens in an ONNX Runtime CPU session.

    The session opens without graph optimizations: that proves ONNX Runtime
    accepts every node and type, while constant folding would materialize all
    decoded weights (time and memory of a full float copy). With
    ``keep_session`` (compare, which is about to measure the model anyway) the
    optimized single-thread session is opened instead and returned, so the
    model is opened once for validation, parity and culprits (from a measuring copy from
    :data:`MEASURING_COPY_MIN_BYTES` on). ``open_runtime=False``: onnx.checker
    only; the caller opens the session itself (compare does, from the file it writes, after dropping
    the model) and must treat a failure to open as a failed validation.
    """
    serialized = None if needs_external_data(model) else model.SerializeToString()
    check_structure(model, serialized)
    if not open_runtime:
        return None
    if keep_session and serialized is not None and len(serialized) >= MEASURING_COPY_MIN_BYTES:
        del serialized  # opened from a measuring copy: its decodes folded one weight at a time, no bytes held
        release_free_memory()
        session, _ = measuring_session(model)
        release_free_memory()
        return session
    release_free_memory()  # the checker's parsed copy, before ONNX Runtime makes its own
    session = open_session(model, optimized=keep_session, serialized=serialized)
    del serialized
    if not keep_session:
        del session
        session = None
    release_free_memory()  # the session's copy, before the caller saves or measures
    return session

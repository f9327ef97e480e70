"""Opening ONNX Runtime CPU sessions, from memory or from a file, with ONNX Runtime imported on first use."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import onnx

from shrinkray.graph.checks import explain_runtime_error
from shrinkray.io import kept_files
from shrinkray.io.files import needs_external_data, save
from shrinkray.memory import release_free_memory

if TYPE_CHECKING:
    import onnxruntime as ort

#: ONNX Runtime logs errors of failed runs itself (coloured lines on stderr) before raising them: the
#: exception carries the same text, which explain_runtime_error words. Only fatal lines are let through.
ORT_LOG_SEVERITY = 4


@functools.cache
def runtime():
    """ONNX Runtime, imported when a session is first opened (readers of results never need it)."""
    import onnxruntime

    onnxruntime.set_default_logger_severity(ORT_LOG_SEVERITY)
    return onnxruntime


def session_options(optimized: bool = True, threads: int = 1) -> ort.SessionOptions:
    ort = runtime()
    opts = ort.SessionOptions()
    opts.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimized else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = ORT_LOG_SEVERITY
    return opts


def open_session(
    model: onnx.ModelProto, *, optimized: bool = True, threads: int = 1, serialized: bytes | None = None
) -> ort.InferenceSession:
    """Open a CPU session from memory (or a temp file for models over 2 GB)."""
    ort = runtime()
    opts = session_options(optimized, threads)
    try:
        if needs_external_data(model):
            with tempfile.TemporaryDirectory() as tmp:
                path = save(model, Path(tmp) / "model.onnx")
                return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        data = serialized if serialized is not None else model.SerializeToString()
        session = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - ORT raises several unrelated exception types
        raise explain_runtime_error(exc, model) from None
    release_free_memory()  # what ONNX Runtime freed while opening (see open_file_session)
    return session


def open_file_session(path: str | Path, *, optimized: bool = True, threads: int = 1,
                      initializers: dict[str, np.ndarray] | None = None) -> ort.InferenceSession:  # fmt: skip
    """Open a CPU session on a model file (external data beside it): no serialized copy in Python.
    ``initializers``: values of the file's tensors held in memory (a measuring copy's), which the session
    takes as they are (ONNX Runtime's ``add_initializer``: no copy) and keeps alive as long as it lives. A
    file a run keeps compressed (io/kept_files.py) opens from its bytes.

    Opening frees most of what it allocates (the parsed model, every intermediate tensor of constant
    folding: a 15.8 MB weights-int4 file of the 101 MB benchmark model freed ~650 MB), and glibc keeps
    it resident; it is returned to the system right away (issue 12, measured 2026-11-23; docs/benchmarks.md "Speed and memory").
    """
    ort = runtime()
    options = session_options(optimized, threads)
    held = [(name, ort.OrtValue.ortvalue_from_numpy(array)) for name, array in (initializers or {}).items()]
    for name, value in held:
        options.add_initializer(name, value)
    try:
        source = kept_files.model_bytes(path) if kept_files.is_compressed(path) else str(path)
        session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        del source
    except Exception as exc:  # noqa: BLE001 - ORT raises several unrelated exception types
        raise explain_runtime_error(exc) from None
    if held:  # the values must outlive the session: they are its weights
        session.held_initializers = (options, held, initializers)
    release_free_memory()
    return session

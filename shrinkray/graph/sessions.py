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

    Opening frees most of what it allocates (the parsed model, every intermediate tensor of constant
    folding: a 15.8 MB weights-int4 file of the 101 MB benchmark model freed ~650 MB), and glibc keeps
    it resident; it is returned to the system right away (issue 12, measured 2026-11-23; docs/benchmarks.md "Speed and memory").

    ``initializers``: values of the file's tensors held in memory (a measuring copy's, whose data file is
    empty). The session takes them as they are (ONNX Runtime's ``add_initializer``: no copy; it keeps them
    alive as long as it lives). Some graph fusions read a tensor from the file themselves (Conv +
    BatchNormalization): the empty file makes that fail loudly, never silently, and then the values are given
    as ``add_external_initializers``, which puts a copy of them in the graph before any optimization. A file a
    run keeps compressed (io/kept_files.py) opens from its bytes.
    """
    try:
        if initializers:
            try:
                return _opened(path, optimized, threads, initializers, copied=False)
            except Exception:  # noqa: BLE001 - a fusion read a tensor from the empty file: give copies instead
                return _opened(path, optimized, threads, initializers, copied=True)
        return _opened(path, optimized, threads)
    except Exception as exc:  # noqa: BLE001 - ORT raises several unrelated exception types
        raise explain_runtime_error(exc) from None
    finally:
        release_free_memory()


def _opened(path: str | Path, optimized: bool, threads: int, initializers: dict[str, np.ndarray] | None = None,
            copied: bool = False) -> ort.InferenceSession:  # fmt: skip
    """The session of :func:`open_file_session`, ``initializers`` given as they are or (``copied``) as copies."""
    ort = runtime()
    options = session_options(optimized, threads)
    names = list(initializers or {})
    values = [ort.OrtValue.ortvalue_from_numpy(initializers[n]) for n in names]
    if copied:
        options.add_external_initializers(names, values)
    else:
        for name, value in zip(names, values, strict=True):
            options.add_initializer(name, value)
    source = kept_files.model_bytes(path) if kept_files.is_compressed(path) else str(path)
    session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    if values and not copied:  # its weights: they must outlive it
        session.held_initializers = (options, values, initializers)
    return session

"""Tensors kept in external data files, read and written one at a time.

A model over 2 GB cannot be one protobuf: its weights live in data files
beside the ``.onnx`` (which holds each tensor's file, offset and length).
Loading all of them (:func:`shrinkray.io.files.load`) costs the model's size in
memory before any work starts. A conversion that rewrites tensors one by one
does not need that: :func:`read_array` reads one tensor's bytes from its
checked place in the input's files, and :class:`DataFileWriter` appends each
result to the output's data file at once and leaves only a reference in the
graph, so memory holds the graph plus the tensors in flight.

Reads go through :func:`shrinkray.io.files.external_place` every time, which keeps
every file inside the model's folder whatever the graph names.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import external_data_helper, helper

from shrinkray.errors import ModelLoadError
from shrinkray.io.files import LoadedModel, external_place
from shrinkray.io.limits import is_external, short

#: Tensors of at least this many bytes start at a multiple of ALIGNMENT in the output's data file
#: (the granularity at which ONNX Runtime and other readers can map a tensor straight from the file).
ALIGN_FROM_BYTES = 1 << 20
ALIGNMENT = 1 << 16
#: The same rule as onnx's save (``size_threshold=1024`` on ``sys.getsizeof``): smaller tensors stay inline.
SIZE_THRESHOLD = 1024
COPY_CHUNK = 16 << 20


def _open_read(path: Path):
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    return os.fdopen(os.open(path, flags), "rb")


def read_bytes(tensor: onnx.TensorProto, base_dir: Path) -> Iterator[memoryview]:
    """The stored bytes of one external tensor, in pieces of at most COPY_CHUNK (for copying)."""
    place = external_place(tensor, base_dir)
    left = place.length
    buffer = bytearray(min(COPY_CHUNK, max(left, 1)))
    with _reading(place.location), _open_read(place.target) as fh:
        fh.seek(place.offset)
        while left > 0:
            view = memoryview(buffer)[: min(left, len(buffer))]
            got = fh.readinto(view)
            if not got:
                raise _ended(tensor, place.location)
            left -= got
            yield view[:got]


def read_array(tensor: onnx.TensorProto, base_dir: Path) -> np.ndarray:
    """One external tensor's values, read from its checked place (a fresh array the caller owns)."""
    place = external_place(tensor, base_dir)
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).newbyteorder("<")
    count = int(np.prod(tensor.dims, dtype=np.int64)) if len(tensor.dims) else 1
    if count * dtype.itemsize != place.length:
        raise ModelLoadError(
            f"Tensor {short(tensor.name)} declares {count * dtype.itemsize:,} bytes but its external data "
            f"holds {place.length:,}",
            "The data file does not belong to this model, or the model is damaged; export it again",
        )
    values = np.empty(count, dtype=dtype)
    with _reading(place.location), _open_read(place.target) as fh:
        fh.seek(place.offset)
        view = memoryview(values).cast("B")
        done = 0
        while done < place.length:
            got = fh.readinto(view[done:])
            if not got:
                raise _ended(tensor, place.location)
            done += got
    if sys.byteorder != "little":
        values = values.astype(dtype.newbyteorder("="))
    return values.reshape(tuple(int(d) for d in tensor.dims))


class _reading:
    """OSErrors while reading an input's data file become one ModelLoadError."""

    def __init__(self, location: str) -> None:
        self.location = location

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:
        if isinstance(exc, OSError):
            raise ModelLoadError(
                f"The external data file {short(self.location, 200)} could not be read "
                f"({exc.strerror or type(exc).__name__})",
                "Check the files' permissions, and that nothing changes them during the run",
            ) from None
        return False


def _ended(tensor: onnx.TensorProto, location: str) -> ModelLoadError:
    return ModelLoadError(
        f"External data file {short(location, 200)} ended early while reading tensor {short(tensor.name)}",
        "The data file is truncated or changed during the run; export the model again",
    )


class DataFileWriter:
    """Appends tensors' bytes to one data file and points the tensors at them.

    ``path`` is where the file is written now (a staging path); ``location``
    is the name the model records (the file's final name beside the model).
    Large tensors start on ALIGNMENT boundaries. Until :func:`finish`, the
    tensors written here carry a placeholder location no input can name (it
    holds a NUL, which loading refuses), so they are never mistaken for the
    input's tensors, even when the input's data file has the output's name.
    """

    PENDING = "\0shrinkray-output"

    def __init__(self, path: Path, location: str) -> None:
        self.location = location
        self._fh = open(path, "xb")  # noqa: SIM115 - closed by close(), after the last tensor
        self.size = 0

    def _start(self, length: int) -> int:
        if length >= ALIGN_FROM_BYTES and self.size % ALIGNMENT:
            pad = ALIGNMENT - self.size % ALIGNMENT
            self._fh.write(b"\0" * pad)
            self.size += pad
        return self.size

    def _point(self, tensor: onnx.TensorProto, offset: int, length: int) -> None:
        tensor.ClearField("raw_data")
        del tensor.external_data[:]
        for key, value in (("location", self.PENDING), ("offset", str(offset)), ("length", str(length))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        tensor.data_location = onnx.TensorProto.EXTERNAL

    def spill(self, tensor: onnx.TensorProto) -> bool:
        """Move an inline tensor's raw bytes into the file (when as large as onnx's save would move)."""
        if is_external(tensor) or not tensor.HasField("raw_data"):
            return False
        if sys.getsizeof(tensor.raw_data) < SIZE_THRESHOLD:
            return False
        data = tensor.raw_data
        offset = self._start(len(data))
        self._fh.write(data)
        self.size += len(data)
        self._point(tensor, offset, len(data))
        return True

    def spilled(self, tensor: onnx.TensorProto) -> onnx.TensorProto:
        """A new tensor pointing at ``tensor``'s bytes, appended to the file (for tensors the method just
        made: name, type, dims and raw bytes only). A new message, because clearing ``raw_data`` in place
        does not give its memory back: protobuf keeps it in the message's arena until the message goes."""
        data = tensor.raw_data
        light = onnx.TensorProto(name=tensor.name, data_type=tensor.data_type, dims=tensor.dims)
        offset = self._start(len(data))
        self._fh.write(data)
        self.size += len(data)
        self._point(light, offset, len(data))
        return light

    def copy(self, tensor: onnx.TensorProto, base_dir: Path) -> None:
        """Copy an external tensor of the input, chunk by chunk, and point it at the copy."""
        length = external_place(tensor, base_dir).length
        offset = self._start(length)
        for piece in read_bytes(tensor, base_dir):
            self._fh.write(piece)
            self.size += len(piece)
        self._point(tensor, offset, length)

    def written(self, tensor: onnx.TensorProto) -> bool:
        return is_external(tensor) and _location(tensor) == self.PENDING

    def close(self) -> None:
        if self._fh.closed:
            return
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()


def _location(tensor: onnx.TensorProto) -> str | None:
    found = None
    for entry in tensor.external_data:
        if entry.key == "location":
            found = entry.value
    return found


def finish(model: onnx.ModelProto, writer: DataFileWriter, base_dir: Path | None) -> None:
    """Make the model point only at the writer's file: copy the input's external tensors that stayed as
    they were (initializers and Constant tensors), spill large inline initializers (as onnx's save
    would), name the file, and close it."""
    for tensor in external_data_helper._get_initializer_tensors(model):
        if not is_external(tensor):
            writer.spill(tensor)
    for tensor in external_data_helper._get_all_tensors(model):
        if is_external(tensor) and not writer.written(tensor):
            if base_dir is None:
                raise ModelLoadError(
                    f"Tensor {short(tensor.name)} is in an external file that was not loaded",
                    "Load the model with its data files",
                )
            writer.copy(tensor, base_dir)
    for tensor in external_data_helper._get_all_tensors(model):
        if writer.written(tensor):
            for entry in tensor.external_data:
                if entry.key == "location":
                    entry.value = writer.location
    writer.close()


def values_in(source: LoadedModel | onnx.ModelProto) -> onnx.ModelProto:
    """The model with every tensor's values in its graph: ``source.model`` itself when none is left in a file,
    else a copy with each external tensor read from its checked place (hard links and a header pointing into the
    model's own file alike, which ``onnx.load_external_data`` refuses). For work that needs the whole model in
    a worker, given a model the server holds as its graph alone (:func:`with_values`)."""
    if isinstance(source, onnx.ModelProto):
        return source
    if not source.is_lazy:
        return source.model
    model = onnx.ModelProto()
    model.CopyFrom(source.model)
    base = Path(source.external_base)
    for tensor in external_data_helper._get_all_tensors(model):
        if is_external(tensor):
            read_in(tensor, base)
    return model


def read_in(tensor: onnx.TensorProto, base_dir: Path) -> None:
    """One external tensor's values read from its checked place into the tensor itself (no longer external)."""
    values = read_array(tensor, base_dir)
    del tensor.external_data[:]
    tensor.ClearField("data_location")
    tensor.raw_data = values.tobytes()


def with_values(fn: Callable[..., Any], source: LoadedModel | onnx.ModelProto, *args: Any, **kwargs: Any) -> Any:
    """``fn(model, *args, **kwargs)`` on the whole model (:func:`values_in`): what a capped worker runs when the
    server holds the model in place, ``run_capped(with_values, validate, loaded)``."""
    return fn(values_in(source), *args, **kwargs)

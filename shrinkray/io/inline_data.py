"""Where a one-file model keeps each weight's bytes inside its own file, so a header can point at them.

A model saved as one ``.onnx`` holds every initializer's ``raw_data`` inside the protobuf, as the tensor's
little-endian bytes, at a fixed offset. ONNX external data is "these bytes of that file", so a small header
whose initializers name offsets into (a hard link of) the model's own file is the same model, readable tensor
by tensor: a comparison reloads and measures the original from it instead of writing two more copies of its
weights (200 MB of scratch for a 100 MB upload, issue 27). The offsets come from the protobuf wire format
(``ModelProto.graph`` = field 7, ``GraphProto.initializer`` = 5, ``TensorProto.name`` = 8, ``raw_data`` = 9),
checked against the parsed model: a file that does not match in any way gives no places, and the caller
writes a copy as before.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass, replace
from pathlib import Path

import onnx

from shrinkray.io.files import LoadedModel, copy_field

_GRAPH, _INITIALIZER, _NAME, _RAW_DATA = 7, 5, 8, 9
_LENGTH_DELIMITED = 2
#: Tensors smaller than this stay in the header (as onnx.save's size_threshold does).
MIN_REFERENCED_BYTES = 1024


@dataclass(frozen=True)
class Place:
    """``length`` bytes at ``offset`` of the model's file: one initializer's raw data."""

    offset: int
    length: int


class _Malformed(ValueError):
    """The bytes are not the protobuf the parsed model says they are."""


def _varint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _Malformed("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(buf: memoryview, start: int, end: int):
    """(field number, wire type, start, end) of each field in ``buf[start:end]``; for a length-delimited field
    its payload's span, for others the span of the value's bytes."""
    pos = start
    while pos < end:
        key, pos = _varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, after = _varint(buf, pos, end)
        elif wire == 1:
            after = pos + 8
        elif wire == 5:
            after = pos + 4
        elif wire == _LENGTH_DELIMITED:
            length, pos = _varint(buf, pos, end)
            after = pos + length
        else:  # groups (3, 4) are not in ONNX
            raise _Malformed(f"wire type {wire}")
        if after > end:
            raise _Malformed("field past its message")
        yield number, wire, pos, after
        pos = after


def _only(buf: memoryview, start: int, end: int, number: int) -> tuple[int, int] | None:
    """The span of the one length-delimited field ``number`` (None when absent; malformed when repeated, as
    protobuf would then merge them)."""
    found = None
    for field, wire, begin, after in _fields(buf, start, end):
        if field == number:
            if found is not None or wire != _LENGTH_DELIMITED:
                raise _Malformed(f"field {number} twice")
            found = (begin, after)
    return found


def raw_data_places(path: str | Path, model: onnx.ModelProto) -> list[Place | None] | None:
    """For each of ``model.graph.initializer`` (parsed from ``path``), where its ``raw_data`` lies in the file
    (None for a tensor without raw data); None when the file does not match ``model`` (other initializers,
    names or lengths) or cannot be read so."""
    tensors = model.graph.initializer
    try:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            buf = memoryview(mapped)
            try:
                return _places(buf, tensors)
            finally:
                buf.release()
    except (OSError, ValueError):  # _Malformed is a ValueError; an empty file cannot be mapped
        return None


def _places(buf: memoryview, tensors) -> list[Place | None] | None:
    graph = _only(buf, 0, len(buf), _GRAPH)
    if graph is None:
        return None
    places: list[Place | None] = []
    for field, wire, begin, after in _fields(buf, *graph):
        if field != _INITIALIZER:
            continue
        if wire != _LENGTH_DELIMITED or len(places) >= len(tensors):
            return None
        tensor = tensors[len(places)]
        name = _only(buf, begin, after, _NAME)
        named = bytes(buf[name[0]:name[1]]) if name else b""
        if named != tensor.name.encode():
            return None
        raw = _only(buf, begin, after, _RAW_DATA)
        if raw is None:
            if tensor.raw_data:
                return None
            places.append(None)
            continue
        if raw[1] - raw[0] != len(tensor.raw_data):
            return None
        places.append(Place(raw[0], raw[1] - raw[0]))
    return places if len(places) == len(tensors) else None


def _copy_fields(source, target, skip: str) -> None:
    """Every set field of message ``source`` except ``skip`` into ``target``."""
    for descriptor, value in source.ListFields():
        if descriptor.name != skip:
            copy_field(target, descriptor, value)


def referencing_header(model: onnx.ModelProto, places: list[Place | None], location: str,
                       min_bytes: int = MIN_REFERENCED_BYTES) -> onnx.ModelProto:  # fmt: skip
    """``model`` with each initializer of ``min_bytes`` or more that has a place read from ``location`` (a
    file beside the header holding the model's own bytes) instead of holding its values; the rest as it is.
    Nothing of the weights is copied."""
    header = onnx.ModelProto()
    _copy_fields(model, header, skip="graph")
    _copy_fields(model.graph, header.graph, skip="initializer")
    for tensor, place in zip(model.graph.initializer, places, strict=True):
        if place is None or place.length < min_bytes:
            header.graph.initializer.add().CopyFrom(tensor)
            continue
        pointer = header.graph.initializer.add()
        _copy_fields(tensor, pointer, skip="raw_data")
        pointer.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", str(place.offset)), ("length", str(place.length))):
            entry = pointer.external_data.add()
            entry.key, entry.value = key, value
    return header


def hold_in_place(loaded: LoadedModel) -> LoadedModel:
    """``loaded`` (a one-file model loaded whole from its path) held as a header pointing into that file: the
    server keeps its graph, not its weights (a 100 MB upload held 1.3x its size in the app's memory, issue 27),
    and reads them in place when a worker needs them (:func:`shrinkray.io.external_data.values_in`). ``loaded``
    itself when its file does not match it or it is not one file; the file must stay until the model goes."""
    if loaded.path is None or loaded.is_lazy or loaded.external_data_files:
        return loaded
    path = Path(loaded.path)
    places = raw_data_places(path, loaded.model)
    if places is None or not any(p is not None and p.length >= MIN_REFERENCED_BYTES for p in places):
        return loaded
    header = referencing_header(loaded.model, places, path.name)
    return replace(loaded, model=header, external_base=path.parent.resolve(), in_place=True)

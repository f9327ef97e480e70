"""Model files a run keeps gzip-compressed on the server's disk, and reading them back as the model they hold.

A palettized variant keeps the original's raw size (it saves only once served compressed): kept as it is, a
100 MB upload's run held five variants plus the model, 3.24x its size, past the 3x a run may take (issue 27).
A variant whose file compresses to well under its size is kept as ``NAME.onnx.gz`` (gzip -1: 0.38x for a
palettized 100 MB transformer in 0.7 s, read back in 0.3 s). Everything that reads a kept variant (a
download, the browser panel's copy, a measuring session) goes through here and gets the model's own bytes.
"""

from __future__ import annotations

import gzip
import os
import shutil
import struct
import zlib
from pathlib import Path

#: The suffix of a kept-compressed model file (after its own ``.onnx``).
SUFFIX = ".gz"

#: gzip level for kept files: the fastest (the served sizes are measured apart, at gzip -9 and brotli).
LEVEL = 1

#: Bytes read at a time while compressing.
CHUNK = 8 << 20


def is_compressed(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a kept-compressed model file."""
    return str(path).endswith(".onnx" + SUFFIX)


def compress(path: str | os.PathLike) -> Path:
    """``path`` replaced by ``path.gz`` (the model's bytes, gzip -1). The compressed bytes are made in memory
    before the file is removed, so the two are never on disk together; the new file is written whole before
    it takes its name. Returns the new path."""
    path = Path(path)
    packer = zlib.compressobj(LEVEL, zlib.DEFLATED, 31)  # 31: the gzip format
    pieces = []
    with open(path, "rb") as source:
        while chunk := source.read(CHUNK):
            pieces.append(packer.compress(chunk))
    pieces.append(packer.flush())
    target = path.with_name(path.name + SUFFIX)
    tmp = target.with_name(target.name + ".tmp")
    path.unlink()
    with open(tmp, "wb") as out:
        for piece in pieces:
            out.write(piece)
    os.replace(tmp, target)
    return target


def model_bytes(path: str | os.PathLike) -> bytes:
    """The model's bytes, decompressed when the file is kept compressed."""
    path = Path(path)
    if is_compressed(path):
        with gzip.open(path, "rb") as source:
            return source.read()
    return path.read_bytes()


def copy_model(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """Copy the model in ``source`` to ``target`` as a plain ``.onnx`` file, streamed (never read whole)."""
    if not is_compressed(source):
        shutil.copyfile(source, target)
        return
    with gzip.open(source, "rb") as reader, open(target, "wb") as writer:
        shutil.copyfileobj(reader, writer, CHUNK)


def model_size(path: str | os.PathLike) -> int:
    """Bytes of the model in ``path`` (a kept-compressed file's own size, from its gzip trailer: kept files are
    single ONNX files, under protobuf's 2 GB, so the trailer's 32 bits hold it)."""
    path = Path(path)
    if not is_compressed(path):
        return path.stat().st_size
    with open(path, "rb") as source:
        source.seek(-4, os.SEEK_END)
        return struct.unpack("<I", source.read(4))[0]

"""Unpacking an uploaded .zip (a model plus its external data files) safely.

A single uploaded .onnx has no folder of siblings, so a model whose weights
live in external data files has to arrive as a .zip. The archive comes from a
stranger, so :func:`load_zip` checks every member *before* extracting
anything:

* names: no absolute paths, drive letters, ``..``, backslashes, control
  characters, or names that collide (exactly, by case, or a file used as a folder);
* kinds: regular files and folders only (no symbolic links, devices, pipes), not encrypted;
* counts and sizes: at most ``max_zip_files`` members, at most
  ``max_unpacked_bytes`` declared in total, at most ``max_compression_ratio``
  unpacked bytes per archive byte (zip bombs);

then streams each member out while counting the bytes actually produced (a
lying header cannot make it write more than the limit), into a fresh folder
of its own below the caller's ``workdir``.

Reading never trusts :mod:`zipfile` with the data: its BZIP2 and LZMA readers
inflate a whole compressed chunk at once (a 12 KB BZIP2 member inflates to
16 GiB before any size check can run). :func:`member_chunks` locates each
member's bytes itself and inflates every method (stored, deflate, bzip2,
lzma) through a decompressor capped at :data:`CHUNK` bytes per call, so memory
stays bounded whatever the archive says. Before :mod:`zipfile` lists the
members, :func:`_check_directory` walks the central directory entry by entry
and refuses one that holds more entries than the end record declares (a
directory of 3 million entries behind an end record that says 1 would
otherwise be parsed whole, at ~10x the archive's size in memory). On any failure that folder is
removed: nothing half-extracted stays behind. Finally the one .onnx in the
archive is loaded with :func:`shrinkray.io.files.load`, whose external-data policy
then resolves every data file inside the unpacked folder only.

Kept as one module (over 600 lines): every check an uploaded archive passes (member paths, links,
sizes, ratios, counts) is read and reviewed in one place, so no path through it can skip one.
"""

from __future__ import annotations

import bz2
import contextlib
import hashlib
import io
import lzma
import os
import re
import shutil
import stat
import struct
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from shrinkray.errors import LimitExceededError, ModelLoadError, SeveralModels, ShrinkRayError, UnsafeModelError
from shrinkray.io.files import LoadedModel, load, sweep_orphans
from shrinkray.io.limits import Limits, short

#: Ratio checks only start above this many unpacked bytes (tiny archives of zeros are harmless).
RATIO_FLOOR_BYTES = 1 << 20
CHUNK = 1 << 20
_DRIVE = re.compile(r"^[A-Za-z]:")
_SUPPORTED_COMPRESSION = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}


@dataclass
class _Member:
    info: zipfile.ZipInfo
    parts: tuple[str, ...]  # the normalised relative path
    is_dir: bool

    @property
    def path(self) -> str:
        return "/".join(self.parts)


def is_zip(data: bytes | str | os.PathLike) -> bool:
    """True when the bytes (or the file) start like a zip archive."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        head = bytes(data[:4])
    else:
        try:
            with open(data, "rb") as fh:
                head = fh.read(4)
        except OSError:
            return False
    return head in (b"PK\x03\x04", b"PK\x05\x06")


def _declared_entry_count(fh: BinaryIO, size: int) -> int | None:
    """Members the end-of-central-directory record declares, read before zipfile builds its list."""
    found = _end_record(fh, size)
    return None if found is None else found[0]


def _end_record(fh: BinaryIO, size: int) -> tuple[int, int, int] | None:
    """(entries, central directory size, where it starts in the file) from the end record, or None."""
    tail_size = min(size, 22 + 65535)
    fh.seek(size - tail_size)
    tail = fh.read(tail_size)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + 22 > len(tail):
        return None
    count, cd_size, cd_offset = struct.unpack("<HII", tail[at + 10 : at + 20])
    end_at = size - tail_size + at
    locator = at - 20
    if locator >= 0 and tail[locator : locator + 4] == b"PK\x06\x07":
        (offset,) = struct.unpack("<Q", tail[locator + 8 : locator + 16])
        if offset + 56 > size:
            return None
        fh.seek(offset)
        record = fh.read(56)
        if record[:4] != b"PK\x06\x06":
            return None
        count, cd_size, cd_offset = struct.unpack("<QQQ", record[32:56])
        end_at = size - tail_size + locator - 56
    # Bytes before the archive (a self-extracting stub) shift every offset by the same amount.
    start = end_at - cd_size
    if start < 0 or start - cd_offset < 0:
        return None
    return count, cd_size, start


_CENTRAL = struct.Struct("<4s24xHHH12x")  # signature, ..., name, extra and comment lengths, ... (46 bytes)


def _check_directory(fh: BinaryIO, size: int) -> None:
    """Walk the central directory's entries (never more than the end record declares, plus one) and
    refuse an archive whose directory disagrees with its end record, before zipfile parses it whole."""
    found = _end_record(fh, size)
    if found is None:
        return  # zipfile will say the archive is damaged
    declared, cd_size, start = found
    fh.seek(start)
    at, entries = 0, 0
    while at + _CENTRAL.size <= cd_size:
        head = fh.read(_CENTRAL.size)
        if len(head) < _CENTRAL.size or head[:4] != b"PK\x01\x02":
            break
        entries += 1
        if entries > declared:
            raise UnsafeModelError(
                f"The archive's central directory lists more members than its end record declares ({declared:,}); "
                "nothing was extracted",
                "The archive is damaged or forged; zip the files again",
            )
        name_len, extra_len, comment_len = _CENTRAL.unpack(head)[1:]
        at += _CENTRAL.size + name_len + extra_len + comment_len
        fh.seek(start + at)


def _member_name_problem(name: str) -> str | None:
    """Why a member name is refused, or None when it is a plain relative path."""
    if not name:
        return "has an empty name"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "has control characters in its name"
    if "\\" in name:
        return "uses backslashes in its name (a Windows path trick)"
    if name.startswith("/"):
        return "is an absolute path"
    if _DRIVE.match(name):
        return "names a drive letter"
    parts = name.split("/")
    if ".." in parts:
        return "climbs out of the archive with '..'"
    if any(len(p.encode("utf-8", "surrogateescape")) > 255 for p in parts) or len(name) > 1024:
        return "has a name too long for a file system"
    return None


def _unix_kind(info: zipfile.ZipInfo) -> str | None:
    """'link', 'special' or None (a regular file or folder, or no Unix mode recorded)."""
    kind = stat.S_IFMT(info.external_attr >> 16)
    if kind == stat.S_IFLNK:
        return "link"
    if kind in (0, stat.S_IFREG, stat.S_IFDIR):  # many zippers record permission bits only
        return None
    return "special"


def _is_junk(parts: tuple[str, ...]) -> bool:
    """Files macOS adds to archives (resource forks); never extracted."""
    return parts[0] == "__MACOSX" or parts[-1].startswith("._") or parts[-1] == ".DS_Store"


def _refuse(member: str, why: str) -> UnsafeModelError:
    return UnsafeModelError(
        f"The archive member {short(member, 120)} {why}; nothing was extracted",
        "Upload a plain .zip of the model folder (regular files only, relative names)",
    )


def _check_members(zf: zipfile.ZipFile, archive_bytes: int, limits: Limits) -> list[_Member]:
    """Validate every member; return the ones to extract. Raises before anything is written."""
    infos = zf.infolist()
    if len(infos) > limits.max_zip_files:
        raise limits.exceeded("max_zip_files", f"The archive holds {len(infos):,} members")
    members: list[_Member] = []
    seen: dict[str, str] = {}
    folded: dict[str, str] = {}
    total = 0
    for info in infos:
        name = info.filename
        problem = _member_name_problem(name)
        if problem:
            raise _refuse(name, problem)
        kind = _unix_kind(info)
        if kind == "link":
            raise _refuse(name, "is a symbolic link")
        if kind == "special":
            raise _refuse(name, "is not a regular file (a device, pipe or socket)")
        if info.flag_bits & 0x1:
            raise _refuse(name, "is encrypted")
        is_dir = info.is_dir()
        parts = tuple(p for p in name.split("/") if p not in ("", "."))
        if not parts:
            if is_dir:
                continue  # "./"
            raise _refuse(name, "has no file name")
        path = "/".join(parts)
        if path in seen:
            if is_dir and seen[path] == "dir":
                continue
            raise _refuse(name, "appears twice in the archive")
        if path.casefold() in folded:
            raise _refuse(name, f"differs only in letter case from {short(folded[path.casefold()], 120)}")
        seen[path] = "dir" if is_dir else "file"
        folded[path.casefold()] = path
        if not is_dir and info.compress_type not in _SUPPORTED_COMPRESSION:
            raise ModelLoadError(
                f"The archive member {short(name, 120)} uses a compression method this tool cannot read "
                f"({info.compress_type})",
                "Zip the files again with ordinary (deflate) compression",
            )
        if not is_dir:
            total += info.file_size
        members.append(_Member(info, parts, is_dir))
    # A file whose name is also used as a folder by another member.
    for member in members:
        for k in range(1, len(member.parts)):
            prefix = "/".join(member.parts[:k])
            if seen.get(prefix) == "file":
                raise _refuse(prefix, f"is a file, but {short(member.path, 120)} uses it as a folder")
    if total > limits.max_unpacked_bytes:
        raise limits.exceeded("max_unpacked_bytes", f"The archive unpacks to {total:,} bytes")
    if total > RATIO_FLOOR_BYTES and total > limits.max_compression_ratio * max(archive_bytes, 1):
        raise limits.exceeded(
            "max_compression_ratio",
            f"The archive is {archive_bytes:,} bytes but unpacks to {total:,} "
            f"({total / max(archive_bytes, 1):,.0f} times larger)",
            "Archives that expand this much are refused as possible zip bombs; "
            "raise the limit only for files you trust",
        )
    return members


_LOCAL = struct.Struct("<4s22xHH")  # signature, ..., name and extra lengths (30 bytes)
_READ = 64 << 10  # compressed bytes read at a time


class _Stored:
    """The 'decompressor' of a stored member: bytes pass through (callers read at most CHUNK at a time)."""

    eof = False
    needs_input = True

    def decompress(self, data: bytes, max_length: int) -> bytes:
        return data


class _Inflate:
    """zlib's raw deflate with the same interface as bz2/lzma decompressors: output capped per call."""

    def __init__(self) -> None:
        self._d = zlib.decompressobj(-zlib.MAX_WBITS)

    @property
    def eof(self) -> bool:
        return self._d.eof

    @property
    def needs_input(self) -> bool:
        return not self._d.unconsumed_tail

    def decompress(self, data: bytes, max_length: int) -> bytes:
        return self._d.decompress(self._d.unconsumed_tail + data if data else self._d.unconsumed_tail, max_length)


def _decompressor(method: int, fh: BinaryIO, left: int) -> tuple[object, int]:
    """A capped decompressor for the member whose data starts at fh's position, and the bytes still to read."""
    if method == zipfile.ZIP_STORED:
        return _Stored(), left
    if method == zipfile.ZIP_DEFLATED:
        return _Inflate(), left
    if method == zipfile.ZIP_BZIP2:
        return bz2.BZ2Decompressor(), left
    if method == zipfile.ZIP_LZMA:
        head = fh.read(4)
        if len(head) < 4:
            raise EOFError("the LZMA header is cut short")
        props_len = struct.unpack("<H", head[2:4])[0]
        props = fh.read(props_len)
        if len(props) < props_len or 4 + props_len > left:
            raise EOFError("the LZMA header is cut short")
        lzma_filter = lzma._decode_filter_properties(lzma.FILTER_LZMA1, props)  # what zipfile itself uses
        return lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[lzma_filter]), left - 4 - props_len
    raise NotImplementedError(f"compression method {method}")


def member_chunks(fh: BinaryIO, info: zipfile.ZipInfo, archive_bytes: int) -> Iterator[bytes]:
    """The member's unpacked bytes in pieces of at most CHUNK bytes, whatever its compression method.

    Reads the local header itself and feeds the decompressor at most 64 KiB at a
    time, asking for at most CHUNK bytes of output per call: memory stays
    bounded by a few CHUNKs however far the data inflates. The caller counts
    the bytes (and stops a member that produces more than its header declares).
    Raises what zipfile's readers raise on damaged data; checks the CRC-32 at the end.
    """
    fh.seek(info.header_offset)
    head = fh.read(_LOCAL.size)
    if len(head) < _LOCAL.size or head[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile("bad local file header")
    name_len, extra_len = _LOCAL.unpack(head)[1:]
    start = info.header_offset + _LOCAL.size + name_len + extra_len
    if start + info.compress_size > archive_bytes:
        raise zipfile.BadZipFile("the member's data runs past the end of the archive")
    fh.seek(start)
    decompressor, left = _decompressor(info.compress_type, fh, info.compress_size)
    crc = 0
    produced = 0
    while True:
        if decompressor.needs_input:
            if left <= 0:
                break
            data = fh.read(min(_READ, left, CHUNK))
            if not data:
                raise EOFError("the archive ends inside the member's data")
            left -= len(data)
        else:
            data = b""
        out = decompressor.decompress(data, CHUNK)
        if out:
            crc = zlib.crc32(out, crc)
            produced += len(out)
            yield out
            if produced > info.file_size:
                return  # the caller refuses it; nothing more is inflated
        if decompressor.eof:
            break
    if info.compress_type in (zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2) and not decompressor.eof:
        raise EOFError("the compressed data ends early")
    if produced < info.file_size:
        raise EOFError(f"the member holds {produced:,} bytes, not the {info.file_size:,} its header declares")
    if crc != info.CRC:
        raise zipfile.BadZipFile(f"Bad CRC-32 for file {info.filename!r}")


def _extract(zf: zipfile.ZipFile, members: list[_Member], root: Path, limits: Limits, archive_bytes: int) -> None:
    """Write the members below root, counting the bytes that really come out."""
    written = 0
    for member in members:
        if _is_junk(member.parts):
            continue
        target = root.joinpath(*member.parts)
        if root not in target.parents:  # unreachable after the name checks; kept as a backstop
            raise _refuse(member.path, "would land outside the unpacking folder")
        if member.is_dir:
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        own = 0
        chunks = member_chunks(zf.fp, member.info, archive_bytes)
        with open(target, "xb") as dst:
            while True:
                with _reading(member):
                    chunk = next(chunks, b"")
                if not chunk:
                    break
                own += len(chunk)
                written += len(chunk)
                if own > member.info.file_size:
                    raise UnsafeModelError(
                        f"The archive member {short(member.path, 120)} unpacks to more bytes than its header "
                        f"declares ({member.info.file_size:,})",
                        "The archive is damaged or forged; zip the files again",
                    )
                if written > limits.max_unpacked_bytes:
                    raise limits.exceeded(
                        "max_unpacked_bytes", f"The archive unpacks to more than {written - 1:,} bytes"
                    )
                dst.write(chunk)


#: What the zip, zlib, bz2 and lzma readers raise on damaged data.
_DAMAGED = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, lzma.LZMAError, EOFError, ValueError, struct.error,
            NotImplementedError, RuntimeError, OverflowError, UnicodeDecodeError, IndexError, KeyError)  # fmt: skip


@contextlib.contextmanager
def _reading(member: _Member):
    """Turn a failure to read one member's data into a clear error (bz2 reports damage as OSError)."""
    try:
        yield
    except (*_DAMAGED, OSError) as exc:
        raise ModelLoadError(
            f"The archive member {short(member.path, 120)} is damaged ({_zip_reason(exc)})",
            "Zip the model folder again (a plain .zip, not encrypted)",
        ) from None


def _choose_model(members: list[_Member], choose: str | None) -> _Member:
    """The .onnx file to load: the one asked for, the only one, or the only one at the top."""
    models = [m for m in members if not m.is_dir and not _is_junk(m.parts) and m.parts[-1].lower().endswith(".onnx")]
    listing = ", ".join(short(m.path, 120) for m in models[:20]) + (" …" if len(models) > 20 else "")
    if choose is not None:
        wanted = "/".join(p for p in choose.replace("\\", "/").split("/") if p not in ("", "."))
        for m in models:
            if m.path == wanted:
                return m
        raise ModelLoadError(
            f"The archive has no model {short(choose, 120)}",
            f"Its .onnx files are: {listing}" if models else "It holds no .onnx file",
        )
    if not models:
        raise ModelLoadError(
            "The archive holds no .onnx file",
            "Zip the .onnx model together with its external data files",
        )
    if len(models) == 1:
        return models[0]
    # All members inside one top folder (a zipped folder): look at that folder's top.
    tops = {m.parts[0] for m in members if not _is_junk(m.parts)}
    prefix = 1 if len(tops) == 1 and all(len(m.parts) > 1 for m in models) else 0
    top = [m for m in models if len(m.parts) == prefix + 1]
    if len(top) == 1:
        return top[0]
    raise SeveralModels(
        f"The archive holds {len(models)} .onnx files ({listing}), so it is not clear which one to load",
        "Choose one of them by its path in the archive, or upload an archive with one model",
        choices=tuple(m.path for m in models),
    )


SCRATCH_PREFIX = "shrinkray-zip-"


@contextlib.contextmanager
def scratch_folder(prefix: str = SCRATCH_PREFIX) -> Iterator[Path]:
    """A private temporary folder (``PREFIX<pid>-*``) for unpacking, removed on exit.

    Folders that killed processes left behind (SIGKILL, the out-of-memory
    killer: no cleanup runs) are removed first, so they do not pile up.
    """
    base = Path(tempfile.gettempdir())
    sweep_orphans(base, prefix)
    folder = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=base))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def load_zip(
    data: bytes | str | os.PathLike,
    workdir: str | os.PathLike,
    limits: Limits | None = None,
    *,
    choose: str | None = None,
    lazy_external: bool = False,
) -> LoadedModel:
    """Unpack an uploaded .zip into a fresh folder below ``workdir`` and load its model.

    ``data`` is the archive's bytes or its path (never modified). ``workdir``
    is a folder the caller owns (created if missing); each call unpacks into a
    new subfolder of it, which the caller may delete once the model is loaded
    (the returned model holds all its tensors in memory; with ``lazy_external``
    external tensors stay in the unpacked files, see :func:`shrinkray.io.files.load`,
    so the folder must stay until they are read). ``choose`` names the
    .onnx member to load when the archive holds several.

    The returned LoadedModel's ``sha256`` is that of the archive (with ``choose``, of the archive followed by
    a zero byte and the chosen path: each model of a set is told apart, e.g. a run store's shared copies), its
    ``file_bytes`` the model plus its data files, and its ``path`` the
    unpacked .onnx file. Every refusal is a ShrinkRayError; on any error the
    new subfolder is removed.
    """
    limits = limits if limits is not None else Limits.from_env()
    unpacked = unpack_zip(data, workdir, limits, choose=choose)
    root, chosen = unpacked.root, unpacked.chosen
    try:
        try:
            loaded = load(root.joinpath(*chosen.split("/")), limits=limits, lazy_external=lazy_external)
        except ShrinkRayError as exc:
            # Name files as they are named inside the archive, not by the server's folders.
            inside = str(root) + os.sep
            raise type(exc)(exc.problem.replace(inside, ""), exc.hint.replace(inside, "")) from None
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    loaded.sha256 = unpacked.sha256
    return loaded


@dataclass(frozen=True)
class Unpacked:
    """An archive unpacked into a folder of its own: its models' paths inside, the one chosen, its digest."""

    root: Path
    models: tuple[str, ...]
    chosen: str
    sha256: str


def unpack_zip(data: bytes | str | os.PathLike, workdir: str | os.PathLike, limits: Limits | None = None, *,
               choose: str | None = None, whole: bool = False) -> Unpacked:  # fmt: skip
    """Check every member of an uploaded .zip, then unpack it into a fresh folder below ``workdir``.

    ``choose`` names the .onnx member that matters when the archive holds several (see :func:`load_zip`);
    ``whole``: the archive is taken as a set of models (an encoder and a decoder), so several are no refusal
    and ``chosen`` is "". ``sha256`` is the archive's, with ``choose`` followed by a zero byte and the chosen
    path. On any error the new folder is removed.
    """
    limits = limits if limits is not None else Limits.from_env()
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        size = len(raw)
        label = "The archive"

        def opener() -> BinaryIO:
            return io.BytesIO(raw)

    else:
        path = Path(data)
        label = str(path)
        if not path.is_file():
            raise ModelLoadError(f"{path} is not a file", "Give the path of the .zip archive")
        size = path.stat().st_size

        def opener() -> BinaryIO:
            return path.open("rb")

    if size == 0:
        raise ModelLoadError(f"{label} is empty (0 bytes)", "Choose a .zip archive or a .onnx model")
    if size > limits.max_file_bytes:
        raise LimitExceededError(
            f"{label} is {size:,} bytes, above the limit {limits.setting('max_file_bytes')}",
            "Raise the file-size limit for files you trust",
        )
    workdir = Path(workdir)
    try:
        workdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelLoadError(f"The working folder {workdir} cannot be created ({exc.strerror})", "") from None
    root = Path(tempfile.mkdtemp(prefix="upload-", dir=workdir))
    try:
        with opener() as fh:
            digest = hashlib.sha256()
            for chunk in iter(lambda: fh.read(CHUNK), b""):
                digest.update(chunk)
            declared = _declared_entry_count(fh, size)
            if declared is not None and declared > limits.max_zip_files:
                raise limits.exceeded("max_zip_files", f"The archive declares {declared:,} members")
            _check_directory(fh, size)
            fh.seek(0)
            try:
                with zipfile.ZipFile(fh) as zf:
                    members = _check_members(zf, size, limits)
                    chosen = "" if whole else _choose_model(members, choose).path
                    _extract(zf, members, root, limits, size)
            except _DAMAGED as exc:
                raise ModelLoadError(
                    f"{label} is not a readable zip archive, or is damaged ({_zip_reason(exc)})",
                    "Zip the model folder again (a plain .zip, not encrypted)",
                ) from None
            except OSError as exc:
                raise ModelLoadError(
                    f"{label} could not be unpacked ({exc.strerror or type(exc).__name__})",
                    "Check the free disk space of the working folder",
                ) from None
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    if choose is not None and chosen:  # one model of several: the same archive's other models must not share its identity
        digest.update(b"\0" + chosen.encode())
    models = tuple(m.path for m in members if not m.is_dir and not _is_junk(m.parts)
                   and m.parts[-1].lower().endswith(".onnx"))  # fmt: skip
    return Unpacked(root, models, chosen, digest.hexdigest())


def _zip_reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:160]


def load_any(
    source: bytes | str | os.PathLike,
    *,
    name: str | None = None,
    workdir: str | os.PathLike | None = None,
    limits: Limits | None = None,
    lazy_external: bool = False,
    choose: str | None = None,
) -> LoadedModel:
    """One loader for every front end: an .onnx file or a .zip (a model with its external data), as a path
    or as bytes (an upload). The CLI and the app both call this.

    ``choose``: the model to load from a zip of several (its path inside; a zip of several without it raises
    :class:`~shrinkray.errors.SeveralModels` listing them); the model is then named after that file.

    A zip is unpacked below ``workdir`` (a folder the caller owns; a private temporary folder when None)
    and the unpacked copy is removed as soon as the model is in memory. ``name`` names the model (an
    upload's file name; ``.onnx``/``.zip`` is dropped). A zip loaded from a path keeps that path (the file
    never to be written over); a model from bytes has none.

    ``lazy_external`` (a path, or a zip with a ``workdir``): external tensors stay in their files
    (:func:`shrinkray.io.files.load`); an unpacked zip's folder then stays below ``workdir``, which the
    caller removes once the tensors are read. Without a ``workdir`` a zip is loaded whole.
    """
    is_bytes = isinstance(source, (bytes, bytearray, memoryview))
    path = None if is_bytes else Path(source)
    label = Path(name).name if name else (path.name if path is not None else "")
    if is_bytes:
        zipped = label.lower().endswith(".zip") or is_zip(source)
    else:  # a missing path gets load()'s "Missing ..." message, whatever its name
        zipped = path.is_file() and (path.suffix.lower() == ".zip" or is_zip(path))
    stem = label.removesuffix(".zip").removesuffix(".onnx")
    if not zipped and choose and (is_bytes or path.is_file()):
        raise ModelLoadError(f"{label or 'This file'} is one model, not an archive of several: there is nothing to "
                             "choose in it", "Leave the choice of a model out")  # fmt: skip
    if not zipped:
        loaded = (
            load(bytes(source), name=stem or "upload", limits=limits)
            if is_bytes
            else load(path, limits=limits, lazy_external=lazy_external)
        )
        if stem and not is_bytes:
            loaded.name = stem
        return loaded
    with contextlib.ExitStack() as stack:
        folder = Path(workdir) if workdir is not None else stack.enter_context(scratch_folder())
        unpack = Path(tempfile.mkdtemp(prefix="unpacked-", dir=made_folder(folder)))
        loaded = None
        try:
            loaded = load_zip(source if is_bytes else path, unpack, limits, choose=choose,
                              lazy_external=lazy_external and workdir is not None)  # fmt: skip
            for field_name, suffix in (("tokenizer", "json"), ("prompts", "txt")):
                companion = getattr(loaded, field_name)
                if companion and workdir is not None:  # kept past the unpacked copy, in the caller's folder
                    kept = made_folder(folder) / f"{field_name}-{loaded.sha256[:16]}.{suffix}"
                    shutil.copyfile(companion, kept)
                    setattr(loaded, field_name, str(kept))
                elif companion and not loaded.is_lazy:
                    setattr(loaded, field_name, "")  # the unpacked copy goes: the CLI's --tokenizer gives it
        finally:
            if loaded is None or not loaded.is_lazy:  # a lazy model still reads the unpacked files
                shutil.rmtree(unpack, ignore_errors=True)
    loaded.name = Path(choose).name.removesuffix(".onnx") if choose else stem or loaded.name
    loaded.path = path  # the archive (protected from writes), or None: the unpacked copy is gone
    return loaded


def made_folder(folder: Path) -> Path:
    """``folder``, made first when missing (with its parents)."""
    folder.mkdir(parents=True, exist_ok=True)
    return folder

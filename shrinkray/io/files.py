"""Loading and saving ONNX models safely.

Loading turns every way a file can be wrong into a ShrinkRayError with a
hint, refuses models beyond the limits of :mod:`shrinkray.io.limits` (and graphs
with cycles, dangling or duplicate names) before anything else looks at them,
and reads external data only from inside the model's own folder (uploads with
external data come as a .zip: see :mod:`shrinkray.io.archive`).
Saving never touches the input file, writes atomically (a temporary file in
the target folder, then a rename) and switches to external data when a model
is too large for one protobuf.

Every file the engine writes goes through :func:`staged_outputs` (or its
shorthands :func:`write_outputs` and :func:`write_bytes_atomic`): all the
files of one output (a model and its data file, or several reports) are
written into a hidden staging folder beside their targets and renamed into
place only once every one is complete. Any failure, including SIGINT and
SIGTERM (which :func:`sigterm_raises` turns into :class:`Terminated` while a
write is under way), removes the staging folder; an operating-system refusal
(read-only folder, full disk, ``/proc``) becomes one :class:`WriteError`.

Kept as one module (over 600 lines): loading and saving share the path checks, the atomic writes and
the protected-files rule; one door to disk is easier to audit than several.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import re
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import onnx
from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet
from onnx import external_data_helper

from shrinkray.errors import (
    LimitExceededError,
    MissingModelError,
    ModelLoadError,
    OutputExistsError,
    SeveralModels,
    UnsafeModelError,
    WriteError,
)
from shrinkray.io.limits import (
    Limits,
    check_graph_structure,
    check_model,
    check_tensor,
    declared_bytes,
    short,
    tensor_nbytes,
)
from shrinkray.units import format_bytes

#: Protobuf messages cannot exceed 2 GiB; stay well below it.
PROTOBUF_LIMIT = 2**31 - 2**24
#: Kept for callers of older versions; the limit now lives in shrinkray.io.limits.Limits.
DEFAULT_MAX_FILE_BYTES = Limits.max_file_bytes


def _read_umask() -> int:
    """Read once at import: os.umask can only be read by setting it, which is not thread-safe."""
    current = os.umask(0o022)
    os.umask(current)
    return current


_UMASK = _read_umask()


@dataclass
class LoadedModel:
    """A parsed model plus what we know about where it came from."""

    model: onnx.ModelProto
    name: str
    path: Path | None = None
    file_bytes: int = 0
    sha256: str = ""
    external_data_files: list[str] = field(default_factory=list)
    #: Set when loaded with ``lazy_external``: the folder whose files hold the tensors still marked
    #: external (read them one at a time with :mod:`shrinkray.io.external_data`).
    external_base: Path | None = None
    #: A decoder LM's tokenizer.json that travels with it (beside it, or one folder up as transformers.js
    #: keeps ``onnx/model.onnx``): its prompts are real text (measure/lm_text.py). "" when none.
    tokenizer: str = ""
    #: Text in its own domain beside the tokenizer (``prompts.txt``): prompts are windows of it. "" when none.
    prompts: str = ""
    #: Set by :func:`shrinkray.io.inline_data.hold_in_place`: a one-file model whose ``model`` is a header
    #: pointing into ``path`` (its weights stay in the file, read in place): lazy, yet small enough for every
    #: method (a worker reads it whole from ``path``).
    in_place: bool = False
    #: Set for an encoder–decoder loaded as one set (io/model_set.py ``as_loaded``): ``model`` is its encoder,
    #: and every front end compares the whole set (pipeline/set_compare.py). None for one model.
    model_set: Any = None

    @property
    def has_external_data(self) -> bool:
        return bool(self.external_data_files)

    @property
    def is_lazy(self) -> bool:
        """Some tensors' values are still in their files (external data, or the model's own file), not in
        ``model``."""
        return self.external_base is not None

    @property
    def streams_only(self) -> bool:
        """Loaded as its graph alone because it is too large to hold whole: only the methods that convert
        tensor by tensor may shrink it (a model held in place is not: a worker reads it whole)."""
        return self.is_lazy and not self.in_place


@dataclass
class ExternalRef:
    """Where one tensor's bytes live, after checking the place is inside the model's folder."""

    tensor: onnx.TensorProto
    location: str
    target: Path
    offset: int
    length: int


TOKENIZER_FILE = "tokenizer.json"
#: A tokenizer.json larger than this is not taken (real ones are 2-20 MB).
MAX_TOKENIZER_BYTES = 64 << 20


#: Text in a decoder LM's own domain, beside its tokenizer.json: its prompts are windows of it (a Shrink Ray
#: convention; the bundled sample has one). Read up to MAX_TOKENIZER_BYTES too.
PROMPTS_FILE = "prompts.txt"


def find_tokenizer(model_path: str | os.PathLike | None, name: str = TOKENIZER_FILE) -> str:
    """The tokenizer.json (or ``name``) beside a model file or one folder up, or "" when there is none."""
    if not model_path:
        return ""
    folder = Path(model_path).parent
    for place in (folder, folder.parent):
        candidate = place / name
        if candidate.is_file() and candidate.stat().st_size <= MAX_TOKENIZER_BYTES:
            return str(candidate)
    return ""


def models_in_folder(folder: str | os.PathLike) -> list[Path]:
    """The .onnx files a folder holds, at its top or in its ``onnx/`` folder (as transformers.js lays them out)."""
    folder = Path(folder)
    return sorted([*folder.glob("*.onnx"), *folder.glob("onnx/*.onnx")])


def model_in_folder(folder: str | os.PathLike) -> Path:
    """The model a folder stands for: its only .onnx file, or transformers.js's main one (``onnx/model.onnx``,
    else ``model.onnx``) among several; a folder of several others is refused with their names."""
    folder = Path(folder)
    found = models_in_folder(folder)
    for main in (folder / "onnx" / "model.onnx", folder / "model.onnx"):
        if main in found:
            return main
    if len(found) == 1:
        return found[0]
    if not found:
        raise ModelLoadError(f"{folder} is a folder without an .onnx model (nor an onnx/ folder holding one)",
                             "Give the path of the .onnx file")  # fmt: skip
    names = ", ".join(str(p.relative_to(folder)) for p in found[:8]) + (", ..." if len(found) > 8 else "")
    raise SeveralModels(f"{folder} holds several models ({names})", "Give the path of the one to use",
                        choices=tuple(p.relative_to(folder).as_posix() for p in found))  # fmt: skip


def _external_entry(tensor: onnx.TensorProto, key: str) -> str | None:
    value = None
    for entry in tensor.external_data:
        if entry.key == key:
            value = entry.value
    return value


def _external_int(tensor: onnx.TensorProto, key: str) -> int | None:
    raw = _external_entry(tensor, key)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ModelLoadError(
            f"Tensor {short(tensor.name)} has an invalid external-data {key} {short(raw)}",
            "The model file is damaged; export the model again",
        )
    return value


_DRIVE = re.compile(r"^[A-Za-z]:")


def external_place(tensor: onnx.TensorProto, base_dir: Path) -> ExternalRef:
    """Resolve a tensor's external file and refuse anything outside base_dir (or beyond the file's end)."""
    location = _external_entry(tensor, "location") or ""
    if not location:
        raise ModelLoadError(
            f"Tensor {short(tensor.name)} says its data is in an external file but names none",
            "The model file is damaged; export the model again",
        )
    unsafe = UnsafeModelError(
        f"Tensor {short(tensor.name)} stores its data in {short(location, 200)}, outside the model's own folder",
        "Only external data files next to the model (or in its subfolders) are read; "
        "move the data files beside the .onnx file",
    )
    impossible = ModelLoadError(
        f"Tensor {short(tensor.name)} names an external data file that cannot exist ({short(location, 200)})",
        "The model file is damaged; export the model again",
    )
    if "\0" in location:
        raise impossible
    if os.path.isabs(location) or location.startswith(("/", "\\")) or _DRIVE.match(location):
        raise unsafe
    if ".." in Path(location.replace("\\", "/")).parts:
        raise unsafe
    try:
        base = base_dir.resolve()
        target = (base / location).resolve()
    except (OSError, ValueError, RuntimeError):  # a name too long, a symlink loop...
        raise impossible from None
    if base != target and base not in target.parents:
        raise unsafe
    try:
        is_file = target.is_file()
    except (OSError, ValueError):
        raise impossible from None
    if not is_file:
        raise ModelLoadError(
            f"External data file {short(location, 200)} for tensor {short(tensor.name)} is missing",
            "Keep the data files in the same folder as the .onnx file",
        )
    size = target.stat().st_size
    offset = _external_int(tensor, "offset") or 0
    declared = _external_int(tensor, "length")
    length = declared if declared is not None else size - offset
    if length < 0 or offset + length > size:
        raise ModelLoadError(
            f"Tensor {short(tensor.name)} asks for bytes {offset}..{offset + length} of "
            f"{short(location, 200)}, which has only {size} bytes",
            "The data file is truncated or belongs to another model; export the model again",
        )
    return ExternalRef(tensor, location, target, offset, length)


def _check_external_length(ref: ExternalRef) -> None:
    """A lazily loaded tensor's stored length must be what its shape and type call for (as loading checks
    of the bytes it reads), so reading it later cannot come up short or long."""
    expected = declared_bytes(ref.tensor)
    if expected is not None and expected != ref.length:
        raise ModelLoadError(
            f"Tensor {short(ref.tensor.name)} declares {expected:,} bytes of values but its external data "
            f"in {short(ref.location, 200)} holds {ref.length:,}",
            "The data file does not belong to this model, or the model is damaged; export it again",
        )


def _read_external(refs: list[ExternalRef]) -> None:
    """Read every external tensor into memory from its checked place, then forget the place."""
    handles: dict[Path, BinaryIO] = {}
    try:
        for ref in refs:
            fh = handles.get(ref.target)
            if fh is None:
                flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
                fh = handles[ref.target] = os.fdopen(os.open(ref.target, flags), "rb")
            fh.seek(ref.offset)
            data = fh.read(ref.length)
            if len(data) != ref.length:
                raise ModelLoadError(
                    f"External data file {short(ref.location, 200)} ended early while reading tensor "
                    f"{short(ref.tensor.name)}",
                    "The data file is truncated; export the model again",
                )
            ref.tensor.raw_data = data
            ref.tensor.data_location = onnx.TensorProto.DEFAULT
            del ref.tensor.external_data[:]
    except OSError as exc:
        raise ModelLoadError(
            f"An external data file could not be read ({exc.strerror or type(exc).__name__})",
            "Check the files' permissions",
        ) from None
    finally:
        for fh in handles.values():
            fh.close()


def parse_model_bytes(data: bytes, what: str = "The file", limits: Limits | None = None) -> onnx.ModelProto:
    """Parse bytes into a ModelProto, explaining every way that can fail."""
    if len(data) == 0:
        raise ModelLoadError(f"{what} is empty (0 bytes)", "Choose a .onnx model file")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        text = str(exc)
        if "MaxDepth" in text or "recursion" in text.lower():
            limits = limits or Limits()
            raise LimitExceededError(
                f"{what} nests messages (subgraphs inside subgraphs) more deeply than the protobuf parser allows "
                f"(about 30 levels), far beyond {limits.setting('max_graph_depth')}",
                "Models this deep are refused whatever the setting says; flatten the nested If/Loop/Scan nodes",
            ) from None
        raise ModelLoadError(
            f"{what} is not a readable ONNX model: the protobuf could not be decoded ({text[:200]})"
            if "truncat" in text.lower()
            else f"{what} is not a readable ONNX model (the bytes are not a valid protobuf; "
            "it may be truncated, compressed or another format)",
            "Export the model again, or unzip it first if it came as an archive",
        ) from None
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise ModelLoadError(
            f"{what} is a protobuf but not an ONNX model (it has no graph)",
            "Choose the .onnx file the exporter wrote",
        )
    if not model.opset_import:
        raise ModelLoadError(
            f"{what} declares no opset, so it is not a complete ONNX model",
            "Export the model again with a recent exporter",
        )
    return model


def _read_capped(path: Path, limits: Limits) -> bytes:
    """Read a whole file, but never more than the file-size limit (files can grow, devices never end)."""
    try:
        with path.open("rb") as fh:
            # Ask for what the file holds (plus one byte to see it grow), never for the limit itself:
            # read(n) reserves n bytes up front, which fails under a worker's address-space cap.
            expected = min(os.fstat(fh.fileno()).st_size, limits.max_file_bytes) + 1
            data = fh.read(expected)
            if len(data) == expected:  # it grew, or it is a device that never ends
                parts = [data]
                total = len(data)
                while total <= limits.max_file_bytes and (
                    part := fh.read(min(1 << 24, limits.max_file_bytes + 1 - total))
                ):
                    parts.append(part)
                    total += len(part)
                data = b"".join(parts)
    except OSError as exc:
        raise ModelLoadError(
            f"{path} could not be read ({exc.strerror or type(exc).__name__})", "Check its permissions"
        ) from None
    if len(data) > limits.max_file_bytes:
        raise LimitExceededError(
            f"{path} is more than {limits.max_file_bytes:,} bytes, above the limit {limits.setting('max_file_bytes')}",
            "Raise the limit for files you trust, or use a smaller model",
        )
    return data


def _hash_in_background(data: bytes) -> Future[str]:
    """SHA-256 of ``data`` in a thread: hashlib releases the GIL, so it overlaps parsing and checks."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shrinkray-hash")
    future = pool.submit(lambda: hashlib.sha256(data).hexdigest())
    pool.shutdown(wait=False)  # the thread ends when the hash is done
    return future


def _resolve_limits(limits: Limits | None, max_file_bytes: int | None) -> Limits:
    limits = limits if limits is not None else Limits.from_env()
    if max_file_bytes is not None:
        limits = dataclasses.replace(limits, max_file_bytes=max_file_bytes)
    return limits


def load(
    source: str | os.PathLike | bytes,
    *,
    name: str | None = None,
    max_file_bytes: int | None = None,
    limits: Limits | None = None,
    lazy_external: bool = False,
) -> LoadedModel:
    """Load a model from a path or from bytes (an upload), within ``limits``.

    ``limits`` defaults to :meth:`Limits.from_env`; ``max_file_bytes``, when
    given, overrides its file-size limit. Every problem is a ShrinkRayError:
    unreadable bytes, a limit exceeded (the message names the limit and its
    setting), a damaged or structurally broken graph (cycle, dangling or
    duplicate names), external data outside the model's folder.

    A model loaded from bytes cannot have external data: there is no folder
    to read it from, so it is refused with a hint to upload a zip instead
    (see :func:`shrinkray.io.archive.load_zip`).

    ``lazy_external``: check every external tensor's place and length as usual but leave its values in
    its file (the model holds only the graph and its inline tensors), for conversions that read one
    tensor at a time (:mod:`shrinkray.io.external_data`); ``external_base`` then names the folder.
    """
    limits = _resolve_limits(limits, max_file_bytes)
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if len(data) > limits.max_file_bytes:
            raise LimitExceededError(
                f"The upload is {len(data):,} bytes, above the limit {limits.setting('max_file_bytes')}",
                "Raise the file-size limit or shrink the model offline with the CLI",
            )
        digest = _hash_in_background(data)
        model = parse_model_bytes(data, what=f"{short(name)}" if name else "The upload", limits=limits)
        stats = check_model(model, limits)
        if stats.external_tensors:
            raise UnsafeModelError(
                "This model keeps its weights in separate external data files, which were not uploaded",
                "Upload a .zip holding the .onnx file and its data files",
            )
        check_graph_structure(model)
        return LoadedModel(
            model=model,
            name=name or "model",
            file_bytes=len(data),
            sha256=digest.result(),
        )

    path = Path(source)
    if not path.exists():
        raise MissingModelError(f"Missing {path}", "Check the path, or export the model first")
    if path.is_dir():  # a transformers.js folder stands for its main model
        path = model_in_folder(path)
    if not path.is_file():
        raise ModelLoadError(
            f"{path} is not a regular file (a device, pipe or socket)", "Give the path of the .onnx file"
        )
    size = path.stat().st_size
    if size > limits.max_file_bytes:
        raise LimitExceededError(
            f"{path} is {size:,} bytes, above the limit {limits.setting('max_file_bytes')}",
            "Raise the limit with max_file_bytes",
        )
    if size > PROTOBUF_LIMIT:
        raise ModelLoadError(
            f"{path} is larger than 2 GB as a single protobuf, which ONNX cannot read",
            "Save the model with external data (onnx.save(..., save_as_external_data=True))",
        )
    data = _read_capped(path, limits)
    digest = _hash_in_background(data)
    model = parse_model_bytes(data, what=str(path), limits=limits)
    file_bytes, sha256 = len(data), digest.result()
    del data  # the parsed model holds everything now: free the file's bytes before the checks
    stats = check_model(model, limits)
    refs = [external_place(tensor, path.parent) for tensor, _, _ in stats.external_tensors]
    files: list[Path] = []
    for ref in refs:
        if ref.target not in files:
            files.append(ref.target)
    total = file_bytes + sum(f.stat().st_size for f in files)
    if files:
        if total > limits.max_file_bytes:
            raise LimitExceededError(
                f"{path} with its external data is {total:,} bytes, above the limit {limits.setting('max_file_bytes')}",
                "Raise the limit with max_file_bytes",
            )
        tensor_bytes = stats.inline_tensor_bytes + sum(r.length for r in refs)
        if tensor_bytes > limits.max_tensor_bytes:
            raise limits.exceeded("max_tensor_bytes", f"The model's tensors hold {tensor_bytes:,} bytes")
        if lazy_external:
            for ref in refs:
                _check_external_length(ref)
        else:
            _read_external(refs)
            for tensor, role, where in stats.external_tensors:
                check_tensor(tensor, role, where, limits)
    check_graph_structure(model)
    base = path.parent.resolve()
    return LoadedModel(
        model=model,
        name=path.name.removesuffix(".onnx"),
        path=path,
        file_bytes=total,
        sha256=sha256,
        external_data_files=[str(f.relative_to(base)) for f in files],
        external_base=base if lazy_external and files else None,
        **_companions(path),
    )


def _companions(path: Path) -> dict[str, str]:
    """A decoder LM's tokenizer.json and, beside it, its prompts.txt (LoadedModel's fields)."""
    tokenizer = find_tokenizer(path)
    prompts = str(Path(tokenizer).with_name(PROMPTS_FILE)) if tokenizer else ""
    return {"tokenizer": tokenizer, "prompts": prompts if prompts and Path(prompts).is_file() else ""}


def tensor_payload_bytes(model: onnx.ModelProto) -> int:
    """Bytes of the values of all tensors (initializers, Constant nodes, subgraphs): see :func:`tensor_nbytes`."""
    return sum(tensor_nbytes(tensor) for tensor in external_data_helper._get_all_tensors(model))


def needs_external_data(model: onnx.ModelProto) -> bool:
    return tensor_payload_bytes(model) > PROTOBUF_LIMIT


def serialize(model: onnx.ModelProto) -> bytes:
    """The model as one protobuf (only for models under 2 GB)."""
    _refuse_over_2gb(model)
    return model.SerializeToString()


def _refuse_over_2gb(model: onnx.ModelProto) -> None:
    if needs_external_data(model):
        raise LimitExceededError(
            "The model is larger than 2 GB and cannot be held as one protobuf",
            "Save it to a folder with save(), which writes external data",
        )


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _length_delimited(number: int, size: int) -> bytes:
    """A field's key (wire type 2) and length: what precedes an embedded message's bytes."""
    return _varint(number << 3 | 2) + _varint(size)


def copy_field(target, descriptor, value) -> None:
    """Set the field ``descriptor`` of protobuf message ``target`` to ``value`` as another message holds it
    (a repeated field extended, a message copied, a scalar set)."""
    if descriptor.is_repeated:
        getattr(target, descriptor.name).extend(value)
    elif descriptor.type == descriptor.TYPE_MESSAGE:
        getattr(target, descriptor.name).CopyFrom(value)
    else:
        setattr(target, descriptor.name, value)


def _without(message, number: int):
    """Two new messages of ``message``'s type: its fields numbered below ``number``, and above it."""
    below, above = type(message)(), type(message)()
    for descriptor, value in message.ListFields():
        if descriptor.number != number:
            copy_field(below if descriptor.number < number else above, descriptor, value)
    return below, above


def serialized_pieces(model: onnx.ModelProto) -> Iterator[bytes]:
    """``model.SerializeToString()`` in pieces, byte for byte, the graph's initializers one at a time.

    Writing a 100 MB model from one serialized copy holds that copy beside the model; writing these
    pieces holds one tensor's bytes at a time. Protobuf writes known fields in field-number order, and so
    do these (the graph's fields before ``initializer``, each initializer, the fields after; the same
    around the model's ``graph``): tests compare the bytes with ``SerializeToString`` on every sample.
    Unknown fields of the model or graph (a newer exporter's), which only the one-piece serializer keeps,
    make it one piece. Sizes are taken tensor by tensor: upb's ``ByteSize`` serializes the whole message.
    """
    graph_number = onnx.ModelProto.DESCRIPTOR.fields_by_name["graph"].number
    init_number = onnx.GraphProto.DESCRIPTOR.fields_by_name["initializer"].number
    graph = model.graph
    if len(UnknownFieldSet(model)) or len(UnknownFieldSet(graph)) or not model.HasField("graph"):
        yield model.SerializeToString()
        return
    graph_below, graph_above = (part.SerializeToString() for part in _without(graph, init_number))
    model_below, model_above = (part.SerializeToString() for part in _without(model, graph_number))
    sizes = [t.ByteSize() for t in graph.initializer]
    graph_size = len(graph_below) + len(graph_above) + sum(len(_length_delimited(init_number, n)) + n for n in sizes)
    yield model_below + _length_delimited(graph_number, graph_size) + graph_below
    for tensor, size in zip(graph.initializer, sizes, strict=True):
        yield _length_delimited(init_number, size) + tensor.SerializeToString()
    yield graph_above + model_above


def write_model_pieces(model: onnx.ModelProto, path: str | os.PathLike, *, exclusive: bool = True) -> None:
    """Write ``model`` to ``path`` as :func:`serialized_pieces` (synced): the same bytes as ``onnx.save``
    without a second copy of the model in memory. Only for models under 2 GB."""
    _refuse_over_2gb(model)
    _write_synced(path, serialized_pieces(model), exclusive=exclusive)


def same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def check_output_path(
    path: str | os.PathLike, *, protect: list[str | os.PathLike] | None = None, overwrite: bool = False
) -> Path:
    """Refuse an output path that is a protected file, a folder, or exists (unless overwrite)."""
    path = Path(path)
    for other in protect or []:
        if same_file(path, Path(other)):
            raise OutputExistsError(
                f"Refusing to write {path}: it is the input model or one of its files",
                "Choose another output path with -o",
            )
    if path.is_dir():
        raise OutputExistsError(f"{path} is a folder", "Give a file name with -o, e.g. -o model.small.onnx")
    if path.exists() and not path.is_file():
        raise OutputExistsError(f"{path} is not a regular file", "Choose another output path with -o")
    if path.exists() and not overwrite:
        raise OutputExistsError(
            f"{path} already exists", "Choose another output path with -o, or pass --force to replace it"
        )
    return path


def save(
    model: onnx.ModelProto,
    path: str | os.PathLike,
    *,
    protect: list[str | os.PathLike] | None = None,
    overwrite: bool = False,
    external_data: bool | None = None,
) -> Path:
    """Write a model atomically; refuse to overwrite the input or an existing file.

    ``protect`` lists paths that must never be written (the input model and its
    data files). With ``external_data`` left as None, models over 2 GB are
    written as ``NAME.onnx`` plus ``NAME.onnx.data`` in the same folder.
    """
    return save_all([(model, path)], protect=protect, overwrite=overwrite, external_data=external_data)[0]


def save_all(
    items: list[tuple[onnx.ModelProto, str | os.PathLike]],
    *,
    protect: list[str | os.PathLike] | None = None,
    overwrite: bool = False,
    external_data: bool | None = None,
) -> list[Path]:
    """Write several models (each with its ``.data`` file when needed) all or none, as :func:`save` does one.

    Every target is checked before anything is written; the files appear
    together once all are complete, and a failure (full disk, signal) leaves
    every target as it was.
    """
    plans = []
    targets: list[Path] = []
    for model, raw in items:
        path = check_output_path(raw, protect=protect, overwrite=overwrite)
        if path.parent and not path.parent.exists():
            raise MissingModelError(f"The output folder {path.parent} does not exist", "Create it first")
        use_external = needs_external_data(model) if external_data is None else external_data
        data_name = path.name + ".data"
        if use_external:
            targets.append(check_output_path(path.parent / data_name, protect=protect, overwrite=overwrite))
        targets.append(path)
        plans.append((model, path, data_name, use_external))
    resolved = [t.resolve() for t in targets]
    if len(set(resolved)) < len(resolved):
        raise OutputExistsError("Two outputs would be written to the same file", "Give every output its own name")
    needed: dict[Path, int] = {}
    for model, path, _, _ in plans:
        folder = path.parent if str(path.parent) else Path(".")
        needed[folder] = needed.get(folder, 0) + tensor_payload_bytes(model) + model.graph.ByteSize()
    for folder, size in needed.items():
        check_free_space(folder, size, "the model files")
    with staged_outputs(targets) as temps:
        staged = dict(zip(targets, temps, strict=True))
        for model, path, data_name, use_external in plans:
            tmp_model = staged[path]
            if use_external:
                to_write = onnx.ModelProto()
                to_write.CopyFrom(model)
                external_data_helper.convert_model_to_external_data(
                    to_write, all_tensors_to_one_file=True, location=data_name, size_threshold=1024
                )
                onnx.save_model(to_write, str(tmp_model))  # writes data_name beside it, in the staging folder
            else:
                write_model_pieces(model, tmp_model)  # one tensor's bytes at a time, not a whole copy
    return [path for _, path, _, _ in plans]


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised as an exception so that cleanup code runs (see :func:`sigterm_raises`)."""


def raise_terminated(signum, frame) -> None:
    """A signal handler: raise :class:`Terminated` (install it for SIGTERM to unwind like Ctrl-C)."""
    raise Terminated()


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """While active, SIGTERM raises :class:`Terminated` (like SIGINT raises KeyboardInterrupt).

    Only in the main thread, and only when SIGTERM still has its default action
    (the CLI installs the same handler for its whole run; a server keeps its own).
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _write_synced(path: str | os.PathLike, data: bytes | Iterable[bytes], *, exclusive: bool = True) -> None:
    """Write ``data`` (bytes, or pieces written one after another) and sync it to disk."""
    with open(path, "xb" if exclusive else "wb") as fh:
        for piece in [data] if isinstance(data, (bytes, bytearray)) else data:
            fh.write(piece)
        fh.flush()
        os.fsync(fh.fileno())


def _write_error(exc: OSError, targets: list[Path], stages: Mapping[Path, Path]) -> WriteError:
    """One line naming the output (never the hidden staging folder) and the system's reason."""
    named = targets
    if exc.filename is not None:
        failed = Path(os.fsdecode(exc.filename))
        exact = [t for t in targets if failed in (t, stages.get(t.parent, t) / t.name)]
        inside = [
            t
            for t in targets
            if (stage := stages.get(t.parent)) is not None and (failed == stage or stage in failed.parents)
        ]
        named = exact or inside or targets
    names = ", ".join(str(t) for t in named)
    reason = exc.strerror or str(exc) or type(exc).__name__
    return WriteError(
        f"Could not write {names} ({reason})",
        "Nothing was written; check that the folder exists, is writable and has free space, or write elsewhere",
    )


STAGING_PREFIX = ".shrinkray-"


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (one of another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def sweep_orphans(folder: str | os.PathLike, prefix: str) -> None:
    """Remove ``PREFIX<pid>-*`` folders in ``folder`` that this user's dead processes left behind.

    A process killed outright (SIGKILL, the kernel's out-of-memory killer) runs
    no cleanup; the next one that works in the same place removes its leftovers.
    """
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    uid = os.getuid() if hasattr(os, "getuid") else None
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        pid = entry.name[len(prefix) :].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or pid_alive(int(pid)):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or (uid is not None and entry.stat().st_uid != uid):
                continue
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)


@contextlib.contextmanager
def staged_outputs(targets: list[str | os.PathLike]) -> Iterator[list[Path]]:
    """Temporary paths to write the ``targets`` to, renamed into place together once all are written.

    Each temporary path has its target's file name, inside a hidden staging
    folder (``.shrinkray-*``) in the target's folder, so files that refer to
    each other by name (a model and its external data) stay consistent, and
    the final rename never crosses file systems. On success every file is
    synced and renamed over its target; on any exception (SIGINT, SIGTERM
    while in the main thread, a full disk...) the staging folders are removed
    and no target changes. OSErrors become one :class:`WriteError`.
    """
    paths = [Path(t) for t in targets]
    stages: dict[Path, Path] = {}
    with sigterm_raises():
        try:
            for target in paths:
                parent = target.parent
                if parent not in stages:
                    folder = parent if str(parent) else Path(".")
                    sweep_orphans(folder, STAGING_PREFIX)
                    stages[parent] = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=folder))
            temps = [stages[t.parent] / t.name for t in paths]
            yield temps
            for tmp in temps:
                if tmp.exists():
                    with open(tmp, "rb") as fh:
                        os.fsync(fh.fileno())
            for tmp, target in zip(temps, paths, strict=True):
                if tmp.exists():
                    _publish(tmp, target)
        except OSError as exc:
            raise _write_error(exc, paths, stages) from None
        finally:
            for stage in stages.values():
                shutil.rmtree(stage, ignore_errors=True)


def check_free_space(folder: str | os.PathLike, needed: int, what: str = "these files",
                     limits: Limits | None = None) -> None:  # fmt: skip
    """Refuse a write of about ``needed`` bytes into ``folder`` that would leave less than the limit
    ``min_free_disk_bytes`` free on its disk (before anything is written)."""
    limits = limits or Limits.from_env()
    place = Path(folder)
    while not place.exists() and place != place.parent:
        place = place.parent
    try:
        usage = shutil.disk_usage(place)
    except OSError:
        return  # no answer from the file system: the write itself reports a full disk
    if usage.total == 0:
        return  # a pseudo file system (/proc, some FUSE mounts) reports no sizes: the write itself says what is wrong
    free = usage.free
    if free - needed < limits.min_free_disk_bytes:
        raise WriteError(
            f"There is not enough free disk space for {what}: about {format_bytes(needed)} are needed and "
            f"{format_bytes(free)} are free in {place} (keeping {format_bytes(limits.min_free_disk_bytes)} spare)",
            "Free some disk space, then try again",
        )


def write_outputs(outputs: Mapping[str | os.PathLike, bytes | Callable[[Path], None]]) -> list[Path]:
    """Write every output or none: bytes, or a function that writes the given temporary path."""
    targets = [Path(p) for p in outputs]
    sizes: dict[Path, int] = {}
    for target, content in zip(targets, outputs.values(), strict=True):
        if not callable(content):
            folder = target.parent if str(target.parent) else Path(".")
            sizes[folder] = sizes.get(folder, 0) + len(content)
    for folder, needed in sizes.items():
        check_free_space(folder, needed, "the files to write")
    with staged_outputs(targets) as temps:
        for tmp, content in zip(temps, outputs.values(), strict=True):
            if callable(content):
                content(tmp)
            else:
                _write_synced(tmp, content)
    return targets


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Write beside the target, then rename over it: readers never see half a file."""
    return write_outputs({path: data})[0]


def _publish(tmp: Path, final: Path) -> None:
    """Move a finished temp file into place with the usual permissions (umask applied)."""
    os.chmod(tmp, 0o666 & ~_UMASK)
    os.replace(tmp, final)

"""Loading and saving ONNX models safely.

Loading turns every way a file can be wrong into a ShrinkRayError with a
hint, and reads external data only from inside the model's own folder.
Saving never touches the input file, writes atomically (a temporary file in
the target folder, then a rename) and switches to external data when a model
is too large for one protobuf.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import external_data_helper

from shrinkray.errors import (
    LimitExceededError,
    MissingModelError,
    ModelLoadError,
    OutputExistsError,
    UnsafeModelError,
)

#: Protobuf messages cannot exceed 2 GiB; stay well below it.
PROTOBUF_LIMIT = 2**31 - 2**24
DEFAULT_MAX_FILE_BYTES = 4 * 2**30


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

    @property
    def has_external_data(self) -> bool:
        return bool(self.external_data_files)


def _external_tensors(model: onnx.ModelProto) -> list[onnx.TensorProto]:
    return [
        t
        for t in external_data_helper._get_all_tensors(model)
        if external_data_helper.uses_external_data(t)
    ]


def _check_external_location(tensor: onnx.TensorProto, base_dir: Path) -> Path:
    """Resolve a tensor's external file and refuse anything outside base_dir."""
    info = external_data_helper.ExternalDataInfo(tensor)
    location = info.location or ""
    unsafe = UnsafeModelError(
        f"Tensor '{tensor.name}' stores its data in '{location}', outside the model's own folder",
        "Only external data files next to the model (or in its subfolders) are read; "
        "move the data files beside the .onnx file",
    )
    if not location or os.path.isabs(location) or location.startswith(("/", "\\")):
        raise unsafe
    if ".." in Path(location.replace("\\", "/")).parts:
        raise unsafe
    base = base_dir.resolve()
    target = (base / location).resolve()
    if base != target and base not in target.parents:
        raise unsafe
    if not target.is_file():
        raise ModelLoadError(
            f"External data file '{location}' for tensor '{tensor.name}' is missing",
            "Keep the data files in the same folder as the .onnx file",
        )
    size = target.stat().st_size
    offset = int(info.offset or 0)
    length = int(info.length) if info.length else size - offset
    if offset < 0 or length < 0 or offset + length > size:
        raise ModelLoadError(
            f"Tensor '{tensor.name}' asks for bytes {offset}..{offset + length} of "
            f"'{location}', which has only {size} bytes",
            "The data file is truncated or belongs to another model; export the model again",
        )
    return target


def parse_model_bytes(data: bytes, what: str = "The file") -> onnx.ModelProto:
    """Parse bytes into a ModelProto, explaining every way that can fail."""
    if len(data) == 0:
        raise ModelLoadError(f"{what} is empty (0 bytes)", "Choose a .onnx model file")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise ModelLoadError(
            f"{what} is not a readable ONNX model: the protobuf could not be decoded ({exc})"
            if "truncat" in str(exc).lower()
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


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def load(
    source: str | os.PathLike | bytes,
    *,
    name: str | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> LoadedModel:
    """Load a model from a path or from bytes (an upload).

    A model loaded from bytes cannot have external data: there is no folder
    to read it from, so it is refused with a hint to upload a zip instead.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if len(data) > max_file_bytes:
            raise LimitExceededError(
                f"The upload is {len(data):,} bytes, above the limit of {max_file_bytes:,}",
                "Raise the file-size limit or shrink the model offline with the CLI",
            )
        model = parse_model_bytes(data, what=f"'{name}'" if name else "The upload")
        if _external_tensors(model):
            raise UnsafeModelError(
                "This model keeps its weights in separate external data files, which were not uploaded",
                "Upload a .zip holding the .onnx file and its data files",
            )
        return LoadedModel(
            model=model,
            name=name or "model",
            file_bytes=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
        )

    path = Path(source)
    if not path.exists():
        raise MissingModelError(f"Missing {path}", "Check the path, or export the model first")
    if path.is_dir():
        raise ModelLoadError(f"{path} is a folder, not a model file", "Give the path of the .onnx file")
    if not path.is_file():
        raise ModelLoadError(f"{path} is not a regular file (a device, pipe or socket)", "Give the path of the .onnx file")
    size = path.stat().st_size
    if size > max_file_bytes:
        raise LimitExceededError(
            f"{path} is {size:,} bytes, above the limit of {max_file_bytes:,}",
            "Raise the limit with max_file_bytes",
        )
    if size > PROTOBUF_LIMIT:
        raise ModelLoadError(
            f"{path} is larger than 2 GB as a single protobuf, which ONNX cannot read",
            "Save the model with external data (onnx.save(..., save_as_external_data=True))",
        )
    model = parse_model_bytes(path.read_bytes(), what=str(path))
    external = _external_tensors(model)
    files: list[Path] = []
    for tensor in external:
        target = _check_external_location(tensor, path.parent)
        if target not in files:
            files.append(target)
    if external:
        total = size + sum(f.stat().st_size for f in files)
        if total > max_file_bytes:
            raise LimitExceededError(
                f"{path} with its external data is {total:,} bytes, above the limit of {max_file_bytes:,}",
                "Raise the limit with max_file_bytes",
            )
        external_data_helper.load_external_data_for_model(model, str(path.parent))
    return LoadedModel(
        model=model,
        name=path.name.removesuffix(".onnx"),
        path=path,
        file_bytes=size + sum(f.stat().st_size for f in files),
        sha256=_sha256_file(path),
        external_data_files=[str(f.relative_to(path.parent.resolve())) for f in files],
    )


def tensor_payload_bytes(model: onnx.ModelProto) -> int:
    """Bytes held by all tensors (initializers, Constant nodes, subgraphs)."""
    total = 0
    for tensor in external_data_helper._get_all_tensors(model):
        if tensor.HasField("raw_data"):
            total += len(tensor.raw_data)
        else:
            total += tensor.ByteSize()
    return total


def needs_external_data(model: onnx.ModelProto) -> bool:
    return tensor_payload_bytes(model) > PROTOBUF_LIMIT


def serialize(model: onnx.ModelProto) -> bytes:
    """The model as one protobuf (only for models under 2 GB)."""
    if needs_external_data(model):
        raise LimitExceededError(
            "The model is larger than 2 GB and cannot be held as one protobuf",
            "Save it to a folder with save(), which writes external data",
        )
    return model.SerializeToString()


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def check_output_path(
    path: str | os.PathLike, *, protect: list[str | os.PathLike] | None = None, overwrite: bool = False
) -> Path:
    """Refuse an output path that is a protected file, or exists (unless overwrite)."""
    path = Path(path)
    for other in protect or []:
        if _same_file(path, Path(other)):
            raise OutputExistsError(
                f"Refusing to write {path}: it is the input model or one of its files",
                "Choose another output path with -o",
            )
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
    path = check_output_path(path, protect=protect, overwrite=overwrite)
    if path.parent and not path.parent.exists():
        raise MissingModelError(f"The output folder {path.parent} does not exist", "Create it first")
    use_external = needs_external_data(model) if external_data is None else external_data
    data_name = path.name + ".data"
    if use_external:
        check_output_path(path.parent / data_name, protect=protect, overwrite=overwrite)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".shrinkray-") as tmp:
        tmp_model = Path(tmp) / path.name
        if use_external:
            to_write = onnx.ModelProto()
            to_write.CopyFrom(model)
            external_data_helper.convert_model_to_external_data(
                to_write, all_tensors_to_one_file=True, location=data_name, size_threshold=1024
            )
            onnx.save_model(to_write, str(tmp_model))
            _publish(Path(tmp) / data_name, path.parent / data_name)
        else:
            tmp_model.write_bytes(serialize(model))
        _publish(tmp_model, path)
    return path


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Write beside the target, then rename over it: readers never see half a file."""
    path = Path(path)
    handle, tmp = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".", prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        _publish(Path(tmp), path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _publish(tmp: Path, final: Path) -> None:
    """Move a finished temp file into place with the usual permissions (umask applied)."""
    os.chmod(tmp, 0o666 & ~_UMASK)
    os.replace(tmp, final)


"""Shrinking a model whose weights live in external data files, one tensor at a time.

:func:`shrinkray.pipeline.shrink.shrink` holds the whole model in memory, then a copy
of the result, then ONNX Runtime's copy while validating: about twice the
model. For a model kept in external data (the only way past 2 GB) that is
needless: :func:`shrink_to_files` loads the graph alone
(``LoadedModel.is_lazy``), lets a method that can stream
(``MethodSpec.stream``) read each weight from its file and write each result
straight to the output's data file, copies the tensors it keeps chunk by
chunk, writes the small graph, and validates the files on disk. Memory holds
the graph plus the few tensors in flight (one per worker thread).

Validation reads the written files: ``onnx.checker`` on the path (it checks
the data file's place, not its bytes) and an ONNX Runtime session opened from
the path **without graph optimizations**. With optimizations on, ONNX Runtime
would constant-fold every ``Cast -> Sub -> Mul`` decode and hold the float
weights again (the model's full size, on top of the int8 codes); without
them it holds the 8-bit codes only, which proves as much (every node and type
accepted) as :func:`shrinkray.graph.validate.validate` proves for in-memory results.

The output is ``NAME.onnx`` plus ``NAME.onnx.data`` beside it (one data file,
large tensors 64 KiB aligned), written in a staging folder and renamed into
place only once validated: nothing is written when anything fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import onnx

from shrinkray.errors import MethodError, ShrinkRayError
from shrinkray.graph.checks import check_opsets, checker_error, explain_runtime_error
from shrinkray.graph.sessions import session_options
from shrinkray.graph.spilling import SpillingEditor, ref_reader
from shrinkray.graph.weights import quantized_ops
from shrinkray.io.external_data import DataFileWriter, finish
from shrinkray.io.files import LoadedModel, _write_synced, check_output_path, staged_outputs
from shrinkray.memory import release_free_memory
from shrinkray.methods import Variant, default_methods, get_method
from shrinkray.pipeline.shrink import not_kept, settle


def streams(method: str, options: dict[str, Any] | None = None) -> bool:
    """True when ``method`` with ``options`` converts a model tensor by tensor (its spec's ``stream``)."""
    spec = get_method(method)
    return spec.streams(spec.make_options(**(options or {})))


def all_stream(methods: list[tuple[str, dict[str, Any]]] | None) -> bool:
    """True when every method of a comparison (``methods``, or the default set when none are given) streams: a
    model kept in external data is then measured in its own files, one session at a time."""
    return all(streams(method, options) for method, options in methods or default_methods())


def can_stream(loaded: LoadedModel, method: str, options: dict[str, Any] | None = None) -> bool:
    """True when this model's weights are still in their files and the method can read them one by one."""
    return loaded.is_lazy and streams(method, options)


def data_file(path: Path) -> Path:
    """The data file written beside an output model."""
    return path.with_name(path.name + ".data")


def validate_file(path: Path, model: onnx.ModelProto) -> None:
    """onnx.checker on the written file, then an unoptimized ONNX Runtime session opened from it.

    ``model`` is the graph just written (its tensors point at the data file), for the messages.
    """
    import onnxruntime as ort

    check_opsets(model)
    try:
        onnx.checker.check_model(str(path))
    except onnx.checker.ValidationError as exc:
        raise checker_error(exc) from None
    try:
        session = ort.InferenceSession(str(path), session_options(optimized=False), providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - ORT raises several unrelated exception types
        raise explain_runtime_error(exc, model) from None
    del session
    release_free_memory()


def shrink_to_files(
    loaded: LoadedModel,
    method: str,
    output: str | Path,
    *,
    protect: list[str | Path] | None = None,
    overwrite: bool = False,
    **options: Any,
) -> tuple[Variant, Path, int]:
    """Convert ``loaded`` (loaded with ``lazy_external``) into ``output`` and its ``.data`` file.

    Returns the variant (its ``model`` is the written graph, whose tensors point at the data file),
    the model's path and the bytes written (model plus data). ``loaded.model`` is rewritten in place.
    Raises a ShrinkRayError when the options are wrong, the method fails or the result does not pass
    onnx.checker or open in ONNX Runtime; then nothing is written.
    """
    spec = get_method(method)
    opts = spec.make_options(**options)
    if not spec.streams(opts):
        raise MethodError(f"The {spec.name} method cannot convert a model tensor by tensor with these options", "")
    path = check_output_path(output, protect=protect, overwrite=overwrite)
    data = check_output_path(data_file(path), protect=protect, overwrite=overwrite)
    model = loaded.model
    quantized = quantized_ops(model)
    with staged_outputs([path, data]) as (tmp_model, tmp_data):
        writer = DataFileWriter(tmp_data, data.name)
        try:
            variant = spec.stream(
                model, opts, read=ref_reader(loaded.external_base), editor=SpillingEditor(model, writer)
            )
            finish(model, writer, loaded.external_base)
        finally:
            writer.close()
        release_free_memory()
        settle(model, variant, quantized)
        _write_synced(tmp_model, model.SerializeToString())
        try:
            validate_file(tmp_model, model)
        except ShrinkRayError as exc:
            raise not_kept(spec.name, exc) from None
        written = tmp_model.stat().st_size + tmp_data.stat().st_size
    variant.model = model
    variant.notes.append(
        f"Converted tensor by tensor from the external data files; written as {path.name} with its weights "
        f"in {data.name} (keep both files together)"
    )
    return variant, path, written


#: Bytes read and written at a time when packing outputs into a zip.
ZIP_CHUNK = 16 << 20


def zip_files(files: list[Path], output: str | Path, *, protect: list[str | Path] | None = None,
              overwrite: bool = False) -> tuple[Path, int]:  # fmt: skip
    """Pack ``files`` (a model and its data file) into ``output``, stored (no compression), chunk by chunk.

    Stored because the int8 codes hardly compress and a model's data file is read by offset: a stored zip
    unpacks at disk speed and never holds more than one chunk in memory here. Written in a staging folder
    and renamed into place (nothing is left behind on failure); zip64 where a member needs it. Returns the
    path and its bytes.
    """
    import zipfile

    path = check_output_path(output, protect=protect, overwrite=overwrite)
    with staged_outputs([path]) as (tmp,):
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for source in files:
                info = zipfile.ZipInfo.from_file(source, arcname=source.name)
                info.compress_type = zipfile.ZIP_STORED
                with open(source, "rb") as src, zf.open(info, "w", force_zip64=info.file_size >= (1 << 31)) as dst:
                    while chunk := src.read(ZIP_CHUNK):
                        dst.write(chunk)
        size = tmp.stat().st_size
    return path, size

"""Uploads too large to hold in memory: copied to disk in chunks, loaded as a graph, shrunk tensor by tensor.

Streamlit keeps an upload in the server's memory once (that is what bounds
``server.maxUploadSize``); everything after that works from disk. The upload
is copied into the session's folder a chunk at a time (no second in-memory
copy). A model that fits this server's memory plan is held as its graph
pointing into that copy when it is one .onnx (a worker reads it whole from
there), or loaded whole from a zip (and the copy removed); a larger one with
external data is loaded lazily (its tensors stay in their files) and only
the streaming methods (weights-int8, float16) may shrink it, in the capped
worker: into a stored zip offered for download, or compared with the
original in its own files (a run like any other, measured one session at a
time). Anything that would read it whole (the other methods) is refused with
:func:`refusal` before it starts.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import streamlit as st

from app_ui.controls import app_message, friendly_errors, method_controls
from app_ui.state import workspace
from shrinkray.errors import ShrinkRayError
from shrinkray.io.archive import made_folder
from shrinkray.io.files import LoadedModel, check_free_space
from shrinkray.io.inline_data import hold_in_place
from shrinkray.io.size_check import ModelSize, check_fits, model_size
from shrinkray.memory import release_free_memory
from shrinkray.text_safety import streamlit_markdown as md

log = logging.getLogger("shrinkray.app")

#: Bytes copied from the upload to disk at a time.
COPY_CHUNK = 8 << 20


def save_upload(uploaded: Any, folder: Path) -> Path:
    """Copy an UploadedFile into ``folder`` chunk by chunk (``read(n)``, never ``getvalue()``)."""
    folder.mkdir(parents=True, exist_ok=True)
    suffix = ".zip" if uploaded.name.lower().endswith(".zip") else ".onnx"
    # the user's own file name (made safe), so that a message about the file names the file they chose
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(uploaded.name).name).strip("._")[:100] or "upload"
    if not name.lower().endswith(suffix):
        name += suffix
    check_free_space(folder, int(getattr(uploaded, "size", 0) or 0), "the upload")  # before a byte is copied
    target = Path(tempfile.mkdtemp(prefix="upload-", dir=folder)) / name
    uploaded.seek(0)
    with open(target, "wb") as out:
        while chunk := uploaded.read(COPY_CHUNK):
            out.write(chunk)
    uploaded.seek(0)
    return target


def load_uploaded(uploaded: Any, workspace: Path, choose: str | None = None) -> LoadedModel:
    """The uploaded model: when it fits this server's plan, one .onnx file is held as its graph pointing into
    its saved copy (its weights are read in place by the workers that need them: the server keeps a fraction of
    the file in memory) and a zip is held whole; else its graph alone (a zip with external data), else a
    refusal saying what to do. Never reads a too-large model whole. ``choose``: the model to load from a zip of
    several (:class:`~shrinkray.errors.SeveralModels` lists them)."""
    from shrinkray.io.archive import load_any

    path = save_upload(uploaded, workspace / "uploads")
    keep = False
    try:
        size = model_size(path)
        try:
            check_fits(size, "measuring it")
        except ShrinkRayError:
            if size is None or not size.external:
                raise  # a single-file model too big to load: saved with external data, it can stream
            loaded = load_any(path, name=uploaded.name, workdir=path.parent / "unpacked", lazy_external=True,
                              choose=choose)  # fmt: skip
            keep = loaded.is_lazy
            if keep:
                if (unpacked := job_input(loaded)) != path:
                    path.unlink()  # the job reads the unpacked files: the zip would be the model's size again
                    loaded.path = unpacked
                return loaded  # its path (the unpacked model, or the zip) is inside the folder discard removes
            raise
        loaded = load_any(path, name=uploaded.name, workdir=workspace, choose=choose)
        if path.suffix == ".onnx":  # one .onnx file: its graph is held, its weights read in place from the saved copy
            loaded = hold_in_place(loaded)
            keep = loaded.in_place
        if not keep:
            loaded.path = None  # as an upload held in memory: the copy on disk goes now
        return loaded
    finally:
        if not keep:
            shutil.rmtree(path.parent, ignore_errors=True)


def load_uploaded_set(uploaded: Any, workspace: Path) -> LoadedModel:
    """An uploaded zip of an encoder and a decoder as one set (io/model_set.py): unpacked into this session's
    uploads folder (removed when another model replaces it), held as its encoder's graph with the set beside."""
    from shrinkray.io.model_set import as_loaded, open_set

    path = save_upload(uploaded, workspace / "uploads")
    try:
        check_fits(model_size(path), "measuring it")
        loaded = as_loaded(open_set(path, workdir=path.parent, name=Path(uploaded.name).stem))
    except BaseException:
        shutil.rmtree(path.parent, ignore_errors=True)
        raise
    path.unlink()  # unpacked: the zip would be the set's size again
    return loaded


def kept_set(folder: Path, name: str, workspace: Path) -> LoadedModel:
    """A run's kept set (opened from its link), linked into this session's uploads folder (copied across file
    systems), so it stays readable if the run is removed."""
    from shrinkray.io.model_set import as_loaded, open_set

    copy = Path(tempfile.mkdtemp(prefix="upload-", dir=made_folder(workspace / "uploads"))) / "set"
    try:
        for source in sorted(p for p in folder.rglob("*") if p.is_file()):
            target = copy / source.relative_to(folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source, target)
            except OSError:
                shutil.copyfile(source, target)
        return as_loaded(open_set(copy, workdir=copy.parent, name=name))
    except BaseException:
        shutil.rmtree(copy.parent, ignore_errors=True)
        raise


def hold_kept(loaded: LoadedModel, workspace: Path) -> LoadedModel:
    """A model loaded whole from a file the session does not own (a run's kept model, opened from its link) held
    as its graph instead: the file is hard-linked into this session's uploads folder (copied across file
    systems), so it stays readable if the run is removed, and goes like an upload's copy when another model
    replaces it. ``loaded`` itself, without a path, when it cannot be held so (external data files)."""
    if loaded.path is None or loaded.external_data_files:
        loaded.path = None
        return loaded
    folder = Path(tempfile.mkdtemp(prefix="upload-", dir=made_folder(workspace / "uploads")))
    target = folder / "model.onnx"
    try:
        try:
            os.link(loaded.path, target)
        except OSError:
            check_free_space(folder, int(loaded.file_bytes), "the model")
            shutil.copyfile(loaded.path, target)
        held = hold_in_place(dataclasses.replace(loaded, path=target))
    except (OSError, ShrinkRayError):
        held = loaded
    if not held.in_place:
        shutil.rmtree(folder, ignore_errors=True)
        held.path = None
    return held


def discard_upload(loaded: LoadedModel | None, workspace: Path) -> None:
    """Remove the files a model kept as its graph still reads (its uploaded zip and the unpacked folder), once
    another model replaces it: they are the model's size twice over, and nothing reads them any more. Only a
    folder this module made below ``workspace/uploads`` is removed."""
    if loaded is None or not (loaded.is_lazy or loaded.model_set is not None) or loaded.path is None:
        return
    uploads = (workspace / "uploads").resolve()
    for folder in Path(loaded.path).resolve().parents:
        if folder.parent == uploads and folder.name.startswith("upload-"):
            shutil.rmtree(folder, ignore_errors=True)
            return


def refusal(loaded: LoadedModel, doing: str) -> ShrinkRayError:
    """Why ``doing`` (``"comparing"``) cannot run on a model loaded as its graph alone, in one sentence."""
    size = ModelSize(loaded.file_bytes, external=True)
    try:
        check_fits(size, doing, limits=None, comparing=doing == "comparing")
    except ShrinkRayError as exc:
        return exc
    return ShrinkRayError(f"This model was loaded as its graph alone, so {doing} cannot read its weights",
                          "Compare only weights-int8 and float16, which work tensor by tensor",
                          "stream_compare")  # fmt: skip


def job_input(loaded: LoadedModel) -> Path:
    """The unpacked .onnx the Model page already checked (its data files beside it), so the worker reads the
    tensors in place instead of unpacking the zip again (a second copy on disk, ~3 s per GB; the zip itself is
    removed once unpacked); the zip when the unpacked folder does not name one model."""
    if loaded.external_base is not None:
        models = sorted(Path(loaded.external_base).glob("*.onnx"))
        if len(models) == 1:
            return models[0]
    return Path(loaded.path)


def shrink_large(loaded: LoadedModel, method: str, options: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """Shrink ``loaded`` (its unpacked files, or its zip, on disk) with a streaming method in the capped worker, into
    ``out_dir/NAME.METHOD.zip`` (stored). Returns what the page shows: the zip's path and size, notes."""
    from shrinkray.runs.jobs import shrink_job
    from shrinkray.runs.sandbox import run_capped

    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / f"{loaded.name}.{method}.zip"
    scratch = Path(tempfile.mkdtemp(prefix="scratch-", dir=out_dir))
    try:
        variant, written, written_bytes, input_bytes = run_capped(
            shrink_job, job_input(loaded), output, method, options, True, str(scratch),
            what=f"Shrinking with {method}",
        )  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"zip": str(written), "bytes": written_bytes, "input_bytes": input_bytes, "method": method,
            "tensors": len(variant.changes), "notes": list(variant.notes), "warnings": list(variant.warnings)}  # fmt: skip


def large_model_notice(loaded: LoadedModel) -> str:
    return app_message(refusal(loaded, "comparing"))


def read_file(path: str) -> bytes:
    """The download's bytes, read only when the button is pressed (Streamlit's deferred download)."""
    return Path(path).read_bytes()


def st_download(result: dict[str, Any]) -> None:
    st.download_button(
        f"Download {md(Path(result['zip']).name)}", data=lambda: read_file(result["zip"]),
        file_name=Path(result["zip"]).name,  # the label is Markdown: the model's name is escaped there
        mime="application/zip", type="primary", icon=":material/download:",
    )  # fmt: skip


def large_shrink_panel(loaded: LoadedModel) -> None:
    """The Shrink page for a model loaded as its graph alone: the methods that stream, and the zip to download."""
    from shrinkray.methods import all_methods
    from shrinkray.units import format_bytes, format_percent

    st.info(md(large_model_notice(loaded)), icon=":material/info:")
    specs = [s for s in all_methods() if s.stream is not None]
    names = [s.name for s in specs]
    method = st.selectbox("Method", names, format_func=lambda n: next(s.title for s in specs if s.name == n),
                          help="The methods that read and write one tensor at a time.")  # fmt: skip
    spec = next(s for s in specs if s.name == method)
    st.markdown(f"**{spec.title}**: {spec.summary}")
    with st.expander(f"Options: {spec.title}"):
        options = method_controls(spec, "shrink-to-zip")  # the comparison below has its own
    results = st.session_state.setdefault("large_results", {})
    key = (loaded.sha256, method)
    if st.button("Shrink tensor by tensor", type="primary", icon=":material/compress:"):
        with friendly_errors(f"Shrinking with {spec.title}"), st.spinner(
            f"Shrinking {format_bytes(loaded.file_bytes)} tensor by tensor, then checking the result in ONNX "
            "Runtime (about half a minute per GB on two cores)"
        ):
            results[key] = shrink_large(loaded, method, options, workspace() / "large-outputs" / loaded.sha256[:16])
    result = results.get(key)
    if result is None or not Path(result["zip"]).is_file():
        return
    st.success(
        f"{md(spec.title)}: {result['tensors']} tensors rewritten; {format_bytes(result['input_bytes'])} -> "
        f"{format_bytes(result['bytes'])} ({format_percent(result['bytes'] / max(result['input_bytes'], 1))} of "
        "the original). Checked: onnx.checker passes and ONNX Runtime opens the result.",
        icon=":material/check_circle:",
    )
    for note in result["notes"]:
        st.caption(md(note))
    for warning in result["warnings"]:
        st.warning(md(warning), icon=":material/warning:")
    st_download(result)


def release_upload(uploaded: Any) -> None:
    """Drop Streamlit's in-memory copy of an upload already copied to disk (a model kept as its graph): the
    server holds it for the session otherwise, the size of the model. The uploader then shows no file; the
    model stays loaded (the sidebar names it)."""
    try:
        from streamlit.runtime import Runtime
        from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

        ctx = get_script_run_ctx()
        if ctx is not None and Runtime.exists():
            Runtime.instance().uploaded_file_mgr.remove_file(ctx.session_id, uploaded.file_id)
    except Exception:  # noqa: BLE001 - only memory is at stake; the model is loaded either way
        log.warning("could not release an upload's memory", exc_info=True)
    uploaded.close()
    release_free_memory()  # the freed bytes back to the OS, not kept by the C heap for the next allocation

"""The work the command line and the app hand to a capped worker (:mod:`shrinkray.runs.sandbox`).

Each job is a module-level function (a worker imports it by name) that loads
the user's file itself, so the model's bytes never travel to the worker, and
returns only what the caller shows (no models, unless asked).
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
from pathlib import Path
from typing import Any

import onnx

from shrinkray.errors import OptionError, SeveralModels
from shrinkray.io.archive import load_any
from shrinkray.io.files import LoadedModel, check_output_path, save, save_all, write_outputs
from shrinkray.io.model_set import COMPANIONS, data_files, files_bytes, open_set, set_members
from shrinkray.measure.results import CompareSettings
from shrinkray.methods import Variant
from shrinkray.methods.base import RunContext
from shrinkray.pipeline.compare import ComparePipeline, variant_file_name
from shrinkray.pipeline.set_compare import compare_set
from shrinkray.pipeline.set_shrink import NOT_FOR_SETS, calibrates, set_calibration, shrink_set
from shrinkray.pipeline.shrink import shrink
from shrinkray.pipeline.streaming import can_stream, shrink_to_files, streams, zip_files


def load_model_file(path: str | Path, scratch: str | Path | None = None, lazy_external: bool = False,
                    member: str | None = None) -> LoadedModel:  # fmt: skip
    """An .onnx file, or a .zip holding a model and its external data (unpacked safely, then removed).

    ``scratch``: an empty folder to unpack into, owned by the caller, which removes it even when this
    process is killed (the capped worker runs this; the parent holds the folder). ``lazy_external``:
    leave external tensors in their files (an unpacked zip stays in ``scratch``) for a streaming method.
    ``member``: the model to load from a zip of several (its path inside).
    """
    # the same loader as the app's
    return load_any(Path(path), workdir=scratch, lazy_external=lazy_external, choose=member or None)


def protected_files(model_path: Path, loaded: LoadedModel) -> list[Path]:
    """The input model and its external data files: never written."""
    return [model_path] + [model_path.parent / f for f in loaded.external_data_files]


def shrink_job(model_path: Path, output: Path, method: str, options: dict[str, Any], force: bool,
               scratch: str, context: RunContext | None = None,
               member: str | None = None) -> tuple[Variant, Path, int, int]:  # fmt: skip
    """Load, shrink, check and write, in the capped worker; returns the change record (without the
    model), the file written, its bytes and the input's bytes. ``context``: the verdict and inputs a
    method that judges or calibrates uses (auto, weights-int4). An ``output`` ending in ``.zip`` gets
    the model (and its data file) packed into a stored zip, written chunk by chunk."""
    loaded = load_model_file(model_path, scratch, lazy_external=streams(method, options), member=member)
    protected = protected_files(model_path, loaded)
    check_output_path(output, protect=protected, overwrite=force)
    if Path(output).suffix.lower() != ".zip":
        return _shrink_into(loaded, output, method, options, force, protected, context)
    folder = Path(scratch) / "zip-out"
    folder.mkdir(parents=True, exist_ok=True)
    inner = folder / (Path(output).name[: -len(".zip")].removesuffix(".onnx") + ".onnx")
    variant, written, _, input_bytes = _shrink_into(loaded, inner, method, options, True, protected, context)
    del loaded
    data = written.with_name(written.name + ".data")
    has_data = data.exists()
    zipped, zipped_bytes = zip_files([written] + ([data] if has_data else []), output, protect=protected,
                                     overwrite=force)  # fmt: skip
    shutil.rmtree(folder, ignore_errors=True)
    variant.notes = [n for n in variant.notes if "keep both files together" not in n]  # they travel together now
    variant.notes.append(f"Packed into {zipped.name} (stored, not compressed): unzip it to get {inner.name}"
                         + (f" and {data.name}, which belong together" if has_data else ""))  # fmt: skip
    return variant, zipped, zipped_bytes, input_bytes


def _shrink_into(loaded: LoadedModel, output: Path, method: str, options: dict[str, Any], force: bool,
                 protected: list[Path], context: RunContext | None) -> tuple[Variant, Path, int, int]:  # fmt: skip
    """Shrink ``loaded`` into ``output`` (tensor by tensor when its weights are still in their files)."""
    if can_stream(loaded, method, options):  # weights in external files: one tensor at a time (shrinkray.pipeline.streaming)
        variant, written, written_bytes = shrink_to_files(loaded, method, output, protect=protected,
                                                          overwrite=force, **options)  # fmt: skip
        variant.model = onnx.ModelProto()
        return variant, written, written_bytes, loaded.file_bytes
    variant = shrink(loaded, method, in_place=True, context=context, **options)  # this process owns this copy
    written = save(
        variant.model,
        output,
        protect=protected,
        overwrite=force,
        external_data=True if loaded.has_external_data else None,  # None: only when over 2 GB
    )
    written_bytes = written.stat().st_size + sum(
        p.stat().st_size for p in [written.with_name(written.name + ".data")] if p.exists()
    )
    variant.model = onnx.ModelProto()  # written; not sent back
    return variant, written, written_bytes, loaded.file_bytes


def compare_job(model_path: Path, settings: CompareSettings, save_dir: Path | None, force: bool, scratch: str,
                progress=None, on_partial=None, naming: str = "shrinkray", member: str | None = None):  # fmt: skip
    """Load, compare and (with --save-dir) keep the variants, in the capped worker.

    Each variant is written into the scratch folder as soon as it is checked and
    dropped from memory (``CompareSettings.variants_dir``), so the worker holds the
    original and one variant at a time; with ``save_dir`` the files are then moved
    there all or none. The result carries no models.
    """
    # a model in external data files stays in them: compare measures it there and streams what it can
    try:
        loaded = load_model_file(model_path, scratch, lazy_external=True, member=member)
    except SeveralModels as exc:  # an encoder and a decoder: compared as one set, unless one was chosen
        if member or set_members(list(exc.choices)) is None:
            raise
        return compare_set_job(model_path, settings, save_dir, force, scratch, progress,
                               naming="transformers.js" if naming == "shrinkray" else naming)  # fmt: skip
    protected = protected_files(model_path, loaded)
    work = Path(scratch) / "variants"
    own_dir = settings.variants_dir is None
    run_settings = dataclasses.replace(settings, variants_dir=str(work)) if own_dir else settings
    pipeline = ComparePipeline(loaded, run_settings, progress, on_partial, owns_model=True)
    del loaded  # the pipeline owns the model now and drops it before timing (latency reads the files)
    with pipeline:
        comparison = pipeline.run()
    comparison.settings = settings
    comparison.input_files = [str(p) for p in protected]  # reports never land on these
    if save_dir is not None:
        for path in publish_variants(comparison, save_dir, model_path.stem, protected, force, naming):
            if progress:
                progress(f"Wrote {path}", 1.0)
    elif own_dir:
        for result in comparison.variants:
            result.file = None  # the scratch copy goes with the scratch folder
    for result in comparison.all:
        result.model = None
    return comparison


def shrink_set_job(model_path: Path, out_dir: Path, method: str, options: dict[str, Any], force: bool,
                   scratch: str, settings: CompareSettings | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Every file of an encoder–decoder set shrunk by one method (set_shrink.py: the files compare judges,
    calibrated alike on ``settings``' inputs) and checked, in the capped worker, then written into ``out_dir``
    at the set's own places under transformers.js's names (all or none, never over the set's files); one
    record per file: its member path, the file written, bytes before and after, the change record."""
    if method in NOT_FOR_SETS:
        raise OptionError(f"The method {method} works on one model file, not on a set",
                          "Choose another method, or one file of the set with --member")  # fmt: skip
    model_set = open_set(model_path, workdir=Path(scratch) / "set")
    protected = [model_path] + [model_set.path(role) for role in model_set.members]
    for member in model_set.members.values():  # refused before any work, not after the set is shrunk
        relative = Path(*member.split("/"))
        stem = relative.name.removesuffix(".onnx")
        check_output_path(out_dir / relative.parent / variant_file_name(stem, method, "transformers.js"),
                          protect=protected, overwrite=force)  # fmt: skip
    staging = Path(scratch) / "out"
    calibration = set_calibration(model_set, settings) if calibrates(method, options) else None
    made = shrink_set(model_set, method, options, staging, calibration=calibration, in_place=True, validate=True)
    staged: dict[Path, Path] = {}
    records = []
    for role, written in made.paths.items():
        target = out_dir / written.relative_to(staging)
        for source in (written, *data_files(written)):
            staged[source] = target.with_name(source.name)
            check_output_path(staged[source], protect=protected, overwrite=force)
        records.append({"member": model_set.members[role], "output": str(target),
                        "input_bytes": files_bytes(model_set.path(role)), "output_bytes": files_bytes(written),
                        **made.records[role], "notes": made.notes})  # the set's notes, each file's named  # fmt: skip
    for companion in model_set.companions():  # a folder made from a zip is a whole model folder too
        target = out_dir / companion.relative_to(model_set.folder)
        if not target.exists() and target not in protected:
            staged[companion] = target
    for target in staged.values():
        target.parent.mkdir(parents=True, exist_ok=True)
    write_outputs({target: functools.partial(_copy, source) for source, target in staged.items()})
    return records


def compare_set_job(model_path: Path, settings: CompareSettings, save_dir: Path | None, force: bool, scratch: str,
                    progress=None, naming: str = "transformers.js"):  # fmt: skip
    """A folder or .zip of an encoder and a decoder compared as one set (pipeline/set_compare.py), in the capped
    worker; with ``save_dir`` every variant's files land there as transformers.js names them (one ``onnx/``
    folder holding every precision), with the set's tokenizer and settings files beside them."""
    model_set = open_set(model_path, workdir=Path(scratch) / "set")
    work = Path(scratch) / "variants"
    run_settings = dataclasses.replace(settings, variants_dir=str(work))
    comparison = compare_set(model_set, run_settings, progress, naming=naming)
    comparison.settings = dataclasses.replace(comparison.settings, variants_dir=settings.variants_dir)
    protected = [model_path] + ([model_set.path(role) for role in model_set.members] if model_path.is_dir() else [])
    comparison.input_files = [str(p) for p in protected]
    if save_dir is not None:
        for path in publish_set_variants(comparison, save_dir, protected, force):
            if progress:
                progress(f"Wrote {path}", 1.0)
    else:
        for result in comparison.variants:
            result.file = None  # the scratch copy goes with the scratch folder
            result.record.pop("files", None)
    return comparison


def publish_set_variants(comparison, folder: Path, protected: list[Path], overwrite: bool = False) -> list[Path]:
    """Copy every usable variant set's files from its own folder (``file``) into ``folder`` at the same places (all or
    none): its models always (``overwrite`` replaces earlier ones), the set's tokenizer and settings files only
    where ``folder`` has none (the original's folder keeps its own); each result's ``file`` becomes its folder."""
    moves: dict[Path, Path] = {}
    results = [r for r in comparison.variants if r.ok and r.file]
    for result in results:
        root = Path(result.file)  # work/<variant>: its files laid out as the set's
        for source in sorted(p for p in root.rglob("*") if p.is_file()):
            target = folder / source.relative_to(root)
            if source.name in COMPANIONS and (target.exists() or target in moves.values()):
                continue
            moves[source] = target
    for target in moves.values():
        check_output_path(target, protect=protected, overwrite=overwrite)
    for target in moves.values():
        target.parent.mkdir(parents=True, exist_ok=True)
    write_outputs({target: functools.partial(_copy, source) for source, target in moves.items()})
    for result in results:
        root = Path(result.file)
        result.record["files"] = {role: str(folder / Path(path).relative_to(root))
                                  for role, path in result.record.get("files", {}).items()}  # fmt: skip
        result.file = str(folder)
    return sorted(set(moves.values()))


def publish_variants(comparison, folder: Path, stem: str, protected: list[Path], overwrite: bool = False,
                     naming: str = "shrinkray") -> list[Path]:  # fmt: skip
    """Move the variants written during the comparison into ``folder`` (all or none), named as ``naming`` says
    (pipeline.compare.variant_file_name); each result records its file."""
    results = [r for r in comparison.variants if r.ok and r.file]
    moves: dict[Path, Path] = {}
    for result in results:
        source = Path(result.file)
        target = folder / variant_file_name(stem, result.key, naming)
        moves[source] = target
        data = source.with_name(source.name + ".data")
        if data.exists():  # the model names its data file: keep that name beside it
            moves[data] = folder / data.name
    for target in moves.values():
        check_output_path(target, protect=protected, overwrite=overwrite)
    folder.mkdir(parents=True, exist_ok=True)
    write_outputs({target: functools.partial(_copy, source) for source, target in moves.items()})
    for result in results:
        result.file = str(moves[Path(result.file)])
    return [Path(r.file) for r in results]


def _copy(source: Path, tmp: Path) -> None:
    shutil.copyfile(source, tmp)


def save_variants(comparison, folder: Path, stem: str, protected: list[Path], overwrite: bool = False) -> list[Path]:
    """Write every usable variant held in memory into ``folder`` (checked models, atomically); each result
    records its file. Every target is checked before the first is written, so a clash leaves nothing half done.
    """
    results = [r for r in comparison.variants if r.ok and r.model is not None]
    targets = [folder / variant_file_name(stem, r.key) for r in results]
    for target in targets:
        check_output_path(target, protect=protected, overwrite=overwrite)
    folder.mkdir(parents=True, exist_ok=True)
    written = save_all([(r.model, t) for r, t in zip(results, targets, strict=True)], protect=protected,
                       overwrite=overwrite)  # all of them or none  # fmt: skip
    for result, path in zip(results, written, strict=True):
        result.file = str(path)
    return written

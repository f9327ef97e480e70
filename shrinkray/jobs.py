"""The work the command line and the app hand to a capped worker (:mod:`shrinkray.sandbox`).

Each job is a module-level function (a worker imports it by name) that loads
the user's file itself, so the model's bytes never travel to the worker, and
returns only what the caller shows (no models, unless asked).
"""

from __future__ import annotations

import contextlib
import re
import tempfile
from pathlib import Path
from typing import Any

import onnx

from shrinkray.compare import CompareSettings, compare
from shrinkray.io import LoadedModel, check_output_path, load, save, save_all
from shrinkray.methods import Variant
from shrinkray.shrink import shrink


def load_model_file(path: str | Path, scratch: str | Path | None = None) -> LoadedModel:
    """An .onnx file, or a .zip holding a model and its external data (unpacked safely, then removed).

    ``scratch``: an empty folder to unpack into, owned by the caller, which removes it even when this
    process is killed (the capped worker runs this; the parent holds the folder).
    """
    from shrinkray.archive import is_zip, load_zip

    path = Path(path)
    if path.is_file() and (path.suffix.lower() == ".zip" or is_zip(path)):
        with contextlib.ExitStack() as stack:
            tmp = scratch or stack.enter_context(tempfile.TemporaryDirectory(prefix="shrinkray-zip-"))
            loaded = load_zip(path, tmp)
            loaded.path = path
            loaded.name = path.name.removesuffix(".zip")
            return loaded
    return load(path)


def protected_files(model_path: Path, loaded: LoadedModel) -> list[Path]:
    """The input model and its external data files: never written."""
    return [model_path] + [model_path.parent / f for f in loaded.external_data_files]


def shrink_job(model_path: Path, output: Path, method: str, options: dict[str, Any], force: bool,
               scratch: str) -> tuple[Variant, Path, int, int]:  # fmt: skip
    """Load, shrink, check and write, in the capped worker; returns the change record (without the
    model), the file written, its bytes and the input's bytes."""
    loaded = load_model_file(model_path, scratch)
    protected = protected_files(model_path, loaded)
    check_output_path(output, protect=protected, overwrite=force)
    variant = shrink(loaded, method, in_place=True, **options)  # this process owns this copy
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
                progress=None):  # fmt: skip
    """Load, compare and (with --save-dir) write the variants, in the capped worker. The models are
    dropped from the result: the reports need none of them, and sending them back costs memory."""
    loaded = load_model_file(model_path, scratch)
    comparison = compare(loaded, settings, progress=progress)
    comparison.input_files = [str(p) for p in protected_files(model_path, loaded)]  # reports never land on these
    if save_dir is not None:
        for path in save_variants(comparison, save_dir, model_path.stem, protected_files(model_path, loaded), force):
            if progress:
                progress(f"Wrote {path}", 1.0)
    for result in comparison.all:
        result.model = None
    return comparison


def variant_file_name(stem: str, key: str) -> str:
    """``model.weights-int8.onnx``, ``model.palettize_levels-16.onnx``: safe on every file system."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", key.replace("=", "-")).strip("._") or "variant"
    return f"{stem}.{slug}.onnx"


def save_variants(comparison, folder: Path, stem: str, protected: list[Path], overwrite: bool = False) -> list[Path]:
    """Write every usable variant into ``folder`` (checked models, atomically); each result records its file.

    Every target is checked before the first is written, so a clash leaves nothing half done.
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

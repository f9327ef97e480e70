"""What the current browser session holds: the loaded model and its comparisons.

Everything lives in ``st.session_state``, so two users never see each other's
models, and moving between pages never recomputes a measurement.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import streamlit as st

from shrinkray.io.files import LoadedModel, load
from shrinkray.measure.results import CompareSettings, Comparison
from shrinkray.pipeline.inspect import ModelSummary, inspect_model

SAMPLES_DIR = Path(__file__).resolve().parent.parent / "sample_models"
UPLOAD_LIMIT_MB = int(st.get_option("server.maxUploadSize"))


def session_setting(key: str, default: Any) -> str:
    """``key``, holding ``default`` until the visitor (or a run link) set it: a widget kept for the session
    takes its value from its key alone, never also from a ``value=``/``default=``/``index=`` (Streamlit warns
    about a widget given both in the run its key was set: a run link's settings, kept method options)."""
    if key not in st.session_state:
        st.session_state[key] = default
    return key


def _sample_files() -> dict[str, Path]:
    """Every bundled sample: a model file, or a transformers.js folder (``NAME/onnx/model.onnx`` beside its
    tokenizer.json, which the engine finds there by itself)."""
    found = {p.stem: p for p in SAMPLES_DIR.glob("*.onnx")}
    found |= {p.parent.parent.name: p for p in SAMPLES_DIR.glob("*/onnx/model.onnx")}
    # a set of models (an encoder and a decoder): its folder
    found |= {p.parent.parent.name: p.parent.parent for p in SAMPLES_DIR.glob("*/onnx/encoder_model.onnx")}
    return found


def sample_names() -> list[str]:
    return sorted(_sample_files())


def load_sample(name: str) -> LoadedModel:
    files = _sample_files()
    if name not in files:
        raise ValueError(f"unknown sample {name}")
    if files[name].is_dir():  # an encoder and a decoder, compared as one set (read in place, never written)
        from shrinkray.io.model_set import as_loaded, open_set

        return as_loaded(open_set(files[name], workdir=workspace(), name=name))
    loaded = load(files[name])
    loaded.name = name  # a folder sample is named by its folder, not by its onnx/model.onnx
    return loaded


def load_upload(name: str, data: bytes) -> LoadedModel:
    """An uploaded .onnx (parsed in memory) or .zip (model + external data, unpacked safely into this
    session's private folder and removed once the model is in memory): the engine's one loader."""
    from shrinkray.io.archive import load_any

    return load_any(data, name=name, workdir=workspace())


def current_model() -> LoadedModel | None:
    return st.session_state.get("model")


@st.cache_data(show_spinner=False, max_entries=32)
def _runtime_problem(sha256: str, _loaded: LoadedModel) -> str | None:
    from shrinkray.errors import ShrinkRayError
    from shrinkray.graph.validate import validate
    from shrinkray.io.external_data import with_values
    from shrinkray.runs.sandbox import run_capped

    try:  # the worker reads the weights of a model held in place; the server never holds them
        run_capped(with_values, validate, _loaded, what="Opening the model in ONNX Runtime")
    except ShrinkRayError as exc:
        return str(exc)
    return None


@st.cache_data(show_spinner=False, max_entries=32)
def _set_problem(sha256: str, _model_set) -> str | None:
    from shrinkray.errors import ShrinkRayError
    from shrinkray.pipeline.set_run import check_set_runs
    from shrinkray.runs.sandbox import run_capped

    try:
        run_capped(check_set_runs, _model_set, what="Opening the set's models in ONNX Runtime")
    except ShrinkRayError as exc:
        return str(exc)
    return None


def runtime_problem(loaded: LoadedModel) -> str | None:
    """Why ONNX Runtime cannot run this model (or a file of this set) here (None when it can), cached by hash."""
    if loaded.model_set is not None:
        return _set_problem(loaded.sha256, loaded.model_set)
    return _runtime_problem(loaded.sha256, loaded)


@st.cache_data(show_spinner=False, max_entries=32)
def _summary(sha256: str, name: str, _loaded: LoadedModel) -> ModelSummary:
    if _loaded.model_set is not None:  # one inspection for the set: every file's ops and weights
        from shrinkray.pipeline.set_compare import set_summary

        return set_summary(_loaded.model_set)
    return inspect_model(_loaded)


def judged_outputs(loaded: LoadedModel) -> list[str]:
    """The outputs a run judges, by name: the model's own, or a set's (what it writes, the decoder's logits)."""
    if loaded.model_set is not None:
        from shrinkray.measure.generation import GENERATED
        from shrinkray.measure.seq2seq import LOGITS

        return [GENERATED, LOGITS]
    return [o.name for o in loaded.model.graph.output]


def summary(loaded: LoadedModel) -> ModelSummary:
    """Inspection, cached by the model's hash and name (the same file uploaded under another name shows that name)."""
    return _summary(loaded.sha256, loaded.name, loaded)


def settings_key(settings: CompareSettings) -> str:
    return json.dumps(asdict(settings), sort_keys=True, default=str)


def store_comparison(loaded: LoadedModel, settings: CompareSettings, comparison: Comparison) -> None:
    results = st.session_state.setdefault("comparisons", {})
    results[(loaded.sha256, settings_key(settings))] = comparison
    st.session_state["latest"] = (loaded.sha256, settings_key(settings))


def cached_comparison(loaded: LoadedModel, settings: CompareSettings) -> Comparison | None:
    return st.session_state.get("comparisons", {}).get((loaded.sha256, settings_key(settings)))


#: Session folders older than this are removed by the next session that starts (crash or kill leftovers).
STALE_WORKSPACE_S = 6 * 3600


def _sweep_stale_workspaces(root: Path) -> None:
    import shutil
    import time

    for folder in root.glob("shrinkray-session-*"):
        try:
            if time.time() - folder.stat().st_mtime > STALE_WORKSPACE_S:
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue


def workspace() -> Path:
    """A private temporary folder for this browser session.

    Removed when the session ends (its state is garbage-collected), and by
    later sessions once it is older than :data:`STALE_WORKSPACE_S`.
    """
    import shutil
    import tempfile
    import weakref

    holder = st.session_state.get("_workspace")
    if holder is None or not Path(holder.path).is_dir():
        _sweep_stale_workspaces(Path(tempfile.gettempdir()))

        class _Folder:
            def __init__(self) -> None:
                self.path = tempfile.mkdtemp(prefix="shrinkray-session-")
                weakref.finalize(self, shutil.rmtree, self.path, True)

        holder = _Folder()
        st.session_state["_workspace"] = holder
    return Path(holder.path)


def run_comparison(loaded: LoadedModel, settings: CompareSettings, progress) -> Comparison:
    """Compare in a capped worker process, waiting for it (or reuse this session's earlier result for the same
    model and settings). The pages queue runs instead (:func:`app_ui.runs.start_run`); this stays for callers
    that need the answer in place."""
    from shrinkray.pipeline.compare import compare
    from shrinkray.runs.sandbox import run_capped

    found = cached_comparison(loaded, settings)
    if found is not None:
        st.session_state["latest"] = (loaded.sha256, settings_key(settings))
        return found
    comparison = run_capped(compare, loaded, settings, what="Shrinking and measuring", progress=progress)
    store_comparison(loaded, settings, comparison)
    st.session_state["last_settings"] = settings
    return comparison

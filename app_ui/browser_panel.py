"""The Compare page's "In your browser" panel: the original and every variant run in the visitor's own
browser with ONNX Runtime Web, served by this app (never a CDN), on the inputs the server's parity used.

The engine prepares the inputs and judges the outputs (:mod:`shrinkray.measure.browser`); this module
only publishes the model files where the page can fetch them (Streamlit's static serving, one
unguessable folder per session, removed with the session), shows the component and the results.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
import time
import weakref
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st
import streamlit.components.v1 as components

from app_ui import runs as run_links
from shrinkray.io.files import LoadedModel, serialize
from shrinkray.io.kept_files import copy_model, model_size
from shrinkray.measure.browser import DEFAULT_RUNS, BrowserInputs, BrowserRun, judge_all
from shrinkray.measure.results import Comparison
from shrinkray.text_safety import streamlit_markdown as md
from shrinkray.units import format_bytes
from shrinkray.verdict.browser import delivery_line, report_table

COMPONENT_DIR = Path(__file__).resolve().parent / "browser_component"
RUNTIME_DIR = COMPONENT_DIR / "ort"
#: Streamlit serves ``static/`` beside the main script at ``app/static/`` (``[server] enableStaticServing``).
STATIC_DIR = Path(__file__).resolve().parents[1] / "static"
RUNS_DIR = STATIC_DIR / "browser-runs"
#: Folders of sessions that ended without cleaning up (a killed server) are removed after this.
STALE_S = 6 * 3600
#: Streamlit's static serving refuses larger files (MAX_APP_STATIC_FILE_SIZE in Streamlit 1.67).
MAX_STATIC_BYTES = 200 * 2**20
#: Time the page spends on the timed runs of one model, after at least 3 runs.
BUDGET_MS = 3000
SERVED_BY = (
    "this app's server (Streamlit static files): compressed with gzip on the fly when the browser accepts it; "
    "it cannot send a precompressed brotli or gzip file"
)
WEBGPU_FILES = ("ort.webgpu.min.mjs", "ort-wasm-simd-threaded.asyncify.mjs", "ort-wasm-simd-threaded.asyncify.wasm")

_component = components.declare_component("in_browser", path=str(COMPONENT_DIR))


def runtime_version() -> str:
    """The shipped ONNX Runtime Web version (written by tools/fetch_ort_web.py)."""
    try:
        return str(json.loads((RUNTIME_DIR / "VERSION.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return "unknown"


def _sweep_stale() -> None:
    for folder in RUNS_DIR.glob("*"):
        try:
            if folder.is_dir() and time.time() - folder.stat().st_mtime > STALE_S:
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue


def _session_folder() -> tuple[Path, str]:
    """This session's unguessable folder under static/ and its URL path; removed when the session ends."""
    holder = st.session_state.get("_browser_folder")
    if holder is None or not Path(holder.path).is_dir():
        RUNS_DIR.mkdir(parents=True, exist_ok=True)
        _sweep_stale()

        class _Folder:
            def __init__(self) -> None:
                self.token = secrets.token_urlsafe(24)
                self.path = str(RUNS_DIR / self.token)
                Path(self.path).mkdir(mode=0o700)  # the user's model copies: like the run store, this user only
                weakref.finalize(self, shutil.rmtree, self.path, True)

        holder = _Folder()
        st.session_state["_browser_folder"] = holder
    return Path(holder.path), f"app/static/{RUNS_DIR.name}/{holder.token}"


def _comparison_id() -> str:
    return hashlib.sha256(repr(st.session_state.get("latest")).encode()).hexdigest()[:16]


def _prepare(loaded: LoadedModel, comparison: Comparison) -> BrowserInputs:
    from shrinkray.io.external_data import with_values
    from shrinkray.measure.browser_inputs import prepare
    from shrinkray.runs.sandbox import run_capped

    if loaded.model_set is not None:  # the set's first inputs, each written through the original set
        from shrinkray.pipeline.set_inputs import browser_inputs

        return run_capped(browser_inputs, loaded.model_set, comparison.settings,
                          what="Preparing the inputs for the browser")  # fmt: skip

    return run_capped(with_values, prepare, loaded, comparison.settings, what="Preparing the inputs for the browser")


def _model_source(result, loaded: LoadedModel | None) -> Path | bytes | None:
    """What the page downloads: the variant's file (a stored run; copied, never read whole), else the model
    in memory, else the loaded model itself for the original; None for a variant that failed."""
    if result.model is None and result.file and Path(result.file).is_file():
        return Path(result.file)
    if result.model is not None:
        return serialize(result.model)
    if loaded is not None and loaded.in_place and loaded.path is not None and Path(loaded.path).is_file():
        return Path(loaded.path)  # held as its graph: its saved file is the model
    return serialize(loaded.model) if loaded is not None else None


def _publish(loaded: LoadedModel, comparison: Comparison, inputs: BrowserInputs, run_id: str) -> dict[str, Any]:
    """Write every runnable model and the inputs into this session's folder (replacing the last ones)."""

    folder, url = _session_folder()
    for old in folder.iterdir():
        old.unlink(missing_ok=True)
    models, skipped = [], []
    if loaded.model_set is not None:
        return _publish_set(loaded, comparison, inputs, run_id, folder, url)
    for index, result in enumerate(comparison.all):
        source = _model_source(result, loaded if index == 0 else None)
        if source is None:
            continue
        size = model_size(source) if isinstance(source, Path) else len(source)
        if size > MAX_STATIC_BYTES:  # checked before a byte is read: a 1 GB variant is never pulled into memory
            skipped.append(f"{result.key} ({format_bytes(size)})")
            continue
        name = f"{run_id}-{index}.onnx"
        if isinstance(source, Path):
            copy_model(source, folder / name)  # a run may keep a large variant compressed: the model itself
        else:
            (folder / name).write_bytes(source)
        models.append({"key": result.key, "path": f"{url}/{name}"})
    (folder / f"{run_id}-inputs.json").write_text(json.dumps(inputs.payload()))
    return {"models": models, "inputsPath": f"{url}/{run_id}-inputs.json", "skipped": skipped}


def _publish_set(loaded: LoadedModel, comparison: Comparison, inputs: BrowserInputs, run_id: str, folder: Path,
                 url: str) -> dict[str, Any]:  # fmt: skip
    """A set's encoder and the decoder it is run through, for the original and every variant set."""
    from shrinkray.pipeline.set_run import JUDGED_DECODERS, variant_paths

    model_set = loaded.model_set
    judged = next(role for role in JUDGED_DECODERS if role in model_set.members)
    models, skipped = [], []
    for index, result in enumerate(comparison.all):
        paths = variant_paths(model_set, result) if result.ok else {}
        if "encoder" not in paths or judged not in paths:
            continue
        if any(paths[role].stat().st_size > MAX_STATIC_BYTES for role in ("encoder", judged)):
            skipped.append(f"{result.key} (a file over {format_bytes(MAX_STATIC_BYTES)})")
            continue
        shutil.copyfile(paths["encoder"], folder / f"{run_id}-{index}-encoder.onnx")
        shutil.copyfile(paths[judged], folder / f"{run_id}-{index}.onnx")
        models.append({"key": result.key, "path": f"{url}/{run_id}-{index}.onnx",
                       "encoderPath": f"{url}/{run_id}-{index}-encoder.onnx"})  # fmt: skip
    (folder / f"{run_id}-inputs.json").write_text(json.dumps(inputs.payload()))
    return {"models": models, "inputsPath": f"{url}/{run_id}-inputs.json", "skipped": skipped}


def _store(comparison: Comparison, runs: list[BrowserRun]) -> None:
    """Keep the runs with the comparison, so the reports and charts carry them."""
    st.session_state.setdefault("browser_runs", {})[_comparison_id()] = runs
    if hasattr(comparison, "browser"):
        comparison.browser = runs

    run_id = run_links.run_of(comparison)
    if run_id is not None:
        run_links.runs_service().keep_browser_runs(run_id, runs)  # the run's link shows them too


def stored_runs(comparison: Comparison) -> list[BrowserRun]:
    """The browser runs of the current comparison, if the panel measured them."""
    found = getattr(comparison, "browser", None)
    return list(found) if found else list(st.session_state.get("browser_runs", {}).get(_comparison_id(), []))


def _component_step(comparison: Comparison, armed: dict, version: str, done: bool) -> bool:
    """The component that runs the models in this browser; its results judged and kept when they land (then the
    page reruns). False when ONNX Runtime Web could not start (said in one sentence)."""
    value = _component(
        runId=armed["runId"], models=armed["models"], inputsPath=armed["inputsPath"], runs=DEFAULT_RUNS,
        budgetMs=BUDGET_MS, version=version, webgpuFiles=all((RUNTIME_DIR / f).is_file() for f in WEBGPU_FILES),
        autoStart=True, done=done, key="in_browser_panel", default=None,
    )  # fmt: skip
    if armed["skipped"]:
        st.caption("Not run in the browser (over the 200 MB a static file may have here): "
                   + md(", ".join(armed["skipped"])))  # variant names may hold the model's tensor names
    if isinstance(value, dict) and value.get("runId") == armed["runId"] and value.get("at") != armed.get("judged"):
        armed["judged"] = value.get("at")
        armed["fatal"] = value.get("fatal")
        if not armed["fatal"]:
            _store(comparison, judge_all(armed["inputs"], list(value.get("results") or []), served_by=SERVED_BY))
        st.rerun()  # the charts and advice above the panel take the browser's results into account
    if armed.get("fatal"):
        st.error(md(f"ONNX Runtime Web could not start in this browser: {armed['fatal']}. Try another browser."))
        return False
    return True


def render(loaded: LoadedModel, comparison: Comparison) -> None:
    """The panel: a button, the component that runs the models, then the table, chart and advice."""
    from shrinkray.report import charts

    version = runtime_version()
    st.markdown("#### In your browser")
    st.write(
        f"Every number above comes from ONNX Runtime on this server's CPU. Here this page downloads the original and "
        f"each variant from this app, opens it in **ONNX Runtime Web {version}** (WebAssembly, shipped with the app: "
        "nothing is fetched from elsewhere) and runs the same inputs as the parity check. The browser's outputs are "
        "judged against the server original's with the same verdict."
    )
    if loaded.model_set is not None:
        st.caption("A set of models: the page downloads each model's encoder and decoder and writes the outputs of "
                   "the comparison's first inputs through them, token by token, judged against the server original's; "
                   "its time is one whole output of the first input.")  # fmt: skip
    if not st.get_option("server.enableStaticServing"):
        st.warning("This app's server does not serve model files to the page: set `enableStaticServing = true` under "
                   "`[server]` in `.streamlit/config.toml` and restart the app.")  # fmt: skip
        return
    cid = _comparison_id()
    state = st.session_state.setdefault("browser_panel", {})
    armed = state.get(cid)
    runs = stored_runs(comparison)  # kept with the run: a link opened in another browser shows them too
    if armed is None:
        if runs:
            st.caption("Measured in a browser when this run was made (below); the button measures this one.")
        if st.button("Run the original and variants in this browser", icon=":material/language:"):
            with st.spinner("Preparing the parity inputs for the browser"):
                inputs = _prepare(loaded, comparison)
            if not inputs.same_as(comparison):
                st.warning("The inputs rebuilt for the browser differ from the ones the comparison used "
                           "(an uploaded sample may be gone): re-measure on this page first.")  # fmt: skip
                return
            run_id = secrets.token_hex(6)
            state[cid] = armed = {"runId": run_id, "inputs": inputs, **_publish(loaded, comparison, inputs, run_id)}
        elif not runs:
            return
    # done: this browser's own measurement has landed (a kept one from another browser does not stop it starting)
    if armed is not None and not _component_step(comparison, armed, version, done=armed.get("judged") is not None):
        return
    if not runs:
        return
    first = runs[0]
    threads = f"{first.threads} thread{'s' if (first.threads or 1) > 1 else ''}" if first.threads else "threads unknown"
    start = f" · runtime start {first.runtime_start_ms:,.0f} ms (once per page)" if first.runtime_start_ms else ""
    st.caption(f"Measured in: {md(first.user_agent)} · {md(first.runtime)} ({first.backend}, {threads}){start} · timed on the "
               f"server's latency input (batch {first.batch}), median of up to {DEFAULT_RUNS} runs per model after the first, "
               "in rounds that run every model once (like the server's interleaved timing)")  # fmt: skip
    header, rows = report_table(comparison, runs)
    st.table(pd.DataFrame([[md(cell) for cell in row] for row in rows], columns=header).set_index("model"))  # cells are Markdown
    for line in browser_advice(comparison, runs):
        (st.error if line.startswith("!") else st.caption)(md(line.lstrip("! ")))
    for run in runs:
        line = delivery_line(run, comparison.get(run.key).sizes if run.key in {r.key for r in comparison.all} else None)
        if line:
            st.caption(md(line))
    st.plotly_chart(charts.browser_chart(comparison, runs), width="stretch")


def browser_advice(comparison: Comparison, runs: list[BrowserRun]) -> list[str]:
    """Plain sentences about the browser runs ("!" first: a problem)."""
    from shrinkray.verdict.browser import advice_lines

    return advice_lines(comparison, runs)

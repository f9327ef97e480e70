"""Runs in the app: start one as a job, follow it while it runs, reopen it from its address.

The page never does the heavy work: :func:`start_run` hands it to the
server's job queue (:mod:`shrinkray.runs.service`) and puts the run's id in the
address (``?run=…``); :func:`follow_run` polls the run once a second in a
fragment (queue position, step, progress, Cancel, and the cards measured so
far), and reruns the page when the run ends. :func:`open_run_from_address`
(every page, from ``app.py``) restores a run's model and results from its id,
so a reload, a new tab or a colleague's browser sees the same run. A session
knows only the ids it started or was given.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import streamlit as st

from app_ui.controls import app_message
from app_ui.large_models import discard_upload, hold_kept, kept_set, refusal
from app_ui.results import show_results
from app_ui.state import settings_key, store_comparison, workspace
from app_ui.visitor import current_visitor, keep_visitor_cookie, visitor_keys
from shrinkray.errors import ShrinkRayError
from shrinkray.pipeline.streaming import all_stream
from shrinkray.runs.hooks import unwatched_limit
from shrinkray.runs.service import SET_FOLDER, Runs, RunView
from shrinkray.runs.store import RunNotFound
from shrinkray.text_safety import streamlit_markdown as md

if TYPE_CHECKING:
    from shrinkray.io.files import LoadedModel
    from shrinkray.measure.results import Comparison

#: Seconds between polls of a live run.
POLL_S = 1.0
#: Seconds between the marks that a page shows a queued run (``Runs.watch``): far below the queue's limit
#: (``shrinkray.runs.hooks.unwatched_limit``, 10 minutes) and far above the poll, to spare the store a write a second.
WATCH_EVERY_S = 30.0


@st.cache_resource(show_spinner=False)
def runs_service() -> Runs:
    """The server's one run store and job queue (shared by sessions; each sees only the ids it holds)."""
    runs = Runs()
    runs.recover()  # runs a stopped server left half-done are marked failed (a shared queue spares its live ones)
    return runs


def visitor() -> str:
    """This session's visitor, whose runs are taken in turn with other visitors' and capped (app_ui.visitor)."""
    return current_visitor(visitor_keys(str(runs_service().store.root)))


def past_runs() -> list:
    """This visitor's kept runs, newest first (runs.service.PastRun: model, when, status, headline)."""
    return runs_service().history(visitor())


def remove_past_run(rid: str) -> None:
    """Remove one of this visitor's runs; the session forgets it if it was showing it."""
    runs_service().remove(rid, visitor())
    if st.session_state.get("run_id") == rid:
        forget_run()
    st.session_state.get(_RESULTS, {}).pop(rid, None)


def keep_visitor() -> None:
    """Every page (from ``app.py``): the visitor's signed cookie given, or taken once the browser holds it."""
    keep_visitor_cookie(visitor_keys(str(runs_service().store.root)))


def run_id() -> str | None:
    """The current session's run (the Pricing page puts it into its links)."""
    return st.session_state.get("run_id")


def _set_address(rid: str | None) -> None:
    """Name the run in the address (``?run=…``), replacing the history entry, never pushing one: Back
    leaves the page in one press. (``st.query_params`` would push an entry per change.) Other
    parameters (the Pricing page's) stay."""
    st.session_state["address_run"] = rid
    value = json.dumps(rid or "")
    nonce = st.session_state["address_nonce"] = st.session_state.get("address_nonce", 0) + 1  # redrawn: runs again
    st.html(
        f"<script>/* {nonce} */(() => {{ const u = new URL(window.location.href); const id = " + value + ";"
        " if ((u.searchParams.get('run') || '') === id) return;"
        " if (id) u.searchParams.set('run', id); else u.searchParams.delete('run');"
        " window.history.replaceState(window.history.state, '', u.pathname + u.search + u.hash); })();</script>",
        unsafe_allow_javascript=True, width="content",
    )  # fmt: skip


def start_run(loaded, settings, what: str = "Shrinking and measuring") -> str:
    """Queue a comparison of ``loaded`` and make it this session's run (its id goes into the address)."""
    if getattr(loaded, "streams_only", False) and not all_stream(settings.methods):
        raise refusal(loaded, "comparing")  # loaded as its graph alone (too large): only methods that stream

    key = (loaded.sha256, settings_key(settings))
    earlier = st.session_state.setdefault("runs_by_settings", {}).get(key)
    if earlier is not None:  # the same model and settings measured before in this session: show that run
        try:
            view = runs_service().view(earlier)
            if view.status in ("done", "queued", "running"):
                _make_current(earlier)
                return earlier
        except RunNotFound:
            pass
    rid = runs_service().start(loaded, settings, what=what, watched=True, visitor=visitor())
    st.session_state["runs_by_settings"][key] = rid
    _make_current(rid)
    return rid


def _make_current(rid: str) -> None:
    st.session_state["run_id"] = rid
    st.session_state.setdefault("my_runs", []).append(rid)
    _set_address(rid)


def forget_run() -> None:
    """A new model was loaded: its page shows no earlier run."""
    st.session_state.pop("run_id", None)
    _set_address(None)


def view(rid: str | None = None) -> RunView | None:
    rid = rid or run_id()
    if rid is None:
        return None
    try:
        return runs_service().view(rid)
    except RunNotFound:
        return None


#: Session key of the finished runs' comparisons this session has opened (only this module reads or writes it).
_RESULTS = "run_results"


def comparison_of(rid: str):
    """The finished run's comparison (variant files as absolute paths), cached in the session."""
    cache = st.session_state.setdefault(_RESULTS, {})
    if rid not in cache:
        cache[rid] = runs_service().comparison(rid)
    return cache[rid]


def run_of(comparison) -> str | None:
    """The id of this session's current run when ``comparison`` is that finished run's result (the very object
    :func:`comparison_of` gave), else None: what is measured on it (the browser panel's runs) belongs to the run."""
    v = view()
    if v is None or v.status != "done":
        return None
    return v.record.id if st.session_state.get(_RESULTS, {}).get(v.record.id) is comparison else None


def open_run_from_address() -> None:
    """Make the run named in the address this session's run, with its model; say so when it cannot be opened."""
    wanted = st.query_params.get("run")
    if wanted is None or wanted == run_id() or wanted in st.session_state.get("my_runs", []):
        # no run named, this one, or an earlier run of this session (an address the page has since replaced):
        # the address keeps naming the session's current run, across page changes too
        if run_id() is not None or wanted is not None:
            _set_address(run_id())
        return
    try:
        record = runs_service().view(wanted).record
        settings = record.settings  # a run another version kept cannot be read: one sentence, before anything
        if record.status == "done":
            comparison_of(wanted)  # its results too (cached for the page)
        kept_set_folder = record.folder / SET_FOLDER  # a set's run keeps its files as the set lays them out
        if not record.model_path.is_file() and not kept_set_folder.is_dir():
            raise RunNotFound("This run's model is no longer kept", "Start a new run on the Shrink page")
        current = st.session_state.get("model")
        if current is None or current.sha256 != record.model_sha256:
            from shrinkray.io.files import load

            if kept_set_folder.is_dir():
                loaded = kept_set(kept_set_folder, record.model_name, workspace())
                loaded.sha256 = record.model_sha256  # the identity it was run under (a zip's digest)
            else:
                loaded = hold_kept(load(record.model_path), workspace())  # its graph, pointing into a link of the file
            loaded.name = record.model_name
            set_model(loaded, f"From a run link: {record.model_name}", keep_run=True)
    except ShrinkRayError as exc:
        st.session_state["run_problem"] = f"This run link cannot be opened: {exc}"
        _set_address(run_id())
        return
    st.session_state["run_id"] = wanted
    st.session_state.setdefault("my_runs", []).append(wanted)
    _seed_settings(settings)


def _seed_settings(settings) -> None:
    """A session opening a run (a reload, a shared link) starts from that run's Shrink settings: methods,
    their options, the verdict profile and the toggles (only where the session has chosen nothing yet).
    The widgets take their values from these keys alone (:func:`app_ui.state.session_setting`)."""
    if settings is None:
        return
    seeds = {
        "shrink.methods": [name for name, _ in settings.methods] or None,
        "shrink.profile": settings.verdict.profile,
        "shrink.runs": int(settings.runs or 0),
        "shrink.latency": bool(settings.latency),
        "shrink.culprits": bool(settings.culprits),
        "shrink.sweep": settings.batches is not None,
    }
    for name, options in settings.methods:
        for option, value in options.items():
            seeds[f"shrink:{name}:{option}"] = ",".join(map(str, value)) if isinstance(value, list) else value
    for key, value in seeds.items():
        if value is not None and key not in st.session_state:
            st.session_state[key] = value


def show_run_problem() -> None:
    """The message for a bad run link (once)."""
    problem = st.session_state.pop("run_problem", None)
    if problem:
        st.error(md(problem), icon=":material/link_off:")


def _failure_text(v: RunView) -> str:
    r = v.record
    if r.problem:
        return app_message(ShrinkRayError(r.problem, r.hint, r.setting))
    return r.error or "The run stopped without a message. Start it again."


def follow_run(rid: str | None = None, cards: bool = True) -> RunView | None:
    """While the run is queued or running: its position or progress, a Cancel button and the cards so far
    (polled); when it failed or was cancelled: why. Returns the run's view (None when there is no run)."""
    rid = rid or run_id()
    if rid is None:
        return None
    v = view(rid)
    if v is None:
        return None
    if v.live:
        _live_panel(rid, cards)
        return v
    told = st.session_state.setdefault("runs_told", set())  # a run's failure is said once, not on every rerun
    if rid in told:
        return v
    if v.status in ("failed", "cancelled"):
        told.add(rid)
    if v.status == "failed":
        st.error(md(f"{v.record.kind or 'Shrinking and measuring'} failed: {_failure_text(v)}"), icon=":material/error:")
    elif v.status == "cancelled" and v.record.problem.startswith("This run was not started"):
        st.info(md(_failure_text(v)), icon=":material/cancel:")  # why, and what to do: the hint says
    elif v.status == "cancelled":
        st.info("This run was cancelled. Press **Shrink and measure** to start again.", icon=":material/cancel:")
    return v


@st.fragment(run_every=POLL_S)
def _live_panel(rid: str, cards: bool) -> None:
    v = view(rid)
    if v is None or not v.live:
        st.rerun()  # the run ended: redraw the whole page with its results
        return
    with st.container(border=True):
        row = st.container(horizontal=True, vertical_alignment="center")  # Cancel keeps its width on a narrow page
        left, right = row.container(width="stretch", gap=None), row.container(width="content")
        if v.status == "queued":
            _watch(rid)
            job = v.job
            waiting = f"position {v.position} of {job.queued}" if job is not None else "waiting"
            why = f" (waiting for {job.waiting_for})" if job is not None and job.waiting_for else ""
            left.markdown(f":material/hourglass_top: **Queued**, {waiting}{why}: runs start as workers free up, "
                          "each visitor's in turn with the others'.")  # fmt: skip
        else:
            left.progress(min(max(v.fraction, 0.0), 1.0), text=md(v.step or "Starting"))
        problems = st.session_state.setdefault("cancel_problems", {})
        if right.button("Cancel", key=f"cancel:{rid}", icon=":material/stop_circle:"):
            try:
                runs_service().cancel(rid)
                problems.pop(rid, None)
            except ShrinkRayError as exc:  # e.g. the run store is full: the run goes on, and the page says why

                problems[rid] = app_message(exc)
            st.rerun()
        if rid in problems:
            left.error(md(problems[rid]), icon=":material/error:")
        left.caption("This run keeps going if you leave or reload the page: its address opens it again. One still "
                     f"waiting in line is dropped if no page has shown it for {unwatched_limit() / 60:g} minutes "
                     "when its turn comes.")  # fmt: skip
    if cards:
        try:
            snapshot = v.record.snapshot
        except RunNotFound:  # kept by another version (a replica not yet upgraded): the progress above says enough
            snapshot = None
        if snapshot is not None:
            with st.container():
                show_results(snapshot, partial=True)


def _watch(rid: str) -> None:
    """Tell the queue a page shows this queued run (at most every :data:`WATCH_EVERY_S` per session)."""
    marks = st.session_state.setdefault("runs_watched", {})
    now = time.monotonic()
    every = min(WATCH_EVERY_S, unwatched_limit() / 4)
    if now - marks.get(rid, -every) >= every:
        marks[rid] = now
        runs_service().watch(rid)


def keep_method_settings() -> None:
    """Keep the Shrink page's method option widgets (``shrink:<method>:<option>``) across page changes.

    Streamlit drops a widget's value when a run does not draw it; assigning
    the value to itself makes it plain session state, which stays. (The
    page's own widgets use ``persist_state="session"``; the method controls
    are built elsewhere.)
    """
    for key in list(st.session_state.keys()):
        if isinstance(key, str) and key.startswith("shrink:") and key.count(":") == 2:
            st.session_state[key] = st.session_state[key]


def wait_until_idle(timeout: float = 600) -> bool:
    """Block until the server's queue has nothing waiting or running (tests)."""
    queue = runs_service().queue
    return queue.wait_idle(timeout) if hasattr(queue, "wait_idle") else True


def set_model(loaded: LoadedModel, source: str, keep_run: bool = False) -> None:
    """Make ``loaded`` the current model; results of other models stay cached in the session.

    A newly loaded model leaves the current run (its address no longer names
    it) unless it is that run's own model (``keep_run``, a run link being opened).
    """
    current = st.session_state.get("model")
    if not keep_run and (current is None or current.sha256 != loaded.sha256):
        forget_run()
    if current is not None and current is not loaded:
        discard_upload(current, workspace())  # a model kept as its graph: its files on disk go with it
    st.session_state["model"] = loaded
    st.session_state["model_source"] = source


def latest_comparison(loaded: LoadedModel | None) -> Comparison | None:
    """The most recent comparison for the current model: the session's run once it is done (kept in the run
    store, so a reload or a run link shows it too), else one stored in this session."""
    if loaded is None:
        return None
    found = view()
    if found is not None and found.status == "done" and found.record.model_sha256 == loaded.sha256:
        try:
            comparison = comparison_of(found.record.id)
        except ShrinkRayError:
            comparison = None
        if comparison is not None:
            store_comparison(loaded, comparison.settings, comparison)
            return comparison
    key = st.session_state.get("latest")
    if not key or key[0] != loaded.sha256:
        return None
    return st.session_state.get("comparisons", {}).get(key)


"""Runs: a comparison as a kept, addressable job (the run store and the job queue together).

:meth:`Runs.start` keeps the model in a new run's folder and queues the
work; the worker (:func:`compare_run`, in a capped child process) loads it
from there, sends a snapshot after each measured step, writes each variant
model into the run's folder and returns the comparison without models.
:meth:`Runs.view` is what a page polls; :meth:`Runs.comparison` what it shows
once the run is done, by whoever holds the id.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
import shutil
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shrinkray.errors import ShrinkRayError
from shrinkray.io.files import (
    PROMPTS_FILE,
    TOKENIZER_FILE,
    LoadedModel,
    load,
    needs_external_data,
    save,
    tensor_payload_bytes,
)
from shrinkray.io.limits import Limits
from shrinkray.io.model_set import open_set
from shrinkray.measure.results import CompareSettings
from shrinkray.pipeline.compare import compare
from shrinkray.pipeline.set_compare import compare_set
from shrinkray.pipeline.streaming import all_stream
from shrinkray.runs.fairness import LOCAL
from shrinkray.runs.hooks import run_hooks
from shrinkray.runs.queue import DONE, FINISHED, JobStatus, RunQueue, estimate_job_memory
from shrinkray.runs.queue_rq import queue_from_env
from shrinkray.runs.store import RunNotFound, RunRecord, RunStore, is_run_id, safe_file_name
from shrinkray.verdict.headline import headline_of

#: Progress is written to the store at most this often (the queue's own status is live).


def _compare_supports(name: str) -> bool:
    return name in inspect.signature(compare).parameters


def _settings_support(field_name: str) -> bool:
    return any(f.name == field_name for f in dataclasses.fields(CompareSettings))


def compare_run(model_path: str, name: str, settings: Any, run_folder: str, progress=None, on_partial=None):
    """The work of one run, in the capped worker: compare, write each variant into the run's folder.

    Returns the comparison with every model dropped and each variant's
    ``file`` relative to the run's folder (``variants/NAME.onnx``).
    """
    folder = Path(run_folder)
    variants = folder / "variants"
    variants.mkdir(exist_ok=True)
    loaded = load(model_path, lazy_external=True)  # a model in external data files is measured in them
    loaded.name = name
    kwargs: dict[str, Any] = {"progress": progress, "owns_model": True}  # dropped once its file exists
    if _compare_supports("spare_disk"):  # the server's disk is every visitor's: measure sparing it
        kwargs["spare_disk"] = True
    if on_partial is not None and _compare_supports("on_partial"):
        kwargs["on_partial"] = on_partial
    if _settings_support("variants_dir"):
        settings = dataclasses.replace(settings, variants_dir=str(variants))
    comparison = compare(loaded, settings, **kwargs)
    taken: set[str] = set()
    for result in comparison.variants:
        if result.model is not None:
            stem = safe_file_name(result.key)
            while stem in taken:
                stem += "_"
            taken.add(stem)
            target = variants / f"{stem}.onnx"
            save(result.model, target, overwrite=True)
            result.file = str(target)
        if result.file:
            path = Path(result.file)
            path = path if path.is_absolute() else variants / path
            result.file = str(path.resolve().relative_to(folder.resolve()))
        result.model = None
    comparison.original.model = None
    return comparison


def compare_set_run(set_folder: str, name: str, settings: Any, run_folder: str, progress=None, on_partial=None):
    """A model set's run, in the capped worker: compare the set (pipeline/set_compare.py) with each variant set
    written under the run's ``variants/`` in transformers.js's names; each variant's ``file`` is its folder of
    models, relative to the run's folder."""
    folder = Path(run_folder)
    model_set = open_set(set_folder, workdir=folder / "work", name=name)
    variants = folder / "variants"
    variants.mkdir(exist_ok=True)
    comparison = compare_set(model_set, dataclasses.replace(settings, variants_dir=str(variants)), progress,
                             on_partial)  # fmt: skip
    comparison.settings = settings
    for result in comparison.variants:
        if result.file:
            result.file = str(Path(result.file).resolve().relative_to(folder.resolve()))
    return comparison


#: Where a run keeps a model set's files (as the set lays them out).
SET_FOLDER = "set"


def planned_bytes(loaded: LoadedModel, methods: int) -> int:
    """The run-store disk a run may take: its copy of the model and, at most, one copy per method's variant (no
    method makes a model larger; the visitor's quota counts a live run at this until it ends)."""
    return int(loaded.file_bytes) * (1 + max(int(methods), 1))


@dataclass(frozen=True)
class PastRun:
    """One line of a visitor's past runs: the model, when, how it ended and its one-sentence headline."""

    id: str
    model_name: str
    created: float
    status: str
    headline: str
    browser_runs: int

    @classmethod
    def of(cls, record: RunRecord) -> PastRun:
        headline, browser = "", 0
        if record.status == DONE:
            try:
                comparison = record.result
                headline = headline_of(comparison).text()
                browser = len(comparison.browser)
            except Exception:  # noqa: BLE001 - a result this version cannot read still lists, without a headline
                headline = ""
        elif record.error:
            headline = record.error
        return cls(record.id, record.model_name, record.created, record.status, headline, browser)


@dataclass(frozen=True)
class RunView:
    """What a page shows about one run: the record, and where it is in this server's queue."""

    record: RunRecord
    job: JobStatus | None

    @property
    def status(self) -> str:
        if self.job is not None and not self.job.finished:
            return self.job.state
        return self.record.status

    @property
    def live(self) -> bool:
        return self.status in ("queued", "running")

    @property
    def step(self) -> str:
        return self.job.step if self.job is not None and not self.job.finished else self.record.step

    @property
    def fraction(self) -> float:
        return self.job.fraction if self.job is not None and not self.job.finished else float(self.record.fraction)

    @property
    def position(self) -> int:
        return self.job.position if self.job is not None and self.job.state == "queued" else 0


class Runs:
    """Start, follow, cancel and reopen runs."""

    def __init__(self, store: RunStore | None = None, queue: RunQueue | None = None) -> None:
        self.store = store or RunStore()
        # the backend: LocalQueue, or with SHRINKRAY_QUEUE=redis://... the queue replicas share (runqueue_rq)

        self.queue = queue if queue is not None else queue_from_env(self.store)

    def recover(self) -> list[str]:
        """At start-up: runs a stopped server left live are marked failed (a shared queue spares those it holds)."""
        shared = getattr(self.queue, "recover", None)
        return shared(self.store) if shared is not None else self.store.recover()

    def start(self, loaded: LoadedModel, settings: Any, what: str = "Shrinking and measuring",
              watched: bool = False, visitor: str = LOCAL) -> str:  # fmt: skip
        """Keep the model and the inputs in a new run, queue its work, and return the run's id at once.
        ``watched``: a page follows the run and calls :meth:`watch` while it shows it; when its turn in line
        comes after no page has shown it for a while (``runs.hooks.unwatched_limit``), it is not started.
        ``visitor``: whose run it is (:mod:`shrinkray.runs.fairness`): runs are taken round-robin across
        visitors, and a visitor other than ``local`` with ``max_live_runs`` runs going is refused
        (:class:`~shrinkray.runs.fairness.TooManyRuns`), as is a run that would take the visitor's runs past
        ``max_visitor_disk_bytes`` of the store once their own oldest finished runs made room."""
        store = self.store
        limits = Limits.from_env()
        methods = len(getattr(settings, "methods", []) or []) or 4
        try:
            run_id = store.create(model_name=loaded.name, model_sha256=loaded.sha256, model_bytes=loaded.file_bytes,
                                  settings=None, kind=what, visitor=visitor, max_live=limits.max_live_runs,
                                  planned_bytes=planned_bytes(loaded, methods),
                                  max_visitor_bytes=limits.max_visitor_disk_bytes)  # fmt: skip
        except (OSError, sqlite3.Error) as exc:
            raise _cannot_keep(exc) from exc
        folder = store.folder(run_id)
        try:
            if watched:
                store.mark_watched(run_id)
            if loaded.model_set is not None:  # an encoder and a decoder: every file of the set, as laid out
                self._submit_set(loaded, settings, folder, what, run_id, visitor)
                return run_id
            if _linked_from(store.model_folder(loaded.sha256, run_id), folder, _model_files(loaded)):
                pass  # a repeat of a model a kept run holds: its files are shared, not written again
            elif loaded.is_lazy:  # its graph alone was loaded: its files, linked (no second copy) or copied
                _keep_files(loaded, folder / "model.onnx")
            else:
                save(loaded.model, folder / "model.onnx", overwrite=True)
            for companion, name in ((loaded.tokenizer, TOKENIZER_FILE), (loaded.prompts, PROMPTS_FILE)):
                if companion:  # a decoder's tokenizer and text travel with its copy: the worker finds them beside it
                    shutil.copyfile(companion, folder / name)
            settings = self._keep_inputs(settings, folder)
            store.set_settings(run_id, settings)
            streamed = loaded.streams_only and all_stream(getattr(settings, "methods", None))
            memory = estimate_job_memory(tensor_payload_bytes(loaded.model), methods, streamed=streamed)
            self.queue.submit(
                compare_run, str(folder / "model.onnx"), loaded.name, settings, str(folder),
                memory_bytes=memory, what=what, hooks=run_hooks(store, run_id), job_id=run_id, visitor=visitor,
            )  # fmt: skip
        except BaseException as exc:
            # nobody holds this id yet: a run the queue refused (busy) or that could not be kept leaves nothing
            # behind (a live record no job serves would hold its model copy until the server restarts)
            with contextlib.suppress(OSError, sqlite3.Error):
                store.discard(run_id, "it was not started")
            if isinstance(exc, (OSError, sqlite3.Error)):
                raise _cannot_keep(exc) from exc
            raise
        return run_id

    def _submit_set(self, loaded: LoadedModel, settings: Any, folder: Path, what: str, run_id: str,
                    visitor: str) -> None:  # fmt: skip
        """Keep a model set's files in the run (``set/``, linked when the file system allows) and queue its
        comparison (pipeline/set_compare.py)."""
        model_set = loaded.model_set
        for source in model_set.files():
            target = folder / SET_FOLDER / source.relative_to(model_set.folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source, target)
            except OSError:
                shutil.copyfile(source, target)
        settings = self._keep_inputs(settings, folder)
        self.store.set_settings(run_id, settings)
        methods = len(getattr(settings, "methods", []) or []) or 4
        self.queue.submit(
            compare_set_run, str(folder / SET_FOLDER), loaded.name, settings, str(folder),
            memory_bytes=estimate_job_memory(int(loaded.file_bytes), methods), what=what,
            hooks=run_hooks(self.store, run_id), job_id=run_id, visitor=visitor,
        )  # fmt: skip

    def _keep_inputs(self, settings: Any, folder: Path) -> Any:
        """Uploaded parity inputs copied into the run, so the run can be measured and shown again later."""
        inputs_path = getattr(settings, "inputs_path", None)
        sample_files = list(getattr(settings, "sample_files", []) or [])
        options = getattr(settings, "inputs", None)
        text = getattr(options, "text", "")
        if not inputs_path and not sample_files and not text:
            return settings
        target = folder / "inputs"
        target.mkdir(exist_ok=True)
        changes: dict[str, Any] = {}
        if text and Path(text).is_file():  # a decoder's prompts text: kept with the run, as its samples are
            copy = target / safe_file_name(Path(text).name)
            shutil.copyfile(text, copy)
            changes["inputs"] = dataclasses.replace(options, text=str(copy))
        if inputs_path:
            source = Path(inputs_path)
            copy = target / safe_file_name(source.name)
            shutil.copyfile(source, copy)
            changes["inputs_path"] = str(copy)
        kept = []
        for index, path in enumerate(sample_files):
            source = Path(path)
            copy = target / f"{index:02d}" / safe_file_name(source.name)  # the user's file name, shown on the page
            copy.parent.mkdir(exist_ok=True)
            shutil.copyfile(source, copy)
            kept.append(str(copy))
        if sample_files:
            changes["sample_files"] = kept
        return dataclasses.replace(settings, **changes)


    def view(self, run_id: str) -> RunView:
        """The run's record and its live queue status; :class:`RunNotFound` (with a message) otherwise."""
        if not is_run_id(run_id):  # a link's run= of any length or shape: refused before any queue is asked
            self.store.get(run_id)
        job = self.queue.status(run_id)
        record = self.store.get(run_id)
        if job is not None and job.finished and record.live:
            record = self.store.get(run_id)  # the outcome was being written: read it again
            if record.live and job.state != DONE:
                record = _outcome_not_kept(record, job)
        return RunView(record, job)

    def watch(self, run_id: str) -> None:
        """A page shows this run now (best effort: a store that cannot be written only makes it look unwatched
        sooner). Only a run started ``watched`` is ever dropped for want of it."""
        with contextlib.suppress(OSError, ShrinkRayError):
            if self.store.unwatched_for(run_id) is not None:
                self.store.mark_watched(run_id)

    def cancel(self, run_id: str) -> bool:
        """Stop a queued or running run. A live record no queue knows (its process is gone) is marked cancelled."""
        if self.queue.cancel(run_id):
            return True
        record = self.store.get(run_id)
        if record.live and self.queue.status(run_id) is None:
            self.store.fail(run_id, "cancelled", error="The run was cancelled", problem="The run was cancelled")
            return True
        return False

    def history(self, visitor: str, limit: int = 50) -> list[PastRun]:
        """``visitor``'s kept runs, newest first, each with its headline when it finished (what "Past runs" shows)."""
        return [PastRun.of(record) for record in self.store.runs_of(visitor, limit)]

    def remove(self, run_id: str, visitor: str) -> None:
        """Remove ``visitor``'s own finished run (a live one is cancelled first)."""
        record = self.store.get(run_id)
        if record.live and record.visitor == visitor:
            self.cancel(run_id)
            deadline = time.monotonic() + 10
            while self.store.get(run_id).live and time.monotonic() < deadline:  # its job stops within a step
                time.sleep(0.1)
        self.store.remove(run_id, visitor)

    def keep_browser_runs(self, run_id: str, browser_runs: list) -> bool:
        """Keep the visitor's ONNX Runtime Web measurements with the finished run (its link then shows them)."""

        def attach(comparison):
            comparison.browser = list(browser_runs)
            return comparison

        return self.store.amend_result(run_id, attach)

    def comparison(self, run_id: str):
        """The finished comparison, each variant's ``file`` the absolute path of its model in the run's folder."""
        record = self.store.get(run_id)
        if record.status != DONE:
            raise RunNotFound("This run has not finished", "Wait for it, or start it again")
        return absolute_files(record.result, record.folder)


def _outcome_not_kept(record: RunRecord, job: JobStatus) -> RunRecord:
    """A run that ended but whose store could not record it (full, read-only): the queue's outcome, not 'running'
    for ever."""
    problem = job.problem or job.error or "The run stopped"
    return dataclasses.replace(record, status=job.state, step=job.step, error=job.error, setting=job.setting,
                               problem=f"{problem}; the server could not record it in its run folder",
                               hint=job.hint or "Start the run again; if it repeats, the server's run folder is full "
                                                "or not writable")  # fmt: skip


def _cannot_keep(exc: BaseException) -> ShrinkRayError:
    """A full or read-only run store, in one sentence (the run was not started)."""
    reason = getattr(exc, "strerror", None) or type(exc).__name__
    return ShrinkRayError(f"The server could not keep this run ({reason}), so it was not started",
                          "Try again later; if it repeats, the server's run folder is full or not writable")  # fmt: skip


def absolute_files(comparison: Any, folder: Path) -> Any:
    """A copy of ``comparison`` whose variants' files are absolute paths under ``folder`` (missing ones None)."""
    if comparison is None:
        return None
    variants = []
    for result in comparison.variants:
        path = (folder / result.file).resolve() if result.file else None
        inside = path is not None and folder.resolve() in path.parents and (path.is_file() or path.is_dir())
        variants.append(dataclasses.replace(result, file=str(path) if inside else None))
    return dataclasses.replace(comparison, variants=variants)


__all__ = ["FINISHED", "RunNotFound", "RunView", "Runs", "absolute_files", "compare_run"]


def _model_files(loaded: LoadedModel) -> dict[str, int] | None:
    """The files a run keeps the model in (``model.onnx``, its data files) and their sizes; None when they
    cannot be known before it is written (a model held whole but too large for one file). A kept run's files
    of the same hash match these sizes unless it was kept the other way (whole vs its graph alone)."""
    if loaded.is_lazy:
        base = Path(loaded.external_base)
        sources = {"model.onnx": Path(loaded.path), **{name: base / name for name in loaded.external_data_files}}
        try:
            return {name: source.stat().st_size for name, source in sources.items()}
        except OSError:
            return None
    return None if needs_external_data(loaded.model) else {"model.onnx": loaded.model.ByteSize()}


def _linked_from(previous: Path | None, folder: Path, files: dict[str, int] | None) -> bool:
    """Hard-link ``files`` from ``previous`` (another run of the same model, by its hash) into ``folder`` when each
    has the size expected; all or nothing: False, with nothing left behind, when one cannot be linked (removed
    meanwhile, kept the other way, another device)."""
    if previous is None or not files:
        return False
    made: list[Path] = []
    try:
        for name, size in files.items():
            source, target = previous / name, folder / name
            if source.stat().st_size != size:
                raise FileNotFoundError(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(source, target)
            made.append(target)
    except OSError:
        for path in made:
            path.unlink(missing_ok=True)
        return False
    return True


def _keep_files(loaded: LoadedModel, target: Path) -> None:
    """A model loaded as its graph alone kept in a run: its graph file as ``target`` and its data files beside it
    under the names the graph gives them, each hard-linked when the file system allows (a 2.5 GB upload is not
    copied again for its run) and copied otherwise."""
    base = Path(loaded.external_base)
    pairs = [(Path(loaded.path), target)] + [(base / name, target.parent / name) for name in loaded.external_data_files]
    reserved = {target.name, "inputs", "variants", TOKENIZER_FILE, PROMPTS_FILE}  # what a run keeps beside it
    for source, copy in pairs:
        first = copy.relative_to(target.parent).parts[0]
        if first in reserved and copy != target:
            raise ShrinkRayError(f"The model's data file is named {copy.relative_to(target.parent).as_posix()}, "
                                 f"where a run keeps its own {first}", "Save the model's weights under another file name")  # fmt: skip
        copy.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, copy)
        except OSError:
            shutil.copyfile(source, copy)

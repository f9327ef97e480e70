"""Runs kept on disk: a record per run in SQLite, its files in a folder of its own.

A run outlives the browser tab that started it: reloading the page, a new
tab or a colleague's browser opens the same results by the run's id, while
the run is kept. Ids are unguessable (128 random bits), and nothing lists
runs: whoever has an id sees that run, nobody finds another.

Layout under the root (``SHRINKRAY_RUNS_DIR``, default a folder in the
user's cache)::

    runs.sqlite3          one row per run: status, progress, settings, the latest snapshot, the result, its visitor
    visitor.key           the secret that signs visitors' cookies (made once, mode 0600: runs/visitors.py)
    runs/<id>/model.onnx  the model the run measured (so other pages work when the run is reopened)
    runs/<id>/variants/   the variant models, written by the worker
    runs/<id>/inputs/     uploaded parity inputs (images, WAV, .npz)

Every file appears whole or not at all (written under a temporary name in
the same folder, then renamed). A run that fails or is cancelled loses its
variant files, so nothing half-made is ever offered. Limits on total bytes
and age remove the oldest finished runs; a removed run's id is remembered so
its link says "removed" rather than "unknown".

Records hold data, never code: the settings and the comparison are JSON with a schema version
(:mod:`shrinkray.measure.results_json`), read back by the dataclasses' type hints. A record an older
version kept as a pickle is never unpickled: it reads as "kept by an older version; start it again".

The store refuses a root folder, its folder of runs, its database or a run's folder that is a symbolic
link, belongs to another user or that group or others may write, checked (``os.lstat``) before any
change of mode and before anything in it is read.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import sqlite3
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shrinkray.errors import LimitExceededError, ShrinkRayError
from shrinkray.io.limits import Limits, _parse_setting
from shrinkray.measure.results_json import StoredFormatError, results_codec
from shrinkray.pipeline.inspect import ModelSummary
from shrinkray.runs.fairness import LOCAL, capped, too_many_runs
from shrinkray.units import format_bytes

ROOT_ENV = "SHRINKRAY_RUNS_DIR"
MAX_BYTES_ENV = "SHRINKRAY_RUNS_MAX_BYTES"
MAX_AGE_ENV = "SHRINKRAY_RUNS_MAX_AGE_DAYS"
DEFAULT_MAX_BYTES = 5 * 2**30
DEFAULT_MAX_AGE_DAYS = 7.0

STATUSES = ("queued", "running", "done", "failed", "cancelled")
#: A file in a run's folder whose time says when a page last showed the run (:meth:`RunStore.mark_watched`).
WATCHED_FILE = "watched"
LIVE = ("queued", "running")

_ID = re.compile(r"[A-Za-z0-9_-]{22}")
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")

#: Folders without a record older than this are leftovers of a crash between mkdir and insert.
ORPHAN_AGE_S = 3600


class RunNotFound(ShrinkRayError):
    """No run has this id here (never made, or removed), or the id is not one we make, or it cannot be shown."""


class StoreNotPrivate(ShrinkRayError):
    """The store's folder or database is a link, another user's, or writable by others: refused before use."""


#: Settings and results to JSON and back (the comparison's summary type lives in the pipeline layer).
CODEC = results_codec({"ModelSummary": ModelSummary})


def new_run_id() -> str:
    """22 URL-safe characters, 128 random bits: unguessable, fits in an address."""
    return secrets.token_urlsafe(16)


def is_run_id(text: object) -> bool:
    return isinstance(text, str) and _ID.fullmatch(text) is not None


def default_root() -> Path:
    """``SHRINKRAY_RUNS_DIR``, else ``$XDG_CACHE_HOME/shrinkray/runs`` (``~/.cache``), else the temp folder."""
    if os.environ.get(ROOT_ENV, "").strip():
        return Path(os.environ[ROOT_ENV]).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    candidate = cache / "shrinkray" / "runs"
    try:
        candidate.mkdir(parents=True, exist_ok=True, mode=0o700)
        if os.access(candidate, os.W_OK):
            return candidate
    except OSError:
        pass
    return Path(tempfile.gettempdir()) / f"shrinkray-runs-{os.getuid() if hasattr(os, 'getuid') else 'user'}"


def safe_file_name(text: str, limit: int = 80) -> str:
    """A file name from a variant key or upload name: letters, digits, ``._-`` only."""
    name = _SAFE_NAME.sub("_", text).strip("._") or "file"
    stem, dot, suffix = name.rpartition(".")
    if len(name) > limit and dot and stem and len(suffix) < 16:  # the suffix says what the file is (.png, .npz)
        return f"{stem[: limit - len(suffix) - 1]}.{suffix}"
    return name[:limit]


def atomic_write(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` whole or not at all (temporary name in the same folder, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def _not_private(path: Path, what: str, folder: bool) -> tuple[str, str] | None:
    """What is wrong with ``path`` as a part of the store (problem, hint), or None when it is this user's own,
    no one else may write it, and it is not a symbolic link. Looks with ``os.lstat``: nothing is followed."""
    info = os.lstat(path)
    own = f"set {ROOT_ENV} to a folder of your own"
    if stat.S_ISLNK(info.st_mode):
        return f"{what} {path} is a symbolic link", f"Remove the link, or {own}"
    if folder and not stat.S_ISDIR(info.st_mode):
        return f"{what} {path} is not a folder", f"Remove it, or {own}"
    if not folder and not stat.S_ISREG(info.st_mode):
        return f"{what} {path} is not a file", f"Remove it, or {own}"
    if not hasattr(os, "getuid"):  # no POSIX owners or modes to judge by (Windows)
        return None
    if info.st_uid != os.getuid():
        return f"{what} {path} belongs to another user", own[0].upper() + own[1:]
    if info.st_mode & 0o022:
        return (f"{what} {path} is writable by other users",
                f"Make it private (chmod {'700' if folder else '600'} {path}) or {own}")  # fmt: skip
    return None


def refuse_unless_private(path: Path, what: str) -> None:
    """:class:`StoreNotPrivate` unless the file ``path`` is this user's own, no one else may write it, and it is
    not a symbolic link (a file the store keeps beside its database, such as the visitors' secret)."""
    wrong = _not_private(path, what, folder=False)
    if wrong:
        raise StoreNotPrivate(*wrong)


def _private_folder(path: Path, what: str) -> None:
    """Make ``path`` (mode 0700) when it is missing; refuse it when it is not private, before changing its mode."""
    if not os.path.lexists(path):
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    wrong = _not_private(path, what, folder=True)
    if wrong:
        raise StoreNotPrivate(*wrong)
    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)  # ours and no one else writes it: no one else reads it either (run ids are secrets)


def _private_database(path: Path) -> None:
    """Refuse a database (or its write-ahead log, which SQLite would replay into it) that is not private;
    a new one is made with mode 0600 before SQLite opens it."""
    for part in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm", "-journal"))):
        if os.path.lexists(part):
            wrong = _not_private(part, "The run store's database", folder=False)
            if wrong:
                raise StoreNotPrivate(*wrong)
    if not os.path.lexists(path):
        with contextlib.suppress(FileExistsError):  # another process made it just now: checked below
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600))
        wrong = _not_private(path, "The run store's database", folder=False)
        if wrong:
            raise StoreNotPrivate(*wrong)


def _over_quota(held: int, planned: int, quota: int) -> LimitExceededError:
    """A run refused because the visitor's live runs and this one would hold more disk than one visitor may."""
    problem = f"This run may write up to {format_bytes(planned)}"
    if held:
        problem += f" beside the {format_bytes(held)} your runs going already hold"
    return Limits(max_visitor_disk_bytes=quota).exceeded(
        "max_visitor_disk_bytes", problem,
        "Wait for a run to finish or cancel one" if held else "Shrink this model with the command line instead",
    )  # fmt: skip


def _server_full(going: int, planned: int, cap: int) -> LimitExceededError:
    """A run refused because the runs going now, all visitors', and this one would pass the store's cap."""
    return LimitExceededError(
        f"This server's space for runs ({format_bytes(cap)}) is taken by the runs going now ({format_bytes(going)}), "
        f"and this run may write up to {format_bytes(planned)}",
        "Try again in a few minutes, when some have finished",
    )


def _add_visitor_column(db: sqlite3.Connection) -> None:
    """A store an older version made has no ``visitor`` column: added, its rows read with visitor ""."""
    names = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
    if "visitor" in names:
        return
    try:
        db.execute("ALTER TABLE runs ADD COLUMN visitor TEXT NOT NULL DEFAULT ''")
    except sqlite3.OperationalError:  # another process (a replica) added it just now
        if "visitor" not in {row[1] for row in db.execute("PRAGMA table_info(runs)")}:
            raise


def folder_bytes(folder: Path) -> int:
    """The disk a run's folder holds. A file hard-linked from elsewhere (a repeat upload's model, kept once for
    every run of it: ``RunStore.model_folder``) counts its share, so the store's sum is the disk it takes."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                stat = os.lstat(os.path.join(root, name))
                total += stat.st_size // max(stat.st_nlink, 1)
    return total


@dataclass
class RunRecord:
    """One run as the store holds it."""

    id: str
    created: float
    updated: float
    status: str
    step: str
    fraction: float
    error: str
    problem: str
    hint: str
    setting: str
    model_name: str
    model_sha256: str
    model_bytes: int
    kind: str  # what the run does, as messages name it ("Shrinking and measuring", "Re-measuring")
    bytes: int
    folder: Path
    _settings: str | bytes | None
    _snapshot: str | bytes | None
    _result: str | bytes | None
    #: Who started it (runs/fairness.py): ``local`` for the command line and the API, a visitor of the app's
    #: signed cookie or address otherwise; "" for a run kept before visitors were recorded.
    visitor: str = ""

    @property
    def live(self) -> bool:
        return self.status in LIVE

    @property
    def settings(self) -> Any:
        return _read(self._settings)

    @property
    def snapshot(self) -> Any:
        """The latest partial result (a Comparison without models), or None."""
        return _read(self._snapshot)

    @property
    def result(self) -> Any:
        """The finished Comparison (variant models are files under ``folder``), or None."""
        return _read(self._result)

    @property
    def model_path(self) -> Path:
        return self.folder / "model.onnx"


def _write(value: Any) -> str:
    """``value`` (settings, a snapshot, a comparison without models) as the JSON text a record holds."""
    return CODEC.dumps(value)


def _read(data: str | bytes | None) -> Any:
    """A record's JSON text as the value it holds. A pickle an older version wrote (a BLOB) is never loaded."""
    if data is None:
        return None
    if not isinstance(data, str):
        raise RunNotFound("This run was kept by an older version of Shrink Ray Studio and cannot be shown",
                          "Start it again")  # fmt: skip
    try:
        return CODEC.loads(data)
    except StoredFormatError as exc:
        raise RunNotFound("This run was kept by another version of Shrink Ray Studio and cannot be shown",
                          "Start it again") from exc  # fmt: skip


_COLUMNS = ("id", "created", "updated", "status", "step", "fraction", "error", "problem", "hint", "setting",
            "model_name", "model_sha256", "model_bytes", "kind", "bytes", "settings", "snapshot", "result",
            "visitor")  # fmt: skip


class RunStore:
    """Run records and files under ``root``, with limits on total bytes and age."""

    def __init__(self, root: str | os.PathLike | None = None, max_bytes: int | None = None,
                 max_age_s: float | None = None) -> None:  # fmt: skip
        self.root = Path(root) if root is not None else default_root()
        env = os.environ
        if max_bytes is None:
            raw = env.get(MAX_BYTES_ENV, "").strip()
            max_bytes = int(_parse_setting(MAX_BYTES_ENV, raw, integer=True)) if raw else DEFAULT_MAX_BYTES
        if max_age_s is None:
            raw = env.get(MAX_AGE_ENV, "").strip()
            days = _parse_setting(MAX_AGE_ENV, raw, integer=False) if raw else DEFAULT_MAX_AGE_DAYS
            max_age_s = days * 86400
        self.max_bytes = int(max_bytes)
        self.max_age_s = float(max_age_s)
        # each part is checked before its mode is changed or anything in it is read (a planted database or a
        # folder someone else may write could feed this server records and files)
        _private_folder(self.root, "The run store folder")
        self.runs_dir = self.root / "runs"
        _private_folder(self.runs_dir, "The run store's folder of runs")
        self.db_path = self.root / "runs.sqlite3"
        _private_database(self.db_path)
        with self._db() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, created REAL, updated REAL, status TEXT, "
                "step TEXT, fraction REAL, error TEXT, problem TEXT, hint TEXT, setting TEXT, model_name TEXT, "
                "model_sha256 TEXT, model_bytes INTEGER, kind TEXT, bytes INTEGER, settings BLOB, snapshot BLOB, "
                "result BLOB, visitor TEXT NOT NULL DEFAULT '')"
            )
            _add_visitor_column(db)
            db.execute("CREATE TABLE IF NOT EXISTS removed (id TEXT PRIMARY KEY, removed REAL, reason TEXT)")

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        """A connection per call: safe from any thread (the queue's job threads) and process (replicas)."""
        db = sqlite3.connect(self.db_path, timeout=30)
        try:
            with db:  # one transaction, committed or rolled back
                yield db
        finally:
            db.close()

    # ------------------------------------------------------------------ making and finding runs

    def create(self, *, model_name: str, model_sha256: str = "", model_bytes: int = 0, settings: Any = None,
               kind: str = "Shrinking and measuring", visitor: str = LOCAL, max_live: int | None = None,
               planned_bytes: int = 0, max_visitor_bytes: int | None = None) -> str:  # fmt: skip
        """A new queued run of ``visitor`` with its own folder; returns its id. Cleans up old runs first.

        ``max_live``: refused (:class:`~shrinkray.runs.fairness.TooManyRuns`, one sentence) when the visitor
        already has this many runs queued or running. ``max_visitor_bytes``: the disk the visitor's runs may
        hold, the new one counted at ``planned_bytes`` (what it may write) and every live one at the larger of
        its plan and its folder; the visitor's own oldest finished runs are removed to make room, and the run
        is refused (:class:`~shrinkray.errors.LimitExceededError`) when its live runs leave none. Counted and
        recorded in one transaction, so two pages (or replicas) starting at once cannot both slip under a cap.
        The :data:`LOCAL` visitor (the command line, the API) is not capped.
        """
        self.cleanup()
        planned_bytes = max(int(planned_bytes), 0)
        if max_visitor_bytes is not None and capped(visitor):
            self._make_room(visitor, planned_bytes, int(max_visitor_bytes))
        run_id = new_run_id()
        folder = self.runs_dir / run_id
        folder.mkdir(mode=0o700)
        now = time.time()
        try:
            with self._db() as db:
                db.execute("BEGIN IMMEDIATE")  # count and insert as one step
                if max_live is not None and capped(visitor):
                    live = self._live_of(db, visitor)
                    if live >= max_live:
                        raise too_many_runs(live)
                if max_visitor_bytes is not None and capped(visitor):
                    held = self._held_by(db, visitor)
                    if held + planned_bytes > max_visitor_bytes:
                        raise _over_quota(held, planned_bytes, int(max_visitor_bytes))
                if capped(visitor):
                    going = self._live_bytes(db)
                    if going and going + planned_bytes > self.max_bytes:
                        raise _server_full(going, planned_bytes, self.max_bytes)
                db.execute(
                    "INSERT INTO runs (id, created, updated, status, step, fraction, error, problem, hint, setting, "
                    "model_name, model_sha256, model_bytes, kind, bytes, settings, visitor) "
                    "VALUES (?, ?, ?, 'queued', '', 0, '', '', '', '', ?, ?, ?, ?, ?, ?, ?)",
                    (run_id, now, now, model_name, model_sha256, int(model_bytes), kind, planned_bytes,
                     _write(settings), str(visitor)),
                )  # fmt: skip
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return run_id

    def live_runs(self, visitor: str) -> int:
        """How many runs ``visitor`` has queued or running."""
        with self._db() as db:
            return self._live_of(db, visitor)

    def visitor_bytes(self, visitor: str) -> int:
        """The disk ``visitor``'s runs hold: finished ones as kept, live ones at the larger of plan and folder."""
        with self._db() as db:
            return self._held_by(db, visitor)

    def _held_by(self, db: sqlite3.Connection, visitor: str, live_only: bool = False) -> int:
        rows = db.execute("SELECT id, status, bytes FROM runs WHERE visitor = ?", (str(visitor),)).fetchall()
        return sum(max(int(size or 0), folder_bytes(self.runs_dir / run_id)) if status in LIVE else int(size or 0)
                   for run_id, status, size in rows if status in LIVE or not live_only)  # fmt: skip

    def _live_bytes(self, db: sqlite3.Connection) -> int:
        """The disk every visitor's runs going now hold or plan to (finished runs can be removed; these cannot)."""
        rows = db.execute("SELECT id, bytes FROM runs WHERE status IN ('queued', 'running')").fetchall()
        return sum(max(int(size or 0), folder_bytes(self.runs_dir / run_id)) for run_id, size in rows)

    def _make_room(self, visitor: str, planned: int, quota: int) -> None:
        """Remove ``visitor``'s oldest finished runs until their runs and ``planned`` bytes fit ``quota``."""
        with self._db() as db:
            held = self._held_by(db, visitor)
            live = self._held_by(db, visitor, live_only=True)
            finished = db.execute("SELECT id, bytes FROM runs WHERE visitor = ? AND status NOT IN ('queued', "
                                  "'running') ORDER BY created", (str(visitor),)).fetchall()  # fmt: skip
        if live + planned > quota:
            return  # refused anyway: the visitor keeps the runs they have
        for run_id, size in finished:
            if held + planned <= quota:
                return
            self._remove(run_id, "the space its visitor may use was needed for their newer runs")
            held -= int(size or 0)

    @staticmethod
    def _live_of(db: sqlite3.Connection, visitor: str) -> int:
        return int(db.execute("SELECT COUNT(*) FROM runs WHERE visitor = ? AND status IN ('queued', 'running')",
                              (str(visitor),)).fetchone()[0])  # fmt: skip

    def get(self, run_id: str) -> RunRecord:
        """The run, or :class:`RunNotFound` with a message for a malformed, unknown, removed or expired id."""
        if not is_run_id(run_id):
            raise RunNotFound(
                "This link's run id is not valid (it should be 22 letters, digits, - or _)",
                "Check that the whole link was copied, or start a new run on the Shrink page",
            )
        self.folder(run_id)  # a run folder that is not private is refused before its record is read
        with self._db() as db:
            row = db.execute(f"SELECT {', '.join(_COLUMNS)} FROM runs WHERE id = ?", (run_id,)).fetchone()
            gone = None if row else db.execute("SELECT removed, reason FROM removed WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            if gone is not None:
                when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(gone[0]))
                raise RunNotFound(f"This run was removed on {when} ({gone[1]})", "Start a new run on the Shrink page")
            raise RunNotFound("No run with this id is kept here", "Check the link, or start a new run on the Shrink page")
        record = RunRecord(*row[:15], folder=self.runs_dir / run_id, _settings=row[15], _snapshot=row[16],
                           _result=row[17], visitor=row[18] or "")  # fmt: skip
        if not record.live and time.time() - record.created > self.max_age_s:
            self._remove(run_id, f"runs are kept {self.max_age_s / 86400:g} days")
            return self.get(run_id)
        return record

    def model_folder(self, sha256: str, besides: str) -> Path | None:
        """The folder of the newest other run of the model with this ``sha256`` that still holds its
        ``model.onnx`` (a repeat upload links those files instead of writing a second copy); None when none."""
        if not sha256:
            return None
        with self._db() as db:
            rows = db.execute("SELECT id FROM runs WHERE model_sha256 = ? AND id != ? ORDER BY created DESC",
                              (sha256, besides)).fetchall()  # fmt: skip
        return next((self.runs_dir / rid for (rid,) in rows if (self.runs_dir / rid / "model.onnx").is_file()), None)

    def runs_of(self, visitor: str, limit: int = 50) -> list[RunRecord]:
        """``visitor``'s runs still kept, newest first (at most ``limit``): what "Past runs" lists. A run past its
        age is left out (reading it by id removes it)."""
        with self._db() as db:
            ids = [r[0] for r in db.execute("SELECT id FROM runs WHERE visitor = ? ORDER BY created DESC LIMIT ?",
                                            (str(visitor), int(limit)))]  # fmt: skip
        records = []
        for run_id in ids:
            with contextlib.suppress(RunNotFound):
                records.append(self.get(run_id))
        return records

    def remove(self, run_id: str, visitor: str) -> None:
        """Remove a finished run of ``visitor``'s own, at their request: its folder and its record (its link then
        says it was removed). Another visitor's run, or one still going, is refused (RunNotFound / ValueError)."""
        record = self.get(run_id)
        if record.visitor != visitor:
            raise RunNotFound("No run with this id is kept here for you", "Start a new run on the Shrink page")
        if record.live:
            raise ValueError("a run still going is cancelled, not removed")
        self._remove(run_id, "its visitor removed it")

    def exists(self, run_id: str) -> bool:
        try:
            self.get(run_id)
        except RunNotFound:
            return False
        return True

    # ------------------------------------------------------------------ progress and outcome

    def update(self, run_id: str, **fields: Any) -> None:
        """Set status / step / fraction / error fields (from the job's thread)."""
        allowed = {"status", "step", "fraction", "error", "problem", "hint", "setting"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"unknown run fields {sorted(unknown)}")
        if "status" in fields and fields["status"] not in STATUSES:
            raise ValueError(f"unknown status {fields['status']!r}")
        names = sorted(fields)
        # a live status never replaces an end: a worker's late "running" after a cancel settled elsewhere
        # (another replica) would leave the run 'running' with no job behind it
        only_live = " AND status IN ('queued', 'running')" if fields.get("status") in LIVE else ""
        with self._db() as db:
            db.execute(
                f"UPDATE runs SET {', '.join(f'{n} = ?' for n in names)}, updated = ? WHERE id = ?{only_live}",
                (*[fields[n] for n in names], time.time(), run_id),
            )

    def set_settings(self, run_id: str, settings: Any) -> None:
        data = _write(settings)
        with self._db() as db:
            db.execute("UPDATE runs SET settings = ?, updated = ? WHERE id = ?", (data, time.time(), run_id))

    def set_snapshot(self, run_id: str, snapshot: Any) -> None:
        """Keep the latest partial result (only while the run is live: a late snapshot never overwrites an end)."""
        data = _write(snapshot)
        with self._db() as db:
            db.execute("UPDATE runs SET snapshot = ?, updated = ? WHERE id = ? AND status IN ('queued', 'running')",
                       (data, time.time(), run_id))  # fmt: skip

    def finish(self, run_id: str, result: Any) -> None:
        """The run is done: keep its result, count its bytes, then apply the limits."""
        data = _write(result)
        self._remove_scratch(self.runs_dir / run_id)
        size = folder_bytes(self.runs_dir / run_id) + len(data.encode())
        with self._db() as db:
            db.execute(
                "UPDATE runs SET status = 'done', step = 'Done', fraction = 1, result = ?, snapshot = NULL, "
                "bytes = ?, updated = ? WHERE id = ?",
                (data, size, time.time(), run_id),
            )
        self.cleanup(keep=run_id)

    def amend_result(self, run_id: str, change: Callable[[Any], Any]) -> bool:
        """Apply ``change`` to a finished run's result and keep it (measurements made after the run, such as
        the visitor's browser timings, travel with the run's link). False when the run is not done."""
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")  # read, change and write as one step (two pages may amend at once)
            row = db.execute("SELECT result FROM runs WHERE id = ? AND status = 'done'", (run_id,)).fetchone()
            if row is None or row[0] is None:
                return False
            data = _write(change(_read(row[0])))
            db.execute("UPDATE runs SET result = ?, updated = ? WHERE id = ? AND status = 'done'",
                       (data, time.time(), run_id))  # fmt: skip
        return True

    def fail(self, run_id: str, status: str = "failed", error: str = "", problem: str = "", hint: str = "",
             setting: str = "") -> None:  # fmt: skip
        """The run failed or was cancelled: its variant files (maybe incomplete) go, the message stays."""
        if status not in ("failed", "cancelled"):
            raise ValueError(status)
        folder = self.runs_dir / run_id
        shutil.rmtree(folder / "variants", ignore_errors=True)
        self._remove_scratch(folder)
        with self._db() as db:
            db.execute(
                "UPDATE runs SET status = ?, error = ?, problem = ?, hint = ?, setting = ?, bytes = ?, updated = ? "
                "WHERE id = ?",
                (status, error, problem, hint, setting, folder_bytes(folder), time.time(), run_id),
            )

    def recover(self, reason: str = "the server restarted while it was running") -> list[str]:
        """Runs left queued or running by a process that is gone: marked failed, their partial files removed.

        Call once at start-up, before this process queues anything (with
        replicas sharing a store, only the queue's owner may call it).
        """
        with self._db() as db:
            ids = [r[0] for r in db.execute("SELECT id FROM runs WHERE status IN ('queued', 'running')")]
        for run_id in ids:
            self.fail(run_id, "failed", error=f"This run stopped: {reason}. Start it again.",
                      problem=f"This run stopped: {reason}", hint="Start it again")  # fmt: skip
        return ids

    # ------------------------------------------------------------------ files

    def folder(self, run_id: str) -> Path:
        """The run's folder; refused when it is a link, another user's or writable by others (checked with
        ``os.lstat`` before anything in it is read)."""
        if not is_run_id(run_id):
            raise RunNotFound("This run id is not valid", "Start a new run")
        folder = self.runs_dir / run_id
        if os.path.lexists(folder):
            wrong = _not_private(folder, "This run's folder", folder=True)
            if wrong:
                raise RunNotFound(wrong[0], "Start a new run on the Shrink page")
        return folder

    def mark_watched(self, run_id: str, now: float | None = None) -> None:
        """A page shows the run now (its starter's, or a link's): the time of its ``watched`` file, made on the
        first call. A file, not a column: every backend and replica sees the same folder, and older stores need
        no new schema."""
        path = self.file_path(run_id, WATCHED_FILE, must_exist=False)
        path.touch(mode=0o600, exist_ok=True)
        if now is not None:
            os.utime(path, (now, now))

    def unwatched_for(self, run_id: str, now: float | None = None) -> float | None:
        """Seconds since a page last showed the run, or None for a run no page follows (never marked: the CLI's,
        the API's, a test's)."""
        try:
            seen = self.file_path(run_id, WATCHED_FILE).stat().st_mtime
        except (RunNotFound, OSError):
            return None
        return max((time.time() if now is None else now) - seen, 0.0)

    def write_file(self, run_id: str, relative: str, data: bytes) -> Path:
        """Write one file of the run atomically; ``relative`` stays inside the run's folder."""
        return atomic_write(self.file_path(run_id, relative, must_exist=False), data)

    def file_path(self, run_id: str, relative: str, must_exist: bool = True) -> Path:
        """The path of one of the run's files, refused if it would leave the folder."""
        folder = self.folder(run_id).resolve()
        path = (folder / relative).resolve()
        if folder not in path.parents:
            raise RunNotFound(f"{relative!r} is not a file of this run", "Use the run's own downloads")
        if must_exist and not path.is_file():
            raise RunNotFound("This file of the run is no longer kept", "Start the run again")
        return path

    # ------------------------------------------------------------------ limits

    def total_bytes(self) -> int:
        with self._db() as db:
            return int(db.execute("SELECT COALESCE(SUM(bytes), 0) FROM runs").fetchone()[0])

    def cleanup(self, keep: str | None = None, now: float | None = None) -> list[str]:
        """Remove finished runs past the age limit, then the oldest finished ones until the total fits.

        Live runs are never removed; ``keep`` (the run just finished) is
        removed only when it alone exceeds the size limit. Returns the removed ids.
        """
        now = time.time() if now is None else now
        removed: list[str] = []
        with self._db() as db:
            rows = db.execute("SELECT id, created, status, bytes FROM runs ORDER BY created").fetchall()
        # live runs are counted from their folders (their size is written when they end)
        rows = [(i, c, s, folder_bytes(self.runs_dir / i) if s in LIVE else b) for i, c, s, b in rows]
        total = sum(r[3] or 0 for r in rows)
        for run_id, created, status, size in rows:
            if status not in LIVE and now - created > self.max_age_s:
                self._remove(run_id, f"runs are kept {self.max_age_s / 86400:g} days")
                removed.append(run_id)
                total -= size or 0
        for run_id, _created, status, size in rows:
            if total <= self.max_bytes:
                break
            if run_id in removed or status in LIVE or run_id == keep:
                continue
            self._remove(run_id, "the space for kept runs was needed for newer ones")
            removed.append(run_id)
            total -= size or 0
        kept_size = next((size or 0 for run_id, _c, _s, size in rows if run_id == keep), 0)
        if keep is not None and kept_size > self.max_bytes and keep not in removed:  # alone (live runs may fill it)
            self._remove(keep, "its files are larger than the space for kept runs")
            removed.append(keep)
        self._remove_orphans(now)
        return removed

    def discard(self, run_id: str, reason: str) -> None:
        """Remove a run that never started (its id was never handed out): its folder and its record."""
        self._remove(run_id, reason)

    def _remove(self, run_id: str, reason: str) -> None:
        folder = self.runs_dir / run_id
        if folder.is_symlink():
            with contextlib.suppress(OSError):
                folder.unlink()  # the link goes, never what it points at
        shutil.rmtree(folder, ignore_errors=True)
        with self._db() as db:
            db.execute("DELETE FROM runs WHERE id = ?", (run_id,))
            db.execute("INSERT OR REPLACE INTO removed (id, removed, reason) VALUES (?, ?, ?)",
                       (run_id, time.time(), reason))  # fmt: skip

    def _remove_orphans(self, now: float) -> None:
        with self._db() as db:
            known = {r[0] for r in db.execute("SELECT id FROM runs")}
        for folder in self.runs_dir.iterdir():
            if folder.name in known:
                continue
            with contextlib.suppress(OSError):
                if now - folder.lstat().st_mtime > ORPHAN_AGE_S:
                    if folder.is_symlink():
                        folder.unlink()  # a planted link: it goes, never what it points at
                    shutil.rmtree(folder, ignore_errors=True)

    @staticmethod
    def _remove_scratch(folder: Path) -> None:
        """Temporary files and staging folders a killed writer left (never a finished file)."""
        for root, dirs, files in os.walk(folder):
            for name in list(dirs):
                if name.startswith((".shrinkray-", ".tmp-")):
                    shutil.rmtree(os.path.join(root, name), ignore_errors=True)
                    dirs.remove(name)
            for name in files:
                if name.startswith(".tmp-"):
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(root, name))

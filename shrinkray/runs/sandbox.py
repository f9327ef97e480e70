"""Run work on a user's model in a capped, killable worker process.

A 12 KB model can build a 60000x60000 tensor at run time, and a Loop can run
for ever: no check before the run can bound what ONNX Runtime allocates or how
long it takes. So every run on a user's model (validation, parity, latency,
culprits) happens in a child process with a hard address-space limit
(``RLIMIT_AS``) and a wall-clock deadline. When either is hit the child is
killed and the caller gets one sentence; the server and other users go on.

The child is a fresh interpreter (``python -m shrinkray.runs.sandbox``: forking a
threaded server is unsafe, and multiprocessing's spawn would re-run the
caller's main script). It reads the pickled call on stdin and writes
length-prefixed pickled messages (progress, then the result or the error) on
stdout.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, BinaryIO

from shrinkray.errors import LimitExceededError, ShrinkRayError
from shrinkray.io.limits import JOB_STARTED_ENV, WORKER_ENV, Limits
from shrinkray.memory import limit_malloc_arenas
from shrinkray.units import format_bytes

Progress = Callable[[str, float], None]
Partial = Callable[[Any], None]

#: Out-of-memory texts of ONNX Runtime, numpy and the C++ runtime, so a failed allocation
#: under the cap reads as "needs more memory", not as a broken model.
_MEMORY_WORDS = ("bad_alloc", "bad allocation", "Failed to allocate", "MemoryError", "Unable to allocate",
                 "out of memory", "Cannot allocate memory")  # fmt: skip
_HEADER = struct.Struct("<Q")


class WorkerCrashed(ShrinkRayError):
    """The worker stopped without an answer (a bug, or the C runtime aborted)."""


class Cancelled(ShrinkRayError):
    """The caller stopped the run."""


def _send(stream: BinaryIO, message: tuple[str, Any]) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _receive(stream: BinaryIO) -> tuple[str, Any] | None:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)  # noqa: S301 - our own child's messages


def _limit_memory(memory_bytes: int) -> None:
    import resource

    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


def _share_one_heap() -> None:
    """The worker's threads share one malloc heap: less address space reserved under the cap, and what compare's
    size threads free can be returned (shrinkray.memory). Process-wide, so only in this worker, never in a
    caller's own process."""
    limit_malloc_arenas(1)


def _is_memory(text: str) -> bool:
    return any(word in text for word in _MEMORY_WORDS)


#: How often a worker checks that its caller is still there.
PARENT_CHECK_S = 0.5
#: The caller's process id, as the caller gives it to its worker.
PARENT_ENV = "SHRINKRAY_WORKER_PARENT"
#: How much a queued run's worker yields the CPU to interactive work (``nice``): on two cores a visitor's
#: never-ending run took both, and another visitor's upload check waited behind it for over a minute.
BACKGROUND_NICENESS = 10
NICE_ENV = "SHRINKRAY_WORKER_NICE"


def _exit_with_parent(parent: int) -> None:
    """Stop this worker as soon as its caller is gone (``kill -9`` of the CLI, an app server stopped): it is then
    re-parented and its parent id changes. Without this, three workers ran their models 25 minutes after the
    app that started them had stopped, with no deadline left to stop them."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(3)


def _worker_main() -> None:
    """The child: read the call, cap memory, run it, send progress and the outcome."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the parent, which stops the child
    niceness = int(os.environ.get(NICE_ENV) or 0)
    if niceness:
        with contextlib.suppress(OSError):
            os.nice(niceness)  # before ONNX Runtime starts its threads, which inherit it
    # the caller's own id, not getppid(): a caller killed while this worker was still importing has already
    # handed it to init, whose id getppid() would then watch for ever
    parent = int(os.environ.get(PARENT_ENV) or os.getppid())
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True, name="shrinkray-parent").start()
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write into the message stream
    request = _receive(source)
    if request is None:
        return
    _, (fn, args, kwargs, memory_bytes, wants_progress, wants_partial) = request
    _limit_memory(memory_bytes)
    _share_one_heap()
    lock = threading.Lock()  # the engine may report from its compression threads

    def send(message: tuple[str, Any]) -> None:
        with lock:
            _send(sink, message)

    if wants_progress:
        kwargs = {**kwargs, "progress": lambda step, fraction: send(("progress", (step, fraction)))}
    if wants_partial:
        kwargs = {**kwargs, "on_partial": lambda snapshot: send(("partial", snapshot))}
    try:
        send(("result", fn(*args, **kwargs)))
    except MemoryError:
        send(("memory", ""))
    except ShrinkRayError as exc:
        send(("memory", str(exc)) if _is_memory(str(exc)) else ("error", exc))
    except BaseException as exc:  # noqa: BLE001 - everything the worker raises goes back to the caller
        text = f"{type(exc).__name__}: {exc}"
        send(("memory" if _is_memory(text) else "crash", text))


def _reader(stream: BinaryIO, messages: queue.Queue) -> None:
    try:
        while (message := _receive(stream)) is not None:
            messages.put(message)
    except (OSError, ValueError, pickle.UnpicklingError, EOFError):
        pass
    messages.put(None)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()  # a write under way removes its staging folder (shrinkray.io.files.sigterm_raises)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(2)
    if process.poll() is None:
        process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(10)


def run_capped(
    fn: Callable[..., Any],
    *args: Any,
    what: str = "This run",
    limits: Limits | None = None,
    progress: Progress | None = None,
    partial: Partial | None = None,
    cancel: threading.Event | None = None,
    background: bool = False,
    **kwargs: Any,
) -> Any:
    """``fn(*args, **kwargs)`` in a worker process capped at ``max_job_memory_bytes`` and ``max_job_seconds``.

    ``fn`` must be importable (a module-level function) and its arguments and
    result picklable. With ``progress``, ``fn`` is called with a ``progress``
    keyword whose calls reach the caller's callback; with ``partial``, ``fn``
    is called with an ``on_partial`` keyword whose (picklable) snapshots reach
    ``partial`` as they come, so a page can draw results before the end. Errors the engine raises
    in the worker are raised here as they were; running out of memory or time
    raises :class:`LimitExceededError` naming the limit and its setting; a
    worker that dies without an answer raises :class:`WorkerCrashed`. Setting
    ``cancel`` (an Event) kills the worker and raises :class:`Cancelled`. A
    ``background`` worker (a queued run) runs at :data:`BACKGROUND_NICENESS`, so
    the pages, uploads and checks other people wait on go first.
    Inside a worker, calls run in place (the worker is already capped).
    """
    if os.environ.get(WORKER_ENV) == "1":
        extra = {"progress": progress} if progress else {}
        if partial:
            extra["on_partial"] = partial
        return fn(*args, **kwargs, **extra)
    limits = limits or Limits.from_env()
    env = {**os.environ, WORKER_ENV: "1", JOB_STARTED_ENV: repr(time.monotonic()), "MALLOC_ARENA_MAX": "2",
           PARENT_ENV: str(os.getpid()), NICE_ENV: str(BACKGROUND_NICENESS if background else 0)}  # fmt: skip
    process = subprocess.Popen(
        [sys.executable, "-m", "shrinkray.runs.sandbox"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,  # stderr shared: status lines, tracebacks
    )  # fmt: skip
    messages: queue.Queue = queue.Queue()
    started = time.monotonic()
    try:
        _send(process.stdin, ("call", (fn, args, kwargs, int(limits.max_job_memory_bytes), progress is not None,
                                     partial is not None)))
        process.stdin.close()
    except (BrokenPipeError, OSError):
        pass  # the worker died at start; the reader below reports it
    thread = threading.Thread(target=_reader, args=(process.stdout, messages), daemon=True, name="shrinkray-reader")
    thread.start()
    try:
        while True:
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"{what} was cancelled", "Start it again when you are ready")
            remaining = limits.max_job_seconds - (time.monotonic() - started)
            if remaining <= 0:
                raise limits.exceeded(
                    "max_job_seconds",
                    f"{what} took longer than {limits.max_job_seconds:g} s and was stopped (the model may loop or "
                    "be very slow on these inputs)",
                    "Try smaller inputs, or raise the limit",
                )
            try:
                message = messages.get(timeout=min(0.2, remaining))
            except queue.Empty:
                continue
            if message is None:
                break
            kind, payload = message
            if kind == "progress":
                if progress is not None:
                    progress(*payload)
            elif kind == "partial":
                if partial is not None:
                    partial(payload)
            elif kind == "result":
                return payload
            elif kind == "error":
                raise payload
            elif kind == "memory":
                raise _out_of_memory(limits, what)
            else:
                raise WorkerCrashed(
                    f"{what} failed inside its worker: {str(payload).splitlines()[0][:300]}",
                    "This is a bug in Shrink Ray Studio, not in your model; try another method meanwhile",
                )
    finally:
        _stop(process)
        process.stdout.close()
    code = process.returncode
    if code is not None and code < 0 and -code in (signal.SIGKILL, signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS):
        raise _out_of_memory(limits, what, signal.Signals(-code).name)
    raise WorkerCrashed(f"{what} stopped without an answer (exit code {code})", "Try again; if it repeats, report it")


def _out_of_memory(limits: Limits, what: str, how: str = "") -> LimitExceededError:
    cap = format_bytes(limits.max_job_memory_bytes)
    killed = f" (the worker was stopped by {how})" if how else ""
    return limits.exceeded(
        "max_job_memory_bytes",
        f"{what} needs more than the {cap} of memory one worker may use{killed}: the model builds very large "
        "tensors on these inputs",
        "Try smaller inputs (batch, sequence, image size), or raise the limit",
    )


if __name__ == "__main__":
    _worker_main()

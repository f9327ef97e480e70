"""The capped worker: hostile models are stopped in a child process, the caller gets one sentence."""

from __future__ import annotations

import operator
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import sample_path
from hostile.runtime_bombs import loop_bomb, memory_bomb

import shrinkray
from shrinkray.errors import LimitExceededError, ShrinkRayError
from shrinkray.io.limits import GiB, Limits
from shrinkray.measure.results import CompareSettings
from shrinkray.pipeline.compare import compare
from shrinkray.runs import sandbox

pytestmark = pytest.mark.slow

QUICK = CompareSettings(methods=[("weights-int8", {})], latency=False, culprits=False, brotli_quality=1)


def _parent_peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_a_normal_compare_gives_the_same_answer_as_in_process():
    loaded = shrinkray.load(sample_path("mlp"))
    steps = []
    here = compare(loaded, QUICK)
    there = sandbox.run_capped(compare, loaded, QUICK, what="Comparing", progress=lambda s, f: steps.append((s, f)))
    assert [v.key for v in there.variants] == [v.key for v in here.variants]
    assert there.variants[0].parity.passed == here.variants[0].parity.passed
    assert there.variants[0].parity.severity == pytest.approx(here.variants[0].parity.severity)
    assert there.variants[0].model is not None  # the models come back for downloads
    assert steps and steps[-1] == ("Done", 1.0)  # progress crossed the process boundary


def test_a_model_that_builds_a_huge_tensor_is_stopped_by_the_memory_cap():
    before = _parent_peak_mib()
    limits = Limits.from_env(max_job_memory_bytes=2 * GiB, max_job_seconds=120)
    started = time.monotonic()
    with pytest.raises(LimitExceededError) as caught:
        sandbox.run_capped(compare, memory_bomb(), QUICK, what="Comparing", limits=limits)
    message = str(caught.value)
    assert message.startswith("Comparing needs more than the 2.00 GiB of memory one worker may use")
    assert "SHRINKRAY_MAX_JOB_MEMORY_BYTES" in message
    assert time.monotonic() - started < 60
    assert _parent_peak_mib() - before < 500  # the 14 GB tensor never touched this process


def test_a_model_that_loops_for_ever_is_stopped_at_the_deadline():
    limits = Limits.from_env(max_job_seconds=4)
    started = time.monotonic()
    with pytest.raises(LimitExceededError) as caught:
        sandbox.run_capped(compare, loop_bomb(), QUICK, what="Comparing", limits=limits)
    elapsed = time.monotonic() - started
    assert "Comparing took longer than 4 s and was stopped" in str(caught.value)
    assert "SHRINKRAY_MAX_JOB_SECONDS" in str(caught.value)
    assert 4 <= elapsed < 20


def test_engine_errors_come_back_whole():
    import onnx

    from shrinkray.graph.validate import validate

    broken = memory_bomb()
    broken.ir_version = 99  # ONNX Runtime refuses it: a ShrinkRayError raised inside the worker
    with pytest.raises(ShrinkRayError) as caught:
        sandbox.run_capped(validate, broken, what="Checking")
    assert type(caught.value) is type(_in_process_error(validate, broken))
    assert str(caught.value) == str(_in_process_error(validate, broken))
    assert isinstance(broken, onnx.ModelProto)


def _in_process_error(fn, *args) -> ShrinkRayError:
    try:
        fn(*args)
    except ShrinkRayError as exc:
        return exc
    raise AssertionError("expected an error")


def test_an_unexpected_exception_in_the_worker_is_a_crash_not_a_traceback():
    with pytest.raises(sandbox.WorkerCrashed) as caught:
        sandbox.run_capped(operator.truediv, 1, 0, what="Dividing")
    assert str(caught.value).startswith("Dividing failed inside its worker: ZeroDivisionError")


def test_cancel_stops_the_worker():
    cancel = threading.Event()
    threading.Timer(1.0, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(sandbox.Cancelled):
        sandbox.run_capped(compare, loop_bomb(), QUICK, what="Comparing", cancel=cancel)
    assert time.monotonic() - started < 15


def test_errors_pickle_with_every_part():
    import pickle

    error = ShrinkRayError("Something is off", "Do this", setting="inputs")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.problem, copy.hint, copy.setting, str(copy)) == ("Something is off", "Do this", "inputs", str(error))


_CALLER = """
import sys, time
sys.path.insert(0, {tests!r})
from hostile.runtime_bombs import loop_bomb
from shrinkray.pipeline.compare import CompareSettings, compare
from shrinkray.runs.sandbox import run_capped
print("calling", flush=True)
run_capped(compare, loop_bomb(), CompareSettings(methods=[("float16", {{}})], latency=False))
"""


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads children from /proc (Linux)")
def test_a_worker_stops_when_its_caller_is_killed(tmp_path):
    """kill -9 of the CLI (or a stopped app server) left its worker running the model with no deadline; now the
    worker sees its caller gone within a second and exits."""
    tests = str(Path(__file__).resolve().parents[1])
    caller = subprocess.Popen([sys.executable, "-c", _CALLER.format(tests=tests)], stdout=subprocess.PIPE, text=True)
    try:
        assert caller.stdout.readline().strip() == "calling"
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while not workers and time.monotonic() < deadline:
            time.sleep(0.2)
            workers = _children(caller.pid)
        assert workers, "the worker did not start"
        time.sleep(2)  # the worker is busy in the never-ending Loop
        os.kill(caller.pid, signal.SIGKILL)
        caller.wait(10)
        gone = time.monotonic() + 15
        while time.monotonic() < gone and any(os.path.exists(f"/proc/{w}") and "Z" not in _state(w) for w in workers):
            time.sleep(0.2)
        assert not any(os.path.exists(f"/proc/{w}") and "Z" not in _state(w) for w in workers), workers
    finally:
        if caller.poll() is None:
            caller.kill()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_only_background_workers_yield_the_cpu():
    assert sandbox.run_capped(os.nice, 0) == os.nice(0)
    assert sandbox.run_capped(os.nice, 0, background=True) == min(19, os.nice(0) + sandbox.BACKGROUND_NICENESS)

"""A comparison plans from the original's first run (issue 27): it cuts what does not fit the job's cap and says
so, or refuses at once with one sentence, instead of burning a worker's slot.

The decisions are checked on a fast model with the first run's seconds given (``FIRST_S``), so they do not
depend on this machine's speed; the slow tests run a model that is slow on purpose (a Loop) through the real
capped worker and the command line, with generous margins.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pytest
from helpers import sample_path
from hostile.runtime_bombs import slow_loop_for

import shrinkray
from shrinkray.errors import LimitExceededError
from shrinkray.measure import parity_inputs
from shrinkray.measure.budget import BUDGET_SETTING, Budget
from shrinkray.measure.results import CompareSettings
from shrinkray.pipeline.compare import compare

#: What the original's first run "took" in the planned tests (the mlp sample really takes a millisecond).
FIRST_S = 0.5


def _planned(monkeypatch, cap_s: float):
    """compare() of the mlp sample (a classifier: 4 decisions in a batch of 4, so 40 batches for a firm verdict,
    22 the fewest that can decide) as inside a capped worker of ``cap_s`` whose first run takes ``FIRST_S``."""
    first_run = Budget.first_run
    monkeypatch.setattr(Budget, "first_run", lambda self, seconds: first_run(self, FIRST_S))
    monkeypatch.setattr(parity_inputs, "SLOW_SET_S", 1e9)  # more sets however busy this machine is
    monkeypatch.setenv("SHRINKRAY_WORKER", "1")
    monkeypatch.setenv("SHRINKRAY_MAX_JOB_SECONDS", str(cap_s))
    monkeypatch.delenv("SHRINKRAY_JOB_STARTED", raising=False)
    settings = CompareSettings(methods=[("float16", {})], threads=[1], latency_budget_s=0.2)
    return compare(shrinkray.load(sample_path("mlp")), settings)


def test_a_plan_that_fits_is_run_whole(monkeypatch):
    c = _planned(monkeypatch, 600)  # 160 runs of 0.5 s, the reserve's 120 more as if undecided: 3 minutes
    assert "40 batches of 4" in c.input_note and "judged on" not in c.input_note and "reserve" not in c.input_note
    assert c.variants[0].latency and not c.latency_note.startswith("Speed not timed")


def test_the_reserve_is_cut_first_and_the_input_note_says_so(monkeypatch):
    # 51 s: 79 runs of 0.5 s (40 s) fit, with the reserve (319 runs) they would not; latency (0.2 s + 2 runs) stays
    c = _planned(monkeypatch, 60)
    assert "no reserve for a variant these inputs leave undecided" in c.input_note
    assert "one run of the original takes 0.50 s here" in c.input_note and "the run's 1-minute limit" in c.input_note
    assert c.variants[0].parity.samples == 160 and c.variants[0].latency


def test_then_fewer_inputs_down_to_what_can_decide_and_no_latency(monkeypatch):
    c = _planned(monkeypatch, 36)  # 30.6 s: at most about 30 batches of the 40
    samples = c.variants[0].parity.samples
    assert 88 <= samples < 160 and samples % 4 == 0
    assert f"judged on {samples} of the 160 inputs a firm verdict asks for" in c.input_note
    assert c.latency_note.startswith("Speed not timed: one run of the original takes 0.50 s here")
    assert c.variants[0].latency == [] and c.original.latency == []
    assert c.variants[0].ok and c.variants[0].sizes is not None  # the rest of the comparison is whole


def test_a_run_that_cannot_fit_even_the_fewest_inputs_is_refused_at_once(monkeypatch):
    started = time.monotonic()
    with pytest.raises(LimitExceededError) as refused:
        _planned(monkeypatch, 20)  # 17 s: the 22 batches that can decide take 43 runs of 0.5 s
    assert refused.value.setting == BUDGET_SETTING
    assert refused.value.problem.startswith("One run of this model takes 0.50 s; judging 1 method on 88 inputs "
                                            "would take 22 s in all, more than this server's 20-second limit")  # fmt: skip
    assert time.monotonic() - started < 20  # said before the variants were made, not at the cap


def test_a_direct_call_has_no_cap_to_plan_for(monkeypatch):
    first_run = Budget.first_run
    monkeypatch.setattr(Budget, "first_run", lambda self, seconds: first_run(self, 30.0))
    monkeypatch.delenv("SHRINKRAY_WORKER", raising=False)
    monkeypatch.setenv("SHRINKRAY_MAX_JOB_SECONDS", "1")
    c = compare(shrinkray.load(sample_path("mlp")), CompareSettings(methods=[("float16", {})], latency=False))
    assert "judged on" not in c.input_note and c.variants[0].parity.samples == 160


def test_each_front_end_words_the_refusal_as_its_own_controls():
    from shrinkray.cli import cli_message

    error = Budget(methods=4, cap_s=600).refusal(2000.0, 160, 3.1)
    assert error.setting == BUDGET_SETTING
    line = cli_message(error)
    assert line.startswith("One run of this model takes 3.1 s; judging 4 methods on 160 inputs would take about "
                           "33 minutes in all, more than this server's 10-minute limit.")  # fmt: skip
    assert "--methods" in line and "--dim" in line and "SHRINKRAY_MAX_JOB_SECONDS" in line


# ------------------------------------------------------------------ a model slow on purpose, through the worker


@pytest.fixture(scope="module")
def slow(tmp_path_factory) -> tuple[Path, float]:
    """A Loop model whose first run takes about 1.5 s here, saved, and what its first run took."""
    model, first_s = slow_loop_for(1.5)
    path = tmp_path_factory.mktemp("slow") / "slow.onnx"
    onnx.save(model, str(path))
    return path, first_s


@pytest.mark.slow
def test_a_slow_model_finishes_compare_within_15_times_its_first_run(slow, monkeypatch):
    """Issue 27: a model at 3 s per inference took 23 runs for one variant, 50 s of latency on a 5 s budget.
    Every default method, latency on, in the capped worker: one set of inputs each (a set is slow), latency
    finds that not one round fits its budget after a single run (and skips the other thread count)."""
    from shrinkray.runs.sandbox import run_capped

    path, first_s = slow
    monkeypatch.setenv("SHRINKRAY_MAX_JOB_SECONDS", "600")
    c = run_capped(compare, shrinkray.load(path).model, CompareSettings())
    # what the plan decides, not how long it took (wall time on a shared machine is the bench's to measure:
    # the 3 s model's 11x is in the closing note of issue 27)
    # one set of inputs (a set is slow): the batch of 4, whose decisions (ties aside) are too few to pass firmly
    assert "one batch of 4" in c.input_note and "too few for a verdict" in c.input_note, c.input_note
    assert all(r.parity.samples <= 4 for r in c.variants if r.parity)
    assert all(r.ok for r in c.variants if r.method != "dynamic-int8")


@pytest.mark.slow
def test_the_command_line_refuses_a_run_past_its_cap_at_once_in_its_own_flags(slow, tmp_path):
    path, first_s = slow
    env = {**os.environ, "SHRINKRAY_MAX_JOB_SECONDS": "8", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-m", "shrinkray.cli", "compare", str(path), "--quiet"], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode != 0
    message = done.stderr.strip().splitlines()[-1]
    assert message.split(": ", 1)[-1].startswith(f"One run of this model takes {first_s:.0f}") or \
        "One run of this model takes" in message  # fmt: skip
    assert "judging 5 methods on 4 inputs" in message and "8-second limit" in message
    assert "--methods" in message and "--dim" in message  # flags, not the app's controls
    # refused by the plan once its first run was known (the cap's own message would name the job's time limit)

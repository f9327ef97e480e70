"""The first run of the original sets the budget of the rest (issue 27): decisions on given numbers, no clock."""

from __future__ import annotations

import pytest

from shrinkray.errors import LimitExceededError
from shrinkray.measure import budget as budget_module
from shrinkray.measure.budget import PLAN_MARGIN, Asked, Budget, FirstRun, job_clock, limit_words

#: A classifier judged in batches of 4: 160 inputs (40 sets) for a firm top-1 verdict, 88 (22 sets) the fewest
#: that can decide, and a reserve of 3 sets per set for variants those leave undecided.
CLASSIFIER = Asked(have=1, wanted=40, minimum=22, reserve=120, samples_per_set=4)


def budget(cap_s: float | None, first_s: float, *, spent_s: float = 0.0, **fields) -> Budget:
    """A budget for a run that has spent ``spent_s`` of a ``cap_s`` cap (None: no cap), its first run timed."""
    left = None if cap_s is None else cap_s * (1 - PLAN_MARGIN) - spent_s
    made = Budget(**{"methods": 4, **fields}, time_left=lambda: left, cap_s=cap_s)
    made.first_s = first_s
    return made


def test_without_a_cap_the_whole_plan_runs():
    plan = budget(None, 3.1).plan(CLASSIFIER)
    assert (plan.sets, plan.reserve, plan.latency) == (40, 120, True)
    assert plan.input_note == plan.latency_note == ""


def test_a_plan_that_fits_is_not_cut():
    plan = budget(600, 0.01).plan(CLASSIFIER)
    assert (plan.sets, plan.reserve, plan.latency) == (40, 120, True) and plan.input_note == ""


def test_the_reserve_goes_first():
    # 1 s a set: the whole plan (reserve as if every variant were undecided) is 799 runs; without it 199
    plan = budget(600, 1.0).plan(CLASSIFIER)
    assert (plan.sets, plan.reserve, plan.latency) == (40, 0, True)
    assert "no reserve for a variant these inputs leave undecided" in plan.input_note
    assert "one run of the original takes 1.0 s here" in plan.input_note and "10-minute limit" in plan.input_note
    assert plan.latency_note == ""


def test_then_latency():
    b = budget(120, 0.48, latency_settings=2)  # 102 s: 199 runs of 0.48 s = 96 s, and latency 2 x (5 + 1) s on top
    plan = b.plan(CLASSIFIER)
    assert (plan.sets, plan.reserve, plan.latency) == (40, 0, False)
    assert plan.latency_note.startswith("Speed not timed: one run of the original takes 0.48 s here")
    assert "the run's 2-minute limit" in plan.latency_note


def test_then_fewer_sets_down_to_the_fewest_that_can_decide():
    plan = budget(600, 3.1).plan(CLASSIFIER)  # 510 s: 22 sets for 4 methods and the original take 339 s
    assert plan.reserve == 0 and not plan.latency and 22 <= plan.sets < 40
    assert f"judged on {plan.sets * 4} of the 160 inputs a firm verdict asks for" in plan.input_note
    assert plan.estimate_s <= 600 * (1 - PLAN_MARGIN)


def test_a_run_that_cannot_fit_even_the_fewest_is_refused_in_one_sentence():
    with pytest.raises(LimitExceededError) as refused:
        budget(300, 3.1).plan(CLASSIFIER)
    error = refused.value
    assert error.setting == budget_module.BUDGET_SETTING  # each front end words it as its controls
    assert error.problem == ("One run of this model takes 3.1 s; judging 4 methods on 88 inputs would take "
                             "about 6 minutes in all, more than this server's 5-minute limit")  # fmt: skip
    assert error.problem.count(". ") == 0  # one sentence
    assert "SHRINKRAY_MAX_JOB_SECONDS" in error.hint


def test_the_refusal_counts_what_the_run_has_spent_already():
    # 18 sets of 1 s for the original (17 more) and one method: 35 s still to come, 10 spent, 24 left
    with pytest.raises(LimitExceededError, match=r"would take 45 s in all, more than this server's 40-second"):
        budget(40, 1.0, spent_s=10.0, methods=1).plan(Asked(have=1, wanted=18, minimum=18, reserve=0))
    # 16 sets: 31 s to come, 5 spent: 36 s, under the cap but past what the plan keeps free of it
    with pytest.raises(LimitExceededError, match=r"would take 36 s in all, too close to this server's 40-second"):
        budget(40, 1.0, spent_s=5.0, methods=1).plan(Asked(have=1, wanted=16, minimum=16, reserve=0))


def test_the_users_own_samples_are_never_cut_only_refused():
    samples = Asked(have=50, wanted=50, minimum=50, reserve=0, user_data=True)
    assert budget(600, 1.0).plan(samples).sets == 50  # 200 runs: fits, latency dropped if needed
    with pytest.raises(LimitExceededError, match="judging 4 methods on 50 inputs"):
        budget(600, 3.0).plan(samples)


def test_calibrating_methods_and_culprit_budgets_count():
    asked = Asked(have=1, wanted=1, minimum=1, reserve=0, samples_per_set=4)
    plain = budget(600, 2.0, latency=False)
    assert plain.estimate(asked, 1, 0, False) == pytest.approx(4 * 2.0)
    calibrating = budget(600, 2.0, latency=False, calibrating=1, culprits_s=120.0, overhead_s=0.5)
    # one calibration set for the original and one for the method; each variant written and opened; culprits
    assert calibrating.estimate(asked, 1, 0, False) == pytest.approx((4 + 2) * 2.0 + 4 * 0.5 + 120.0)


def test_latency_without_a_budget_is_counted_in_rounds():
    asked = Asked(have=1, wanted=1, minimum=1, reserve=0)
    b = budget(None, 1.0, methods=2, latency_settings=1, latency_budget_s=None, latency_runs=10)
    assert b.estimate(asked, 1, 0, True) - b.estimate(asked, 1, 0, False) == pytest.approx((1 + 2 * 21) * 1.0)


def test_the_first_run_refuses_at_once_when_even_its_own_samples_would_not_fit():
    """A 30 s model with 5 methods under a 2-minute cap: refused after its first run, not after four."""
    b = Budget(methods=5, time_left=lambda: 102.0, cap_s=120)
    b.first_group, b.first_samples = 1, 4
    with pytest.raises(LimitExceededError, match=r"^One run of this model takes 30 s; judging 5 methods on 4 inputs"):
        b.first_run(30.0)
    b = Budget(methods=5, time_left=lambda: 510.0, cap_s=600)
    b.first_run(30.0)  # 150 s: it fits; the plan follows once the first set's decisions are known
    assert b.first_s == 30.0
    runs_mode = Budget(methods=1, time_left=lambda: 30.0, cap_s=60)
    runs_mode.first_group = runs_mode.first_samples = 4  # four single runs: three more of the original, four each
    with pytest.raises(LimitExceededError, match="on 4 inputs"):
        runs_mode.first_run(5.0)  # 7 runs of 5 s = 35 s


def test_the_first_successful_run_of_a_session_is_timed_once():
    class Session:
        calls = 0

        def run(self, *args):
            Session.calls += 1
            if Session.calls == 1:
                raise RuntimeError("refused these dims")
            clock.now += 2.5
            return ["out"]

        def get_outputs(self):
            return ["y"]

    class Clock:
        now = 0.0

        def __call__(self):
            return self.now

    clock = Clock()
    b = Budget(methods=1)
    timed = FirstRun(Session(), b, timer=clock)
    with pytest.raises(RuntimeError):
        timed.run(None, {})
    assert b.first_s is None and timed.get_outputs() == ["y"]
    assert timed.run(None, {}) == ["out"] and b.first_s == 2.5
    timed.run(None, {})
    assert b.first_s == 2.5


def test_words_for_limits():
    assert limit_words(600) == "10-minute limit" and limit_words(90) == "90-second limit"


def test_a_refusal_words_its_durations_as_estimates():
    """What a run would take is an estimate: 'about N minutes' (units.format_seconds, rough)."""
    text = Budget(methods=4).refusal(1984.0, 20, first_s=3.14).problem
    assert "One run of this model takes 3.1 s" in text and "would take about 33 minutes in all" in text


def test_the_job_clock_is_the_workers_and_only_inside_one(monkeypatch):
    import time

    monkeypatch.delenv("SHRINKRAY_WORKER", raising=False)
    assert job_clock() is None  # a direct call has no cap
    monkeypatch.setenv("SHRINKRAY_WORKER", "1")
    monkeypatch.setenv("SHRINKRAY_MAX_JOB_SECONDS", "90")
    monkeypatch.setenv("SHRINKRAY_JOB_STARTED", repr(time.monotonic() - 12.0))  # the worker began 12 s ago
    started, cap = job_clock()
    assert cap == 90 and time.perf_counter() - started == pytest.approx(12.0, abs=1.0)
    monkeypatch.setenv("SHRINKRAY_JOB_STARTED", "junk")
    started, _ = job_clock()
    assert time.perf_counter() - started == pytest.approx(0.0, abs=1.0)

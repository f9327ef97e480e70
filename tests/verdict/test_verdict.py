"""The one verdict: status, what it rests on and one sentence, made from measured parity."""

from __future__ import annotations

import numpy as np
import pytest

from shrinkray.measure.parity import OutputKind, VerdictSettings, compare_outputs
from shrinkray.verdict import ERROR, UNMEASURED, over_limit, parity_verdict

SCORES = OutputKind("scores", why="test")


def _scores(rows: int, flips: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Class scores for ``rows`` inputs, and a copy whose top class changes on ``flips`` of them."""
    ref = np.random.default_rng(seed).normal(size=(rows, 10)).astype(np.float32)
    var = ref + 1e-4
    for row in range(flips):
        others = np.where(np.arange(10) == np.argmax(ref[row]), -np.inf, ref[row])
        var[row, int(np.argmax(others))] = ref[row].max() + 1.0  # the runner-up becomes the top class
    return ref, var


def _verdict(rows: int, flips: int):
    ref, var = _scores(rows, flips)
    return parity_verdict(compare_outputs({"logits": ref}, {"logits": var}, {"logits": SCORES}, samples=rows))


def test_a_pass_says_what_it_rests_on():
    v = _verdict(160, 1)
    assert v.status == "pass" and v.passed and v.label == "Passes"
    assert v.sentence == ("Passes: keeps the top class on 159 of 160 inputs: at least 97.2% with 95% confidence "
                          "(needs 97%).")  # fmt: skip
    (out,) = v.outputs
    assert out.decisions == 160 and out.measure == "top1_agreement" and out.limit == 0.97
    assert out.low == pytest.approx(0.9725, abs=1e-4)


def test_a_handful_of_decisions_is_undecided_never_a_pass_or_a_fail():
    v = _verdict(8, 0)
    assert v.status == "undecided" and v.undecided and not v.passed
    assert v.sentence.startswith("Undecided: keeps the top class on 8 of 8 inputs: between ")
    assert "either side of the 97% needed; more inputs would decide it." in v.sentence
    assert _verdict(8, 1).status == "undecided"  # 7 of 8 is not a sure fail either


def test_a_clear_fail_says_how_far_below():
    v = _verdict(160, 20)
    assert v.status == "fail"
    assert v.sentence.startswith("Fails: keeps the top class on only 140 of 160 inputs: at most ")
    assert v.sentence.endswith("with 95% confidence (needs 97%).")


def test_identical_outputs_pass_whatever_their_count():
    ref, _ = _scores(3, 0)
    v = parity_verdict(compare_outputs({"logits": ref}, {"logits": ref.copy()}, {"logits": SCORES}, samples=3))
    assert v.status == "pass"


def test_values_are_judged_by_their_limits_with_the_share_used():
    ref = np.linspace(0, 1, 100, dtype=np.float32).reshape(10, 10)
    verdict = VerdictSettings(profile="absolute")
    ok = parity_verdict(compare_outputs({"y": ref}, {"y": ref + 0.01}, verdict=verdict))
    assert ok.status == "pass" and ok.sentence == "Passes: mean abs error 0.01 (needs <= 0.02), uses 50% of the allowed error."
    bad = parity_verdict(compare_outputs({"y": ref}, {"y": ref + 1.0}, verdict=verdict))
    assert bad.status == "fail" and "over the allowed error" in bad.sentence and "%" not in bad.sentence.split(",")[-1]


def test_several_outputs_name_the_one_that_decided():
    ref, var = _scores(160, 30)
    same = np.ones((160, 4), np.float32)
    parity = compare_outputs({"logits": ref, "boxes": same}, {"logits": var, "boxes": same},
                             {"logits": SCORES, "boxes": OutputKind("continuous")}, samples=160)  # fmt: skip
    assert parity_verdict(parity).sentence.startswith("Fails: 'logits' keeps the top class on only 130 of 160")


def test_not_made_and_not_measured():
    assert parity_verdict(None, "the model has no weights").status == ERROR
    assert parity_verdict(None).status == UNMEASURED and parity_verdict(None).label == "Not judged"


@pytest.mark.parametrize(("severity", "words"), [
    (0.85, "uses 85% of the allowed error"), (1.39, "39% over the allowed error"),
    (1.0 + 1e-9, "not firmly within the allowed error"),
    (31.3, "31x over the allowed error"), (float("inf"), "far over the allowed error"),
])  # fmt: skip
def test_over_limit_words(severity, words):
    assert over_limit(severity) == words


def test_as_dict_is_strict_json():
    import json

    data = _verdict(160, 1).as_dict()
    assert json.loads(json.dumps(data, allow_nan=False)) == data
    assert data["status"] == "pass" and data["outputs"][0]["decisions"] == 160


def test_a_yes_no_pass_says_the_decisions_it_rests_on_not_the_closest_backstop():
    """A probability output passes on its decisions kept; its RMS backstop may be the closer call, but the
    sentence a user acts on is how many yes/no decisions stayed."""
    rng = np.random.default_rng(0)
    ref = np.concatenate([rng.uniform(0.0, 0.2, 150), rng.uniform(0.8, 1.0, 150)])[:, None]
    var = ref.copy()
    var[:4] = 0.7  # 4 of 150 silent frames now speech: RMS 76% of its limit, the share just clear
    kind = {"speech": OutputKind("probability", why="test", probability=True)}
    v = parity_verdict(compare_outputs({"speech": ref}, {"speech": var}, kind))
    assert v.status == "pass"
    assert v.sentence == ("Passes: keeps the yes/no (above or below 0.5) on 296 of 300 decisions: at least 97.1% "
                          "with 95% confidence (needs 97%).")  # fmt: skip

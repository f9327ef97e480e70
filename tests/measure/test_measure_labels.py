"""Class labels computed by ArgMax are judged like the scores they come from, not as exact integers."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from shrinkray.measure.output_kinds import classify_outputs
from shrinkray.measure.parity import OutputKind, VerdictSettings, compare_output
from shrinkray.measure.parity_inputs import decisions_given, parity_inputs
from shrinkray.measure.results import CompareSettings


def classifier_with_labels() -> onnx.ModelProto:
    """x [N, 8] -> logits [N, 5] and label [N] = ArgMax(logits) cast to int32."""
    w = numpy_helper.from_array(np.random.default_rng(2).normal(size=(8, 5)).astype(np.float32), "w")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["logits"]),
        helper.make_node("ArgMax", ["logits"], ["idx"], axis=1, keepdims=0),
        helper.make_node("Cast", ["idx"], ["label"], to=TensorProto.INT32),
    ]
    graph = helper.make_graph(
        nodes, "cls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 5]),
         helper.make_tensor_value_info("label", TensorProto.INT32, ["N"])], [w],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def test_an_argmax_output_is_read_as_labels():
    model = classifier_with_labels()
    kinds = classify_outputs(model, {"logits": np.zeros((4, 5), np.float32), "label": np.zeros(4, np.int32)})
    assert kinds["label"].kind == "exact" and kinds["label"].labels
    assert "ArgMax" in kinds["label"].why
    assert not classify_outputs(model, {"label": np.zeros(4, np.int64)}, VerdictSettings(kinds={"label": "exact"}))[
        "label"
    ].labels  # the user's choice stands


def _labels(flips: int, verdict: VerdictSettings | None = None):
    ref = np.arange(40, dtype=np.int32) % 5
    var = ref.copy()
    var[:flips] = (var[:flips] + 1) % 5
    return compare_output("label", ref, var, OutputKind("exact", labels=True), verdict)


def test_labels_allow_the_flips_top1_agreement_allows():
    one = _labels(1)  # 39 of 40 kept: the 0.97 a scores output allows, but 40 labels cannot show it for sure
    assert one.status == "undecided" and one.measures["top1_agreement"] == 0.975 and not one.passed
    assert one.checks[0].decisions == 40 and one.checks[0].low < 0.97 < one.checks[0].high
    two = _labels(2)
    assert not two.passed and "top1 agreement 0.95" in two.reason
    assert _labels(0).passed


def test_labels_under_the_absolute_profile_use_its_agreement():
    assert not _labels(1, VerdictSettings(profile="absolute")).passed  # 0.975 < its 0.99


def test_plain_integers_still_match_exactly():
    ref = np.arange(40, dtype=np.int32)
    var = ref.copy()
    var[0] += 1
    assert not compare_output("count", ref, var, OutputKind("exact")).passed


def test_labels_count_as_decisions_for_the_parity_samples():
    inputs = parity_inputs(classifier_with_labels(), CompareSettings())
    assert inputs.kinds["label"].labels
    assert decisions_given(inputs.reference, inputs.kinds) >= 40

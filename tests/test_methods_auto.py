"""auto: per-tensor precision chosen by measured sensitivity, verified against the default verdict."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import sample_path
from onnx import TensorProto, helper, numpy_helper

import shrinkray
from shrinkray.compare import CompareSettings, compare
from shrinkray.methods.auto import Choice, assign

pytestmark = pytest.mark.slow


def sensitive_and_insensitive() -> onnx.ModelProto:
    """``fine = x @ W_big - x @ W_base`` is a small difference of large products: any rounding of
    W_big or W_base swamps it. ``plain = x @ W_plain`` is an ordinary layer."""
    rng = np.random.default_rng(0)
    base = rng.standard_normal((256, 256)).astype(np.float32)
    big = base + 0.001 * rng.standard_normal((256, 256)).astype(np.float32)
    plain = rng.standard_normal((256, 256)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "W_big"], ["a"]),
        helper.make_node("MatMul", ["x", "W_base"], ["b"]),
        helper.make_node("Sub", ["a", "b"], ["fine"]),
        helper.make_node("MatMul", ["x", "W_plain"], ["plain"]),
    ]
    graph = helper.make_graph(
        nodes, "mixed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 256])],
        [helper.make_tensor_value_info("fine", TensorProto.FLOAT, ["batch", 256]),
         helper.make_tensor_value_info("plain", TensorProto.FLOAT, ["batch", 256])],
        [numpy_helper.from_array(base, "W_base"), numpy_helper.from_array(big, "W_big"),
         numpy_helper.from_array(plain, "W_plain")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_a_sensitive_tensor_keeps_precision_and_an_insensitive_one_goes_to_4_bit():
    variant = shrinkray.shrink(sensitive_and_insensitive(), "auto")
    chosen = {row["tensor"]: row["precision"] for row in variant.details["precision_map"]}
    assert chosen["W_plain"] == "int4"
    assert chosen["W_big"] in ("float32", "float16") and chosen["W_base"] in ("float32", "float16")
    severities = {row["tensor"]: row["severity"] for row in variant.details["precision_map"]}
    assert severities["W_big"]["int8"] > 1 > severities["W_plain"]["int4"]  # measured, not assumed
    changes = {c.name: c.encoding for c in variant.changes}
    assert changes["W_plain"].startswith("int4:")


def test_the_result_passes_the_default_verdict_and_is_never_larger_than_a_single_method_that_passes():
    model = shrinkray.load(sample_path("transformer"))
    singles = [("weights-int8", {}), ("weights-int4", {}), ("float16", {})]
    c = compare(model, CompareSettings(methods=[("auto", {}), *singles], latency=False))
    auto, int8 = c.get("auto"), c.get("weights-int8")
    assert auto.ok and auto.parity.passed
    assert auto.sizes.raw < int8.sizes.raw
    for name, _ in singles:
        single = c.get(name)
        if single.ok and single.parity.passed:
            assert auto.sizes.raw <= single.sizes.raw, name
    assert auto.record["details"]["precision_map"]


def only_insensitive() -> onnx.ModelProto:
    rng = np.random.default_rng(3)
    w = rng.standard_normal((256, 256)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W_plain"], ["hidden"])], "plain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 256])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", 256])],  # an embedding: cosine
        [numpy_helper.from_array(w, "W_plain")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_when_the_smallest_mix_passes_nothing_is_measured():
    variant = shrinkray.shrink(only_insensitive(), "auto")
    (row,) = variant.details["precision_map"]
    assert row["precision"] == "int4"
    assert row["severity"] == {"float32": 0.0}  # no per-tensor inference was needed
    assert any("all at the lowest precision (int4): passes" in n for n in variant.notes)


def test_auto_is_not_part_of_a_plain_compare():
    from shrinkray.methods import all_methods

    defaults = [s.name for s in all_methods() if s.in_default_set]
    assert "auto" not in defaults and "weights-int8" in defaults


def _choice(name: str, severity: dict[str, float]) -> Choice:
    class Ref:
        pass

    ref = Ref()
    ref.name, ref.shape = name, [100]
    bytes_ = {"float32": 400.0, "float16": 200.0, "int8": 100.0, "int4": 56.25}
    return Choice(ref, {k: v for k, v in bytes_.items() if k in severity}, severity)


def test_assign_spends_the_error_budget_where_it_saves_most_bytes():
    cheap = _choice("cheap", {"float32": 0.0, "float16": 0.0, "int8": 0.1, "int4": 0.2})
    costly = _choice("costly", {"float32": 0.0, "float16": 0.01, "int8": 0.6, "int4": 2.0})
    assign([cheap, costly], target=0.5)
    assert cheap.level == "int4"  # 0.2^2 = 0.04 of the 0.25 budget
    assert costly.level == "float16"  # int8 would add 0.36: over the budget
    assign([cheap, costly], target=1.0)
    assert (cheap.level, costly.level) == ("int4", "int8")


def test_a_target_below_one_keeps_that_margin_in_the_whole_model():
    loose = shrinkray.shrink(only_insensitive(), "auto")
    tight = shrinkray.shrink(only_insensitive(), "auto", target=0.05)
    assert loose.details["precision_map"][0]["precision"] == "int4"
    (row,) = tight.details["precision_map"]
    assert row["precision"] in ("int8", "float16")  # 4-bit passes the verdict, but not with 95% to spare
    assert row["severity"]["int4"] > 0.05 > row["severity"][row["precision"]]

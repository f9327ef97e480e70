"""Tests for shrinkray.graph.validate: opsets, onnx.checker, ONNX Runtime sessions and custom ops."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import SAMPLE_NAMES, SAMPLES
from onnx import TensorProto, helper

from shrinkray.errors import InvalidModelError, RuntimeUnsupportedError
from shrinkray.graph.checks import (
    ORT_MAX_IR_VERSION,
    check_opsets,
    check_structure,
    custom_ops,
    default_opset,
    explain_runtime_error,
)
from shrinkray.graph.sessions import open_session
from shrinkray.graph.validate import validate

ALL_SAMPLES = SAMPLE_NAMES
F = TensorProto.FLOAT


def sample(name: str) -> onnx.ModelProto:
    return onnx.load(str(SAMPLES / f"{name}.onnx"))


def relu_model(
    nodes: list[onnx.NodeProto] | None = None,
    *,
    opset: int = 17,
    ir_version: int = 10,
    extra_opsets: tuple[tuple[str, int], ...] = (),
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes if nodes is not None else [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", F, [2])],
        [helper.make_tensor_value_info("y", F, [2])],
    )
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    return helper.make_model(graph, opset_imports=opsets, ir_version=ir_version)


def custom_op_model() -> onnx.ModelProto:
    return relu_model(
        [helper.make_node("MyOp", ["x"], ["y"], domain="com.example")], extra_opsets=(("com.example", 1),)
    )


# --------------------------------------------------------------------------- good models


@pytest.mark.parametrize("name", ALL_SAMPLES)
def test_every_sample_validates(name):
    model = sample(name)
    validate(model)
    assert custom_ops(model) == []


def test_relu_model_validates_and_runs():
    model = relu_model()
    validate(model)
    session = open_session(model)
    out = session.run(None, {"x": np.array([-1.0, 2.0], np.float32)})[0]
    assert out.tolist() == [0.0, 2.0]


@pytest.mark.parametrize("optimized", [True, False])
def test_open_session_optimized_and_not(optimized):
    model = sample("mlp")
    session = open_session(model, optimized=optimized, threads=1)
    assert [o.name for o in session.get_outputs()] == ["logits", "probs"]
    assert session.get_providers() == ["CPUExecutionProvider"]
    features = np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)
    logits, probs = session.run(None, {"features": features})
    assert logits.shape == probs.shape == (3, 10)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)


def test_optimized_and_unoptimized_sessions_agree():
    model = sample("cnn")
    image = np.random.default_rng(1).standard_normal((2, 3, 32, 32)).astype(np.float32)
    fast = open_session(model, optimized=True).run(None, {"image": image})[0]
    plain = open_session(model, optimized=False).run(None, {"image": image})[0]
    np.testing.assert_allclose(fast, plain, rtol=1e-4, atol=1e-4)


def test_validate_does_not_modify_the_model():
    model = sample("subgraph")
    before = model.SerializeToString()
    validate(model)
    assert model.SerializeToString() == before


# --------------------------------------------------------------------------- opsets


def test_default_opset():
    assert default_opset(sample("messy")) == 11
    assert default_opset(sample("tree")) == 17
    model = relu_model()
    del model.opset_import[:]
    model.opset_import.append(helper.make_opsetid("ai.onnx.ml", 3))
    assert default_opset(model) == 0


def test_opset_newer_than_onnx_knows():
    newest = onnx.defs.onnx_opset_version()
    model = relu_model(opset=newest + 1)
    for check in (check_opsets, check_structure, validate):
        with pytest.raises(InvalidModelError) as excinfo:
            check(model)
        text = str(excinfo.value)
        assert f"opset {newest + 1}" in text and "newer" in text and str(newest) in text


def test_newest_opset_is_accepted():
    check_opsets(relu_model(opset=onnx.defs.onnx_opset_version()))


def test_opset_5_is_refused():
    """check_opsets leaves old opsets to ONNX Runtime, which has no kernels for ops that old."""
    model = relu_model(opset=5)
    check_opsets(model)
    with pytest.raises(RuntimeUnsupportedError) as excinfo:  # the checker accepts it; ONNX Runtime cannot run it
        validate(model)
    assert "Relu" in str(excinfo.value)


def test_opset_5_message_says_the_opset_is_too_old():
    with pytest.raises(RuntimeUnsupportedError) as excinfo:  # the checker accepts it; ONNX Runtime cannot run it
        validate(relu_model(opset=5))
    text = str(excinfo.value)
    assert "opset 5" in text and "old" in text, text


def test_standard_ops_without_the_default_opset_import():
    model = relu_model()
    del model.opset_import[:]
    model.opset_import.append(helper.make_opsetid("ai.onnx.ml", 3))
    with pytest.raises(InvalidModelError) as excinfo:
        check_structure(model)
    assert "does not import the ai.onnx opset" in str(excinfo.value)


# --------------------------------------------------------------------------- checker failures


def test_checker_failure_input_nothing_produces():
    model = relu_model([helper.make_node("Add", ["x", "ghost"], ["y"])])
    for check in (check_structure, validate):
        with pytest.raises(InvalidModelError) as excinfo:
            check(model)
        text = str(excinfo.value)
        assert "not valid ONNX" in text and "ghost" in text


def test_checker_failure_duplicate_output_names():
    model = relu_model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])])
    with pytest.raises(InvalidModelError) as excinfo:
        validate(model)
    text = str(excinfo.value)
    assert "not valid ONNX" in text and "'y'" in text
    assert "\n" not in text  # one line for the CLI


def test_checker_failure_inside_a_subgraph():
    branch = helper.make_graph(
        [helper.make_node("Relu", ["nowhere"], ["b"])], "branch", [], [helper.make_tensor_value_info("b", F, [2])]
    )
    model = relu_model(
        [helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)],
    )
    model.graph.input.append(helper.make_tensor_value_info("c", TensorProto.BOOL, []))
    with pytest.raises(InvalidModelError, match="not valid ONNX"):
        check_structure(model)


# --------------------------------------------------------------------------- ONNX Runtime refusals


def test_ir_version_newer_than_runtime_supports():
    assert ORT_MAX_IR_VERSION == 13
    model = relu_model(ir_version=14)
    check_structure(model)  # valid ONNX for onnx 1.23 ...
    with pytest.raises(RuntimeUnsupportedError) as excinfo:
        validate(model)  # ... but ONNX Runtime refuses it
    text = str(excinfo.value)
    assert "IR version 14" in text and "(13)" in text
    assert "ir_version = 13" in text


def test_custom_domain_op_is_named():
    model = custom_op_model()
    check_structure(model)
    with pytest.raises(RuntimeUnsupportedError) as excinfo:
        validate(model)
    text = str(excinfo.value)
    assert "com.example::MyOp" in text and "custom op" in text
    with pytest.raises(RuntimeUnsupportedError, match="com.example::MyOp"):
        open_session(model)


def test_custom_ops_lists_ops_in_nested_subgraphs():
    def branch(op: str, name: str) -> onnx.GraphProto:
        return helper.make_graph(
            [helper.make_node(op, ["x"], [name], domain="com.example")],
            name,
            [],
            [helper.make_tensor_value_info(name, F, [2])],
        )

    inner_if = helper.make_node(
        "If", ["c"], ["inner"], then_branch=branch("Deep", "d1"), else_branch=branch("Deep", "d2")
    )
    outer_then = helper.make_graph([inner_if], "outer_then", [], [helper.make_tensor_value_info("inner", F, [2])])
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("LoopOp", ["x"], ["scan_out"], domain="com.example"),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("scan_out", F, [2]),
        ],
    )
    nodes = [
        helper.make_node("If", ["c"], ["y0"], then_branch=outer_then, else_branch=branch("Other", "o")),
        helper.make_node("Loop", ["n", "c"], ["loop_out"], body=body),
        helper.make_node("Relu", ["y0"], ["y"]),
    ]
    model = relu_model(nodes, extra_opsets=(("com.example", 1),))
    assert custom_ops(model) == ["com.example::Deep", "com.example::LoopOp", "com.example::Other"]


def test_custom_ops_ignores_standard_domains_and_local_functions():
    ml = sample("tree")
    assert {n.domain for n in ml.graph.node} >= {"ai.onnx.ml"}
    assert custom_ops(ml) == []
    function = helper.make_function(
        "my.local", "Twice", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])], [helper.make_opsetid("", 17)]
    )
    model = relu_model([helper.make_node("Twice", ["x"], ["y"], domain="my.local")], extra_opsets=(("my.local", 1),))
    model.functions.append(function)
    assert custom_ops(model) == []
    validate(model)  # ONNX Runtime inlines the local function


def test_custom_op_inside_a_local_function_is_named():
    function = helper.make_function(
        "my.local",
        "Wrap",
        ["a"],
        ["b"],
        [helper.make_node("MyOp", ["a"], ["b"], domain="com.example")],
        [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)],
    )
    model = relu_model(
        [helper.make_node("Wrap", ["x"], ["y"], domain="my.local")],
        extra_opsets=(("my.local", 1), ("com.example", 1)),
    )
    model.functions.append(function)
    assert custom_ops(model) == ["com.example::MyOp"]


# --------------------------------------------------------------------------- explain_runtime_error


def test_explain_runtime_error_messages():
    kernel = explain_runtime_error(
        RuntimeError("Could not find an implementation for MatMul(13) node with name 'mm'"), relu_model()
    )
    assert isinstance(kernel, RuntimeUnsupportedError)
    assert "no CPU kernel for MatMul (opset 13, node 'mm')" in str(kernel)

    long = explain_runtime_error(RuntimeError("[ONNXRuntimeError] : 1 : FAIL : " + "x" * 1000 + "\nsecond line"))
    text = str(long)
    assert "[ONNXRuntimeError]" not in text and "second line" not in text
    assert "x" * 290 in text and "x" * 300 not in text

    ir = explain_runtime_error(RuntimeError("Unsupported model IR version: 15, max supported IR version: 13"))
    assert "IR version 15" in str(ir) and "(13)" in str(ir)


def test_truncated_runtime_message_keeps_its_ellipsis():
    text = str(explain_runtime_error(RuntimeError("y" * 1000)))
    assert "y" * 297 + "…" in text, text


def test_large_models_keep_a_session_opened_from_their_measuring_copy(monkeypatch):
    """validate(keep_session=True) from MEASURING_COPY_MIN_BYTES on: the session comes from the model's measuring
    copy (decodes folded one weight at a time) and runs exactly what the optimized session on its bytes runs."""
    import sys

    from helpers import make_feeds, shrunk

    from shrinkray.graph import prefold

    validate_module = sys.modules["shrinkray.graph.validate"]

    model = shrunk("weights-int8", "mlp", ()).model
    opened = []
    real = prefold.measuring_session
    monkeypatch.setattr(validate_module, "measuring_session", lambda m, **kw: opened.append(m) or real(m, **kw))
    monkeypatch.setattr(validate_module, "MEASURING_COPY_MIN_BYTES", 0)
    session = validate(model, keep_session=True)
    assert opened == [model]
    reference = open_session(model, optimized=True)
    feeds = make_feeds(reference)
    for want, got in zip(reference.run(None, feeds), session.run(None, feeds), strict=True):
        assert np.asarray(want).tobytes() == np.asarray(got).tobytes()
    monkeypatch.setattr(validate_module, "MEASURING_COPY_MIN_BYTES", 1 << 40)
    validate(model, keep_session=True)
    assert opened == [model]  # small models open from their bytes

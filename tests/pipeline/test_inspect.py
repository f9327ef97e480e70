"""shrinkray.pipeline.inspect: signature, ops, weights, custom ops and per-method reach of the samples."""

from __future__ import annotations

import functools
import json
from collections import Counter

import numpy as np
import onnx
import pytest
from helpers import SAMPLE_NAMES, all_tensors, method_model_params, read_sample, sample_path, shrunk
from onnx import TensorProto, helper, numpy_helper

import shrinkray

#: Methods that rewrite stored tensors one by one (their spec: traceable), from the registry.
WEIGHT_METHODS = [s.name for s in shrinkray.all_methods() if s.in_default_set and s.traceable]


@pytest.fixture(autouse=True)
def _scratch_working_directory(tmp_path, monkeypatch):
    """dynamic-int8 may leave files in the working directory; keep them out of the repository."""
    monkeypatch.chdir(tmp_path)


@functools.cache
def _summary(name: str) -> shrinkray.ModelSummary:
    return shrinkray.inspect(shrinkray.load(sample_path(name)))


def _sig(values) -> list[tuple[str, str, list | None]]:
    return [(v.name, v.dtype, v.shape) for v in values]


# ------------------------------------------------------------------ signature


def test_mlp_signature_and_header():
    s = _summary("mlp")
    assert s.name == "mlp"
    assert s.file_bytes == sample_path("mlp").stat().st_size
    assert s.ir_version == 10
    assert s.opsets == {"ai.onnx": 17}
    assert s.producer.startswith("shrinkray-samples")
    assert _sig(s.inputs) == [("features", "float", ["batch", 64])]
    assert _sig(s.outputs) == [("logits", "float", ["batch", 10]), ("probs", "float", ["batch", 10])]
    assert s.inputs[0].dynamic_axes == {0: "batch"}
    assert s.inputs[0].shape_text() == "[batch, 64]"
    assert s.overridable_initializers == []


def test_transformer_int64_inputs_with_symbolic_dims():
    s = _summary("transformer")
    assert _sig(s.inputs) == [
        ("input_ids", "int64", ["batch", "seq"]),
        ("attention_mask", "int64", ["batch", "seq"]),
    ]
    assert _sig(s.outputs) == [
        ("last_hidden_state", "float", ["batch", "seq", 64]),
        ("pooled", "float", ["batch", 64]),
    ]
    assert s.inputs[0].dynamic_axes == {0: "batch", 1: "seq"}


def test_messy_unnamed_dims_and_int64_scalar_input():
    s = _summary("messy")
    assert s.opsets == {"ai.onnx": 11}
    assert _sig(s.inputs) == [
        ("input.1", "float", ["?", 64]),  # a dim with neither value nor name
        ("aux", "float", ["?", 16]),
        ("scale", "int64", []),  # scalar: rank 0, not unknown rank
    ]
    assert _sig(s.outputs) == [
        ("output", "float", ["?", 10]),
        ("label", "int64", ["?"]),
        ("probs", "float", ["?", "?"]),
    ]
    assert s.inputs[2].shape_text() == "[]"


def test_float16_bool_and_fixed_dims():
    assert _sig(_summary("fp16").inputs) == [("x", "float16", ["batch", 128])]
    assert _sig(_summary("subgraph").inputs) == [("x", "float", [1, 128]), ("use_branch_a", "bool", [])]
    assert _summary("subgraph").inputs[0].dynamic_axes == {}


def test_initializer_that_is_also_an_input_is_overridable_not_an_input():
    s = _summary("shared_weight")
    assert [i.name for i in s.inputs] == ["input_ids"]
    assert s.overridable_initializers == ["W_override"]
    assert "W_override" in [w.name for w in s.weights]


def test_unknown_rank_and_non_tensor_values():
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],  # no shape at all
        [helper.make_tensor_sequence_value_info("y", TensorProto.FLOAT, None)],
    )
    s = shrinkray.inspect(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert _sig(s.inputs) == [("x", "float", None)]
    assert s.inputs[0].shape_text() == "unknown rank"
    assert (s.outputs[0].dtype, s.outputs[0].shape) == ("sequence_type", None)  # the value kind, not a tensor dtype


# ------------------------------------------------------------------ ops


def _count_ops(model: onnx.ModelProto) -> Counter:
    """Independent count: walk every graph attribute recursively."""
    counts: Counter = Counter()

    def walk(graph: onnx.GraphProto) -> None:
        for node in graph.node:
            key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"
            counts[key] += 1
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g)
                for sub in attr.graphs:
                    walk(sub)

    walk(model.graph)
    return counts


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_op_histogram_counts_every_node_including_subgraphs(name):
    s = _summary(name)
    expected = _count_ops(read_sample(name))
    assert dict(s.op_histogram) == dict(expected)
    assert s.node_count == sum(expected.values())
    counts = [n for _, n in s.op_histogram]
    assert counts == sorted(counts, reverse=True)


def test_subgraph_histogram_includes_control_flow_and_inner_ops():
    s = _summary("subgraph")
    ops = dict(s.op_histogram)
    assert ops["If"] == 1 and ops["Loop"] == 1
    main_graph_matmuls = sum(n.op_type == "MatMul" for n in read_sample("subgraph").graph.node)
    assert main_graph_matmuls == 0
    assert ops["MatMul"] == 6  # 2 per If branch + 2 in the Loop body
    assert ops["Tanh"] == 3  # else branch 1, Loop body 2
    assert s.subgraph_count == 3  # then_branch, else_branch, body


def test_ml_domain_ops_are_prefixed():
    ops = dict(_summary("tree").op_histogram)
    assert ops == {"Sub": 1, "Mul": 1, "ai.onnx.ml::TreeEnsembleClassifier": 1}
    assert _summary("tree").custom_ops == []  # ai.onnx.ml is a standard domain
    assert _summary("tree").opsets == {"ai.onnx": 17, "ai.onnx.ml": 3}


def _custom_op_model(with_function: bool = False) -> onnx.ModelProto:
    then_branch = helper.make_graph(
        [helper.make_node("Warp", ["x"], ["t"], domain="com.example")],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])],
    )
    nodes = [
        helper.make_node("Frobnicate", ["x"], ["f"], domain="com.example", strength=3),
        helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch),
    ]
    functions = []
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    if with_function:
        nodes.append(helper.make_node("Local", ["x"], ["z"], domain="com.example"))
        functions.append(
            helper.make_function(
                "com.example", "Local", ["a"], ["b"], [helper.make_node("Neg", ["a"], ["b"])], opsets[:1]
            )
        )
    graph = helper.make_graph(
        nodes,
        "custom",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("f", TensorProto.FLOAT, [2]),
        ],
    )
    return helper.make_model(graph, opset_imports=opsets, functions=functions)


def test_custom_domain_ops_are_reported():
    s = shrinkray.inspect(_custom_op_model())
    assert s.custom_ops == ["com.example::Frobnicate", "com.example::Warp"]
    ops = dict(s.op_histogram)
    assert ops["com.example::Frobnicate"] == 1
    assert ops["com.example::Warp"] == 1  # inside the If branch
    assert s.opsets == {"ai.onnx": 17, "com.example": 1}
    assert s.file_bytes == _custom_op_model().ByteSize()


def test_ops_defined_by_a_local_function_are_not_custom():
    s = shrinkray.inspect(_custom_op_model(with_function=True))
    assert "com.example::Local" not in s.custom_ops
    assert "com.example::Frobnicate" in s.custom_ops


# ------------------------------------------------------------------ weights


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_weights_are_sorted_with_correct_bytes_and_shares(name):
    s = _summary(name)
    stored = {tname: numpy_helper.to_array(t) for _, tname, t in all_tensors(read_sample(name))}
    assert len(s.weights) == len(stored)
    sizes = [w.bytes for w in s.weights]
    assert sizes == sorted(sizes, reverse=True)
    for w in s.weights:
        array = stored[w.name]
        assert w.bytes == array.nbytes, w.name
        assert w.shape == list(array.shape)
        assert w.elements == array.size
        assert w.share_of_file == pytest.approx(w.bytes / s.file_bytes)
    shares = sum(w.share_of_file for w in s.weights)
    assert 0 < shares <= 1
    assert s.weight_bytes == sum(sizes)
    assert s.weight_share == pytest.approx(shares)


def test_weights_report_where_they_live():
    where = {w.name: w.where for w in _summary("subgraph").weights}
    assert where["then/W1"] == "initializer in If_1/then_branch"
    assert where["then/W2"] == "Constant node in If_1/then_branch"
    assert where["body/W_in"] == "initializer in Loop_4/body"
    assert where["loop_W_out"] == "initializer"
    messy = {w.name: (w.where, w.dtype) for w in _summary("messy").weights}
    assert messy["onnx::MatMul_103"] == ("Constant node", "float")
    fp16 = {w.name: w.dtype for w in _summary("fp16").weights}
    assert fp16["fc2.weight"] == "float16"


def test_weights_dominate_the_sample_files():
    for name in ("mlp", "cnn", "transformer", "rnn", "subgraph", "shared_weight", "messy"):
        assert _summary(name).weight_share > 0.95, name


# ------------------------------------------------------------------ method reach


def test_reach_lists_every_method_in_order():
    assert [m.method for m in _summary("mlp").methods] == [spec.name for spec in shrinkray.all_methods()]


def test_tree_reach_is_zero_for_every_method():
    for reach in _summary("tree").methods:
        assert (reach.tensors, reach.bytes, reach.share_of_file) == (0, 0, 0.0), reach.method


def test_mlp_reach_matches_the_large_tensors():
    reach = {m.method: m for m in _summary("mlp").methods}
    big = [w for w in _summary("mlp").weights if w.elements >= 16384]
    assert {w.name for w in big} == {"fc1.weight", "fc2.weight", "fc3.weight"}
    for method in ("weights-int8", "palettize"):
        assert reach[method].tensors == 3
        assert reach[method].bytes == sum(w.bytes for w in big)
        assert reach[method].share_of_file == pytest.approx(reach[method].bytes / _summary("mlp").file_bytes)
    assert reach["float16"].tensors == 4  # float16's own threshold is 1024 values: head.weight too


def test_shared_weight_reach_skips_the_overridable_initializer():
    reach = {m.method: m for m in _summary("shared_weight").methods}
    for method in WEIGHT_METHODS:
        assert reach[method].tensors == 3  # tied_embedding, shared_proj, const_proj; not W_override
        assert reach[method].bytes == 524288 + 262144 + 262144


@pytest.mark.parametrize("method, name", method_model_params([*WEIGHT_METHODS, "dynamic-int8"], SAMPLE_NAMES))
def test_reach_matches_what_the_method_rewrites(method, name):
    reach = {m.method: m for m in _summary(name).methods}[method]
    variant = shrunk(method, name)
    assert (reach.tensors, reach.bytes) == (len(variant.changes), variant.bytes_before)


# ------------------------------------------------------------------ dict form and purity


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_to_dict_is_json_serialisable(name):
    s = _summary(name)
    data = json.loads(json.dumps(s.to_dict()))
    assert data["name"] == name
    assert data["file_bytes"] == s.file_bytes
    assert data["op_histogram"] == dict(s.op_histogram)
    assert [i["name"] for i in data["inputs"]] == [i.name for i in s.inputs]
    assert [w["name"] for w in data["weights"]] == [w.name for w in s.weights]
    assert data["weight_share"] == pytest.approx(s.weight_share)
    assert {m["method"] for m in data["methods"]} == {spec.name for spec in shrinkray.all_methods()}
    for sig, obj in zip(data["inputs"], s.inputs, strict=True):
        assert sig["dynamic_axes"] == {str(k): v for k, v in obj.dynamic_axes.items()}


def test_inspect_does_not_modify_the_model():
    model = read_sample("subgraph")
    before = model.SerializeToString()
    s = shrinkray.inspect(model)
    assert model.SerializeToString() == before
    assert s.file_bytes == len(before)
    assert s.name == "model"


def test_inspect_of_a_model_loaded_from_bytes():
    data = sample_path("cnn").read_bytes()
    s = shrinkray.inspect(shrinkray.load(data, name="upload.onnx"))
    assert s.name == "upload.onnx"
    assert s.file_bytes == len(data)
    assert _sig(s.inputs) == [("image", "float", ["N", 3, 32, 32])]
    assert np.isclose(sum(w.share_of_file for w in s.weights), s.weight_share)

"""Tests for shrinkray.graph.weights: the weight inventory, channel axes and the graph editor.

GraphEditor tests replace a weight by stored tensors plus decode nodes that
rebuild it *exactly* (a float32 copy and a Cast to FLOAT, or copy * 1.0), so
ONNX Runtime must give bit-identical outputs before and after.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import SAMPLE_NAMES, SAMPLES
from onnx import TensorProto, helper, numpy_helper

from shrinkray.graph.weights import (
    GraphEditor,
    NameAllocator,
    channel_axis,
    constants_to_initializers,
    find_weights,
    iter_graphs,
    quantized_ops,
)

ALL_SAMPLES = SAMPLE_NAMES


# --------------------------------------------------------------------------- helpers


def sample(name: str) -> onnx.ModelProto:
    return onnx.load(str(SAMPLES / f"{name}.onnx"))


def tiny_model(
    nodes: list[onnx.NodeProto],
    inputs: list[tuple[str, int, list]],
    outputs: list[tuple[str, int, list]],
    initializers: dict[str, np.ndarray] | None = None,
    opset: int = 17,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializer=[numpy_helper.from_array(a, n) for n, a in (initializers or {}).items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def weights_by_name(model: onnx.ModelProto) -> dict[str, object]:
    refs = find_weights(model)
    by_name = {r.name: r for r in refs}
    assert len(by_name) == len(refs), "weight names are unique in the samples"
    return by_name


_NP = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(bool)": np.bool_,
}


def feeds_for(model: onnx.ModelProto, seed: int = 0, **fixed: np.ndarray) -> dict[str, np.ndarray]:
    """One deterministic feed per required input (symbolic dims become 2, int ids in [0, 100))."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for inp in session.get_inputs():
        if inp.name in fixed:
            feeds[inp.name] = fixed[inp.name]
            continue
        dtype = _NP[inp.type]
        shape = [d if isinstance(d, int) and d > 0 else 2 for d in inp.shape]
        if dtype is np.bool_:
            feeds[inp.name] = np.ones(shape, dtype=bool)
        elif dtype is np.int64:
            feeds[inp.name] = (
                np.array(2, np.int64)
                if not shape
                else (np.ones(shape, np.int64) if "mask" in inp.name else rng.integers(0, 100, shape))
            )
        else:
            feeds[inp.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    # Prepacking reorders MatMul sums for constant B only; off, both forms compute bit-identically.
    opts.add_session_config_entry("session.disable_prepacking", "1")
    session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def feed_sets(name: str, model: onnx.ModelProto) -> list[dict[str, np.ndarray]]:
    """subgraph.onnx runs both If branches; other models get one feed."""
    if name == "subgraph":
        return [feeds_for(model, use_branch_a=np.array(flag)) for flag in (True, False)]
    return [feeds_for(model)]


def copy_builder(names, output, alloc):
    """Decode nodes that rebuild the weight exactly from a stored float32 copy."""
    return [helper.make_node("Cast", [names[0]], [output], name=alloc.new(f"{output}_copy"), to=TensorProto.FLOAT)]


def times_one_builder(names, output, alloc):
    """Two stored tensors: the copy and a 1.0, multiplied (exact)."""
    return [helper.make_node("Mul", [names[0], names[1]], [output], name=alloc.new(f"{output}_mul"))]


def graph_at(model: onnx.ModelProto, scope: str) -> onnx.GraphProto:
    graphs = [g for s, g in iter_graphs(model.graph) if s == scope]
    assert len(graphs) == 1, f"scope {scope!r} found {len(graphs)} times"
    return graphs[0]


def producers(graph: onnx.GraphProto, name: str) -> list[str]:
    """Every definition of ``name`` in one graph: initializers and node outputs."""
    found = [f"initializer {t.name}" for t in graph.initializer if t.name == name]
    found += [f"{n.op_type} {n.name}" for n in graph.node if name in n.output]
    return found


def all_names(model: onnx.ModelProto) -> set[str]:
    """Every tensor and node name in the model, collected without shrinkray's own walker."""
    names: set[str] = set()

    def walk(graph: onnx.GraphProto) -> None:
        names.update(t.name for t in graph.initializer)
        names.update(s.values.name for s in graph.sparse_initializer)
        for group in (graph.input, graph.output, graph.value_info):
            names.update(v.name for v in group)
        for node in graph.node:
            names.update(node.input)
            names.update(node.output)
            names.add(node.name)
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g)
                for sub in attr.graphs:
                    walk(sub)

    walk(model.graph)
    names.discard("")
    return names


# --------------------------------------------------------------------------- find_weights


@pytest.mark.parametrize("name", ALL_SAMPLES)
def test_find_weights_lists_every_stored_tensor_once_largest_first(name):
    model = sample(name)
    refs = find_weights(model)
    expected = set()

    def walk(graph: onnx.GraphProto) -> None:
        expected.update(("initializer", t.name) for t in graph.initializer)
        for node in graph.node:
            if node.op_type == "Constant" and any(a.name == "value" for a in node.attribute):
                expected.add(("constant", node.output[0]))
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g)

    walk(model.graph)
    listed = [(r.kind, r.name) for r in refs]
    assert len(listed) == len(set(listed))
    assert set(listed) == expected
    sizes = [r.nbytes for r in refs]
    assert sizes == sorted(sizes, reverse=True)
    for ref in refs:
        values = ref.array()
        assert ref.nbytes == values.nbytes
        assert ref.shape == values.shape
        assert ref.elements == values.size


def test_find_weights_kinds_and_scopes_in_subgraphs():
    refs = weights_by_name(sample("subgraph"))
    expected = {
        "loop_W_out": ("initializer", ""),
        "then/W1": ("initializer", "If_1/then_branch"),
        "then/b1": ("initializer", "If_1/then_branch"),
        "then/W2": ("constant", "If_1/then_branch"),
        "else/W1": ("initializer", "If_1/else_branch"),
        "else/W2": ("initializer", "If_1/else_branch"),
        "body/W_in": ("initializer", "Loop_4/body"),
        "loop_trip_count": ("constant", ""),
        "loop_cond": ("constant", ""),
    }
    assert {n: (r.kind, r.scope) for n, r in refs.items()} == expected
    for ref in refs.values():
        # The graph a ref points to really holds it.
        if ref.kind == "initializer":
            assert ref.name in {t.name for t in ref.graph.initializer}
        else:
            assert ref.node is not None and ref.node.op_type == "Constant" and ref.node.output[0] == ref.name
            assert ref.node in list(ref.graph.node)
    assert refs["then/W2"].where == "Constant node in If_1/then_branch"
    assert refs["loop_W_out"].where == "initializer"


def test_find_weights_sees_uses_from_inside_a_loop_body():
    model = sample("subgraph")
    ref = weights_by_name(model)["loop_W_out"]
    loop = next(n for n in model.graph.node if n.op_type == "Loop")
    body_nodes = {n.name for n in loop.attribute[0].g.node}
    assert [(c.op_type, c.input_index) for c in ref.consumers] == [("MatMul", 1)]
    assert ref.consumers[0].node_name in body_nodes
    assert ref.consumers[0].node.input[1] == "loop_W_out"


def test_find_weights_subgraph_consumers_are_local():
    refs = weights_by_name(sample("subgraph"))
    assert [(c.op_type, c.node_name, c.input_index) for c in refs["then/W2"].consumers] == [
        ("MatMul", "then/MatMul_5", 1)
    ]
    assert [(c.node_name, c.input_index) for c in refs["body/W_in"].consumers] == [("body/MatMul_1", 1)]
    assert [(c.node_name, c.input_index) for c in refs["loop_trip_count"].consumers] == [("Loop_4", 0)]


@pytest.mark.parametrize("name", ALL_SAMPLES)
def test_every_large_weight_has_a_consumer(name):
    for ref in find_weights(sample(name)):
        if ref.elements >= 1024:
            assert ref.consumers, f"{ref.name} has no consumers listed"


def test_shared_weight_consumers_and_graph_input_flag():
    refs = weights_by_name(sample("shared_weight"))
    assert refs["W_override"].is_graph_input is True
    assert [r.name for r in refs.values() if r.is_graph_input] == ["W_override"]
    assert {(c.op_type, c.node_name) for c in refs["shared_proj"].consumers} == {
        ("MatMul", "MatMul_2"),
        ("MatMul", "MatMul_5"),
    }
    assert {(c.op_type, c.input_index) for c in refs["tied_embedding"].consumers} == {
        ("Gather", 0),
        ("Transpose", 0),
    }
    assert refs["const_proj"].kind == "constant"
    assert refs["const_proj"].is_float and refs["const_proj"].dtype_name == "float"


def test_messy_weights_are_constant_nodes():
    refs = weights_by_name(sample("messy"))
    for name in ("onnx::MatMul_101", "onnx::MatMul_102", "onnx::MatMul_103", "head.weight"):
        assert refs[name].kind == "constant"
        assert refs[name].scope == ""
        assert refs[name].consumers
    assert refs["onnx::MatMul_101"].shape == (64, 384)


def test_fp16_weights_report_float16():
    refs = weights_by_name(sample("fp16"))
    assert refs["fc1.weight"].dtype == TensorProto.FLOAT16
    assert refs["fc1.weight"].dtype_name == "float16"
    assert refs["fc1.weight"].nbytes == 256 * 128 * 2


# --------------------------------------------------------------------------- channel_axis


def _gemm_trans_b(ref) -> int:
    node = ref.consumers[0].node
    return next((a.i for a in node.attribute if a.name == "transB"), 0)


@pytest.mark.parametrize(
    ("name", "weight", "axis"),
    [
        ("cnn", "block2.conv.weight", 0),  # Conv W [out, in, kh, kw]
        ("cnn", "block3.dw.weight", 0),  # depthwise Conv
        ("mlp", "fc2.weight", 1),  # MatMul B: last axis
        ("transformer", "embeddings.word_embeddings.weight", 0),  # Gather rows
        ("rnn", "lstm.W", 1),  # LSTM W [dirs, 4*hidden, in]
        ("rnn", "gru.R", 1),  # GRU R
        ("shared_weight", "shared_proj", 1),  # two MatMuls that agree
        ("shared_weight", "tied_embedding", None),  # Gather (0) + Transpose (unknown)
        ("subgraph", "then/W1", 1),  # MatMul inside a branch
    ],
)
def test_channel_axis_on_samples(name, weight, axis):
    assert channel_axis(weights_by_name(sample(name))[weight]) == axis


def test_channel_axis_gemm_follows_trans_b():
    refs = weights_by_name(sample("mlp"))
    assert _gemm_trans_b(refs["fc1.weight"]) == 1
    assert channel_axis(refs["fc1.weight"]) == 0
    assert _gemm_trans_b(refs["fc3.weight"]) == 0
    assert channel_axis(refs["fc3.weight"]) == 1


def _axis_of(model: onnx.ModelProto, name: str = "W"):
    return channel_axis(weights_by_name(model)[name])


def test_channel_axis_tiny_models():
    f = TensorProto.FLOAT
    w3 = np.ones((2, 3, 4), np.float32)
    batched = tiny_model(
        [helper.make_node("MatMul", ["x", "W"], ["y"])], [("x", f, [2, 5, 3])], [("y", f, None)], {"W": w3}
    )
    assert _axis_of(batched) == 2  # MatMul B: last axis whatever the rank

    w = np.ones((4, 4), np.float32)
    mixed = tiny_model(
        [
            helper.make_node("Gemm", ["x", "W"], ["a"], transB=1),
            helper.make_node("MatMul", ["x", "W"], ["b"]),
        ],
        [("x", f, [1, 4])],
        [("a", f, None), ("b", f, None)],
        {"W": w},
    )
    assert _axis_of(mixed) is None  # Gemm transB=1 says 0, MatMul B says 1

    gather1 = tiny_model(
        [helper.make_node("Gather", ["W", "i"], ["y"], axis=1)],
        [("i", TensorProto.INT64, [2])],
        [("y", f, None)],
        {"W": w},
    )
    assert _axis_of(gather1) is None

    conv_t = tiny_model(
        [helper.make_node("ConvTranspose", ["x", "W"], ["y"])],
        [("x", f, [1, 2, 5, 5])],
        [("y", f, None)],
        {"W": np.ones((2, 3, 3, 3), np.float32)},
    )
    assert _axis_of(conv_t) == 1

    vector = tiny_model(
        [helper.make_node("Add", ["x", "W"], ["y"])], [("x", f, [4])], [("y", f, None)], {"W": np.ones(4, np.float32)}
    )
    assert _axis_of(vector) is None

    unused = tiny_model([helper.make_node("Relu", ["x"], ["y"])], [("x", f, [4])], [("y", f, None)], {"W": w})
    assert weights_by_name(unused)["W"].consumers == []
    assert _axis_of(unused) is None


# --------------------------------------------------------------------------- GraphEditor


REPLACE_CASES = [
    ("mlp", "fc2.weight"),  # main-graph initializer
    ("mlp", "fc1.weight"),  # Gemm input
    ("shared_weight", "const_proj"),  # main-graph Constant node
    ("messy", "onnx::MatMul_101"),  # Constant node, opset 11
    ("subgraph", "then/W1"),  # initializer inside an If branch
    ("subgraph", "then/W2"),  # Constant node inside an If branch
    ("subgraph", "else/W2"),  # initializer in the other branch
    ("subgraph", "body/W_in"),  # initializer inside a Loop body
    ("subgraph", "loop_W_out"),  # main-graph initializer used only inside the Loop body
    ("fp16", "fc1.weight"),  # float16 weight, stored float16, Cast to FLOAT16
]


@pytest.mark.parametrize(("name", "weight"), REPLACE_CASES)
@pytest.mark.parametrize("builder", ["cast", "mul"])
def test_replace_one_weight_keeps_model_valid_and_outputs_identical(name, weight, builder):
    model = sample(name)
    feeds = feed_sets(name, model)
    before = [run(model, f) for f in feeds]
    ref = weights_by_name(model)[weight]
    values = ref.array()
    other_scopes = {s: len(g.node) for s, g in iter_graphs(model.graph) if s != ref.scope}

    editor = GraphEditor(model)
    if builder == "cast":
        target = ref.dtype

        def build(names, output, alloc):
            return [helper.make_node("Cast", [names[0]], [output], name=alloc.new(f"{output}_copy"), to=target)]

        stored = editor.replace(ref, {"copy": values}, build)
    else:
        stored = editor.replace(ref, {"copy": values, "one": np.ones(1, values.dtype)}, times_one_builder)
    editor.apply()

    onnx.checker.check_model(model, full_check=True)
    graph = graph_at(model, ref.scope)
    defs = producers(graph, weight)
    assert len(defs) == 1 and not defs[0].startswith(("initializer", "Constant")), defs
    for stored_name in stored:
        assert stored_name.startswith(f"{weight}__")
        kinds = producers(graph, stored_name)
        expected = "initializer" if ref.kind == "initializer" else "Constant"
        assert len(kinds) == 1 and kinds[0].startswith(expected), kinds
    # Consumers still read the weight by its original name; other graphs are untouched.
    for consumer in ref.consumers:
        assert consumer.node.input[consumer.input_index] == weight
    assert {s: len(g.node) for s, g in iter_graphs(model.graph) if s != ref.scope} == other_scopes
    after = [run(model, f) for f in feeds]
    for old, new in zip(before, after, strict=True):
        for a, b in zip(old, new, strict=True):
            np.testing.assert_array_equal(a, b)


def test_replace_every_weight_of_subgraph_model_in_one_pass():
    model = sample("subgraph")
    feeds = feed_sets("subgraph", model)
    before = [run(model, f) for f in feeds]
    refs = [r for r in find_weights(model) if r.is_float and r.elements > 1]
    assert len(refs) == 7
    editor = GraphEditor(model)
    for ref in refs:
        editor.replace(ref, {"copy": ref.array()}, copy_builder)
    editor.apply()
    onnx.checker.check_model(model, full_check=True)
    for ref in refs:
        graph = graph_at(model, ref.scope)
        assert len(producers(graph, ref.name)) == 1
        assert producers(graph, ref.name)[0].startswith("Cast")
    after = [run(model, f) for f in feeds]
    for old, new in zip(before, after, strict=True):
        for a, b in zip(old, new, strict=True):
            np.testing.assert_array_equal(a, b)
    # The editor's queues are empty after apply: applying again changes nothing.
    snapshot = model.SerializeToString()
    editor.apply()
    assert model.SerializeToString() == snapshot


def test_shared_weight_is_replaced_exactly_once():
    model = sample("shared_weight")
    feeds = feeds_for(model)
    before = run(model, feeds)
    refs = weights_by_name(model)
    editor = GraphEditor(model)
    for name in ("shared_proj", "tied_embedding"):
        editor.replace(refs[name], {"copy": refs[name].array()}, copy_builder)
    editor.apply()
    onnx.checker.check_model(model, full_check=True)
    for name in ("shared_proj", "tied_embedding"):
        assert len(producers(model.graph, name)) == 1, producers(model.graph, name)
        assert sum(t.name == f"{name}__copy" for t in model.graph.initializer) == 1
    nodes = {n.name: n for n in model.graph.node}
    assert nodes["MatMul_2"].input[1] == "shared_proj"
    assert nodes["MatMul_5"].input[1] == "shared_proj"
    assert nodes["Gather_1"].input[0] == "tied_embedding"
    assert nodes["Transpose_12"].input[0] == "tied_embedding"
    after = run(model, feeds)
    for a, b in zip(before, after, strict=True):
        np.testing.assert_array_equal(a, b)


def test_replace_never_reuses_an_existing_name():
    f = TensorProto.FLOAT
    w = np.arange(4, dtype=np.float32).reshape(2, 2)
    model = tiny_model(
        [
            helper.make_node("MatMul", ["x", "W"], ["W__copy"], name="W__copy_1"),
            helper.make_node("Relu", ["W__copy"], ["y"]),
        ],
        [("x", f, [1, 2])],
        [("y", f, [1, 2])],
        {"W": w},
    )
    feeds = {"x": np.array([[1.0, -2.0]], np.float32)}
    before = run(model, feeds)
    ref = weights_by_name(model)["W"]
    editor = GraphEditor(model)
    stored = editor.replace(ref, {"copy": w}, copy_builder)
    assert stored == ["W__copy_2"]  # "W__copy" is a tensor, "W__copy_1" a node name
    editor.apply()
    onnx.checker.check_model(model, full_check=True)
    np.testing.assert_array_equal(run(model, feeds)[0], before[0])


# --------------------------------------------------------------------------- NameAllocator


@pytest.mark.parametrize("name", ALL_SAMPLES)
def test_name_allocator_never_returns_an_existing_name(name):
    model = sample(name)
    existing = all_names(model)
    alloc = NameAllocator(model)
    handed_out = [alloc.new(base) for base in sorted(existing)]
    handed_out += [alloc.new(base) for base in sorted(existing)[:20]]  # again: still fresh
    assert not set(handed_out) & existing
    assert len(set(handed_out)) == len(handed_out)
    assert alloc.new("brand_new_name") == "brand_new_name"
    assert alloc.new("brand_new_name") == "brand_new_name_1"


def test_name_allocator_knows_sparse_initializer_names():
    f = TensorProto.FLOAT
    values = numpy_helper.from_array(np.array([1.0], np.float32), "W__q")
    indices = numpy_helper.from_array(np.array([0], np.int64), "W__q_idx")
    model = tiny_model(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        [("x", f, [1, 2])],
        [("y", f, [1, 2])],
        {"W": np.ones((2, 2), np.float32)},
    )
    model.graph.sparse_initializer.append(helper.make_sparse_tensor(values, indices, [4]))
    onnx.checker.check_model(model)
    assert NameAllocator(model).new("W__q") != "W__q"


def test_replacement_in_one_subgraph_does_not_leak_into_a_sibling_with_the_same_label():
    f = TensorProto.FLOAT

    def branch(tag: str, value: float) -> onnx.GraphProto:
        return helper.make_graph(
            [helper.make_node("MatMul", ["x", "W"], [f"{tag}_y"])],
            tag,
            [],
            [helper.make_tensor_value_info(f"{tag}_y", f, [1, 2])],
            initializer=[numpy_helper.from_array(np.full((2, 2), value, np.float32), "W")],
        )

    nodes = [
        helper.make_node(
            "If", ["c"], ["o0"], name="If_1", then_branch=branch("t0", 1.0), else_branch=branch("e0", 2.0)
        ),
        helper.make_node("If", ["c"], ["o1"], then_branch=branch("t1", 3.0), else_branch=branch("e1", 4.0)),
    ]
    model = tiny_model(nodes, [("x", f, [1, 2]), ("c", TensorProto.BOOL, [])], [("o0", f, [1, 2]), ("o1", f, [1, 2])])
    onnx.checker.check_model(model, full_check=True)
    feeds = {"x": np.ones((1, 2), np.float32), "c": np.array(False)}
    before = run(model, feeds)
    assert before[1].tolist() == [[8.0, 8.0]]
    first_else = next(r for r in find_weights(model) if r.array()[0, 0] == 2.0)  # If_1's else branch
    editor = GraphEditor(model)
    editor.replace(first_else, {"copy": first_else.array()}, copy_builder)
    editor.apply()
    after = run(model, feeds)
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_array_equal(after[1], before[1])
    scopes = [s for s, _ in iter_graphs(model.graph)]
    assert len(scopes) == len(set(scopes)), f"duplicate scopes {scopes}"


# --------------------------------------------------------------------------- constants_to_initializers


def test_constants_to_initializers_moves_only_large_float_constants_on_messy():
    model = sample("messy")
    feeds = feeds_for(model)
    before = run(model, feeds)
    originals = {r.name: r.array() for r in find_weights(model) if r.kind == "constant"}
    expected = sorted(n for n, a in originals.items() if np.issubdtype(a.dtype, np.floating) and a.size >= 16384)
    assert expected == ["onnx::MatMul_101", "onnx::MatMul_103"]
    moved = constants_to_initializers(model, min_elements=16384)
    assert sorted(moved) == expected
    onnx.checker.check_model(model, full_check=True)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert sorted(inits) == expected
    for name in expected:
        np.testing.assert_array_equal(inits[name], originals[name])
        assert producers(model.graph, name) == [f"initializer {name}"]
    still_constant = {n.output[0] for n in model.graph.node if n.op_type == "Constant"}
    assert still_constant == set(originals) - set(expected)  # small floats and int64 shape constants stay
    after = run(model, feeds)
    for a, b in zip(before, after, strict=True):
        np.testing.assert_array_equal(a, b)


def test_constants_to_initializers_threshold_dtype_and_scope():
    f = TensorProto.FLOAT
    nodes = [
        helper.make_node("Constant", [], ["six"], value=numpy_helper.from_array(np.ones((2, 3), np.float32))),
        helper.make_node("Constant", [], ["five"], value=numpy_helper.from_array(np.ones(5, np.float32))),
        helper.make_node("Constant", [], ["ints"], value=numpy_helper.from_array(np.arange(10, dtype=np.int64))),
        helper.make_node("Constant", [], ["half"], value=numpy_helper.from_array(np.ones(8, np.float16))),
        helper.make_node("Constant", [], ["scalar"], value_float=1.5),
        helper.make_node("Identity", ["six"], ["o1"]),
        helper.make_node("Identity", ["five"], ["o2"]),
        helper.make_node("Identity", ["ints"], ["o3"]),
        helper.make_node("Identity", ["half"], ["o4"]),
        helper.make_node("Identity", ["scalar"], ["o5"]),
    ]
    kinds = [(f, [2, 3]), (f, [5]), (TensorProto.INT64, [10]), (TensorProto.FLOAT16, [8]), (f, [])]
    outs = [(f"o{k}", t, shape) for k, (t, shape) in enumerate(kinds, 1)]
    model = tiny_model(nodes, [], outs)
    onnx.checker.check_model(model, full_check=True)
    moved = constants_to_initializers(model, min_elements=6)
    assert sorted(moved) == ["half", "six"]
    assert sorted(t.name for t in model.graph.initializer) == ["half", "six"]
    assert {n.output[0] for n in model.graph.node if n.op_type == "Constant"} == {"five", "ints", "scalar"}
    onnx.checker.check_model(model, full_check=True)
    assert constants_to_initializers(model, min_elements=6) == []  # nothing left to move

    sub = sample("subgraph")
    moved = constants_to_initializers(sub, min_elements=1)
    assert moved == []  # main-graph constants are int64/bool; branch Constants are never touched
    then_branch = graph_at(sub, "If_1/then_branch")
    assert any(n.op_type == "Constant" and n.output[0] == "then/W2" for n in then_branch.node)


# --------------------------------------------------------------------------- quantized_ops


@pytest.mark.parametrize("name", ALL_SAMPLES)
def test_samples_are_not_quantized(name):
    assert quantized_ops(sample(name)) == []


def test_quantized_ops_found_in_subgraphs_sorted_and_unique():
    f = TensorProto.FLOAT
    q = numpy_helper.from_array(np.array([1, 2], np.int8), "q")
    s = numpy_helper.from_array(np.array(0.5, np.float32), "s")
    branch = helper.make_graph(
        [
            helper.make_node("DequantizeLinear", ["q", "s"], ["b"]),
            helper.make_node("DequantizeLinear", ["q", "s"], ["b2"]),
        ],
        "branch",
        [],
        [helper.make_tensor_value_info("b", f, [2])],
        initializer=[q, s],
    )
    nodes = [
        helper.make_node("If", ["c"], ["y0"], then_branch=branch, else_branch=branch),
        helper.make_node("MatMulInteger", ["a", "a2"], ["y1"]),
    ]
    model = tiny_model(
        nodes,
        [("c", TensorProto.BOOL, []), ("a", TensorProto.UINT8, [1, 2]), ("a2", TensorProto.UINT8, [2, 1])],
        [("y0", f, [2])],
    )
    assert quantized_ops(model) == ["DequantizeLinear", "MatMulInteger"]

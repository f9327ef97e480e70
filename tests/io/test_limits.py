"""shrinkray.io.limits: settings, what each limit refuses, and the structural check of graphs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx
import pytest
from hostile.build_corpus import nested_if_bytes
from onnx import TensorProto, helper, numpy_helper

from shrinkray.errors import InvalidModelError, LimitExceededError, OptionError
from shrinkray.io.files import load
from shrinkray.io.limits import Limits, check_graph_structure, check_model, walk_graphs
from shrinkray.methods import all_methods
from shrinkray.pipeline.inspect import inspect_model

SAMPLES = Path(__file__).resolve().parents[2] / "sample_models"
SAMPLE_NAMES = ["mlp", "cnn", "transformer", "rnn", "subgraph", "fp16", "shared_weight", "tree", "messy"]
F = TensorProto.FLOAT


def model_of(nodes, inputs=None, outputs=None, initializers=(), value_info=()) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        inputs if inputs is not None else [helper.make_tensor_value_info("x", F, [2])],
        outputs if outputs is not None else [helper.make_tensor_value_info("y", F, [2])],
        list(initializers),
        value_info=list(value_info),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def branch(nodes, out: str) -> onnx.GraphProto:
    return helper.make_graph(nodes, f"branch_{out}", [], [helper.make_tensor_value_info(out, F, [2])])


# --------------------------------------------------------------------------- settings


def test_defaults():
    limits = Limits()
    assert limits.max_file_bytes == 4 * 2**30
    assert limits.max_tensor_bytes == 4 * 2**30
    assert limits.max_nodes == 200_000
    assert limits.max_graph_depth == 16
    assert limits.max_declared_elements == 2**31
    assert limits.max_unpacked_bytes == 8 * 2**30
    assert limits.max_zip_files == 4096
    assert limits.max_compression_ratio == 100
    assert limits.max_run_seconds == 120


def test_every_limit_has_an_environment_variable():
    names = {f.name: Limits.env_name(f.name) for f in dataclasses.fields(Limits)}
    assert names["max_nodes"] == "SHRINKRAY_MAX_NODES"
    assert all(env.startswith(("SHRINKRAY_MAX_", "SHRINKRAY_MIN_")) for env in names.values())
    env = {v: "7" for v in names.values()}
    limits = Limits.from_env(env)
    assert all(getattr(limits, f) == 7 for f in names)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("200000", 200_000), ("200_000", 200_000), ("200k", 200_000), ("4GiB", 4 * 2**30), ("512 MiB", 512 * 2**20),
     ("2GB", 2 * 10**9), ("1e6", 10**6), ("1.5k", 1500)],
)  # fmt: skip
def test_from_env_parses_numbers_and_units(raw, expected):
    assert Limits.from_env({"SHRINKRAY_MAX_NODES": raw}).max_nodes == expected


def test_from_env_floats_and_overrides():
    limits = Limits.from_env({"SHRINKRAY_MAX_COMPRESSION_RATIO": "12.5", "SHRINKRAY_MAX_NODES": "5"}, max_nodes=9)
    assert limits.max_compression_ratio == 12.5
    assert limits.max_nodes == 9
    assert Limits.from_env({"SHRINKRAY_MAX_NODES": "  "}).max_nodes == 200_000  # blank means unset


@pytest.mark.parametrize("raw", ["abc", "-5", "0", "12 parsecs", "nan", "inf"])
def test_from_env_refuses_bad_values_by_name(raw):
    with pytest.raises(OptionError) as excinfo:
        Limits.from_env({"SHRINKRAY_MAX_NODES": raw})
    assert "SHRINKRAY_MAX_NODES" in str(excinfo.value)


def test_limits_must_be_positive():
    with pytest.raises(OptionError, match="max_nodes"):
        Limits(max_nodes=0)
    with pytest.raises(OptionError, match="max_file_bytes"):
        Limits(max_file_bytes=-1)


def test_load_reads_the_environment(monkeypatch):
    monkeypatch.setenv("SHRINKRAY_MAX_NODES", "3")
    with pytest.raises(LimitExceededError) as excinfo:
        load(SAMPLES / "mlp.onnx")
    assert "exceeds max_nodes=3 (set SHRINKRAY_MAX_NODES)" in str(excinfo.value)
    monkeypatch.setenv("SHRINKRAY_MAX_NODES", "oops")
    with pytest.raises(OptionError, match="SHRINKRAY_MAX_NODES"):
        load(SAMPLES / "mlp.onnx")


def test_explicit_max_file_bytes_wins_over_limits():
    data = (SAMPLES / "mlp.onnx").read_bytes()
    with pytest.raises(LimitExceededError, match="max_file_bytes=1000"):
        load(data, limits=Limits(), max_file_bytes=1000)
    load(data, limits=Limits(max_file_bytes=1000), max_file_bytes=len(data))


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(Limits)])
def test_every_message_names_the_limit_and_its_setting(name):
    text = str(Limits().exceeded(name, "Too much"))
    assert f"exceeds {name}=" in text and f"set SHRINKRAY_{name.upper()}" in text
    assert "\n" not in text


def test_setting_shows_bytes_readably():
    assert Limits(max_file_bytes=2**30).setting("max_file_bytes") == (
        "max_file_bytes=1073741824 (1.00 GiB; set SHRINKRAY_MAX_FILE_BYTES)"
    )
    assert Limits().setting("max_nodes") == "max_nodes=200000 (set SHRINKRAY_MAX_NODES)"


# --------------------------------------------------------------------------- check_model


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_every_sample_is_within_the_defaults(name):
    model = onnx.load(str(SAMPLES / f"{name}.onnx"))
    stats = check_model(model, Limits())
    check_graph_structure(model)
    assert stats.nodes == inspect_model(model).node_count
    assert stats.external_tensors == []


def test_stats_of_the_subgraph_sample():
    stats = check_model(onnx.load(str(SAMPLES / "subgraph.onnx")), Limits())
    assert stats.graphs == 4 and stats.depth == 1
    assert stats.inline_tensor_bytes > 500_000


def test_node_limit_counts_subgraphs():
    model = onnx.load(str(SAMPLES / "subgraph.onnx"))
    total = inspect_model(model).node_count
    check_model(model, Limits(max_nodes=total))
    with pytest.raises(LimitExceededError, match=f"max_nodes={total - 1} "):
        check_model(model, Limits(max_nodes=total - 1))


def test_depth_limit_and_a_deep_walk_without_recursion():
    model = onnx.ModelProto.FromString(nested_if_bytes(28))  # as deep as protobuf parses
    stats = check_model(model, Limits(max_graph_depth=100))
    assert stats.depth == 28
    check_graph_structure(model)
    assert len(walk_graphs(model)) == 1 + 28 + 28  # main, the chain of then-branches, one else-branch per level
    with pytest.raises(LimitExceededError) as excinfo:
        check_model(model, Limits(max_graph_depth=27))
    assert "nested at least 28 levels deep" in str(excinfo.value)
    assert "max_graph_depth=27 (set SHRINKRAY_MAX_GRAPH_DEPTH)" in str(excinfo.value)


@pytest.mark.parametrize("dims", [[2**62, 2**62], [10**12], [2**31, 2], [-1, 10**10]])
def test_declared_elements_of_inputs_use_python_ints(dims):
    shape = [d if d >= 0 else "batch" for d in dims]
    model = model_of([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", F, shape)])
    with pytest.raises(LimitExceededError) as excinfo:
        check_model(model, Limits())
    assert "The input 'x' in the main graph declares shape" in str(excinfo.value)
    assert "max_declared_elements=2147483648" in str(excinfo.value)


def test_symbolic_dims_count_as_one():
    value = helper.make_tensor_value_info("x", F, ["batch", "seq", 1000])
    check_model(model_of([helper.make_node("Relu", ["x"], ["y"])], [value]), Limits(max_declared_elements=1000))


@pytest.mark.parametrize("where", ["output", "value_info"])
def test_declared_elements_of_outputs_and_value_info(where):
    big = helper.make_tensor_value_info("y" if where == "output" else "h", F, [10**6, 10**6])
    nodes = [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    model = model_of(nodes, outputs=[big] if where == "output" else None, value_info=[big] if where != "output" else ())
    with pytest.raises(LimitExceededError, match=f"The {where} "):
        check_model(model, Limits())


def test_declared_elements_of_constants_in_subgraphs():
    const = helper.make_node(
        "Constant", [], ["c"], value=TensorProto(name="cv", data_type=F, dims=[10**7, 10**7], raw_data=b"")
    )
    inner = branch([const, helper.make_node("Add", ["x", "c"], ["b"])], "b")
    plain = branch([helper.make_node("Relu", ["x"], ["b"])], "b")
    model = model_of([helper.make_node("If", ["cond"], ["y"], name="iffy", then_branch=inner, else_branch=plain)],
                     [helper.make_tensor_value_info("x", F, [2]), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])])  # fmt: skip
    with pytest.raises(LimitExceededError) as excinfo:
        check_model(model, Limits())
    assert "The Constant tensor 'cv' in node 'iffy' (If)/then_branch declares shape [10000000, 10000000]" in str(
        excinfo.value
    )


def test_sparse_initializer_dims_are_limited():
    model = model_of([helper.make_node("Relu", ["x"], ["y"])])
    sparse = model.graph.sparse_initializer.add()
    sparse.values.CopyFrom(numpy_helper.from_array(np.ones(1, np.float32), "s"))
    sparse.indices.CopyFrom(numpy_helper.from_array(np.zeros(1, np.int64), "s_idx"))
    sparse.dims.extend([10**7, 10**7])
    with pytest.raises(LimitExceededError, match="sparse initializer 's'"):
        check_model(model, Limits())


def test_tensor_bytes_count_typed_fields_without_decoding():
    b = helper.make_tensor("b", F, [1000], np.zeros(1000, np.float32).tolist())  # float_data, not raw
    model = model_of([helper.make_node("Add", ["x", "b"], ["y"])], [helper.make_tensor_value_info("x", F, [1000])],
                     [helper.make_tensor_value_info("y", F, [1000])], [b])  # fmt: skip
    assert check_model(model, Limits()).inline_tensor_bytes == 4000
    with pytest.raises(LimitExceededError, match="max_tensor_bytes=3999"):
        check_model(model, Limits(max_tensor_bytes=3999))


@pytest.mark.parametrize(
    ("tensor", "fragment"),
    [
        (TensorProto(name="w", data_type=F, dims=[3], raw_data=b"\0" * 8), "declares shape [3] (3 float values, 12 bytes) but holds 8"),
        (TensorProto(name="w", data_type=F, dims=[3], float_data=[1.0, 2.0]), "declares shape [3] (3 float values) but holds 2 in float_data"),
        (TensorProto(name="w", data_type=F, dims=[2]), "but holds 0 in float_data"),
        (TensorProto(name="w", data_type=0, dims=[2], raw_data=b"\0" * 8), "unknown data type (0)"),
        (TensorProto(name="w", data_type=1234, dims=[2], raw_data=b"\0" * 8), "unknown data type (1234)"),
        (TensorProto(name="w", data_type=F, dims=[2, -1], raw_data=b""), "declares a negative dimension [2, -1]"),
    ],
)  # fmt: skip
def test_damaged_tensors_are_named(tensor, fragment):
    model = model_of([helper.make_node("Add", ["x", "w"], ["y"])], initializers=[tensor])
    with pytest.raises(InvalidModelError) as excinfo:
        check_model(model, Limits())
    assert "The initializer 'w' in the main graph" in str(excinfo.value) and fragment in str(excinfo.value)


def test_packed_and_empty_tensors_are_fine():
    int4 = TensorProto(name="q", data_type=TensorProto.INT4, dims=[5], raw_data=b"\0" * 3)
    empty = TensorProto(name="e", data_type=F, dims=[0, 4])
    model = model_of([helper.make_node("Relu", ["x"], ["y"])], initializers=[int4, empty])
    check_model(model, Limits())


def test_unknown_input_type_is_named():
    value = helper.make_tensor_value_info("x", F, [2])
    value.type.tensor_type.elem_type = 777
    with pytest.raises(InvalidModelError, match="The input 'x' in the main graph has an unknown data type"):
        check_model(model_of([helper.make_node("Relu", ["x"], ["y"])], [value]), Limits())


@pytest.mark.parametrize("field", ["op_type", "domain", "input", "producer", "dim_param", "attribute"])
def test_text_that_is_not_utf8_is_refused(field):
    model = model_of([helper.make_node("Relu", ["x"], ["y"], alpha_name=1)],
                     [helper.make_tensor_value_info("x", F, ["batch"])])  # fmt: skip
    model.producer_name = "prod"
    data = model.SerializeToString()
    marker = {"op_type": b"Relu", "domain": None, "input": b"\n\x01x", "producer": b"prod", "dim_param": b"batch",
              "attribute": b"alpha_name"}[field]  # fmt: skip
    if field == "domain":
        model.graph.node[0].domain = "dom"
        data, marker = model.SerializeToString(), b"dom"
    broken = data.replace(marker, marker[:-1] + b"\xff")
    assert broken != data
    with pytest.raises(InvalidModelError, match="not valid UTF-8"):
        load(broken)


# --------------------------------------------------------------------------- structure


def test_cycle_is_named_with_nodes_and_tensors():
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="start"),
        helper.make_node("Add", ["a", "d"], ["b"], name="n1"),
        helper.make_node("Mul", ["b", "b"], ["c"], name="n2"),
        helper.make_node("Neg", ["c"], ["d"], name="n3"),
        helper.make_node("Identity", ["d"], ["y"], name="end"),
    ]
    with pytest.raises(InvalidModelError) as excinfo:
        check_graph_structure(model_of(nodes))
    assert str(excinfo.value).startswith(
        "The main graph has a cycle: node 'n1' (Add) feeds 'b' to node 'n2' (Mul), which feeds 'c' to "
        "node 'n3' (Neg), which feeds 'd' to node 'n1' (Add)."
    )


def test_self_loop():
    with pytest.raises(InvalidModelError, match="node 'me' \\(Add\\) feeds 'y' to node 'me' \\(Add\\)"):
        check_graph_structure(model_of([helper.make_node("Add", ["x", "y"], ["y"], name="me")]))


def test_cycle_through_a_subgraphs_outer_scope_read():
    inner = branch([helper.make_node("Identity", ["late"], ["b"])], "b")  # reads 'late' from the outer graph
    nodes = [
        helper.make_node("If", ["cond"], ["early"], name="iffy", then_branch=inner, else_branch=inner),
        helper.make_node("Relu", ["early"], ["late"], name="after"),
        helper.make_node("Identity", ["late"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info("x", F, [2]), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])]
    with pytest.raises(InvalidModelError, match="cycle: node 'iffy' \\(If\\) feeds 'early' to node 'after'"):
        check_graph_structure(model_of(nodes, inputs))


def test_cycle_inside_a_subgraph_names_its_scope():
    inner = branch([helper.make_node("Add", ["x", "q"], ["p"], name="p"), helper.make_node("Relu", ["p"], ["q"], name="q"),
                    helper.make_node("Identity", ["q"], ["b"])], "b")  # fmt: skip
    plain = branch([helper.make_node("Relu", ["x"], ["b"])], "b")
    nodes = [helper.make_node("If", ["cond"], ["y"], name="iffy", then_branch=inner, else_branch=plain)]
    inputs = [helper.make_tensor_value_info("x", F, [2]), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])]
    with pytest.raises(InvalidModelError, match="The graph in node 'iffy' \\(If\\)/then_branch has a cycle"):
        check_graph_structure(model_of(nodes, inputs))


def test_outer_scope_names_are_not_dangling_but_unknown_ones_are():
    good = branch([helper.make_node("Relu", ["x"], ["b"])], "b")
    bad = branch([helper.make_node("Relu", ["nowhere"], ["b2"], name="lost")], "b2")
    inputs = [helper.make_tensor_value_info("x", F, [2]), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])]
    check_graph_structure(model_of([helper.make_node("If", ["cond"], ["y"], then_branch=good, else_branch=good)], inputs))
    model = model_of([helper.make_node("If", ["cond"], ["y"], name="iffy", then_branch=good, else_branch=bad)], inputs)
    with pytest.raises(InvalidModelError) as excinfo:
        check_graph_structure(model)
    assert str(excinfo.value).startswith(
        "Node 'lost' (Relu) in node 'iffy' (If)/else_branch reads 'nowhere', which no node, graph input or initializer provides"
    )


def test_names_from_a_sibling_subgraph_are_not_visible():
    producer = branch([helper.make_node("Relu", ["x"], ["inner_only"]), helper.make_node("Identity", ["inner_only"], ["b"])], "b")  # fmt: skip
    reader = branch([helper.make_node("Identity", ["inner_only"], ["b3"], name="peek")], "b3")
    inputs = [helper.make_tensor_value_info("x", F, [2]), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])]
    model = model_of([helper.make_node("If", ["cond"], ["y"], then_branch=producer, else_branch=reader)], inputs)
    with pytest.raises(InvalidModelError, match="'peek' .* reads 'inner_only'"):
        check_graph_structure(model)


def test_dangling_graph_output():
    with pytest.raises(InvalidModelError, match="Graph output 'y' in the main graph is not produced"):
        check_graph_structure(model_of([helper.make_node("Relu", ["x"], ["z"])]))


@pytest.mark.parametrize(
    ("nodes", "extra_inputs", "inits", "fragment"),
    [
        ([helper.make_node("Relu", ["x"], ["x"], name="r")], [], [], "Tensor 'x' in the main graph is produced twice: by a graph input and by node 'r' (Relu)"),
        ([helper.make_node("Relu", ["x"], ["w"], name="r"), helper.make_node("Identity", ["w"], ["y"])], [], ["w"], "produced twice: by an initializer and by node 'r'"),
        ([helper.make_node("Relu", ["x"], ["y"])], ["x"], [], "Graph input 'x' in the main graph is declared 2 times"),
        ([helper.make_node("Add", ["x", "w"], ["y"])], [], ["w", "w"], "Initializer 'w' in the main graph is defined 2 times"),
    ],
)  # fmt: skip
def test_duplicate_names(nodes, extra_inputs, inits, fragment):
    inputs = [helper.make_tensor_value_info("x", F, [2])] + [helper.make_tensor_value_info(n, F, [2]) for n in extra_inputs]
    initializers = [numpy_helper.from_array(np.ones(2, np.float32), n) for n in inits]
    with pytest.raises(InvalidModelError) as excinfo:
        check_graph_structure(model_of(nodes, inputs, initializers=initializers))
    assert fragment in str(excinfo.value)


def test_initializer_listed_as_input_is_fine():
    w = numpy_helper.from_array(np.ones(2, np.float32), "w")
    inputs = [helper.make_tensor_value_info("x", F, [2]), helper.make_tensor_value_info("w", F, [2])]
    check_graph_structure(model_of([helper.make_node("Add", ["x", "w"], ["y"])], inputs, initializers=[w]))


def test_unsorted_but_acyclic_graph_is_left_to_the_checker():
    nodes = [helper.make_node("Relu", ["a"], ["y"]), helper.make_node("Neg", ["x"], ["a"])]
    check_graph_structure(model_of(nodes))


def test_optional_empty_inputs_are_not_dangling():
    check_graph_structure(model_of([helper.make_node("Clip", ["x", "", ""], ["y"])]))


def test_names_in_messages_stay_on_one_line():
    nodes = [helper.make_node("Add", ["x", "evil\nname\x1b[31m" + "z" * 500], ["y"], name="n\r\nm")]
    with pytest.raises(InvalidModelError) as excinfo:
        check_graph_structure(model_of(nodes))
    text = str(excinfo.value)
    assert "\n" not in text and "\r" not in text and "\x1b" not in text
    assert "'n\\r\\nm'" in text and "…" in text and len(text) < 400


def test_planned_memory_beyond_the_limit_is_refused_before_any_work(monkeypatch):
    import shrinkray
    from shrinkray.errors import LimitExceededError
    from shrinkray.io.limits import SHRINK_MEMORY_FACTOR, check_memory
    from shrinkray.measure.results import CompareSettings
    from shrinkray.pipeline.compare import compare

    monkeypatch.setenv("SHRINKRAY_MAX_MEMORY_BYTES", "1MiB")
    loaded = shrinkray.load(SAMPLES / "mlp.onnx")  # ~1 MiB of tensors: 5 MiB planned for one variant
    with pytest.raises(LimitExceededError) as info:
        shrinkray.shrink(loaded, "float16")
    message = str(info.value)
    assert "max_memory_bytes=1048576" in message and "SHRINKRAY_MAX_MEMORY_BYTES" in message
    with pytest.raises(LimitExceededError, match=f"{len([s for s in all_methods() if s.in_default_set])} variant"):
        compare(loaded, CompareSettings(latency=False))
    monkeypatch.setenv("SHRINKRAY_MAX_MEMORY_BYTES", "1GiB")
    check_memory(2**20, variants=4)  # 1 MiB of tensors, 4 variants: well inside 1 GiB
    assert SHRINK_MEMORY_FACTOR >= 4


# --------------------------------------------------------------------------- counts ONNX Runtime is quadratic in


def _calls_model(levels: int, calls_per_level: int = 2, body_nodes: int = 1) -> onnx.ModelProto:
    """f0 holds ``body_nodes`` Relus; f1..fK each call the level below ``calls_per_level`` times in a chain."""
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    relus = [helper.make_node("Relu", ["x" if k == 0 else f"r{k}"], [f"r{k + 1}" if k < body_nodes - 1 else "y"])
             for k in range(body_nodes)]  # fmt: skip
    functions = [helper.make_function("local", "f0", ["x"], ["y"], relus, opsets)]
    for level in range(1, levels + 1):
        names = ["x", *[f"t{k}" for k in range(calls_per_level - 1)], "y"]
        body = [helper.make_node(f"f{level - 1}", [names[k]], [names[k + 1]], domain="local")
                for k in range(calls_per_level)]  # fmt: skip
        functions.append(helper.make_function("local", f"f{level}", ["x"], ["y"], body, opsets))
    graph = helper.make_graph(
        [helper.make_node(f"f{levels}", ["x"], ["y"], domain="local")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )  # fmt: skip
    return helper.make_model(graph, functions=functions, opset_imports=opsets, ir_version=10)


@pytest.mark.parametrize(("levels", "per", "body", "nodes", "calls"),
                         [(0, 2, 1, 1, 1), (1, 2, 1, 2, 3), (3, 2, 1, 8, 15), (2, 3, 4, 36, 13), (40, 2, 1, 2**40, 2**41 - 1)])  # fmt: skip
def test_inlined_size_counts_without_expanding(levels, per, body, nodes, calls):
    from shrinkray.io.limits import inlined_size

    assert inlined_size(_calls_model(levels, per, body)) == (nodes, calls)


def test_inlined_size_saturates_instead_of_growing_without_end():
    from shrinkray.io.limits import inlined_size

    nodes, calls = inlined_size(_calls_model(200))
    assert nodes == calls == 10**15


def test_calls_inside_subgraphs_count():
    from shrinkray.io.limits import inlined_size

    model = _calls_model(2)
    call = model.graph.node[0]
    branch = helper.make_graph([helper.make_node("f2", ["x"], ["b"], domain="local")], "then", [],
                               [helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])])  # fmt: skip
    model.graph.node.insert(0, helper.make_node("If", ["c"], ["z"], then_branch=branch, else_branch=branch))
    assert call.op_type == "f2"
    assert inlined_size(model) == (1 + 4 + 4 + 4, 7 + 7 + 7)  # the If, both branches, the call beside it


def test_function_calls_and_inlined_nodes_are_limited():
    with pytest.raises(LimitExceededError, match=r"call each other 15 times once inlined \(8 nodes\), which exceeds "
                       r"max_function_calls=10 \(set SHRINKRAY_MAX_FUNCTION_CALLS\)"):  # fmt: skip
        check_model(_calls_model(3), Limits(max_function_calls=10))
    with pytest.raises(LimitExceededError, match=r"The model has 16 nodes once its local functions are inlined, "
                       "which exceeds max_nodes=12"):  # 10 stored  # fmt: skip
        check_model(_calls_model(4), Limits(max_nodes=12))
    check_model(_calls_model(3), Limits(max_nodes=8, max_function_calls=15))


def test_recursive_functions_are_refused():
    model = _calls_model(1)
    model.functions[0].node[0].CopyFrom(helper.make_node("f1", ["x"], ["y"], domain="local"))
    with pytest.raises(InvalidModelError, match="'local::f0' calls itself \\(through 'local::f1'\\)"):
        check_model(model)
    model.functions[0].node[0].CopyFrom(helper.make_node("f0", ["x"], ["y"], domain="local"))
    with pytest.raises(InvalidModelError, match="'local::f0' calls itself\\. ONNX functions cannot be recursive"):
        check_model(model)


@pytest.mark.parametrize(("field", "message"), [
    ("max_graph_inputs", "The main graph has 6 inputs, which exceeds max_graph_inputs=5 (set SHRINKRAY_MAX_GRAPH_INPUTS)"),
    ("max_graph_outputs", "The main graph has 6 outputs, which exceeds max_graph_outputs=5 (set SHRINKRAY_MAX_GRAPH_OUTPUTS)"),
    ("max_initializers", "The model has at least 6 initializers, which exceeds max_initializers=5 (set SHRINKRAY_MAX_INITIALIZERS)"),
])  # fmt: skip
def test_graph_inputs_outputs_and_initializers_are_limited(field, message):
    values = [helper.make_tensor_value_info(f"v{k}", TensorProto.FLOAT, [2]) for k in range(6)]
    nodes = [helper.make_node("Relu", [f"v{k}"], [f"o{k}"]) for k in range(6)]
    outputs = [helper.make_tensor_value_info(f"o{k}", TensorProto.FLOAT, [2]) for k in range(6)]
    inits = [numpy_helper.from_array(np.zeros(2, np.float32), f"i{k}") for k in range(6)]
    model = helper.make_model(helper.make_graph(nodes, "g", values, outputs, inits), ir_version=10,
                              opset_imports=[helper.make_opsetid("", 17)])  # fmt: skip
    check_model(model, Limits(**{field: 6}))
    with pytest.raises(LimitExceededError) as excinfo:
        check_model(model, Limits(**{field: 5}))
    assert message in str(excinfo.value)
    assert "quadratic" not in str(excinfo.value) and "square" in str(excinfo.value)

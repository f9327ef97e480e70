"""Fuzzing the loader and the inspector: any mutation gives a clean error or a valid result.

Mutations of small valid models (bit flips, truncation, inserted and deleted
bytes, edits of protobuf fields) go through ``load`` then ``inspect``; the
only exception allowed is a ShrinkRayError. Archives are fuzzed through
``load_zip`` the same way. Each test runs a bounded number of examples
(``SHRINKRAY_FUZZ_EXAMPLES``, default 150) with no deadline, so CI stays fast
and deterministic in cost; failing inputs are printed for reproduction.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import onnx
from hostile.build_corpus import external_model_bytes, make_zip
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from shrinkray.errors import ShrinkRayError
from shrinkray.io.archive import load_zip
from shrinkray.io.files import load
from shrinkray.io.limits import Limits
from shrinkray.pipeline.inspect import inspect_model

SAMPLES = Path(__file__).resolve().parents[2] / "sample_models"
EXAMPLES = int(os.environ.get("SHRINKRAY_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
F = TensorProto.FLOAT
#: Low enough that a mutated dim or count is refused quickly instead of costing memory.
LIMITS = Limits(max_declared_elements=2**24, max_tensor_bytes=2**26, max_nodes=5000)


# --------------------------------------------------------------------------- valid models to start from


def tiny_mlp() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
            helper.make_node("Add", ["h", "b"], ["hb"], name="add"),
            helper.make_node("Relu", ["hb"], ["y"], name="relu"),
        ],
        "mlp",
        [helper.make_tensor_value_info("x", F, ["batch", 4])],
        [helper.make_tensor_value_info("y", F, ["batch", 8])],
        [
            numpy_helper.from_array(rng.standard_normal((4, 8)).astype(np.float32), "w"),
            helper.make_tensor("b", F, [8], rng.standard_normal(8).astype(np.float32).tolist()),  # float_data
        ],
        value_info=[helper.make_tensor_value_info("h", F, ["batch", 8])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    helper.set_model_props(model, {"author": "fuzz"})
    return model


def nested() -> onnx.ModelProto:
    """If whose branches hold a Constant and an initializer and read outer names; a Loop with a body."""

    def branch(k: int) -> onnx.GraphProto:
        return helper.make_graph(
            [
                helper.make_node("Constant", [], [f"c{k}"], value=helper.make_tensor(f"cv{k}", F, [4], [1, 2, 3, 4])),
                helper.make_node("Mul", ["x", f"c{k}"], [f"m{k}"]),
                helper.make_node("Add", [f"m{k}", f"bi{k}"], [f"o{k}"]),
            ],
            f"branch{k}",
            [],
            [helper.make_tensor_value_info(f"o{k}", F, [4])],
            [numpy_helper.from_array(np.full(4, k, np.float32), f"bi{k}")],
        )

    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["v_in", "x"], ["v_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", F, [4]),
        ],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), helper.make_tensor_value_info("v_out", F, [4])],
    )
    graph = helper.make_graph(
        [
            helper.make_node("If", ["c"], ["yi"], name="if", then_branch=branch(1), else_branch=branch(2)),
            helper.make_node("Constant", [], ["n"], value=numpy_helper.from_array(np.array(3, np.int64))),
            helper.make_node("Loop", ["n", "c", "yi"], ["y"], name="loop", body=body),
        ],
        "main",
        [helper.make_tensor_value_info("x", F, [4]), helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", F, [4])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def quantized() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["xq", "wq", "", "zp"], ["acc"], name="mmi")],
        "q",
        [helper.make_tensor_value_info("xq", TensorProto.UINT8, [1, 4])],
        [helper.make_tensor_value_info("acc", TensorProto.INT32, [1, 3])],
        [
            helper.make_tensor("wq", TensorProto.UINT8, [4, 3], list(range(12))),  # int32_data
            helper.make_tensor("zp", TensorProto.UINT8, [], [7]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


@functools.cache
def bases() -> list[bytes]:
    models = [tiny_mlp(), nested(), quantized()]
    blobs = [m.SerializeToString() for m in models]
    blobs.append((SAMPLES / "tree.onnx").read_bytes())  # ai.onnx.ml attributes of every kind
    blobs.append(external_model_bytes()[0])  # external-data references
    return blobs


def check_load_and_inspect(data: bytes) -> None:
    """The property: a clean ShrinkRayError, or a model that inspects and serialises to JSON."""
    try:
        loaded = load(data, limits=LIMITS)
    except ShrinkRayError as exc:
        assert "\n" not in str(exc)
        return
    summary = inspect_model(loaded)
    json.dumps(summary.to_dict())


# --------------------------------------------------------------------------- byte-level mutations

base_index = st.integers(min_value=0, max_value=4)


@FUZZ
@given(base_index, st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 7)), min_size=1, max_size=8))
def test_bit_flips(index, flips):
    data = bytearray(bases()[index])
    for where, bit in flips:
        data[int(where * len(data))] ^= 1 << bit
    check_load_and_inspect(bytes(data))


@FUZZ
@given(base_index, st.floats(0, 1, exclude_max=True))
def test_truncation(index, where):
    data = bases()[index]
    check_load_and_inspect(data[: int(where * len(data))])


@FUZZ
@given(base_index, st.floats(0, 1), st.binary(min_size=0, max_size=16), st.integers(0, 16))
def test_insert_and_delete_bytes(index, where, inserted, deleted):
    data = bases()[index]
    at = int(where * len(data))
    check_load_and_inspect(data[:at] + inserted + data[at + deleted :])


# --------------------------------------------------------------------------- protobuf field edits

names = st.sampled_from(["x", "y", "w", "h", "c", "yi", "n", "o1", "ghost", ""])
text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
big_ints = st.one_of(st.integers(-3, 10), st.sampled_from([2**31, 2**40, 2**62, -(2**62), 10**12]))


def _all_of(model: onnx.ModelProto):
    """Graphs, nodes, tensors and value infos of the model (subgraphs included)."""
    graphs, pending = [], [model.graph]
    while pending:
        g = pending.pop()
        graphs.append(g)
        for node in g.node:
            for attr in node.attribute:
                if attr.HasField("g"):
                    pending.append(attr.g)
                pending.extend(attr.graphs)
    nodes = [n for g in graphs for n in g.node]
    tensors = [t for g in graphs for t in g.initializer]
    tensors += [a.t for n in nodes for a in n.attribute if a.HasField("t")]
    values = [v for g in graphs for v in [*g.input, *g.output, *g.value_info]]
    return graphs, nodes, tensors, values


@st.composite
def edits(draw):
    return draw(st.lists(st.tuples(st.integers(0, 21), st.integers(0, 1000), names, text, big_ints,
                                   st.binary(max_size=24)), min_size=1, max_size=4))  # fmt: skip


def apply_edit(model: onnx.ModelProto, edit) -> None:
    kind, pick, name, words, number, blob = edit
    graphs, nodes, tensors, values = _all_of(model)
    node = nodes[pick % len(nodes)] if nodes else None
    tensor = tensors[pick % len(tensors)] if tensors else None
    value = values[pick % len(values)] if values else None
    graph = graphs[pick % len(graphs)]
    if kind == 0 and node is not None and node.input:
        node.input[pick % len(node.input)] = name
    elif kind == 1 and node is not None:
        node.output.append(name)
    elif kind == 2 and node is not None:
        node.op_type = words or "If"
    elif kind == 3 and node is not None:
        node.domain = words
    elif kind == 4 and node is not None:
        snapshot = onnx.GraphProto.FromString(graph.SerializeToString())  # never copy a message into itself
        attr = node.attribute.add()
        attr.name = words or "value"
        attr.type = pick % 15
        if pick % 3 == 0:
            attr.t.CopyFrom(TensorProto(name=name, data_type=number % 30, dims=[abs(number) % 7], raw_data=blob))
        elif pick % 3 == 1:
            attr.g.CopyFrom(snapshot)
        else:
            attr.ints.extend([number, pick])
    elif kind == 5 and graph.node:
        del graph.node[pick % len(graph.node)]
    elif kind == 6 and graph.node:
        graph.node.append(graph.node[pick % len(graph.node)])
    elif kind == 7 and tensor is not None:
        del tensor.dims[:]
        tensor.dims.extend([number, pick % 5])
    elif kind == 8 and tensor is not None:
        tensor.data_type = number if -(2**31) <= number < 2**31 else pick
    elif kind == 9 and tensor is not None:
        tensor.raw_data = blob
    elif kind == 10 and tensor is not None:
        tensor.ClearField("raw_data")
        tensor.float_data.extend([float(pick)] * (pick % 9))
    elif kind == 11 and tensor is not None:
        tensor.data_location = TensorProto.EXTERNAL
        for key, val in (("location", words or "../../etc/passwd"), ("offset", str(number)), ("length", words)):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, val
    elif kind == 12 and tensor is not None:
        tensor.name = name
    elif kind == 13 and value is not None:
        value.type.tensor_type.elem_type = number if -(2**31) <= number < 2**31 else 0
    elif kind == 14 and value is not None:
        dim = value.type.tensor_type.shape.dim.add()
        if pick % 2:
            dim.dim_value = number
        else:
            dim.dim_param = words
    elif kind == 15 and value is not None:
        value.ClearField("type")
    elif kind == 16:
        model.ir_version = number
    elif kind == 17 and model.opset_import:
        model.opset_import[0].version = number
    elif kind == 18:
        model.opset_import.add(domain=words, version=pick)
    elif kind == 19:
        graph.output.add().name = name
    elif kind == 20 and graph.initializer:
        graph.input.add().name = graph.initializer[pick % len(graph.initializer)].name
    elif kind == 21:
        model.producer_name = words


@FUZZ
@given(base_index, edits())
def test_protobuf_field_edits(index, changes):
    model = onnx.ModelProto.FromString(bases()[index])
    for edit in changes:
        apply_edit(model, edit)
    try:
        data = model.SerializeToString()
    except Exception:  # noqa: BLE001 - an edit the protobuf runtime itself cannot serialise is not a test input
        return
    check_load_and_inspect(data)


# --------------------------------------------------------------------------- archives


@functools.cache
def good_zip() -> bytes:
    onnx_bytes, data = external_model_bytes()
    return make_zip([("m/model.onnx", onnx_bytes), ("m/weights.bin", data)])


@FUZZ
@given(st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 7)), min_size=0, max_size=6),
       st.floats(0.2, 1))  # fmt: skip
def test_zip_mutations(flips, keep):
    data = bytearray(good_zip())
    for where, bit in flips:
        data[int(where * len(data))] ^= 1 << bit
    data = bytes(data[: max(1, int(keep * len(data)))])
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work"
        try:
            loaded = load_zip(data, work, LIMITS)
        except ShrinkRayError as exc:
            assert "\n" not in str(exc)
            assert not work.exists() or list(work.iterdir()) == []
            return
        json.dumps(inspect_model(loaded).to_dict())


# --------------------------------------------------------------------------- external data entries, from a folder

locations = st.sampled_from([
    "weights.bin", "./weights.bin", "sub/../weights.bin", "../weights.bin", "../secret.bin", "/etc/passwd",
    "C:/weights.bin", "\\\\server\\share\\w.bin", "..\\secret.bin", "a\0b", "x" * 300, "", ".", "sub", "sub/",
    "weights.bin/", "file:///etc/passwd", "missing.bin",
])  # fmt: skip
entry_values = st.one_of(locations, st.integers(-5, 10**6).map(str), st.sampled_from(["", "abc", "1e3", " 4", "9" * 30]))


@FUZZ
@given(st.lists(st.tuples(st.integers(0, 1),
                          st.sampled_from(["location", "offset", "length", "checksum", "basepath", "__class__"]),
                          entry_values), min_size=1, max_size=4))  # fmt: skip
def test_external_data_entries(changes):
    model = onnx.ModelProto.FromString(external_model_bytes()[0])
    _, data = external_model_bytes()
    for which, key, value in changes:
        tensor = model.graph.initializer[which]
        entries = {e.key: e.value for e in tensor.external_data}
        entries[key] = value
        del tensor.external_data[:]
        for k, v in entries.items():
            entry = tensor.external_data.add()
            entry.key, entry.value = k, v
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        secret = b"FUZZ-SECRET-" * 4096
        (root / "secret.bin").write_bytes(secret)
        folder = root / "upload"
        (folder / "sub").mkdir(parents=True)
        (folder / "weights.bin").write_bytes(data)
        (folder / "model.onnx").write_bytes(model.SerializeToString())
        try:
            loaded = load(folder / "model.onnx", limits=LIMITS)
        except ShrinkRayError as exc:
            assert "FUZZ-SECRET" not in str(exc) and "\n" not in str(exc)
            return
        for tensor in loaded.model.graph.initializer:
            assert b"FUZZ-SECRET" not in tensor.raw_data
        json.dumps(inspect_model(loaded).to_dict())

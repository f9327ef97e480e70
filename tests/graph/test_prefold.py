"""Measuring copies (measure/prefold.py): the same graph once ONNX Runtime has optimized it, the same outputs bit
for bit, with the decodes folded by us one weight at a time instead of all at once by its optimizer."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import SAMPLE_NAMES, cached_sample, make_feeds, shrunk
from onnx import TensorProto, helper, numpy_helper

from shrinkray.graph import prefold
from shrinkray.graph.sessions import open_file_session, session_options

#: (method, options) whose results are folded by ONNX Runtime at load: every decode form of both weight methods.
FORMS = [
    ("weights-int8", ()),
    ("weights-int8", (("form", "dequantize-linear"),)),
    ("weights-int4", ()),
    ("weights-int4", (("form", "standard"),)),
    ("weights-int4", (("form", "contrib"),)),
    ("weights-int4", (("form", "dequantize-linear"),)),
    ("float16", ()),
    ("palettize", ()),
]


def _optimized(path, tmp_path, tag: str, arrays=None) -> tuple[ort.InferenceSession, Counter]:
    """An optimized 1-thread session on ``path`` (``arrays``: its initializers held in memory) and the op types
    of the graph ONNX Runtime made of it."""
    options = session_options(optimized=True, threads=1)
    options.optimized_model_filepath = str(tmp_path / f"optimized-{tag}.onnx")
    if arrays:
        options.add_external_initializers(list(arrays), [ort.OrtValue.ortvalue_from_numpy(a) for a in arrays.values()])
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    graph = onnx.load(options.optimized_model_filepath, load_external_data=False).graph
    return session, Counter((n.domain, n.op_type) for n in graph.node)


def _same_as_file(model: onnx.ModelProto, tmp_path) -> bool:
    """Write ``model``, make its measuring copy; assert the copy optimizes to the same ops and gives the
    same outputs bit for bit. True when something was folded."""
    real = tmp_path / "model.onnx"
    real.write_bytes(model.SerializeToString())
    copy = tmp_path / "copy.onnx"
    prefold.prefold_file(real, copy)
    held, arrays = tmp_path / "held" / "copy.onnx", {}  # the same copy, its weights held in memory (issue 27)
    held.parent.mkdir()
    prefold.prefold_file(real, held, arrays)
    assert held.with_name("copy.onnx.data").stat().st_size == 0  # nothing of the weights on disk
    folded = bool(prefold.plan(model))
    expected, expected_ops = _optimized(real, tmp_path, "file")
    # the product's session on the held copy: its values taken as they are, or copied in when a fusion reads them
    product = (open_file_session(held, initializers=arrays), expected_ops)
    for measured, measured_ops in (_optimized(copy, tmp_path, "copy"), _optimized(held, tmp_path, "held", arrays),
                                   product):  # fmt: skip
        assert measured_ops == expected_ops
        for seed in (0, 1):
            feeds = make_feeds(expected, seed)
            for want, got in zip(expected.run(None, feeds), measured.run(None, feeds), strict=True):
                want, got = np.asarray(want), np.asarray(got)
                assert want.dtype == got.dtype and want.shape == got.shape
                assert want.tobytes() == got.tobytes()  # bitwise, NaN and signed zeros included
    return folded


@pytest.mark.parametrize("name", [n for n in SAMPLE_NAMES if n != "tree"])
@pytest.mark.parametrize(("method", "options"), FORMS, ids=lambda v: "-".join(map(str, v)) if isinstance(v, tuple) else v)
def test_measuring_copy_runs_what_the_file_runs(method, options, name, tmp_path):
    try:
        variant = shrunk(method, name, options)
    except Exception as exc:  # noqa: BLE001 - a method that refuses this sample has nothing to measure
        pytest.skip(f"{method} refuses {name}: {exc}")
    folded = _same_as_file(variant.model, tmp_path)
    plain_ops = (method, options) in (("weights-int8", ()), ("weights-int4", (("form", "standard"),)))
    if plain_ops and variant.summary().get("tensors_changed"):  # a decode made of plain ops: the copy folded it
        assert folded


def test_dequantize_linear_int4_at_opset_21(tmp_path):
    """weights-int4's opset-21 form (4-bit DequantizeLinear with block_size, which ONNX Runtime fuses)."""
    import shrinkray

    model = onnx.version_converter.convert_version(cached_sample("mlp"), 21)
    model.ir_version = 10
    variant = shrinkray.shrink(model, "weights-int4", form="dequantize-linear")
    assert "DequantizeLinear" in {n.op_type for n in variant.model.graph.node}
    _same_as_file(variant.model, tmp_path)


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_originals_copy_runs_what_the_file_runs(name, tmp_path):
    _same_as_file(cached_sample(name), tmp_path)


def test_decodes_are_folded_and_dequantize_linear_is_left_to_onnx_runtime(tmp_path):
    """The Cast/Mul decode folds; DequantizeLinear stays (ONNX Runtime fuses it with its MatMul)."""
    cast_mul = shrunk("weights-int8", "mlp", ())
    fold = prefold.plan(cast_mul.model)
    ops = {cast_mul.model.graph.node[i].op_type for i in fold.folded}
    assert fold and {"Cast", "Mul"} <= ops
    linear = shrunk("weights-int8", "mlp", (("form", "dequantize-linear"),))
    assert "DequantizeLinear" in {n.op_type for n in linear.model.graph.node}
    kept = {linear.model.graph.node[i].op_type for i in prefold.plan(linear.model).folded}
    assert "DequantizeLinear" not in kept
    copy = tmp_path / "copy.onnx"
    prefold.prefold(linear.model, copy)
    assert "DequantizeLinear" in {n.op_type for n in onnx.load(str(copy), load_external_data=False).graph.node}


def _chain_model(*, to_output: bool = False, n: int = 8) -> onnx.ModelProto:
    """y = x @ (Cast(w8) * scale), w8 n x n; with ``to_output`` the decoded weight is also a graph output."""
    w8 = numpy_helper.from_array((np.arange(n * n) % 64 - 32).astype(np.int8).reshape(n, n), "w8")
    scale = numpy_helper.from_array(np.array(0.25, dtype=np.float32), "scale")
    nodes = [
        helper.make_node("Cast", ["w8"], ["wf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["wf", "scale"], ["w"]),
        helper.make_node("MatMul", ["x", "w"], ["y"]),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, n])]
    if to_output:
        outputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [n, n]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, n])], outputs,
                              [w8, scale])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def test_only_constant_chains_fold_and_graph_outputs_stay():
    fold = prefold.plan(_chain_model())
    assert fold.frontier == ["w"] and len(fold.folded) == 2
    exposed = prefold.plan(_chain_model(to_output=True))  # ONNX Runtime 1.x left such nodes alone
    assert exposed.frontier == ["wf"] and len(exposed.folded) == 1
    model = _chain_model()
    model.graph.input.append(helper.make_tensor_value_info("scale", TensorProto.FLOAT, []))  # overridable
    overridable = prefold.plan(model)
    assert overridable.frontier == ["wf"] and len(overridable.folded) == 1  # the Mul waits for the feed


def test_weights_go_to_an_aligned_data_file_and_small_tensors_stay(tmp_path):
    model = _chain_model()
    big = numpy_helper.from_array(np.ones((256, 256), np.float32), "unused_big")
    model.graph.initializer.append(big)  # read by nothing: not copied
    model.graph.node.append(helper.make_node("Add", ["y", "bias"], ["z"]))
    model.graph.initializer.append(numpy_helper.from_array(np.full(512, 3.0, np.float32)[:8], "bias"))
    model.graph.output[0].name = "z"
    copy = tmp_path / "copy.onnx"
    prefold.prefold(model, copy)
    written = onnx.load(str(copy), load_external_data=False)
    by_name = {t.name: t for t in written.graph.initializer}
    assert set(by_name) == {"w", "bias"}
    assert by_name["bias"].data_location == TensorProto.DEFAULT  # 32 bytes: stays inline
    assert by_name["w"].data_location == TensorProto.DEFAULT  # 256 bytes: under EXTERNAL_MIN_BYTES
    large = helper.make_model(helper.make_graph(
        [helper.make_node("Cast", ["w8"], ["wf"], to=TensorProto.FLOAT), helper.make_node("MatMul", ["x", "wf"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 256])],
        [numpy_helper.from_array(np.ones((256, 256), np.int8), "w8")]), opset_imports=[helper.make_opsetid("", 17)])  # fmt: skip
    large.ir_version = 9
    prefold.prefold(large, copy)
    (tensor,) = onnx.load(str(copy), load_external_data=False).graph.initializer
    entries = {e.key: e.value for e in tensor.external_data}
    assert tensor.data_location == TensorProto.EXTERNAL and entries["location"] == "copy.onnx.data"
    assert int(entries["offset"]) % prefold.ALIGN == 0 and int(entries["length"]) == 256 * 256 * 4


def test_a_copy_that_cannot_be_made_opens_the_file_itself(tmp_path, monkeypatch):
    real = tmp_path / "model.onnx"
    real.write_bytes(_chain_model().SerializeToString())

    def broken(*_args, **_kwargs):
        raise RuntimeError("no kernel")

    monkeypatch.setattr(prefold, "_evaluate", broken)
    copies = prefold.MeasuringCopies(tmp_path / "measuring")
    session = copies.session([real], 1)
    assert copies.copy_of(real) is None
    assert not list((tmp_path / "measuring").glob("*.onnx*"))  # nothing half-written is left
    out = session.run(None, {"x": np.ones((2, 8), np.float32)})[0]
    assert out.shape == (2, 8)


def test_copies_are_made_once_per_file(tmp_path, monkeypatch):
    real = tmp_path / "model.onnx"
    real.write_bytes(_chain_model().SerializeToString())
    made = []
    original = prefold.prefold_file
    monkeypatch.setattr(prefold, "prefold_file", lambda s, t, *rest: made.append(s) or original(s, t, *rest))
    copies = prefold.MeasuringCopies(tmp_path / "measuring")
    for threads in (1, 2):
        copies.session([real], threads)
    assert made == [real] and copies.copy_of(real).exists()


def test_copies_past_the_kept_bytes_go_least_recently_used_first_and_come_back_when_used(tmp_path):
    """A 100 MB upload's five variant copies were 5x its size in scratch: with ``keep_bytes`` the copies kept and
    one more the size of the largest fit in it, the oldest used removed first, made again on their next use."""
    files = []
    for name in "abc":
        path = tmp_path / f"{name}.onnx"
        path.write_bytes(_chain_model().SerializeToString())
        files.append(path)
    assert prefold.MeasuringCopies(tmp_path / "probe").copy_of(files[0]) is not None
    one = sum(p.stat().st_size for p in (tmp_path / "probe").glob("*") if p.is_file())
    copies = prefold.MeasuringCopies(tmp_path / "measuring", keep_bytes=2 * one)  # room for two
    a, b = copies.copy_of(files[0]), copies.copy_of(files[1])
    assert a.exists() and b.exists()
    assert copies.copy_of(files[0]) == a  # a hit: used again, now the most recent
    c = copies.copy_of(files[2])  # b is the least recently used
    assert a.exists() and c.exists() and not b.exists()
    again = copies.copy_of(files[1])  # made again, in place of a
    assert again.exists() and not a.exists() and c.exists()
    kept = [p for p in (tmp_path / "measuring").glob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in kept) <= 2 * one
    session = copies.session([files[0]], 1)  # what was removed opens as before
    assert session.run(None, {"x": np.ones((2, 8), np.float32)})[0].shape == (2, 8)


def test_room_is_made_for_the_largest_copy_made_so_far_even_once_removed(tmp_path):
    """A run's copies differ in size (a palettized model's decodes to the float size, an 8-bit one's less): sizing
    the room by the copies still kept let a large copy join small ones past the budget (1.8x a 100 MB model's
    size where 1.3x was allowed)."""
    sizes = {}
    files = {}
    for name, n in (("small1", 8), ("small2", 8), ("big", 256)):
        files[name] = tmp_path / f"{name}.onnx"
        files[name].write_bytes(_chain_model(n=n).SerializeToString())
        probe = prefold.MeasuringCopies(tmp_path / f"probe-{name}")
        assert probe.copy_of(files[name]) is not None
        sizes[name] = sum(p.stat().st_size for p in (tmp_path / f"probe-{name}").glob("*") if p.is_file())
    assert sizes["big"] > 10 * sizes["small1"]
    keep = sizes["big"] + sizes["small1"]  # one big and one small
    copies = prefold.MeasuringCopies(tmp_path / "measuring", keep_bytes=keep)

    def on_disk() -> int:
        return sum(p.stat().st_size for p in (tmp_path / "measuring").glob("*") if p.is_file())

    for name in ("big", "small1", "small2", "big"):  # the big one removed, then made again beside two small
        assert copies.copy_of(files[name]).exists()
        assert on_disk() <= keep, name


def test_no_copy_when_a_folded_value_is_larger_than_onnx_runtime_folds(tmp_path, monkeypatch):
    """ONNX Runtime leaves a chain whose output passes its folding limit: the copy must not fold it either."""
    real = tmp_path / "model.onnx"
    real.write_bytes(_chain_model().SerializeToString())
    monkeypatch.setattr(prefold, "FOLD_LIMIT_BYTES", 8 * 8 * 4 - 1)  # the decoded weight is 256 bytes
    copies = prefold.MeasuringCopies(tmp_path / "measuring")
    session = copies.session([real], 1)
    assert copies.copy_of(real) is None
    assert session.run(None, {"x": np.ones((2, 8), np.float32)})[0].shape == (2, 8)


def _external_pair(tmp_path):
    """A model kept in external data and its weights-int8 variant streamed into its own data file."""
    from shrinkray.io.files import load
    from shrinkray.pipeline.streaming import shrink_to_files

    rng = np.random.default_rng(3)
    w1 = rng.standard_normal((256, 512)).astype(np.float32) * 0.05
    w2 = rng.standard_normal((512, 64)).astype(np.float32) * 0.05
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("MatMul", ["x", "w1"], ["h"]), onnx.helper.make_node("Relu", ["h"], ["r"]),
         onnx.helper.make_node("MatMul", ["r", "w2"], ["y"])],
        "ext", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 256])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 64])],
        [onnx.numpy_helper.from_array(w1, "w1"), onnx.numpy_helper.from_array(w2, "w2")],
    )  # fmt: skip
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    model.ir_version = 9
    (tmp_path / "user").mkdir()
    original = tmp_path / "user" / "model.onnx"
    onnx.save_model(model, str(original), save_as_external_data=True, location="model.onnx.data",
                    size_threshold=1024)  # fmt: skip
    (tmp_path / "v").mkdir()
    _, variant, _ = shrink_to_files(load(original, lazy_external=True), "weights-int8", tmp_path / "v" / "int8.onnx")
    return original, variant


def test_a_copy_of_a_model_in_external_data_folds_from_its_files_and_links_what_it_keeps(tmp_path):
    import onnxruntime as ort

    original, variant = _external_pair(tmp_path)
    copy = tmp_path / "measuring" / "copy.onnx"
    copy.parent.mkdir()
    assert prefold.prefold_file(variant, copy)
    folded = onnx.load(str(copy), load_external_data=False)
    assert not prefold.plan(folded), "every decode chain was folded"
    x = {"x": np.random.default_rng(0).standard_normal((2, 256)).astype(np.float32)}
    theirs = ort.InferenceSession(str(variant), providers=["CPUExecutionProvider"]).run(None, x)[0]
    ours = ort.InferenceSession(str(copy), providers=["CPUExecutionProvider"]).run(None, x)[0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    # the original has nothing to fold and keeps its weights in a data file: no copy at all
    assert not prefold.prefold_file(original, tmp_path / "measuring" / "none.onnx")
    assert not list((tmp_path / "measuring").glob("none.onnx*"))


def test_a_copy_links_the_data_file_of_what_it_keeps_and_dropping_it_removes_its_files(tmp_path):
    original, _ = _external_pair(tmp_path)
    model = onnx.load(str(original), load_external_data=False)
    target = tmp_path / "measuring" / "copy.onnx"
    target.parent.mkdir()
    prefold.prefold(model, target, base_dir=original.parent)  # nothing folds: every weight is linked, not copied
    links = list(target.parent.glob("copy.onnx.data.src*"))
    assert len(links) == 1 and links[0].stat().st_ino == (original.parent / "model.onnx.data").stat().st_ino
    assert target.with_name("copy.onnx.data").stat().st_size == 0
    copies = prefold.MeasuringCopies(tmp_path / "m2")
    (tmp_path / "again").mkdir()
    _, variant = _external_pair(tmp_path / "again")
    copies.session([variant, variant.with_name(variant.name + ".data")], 1)
    made = list((tmp_path / "m2").iterdir())
    assert made
    copies.drop(variant)
    assert not list((tmp_path / "m2").iterdir())
    assert (original.parent / "model.onnx.data").exists()


def test_copies_held_in_memory_take_no_disk_and_go_when_dropped(tmp_path):
    """A run's measuring copies hold the decoded weights in memory: the folder keeps the small model file and an
    empty data file; the session runs as the file does; dropping the copy lets its memory go."""
    real = tmp_path / "model.onnx"
    real.write_bytes(_chain_model(n=256).SerializeToString())
    copies = prefold.MeasuringCopies(tmp_path / "measuring", in_memory=True)
    session = copies.session([real], 1)
    copy = copies.copy_of(real)
    assert copy.exists() and copy.with_name(copy.name + ".data").stat().st_size == 0
    assert copy.stat().st_size < real.stat().st_size / 10
    plain = ort.InferenceSession(str(real), session_options(True, 1), providers=["CPUExecutionProvider"])
    feeds = {"x": np.ones((2, 256), np.float32)}
    assert session.run(None, feeds)[0].tobytes() == plain.run(None, feeds)[0].tobytes()
    copies.drop(real)
    assert not list((tmp_path / "measuring").glob("*"))
    assert session.run(None, feeds)[0].tobytes() == plain.run(None, feeds)[0].tobytes()  # it keeps its own


def test_a_copy_of_a_kept_compressed_file_runs_what_the_file_runs(tmp_path):
    from shrinkray.io import kept_files

    real = tmp_path / "model.onnx"
    real.write_bytes(_chain_model(n=256).SerializeToString())
    plain = ort.InferenceSession(str(real), session_options(True, 1), providers=["CPUExecutionProvider"])
    kept = kept_files.compress(tmp_path / "model.onnx")
    feeds = {"x": np.full((2, 256), 0.5, np.float32)}
    for in_memory in (True, False):
        session = prefold.MeasuringCopies(tmp_path / f"m-{in_memory}", in_memory=in_memory).session([kept], 1)
        assert session.run(None, feeds)[0].tobytes() == plain.run(None, feeds)[0].tobytes()

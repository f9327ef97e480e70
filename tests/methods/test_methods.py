"""Every shrinking method on every sample model: validity, accuracy, size and bookkeeping.

The numeric bounds below were measured on the sample models (fixed seeds, fixed
synthesized inputs from tests/helpers.py) and then loosened to leave headroom;
the measured worst case is given next to each bound.
"""

from __future__ import annotations

import functools
import os
import zlib

import numpy as np
import onnx
import pytest
from helpers import (
    SAMPLE_NAMES,
    all_tensors,
    cached_sample,
    cosine,
    is_float_array,
    make_feeds,
    method_model_params,
    method_params,
    read_sample,
    relative_max_abs,
    runs_slowly,
    sample_path,
    shrunk,
)
from onnx import TensorProto, helper, numpy_helper

import shrinkray
from shrinkray.arrays import distinct_count
from shrinkray.errors import MethodError, OptionError, ShrinkRayError
from shrinkray.graph.sessions import open_session

#: The methods of a plain compare (auto, a search over these, has its own tests: test_methods_auto.py).
METHODS = [spec.name for spec in shrinkray.all_methods() if spec.in_default_set]
#: Methods that rewrite stored tensors themselves, one by one (their spec: traceable), from the registry.
WEIGHT_METHODS = [name for name in METHODS if shrinkray.get_method(name).traceable]
FLOAT_DTYPES = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE}

# ------------------------------------------------------------------ bounds (variant vs original)

#: Minimum cosine similarity of every float output, variant vs original, default options.
MIN_COSINE = {
    "dynamic-int8": 0.99,  # measured worst 0.9964 (messy `probs`); activations are int8 too
    "weights-int8": 0.999,  # measured worst 0.99980 (shared_weight; 0.99963 with --symmetric)
    "weights-int4": 0.96,  # measured worst 0.97 (subgraph `y`): 4-bit codes, tests/methods/test_methods_int4.py
    "palettize": 0.999,  # 256 k-means levels; measured worst 0.99970 (messy `probs`)
    "float16": 0.9999,  # measured worst 0.999999
}
#: Maximum |variant - original| over an output, divided by max |original| of that output.
MAX_RELATIVE_ERROR = {
    "dynamic-int8": 0.25,  # measured worst 0.123 (transformer `pooled`)
    "weights-int8": 0.15,  # measured worst 0.052 (subgraph `y`, a 3-step Loop of tanh layers; 0.071 symmetric)
    "weights-int4": 1.0,  # measured worst 0.873 (subgraph `y`: the Loop repeats the 4-bit error; 0.564 with mse)
    "palettize": 0.10,  # measured worst 0.048 (subgraph `y`)
    "float16": 0.01,  # measured worst 0.0020 (subgraph `y`)
}

#: Integer outputs computed from floats that may change: messy's ArgMax `label` has a top-2 margin of
#: 0.097 on the test feed, while 4-bit weights move `output` by up to 0.63 (float outputs still checked).
LABELS_MAY_FLIP = {("weights-int4", "messy")}

# ------------------------------------------------------------------ bounds (optimized vs unoptimized session)

#: The same variant under ORT_ENABLE_ALL and ORT_DISABLE_ALL. Weights decoded by Cast/Mul
#: (or stored directly) are folded to plain floats, so only float rounding differs.
AGREE_MIN_COSINE = 0.99999  # measured worst 0.9999999 (fp16 model, float16 arithmetic)
AGREE_MAX_RELATIVE = 5e-3  # measured worst 8e-4 (fp16 model)
#: form=dequantize-linear: ONNX Runtime 1.31 fuses DequantizeLinear+MatMul into MatMulNBits
#: (bits=8, accuracy_level=4), which quantizes activations, so optimized outputs move more.
#: Still tight enough to catch wrong decoding (e.g. negative codes folded to 0 drops cosine far below).
AGREE_DQ_MIN_COSINE = 0.9999  # measured worst 0.99997 (subgraph)
AGREE_DQ_MAX_RELATIVE = 0.06  # measured worst 0.026 (transformer), 0.021 (subgraph)

@pytest.mark.parametrize("levels", [32, 64, 128])
def test_weights_int8_with_fewer_levels_uses_that_many_codes_and_brotli_serves_fewer_bytes(levels):
    from shrinkray.measure.sizes import brotli_size

    weight = np.random.default_rng(levels).standard_normal((64, 1024)).astype(np.float32)
    full = shrinkray.shrink(_add_weight_model(weight), "weights-int8")
    fewer = shrinkray.shrink(_add_weight_model(weight), "weights-int8", levels=levels)
    (change,) = fewer.changes
    assert change.encoding.endswith(f"{levels} levels") and "levels" not in full.changes[0].encoding
    codes = numpy_helper.to_array(next(t for t in fewer.model.graph.initializer if t.data_type == TensorProto.UINT8))
    assert codes.max() <= levels - 1  # codes 0 .. levels-1 along whichever axis lost least
    (y,) = open_session(fewer.model).run(None, {"X": np.zeros_like(weight)})
    step = (weight.max() - min(weight.min(), 0.0)) / (levels - 1)  # no channel's step is coarser
    assert np.abs(y - weight).max() <= step / 2 + 1e-6
    assert np.abs(y - weight).max() > (weight.max() - weight.min()) / 255 / 2  # coarser than 256 levels
    served = brotli_size(fewer.model.SerializeToString(), 9) / brotli_size(full.model.SerializeToString(), 9)
    assert served < 1 - 0.8 * (8 - np.log2(levels)) / 8  # about one bit per value less for each halving


def test_weights_int8_refuses_levels_outside_2_to_256():
    with pytest.raises(OptionError, match="levels"):
        shrinkray.shrink(_add_weight_model(np.ones((4, 4096), np.float32)), "weights-int8", levels=300)


# ------------------------------------------------------------------ size promises

WEIGHTS_INT8_MAX_SIZE_SHARE = (
    0.30  # measured 0.27-0.29 (mlp, cnn, rnn, subgraph); 0.299/0.288 (transformer/messy, 4096)
)
#: Per float32 tensor: 8-bit codes plus float32 scale (and zero point) per channel.
WEIGHTS_INT8_MAX_TENSOR_SHARE = 0.30  # measured at most 0.282 (64-value channels with scale + zero point)
FLOAT16_MAX_SIZE_SHARE = 0.55  # measured 0.50-0.51
#: shared_weight keeps W_override (an overridable graph input, 20% of the file) in float32.
FLOAT16_MAX_SIZE_SHARE_SHARED_WEIGHT = 0.62  # measured 0.601
PALETTIZE_MAX_RAW_CHANGE = 0.01  # raw size unchanged within 1% (measured 0.000)
PALETTIZE_MAX_GZIP_SHARE = 0.70  # gzip at least 30% smaller; measured 0.41 (mlp), 0.44 (cnn)
#: Serialized size may exceed (original - weight bytes before + weight bytes after) only by
#: the decode nodes and tensor framing: measured at most 441 bytes per rewritten tensor.
FRAMING_BYTES_PER_TENSOR = 1024


# ------------------------------------------------------------------ scratch directory


@pytest.fixture(autouse=True)
def _scratch_working_directory(tmp_path, monkeypatch):
    """Run every test in an empty folder: dynamic-int8 can leave files in the working
    directory (see test_dynamic_int8_leaves_no_files_in_the_working_directory), and they
    must not land in the repository."""
    monkeypatch.chdir(tmp_path)


# ------------------------------------------------------------------ cached runs


_original = cached_sample  # shared, read-only ModelProto per sample
_variant = shrunk  # (method, sample, options tuple) -> Variant, computed once per session


def _key(options: dict) -> tuple:
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in options.items()))


@functools.cache
def _feeds(name: str) -> dict[str, np.ndarray]:
    return make_feeds(open_session(_original(name), optimized=False))


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray], optimized: bool) -> dict[str, np.ndarray]:
    session = open_session(model, optimized=optimized)
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds), strict=True))


@functools.cache
def _original_outputs(name: str, optimized: bool) -> dict[str, np.ndarray]:
    return _run(_original(name), _feeds(name), optimized)


@functools.cache
def _variant_outputs(method: str, name: str, options: tuple, optimized: bool) -> dict[str, np.ndarray]:
    return _run(_variant(method, name, options).model, _feeds(name), optimized)


def _min_cosine(method: str, model: str) -> float:
    return MIN_COSINE[method]


def _assert_close(
    expected: dict, got: dict, min_cos: float, max_rel: float, what: str, check_dtype: bool = True
) -> None:
    assert list(got) == list(expected), f"{what}: output names changed"
    for name, ref in expected.items():
        out = got[name]
        assert out.shape == ref.shape, f"{what}: {name} shape {out.shape} != {ref.shape}"
        if check_dtype:
            assert out.dtype == ref.dtype, f"{what}: {name} dtype {out.dtype} != {ref.dtype}"
        if is_float_array(ref):
            assert np.isfinite(out).all(), f"{what}: {name} has non-finite values"
            cos = cosine(ref, out)
            rel = relative_max_abs(ref, out)
            assert cos >= min_cos, f"{what}: {name} cosine {cos:.6f} < {min_cos}"
            assert rel <= max_rel, f"{what}: {name} max-abs error {rel:.4f} of its scale > {max_rel}"
        else:
            np.testing.assert_array_equal(out, ref, err_msg=f"{what}: non-float output {name} changed")


def _names(variant: shrinkray.Variant) -> set[str]:
    return {c.name for c in variant.changes}


def _tensor_map(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    return {name: tensor for _, name, tensor in all_tensors(model)}


# ------------------------------------------------------------------ registry


def test_registry_lists_the_four_methods():
    assert sorted(METHODS) == ["dynamic-int8", "float16", "palettize", "weights-int4", "weights-int8"]
    assert sorted(spec.name for spec in shrinkray.all_methods()) == sorted([*METHODS, "auto"])


# ------------------------------------------------------------------ every method x every model x ORT optimisation


@pytest.mark.parametrize("optimized", [True, False], ids=["ort-optimized", "ort-unoptimized"])
@pytest.mark.parametrize("method, model", method_model_params(METHODS, SAMPLE_NAMES))
def test_variant_is_valid_runs_and_stays_close(method, model, optimized):
    variant = _variant(method, model)
    assert variant.method == method
    onnx.checker.check_model(variant.model)
    expected, got = _original_outputs(model, optimized), _variant_outputs(method, model, (), optimized)
    if (method, model) in LABELS_MAY_FLIP:
        expected = {k: v for k, v in expected.items() if is_float_array(v)}
        got = {k: got[k] for k in expected}
    _assert_close(
        expected,
        got,
        _min_cosine(method, model),
        MAX_RELATIVE_ERROR[method],
        f"{method} on {model}",
    )


AGREEMENT_CASES = [(m, (), m) for m in METHODS] + [
    ("weights-int8", (("form", "dequantize-linear"), ("symmetric", False)), "weights-int8-dq-asym"),
    ("weights-int8", (("form", "dequantize-linear"),), "weights-int8-dq-sym"),
]


@pytest.mark.parametrize(
    "method, options, model",
    [
        pytest.param(m, o, n, id=f"{case}-{n}", marks=[pytest.mark.slow] if runs_slowly(m, n) else [])
        for m, o, case in AGREEMENT_CASES
        for n in SAMPLE_NAMES
    ],
)
def test_optimized_and_unoptimized_sessions_of_the_variant_agree(method, options, model):
    dq = dict(options).get("form") == "dequantize-linear"
    if dq and model == "messy":  # opset 11: DequantizeLinear with an axis needs opset 13
        with pytest.raises(MethodError, match="opset 13"):
            _variant(method, model, options)
        return
    fast = _variant_outputs(method, model, options, True)
    slow = _variant_outputs(method, model, options, False)
    _assert_close(
        slow,
        fast,
        AGREE_DQ_MIN_COSINE if dq else AGREE_MIN_COSINE,
        AGREE_DQ_MAX_RELATIVE if dq else AGREE_MAX_RELATIVE,
        f"{method} {dict(options)} on {model}, optimized vs unoptimized",
    )


@pytest.mark.xfail(
    reason="KNOWN (ONNX Runtime, documented in the option's help): with --form dequantize-linear ONNX Runtime 1.31's "
    "optimizer fuses DequantizeLinear+MatMul into com.microsoft MatMulNBits(bits=8, accuracy_level=4), which "
    "quantizes activations to int8: optimized outputs differ from unoptimized ones by ~2.6% of the output scale "
    "(cast-mul form: < 1e-6)",
    strict=True,
)
def test_dequantize_linear_form_keeps_float_compute_when_optimized():
    options = (("form", "dequantize-linear"),)
    fast = _variant_outputs("weights-int8", "transformer", options, True)
    slow = _variant_outputs("weights-int8", "transformer", options, False)
    _assert_close(slow, fast, AGREE_MIN_COSINE, AGREE_MAX_RELATIVE, "dequantize-linear, optimized vs unoptimized")


def _add_weight_model(weight: np.ndarray) -> onnx.ModelProto:
    """Y = X + W: the weight reaches the output unchanged, so decoding errors show directly."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["X", "W"], ["Y"], name="add")],
        "add_weight",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(weight.shape))],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, list(weight.shape))],
        [numpy_helper.from_array(weight, "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


@pytest.mark.parametrize("optimized", [True, False], ids=["ort-optimized", "ort-unoptimized"])
@pytest.mark.parametrize("symmetric", [True, False], ids=["symmetric", "asymmetric"])
@pytest.mark.parametrize("form", ["cast-mul", "dequantize-linear"])
def test_weights_int8_decoding_keeps_negative_weights(form, symmetric, optimized):
    rng = np.random.default_rng(7)
    weight = (rng.standard_normal((8, 4096)) * 0.1).astype(np.float32)  # half the values negative
    weight[0, 0] = -1.0  # the most negative code: -127 (int8) / 0 (uint8)
    variant = shrinkray.shrink(_add_weight_model(weight), "weights-int8", form=form, symmetric=symmetric)
    assert _names(variant) == {"W"}
    x = np.zeros_like(weight)
    (y,) = open_session(variant.model, optimized=optimized).run(None, {"X": x})
    span = float(np.abs(weight).max()) if symmetric else float(weight.max() - weight.min())
    step = span / (127 if symmetric else 255)
    assert np.abs(y - weight).max() <= step / 2 + 1e-6
    assert (y[weight < -step] < 0).all(), "negative weights lost their sign"


# ------------------------------------------------------------------ size promises


@pytest.mark.parametrize(
    "model, options",
    [
        ("mlp", {}),
        ("cnn", {}),
        ("rnn", {}),
        ("subgraph", {}),
        # With the default 16384-element threshold these two keep mid-sized float32 weights
        # (transformer's 4096-element Q/K/V/O, messy's 6144-element MatMul): 38% and 34% of
        # the original. Lowering the threshold makes them weight-dominated like the others.
        ("transformer", {"min_elements": 4096}),
        ("messy", {"min_elements": 4096}),
    ],
)
def test_weights_int8_file_is_at_most_30_percent(model, options):
    original = len(_original(model).SerializeToString())
    shrunk = len(_variant("weights-int8", model, _key(options)).model.SerializeToString())
    assert shrunk <= WEIGHTS_INT8_MAX_SIZE_SHARE * original, f"{shrunk / original:.3f} of the original"


@pytest.mark.parametrize(
    "model, bound",
    [(m, FLOAT16_MAX_SIZE_SHARE) for m in ("mlp", "cnn", "transformer", "rnn", "subgraph", "messy")]
    + [("shared_weight", FLOAT16_MAX_SIZE_SHARE_SHARED_WEIGHT)],
)
def test_float16_file_is_about_half(model, bound):
    original = len(_original(model).SerializeToString())
    shrunk = len(_variant("float16", model).model.SerializeToString())
    assert 0.45 * original <= shrunk <= bound * original, f"{shrunk / original:.3f} of the original"


@pytest.mark.parametrize("model", SAMPLE_NAMES)
@pytest.mark.parametrize("method", ["weights-int8", "float16"])
def test_file_shrinks_by_what_the_change_records_claim(method, model):
    variant = _variant(method, model)
    original = len(_original(model).SerializeToString())
    shrunk = len(variant.model.SerializeToString())
    predicted = original - variant.bytes_before + variant.bytes_after
    assert predicted <= shrunk <= predicted + FRAMING_BYTES_PER_TENSOR * (len(variant.changes) + 1)


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_palettize_keeps_raw_size_but_gzips_much_smaller(model):
    before = _original(model).SerializeToString()
    after = _variant("palettize", model).model.SerializeToString()
    assert abs(len(after) - len(before)) <= PALETTIZE_MAX_RAW_CHANGE * len(before)
    gz_before, gz_after = len(zlib.compress(before, 9)), len(zlib.compress(after, 9))
    assert gz_after <= PALETTIZE_MAX_GZIP_SHARE * gz_before, f"gzip share {gz_after / gz_before:.3f}"


@pytest.mark.parametrize("method", METHODS)
def test_tree_model_has_nothing_to_shrink(method):
    variant = _variant(method, "tree")
    assert variant.changes == []
    assert variant.bytes_before == variant.bytes_after == 0
    assert variant.notes, "a method that changed nothing must say so"
    if method in WEIGHT_METHODS:
        assert variant.model.SerializeToString() == _original("tree").SerializeToString()


# ------------------------------------------------------------------ the input is never modified


@pytest.mark.parametrize(
    "method, model", method_model_params(METHODS, ["shared_weight", "subgraph", "mlp"])  # messy: next test
)
def test_shrink_does_not_modify_the_input_model(method, model):
    proto = read_sample(model)
    before = proto.SerializeToString()
    shrinkray.shrink(proto, method)
    assert proto.SerializeToString() == before


@pytest.mark.slow
def test_shrink_does_not_modify_a_loaded_model():
    loaded = shrinkray.load(sample_path("messy"))
    before = loaded.model.SerializeToString()
    for method in METHODS:
        variant = shrinkray.shrink(loaded, method)
        assert variant.model is not loaded.model
    assert loaded.model.SerializeToString() == before


# ------------------------------------------------------------------ subgraphs


def test_weights_int8_rewrites_weights_inside_subgraphs():
    variant = _variant("weights-int8", "subgraph")
    where = {c.name: c.where for c in variant.changes}
    assert set(where) == {"loop_W_out", "then/W1", "then/W2", "else/W1", "else/W2", "body/W_in"}
    assert len(variant.changes) == len(where)
    assert where["loop_W_out"] == "initializer"
    assert where["then/W1"] == "initializer in If_1/then_branch"
    assert where["then/W2"] == "Constant node in If_1/then_branch"
    assert where["else/W1"] == where["else/W2"] == "initializer in If_1/else_branch"
    assert where["body/W_in"] == "initializer in Loop_4/body"

    tensors = all_tensors(variant.model)
    big_floats = [
        (scope, name)
        for scope, name, t in tensors
        if t.data_type in FLOAT_DTYPES and int(np.prod(t.dims, dtype=np.int64)) >= 16384
    ]
    assert big_floats == []
    code_scopes = {scope for scope, _, t in tensors if t.data_type in (TensorProto.INT8, TensorProto.UINT8)}
    assert {"", "If_1/then_branch", "If_1/else_branch", "Loop_4/body"} <= code_scopes


@pytest.mark.parametrize("branch", [True, False], ids=["then-branch", "else-branch"])
@pytest.mark.parametrize("method", WEIGHT_METHODS)
def test_subgraph_variant_is_close_on_both_if_branches(method, branch):
    feeds = dict(_feeds("subgraph"), use_branch_a=np.array(branch))
    for optimized in (True, False):
        _assert_close(
            _run(_original("subgraph"), feeds, optimized),
            _run(_variant(method, "subgraph").model, feeds, optimized),
            _min_cosine(method, "subgraph"),
            MAX_RELATIVE_ERROR[method],
            f"{method} on subgraph, use_branch_a={branch}",
        )


# ------------------------------------------------------------------ shared and overridable weights


def _consumers(model: onnx.ModelProto, name: str) -> list[str]:
    return sorted(n.op_type for n in model.graph.node if name in n.input)


def _producers(model: onnx.ModelProto, name: str) -> int:
    graph = model.graph
    return sum(name in n.output for n in graph.node) + sum(t.name == name for t in graph.initializer)


@pytest.mark.parametrize("method", WEIGHT_METHODS)
def test_shared_weight_is_rewritten_once_and_both_consumers_work(method):
    original = _original("shared_weight")
    variant = _variant(method, "shared_weight")
    names = [c.name for c in variant.changes]
    for shared in ("tied_embedding", "shared_proj"):
        assert names.count(shared) == 1
        assert _producers(variant.model, shared) == 1
        assert len(_consumers(original, shared)) == 2
        assert _consumers(variant.model, shared) == _consumers(original, shared)
    assert names.count("const_proj") == 1
    for optimized in (True, False):
        _assert_close(
            _original_outputs("shared_weight", optimized),
            _variant_outputs(method, "shared_weight", (), optimized),
            _min_cosine(method, "shared_weight"),
            MAX_RELATIVE_ERROR[method],
            f"{method} on shared_weight",
        )


@pytest.mark.xfail(
    reason="KNOWN (ONNX Runtime): dynamic-int8 stores the tied embedding twice: ONNX Runtime's pre-processing "
    "constant-folds "
    "Transpose(tied_embedding) into a second initializer, and both copies get quantized (131072 int8 codes each)",
    strict=True,
)
@pytest.mark.slow
def test_dynamic_int8_stores_a_shared_weight_once():
    variant = _variant("dynamic-int8", "shared_weight")
    assert [c.name for c in variant.changes].count("tied_embedding") == 1
    big = [t.name for t in variant.model.graph.initializer if int(np.prod(t.dims, dtype=np.int64)) == 512 * 256]
    assert len(big) == 1, big


@pytest.mark.parametrize("method", method_params(METHODS, "shared_weight"))
def test_overridable_initializer_is_untouched_and_still_overridable(method):
    original = _original("shared_weight")
    variant = _variant(method, "shared_weight")
    assert "W_override" not in _names(variant)
    assert "W_override" in [i.name for i in variant.model.graph.input]
    kept = {t.name: t for t in variant.model.graph.initializer}
    before = {t.name: t for t in original.graph.initializer}["W_override"]
    assert "W_override" in kept
    # Same type, shape and values (ONNX Runtime's pre-processing may re-encode the protobuf fields).
    assert (kept["W_override"].data_type, list(kept["W_override"].dims)) == (before.data_type, list(before.dims))
    assert np.array_equal(numpy_helper.to_array(kept["W_override"]), numpy_helper.to_array(before))

    # A realistic override: same spread as the stored matrix, different values.
    spread = float(np.std(numpy_helper.to_array(before)))
    override = (np.random.default_rng(3).standard_normal((256, 256)) * spread).astype(np.float32)
    feeds = dict(_feeds("shared_weight"), W_override=override)
    plain = _run(variant.model, _feeds("shared_weight"), optimized=False)
    with_override = _run(variant.model, feeds, optimized=False)
    assert any(not np.allclose(plain[k], with_override[k]) for k in plain), "the override was ignored"
    _assert_close(
        _run(original, feeds, optimized=False),
        with_override,
        _min_cosine(method, "shared_weight"),
        MAX_RELATIVE_ERROR[method],
        f"{method} on shared_weight with W_override fed",
    )


# ------------------------------------------------------------------ selection


MLP_BIG = {"fc1.weight", "fc2.weight", "fc3.weight"}  # the mlp tensors with >= 16384 values


@pytest.mark.parametrize(
    "options, expected",
    [
        ({}, MLP_BIG),
        ({"include": ["fc2*"]}, {"fc2.weight"}),
        ({"exclude": ["fc2*"]}, {"fc1.weight", "fc3.weight"}),
        ({"include": ["fc*"], "exclude": ["fc1*"]}, {"fc2.weight", "fc3.weight"}),
        ({"include": "fc1*, fc3*"}, {"fc1.weight", "fc3.weight"}),  # comma-separated string, as from the CLI
        ({"include": ["FC2*"]}, set()),  # globs are case-sensitive
        ({"min_elements": 100000}, {"fc2.weight"}),
        ({"min_elements": 147457}, set()),  # fc2.weight has exactly 147456 values
    ],
    ids=["default", "include", "exclude", "include+exclude", "include-string", "case", "min", "min-above-all"],
)
@pytest.mark.parametrize("method", WEIGHT_METHODS)
def test_include_exclude_and_min_elements_select_the_right_tensors(method, options, expected):
    options = {"min_elements": 16384} | options
    variant = _variant(method, "mlp", _key(options))
    assert _names(variant) == expected
    original = {t.name: t for t in _original("mlp").graph.initializer}
    kept = {t.name: t for t in variant.model.graph.initializer}
    for name in MLP_BIG - expected:  # unselected tensors are byte-identical
        assert kept[name].SerializeToString() == original[name].SerializeToString()
    for name in expected:  # selected ones are not: re-encoded under new names, or new values under the same name
        assert name not in kept or kept[name].SerializeToString() != original[name].SerializeToString(), name
        assert any(n.startswith(name) for n in kept), name  # its new encoding is named after it


@pytest.mark.parametrize("method", WEIGHT_METHODS)
def test_min_elements_one_selects_every_float_initializer(method):
    variant = _variant(method, "mlp", (("min_elements", 1),))
    floats = {
        t.name: numpy_helper.to_array(t) for t in _original("mlp").graph.initializer if t.data_type in FLOAT_DTYPES
    }
    assert len(floats) > len(MLP_BIG)
    if method == "palettize":
        # a tensor that already has at most `levels` distinct values is left alone, with a note
        few = {n for n, a in floats.items() if distinct_count(a) <= 256}
        assert few == {"fc3.bias", "head.bias"}
        assert _names(variant) == set(floats) - few
        assert any("already had at most 256 distinct values" in n for n in variant.notes)
    else:
        assert _names(variant) == set(floats)


def test_rnn_threshold_boundary_is_inclusive():
    # lstm.W has exactly 16384 values, the default threshold
    assert "lstm.W" in _names(_variant("weights-int8", "rnn"))
    assert "lstm.W" not in _names(_variant("weights-int8", "rnn", (("min_elements", 16385),)))


# ------------------------------------------------------------------ palettize


PALETTIZED_MODELS = [m for m in SAMPLE_NAMES if m != "tree"]


@pytest.mark.parametrize("model", PALETTIZED_MODELS)
@pytest.mark.parametrize("levels", [16, 256])
def test_palettize_distinct_values_per_tensor_at_most_levels(levels, model):
    variant = _variant("palettize", model, (("levels", levels),))
    assert variant.changes
    tensors = _tensor_map(variant.model)
    originals = _tensor_map(_original(model))
    for change in variant.changes:
        values = numpy_helper.to_array(tensors[change.name])
        assert tensors[change.name].data_type == originals[change.name].data_type  # float type kept
        assert list(values.shape) == change.shape
        distinct = distinct_count(values)
        assert 2 <= distinct <= levels, f"{change.name}: {distinct} distinct values"
        assert change.encoding.startswith(f"{distinct} distinct values")


def test_palettize_linear_16_levels_warns_on_outliers_but_kmeans_256_does_not():
    linear = _variant("palettize", "mlp", (("algorithm", "linear"), ("levels", 16)))
    assert linear.warnings
    assert any("fc2.weight" in w for w in linear.warnings)  # the tensor with outliers
    kmeans = _variant("palettize", "mlp", (("algorithm", "kmeans"), ("levels", 256)))
    assert kmeans.warnings == []
    worst = {c.name: c.relative_rms_error for c in linear.changes}
    best = {c.name: c.relative_rms_error for c in kmeans.changes}
    assert set(best) == set(worst) == MLP_BIG
    assert all(best[n] < worst[n] for n in best)


# ------------------------------------------------------------------ float16


def test_float16_on_a_float16_model_changes_nothing():
    variant = _variant("float16", "fp16")
    assert variant.changes == []
    assert variant.notes
    assert variant.model.SerializeToString() == _original("fp16").SerializeToString()


def test_float16_compute_mode_on_mlp_validates_and_stays_close():
    options = (("mode", "compute"),)
    variant = _variant("float16", "mlp", options)
    onnx.checker.check_model(variant.model)
    assert variant.changes and all(c.encoding == "float16 compute" for c in variant.changes)
    graph = variant.model.graph
    assert [i.type.tensor_type.elem_type for i in graph.input] == [TensorProto.FLOAT]
    assert any(t.data_type == TensorProto.FLOAT16 for t in graph.initializer)
    for optimized in (True, False):
        _assert_close(
            _original_outputs("mlp", optimized),
            _variant_outputs("float16", "mlp", options, optimized),
            MIN_COSINE["float16"],
            MAX_RELATIVE_ERROR["float16"],
            "float16 compute on mlp",
            check_dtype=False,  # see test_float16_compute_mode_keeps_float32_io
        )


@pytest.mark.parametrize("model", ["mlp", "cnn", "tree"])
def test_float16_compute_mode_keeps_float32_io(model):
    options = (("mode", "compute"),)
    graph, original = _variant("float16", model, options).model.graph, _original(model).graph

    def types(values):
        return [(v.name, v.type.tensor_type.elem_type) for v in values]

    assert types(graph.input) == types(original.input)
    assert types(graph.output) == types(original.output)
    outputs = _variant_outputs("float16", model, options, False)
    assert {k: v.dtype for k, v in outputs.items()} == {k: v.dtype for k, v in _original_outputs(model, False).items()}


_COMPUTE_FAILURES = {
    "transformer": "a Cast to float16 feeds an op expecting float (Cast_8)",
    "rnn": "Gemm_5 gets float and float16 inputs",
    "subgraph": "Loop_4 body output type mismatch (float16 vs float)",
    "shared_weight": "W_override, an overridable graph input, is converted to float16",
    "messy": "a Cast to float16 feeds an op expecting float (Cast_13)",
}


@pytest.mark.parametrize(
    "model",
    [
        pytest.param(
            m,
            marks=pytest.mark.xfail(
                reason=f"KNOWN (onnxconverter-common): float16 --mode compute produces a model ONNX Runtime refuses "
                f"({_COMPUTE_FAILURES[m]}); shrink reports it cleanly, and the default storage mode works",
                strict=True,
            ),
        )
        if m in _COMPUTE_FAILURES
        else m
        for m in SAMPLE_NAMES
        if m != "fp16"
    ],
)
def test_float16_compute_mode_works_on_float32_models(model):
    options = (("mode", "compute"),)
    try:
        _variant("float16", model, options)
    except ShrinkRayError as exc:
        pytest.fail(f"float16 compute failed: {exc}")
    _assert_close(
        _original_outputs(model, False),
        _variant_outputs("float16", model, options, False),
        0.999,
        0.05,
        f"float16 compute on {model}",
        check_dtype=False,
    )


def test_float16_compute_mode_refuses_a_float16_model_with_a_hint():
    with pytest.raises(MethodError, match="--mode storage"):
        shrinkray.shrink(_original("fp16"), "float16", mode="compute")


# ------------------------------------------------------------------ dynamic-int8


@pytest.mark.slow
def test_dynamic_int8_quantizes_constant_node_weights():
    variant = _variant("dynamic-int8", "messy")
    assert len(variant.changes) > 0
    assert {"onnx::MatMul_101", "onnx::MatMul_103"} <= _names(variant)
    assert any("Constant-node" in n for n in variant.notes)
    ops = {n.op_type for n in variant.model.graph.node}
    assert "MatMulInteger" in ops


@pytest.mark.slow
def test_dynamic_int8_per_channel_option_reaches_the_quantizer():
    per_tensor = _variant("dynamic-int8", "mlp")
    per_channel = _variant("dynamic-int8", "mlp", (("per_channel", True),))
    assert per_channel.options["per_channel"] is True
    assert per_tensor.changes and all("per-tensor" in c.encoding for c in per_tensor.changes)
    assert any("per-channel" in c.encoding for c in per_channel.changes)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["mlp", "messy"])
def test_dynamic_int8_leaves_no_files_in_the_working_directory(model, tmp_path, monkeypatch):
    # Regression: when ONNX Runtime's pre-processing failed (messy.onnx) the quantizer left
    # sym_shape_infer_temp.onnx and a <uuid>.data file in the working directory (fixed in ca1cfc5).
    monkeypatch.chdir(tmp_path)
    shrinkray.shrink(read_sample(model), "dynamic-int8")
    assert sorted(os.listdir(tmp_path)) == []


# ------------------------------------------------------------------ weights-int8 granularity and change records


def test_weights_int8_per_channel_error_never_exceeds_per_tensor_on_cnn():
    per_channel = {c.name: c for c in _variant("weights-int8", "cnn").changes}
    per_tensor = {c.name: c for c in _variant("weights-int8", "cnn", (("granularity", "per-tensor"),)).changes}
    assert set(per_channel) == set(per_tensor) and per_channel
    for name, pc in per_channel.items():
        pt = per_tensor[name]
        assert "per-channel" in pc.encoding and "per-tensor" in pt.encoding
        assert pc.max_abs_error <= pt.max_abs_error
        assert pc.rms_error < pt.rms_error


@pytest.mark.parametrize("method, model", method_model_params(METHODS, SAMPLE_NAMES))
def test_every_change_record_is_sane(method, model):
    variant = _variant(method, model)
    names = [c.name for c in variant.changes]
    assert len(names) == len(set(names)), "a tensor was recorded twice"
    for c in variant.changes:
        assert np.isfinite([c.max_abs_error, c.rms_error, c.relative_rms_error]).all(), c
        assert 0 <= c.rms_error <= c.max_abs_error + 1e-12, c
        assert c.bytes_before > 0
        if method == "palettize":
            assert c.bytes_after == c.bytes_before
        else:
            assert c.bytes_after < c.bytes_before, c
        itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(getattr(TensorProto, c.dtype.upper()))).itemsize
        assert c.bytes_before == int(np.prod(c.shape, dtype=np.int64)) * itemsize
        assert c.encoding
    summary = variant.summary()
    assert summary["tensors_changed"] == len(variant.changes)
    assert summary["weight_bytes_before"] == sum(c.bytes_before for c in variant.changes)


@pytest.mark.parametrize("symmetric", [True, False], ids=["symmetric", "asymmetric"])
def test_weights_int8_error_stats_match_the_stored_codes(symmetric):
    variant = _variant("weights-int8", "mlp", (("symmetric", symmetric),))
    original = {t.name: numpy_helper.to_array(t) for t in _original("mlp").graph.initializer}
    stored = {t.name: numpy_helper.to_array(t) for t in variant.model.graph.initializer}
    for c in variant.changes:
        codes = stored[f"{c.name}__q"]
        assert codes.dtype == (np.int8 if symmetric else np.uint8)
        assert c.encoding.startswith("int8 symmetric" if symmetric else "uint8 asymmetric")
        zero = 0.0 if symmetric else stored[f"{c.name}__zero_point"]
        decoded = (codes.astype(np.float32) - zero) * stored[f"{c.name}__scale"]
        assert float(np.abs(decoded - original[c.name]).max()) == pytest.approx(c.max_abs_error, rel=1e-5)
        if c.dtype == "float":
            assert c.bytes_after <= WEIGHTS_INT8_MAX_TENSOR_SHARE * c.bytes_before


# ------------------------------------------------------------------ option and method errors


@pytest.mark.parametrize(
    "method, options, flag",
    [
        ("weights-int8", {"bogus": 1}, "--bogus"),
        ("palettize", {"levels": 1}, "--levels"),
        ("palettize", {"levels": 70000}, "--levels"),
        ("palettize", {"levels": "many"}, "--levels"),
        ("palettize", {"algorithm": "median"}, "--algorithm"),
        ("weights-int8", {"granularity": "bogus"}, "--granularity"),
        ("weights-int8", {"min_elements": "abc"}, "--min-elements"),
        ("weights-int8", {"min_elements": 0}, "--min-elements"),
        ("weights-int8", {"symmetric": "maybe"}, "--symmetric"),
        ("float16", {"levels": 16}, "--levels"),
        ("float16", {"mode": "fast"}, "--mode"),
        ("dynamic-int8", {"min_elements": 10}, "--min-elements"),
        ("dynamic-int8", {"weight_type": "int4"}, "--weight-type"),
    ],
)
def test_bad_options_raise_option_error_naming_the_flag(method, options, flag):
    with pytest.raises(OptionError) as info:
        shrinkray.shrink(_original("mlp"), method, **options)
    assert isinstance(info.value, ShrinkRayError)
    assert flag in str(info.value)


def test_option_strings_are_coerced():
    variant = _variant("palettize", "mlp", (("levels", "16"),))
    assert variant.options["levels"] == 16
    assert len(variant.changes) == 3 and all(int(c.encoding.split()[0]) <= 16 for c in variant.changes)
    assert _variant("weights-int8", "mlp", (("symmetric", "no"),)).options["symmetric"] is False


def test_unknown_method_lists_the_available_ones():
    with pytest.raises(MethodError) as info:
        shrinkray.shrink(_original("mlp"), "int4-magic")
    message = str(info.value)
    assert "int4-magic" in message
    for name in METHODS:
        assert name in message


def test_method_names_are_normalised():
    assert shrinkray.get_method(" Weights_Int8 ").name == "weights-int8"


def test_selection_globs_match_whole_names():
    # fnmatch semantics: 'fc2' alone matches no tensor name (they end in '.weight')
    assert _names(_variant("weights-int8", "mlp", (("include", ("fc2",)),))) == set()


def test_in_place_rewrites_the_given_model_and_still_validates():
    model = _original("mlp")
    work = onnx.ModelProto()
    work.CopyFrom(model)
    variant = shrinkray.shrink(work, "weights-int8", in_place=True)
    assert variant.model is work  # no copy of the weights was made
    assert "fc2.weight" not in {t.name for t in work.graph.initializer}
    shrinkray.validate(variant.model)
    untouched = shrinkray.shrink(model, "weights-int8")
    assert untouched.model is not model
    assert "fc2.weight" in {t.name for t in model.graph.initializer}


@pytest.mark.parametrize("bad", [np.inf, np.nan, 1e39])
def test_weights_int8_keeps_a_tensor_it_cannot_code_and_says_so(bad):
    """inf/NaN, or a float64 value beyond float32's range (no float32 scale reaches it): kept as it was."""
    w = np.random.default_rng(0).normal(size=(64, 64))
    w[3, 5] = bad
    good = np.random.default_rng(1).normal(size=(64, 64))
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "W"], ["t"]), helper.make_node("Add", ["t", "G"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [64, 64])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(good, "G")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    variant = shrinkray.shrink(model, "weights-int8", min_elements=1024)
    assert [c.name for c in variant.changes] == ["G"]
    assert any("Kept 'W' as it was" in w and "float32's range" in w for w in variant.warnings), variant.warnings
    kept = next(t for t in variant.model.graph.initializer if t.name == "W")
    np.testing.assert_array_equal(numpy_helper.to_array(kept), w)

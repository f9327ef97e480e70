"""What each output is (scores / continuous / embedding / exact), on the samples and on hand-built graphs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import SAMPLE_NAMES, cached_sample
from onnx import TensorProto, helper

from shrinkray.measure.output_kinds import VOCABULARY, classify_output, classify_outputs
from shrinkray.measure.parity import KINDS, VerdictSettings
from shrinkray.measure.parity_inputs import parity_inputs
from shrinkray.measure.results import CompareSettings

# ------------------------------------------------------------------ the samples

#: output -> (kind, class axis for scores, words of the reason) for every output of every sample.
EXPECTED = {
    "mlp": {"logits": ("scores", -1, "named like class scores"), "probs": ("scores", -1, "Softmax over axis 1")},
    "cnn": {"scores": ("scores", -1, "named like class scores")},
    "transformer": {
        "last_hidden_state": ("embedding", -1, "named like an embedding"),
        "pooled": ("embedding", -1, "named like an embedding"),
    },
    "rnn": {
        "final_hidden": ("embedding", -1, "named like an embedding"),
        "logits": ("scores", -1, "named like class scores"),
    },
    "subgraph": {"y": ("continuous", -1, "own range"), "branch_out": ("continuous", -1, "own range")},
    "fp16": {"logits": ("scores", -1, "named like class scores"), "probs": ("scores", -1, "Softmax over axis 1")},
    "shared_weight": {
        "logits": ("scores", -1, "named like class scores"),
        "hidden": ("embedding", -1, "named like an embedding"),
    },
    "tree": {"label": ("exact", -1, "int64"), "probabilities": ("scores", -1, "named like class scores")},
    # messy runs as 4 single runs stacked on a new axis 0: the kinds are read from one run, so its
    # unnamed Gemm output is [batch, 10] logits and its opset-11 Softmax's axis 1 is the class axis
    "messy": {
        "output": ("scores", -1, "[batch, 10] from a linear layer (Gemm)"),
        "label": ("exact", -1, "class labels computed by ArgMax"),  # judged like top-1 (test_measure_labels.py)
        "probs": ("scores", -1, "Softmax over axis 1"),
    },
}


def test_every_sample_has_expectations():
    assert set(EXPECTED) == set(SAMPLE_NAMES)


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_sample_outputs_classified(name):
    inputs = parity_inputs(cached_sample(name), CompareSettings())
    assert list(inputs.kinds) == [o.name for o in cached_sample(name).graph.output]
    for output, (kind, axis, words) in EXPECTED[name].items():
        got = inputs.kinds[output]
        assert (got.kind, got.axis) == (kind, axis), (output, got)
        assert words in got.why, (output, got.why)
        assert got.kind in KINDS


def test_user_kinds_win_on_a_sample():
    verdict = VerdictSettings(kinds={"probs": "continuous", "logits": "embedding"})
    kinds = parity_inputs(cached_sample("mlp"), CompareSettings(verdict=verdict)).kinds
    assert kinds["probs"].kind == "continuous" and kinds["probs"].why == "set by you"
    assert kinds["logits"].kind == "embedding"


# ------------------------------------------------------------------ hand-built graphs


def graph_model(nodes, outputs: dict[str, list], inputs: dict[str, list] | None = None, opset: int = 17):
    """A model of ``nodes`` with float inputs/outputs of the given shapes (never run: classification reads the graph)."""
    inputs = inputs or {"x": ["batch", 8]}
    model = helper.make_model(
        helper.make_graph(
            nodes,
            "kinds",
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs.items()],
        ),
        opset_imports=[helper.make_opsetid("", opset)],
    )
    model.ir_version = 8
    return model


def kind_of(model: onnx.ModelProto, name: str, shape, dtype=np.float32):
    return classify_output(name, np.zeros(shape, dtype), model)


@pytest.mark.parametrize(
    ("axis", "shape", "expected"),
    [(1, (2, 5, 4, 4), -3), (-1, (2, 3, 7), -1), (2, (2, 3, 7), -1), (-2, (2, 6, 3), -2)],
)
def test_softmax_gives_scores_along_its_axis(axis, shape, expected):
    model = graph_model([helper.make_node("Softmax", ["x"], ["out"], axis=axis)], {"out": list(shape)})
    got = kind_of(model, "out", shape)
    assert (got.kind, got.axis) == ("scores", expected)
    assert f"Softmax over axis {expected + len(shape)}" in got.why


def test_a_ctc_readers_alphabet_in_its_metadata_travels_with_its_scores():
    """PaddleOCR exports keep the characters under ``character``: the scores of a [batch, steps, classes]
    output carry them (read as text, the space class after them); an output of another rank does not."""
    nodes = [helper.make_node("Softmax", ["x"], ["rec"], axis=-1), helper.make_node("Softmax", ["x"], ["cls"])]
    model = graph_model(nodes, {"rec": ["b", 10, 4], "cls": ["b", 4]}, inputs={"x": ["b", 10, 4]})
    reference = {"rec": np.zeros((1, 10, 4), np.float32), "cls": np.zeros((1, 4), np.float32)}
    assert classify_outputs(model, reference)["rec"].alphabet == ()
    helper.set_model_props(model, {"character": "a\nb"})
    kinds = classify_outputs(model, reference)
    assert kinds["rec"].alphabet == ("a", "b", " ") and kinds["cls"].alphabet == ()


def test_softmax_default_axis_depends_on_the_opset():
    node = [helper.make_node("Softmax", ["x"], ["out"])]
    assert kind_of(graph_model(node, {"out": [2, 5, 3]}, opset=13), "out", (2, 5, 3)).axis == -1
    old = kind_of(graph_model(node, {"out": [2, 5, 3]}, opset=11), "out", (2, 5, 3))  # opset < 13: axis 1
    assert (old.kind, old.axis) == ("scores", -2)


def test_log_softmax_and_pass_through_ops():
    nodes = [
        helper.make_node("LogSoftmax", ["x"], ["ls"], axis=-1),
        helper.make_node("Identity", ["ls"], ["id"]),
        helper.make_node("Cast", ["id"], ["out"], to=TensorProto.FLOAT),
    ]
    got = kind_of(graph_model(nodes, {"out": ["batch", 8]}), "out", (3, 8))
    assert (got.kind, got.axis) == ("scores", -1)
    assert "LogSoftmax" in got.why


def _softmax_values(shape, axis, seed=0):
    logits = np.random.default_rng(seed).normal(size=shape)
    e = np.exp(logits - logits.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(np.float32)


def test_softmax_then_transpose_finds_the_class_axis_from_the_values():
    # CTC recognizers: Softmax over classes, then Transpose to [time, batch, classes] -> classes moved
    nodes = [
        helper.make_node("Softmax", ["x"], ["sm"], axis=1),  # [batch, classes=6, time=9]
        helper.make_node("Transpose", ["sm"], ["out"], perm=[2, 0, 1]),  # [time, batch, classes]
    ]
    model = graph_model(nodes, {"out": [9, 2, 6]})
    values = np.transpose(_softmax_values((2, 6, 9), axis=1), (2, 0, 1))
    got = classify_output("out", values, model)
    assert (got.kind, got.axis) == ("scores", -1)


def test_log_softmax_then_reshape_finds_the_class_axis():
    nodes = [
        helper.make_node("LogSoftmax", ["x"], ["ls"], axis=-1),
        helper.make_node("Reshape", ["ls", "shape"], ["out"]),
    ]
    model = graph_model(nodes, {"out": [4, 7]})
    values = np.log(_softmax_values((4, 7), axis=-1))
    assert classify_output("out", values, model).axis == -1
    # values normalized along no axis (a slice of the classes): not judged as scores on a guessed axis
    assert classify_output("out", values[:, :3].copy(), model).kind != "scores"


def test_a_sigmoid_probability_is_judged_against_at_least_half_its_span():
    """smart-turn: 4 synthesized clips all at p = 0.974-0.982 made one int8 step of the output "9% of the
    range"; a Sigmoid's errors count against at least 0.5, and a real move of a probability still fails."""
    from shrinkray.measure.parity import compare_outputs

    model = graph_model([helper.make_node("Sigmoid", ["x"], ["logits"])], {"logits": ["batch", 1]})
    ref = {"logits": np.array([[0.9745], [0.9781], [0.9812], [0.9768]])}
    kinds = classify_outputs(model, ref)
    assert kinds["logits"].probability and kinds["logits"].kind == "probability"
    step = {"logits": ref["logits"] + np.array([[0.0008], [-0.0008], [0.0016], [0.0]])}
    out = compare_outputs(ref, step, kinds).outputs[0]
    # 4 yes/no decisions can neither pass nor fail: judged as values, by the continuous criteria
    assert "4 yes/no decisions on these inputs, too few" in out.kind_reason
    assert out.measures["range"] == 0.5 and out.passed, out.reason  # 0.0010 / 0.5; against 0.0067 it was 0.15
    moved = {"logits": np.array([[0.9745], [0.8047], [0.9812], [0.9768]])}  # one clip 0.978 -> 0.805
    assert compare_outputs(ref, moved, kinds).outputs[0].status == "fail"  # on the same side, but far off
    # values in [0, 1] from anything else keep their own range: a small ReLU feature is not a probability
    relu = graph_model([helper.make_node("Relu", ["x"], ["feat"])], {"feat": ["batch", 1]})
    feat = {"feat": ref["logits"]}
    assert not classify_outputs(relu, feat)["feat"].probability
    assert not compare_outputs(feat, {"feat": step["logits"]}, classify_outputs(relu, feat)).outputs[0].passed


def test_yes_no_probabilities_are_judged_by_the_side_of_one_half_they_fall_on():
    """silero-vad's and smart-turn's palettized variants move probabilities by 2-5% of the span and flip no
    frame: as values they failed (RMS > 2% of 0.5) though every decision stays; a flipped decision fails."""
    from shrinkray.measure.parity import compare_outputs

    model = graph_model([helper.make_node("Sigmoid", ["x"], ["speech"])], {"speech": ["batch", 1]})
    rng = np.random.default_rng(0)
    ref = {"speech": np.concatenate([rng.uniform(0.0, 0.2, 150), rng.uniform(0.8, 1.0, 150), [0.51, 0.49]])[:, None]}
    kinds = classify_outputs(model, ref)
    assert kinds["speech"].kind == "probability" and "side of 0.5" in kinds["speech"].why
    nudged = {"speech": np.clip(ref["speech"] + rng.choice([-0.03, 0.03], ref["speech"].shape), 0, 1)}
    nudged["speech"][-2:] = [[0.47], [0.53]]  # coin tosses in the original: not counted
    out = compare_outputs(ref, nudged, kinds).outputs[0]
    assert out.measures["relative_rms_error"] > 0.02  # what failed it as values
    assert out.status == "pass" and out.measures["side_decisions"] == 300, out.reason
    flipped = {"speech": nudged["speech"].copy()}
    flipped["speech"][:15] = 0.7  # 15 of 150 silent frames now speech
    bad = compare_outputs(ref, flipped, kinds).outputs[0]
    assert bad.status == "fail" and bad.measures["side_agreement"] == 285 / 300
    # a large Sigmoid output (a mask, a raw per-anchor head) keeps being judged by its values
    big = graph_model([helper.make_node("Sigmoid", ["x"], ["gate"])], {"gate": ["batch", 4096]})
    assert kind_of(big, "gate", (2, 4096)).kind == "continuous"


def test_softmax_over_a_single_entry_is_not_scores():
    model = graph_model([helper.make_node("Softmax", ["x"], ["out"], axis=-1)], {"out": [2, 1]})
    assert kind_of(model, "out", (2, 1)).kind == "continuous"


def test_sigmoid_is_a_probability_even_when_named_like_scores():
    model = graph_model([helper.make_node("Sigmoid", ["x"], ["scores"])], {"scores": ["batch", 8]})
    got = kind_of(model, "scores", (2, 8))
    assert got.kind == "probability"
    assert "Sigmoid" in got.why


@pytest.mark.parametrize(
    ("name", "shape", "kind"),
    [
        ("sentence_embedding", (2, 384), "embedding"),
        ("last_hidden_state", (2, 7, 64), "embedding"),
        ("pooler_output", (2, 64), "embedding"),
        ("image_features", (2, 512), "embedding"),
        ("logits", (2, 10), "scores"),
        ("class_probs", (2, 3, 80), "scores"),
        ("pred_label_scores", (4, 2), "scores"),
        ("logits", (10,), "continuous"),  # rank 1: no batch of positions
        ("logits", (4, 1), "continuous"),  # one class: nothing to decide
        ("logits", (4, 200_000), "continuous"),  # beyond any class count
        ("boxes", (2, 100, 4), "continuous"),
        ("heatmap", (1, 17, 64, 48), "continuous"),
        ("depth", (1, 1, 32, 32), "continuous"),
        ("next_state", (2, 1, 64), "continuous"),
        ("output_0", (2, 8), "continuous"),  # nothing known about it
    ],
)
def test_names(name, shape, kind):
    model = graph_model([helper.make_node("Relu", ["x"], [name])], {name: list(shape)})
    got = kind_of(model, name, shape)
    assert got.kind == kind, got
    if kind == "scores":
        assert got.axis == -1


@pytest.mark.parametrize("op", ["Gemm", "MatMul", "Add"])
def test_batch_by_classes_from_a_linear_layer_is_scores(op):
    nodes = [helper.make_node(op, ["x", "w"], ["output"])]
    model = graph_model(nodes, {"output": ["batch", 10]}, inputs={"x": ["batch", 8], "w": [8, 10]})
    got = kind_of(model, "output", (3, 10))
    assert (got.kind, got.axis) == ("scores", -1)
    assert f"[batch, 10] from a linear layer ({op})" == got.why.split(":")[0]
    # the same output through a reshape is still the layer's
    reshaped = graph_model(
        [*nodes, helper.make_node("Flatten", ["output"], ["flat"])],
        {"flat": ["batch", 10]},
        inputs={"x": ["batch", 8], "w": [8, 10]},
    )
    assert kind_of(reshaped, "flat", (3, 10)).kind == "scores"
    # one value per row, or a non-linear op, is not
    assert kind_of(model, "output", (3, 1)).kind == "continuous"
    relu = graph_model([helper.make_node("Relu", ["x"], ["output"])], {"output": ["batch", 8]})
    assert kind_of(relu, "output", (3, 8)).kind == "continuous"


def test_vocabulary_logits_per_position_are_scores():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["out"])]
    model = graph_model(nodes, {"out": [1, 20, VOCABULARY]}, inputs={"x": [1, 20, 8], "w": [8, VOCABULARY]})
    got = kind_of(model, "out", (1, 20, VOCABULARY))
    assert (got.kind, got.axis) == ("scores", -1)
    assert "vocabulary" in got.why
    assert kind_of(model, "out", (1, 20, 64)).kind == "continuous"  # a hidden width, not a vocabulary


def test_layer_norm_hidden_states_are_embeddings():
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["out"], axis=-1)]
    model = graph_model(nodes, {"out": ["batch", "seq", 64]}, inputs={"x": ["batch", "seq", 64], "g": [64], "b": [64]})
    got = kind_of(model, "out", (2, 7, 64))
    assert got.kind == "embedding"
    assert "LayerNormalization" in got.why and "hidden states" in got.why
    assert kind_of(model, "out", (2, 7, 16)).kind == "continuous"  # too narrow for hidden states


def test_residual_add_hidden_states_are_embeddings():
    model = graph_model(
        [helper.make_node("Add", ["x", "y"], ["out"])],
        {"out": ["batch", "seq", 48]},
        inputs={"x": ["batch", "seq", 48], "y": ["batch", "seq", 48]},
    )
    assert kind_of(model, "out", (2, 5, 48)).kind == "embedding"


def test_pooled_vector_is_an_embedding():
    model = graph_model(
        [helper.make_node("ReduceMean", ["x"], ["out"], axes=[1], keepdims=0)],
        {"out": ["batch", 64]},
        inputs={"x": ["batch", "seq", 64]},
        opset=17,
    )
    got = kind_of(model, "out", (2, 64))
    assert got.kind == "embedding" and "ReduceMean" in got.why


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.bool_])
def test_integer_and_bool_outputs_are_exact(dtype):
    model = graph_model([helper.make_node("Softmax", ["x"], ["probs"])], {"probs": ["batch", 8]})
    got = kind_of(model, "probs", (2, 8), dtype)  # whatever produced it: not float, so exact
    assert got.kind == "exact"
    assert np.dtype(dtype).name in got.why


def test_float64_and_float16_outputs_are_classified_like_float32():
    model = graph_model([helper.make_node("Softmax", ["x"], ["out"])], {"out": ["batch", 8]})
    for dtype in (np.float16, np.float64):
        assert kind_of(model, "out", (2, 8), dtype).kind == "scores"


def test_an_output_that_is_a_graph_input_is_classified_by_name_and_shape():
    model = graph_model([], {"x": ["batch", 8]})
    assert kind_of(model, "x", (2, 8)).kind == "continuous"


def test_user_override_wins_over_every_rule():
    model = graph_model(
        [helper.make_node("Softmax", ["x"], ["probs"]), helper.make_node("Sigmoid", ["x"], ["mask"])],
        {"probs": ["batch", 8], "mask": ["batch", 8]},
    )
    reference = {"probs": np.zeros((2, 8), np.float32), "mask": np.zeros((2, 8), np.float32)}
    plain = classify_outputs(model, reference)
    assert (plain["probs"].kind, plain["mask"].kind) == ("scores", "probability")
    chosen = classify_outputs(model, reference, VerdictSettings(kinds={"probs": "embedding", "mask": "scores"}))
    assert chosen["probs"].kind == "embedding" and chosen["probs"].why == "set by you"
    assert (chosen["mask"].kind, chosen["mask"].axis) == ("scores", -1)
    # a kind for an output the model does not have changes nothing
    assert classify_outputs(model, reference, VerdictSettings(kinds={"nope": "exact"})) == plain


# ------------------------------------------------------------------ probability maps and detection heads


def blob_map(shape=(1, 1, 32, 32)) -> np.ndarray:
    """A text-detector-like probability map: background ~0.01, one rectangle of ~0.95."""
    m = np.full(shape, 0.01, np.float32)
    m[..., 8:14, 4:28] = 0.95
    return m


def yolov8_head(anchors: int = 300, classes: int = 3, seed: int = 0) -> np.ndarray:
    """[1, 4 + classes, anchors]: pixel boxes (cx, cy, w, h) on a 320 px image, sigmoid class scores."""
    rng = np.random.default_rng(seed)
    boxes = np.column_stack([rng.uniform(20, 300, (anchors, 2)), rng.uniform(10, 80, (anchors, 2))])
    scores = rng.uniform(0, 0.05, (anchors, classes))
    return np.concatenate([boxes, scores], axis=1).T[None].astype(np.float32)


def test_a_sigmoid_probability_map_is_a_map():
    model = graph_model([helper.make_node("Sigmoid", ["x"], ["prob"])], {"prob": [1, 1, 32, 32]})
    got = classify_output("prob", blob_map(), model)
    assert got.kind == "map", got
    assert "32 x 32 grid" in got.why


@pytest.mark.parametrize(
    ("values", "why"),
    [
        (np.zeros((1, 1, 32, 32), np.float32), "nothing above 0.5"),
        (np.random.default_rng(0).uniform(0, 1, (1, 3, 32, 32)).astype(np.float32), "an image in [0, 1]"),
        (blob_map((1, 1, 32, 8)), "too narrow for a grid"),
        (blob_map() * 2, "beyond [0, 1]"),
    ],
)
def test_what_is_not_a_map(values, why):
    model = graph_model([helper.make_node("Sigmoid", ["x"], ["prob"])], {"prob": list(values.shape)})
    assert classify_output("prob", values, model).kind == "continuous", why


def test_a_yolov8_head_is_detections_with_attributes_on_axis_minus_2():
    model = graph_model([helper.make_node("Concat", ["x", "x"], ["output0"], axis=1)], {"output0": [1, 7, 300]})
    got = classify_output("output0", yolov8_head(), model)
    assert (got.kind, got.axis) == ("detections", -2), got
    assert "detection head" in got.why and "objectness" not in got.why


def test_a_raw_yolox_head_is_detections_placed_on_the_input_grid():
    # 64 x 64 input: 8x8 + 4x4 + 2x2 = 84 anchors; raw offsets and log sizes (some negative), objectness
    rng = np.random.default_rng(1)
    raw = np.column_stack([rng.uniform(-0.5, 1.5, (84, 2)), rng.uniform(-1, 2, (84, 2)),
                           rng.uniform(0, 0.02, (84, 1)), rng.uniform(0, 1, (84, 2))])  # fmt: skip
    model = graph_model(
        [helper.make_node("Concat", ["x", "x"], ["output"], axis=1)],
        {"output": [1, 84, 7]},
        inputs={"images": [1, 3, 64, 64]},
    )
    got = classify_output("output", raw[None].astype(np.float32), model)
    assert (got.kind, got.axis, got.input_size) == ("detections", -1, (64, 64)), got
    assert "raw YOLOX" in got.why and "objectness" in got.why


@pytest.mark.parametrize(
    ("op", "values", "why"),
    [
        ("Sigmoid", np.random.default_rng(2).uniform(0, 1, (1, 300, 10)), "per-anchor class scores (Sigmoid)"),
        ("Concat", np.random.default_rng(3).uniform(0, 1, (1, 300, 10)), "every column a probability"),
        ("Add", np.random.default_rng(4).normal(0, 1, (2, 300, 16)), "hidden states: negative scores"),
        ("Concat", np.column_stack([np.random.default_rng(5).uniform(-1, 2, (50, 4)),
                                    np.full((50, 3), 0.5)])[None], "raw values on no YOLOX grid"),  # fmt: skip
    ],
)
def test_what_is_not_a_detection_head(op, values, why):
    model = graph_model([helper.make_node(op, ["x", "x"] if op != "Sigmoid" else ["x"], ["out"])],
                        {"out": list(values.shape)})  # fmt: skip
    assert classify_output("out", values.astype(np.float32), model).kind != "detections", why


def test_user_can_choose_the_new_kinds():
    assert {"map", "detections"} <= set(KINDS)
    verdict = VerdictSettings(kinds={"probs": "detections"})
    assert verdict.kinds["probs"] == "detections"


def test_a_wide_hidden_activation_exposed_as_an_output_is_not_a_vocabulary():
    """Issue 28: an MLP's 8192-wide activation, also an output, was judged as class scores on 3 decisions."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from shrinkray.measure.output_kinds import classify_output

    rng = np.random.default_rng(0)
    name = "/mlp/up/MatMul_output_0"
    up = numpy_helper.from_array(rng.standard_normal((16, 8192)).astype(np.float32), "up")
    down = numpy_helper.from_array(rng.standard_normal((8192, 16)).astype(np.float32), "down")
    nodes = [helper.make_node("MatMul", ["x", "up"], [name]), helper.make_node("Relu", [name], ["act"]),
             helper.make_node("MatMul", ["act", "down"], ["y"])]  # fmt: skip
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16]),
                               helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 4, 8192])], [up, down])  # fmt: skip
    model = helper.make_model(graph)
    kind = classify_output(name, np.zeros((1, 4, 8192), np.float32), model)
    assert kind.kind == "continuous" and "hidden activation" in kind.why
    # the same width at the end of the graph is a vocabulary's logits
    final = onnx.ModelProto()
    final.CopyFrom(model)
    del final.graph.node[1:]
    assert classify_output(name, np.zeros((1, 4, 8192), np.float32), final).kind == "scores"


def test_a_mean_of_sigmoids_chosen_by_an_if_is_a_probability():
    """silero-vad: output <- Identity <- If (the sample rate) <- Unsqueeze <- ReduceMean <- Sigmoid: as 'values' its
    256-value palettize failed on an RMS of 2.1% of the span, with no frame flipped."""

    def branch(tag: str, op: str) -> onnx.GraphProto:
        nodes = [helper.make_node(op, ["x"], [f"{tag}_s"]),
                 helper.make_node("ReduceMean", [f"{tag}_s"], [f"{tag}_m"], axes=[1], keepdims=1)]  # fmt: skip
        return helper.make_graph(nodes, tag, [], [helper.make_tensor_value_info(f"{tag}_m", TensorProto.FLOAT, None)])

    def model(else_op: str) -> onnx.ModelProto:
        cond = helper.make_tensor("cond", TensorProto.BOOL, [], [True])
        nodes = [helper.make_node("Constant", [], ["c"], value=cond),
                 helper.make_node("If", ["c"], ["chosen"], then_branch=branch("a", "Sigmoid"),
                                  else_branch=branch("b", else_op)),
                 helper.make_node("Identity", ["chosen"], ["output"])]  # fmt: skip
        return graph_model(nodes, {"output": ["batch", 1]})

    value = {"output": np.array([[0.1], [0.9]], np.float32)}
    assert classify_outputs(model("Sigmoid"), value)["output"].kind == "probability"
    assert classify_outputs(model("Tanh"), value)["output"].kind != "probability"  # one branch is no probability

"""Segmentation heads (YOLOv8/11-seg): boxes + class scores + mask coefficients, beside mask prototypes.

captcha-recognizer's slider model has ``output0`` [1, 37, 8400] = 4 box rows + 1 class score + 32 mask
coefficients and ``output1`` [1, 32, 160, 160] prototypes. The coefficients are not probabilities, so the
head did not read as ``[batch, 4 + classes, anchors]`` and was judged as values: weights-int4 turned 2 boxes
into 6 and the head passed (bench/verdicts_more.md). Here a built model with the same layout, small.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from shrinkray.measure.confidence import UNDECIDED
from shrinkray.measure.decisions import head_layout
from shrinkray.measure.output_kinds import classify_outputs, segmentation_heads
from shrinkray.measure.parity import compare_outputs
from shrinkray.measure.parity_inputs import parity_inputs
from shrinkray.measure.results import CompareSettings

ANCHORS, CLASSES, MASKS, SIZE = 192, 2, 32, 64
BOXES = [(20.0, 20.0, 16.0, 12.0, 0, 0.9), (44.0, 40.0, 20.0, 24.0, 1, 0.8)]


def seg_head(boxes=BOXES, seed: int = 0) -> np.ndarray:
    """[1, 4 + CLASSES + MASKS, ANCHORS]: pixel boxes on a 64 px image, sigmoid scores (background <= 0.03),
    then mask coefficients (any sign, several units: not probabilities)."""
    rng = np.random.default_rng(seed)
    rows = np.column_stack([rng.uniform(8, 56, (ANCHORS, 2)), rng.uniform(4, 20, (ANCHORS, 2)),
                            rng.uniform(0, 0.03, (ANCHORS, CLASSES)), rng.normal(0, 2, (ANCHORS, MASKS))])  # fmt: skip
    for k, (cx, cy, w, h, cls, score) in enumerate(boxes):
        rows[k, :4] = (cx, cy, w, h)
        rows[k, 4 + cls] = score
    return rows.T[None].astype(np.float32)


def prototypes(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 1, (1, MASKS, SIZE // 4, SIZE // 4)).astype(np.float32)


def seg_model(head: np.ndarray, protos: np.ndarray | None) -> onnx.ModelProto:
    """images [1, 3, 64, 64] -> output0 (the head's values), output1 (the prototypes): constants plus 0 x the
    image's mean, so that the graph runs on any input and its outputs are these."""
    consts = {"head": head} | ({"protos": protos} if protos is not None else {})
    nodes = [helper.make_node("ReduceMean", ["images"], ["mean"], keepdims=0),
             helper.make_node("Mul", ["mean", "zero"], ["nothing"])]  # fmt: skip
    outputs = []
    for index, name in enumerate(consts):
        out = f"output{index}"
        nodes.append(helper.make_node("Add", [name, "nothing"], [out]))
        outputs.append(helper.make_tensor_value_info(out, TensorProto.FLOAT, list(consts[name].shape)))
    inits = [numpy_helper.from_array(v, k) for k, v in consts.items()]
    inits.append(numpy_helper.from_array(np.array(0.0, np.float32), "zero"))
    graph = helper.make_graph(
        nodes, "seg", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, SIZE, SIZE])], outputs, inits
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_the_head_and_its_prototypes_are_told_apart_through_the_product_path():
    inputs = parity_inputs(seg_model(seg_head(), prototypes()), CompareSettings())
    head, protos = inputs.kinds["output0"], inputs.kinds["output1"]
    assert (head.kind, head.axis, head.masks, head.input_size) == ("detections", -2, MASKS, (SIZE, SIZE)), head
    assert "segmentation head" in head.why and "32 mask coefficients" in head.why and "output1" in head.why
    assert protos.kind == "continuous" and "mask prototypes of the segmentation head output0" in protos.why


def test_without_prototypes_the_coefficients_keep_it_from_reading_as_boxes():
    assert head_layout(seg_head(), (SIZE, SIZE)) is None  # the coefficients are no scores
    kinds = classify_outputs(seg_model(seg_head(), None), {"output0": seg_head()})
    assert kinds["output0"].kind != "detections" and kinds["output0"].masks == 0


def test_prototypes_of_another_batch_or_a_head_of_too_few_attributes_are_no_segmentation_head():
    assert segmentation_heads({"output0": seg_head(), "output1": np.concatenate([prototypes()] * 2)}, None) == {}
    short = seg_head()[:, : 4 + MASKS]  # 4 box rows + 32 values: nothing left for a class score
    assert segmentation_heads({"output0": short, "output1": prototypes()}, None) == {}
    assert segmentation_heads({"output0": seg_head(), "output1": prototypes()}, None) == {"output0": ("output1", 32)}


def test_boxes_decide_the_head_not_its_coefficients():
    model = seg_model(seg_head(), prototypes())
    ref = {"output0": seg_head(), "output1": prototypes()}
    kinds = classify_outputs(model, ref)
    shaken = seg_head(seed=0)
    shaken[0, 4 + CLASSES :] = seg_head(seed=5)[0, 4 + CLASSES :]  # every coefficient changes, no box moves
    parity = compare_outputs(ref, {"output0": shaken, "output1": prototypes()}, kinds)
    assert parity.outputs[0].status == UNDECIDED, parity.outputs[0].reason  # kept, but 2 boxes decide nothing
    assert parity.outputs[0].measures["box_agreement"] == 1.0
    assert parity.outputs[0].decisions == "all 2 boxes kept (IoU >= 0.9)"
    moved = seg_head([BOXES[0], (50.0, 40.0, 20.0, 24.0, 1, 0.8)])  # 6 px on a 20 px box: IoU 0.54
    parity = compare_outputs(ref, {"output0": moved, "output1": prototypes()}, kinds)
    assert not parity.outputs[0].passed
    assert parity.outputs[0].reason.startswith("1 of 2 boxes moved (IoU 0.5")


def test_prototypes_are_judged_as_values():
    model = seg_model(seg_head(), prototypes())
    ref = {"output0": seg_head(), "output1": prototypes()}
    kinds = classify_outputs(model, ref)
    parity = compare_outputs(ref, {"output0": seg_head(), "output1": prototypes() * 1.2}, kinds)
    assert parity.outputs[0].passed and not parity.outputs[1].passed
    assert parity.outputs[1].reason.startswith("relative rms error 0.")  # 20% larger: beyond 2% of its range

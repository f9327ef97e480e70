"""What a user's post-processing decides from a probability map or a detection head, original vs variant.

Values of these outputs matter only through a threshold: a text detector keeps the regions of its
probability map above 0.3, a YOLO head keeps the boxes whose score passes 0.25 after non-maximum
suppression. Judging their values (RMS error, cosine) fails variants whose boxes do not move and
passes ones where a box moves (measured on PP-OCR's and NudeNet's real outputs, 2026-11-23: docs/benchmarks.md "Verdicts on real models"),
so these measures redo that post-processing on both outputs and compare the decisions:

- probability maps: regions above 0.3 and above 0.5 (8-connected, at least 3 px on each side),
  their bounding boxes with a one-pixel margin (a map is a coarse grid, and every detector grows
  its boxes further), matched by IoU;
- detection heads (``[batch, 4 + classes, anchors]`` as YOLOv8, ``[batch, anchors, 5 + classes]``
  with objectness as YOLOv5/YOLOX, raw YOLOX offsets decoded on their stride 8/16/32 grid, the same
  followed by mask coefficients as YOLOv8/11-seg): boxes scoring >= 0.25 after class-wise NMS at
  IoU 0.45, matched by class and IoU.

A box or region "kept" has a partner with IoU >= 0.9; "moved" has one only below that; "lost" /
"new" has none. One whose score is within 0.05 of the threshold and has no partner is a coin toss
in the original itself and is not counted (like tied top-1 classes). A tiny box (short side under
TINY_SIDE px) whose every edge moved by at most SLACK_PX is kept whatever its IoU: on a text line
9 px tall one pixel row is IoU 0.8, a change no one sees (measured 2026-11-24: docs/benchmarks.md "Verdicts on real models").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: A kept box or region overlaps its partner at least this much (the bench's task checks use 0.9).
MATCH_IOU = 0.9
#: Below MATCH_IOU but at least this: the same object, moved; below it: lost (and the partner new).
MOVED_IOU = 0.3
#: Score thresholds: map regions (DB text detectors use 0.3, most segmenters 0.5), detection boxes.
MAP_THRESHOLDS = (0.3, 0.5)
BOX_THRESHOLD = 0.25
NMS_IOU = 0.45
#: A box or region without partner whose score is this close to the threshold is a coin toss.
MARGIN = 0.05
#: Regions thinner than this (pixels) are specks (DB drops them too).
MIN_SIDE = 3
#: At most this many candidate boxes per image go into NMS (best scores first).
MAX_CANDIDATES = 1000
#: Sigmoid in float32 rounds to 1.0000001 (PP-OCRv5's detector on every page): values this far outside [0, 1]
#: are still probabilities.
PROBABILITY_SLACK = 1e-5
#: A map with more regions than this in one image is speckle, not objects: it is judged as values.
MAX_REGIONS = 1000
YOLOX_STRIDES = (8, 16, 32)
#: Box columns all within +-this are raw offsets and log sizes, not pixel coordinates.
RAW_LIMIT = 16.0
#: A box whose short side (regions: with their margin) is under TINY_SIDE px and whose every edge moved by at most
#: SLACK_PX is kept, whatever its IoU. Measured (2026-11-24): on 256 x 256 synthesized pages, text lines
#: 7-11 px tall lose or gain a pixel row (IoU 0.75-0.89) in variants whose task check passes; on realistic pages
#: lines are 13-20 px, and PP-OCRv5's weights-int4 moves an 18 px line by one pixel on every edge (IoU 0.89), which
#: its task check fails (0.871 after DB's unclip): so only lines under 12 px get the slack, and one pixel of it.
SLACK_PX = 1.0
TINY_SIDE = 12.0


@dataclass
class Decisions:
    """Boxes or regions of the original matched with the variant's, counted for the verdict."""

    what: str  # "boxes" or "regions"
    total: int  # counted: kept + moved + lost + new
    kept: int
    moved: int
    lost: int
    new: int
    worst_iou: float  # of the moved (or kept) pairs; 1.0 when none
    threshold: float
    nudged: int = 0  # of the kept: tiny ones below MATCH_IOU whose edges moved by at most SLACK_PX

    @property
    def agreement(self) -> float:
        return self.kept / self.total if self.total else 1.0

    def text(self) -> str:
        """'2 of 37 boxes moved (IoU 0.85 < 0.9), 1 of 37 boxes lost' in the user's terms."""
        n = self.kept + self.moved + self.lost
        parts = []
        if self.moved:
            parts.append(f"{self.moved} of {_noun(n, self.what)} moved (IoU {self.worst_iou:.2f} < {MATCH_IOU:g})")
        if self.lost:
            parts.append(f"{self.lost} of {_noun(n, self.what)} lost")
        if self.new:
            parts.append(f"{self.new} new {_noun(self.new, self.what)[len(str(self.new)) + 1:]}")
        if not parts:
            tiny = f"; {self.nudged} tiny within {SLACK_PX:g} px" if self.nudged else ""
            return f"all {_noun(n, self.what)} kept (IoU >= {MATCH_IOU:g}{tiny})"
        where = f" above {self.threshold:g}" if self.what == "regions" else ""
        return ", ".join(parts) + where

    def measures(self) -> dict[str, float]:
        key = "box" if self.what == "boxes" else "region"
        return {
            f"{key}_agreement": self.agreement,
            f"{key}_decisions": float(self.total),  # what the agreement divides by: what a verdict rests on
            f"{self.what}": float(self.kept + self.moved + self.lost),
            f"{self.what}_moved": float(self.moved),
            f"{self.what}_lost": float(self.lost),
            f"{self.what}_new": float(self.new),
            f"{self.what}_nudged": float(self.nudged),
            f"worst_{key}_iou": self.worst_iou,
        }


def _noun(count: int, plural: str) -> str:
    """'1 box', '3 boxes', '1 region'."""
    if count != 1:
        return f"{count} {plural}"
    return f"1 {plural[:-2] if plural.endswith('xes') else plural[:-1]}"


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box of ``a`` with every box of ``b`` (rows x1, y1, x2, y2)."""
    a, b = np.asarray(a, np.float64).reshape(-1, 4), np.asarray(b, np.float64).reshape(-1, 4)
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(rb - lt, 0, None), axis=2)
    area_a = np.prod(np.clip(a[:, 2:] - a[:, :2], 0, None), axis=1)
    area_b = np.prod(np.clip(b[:, 2:] - b[:, :2], 0, None), axis=1)
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)


def within_slack(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether box ``b`` is box ``a`` give or take the grid's jitter: ``a`` is tiny (short side under TINY_SIDE)
    and no edge moved by more than SLACK_PX."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    short = min(a[2] - a[0], a[3] - a[1])
    return bool(short < TINY_SIDE and np.abs(a - b).max() <= SLACK_PX)


def _match(a_box, a_cls, a_score, b_box, b_cls, b_score,
           threshold: float) -> tuple[int, int, int, int, float, int, int]:  # fmt: skip
    """Greedy one-to-one matching by IoU (same class): kept, moved, lost, new, worst IoU (of the moved pairs,
    else of the kept), skipped, nudged (kept by SLACK_PX)."""
    m = iou_matrix(a_box, b_box) if len(a_box) and len(b_box) else np.zeros((len(a_box), len(b_box)))
    if m.size:
        m = np.where(np.asarray(a_cls)[:, None] == np.asarray(b_cls)[None, :], m, 0.0)
    used_a: set[int] = set()
    used_b: set[int] = set()
    kept = moved = nudged = 0
    worst_kept = worst_moved = 1.0
    for flat in np.argsort(-m, axis=None, kind="stable"):  # float16-safe: IoU in float64
        i, j = divmod(int(flat), m.shape[1])
        if i in used_a or j in used_b or m[i, j] < MOVED_IOU:
            continue
        used_a.add(i)
        used_b.add(j)
        if m[i, j] >= MATCH_IOU or within_slack(a_box[i], b_box[j]):
            kept += 1
            nudged += int(m[i, j] < MATCH_IOU)
            worst_kept = min(worst_kept, float(m[i, j]))
        else:
            moved += 1
            worst_moved = min(worst_moved, float(m[i, j]))
    near = threshold + MARGIN
    lost_scores = [a_score[i] for i in range(len(a_box)) if i not in used_a]
    new_scores = [b_score[j] for j in range(len(b_box)) if j not in used_b]
    lost = sum(s >= near for s in lost_scores)
    new = sum(s >= near for s in new_scores)
    skipped = len(lost_scores) + len(new_scores) - lost - new
    return kept, moved, lost, new, worst_moved if moved else worst_kept, skipped, nudged


def _combine(what: str, threshold: float, parts: list[tuple[int, int, int, int, float, int, int]]) -> Decisions:
    kept = sum(p[0] for p in parts)
    moved = sum(p[1] for p in parts)
    lost = sum(p[2] for p in parts)
    new = sum(p[3] for p in parts)
    worst = min((p[4] for p in parts if (p[1] if moved else p[0])), default=1.0)
    nudged = sum(p[6] for p in parts)
    return Decisions(what, kept + moved + lost + new, kept, moved, lost, new, worst, threshold, nudged)


# ---- probability maps ------------------------------------------------------------------------


def regions(values: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Bounding boxes (x1, y1, x2, y2, exclusive ends) and peak values of the 8-connected regions of a 2-D
    map above ``threshold``; regions thinner than MIN_SIDE pixels are dropped."""
    h, w = values.shape
    mask = np.zeros((h, w + 2), np.int8)
    mask[:, 1:-1] = values > threshold
    d = np.diff(mask, axis=1)
    ry, rx0 = np.nonzero(d == 1)  # runs in row-major order
    _, rx1 = np.nonzero(d == -1)
    n = ry.size
    if n == 0:
        return np.zeros((0, 4)), np.zeros(0)
    width = w + 2
    key0 = ry.astype(np.int64) * width + rx0
    key1 = ry.astype(np.int64) * width + rx1
    prev = (ry.astype(np.int64) - 1) * width
    # runs of the row above touching each run (8-connected): a0 <= b1 and a1 >= b0
    lo = np.searchsorted(key1, prev + rx0, side="left")  # float16-safe: integer keys
    hi = np.searchsorted(key0, prev + rx1, side="right") - 1  # float16-safe: integer keys
    count = np.clip(hi - lo + 1, 0, None)
    b = np.repeat(np.arange(n), count)
    a = np.repeat(lo, count) + (np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count))
    label = _components(n, a, b)
    flat = np.append(values.reshape(-1), values.dtype.type(0))
    starts = ry.astype(np.int64) * w + rx0
    bounds = np.stack([starts, starts + (rx1 - rx0)], 1).reshape(-1)
    run_peak = np.maximum.reduceat(flat, bounds)[::2].astype(np.float64)
    comps, index = np.unique(label, return_inverse=True)  # float16-safe: integer labels
    k = comps.size
    x0 = np.full(k, w)
    y0 = np.full(k, h)
    x1 = np.zeros(k, np.int64)
    y1 = np.zeros(k, np.int64)
    peak = np.zeros(k)
    np.minimum.at(x0, index, rx0)
    np.minimum.at(y0, index, ry)
    np.maximum.at(x1, index, rx1)
    np.maximum.at(y1, index, ry + 1)
    np.maximum.at(peak, index, run_peak)
    boxes = np.stack([x0, y0, x1, y1], 1).astype(np.float64)
    big = np.minimum(x1 - x0, y1 - y0) >= MIN_SIDE
    return boxes[big], peak[big]


def _components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Connected components of ``n`` nodes joined by edges (a, b): each node's lowest member. Roots hook
    onto the lower root across every edge, then paths are shortened to their root (Shiloach-Vishkin):
    a few rounds even for a component spanning the whole map."""
    parent = np.arange(n)
    while True:
        ra, rb = parent[a], parent[b]
        differ = ra != rb
        if not differ.any():
            return parent
        np.minimum.at(parent, np.maximum(ra, rb)[differ], np.minimum(ra, rb)[differ])
        while True:
            jumped = parent[parent]
            if np.array_equal(jumped, parent):
                break
            parent = jumped


#: DB text detection as PaddleOCR / rapidocr read its map: regions above DB_THRESHOLD whose box has a mean
#: probability of at least DB_BOX_THRESHOLD, each box pushed out by area x DB_UNCLIP / perimeter.
DB_THRESHOLD, DB_BOX_THRESHOLD, DB_UNCLIP = 0.3, 0.5, 1.6


def text_boxes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The text boxes a DB detector's map gives (x1, y1, x2, y2) and their mean probabilities: what the OCR
    pipeline crops and reads, so an edge that moves a pixel on a line pushed out by its unclip is no change."""
    boxes, _ = regions(values, DB_THRESHOLD)
    if not len(boxes):
        return boxes, np.zeros(0)
    total = np.zeros((values.shape[0] + 1, values.shape[1] + 1))
    total[1:, 1:] = np.cumsum(np.cumsum(values, axis=0), axis=1)  # summed-area table: each box's mean at once
    x0, y0, x1, y1 = (boxes[:, k].astype(np.int64) for k in range(4))
    area = (x1 - x0) * (y1 - y0)
    mean = (total[y1, x1] - total[y0, x1] - total[y1, x0] + total[y0, x0]) / np.maximum(area, 1)
    keep = mean >= DB_BOX_THRESHOLD
    w, h = (x1 - x0)[keep], (y1 - y0)[keep]
    d = (w * h * DB_UNCLIP / (2.0 * (w + h)))[:, None]
    return boxes[keep] + np.hstack([-d, -d, d, d]), mean[keep]


def map_decisions(reference: np.ndarray, variant: np.ndarray, text: bool = False) -> Decisions | str:
    """Regions of every 2-D map (the last two axes), original vs variant, at each of MAP_THRESHOLDS: the
    threshold with the lowest agreement decides. ``text``: a DB text detector's map, judged by its text boxes
    (:func:`text_boxes`) alone. When there is nothing to compare, why not (no region in either output, or
    speckle: more than MAX_REGIONS regions in one map)."""
    ref = np.asarray(reference, np.float64)
    var = np.asarray(variant, np.float64)
    h, w = ref.shape[-2:]
    ref, var = ref.reshape(-1, h, w), var.reshape(-1, h, w)
    ref = np.where(np.isfinite(ref), ref, 0.0)
    var = np.where(np.isfinite(var), var, 0.0)
    margin = np.array([-1.0, -1.0, 1.0, 1.0])
    worst: Decisions | None = None
    for threshold in (DB_BOX_THRESHOLD,) if text else MAP_THRESHOLDS:
        parts = []
        for r, v in zip(ref, var, strict=True):
            a_box, a_peak = text_boxes(r) if text else regions(r, threshold)
            b_box, b_peak = text_boxes(v) if text else regions(v, threshold)
            if max(len(a_box), len(b_box)) > MAX_REGIONS:
                return f"more than {MAX_REGIONS} regions above {threshold:g} in one map (speckle, not objects)"
            pad = 0.0 if text else margin
            parts.append(
                _match(a_box + pad, np.zeros(len(a_box)), a_peak, b_box + pad, np.zeros(len(b_box)), b_peak,
                       threshold)
            )  # fmt: skip
        found = _combine("text boxes" if text else "regions", threshold, parts)
        if found.total and (worst is None or found.agreement < worst.agreement):
            worst = found
    return worst if worst is not None else f"no region above {MAP_THRESHOLDS[0]:g} in either output"


def probabilities(values: np.ndarray) -> bool:
    """Whether every value lies in [0, 1], give or take float32's rounding of a Sigmoid (PROBABILITY_SLACK)."""
    arr = np.asarray(values)
    return bool(arr.size and arr.min() >= -PROBABILITY_SLACK and arr.max() <= 1 + PROBABILITY_SLACK)


def looks_like_map(values: np.ndarray) -> bool:
    """Probabilities on a spatial grid: every value in [0, 1], the last two axes at least 16 wide, at most
    64 maps, some values above 0.5 and some below 0.3, and the map mostly decided (>= 80% of values below
    0.1 or above 0.9: foreground vs background, not an image or a depth map squashed into [0, 1])."""
    arr = np.asarray(values)
    if arr.ndim < 3 or arr.dtype.kind != "f" or min(arr.shape[-2:]) < 16 or arr.size == 0:
        return False
    if arr.size // (arr.shape[-1] * arr.shape[-2]) > 64:
        return False
    if not np.isfinite(arr).all() or not probabilities(arr):
        return False
    if arr.max() <= MAP_THRESHOLDS[-1] or arr.min() >= MAP_THRESHOLDS[0]:
        return False  # no foreground or no background on these inputs: nothing to tell a map by
    decided = np.mean((arr < 0.1) | (arr > 0.9))
    return bool(decided >= 0.8)


# ---- detection heads -------------------------------------------------------------------------


@dataclass(frozen=True)
class HeadLayout:
    """How to read a detection head: which axis holds the attributes, objectness, raw YOLOX offsets."""

    axis: int  # attribute axis, -1 ([.., anchors, attrs]) or -2 ([.., attrs, anchors])
    objectness: bool  # column 4 is an objectness multiplied into the class scores (YOLOv5 / YOLOX)
    grid: tuple[tuple[int, int, int], ...] = ()  # raw YOLOX: (rows, cols, stride) per level, to decode
    masks: int = 0  # segmentation heads: the last attributes are this many mask coefficients, not scores

    def describe(self) -> str:
        kind = "raw YOLOX offsets on a stride 8/16/32 grid" if self.grid else "boxes (cx, cy, w, h)"
        kind += " + objectness + class scores" if self.objectness else " + class scores"
        return kind + (f" + {self.masks} mask coefficients" if self.masks else "")


def _rows(values: np.ndarray, axis: int) -> np.ndarray:
    arr = np.asarray(values, np.float64)
    if axis == -2:
        arr = np.swapaxes(arr, -1, -2)
    return arr.reshape(-1, arr.shape[-2], arr.shape[-1])


def _yolox_grid(anchors: int, size: tuple[int, int] | None) -> tuple[tuple[int, int, int], ...]:
    """The (rows, cols, stride) levels of a YOLOX head with ``anchors`` rows: from the input size when known,
    else a square input."""
    def levels(height: int, width: int) -> tuple[tuple[int, int, int], ...]:
        return tuple((height // s, width // s, s) for s in YOLOX_STRIDES)

    if size and sum(r * c for r, c, _ in levels(*size)) == anchors:
        return levels(*size)
    cells = anchors * 16 / 21  # n^2 (1 + 1/4 + 1/16) = anchors, n = side / 8
    n = int(round(cells**0.5))
    for side in (8 * n - 8, 8 * n, 8 * n + 8):
        if side > 0 and sum(r * c for r, c, _ in levels(side, side)) == anchors:
            return levels(side, side)
    return ()


def head_layout(values: np.ndarray, input_size: tuple[int, int] | None = None, masks: int = 0) -> HeadLayout | None:
    """The layout of a detection head read from its values, or None when it does not look like one:
    ``[..., anchors, attrs]`` or ``[..., attrs, anchors]`` with 5 <= attrs - masks <= 1004 and at least 64
    and 3x as many anchors, score columns (4 on, before the ``masks`` mask coefficients of a segmentation
    head) all in [0, 1], box columns not (pixels, not probabilities), and widths/heights >= 0 unless the
    anchors fit a YOLOX grid (raw log sizes, decoded on it)."""
    arr = np.asarray(values)
    if arr.ndim < 2 or arr.dtype.kind != "f" or arr.size == 0 or not np.isfinite(arr).all() or masks < 0:
        return None
    small, large = sorted(arr.shape[-2:])
    axis = -1 if arr.shape[-1] == small else -2
    if not (5 <= small - masks <= 1004 and large >= 64 and large >= 3 * small):
        return None
    rows = _rows(arr, axis).reshape(-1, small)[:, : small - masks]
    scores, box = rows[:, 4:], rows[:, :4]
    if not probabilities(scores):
        return None
    if box.min() >= 0 and box.max() <= 1:
        return None  # every column a probability: class scores, not boxes
    objectness = False
    if rows.shape[1] >= 6:
        background = rows[:, 4] < 0.05
        if background.any():
            objectness = bool(np.mean(scores[background, 1:].max(axis=1) > BOX_THRESHOLD) > 0.3)
    # raw YOLOX offsets and log sizes stay small; decoded boxes are pixels (a YOLOv8 head at 640 has the
    # same 8400 anchors as YOLOX, so the anchor count alone cannot tell)
    grid = _yolox_grid(large, input_size) if np.abs(box).max() <= RAW_LIMIT else ()
    if not grid and box[:, 2:].min() < 0:
        return None  # negative widths or heights: raw values on a grid we cannot place
    return HeadLayout(axis, objectness, grid, masks)


def _decode(rows: np.ndarray, layout: HeadLayout) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Boxes (x1, y1, x2, y2), score and class of every anchor of one image."""
    rows = rows[:, : rows.shape[1] - layout.masks]
    xywh = rows[:, :4].copy()
    if layout.grid:
        offsets, strides = [], []
        for r, c, s in layout.grid:
            xv, yv = np.meshgrid(np.arange(c), np.arange(r))
            offsets.append(np.stack([xv.ravel(), yv.ravel()], 1))
            strides.append(np.full((r * c, 1), float(s)))
        offset, stride = np.concatenate(offsets), np.concatenate(strides)
        xywh[:, :2] = (xywh[:, :2] + offset) * stride
        xywh[:, 2:] = np.exp(np.minimum(xywh[:, 2:], 30.0)) * stride
    boxes = np.concatenate([xywh[:, :2] - xywh[:, 2:] / 2, xywh[:, :2] + xywh[:, 2:] / 2], axis=1)
    if layout.objectness:
        classes = rows[:, 5:] if rows.shape[1] > 5 else np.ones((len(rows), 1))
        score = rows[:, 4] * classes.max(axis=1)
        label = classes.argmax(axis=1)
    else:
        score = rows[:, 4:].max(axis=1)
        label = rows[:, 4:].argmax(axis=1)
    return boxes, score, label


def nms(boxes: np.ndarray, scores: np.ndarray, labels: np.ndarray, iou: float = NMS_IOU) -> np.ndarray:
    """Indices kept by class-wise greedy non-maximum suppression, best score first."""
    order = np.argsort(-scores, kind="stable")[:MAX_CANDIDATES]  # float16-safe: float64 scores
    keep: list[int] = []
    while order.size:
        i = int(order[0])
        keep.append(i)
        rest = order[1:]
        overlap = iou_matrix(boxes[i], boxes[rest])[0]
        order = rest[(overlap <= iou) | (labels[rest] != labels[i])]
    return np.array(keep, dtype=np.int64)


def detections(values: np.ndarray, layout: HeadLayout) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The boxes a user's post-processing keeps, per image: (boxes, labels, scores)."""
    out = []
    for rows in _rows(values, layout.axis):
        rows = np.where(np.isfinite(rows), rows, 0.0)
        boxes, score, label = _decode(rows, layout)
        confident = np.flatnonzero(score >= BOX_THRESHOLD)
        kept = confident[nms(boxes[confident], score[confident], label[confident])] if confident.size else confident
        out.append((boxes[kept], label[kept], score[kept]))
    return out


def box_decisions(reference: np.ndarray, variant: np.ndarray, layout: HeadLayout) -> Decisions | None:
    """Boxes of the original vs the variant's, image by image; None when neither has a confident box."""
    return _boxes_kept(detections(reference, layout), detections(variant, layout))


def _boxes_kept(ref: list, var: list) -> Decisions | None:
    """Each image's confident boxes of the original matched to the variant's (the same for every head layout);
    None when neither has a confident box."""
    if not any(len(r[0]) + len(v[0]) for r, v in zip(ref, var, strict=True)):
        return None
    parts = [
        _match(rb, rl, rs, vb, vl, vs, BOX_THRESHOLD) for (rb, rl, rs), (vb, vl, vs) in zip(ref, var, strict=True)
    ]
    found = _combine("boxes", BOX_THRESHOLD, parts)
    return found if found.total else None


# ---- multi-stride heads with box distributions (PicoDet / GFL) --------------------------------

#: Strides a multi-stride head's levels may have (PicoDet: 8, 16, 32, 64).
GFL_STRIDES = (8, 16, 32, 64, 128)


@dataclass(frozen=True)
class GflLevel:
    """One level of a multi-stride head: its class-score output, its box-distribution output, its grid."""

    scores: str
    boxes: str
    stride: int
    rows: int
    cols: int


def gfl_levels(outputs: dict[str, np.ndarray], input_size: tuple[int, int] | None) -> tuple[GflLevel, ...]:
    """The levels of a detection head split over outputs per stride, read from the outputs alone: for each
    anchor count N one ``[batch, N, classes]`` output of probabilities and one ``[batch, N, 4 x bins]``
    output of logits (a distribution of each side's distance in ``bins`` steps, GFL / PicoDet), N being
    the cells of a stride 8-128 grid on the model's input (ceil(H / s) x ceil(W / s)). Empty when they
    do not all fit."""
    if input_size is None:
        return ()
    by_count: dict[int, dict[str, list[str]]] = {}
    for name, value in outputs.items():
        arr = np.asarray(value)
        if arr.ndim != 3 or arr.dtype.kind != "f" or arr.size == 0 or not np.isfinite(arr).all():
            continue
        n, width = arr.shape[1], arr.shape[2]
        slot = by_count.setdefault(n, {"scores": [], "boxes": []})
        if probabilities(arr) and width <= 1000:
            slot["scores"].append(name)
        elif width % 4 == 0 and width // 4 >= 2:
            slot["boxes"].append(name)
    height, width = input_size
    grids = {-(-height // s) * -(-width // s): s for s in GFL_STRIDES}
    levels = []
    for n, slot in by_count.items():
        if len(slot["scores"]) == 1 and len(slot["boxes"]) == 1 and n in grids:
            s = grids[n]
            levels.append(GflLevel(slot["scores"][0], slot["boxes"][0], s, -(-height // s), -(-width // s)))
    if len(levels) < 2 or len({lv.stride for lv in levels}) != len(levels):
        return ()
    classes = {np.asarray(outputs[lv.scores]).shape[2] for lv in levels}
    bins = {np.asarray(outputs[lv.boxes]).shape[2] for lv in levels}
    if len(classes) != 1 or len(bins) != 1:
        return ()
    return tuple(sorted(levels, key=lambda lv: lv.stride))


def _gfl_images(outputs: dict[str, np.ndarray], levels: tuple[GflLevel, ...]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Boxes, scores and classes of every anchor of every image (runs and batch flattened)."""
    boxes, scores, labels = [], [], []
    for lv in levels:
        score = np.asarray(outputs[lv.scores], np.float64)
        dist = np.asarray(outputs[lv.boxes], np.float64)
        n, classes, width = score.shape[-2], score.shape[-1], dist.shape[-1]
        score, dist = score.reshape(-1, n, classes), dist.reshape(-1, n, 4, width // 4)
        e = np.exp(dist - dist.max(axis=-1, keepdims=True))
        distance = (e / e.sum(axis=-1, keepdims=True) * np.arange(width // 4)).sum(axis=-1) * lv.stride
        cols, rows = np.meshgrid(np.arange(lv.cols), np.arange(lv.rows))
        cx, cy = (cols.ravel() + 0.5) * lv.stride, (rows.ravel() + 0.5) * lv.stride
        boxes.append(np.stack([cx - distance[..., 0], cy - distance[..., 1], cx + distance[..., 2],
                               cy + distance[..., 3]], axis=-1))  # fmt: skip
        scores.append(score.max(axis=-1))
        labels.append(score.argmax(axis=-1))
    boxes_all, scores_all, labels_all = (np.concatenate(p, axis=1) for p in (boxes, scores, labels))
    found = []
    for b, s, c in zip(boxes_all, scores_all, labels_all, strict=True):
        confident = np.flatnonzero(s >= BOX_THRESHOLD)
        kept = confident[nms(b[confident], s[confident], c[confident])] if confident.size else confident
        found.append((b[kept], c[kept], s[kept]))
    return found


def gfl_decisions(reference: dict[str, np.ndarray], variant: dict[str, np.ndarray],
                  levels: tuple[GflLevel, ...]) -> Decisions | None:  # fmt: skip
    """Boxes decoded from every level of the original vs the variant's; None when neither has a confident box."""
    return _boxes_kept(_gfl_images(reference, levels), _gfl_images(variant, levels))

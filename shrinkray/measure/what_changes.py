"""The inputs where a variant differs most from the original, per output, in the task's terms.

Made from the outputs parity already judged (the original's reference and the variant's outputs on the same
parity sets), so nothing runs again. Each output is split into its inputs (sets, then the batch within a set),
each input is measured by the output's own measure, and the worst :data:`WORST` are kept as small, plain
:class:`~shrinkray.measure.examples.Example` values:

- class scores: the position whose top-1 changed (else whose scores moved most), with the top classes;
  a CTC reader (``ctc_blank`` among the measures): each line greedy-decoded, ranked by edit distance, the
  characters that differ marked (the model's alphabet when its metadata holds one, else class numbers);
- a decoder LM's continuations: the tokens generated, ranked by how many differ, read through its tokenizer;
- detection heads and probability maps: the boxes (after thresholding and NMS, as parity decides them) or
  regions, each marked kept / moved / lost / new by IoU, ranked by how many changed;
- labels, ids and flags (exact outputs of a few values an input): the values, those that differ marked;
- every other output: max abs diff and cosine per input, ranked by the output's own error (relative RMS for
  continuous outputs, 1 - cosine for embeddings, the share of values that differ for exact ones).

Never fails a comparison: an output whose examples cannot be made is left out (parity's table still tells it).
"""

from __future__ import annotations

import base64
import io
import math
import re
from collections.abc import Sequence

import numpy as np
import onnx
from PIL import Image

from shrinkray.measure import decisions, lm_text
from shrinkray.measure.examples import Box, Example, OutputExamples, TopClass
from shrinkray.measure.generation import TIE_LOGODDS
from shrinkray.measure.parity import (
    PERPLEXITY,
    TIE_SHARE,
    OutputKind,
    Parity,
    cosine_similarity,
    ctc_alphabet,
    ctc_decode,
    edge_spaces,
    edit_distance,
    robust_range,
    side_flips,
    strip_classes,
)
from shrinkray.measure.parity_inputs import ParityInputs

#: Examples kept per output.
WORST = 5
#: Best classes shown per side; boxes per side; characters of a text kept.
TOP_CLASSES = 5
MAX_BOXES = 30
MAX_TEXT = 240
#: The input picture kept under a box view: its longer side in pixels, JPEG quality.
THUMBNAIL_SIDE = 192
THUMBNAIL_QUALITY = 70
#: A waveform: at least this many samples along its one long axis, at most MAX_CHANNELS beside it; drawn as
#: the low and high of WAVE_COLUMNS stretches.
MIN_WAVE_SAMPLES = 1000
MAX_CHANNELS = 2
WAVE_COLUMNS = 160
#: A mask: both sides of its grid at least this; drawn at most MASK_WIDTH pixels wide.
MIN_MASK_SIDE = 8
MASK_WIDTH = 320
_AUDIO_WORDS = re.compile(r"audio|wave|wav\b|speech|pcm|signal|denois|enhanc|vocod", re.IGNORECASE)
#: Inputs looked at per output at most (a long stream of steps: its first ones).
MAX_ITEMS = 2048


def examples_of(parity: Parity, reference: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                inputs: ParityInputs, model: onnx.ModelProto | None = None,
                tally: dict[str, np.ndarray] | None = None) -> list[OutputExamples]:  # fmt: skip
    """:func:`worst_examples` of a variant judged on ``inputs`` (``model``: the variant, for a CTC reader's
    alphabet in its metadata; ``tally``: its top classes on the inputs' tally, for lines read there too);
    empty when they cannot be made (never fails the comparison)."""
    metadata = {p.key: p.value for p in model.metadata_props} if model is not None else {}
    tops = {name: (ref, tally[name]) for name, ref in inputs.tally_reference.items() if name in tally} if tally else {}
    try:
        return worst_examples(parity, reference, outputs, inputs.samples, inputs.kinds, inputs.options.tokenizer,
                              ctc_alphabet(metadata), prompts=inputs.decoder.input_ids if inputs.decoder else "",
                              tops=tops)  # fmt: skip
    except Exception:  # noqa: BLE001 - showing what changes never fails the comparison it illustrates
        return []


def worst_examples(parity: Parity, reference: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                   samples: Sequence[dict[str, np.ndarray]], kinds: dict[str, OutputKind] | None = None,
                   tokenizer: str = "", alphabet: Sequence[str] | None = None, worst: int = WORST,
                   prompts: str = "", tops: dict | None = None) -> list[OutputExamples]:  # fmt: skip
    """Per output of ``parity`` (judged on ``reference`` vs ``outputs``, the runs of ``samples``), its worst
    inputs. ``tokenizer``: a decoder LM's tokenizer.json, to read continuations; ``alphabet``: a CTC reader's
    characters (class 1 is its first, as PaddleOCR keeps them); ``prompts``: a decoder LM's input of token ids
    (each continuation is told after its prompt's last words); ``tops``: more sets' top classes of a scores
    output (the original's and the variant's ``top_two``), whose lines a CTC reader's examples rank too. An
    output that cannot be split or shown is left out; nothing here raises for a model's odd outputs."""
    kinds = kinds or {}
    found = []
    for judged in parity.outputs:
        name = judged.name
        if name not in reference or name not in outputs or judged.kind == PERPLEXITY:
            continue
        ref, var = np.asarray(reference[name]), np.asarray(outputs[name])
        if ref.shape != var.shape or ref.size == 0:
            continue
        kind = kinds.get(name) or OutputKind(judged.kind)
        try:
            shown = _examples(name, judged.kind, kind, judged.measures, ref, var, samples, tokenizer, alphabet, prompts,
                              (tops or {}).get(name))  # fmt: skip
        except Exception:  # noqa: BLE001 - an output this cannot read as its kind: parity's table still tells it
            continue
        if shown is None:
            continue
        shown.examples.sort(key=lambda e: (e.changed, e.differs), reverse=True)  # stable: earlier inputs first
        shown.changed = sum(e.changed for e in shown.examples)
        shown.inputs = len(shown.examples)
        shown.examples = shown.examples[:worst]
        found.append(shown)
    return found


# ---------------------------------------------------------------------------------------------- inputs


def split_items(value: np.ndarray, samples: Sequence[dict[str, np.ndarray]]) -> list[np.ndarray]:
    """An output's values per input: several sets are stacked on a new first axis, and a set holding a batch
    (its first input's first axis) splits along it when the output's first axis is that batch."""
    value = np.asarray(value)
    sets = [value] if len(samples) <= 1 else list(value)
    items = []
    for index, part in enumerate(sets):
        batch = _batch(samples[min(index, len(samples) - 1)]) if samples else None
        if batch is not None and part.ndim >= 1 and part.shape[0] == batch:
            items.extend(part[i] for i in range(batch))
        else:
            items.append(part)
        if len(items) >= MAX_ITEMS:
            break
    return items[:MAX_ITEMS]


def _batch(feeds: dict[str, np.ndarray]) -> int | None:
    first = next((np.asarray(v) for v in feeds.values() if np.ndim(v) >= 1), None)
    return int(first.shape[0]) if first is not None else None


def image_items(samples: Sequence[dict[str, np.ndarray]]) -> list[np.ndarray] | None:
    """The input images per input ([H, W, C] floats), when the model's first image-shaped input is one:
    a float [batch, 1 or 3, H, W] or [batch, H, W, 1 or 3] feed with sides of at least 16."""
    if not samples:
        return None
    name = None
    for key, value in samples[0].items():
        arr = np.asarray(value)
        if arr.ndim == 4 and arr.dtype.kind == "f":
            if arr.shape[1] in (1, 3) and min(arr.shape[2:]) >= 16:
                name = key
                break
            if arr.shape[3] in (1, 3) and min(arr.shape[1:3]) >= 16:
                name = key
                break
    if name is None:
        return None
    images = []
    for feeds in samples:
        arr = np.asarray(feeds[name])
        first = arr.shape[1] in (1, 3) and min(arr.shape[2:]) >= 16
        images.extend(np.moveaxis(a, 0, -1) if first else a for a in arr)
    return images


def thumbnail(image: np.ndarray) -> str:
    """An image ([H, W, C] of any range) as a small JPEG data URI: its values stretched to 0-255 (the model's
    normalization undone as far as a picture needs)."""
    arr = np.asarray(image, np.float64)
    arr = np.where(np.isfinite(arr), arr, 0.0)
    low, high = float(arr.min()), float(arr.max())
    scaled = np.zeros_like(arr) if high <= low else (arr - low) / (high - low) * 255.0
    pixels = scaled.round().astype(np.uint8)
    picture = Image.fromarray(pixels[..., 0] if pixels.shape[-1] == 1 else pixels)
    picture.thumbnail((THUMBNAIL_SIDE, THUMBNAIL_SIDE))
    buffer = io.BytesIO()
    picture.convert("RGB").save(buffer, format="JPEG", quality=THUMBNAIL_QUALITY)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _where(item: int, position: int | None = None, positions: int = 1, noun: str = "input") -> str:
    at = f", position {position}" if position is not None and positions > 1 else ""
    return f"{noun} {item + 1}{at}"


# ---------------------------------------------------------------------------------------------- per kind


def _examples(name: str, judged_kind: str, kind: OutputKind, measures: dict[str, float | None], ref: np.ndarray,
              var: np.ndarray, samples, tokenizer: str, alphabet, prompts: str = "",
              tops=None) -> OutputExamples | None:  # fmt: skip
    refs, vars_ = split_items(ref, samples), split_items(var, samples)
    if judged_kind == "generation":
        ids = [np.asarray(s[prompts]).reshape(-1, np.shape(s[prompts])[-1]) for s in samples if prompts in s]
        return _generation(name, refs, vars_, tokenizer, np.concatenate(ids) if ids else None, kind.unit)
    if judged_kind == "scores" and ref.dtype.kind == "f":
        if measures.get("ctc_blank") is not None:
            return _ctc(name, kind, int(measures["ctc_blank"]), refs, vars_, alphabet, tops)
        return _classes(name, kind, refs, vars_, robust_range(ref, full=True), tokenizer if kind.tokens else "")
    if judged_kind == "detections" and not kind.levels and measures.get("box_agreement") is not None:
        layout = decisions.head_layout(ref, kind.input_size, kind.masks)
        if layout is not None:
            return _detections(name, layout, kind, refs, vars_, image_items(samples))
    if judged_kind == "map" and measures.get("region_agreement") is not None:
        return _maps(name, refs, vars_, image_items(samples), kind.text_boxes)
    if judged_kind == "probability" and ref.dtype.kind == "f":
        return _yes_no(name, refs, vars_)
    if judged_kind == "exact" and all(np.size(r) <= MAX_EXACT_VALUES for r in refs):
        return _exact(name, refs, vars_)
    if judged_kind == "continuous" and _audio(name, refs, samples, _samples_axis):
        return _drawn(name, refs, vars_, measures, "waveform")
    if judged_kind == "continuous" and _audio(name, refs, samples, _mask_of):
        return _drawn(name, refs, vars_, measures, "mask")
    return _values(name, judged_kind, refs, vars_, measures)


def _yes_no(name: str, refs, vars_) -> OutputExamples:
    """Each input's yes/no decisions at 0.5 (voice activity, end of turn, tags): the inputs where one flipped
    first, each shown by its most changed value ("yes (0.559)" -> "no (0.403)"), what the user acts on."""
    found = OutputExamples(name, "probability", "text", "decisions flipped at 0.5, then the largest move")
    for item, (r, v) in enumerate(zip(refs, vars_, strict=True)):
        a, b = np.asarray(r, np.float64).ravel(), np.asarray(v, np.float64).ravel()
        if not a.size:
            continue
        flipped = side_flips(a, b)[1]
        moved = np.where(np.isfinite(a - b), np.abs(a - b), np.inf)
        k = int(np.argmax(np.where(flipped, moved, -1.0))) if flipped.any() else int(np.argmax(moved))
        original, variant = (f"{'yes' if p > 0.5 else 'no'} ({p:.3f})" for p in (a[k], b[k]))
        marks = [[0, len(original)]], [[0, len(variant)]]
        where = _where(item) if a.size == 1 else f"{_where(item)}, value {k}"
        found.examples.append(Example(item, where, float(flipped.sum()) + min(float(moved[k]), 0.999), bool(flipped.any()),
                                      original, variant, *(marks if flipped.any() else ([], [])),
                                      max_abs_diff=float(moved.max())))  # fmt: skip
    return found


def _token_marks(a: list[str], b: list[str]) -> tuple[list[int], list[int]]:
    """Indices of the tokens of ``a`` and ``b`` outside their longest common subsequence (an edit script's
    substitutions, deletions and insertions)."""
    n, m = len(a), len(b)
    table = np.zeros((n + 1, m + 1), np.int32)
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            table[i, j] = table[i + 1, j + 1] + 1 if a[i] == b[j] else max(table[i + 1, j], table[i, j + 1])
    i = j = 0
    keep_a, keep_b = set(), set()
    while i < n and j < m:
        if a[i] == b[j]:
            keep_a.add(i)
            keep_b.add(j)
            i, j = i + 1, j + 1
        elif table[i + 1, j] >= table[i, j + 1]:
            i += 1
        else:
            j += 1
    return [k for k in range(n) if k not in keep_a], [k for k in range(m) if k not in keep_b]


def marked_text(tokens: list[str], marked: list[int], most: int = MAX_TEXT) -> tuple[str, list[list[int]]]:
    """Tokens joined into text, and the [start, end) character spans of the marked tokens (adjacent ones
    merged); text past ``most`` characters is cut with an ellipsis."""
    text, spans, at = "", [], 0
    chosen = set(marked)
    for index, token in enumerate(tokens):
        if at + len(token) > most:
            text += "…"
            break
        if index in chosen and token:
            if spans and spans[-1][1] == at:
                spans[-1][1] = at + len(token)
            else:
                spans.append([at, at + len(token)])
        text += token
        at += len(token)
    return text, spans


def _text_example(item: int, where: str, a: list[str], b: list[str], differs: float) -> Example:
    marks_a, marks_b = _token_marks(a, b)
    text_a, spans_a = marked_text(a, marks_a)
    text_b, spans_b = marked_text(b, marks_b)
    return Example(item, where, differs, a != b, text_a, text_b, spans_a, spans_b)


def _ctc(name: str, kind: OutputKind, blank: int, refs, vars_, alphabet, tops=None) -> OutputExamples:
    """Each line of a CTC reader greedy-decoded; ranked by the edit distance of the decoded characters.
    ``tops``: the top classes of more inputs' lines (original's, variant's), when each input is one line."""
    def chars(classes: list[int]) -> list[str]:
        if alphabet:
            shift = 1 if blank == 0 else 0  # PaddleOCR's dictionary starts after the blank
            return [alphabet[c - shift] if 0 <= c - shift < len(alphabet) else f"[{c}]" for c in classes]
        return [f"{c} " for c in classes]

    found = OutputExamples(name, "scores", "text", "characters changed in the decoded line (edit distance)")

    def read(item: int, where: str, top_r: np.ndarray, top_v: np.ndarray, spaces: frozenset[int]) -> None:
        a, b = strip_classes(ctc_decode(top_r, blank), spaces), strip_classes(ctc_decode(top_v, blank), spaces)
        found.examples.append(_text_example(item, where, chars(a), chars(b), float(edit_distance(a, b))))

    for item, (r, v) in enumerate(zip(refs, vars_, strict=True)):
        r, v = np.moveaxis(r, kind.axis, -1), np.moveaxis(v, kind.axis, -1)
        lines_r = r.reshape(-1, r.shape[-2], r.shape[-1]) if r.ndim >= 2 else r.reshape(1, 1, -1)
        lines_v = v.reshape(lines_r.shape)
        spaces = edge_spaces(tuple(alphabet or ()), blank, lines_r.shape[-1])
        for line, (lr, lv) in enumerate(zip(lines_r, lines_v, strict=True)):
            where = _where(item, line, len(lines_r)).replace("position", "line")
            read(item, where, np.argmax(lr, axis=-1), np.argmax(lv, axis=-1), spaces)
    if tops is not None and all(np.ndim(r) == 2 for r in refs):  # one line an input: the tally's follow on
        steps, classes = np.moveaxis(refs[0], kind.axis, -1).shape
        ref_top, var_top = (np.asarray(t)[..., 0].reshape(-1, steps).astype(np.int64) for t in tops)
        spaces = edge_spaces(tuple(alphabet or ()), blank, classes)
        for line, (lr, lv) in enumerate(zip(ref_top[:MAX_ITEMS], var_top[:MAX_ITEMS], strict=True)):
            read(len(refs) + line, _where(len(refs) + line), lr, lv, spaces)
    return found


def _top(scores: np.ndarray, tokenizer: str = "") -> list[TopClass]:
    """The best classes, each named by its token when the classes are a tokenizer's vocabulary."""
    order = np.argsort(-np.asarray(scores, np.float64), kind="stable")[:TOP_CLASSES]  # float16-safe: float64
    labels = _token_texts(order, tokenizer) if tokenizer else [""] * len(order)
    return [TopClass(int(i), float(scores[i]), label) for i, label in zip(order, labels, strict=True)]


def _classes(name: str, kind: OutputKind, refs, vars_, spread: float, tokenizer: str = "") -> OutputExamples:
    """The position of each input whose top-1 class changed (else whose scores moved most), its top classes. A
    position whose two best classes the original itself could not tell apart (parity's tie) is no change."""
    found = OutputExamples(name, "scores", "classes", "top-1 class changed, then the largest change of a score")
    tie = TIE_LOGODDS if kind.tokens else TIE_SHARE * spread
    for item, (r, v) in enumerate(zip(refs, vars_, strict=True)):
        r = np.moveaxis(np.asarray(r, np.float64), kind.axis if r.ndim else -1, -1)
        v = np.moveaxis(np.asarray(v, np.float64), kind.axis if v.ndim else -1, -1)
        r2 = np.where(np.isfinite(r), r, 0.0).reshape(-1, r.shape[-1])
        v2 = np.where(np.isfinite(v), v, 0.0).reshape(r2.shape)
        best_two = (np.partition(r2, r2.shape[1] - 2, axis=1)[:, -2:]  # float16-safe: float64 scores
                    if r2.shape[1] >= 2 else np.zeros((len(r2), 2)))
        decided = (best_two[:, 1] - best_two[:, 0]) > tie  # float16-safe: float64 scores
        flipped = (np.argmax(r2, axis=1) != np.argmax(v2, axis=1)) & decided
        moved = np.abs(r2 - v2).max(axis=1)
        position = int(np.lexsort((moved, flipped))[-1])  # flipped first, then the largest: # float16-safe: float64
        found.examples.append(Example(
            item, _where(item, position, len(r2)), float(moved[position]), bool(flipped[position]),
            original_top=_top(r2[position], tokenizer), variant_top=_top(v2[position], tokenizer),
            max_abs_diff=float(moved[position]),
        ))  # fmt: skip
    return found


#: Tokens of a prompt told before its continuation.
PROMPT_TAIL = 6


def _generation(name: str, refs, vars_, tokenizer: str, prompt_ids: np.ndarray | None = None,
                unit: str = "prompt") -> OutputExamples:  # fmt: skip
    """Each prompt's greedy continuation ([tokens, 2]: token, margin), or each input's output through a set of
    models (``unit`` "input"); ranked by how early it parts from the original's (the tokens that differ from
    there on are marked). One that parts where the original itself hesitated (parity's coin toss) is no change."""
    parts = "outputs" if unit == "input" else "continuations"
    found = OutputExamples(name, "generation", "text", f"tokens generated after the {parts} part")
    prompts = []
    for r, v in zip(refs, vars_, strict=True):
        r2 = np.asarray(r, np.float64).reshape(-1, np.shape(r)[-2], 2)
        prompts.extend(zip(r2, np.asarray(v, np.float64).reshape(r2.shape), strict=True))
    for item, (r, v) in enumerate(prompts[:MAX_ITEMS]):
        a, b = r[:, 0].astype(np.int64), v[:, 0].astype(np.int64)
        ta, tb = _token_texts(a, tokenizer), _token_texts(b, tokenizer)
        same = a == b
        first = int(np.argmin(same)) if not same.all() else len(a)  # where the continuations part
        ties = np.flatnonzero(r[:, 1] < TIE_LOGODDS)
        hesitated = ties.size > 0 and first < len(a) and ties[0] <= first  # parity does not count it
        after_a, after_b = _token_marks(ta[first:], tb[first:])  # from where they part: what differs
        text_a, marks_a = marked_text(ta, [first + k for k in after_a])
        text_b, marks_b = marked_text(tb, [first + k for k in after_b])
        where = f"{unit} {item + 1}"
        if prompt_ids is not None and item < len(prompt_ids):
            where += f' ("…{"".join(_token_texts(prompt_ids[item, -PROMPT_TAIL:], tokenizer)).strip()}")'
        if hesitated:
            where += f"; they part after the original hesitated (two best tokens within {TIE_LOGODDS:g} log-odds)"
        found.examples.append(Example(item, where, float(len(a) - first), first < len(a) and not hesitated,
                                      text_a, text_b, marks_a, marks_b))  # fmt: skip
    return found


def _token_texts(ids: np.ndarray, tokenizer: str) -> list[str]:
    """Each token as text through the tokenizer, else as its number; a negative id (no token: an output that
    had ended) as nothing."""
    if tokenizer:
        try:
            return [lm_text.decode(tokenizer, [t]) if t >= 0 else "" for t in ids]
        except Exception:  # noqa: BLE001 - a tokenizer that cannot read them: token numbers then
            pass
    return [f"{t} " if t >= 0 else "" for t in ids]


def _boxes_of(boxes: np.ndarray, labels: np.ndarray, scores: np.ndarray) -> list[Box]:
    return [Box(*(float(x) for x in b[:4]), label=int(lab), score=float(s))
            for b, lab, s in zip(boxes, labels, scores, strict=True)]  # fmt: skip


def match_boxes(a: list[Box], b: list[Box]) -> tuple[int, float]:
    """Mark every box kept / moved / lost / new (greedy by IoU, same label, as parity matches them); returns
    how many changed (moved + lost + new) and the worst IoU of the pairs (1.0 without any)."""
    ab = np.array([[x.x1, x.y1, x.x2, x.y2] for x in a]).reshape(-1, 4)
    bb = np.array([[x.x1, x.y1, x.x2, x.y2] for x in b]).reshape(-1, 4)
    m = decisions.iou_matrix(ab, bb) if len(a) and len(b) else np.zeros((len(a), len(b)))
    if m.size:
        m = np.where(np.array([x.label for x in a])[:, None] == np.array([x.label for x in b])[None, :], m, 0.0)
    used_a: set[int] = set()
    used_b: set[int] = set()
    worst = 1.0
    for flat in np.argsort(-m, axis=None, kind="stable"):  # float16-safe: IoU in float64
        i, j = divmod(int(flat), m.shape[1])
        if i in used_a or j in used_b or m[i, j] < decisions.MOVED_IOU:
            continue
        used_a.add(i)
        used_b.add(j)
        kept = m[i, j] >= decisions.MATCH_IOU or decisions.within_slack(ab[i], bb[j])
        a[i].status = b[j].status = "kept" if kept else "moved"
        worst = min(worst, float(m[i, j]))
    for i in set(range(len(a))) - used_a:
        a[i].status = "lost"
    for j in set(range(len(b))) - used_b:
        b[j].status = "new"
    changed = sum(x.status != "kept" for x in a) + sum(x.status == "new" for x in b)
    return changed, worst


def _box_example(item: int, where: str, a: list[Box], b: list[Box], frame: list[float], image) -> Example:
    changed, worst = match_boxes(a, b)
    # how many changed, then how far the worst pair moved
    return Example(item, where, changed + (1.0 - worst), changed > 0, original_boxes=a[:MAX_BOXES],
                   variant_boxes=b[:MAX_BOXES], frame=frame, image=thumbnail(image) if image is not None else "")  # fmt: skip


def _detections(name: str, layout: decisions.HeadLayout, kind: OutputKind, refs, vars_,
                images) -> OutputExamples:  # fmt: skip
    found = OutputExamples(name, "detections", "boxes",
                           f"boxes (score >= {decisions.BOX_THRESHOLD:g}, after NMS) moved, lost or new")  # fmt: skip
    candidates = []
    for item, (r, v) in enumerate(zip(refs, vars_, strict=True)):
        ra, va = decisions.detections(r, layout), decisions.detections(v, layout)
        for image_index, (da, db) in enumerate(zip(ra, va, strict=True)):
            a, b = _boxes_of(*da), _boxes_of(*db)
            changed, worst = match_boxes(list(a), list(b))
            candidates.append((changed > 0, changed + 1.0 - worst, item, image_index, len(ra), a, b))
    candidates.sort(key=lambda c: (c[0], c[1]), reverse=True)
    for rank, (_, _, item, image_index, count, a, b) in enumerate(candidates):
        image = images[item] if images is not None and item < len(images) and count == 1 else None
        if kind.input_size is not None:
            frame = [float(kind.input_size[1]), float(kind.input_size[0])]
        elif image is not None:
            frame = [float(image.shape[1]), float(image.shape[0])]
        else:
            frame = _extent(a + b)
        if rank < WORST:
            found.examples.append(_box_example(item, _where(item, image_index, count), a, b, frame, image))
        else:  # counted, not kept: no picture made for it
            changed, worst = match_boxes(a, b)
            found.examples.append(Example(item, _where(item, image_index, count), changed + 1.0 - worst, changed > 0))
    return found


def _extent(boxes: list[Box]) -> list[float]:
    width = max((b.x2 for b in boxes), default=1.0)
    height = max((b.y2 for b in boxes), default=1.0)
    return [float(max(width, 1.0)), float(max(height, 1.0))]


def _maps(name: str, refs, vars_, images, text: bool = False) -> OutputExamples:
    """The regions of each input's (first) map above 0.5, matched as parity matches them; ``text``: a DB text
    detector's map, by the text boxes its OCR pipeline reads (what its verdict counts)."""
    threshold = decisions.MAP_THRESHOLDS[-1]
    found = OutputExamples(name, "map", "boxes", "text boxes moved, lost or new" if text
                           else f"regions above {threshold:g} moved, lost or new")  # fmt: skip
    candidates = []
    for item, (r, v) in enumerate(zip(refs, vars_, strict=True)):
        r, v = np.asarray(r, np.float64), np.asarray(v, np.float64)
        h, w = r.shape[-2:]
        r2 = np.where(np.isfinite(r), r, 0.0).reshape(-1, h, w)
        v2 = np.where(np.isfinite(v), v, 0.0).reshape(-1, h, w)
        best = None
        for index, (mr, mv) in enumerate(zip(r2, v2, strict=True)):
            a_box, a_peak = decisions.text_boxes(mr) if text else decisions.regions(mr, threshold)
            b_box, b_peak = decisions.text_boxes(mv) if text else decisions.regions(mv, threshold)
            a = _boxes_of(a_box, np.zeros(len(a_box)), a_peak)
            b = _boxes_of(b_box, np.zeros(len(b_box)), b_peak)
            changed, worst = match_boxes(a, b)
            key = (changed > 0, changed + 1.0 - worst)
            if best is None or key > best[0]:
                best = (key, index, a, b, [float(w), float(h)])
        if best is not None:
            candidates.append((*best[0], item, best[1], len(r2), *best[2:]))
    candidates.sort(key=lambda c: (c[0], c[1]), reverse=True)
    for rank, (changed, differs, item, index, count, a, b, frame) in enumerate(candidates):
        where = _where(item, index, count).replace("position", "map")
        if rank < WORST:
            image = images[item] if images is not None and item < len(images) else None
            found.examples.append(_box_example(item, where, a, b, frame, image))
        else:
            found.examples.append(Example(item, where, differs, changed))
    return found


#: Exact outputs with at most this many values an input (labels, ids, flags) are shown as their values.
MAX_EXACT_VALUES = 64


def _exact(name: str, refs, vars_) -> OutputExamples:
    """Labels, ids and flags as text, value by value, those that differ marked; ranked by the share differing."""
    found = OutputExamples(name, "exact", "text", "share of values that differ")
    for item, (r, v) in enumerate(zip(refs, vars_, strict=True)):
        a, b = np.asarray(r).ravel(), np.asarray(v).ravel()
        ta = [f"{x} " for x in a.tolist()]
        tb = [f"{x} " for x in b.tolist()]
        differ = [k for k in range(len(a)) if a[k] != b[k]]
        text_a, marks_a = marked_text(ta, differ)
        text_b, marks_b = marked_text(tb, differ)
        share = len(differ) / max(len(a), 1)
        found.examples.append(Example(item, _where(item), share, bool(differ), text_a, text_b, marks_a, marks_b))
    return found


def _values(name: str, kind: str, refs, vars_, measures: dict[str, float | None]) -> OutputExamples:
    """Max abs diff and cosine per input, ranked by the output's own error."""
    spread = measures.get("range") or 0.0
    if kind == "exact":
        measure = "share of values that differ"
    elif kind == "embedding":
        measure = "1 - cosine of the input's output"
    else:
        measure = "RMS error relative to the output's range" if spread else "RMS error"
    found = OutputExamples(name, kind, "values", measure)
    for item, (r, v) in enumerate(zip(refs, vars_, strict=True)):
        a, b = np.asarray(r), np.asarray(v)
        if a.dtype.kind not in "biufc" or b.dtype.kind not in "biufc":
            differ = float(np.mean(a != b)) if a.size else 0.0
            found.examples.append(Example(item, _where(item), differ, differ > 0))
            continue
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        finite = np.isfinite(a64) & np.isfinite(b64)
        diff = np.abs(np.where(finite, a64 - b64, 0.0))
        max_abs = float(diff.max(initial=0.0))
        cos = cosine_similarity(np.where(finite, a64, 0.0), np.where(finite, b64, 0.0))
        if kind == "exact":
            differs = float(np.mean(a != b)) if a.size else 0.0
        elif kind == "embedding":
            differs = 1.0 - cos
        else:
            rms = float(np.sqrt(np.mean(diff * diff))) if diff.size else 0.0
            differs = rms / spread if spread else rms
        if not math.isfinite(differs):
            differs = math.inf
        found.examples.append(Example(item, _where(item), differs, kind == "exact" and differs > 0,
                                      max_abs_diff=max_abs, cosine=cos))  # fmt: skip
    return found


def _samples_axis(item: np.ndarray) -> np.ndarray | None:
    """An input's output as a waveform (its first channel: samples along one long axis, at most
    MAX_CHANNELS beside it), or None when it is not one."""
    arr = np.squeeze(np.asarray(item))
    if arr.dtype.kind != "f" or arr.ndim not in (1, 2) or max(arr.shape, default=0) < MIN_WAVE_SAMPLES:
        return None
    if arr.ndim == 2:
        if min(arr.shape) > MAX_CHANNELS:
            return None
        arr = arr[0] if arr.shape[0] <= MAX_CHANNELS else arr[:, 0]
    return arr


def _audio(name: str, refs: list[np.ndarray], samples: Sequence[dict[str, np.ndarray]], shape_of) -> bool:
    """An audio output to draw (``shape_of``: :func:`_samples_axis` for waveforms, :func:`_mask_of` for masks):
    each input's is one, and it is named like audio or the model takes a waveform itself (a denoiser, a
    separator; a feature vector or a heat map of a vision model is not)."""
    if not refs or any(shape_of(r) is None for r in refs):
        return False
    if _AUDIO_WORDS.search(name):
        return True
    return any(_samples_axis(value[0] if np.ndim(value) > 1 else value) is not None
               for sample in samples[:1] for value in sample.values())  # fmt: skip


def envelope(wave: np.ndarray, columns: int = WAVE_COLUMNS) -> list[list[float]]:
    """[low, high] of each of ``columns`` equal stretches of ``wave`` (non-finite values as 0), 4 digits each."""
    values = np.where(np.isfinite(wave), wave, 0.0).astype(np.float64)
    return [[float(f"{part.min():.4g}"), float(f"{part.max():.4g}")]
            for part in np.array_split(values, min(columns, values.size)) if part.size]  # fmt: skip


def _mask_of(item: np.ndarray) -> np.ndarray | None:
    """An input's output as a time-frequency mask (a 2-D grid, both sides at least MIN_MASK_SIDE, every value in
    [0, 1]), or None when it is not one."""
    arr = np.squeeze(np.asarray(item))
    if arr.dtype.kind != "f" or arr.ndim != 2 or min(arr.shape) < MIN_MASK_SIDE or not np.isfinite(arr).all():
        return None
    return arr if decisions.probabilities(arr) else None


def mask_picture(mask: np.ndarray) -> str:
    """A mask as a small grey PNG data URI: 0 black, 1 white, its first axis (frequency) upwards."""
    pixels = (np.clip(mask[::-1], 0.0, 1.0) * 255.0).round().astype(np.uint8)
    picture = Image.fromarray(pixels)
    picture.thumbnail((MASK_WIDTH, MASK_WIDTH))
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _drawn(name: str, refs, vars_, measures: dict[str, float | None], view: str) -> OutputExamples:
    """An audio output measured as values, its worst inputs drawn: a ``waveform``'s envelopes, a ``mask``'s
    pictures (the original's and the variant's)."""
    found = _values(name, "continuous", refs, vars_, measures)
    found.view = view
    for example in sorted(found.examples, key=lambda e: e.differs, reverse=True)[:WORST]:
        a, b = refs[example.item], vars_[example.item]
        if view == "mask":
            example.original_mask, example.variant_mask = mask_picture(_mask_of(a)), mask_picture(_mask_of(b))
        else:
            example.original_wave, example.variant_wave = envelope(_samples_axis(a)), envelope(_samples_axis(b))
    return found


__all__ = ["WORST", "ctc_alphabet", "examples_of", "image_items", "marked_text", "match_boxes", "split_items", "thumbnail",
           "worst_examples"]  # fmt: skip

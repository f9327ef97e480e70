"""What changes: the worst inputs per output, in the output's own terms (issue 29, item 2)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from shrinkray.measure.parity import OutputKind, compare_outputs
from shrinkray.measure.what_changes import marked_text, split_items, worst_examples

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SCORES = OutputKind("scores", -1, "test")


def _batch(n: int, name: str = "x", shape: tuple = (4,)) -> list[dict[str, np.ndarray]]:
    return [{name: np.zeros((n, *shape), np.float32)}]


def _examples(ref, var, kinds, samples, **kw):
    parity = compare_outputs(ref, var, kinds)
    return {oe.output: oe for oe in worst_examples(parity, ref, var, samples, kinds, **kw)}


def test_split_items_reads_sets_then_the_batch():
    one_set = np.arange(12).reshape(3, 4)
    assert [i.tolist() for i in split_items(one_set, _batch(3))] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    two_sets = np.arange(16).reshape(2, 2, 4)  # 2 sets of a batch of 2
    assert len(split_items(two_sets, _batch(2) * 2)) == 4
    no_batch_axis = np.arange(5)  # an output without the batch axis: one item per set
    assert len(split_items(no_batch_axis, _batch(3))) == 1


def test_the_input_whose_top_class_changed_comes_first_with_its_top_classes():
    rng = np.random.default_rng(0)
    ref = rng.normal(size=(6, 10))
    ref[:, 7] += 5.0  # class 7 wins everywhere
    var = ref + rng.normal(scale=0.01, size=ref.shape)
    var[1] += 0.3  # input 2: scores move, the top class stays
    var[4, 2] = ref[4, 7] + 1.0  # input 5: class 2 now wins
    oe = _examples({"logits": ref}, {"logits": var}, {"logits": SCORES}, _batch(6))["logits"]
    assert oe.view == "classes" and oe.inputs == 6 and oe.changed == 1
    worst = oe.examples[0]
    assert worst.item == 4 and worst.where == "input 5" and worst.changed
    assert worst.original_top[0].index == 7 and worst.variant_top[0].index == 2
    assert worst.original_top[0].score == pytest.approx(ref[4, 7])
    assert [t.index for t in worst.original_top] == list(np.argsort(-ref[4])[:5])  # float16-safe: float32 scores
    assert oe.examples[1].item == 1 and not oe.examples[1].changed  # then the largest score change
    assert len(oe.examples) == 5


def _ctc(paths: list[list[int]], classes: int = 6) -> np.ndarray:
    out = np.full((len(paths), len(paths[0]), classes), 0.01)
    for i, path in enumerate(paths):
        out[i, np.arange(len(path)), path] = 0.9
    return out


def test_a_ctc_line_is_decoded_and_its_differing_characters_marked():
    ref_paths = [[0, 0, 3, 3, 0, 0, 2, 0, 0, 0, 4, 0],  # "c b d"
                 [0, 5, 0, 0, 0, 1, 1, 0, 0, 2, 0, 0],  # "e a b"
                 [0, 3, 0, 2, 0, 0, 1, 0, 0, 4, 0, 0]]  # "c b a d"  # fmt: skip
    var_paths = [[0, 3, 3, 0, 0, 0, 2, 2, 0, 0, 0, 4],  # same text, blanks moved: no change
                 [0, 5, 0, 0, 0, 1, 1, 0, 0, 1, 0, 0],  # "e a a": one character
                 [0, 3, 0, 0, 0, 0, 5, 0, 0, 4, 0, 0]]  # "c e d": b lost, a -> e  # fmt: skip
    ref, var = _ctc(ref_paths), _ctc(var_paths)
    oe = _examples({"rec": ref}, {"rec": var}, {"rec": SCORES}, _batch(3), alphabet=list("abcde"))["rec"]
    assert oe.view == "text" and oe.changed == 2 and oe.inputs == 3
    worst, second, same = oe.examples
    assert worst.where == "input 3" and worst.differs == 2
    assert (worst.original_text, worst.variant_text) == ("cbad", "ced")
    assert worst.original_marks == [[1, 3]] and worst.variant_marks == [[1, 2]]
    assert (second.original_text, second.variant_text) == ("eab", "eaa")
    assert second.original_marks == [[2, 3]] and second.variant_marks == [[2, 3]]
    assert not same.changed and same.original_text == same.variant_text == "cbd" and same.original_marks == []
    # without an alphabet the class numbers are the characters
    plain = _examples({"rec": ref}, {"rec": var}, {"rec": SCORES}, _batch(3))["rec"]
    assert plain.examples[1].original_text == "5 1 2 " and plain.examples[1].original_marks == [[4, 6]]


def test_marked_text_merges_adjacent_marks_and_cuts_long_text():
    assert marked_text(["a", "b", "c", "d"], [1, 2]) == ("abcd", [[1, 3]])
    text, spans = marked_text(["xy"] * 200, [0], most=10)
    assert text == "xyxyxyxyxy…" and spans == [[0, 2]]


def yolo_head(boxes, anchors: int = 200, classes: int = 3, seed: int = 0) -> np.ndarray:
    """[4 + classes, anchors] like YOLOv8 (one image): background anchors and the given (cx, cy, w, h, class, score)."""
    rng = np.random.default_rng(seed)
    rows = np.column_stack([rng.uniform(20, 300, (anchors, 2)), rng.uniform(10, 60, (anchors, 2)),
                            rng.uniform(0, 0.03, (anchors, classes))])  # fmt: skip
    for k, (cx, cy, w, h, cls, score) in enumerate(boxes):
        rows[k, :4] = (cx, cy, w, h)
        rows[k, 4 + cls] = score
    return rows.T


THREE = [(60, 60, 40, 30, 0, 0.9), (200, 80, 60, 60, 1, 0.8), (150, 250, 30, 80, 2, 0.7)]


def test_the_image_whose_box_moved_comes_first_drawn_over_the_input():
    moved = [THREE[0], (212, 80, 60, 60, 1, 0.8), THREE[2]]  # IoU 0.67
    lost = [THREE[0], (200, 80, 60, 60, 1, 0.05), THREE[2]]
    ref = np.stack([yolo_head(THREE), yolo_head(THREE), yolo_head(THREE)])
    var = np.stack([yolo_head(THREE), yolo_head(moved), yolo_head(lost)])
    kind = OutputKind("detections", -2, "test", input_size=(320, 320))
    image = np.random.default_rng(1).uniform(0, 1, (3, 3, 320, 320)).astype(np.float32)
    oe = _examples({"output0": ref}, {"output0": var}, {"output0": kind}, [{"images": image}])["output0"]
    assert oe.view == "boxes" and oe.changed == 2 and oe.inputs == 3
    worst = oe.examples[0]
    assert worst.item in (1, 2) and worst.changed and worst.frame == [320.0, 320.0]
    assert worst.image.startswith("data:image/jpeg;base64,") and len(worst.image) < 40_000
    by_item = {e.item: e for e in oe.examples}
    assert sorted(b.status for b in by_item[1].original_boxes) == ["kept", "kept", "moved"]
    assert sorted(b.status for b in by_item[1].variant_boxes) == ["kept", "kept", "moved"]
    assert sorted(b.status for b in by_item[2].original_boxes) == ["kept", "kept", "lost"]
    assert not by_item[0].changed and {b.status for b in by_item[0].original_boxes} == {"kept"}
    box = next(b for b in by_item[1].original_boxes if b.status == "moved")
    assert (box.x1, box.y1, box.x2, box.y2, box.label) == pytest.approx((170, 50, 230, 110, 1))


def test_other_outputs_get_a_table_of_values_worst_first():
    rng = np.random.default_rng(2)
    ref = rng.normal(size=(4, 16))
    var = ref + 0.001
    var[2] += rng.normal(scale=0.5, size=16)
    kinds = {"y": OutputKind("continuous"), "e": OutputKind("embedding")}
    found = _examples({"y": ref, "e": ref}, {"y": var, "e": var}, kinds, _batch(4))
    for name in ("y", "e"):
        oe = found[name]
        assert oe.view == "values" and oe.examples[0].item == 2
        assert oe.examples[0].max_abs_diff == pytest.approx(np.abs(var[2] - ref[2]).max())
        assert oe.examples[0].cosine < oe.examples[-1].cosine


def test_examples_are_kept_with_the_run_and_old_runs_still_load():
    """A real compare (the cnn sample) keeps its examples through the run store's JSON codec; a run stored
    before examples existed reads back with none."""
    from helpers import cached_sample

    from shrinkray.measure.results import CompareSettings
    from shrinkray.measure.results_json import results_codec
    from shrinkray.pipeline.compare import compare
    from shrinkray.pipeline.inspect import ModelSummary

    c = compare(cached_sample("cnn"), CompareSettings(methods=[("palettize", {"levels": 4})], latency=False,
                                                       brotli_quality=1))  # fmt: skip
    variant = c.variants[0]
    oe = variant.examples[0]
    assert oe.output == "scores" and oe.view == "classes" and oe.examples[0].changed  # 4 levels move classes
    assert oe.examples[0].differs >= oe.examples[-1].differs
    codec = results_codec({"ModelSummary": ModelSummary})
    for r in c.all:
        r.model = None
    text = codec.dumps(c)
    back = codec.loads(text)
    assert back.variants[0].examples == variant.examples
    old = json.loads(text)
    for r in [old["data"]["original"], *old["data"]["variants"]]:
        del r["examples"]
    assert codec.loads(json.dumps(old)).variants[0].examples == []


def test_a_continuation_is_marked_from_where_it_parts_the_earliest_first():
    from shrinkray.measure.generation import GENERATED

    ref = np.zeros((3, 4, 2))
    ref[:, :, 1] = 5.0  # sure of every token (no coin toss)
    ref[:, :, 0] = [[1, 2, 3, 4], [5, 6, 7, 8], [1, 1, 1, 1]]
    var = ref.copy()
    var[0, 2:, 0] = 9  # parts at token 3
    var[1, :, 0] = [6, 6, 7, 8]  # parts at once
    kinds = {GENERATED: OutputKind("generation")}
    oe = _examples({GENERATED: ref}, {GENERATED: var}, kinds, [{"ids": np.zeros((3, 8), np.int64)}])[GENERATED]
    assert oe.view == "text" and oe.changed == 2
    first, second, same = oe.examples
    assert first.where == "prompt 2" and first.differs == 4
    assert (first.original_text, first.original_marks) == ("5 6 7 8 ", [[0, 2]])  # "6 7 8" kept, one step on
    assert (first.variant_text, first.variant_marks) == ("6 6 7 8 ", [[2, 4]])
    assert (second.original_text, second.variant_text) == ("1 2 3 4 ", "1 2 9 9 ")
    assert second.original_marks == second.variant_marks == [[4, 8]]
    assert not same.changed and same.original_marks == []
    hesitant = ref.copy()
    hesitant[0, 2, 1] = 0.01  # the original's third token was a coin toss: parting there is no change
    oe = _examples({GENERATED: hesitant}, {GENERATED: var}, kinds, [{"ids": np.zeros((3, 8), np.int64)}])[GENERATED]
    told = next(e for e in oe.examples if e.item == 0)
    assert not told.changed and told.original_marks == [[4, 8]] and "hesitated" in told.where


def test_a_probability_map_shows_its_regions_moved():
    ref = np.zeros((2, 1, 32, 32))
    ref[:, :, 4:12, 4:12] = 0.95
    ref[:, :, 20:28, 16:30] = 0.9
    var = ref.copy()
    var[1, :, 20:28, 16:30] = 0.0
    var[1, :, 22:30, 20:30] = 0.9  # the second region moves
    kinds = {"maps": OutputKind("map")}
    image = np.zeros((2, 3, 64, 64), np.float32)
    oe = _examples({"maps": ref}, {"maps": var}, kinds, [{"x": image}])["maps"]
    assert oe.view == "boxes" and oe.changed == 1
    worst = oe.examples[0]
    assert worst.item == 1 and worst.frame == [32.0, 32.0] and worst.image.startswith("data:image/jpeg")
    assert sorted(b.status for b in worst.original_boxes) == ["kept", "moved"]
    assert (worst.original_boxes[0].x1, worst.original_boxes[0].y1) in ((4.0, 4.0), (16.0, 20.0))


def test_a_near_tie_in_the_original_is_no_change():
    ref = np.array([[1.0, 0.9995, 0.0], [1.0, 0.0, 0.0]])
    var = np.array([[0.9995, 1.0, 0.0], [1.0, 0.0, 0.0]])  # the tied position flips: a coin toss
    oe = _examples({"p": ref}, {"p": var}, {"p": SCORES}, _batch(2))["p"]
    assert oe.changed == 0


def test_labels_show_as_values_the_changed_ones_marked():
    ref = np.array([[3, 1], [2, 2], [0, 7]], np.int64)
    var = ref.copy()
    var[2, 1] = 5
    oe = _examples({"label": ref}, {"label": var}, {"label": OutputKind("exact", labels=True)}, _batch(3))["label"]
    assert oe.view == "text" and oe.changed == 1
    worst = oe.examples[0]
    assert (worst.where, worst.original_text, worst.variant_text) == ("input 3", "0 7 ", "0 5 ")
    assert worst.original_marks == worst.variant_marks == [[2, 4]] and worst.differs == 0.5


def test_an_output_that_cannot_be_shown_leaves_the_others(monkeypatch):
    import shrinkray.measure.what_changes as what_changes

    real = what_changes._examples

    def broken(name, *args):
        if name == "bad":
            raise RuntimeError("an odd output")
        return real(name, *args)

    monkeypatch.setattr(what_changes, "_examples", broken)
    ref = np.random.default_rng(3).normal(size=(2, 5))
    kinds = {"bad": SCORES, "good": SCORES}
    found = _examples({"bad": ref, "good": ref}, {"bad": ref, "good": ref + 0.1}, kinds, _batch(2))
    assert set(found) == {"good"}


def _denoised(n: int = 3, samples: int = 16000) -> tuple[np.ndarray, np.ndarray]:
    t = np.arange(samples) / 16000.0
    ref = np.stack([np.sin(2 * np.pi * (220 + 40 * i) * t) * 0.5 for i in range(n)])[:, None, :]
    var = ref.copy()
    var[1, 0, 4000:6000] += 0.3  # one input's stretch of samples changes
    return ref.astype(np.float32), var.astype(np.float32)


def test_an_audio_models_waveform_output_is_drawn_as_waveforms_worst_first():
    ref, var = _denoised()
    samples = [{"noisy": ref.copy()}]  # the model takes a waveform: its long float output is one too
    oe = _examples({"clean": ref}, {"clean": var}, {"clean": OutputKind("continuous")}, samples)["clean"]
    assert oe.view == "waveform" and oe.inputs == 3
    worst = oe.examples[0]
    assert worst.item == 1 and worst.max_abs_diff == pytest.approx(0.3, abs=1e-3)
    assert len(worst.original_wave) == len(worst.variant_wave) == 160
    assert max(hi for _, hi in worst.original_wave) == pytest.approx(0.5, abs=0.01)
    assert max(hi for _, hi in worst.variant_wave) > 0.7  # the change shows in the variant's envelope
    assert all(e.original_wave for e in oe.examples)


def test_a_long_feature_vector_of_an_image_model_stays_a_table_of_values():
    ref = np.random.default_rng(0).standard_normal((2, 4096)).astype(np.float32)
    samples = [{"image": np.zeros((2, 3, 32, 32), np.float32)}]
    oe = _examples({"features": ref}, {"features": ref * 1.01}, {"features": OutputKind("continuous")}, samples)
    assert oe["features"].view == "values" and not oe["features"].examples[0].original_wave
    named = _examples({"audio_out": ref}, {"audio_out": ref * 1.01}, {"audio_out": OutputKind("continuous")}, samples)
    assert named["audio_out"].view == "waveform"  # named like audio: drawn as such


def test_an_audio_models_mask_is_drawn_as_pictures_and_a_vision_models_is_not():
    rng = np.random.default_rng(2)
    ref = rng.uniform(0, 1, (2, 64, 50)).astype(np.float32)
    var = ref.copy()
    var[1, 10:20] = np.clip(var[1, 10:20] + 0.4, 0, 1)  # one input's band of frequencies changes
    audio = [{"audio": np.zeros((2, 16000), np.float32)}]
    oe = _examples({"gains": ref}, {"gains": var}, {"gains": OutputKind("continuous")}, audio)["gains"]
    assert oe.view == "mask" and oe.examples[0].item == 1
    assert oe.examples[0].original_mask.startswith("data:image/png;base64,")
    assert oe.examples[0].variant_mask != oe.examples[0].original_mask
    image = [{"image": np.zeros((2, 3, 64, 50), np.float32)}]
    seen = _examples({"gains": ref}, {"gains": var}, {"gains": OutputKind("continuous")}, image)["gains"]
    assert seen.view == "values" and not seen.examples[0].original_mask


def test_a_readers_worst_line_may_be_one_judged_by_its_top_classes():
    """Lines past the sets held in full (a tally of top classes) are read for What changes too: the one line
    the variant misreads is shown, not an unchanged one from the first sets."""
    from shrinkray.measure.parity import top_two

    rng = np.random.default_rng(0)
    top = np.where(rng.random((12, 10)) < 0.6, 0, rng.integers(1, 40, (12, 10)))
    ref = rng.normal(0, 0.1, (12, 10, 40))
    np.put_along_axis(ref, top[..., None], 5.0, axis=-1)
    var = ref.copy()
    var[9, 4] = 0.0
    var[9, 4, 7] = 9.0  # line 10 (in the tally) misread at one step
    kind = OutputKind("scores", -1, "test")
    tops = {"o": (top_two(ref[4:], -1), top_two(var[4:], -1))}
    samples = [{"x": np.zeros((4, 10), np.float32)}]
    parity = compare_outputs({"o": ref[:4]}, {"o": var[:4]}, {"o": kind}, tally=tops)
    found = worst_examples(parity, {"o": ref[:4]}, {"o": var[:4]}, samples, {"o": kind}, tops=tops)
    assert found and found[0].inputs == 12 and found[0].changed == 1
    assert found[0].examples[0].where == "input 10" and found[0].examples[0].changed


def test_a_yes_no_output_shows_the_inputs_whose_decision_flipped_first():
    """smart-turn: what a user sees change is an end of turn called where it was not ('yes (0.559)' -> 'no
    (0.403)'), not an RMS in a table."""
    from shrinkray.report.changes import example_words, summary

    ref = np.array([[0.9], [0.1], [0.559], [0.8], [0.52]])
    var = np.array([[0.7], [0.12], [0.403], [0.81], [0.47]])  # input 3 flips; 5 was a coin toss; 1 moved far
    kinds = {"turn": OutputKind("probability", why="test", probability=True)}
    oe = _examples({"turn": ref}, {"turn": var}, kinds, _batch(5))["turn"]
    assert oe.view == "text" and [e.item for e in oe.examples[:2]] == [2, 0]
    first = oe.examples[0]
    assert first.changed and not oe.examples[1].changed and not next(e for e in oe.examples if e.item == 4).changed
    assert example_words(oe, first) == 'input 3: "[yes (0.559)]" → "[no (0.403)]"'
    assert summary(oe).startswith("yes/no probabilities · changed on 1 of 5 inputs")

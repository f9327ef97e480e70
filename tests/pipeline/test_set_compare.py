"""A model set compared whole: each method on every file, the set judged by what it writes."""

from __future__ import annotations

import numpy as np
import pytest

from shrinkray.errors import ModelLoadError
from shrinkray.io.model_set import open_set
from shrinkray.measure.generation import GENERATED
from shrinkray.measure.results import CompareSettings
from shrinkray.measure.seq2seq import LOGITS
from shrinkray.pipeline.set_compare import compare_set
from tests.io.test_model_set import write_set

pytestmark = pytest.mark.slow  # sets compared whole, in this process


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    folder = write_set(tmp_path_factory.mktemp("set") / "s2s", config={"decoder_start_token_id": 0, "eos_token_id": 0})
    model_set = open_set(folder, workdir=folder.parent / "work")
    out = folder.parent / "variants"
    settings = CompareSettings(methods=[("float16", {}), ("weights-int4", {})], variants_dir=str(out))
    return folder, out, compare_set(model_set, settings)


def test_a_variant_set_is_every_file_shrunk_and_its_size_is_their_sum(compared):
    folder, out, comparison = compared
    fp16 = next(v for v in comparison.variants if v.key == "float16")
    written = sorted(p.name for p in (out / "float16" / "onnx").iterdir())
    assert written == ["decoder_model_fp16.onnx", "encoder_model_fp16.onnx"]  # transformers.js's names
    assert fp16.sizes.raw == sum(p.stat().st_size for p in (out / "float16" / "onnx").iterdir())
    assert comparison.original.sizes.raw == sum(p.stat().st_size for p in (folder / "onnx").iterdir())
    assert fp16.record["tensors_changed"] > 0 and all(c["name"].split(": ")[0].endswith(".onnx")
                                                      for c in fp16.record["changes"])  # fmt: skip


def test_the_set_is_judged_by_what_it_writes_and_a_damaged_variant_fails(compared):
    _, _, comparison = compared
    fp16, int4 = (next(v for v in comparison.variants if v.key == k) for k in ("float16", "weights-int4"))
    generated = {o.name: o for o in fp16.parity.outputs}[GENERATED]
    assert fp16.parity.status == "pass" and generated.kind == "generation"
    assert generated.measures["continuations"] >= 150  # the verdict rests on enough outputs to decide
    # 4-bit weights (uncalibrated: a set's decoder has no inputs of its own to learn from) on this untrained
    # set change most outputs: failed, by the outputs themselves and the next token over the original's output
    assert int4.parity.status == "fail"
    assert {o.name: o.status for o in int4.parity.outputs} == {GENERATED: "fail", LOGITS: "fail"}
    assert any("Uncalibrated in a set" in n for n in int4.notes)
    assert "judged through decoder_model.onnx" in comparison.input_note
    assert [s.name for s in comparison.summary.inputs] == ["input_ids", "attention_mask"]
    assert [s.name for s in comparison.summary.outputs] == ["logits"]


def test_each_judged_variant_reaches_the_page_before_the_sizes(tmp_path):
    folder = write_set(tmp_path / "s2s", config={"decoder_start_token_id": 0, "eos_token_id": 0})
    snapshots = []
    settings = CompareSettings(methods=[("float16", {}), ("weights-int8", {})])
    final = compare_set(open_set(folder, workdir=tmp_path / "w"), settings, on_partial=snapshots.append)
    assert [[v.key for v in s.variants] for s in snapshots] == [[], ["float16"], ["float16", "weights-int8"]]
    assert snapshots[-1].variants[-1].parity.status == final.variants[-1].parity.status
    assert all(v.sizes is None for s in snapshots for v in s.variants) and final.variants[0].sizes is not None


def test_auto_is_refused_for_a_set_in_words(tmp_path):
    folder = write_set(tmp_path / "s2s")
    with pytest.raises(ModelLoadError, match="works on one model file, not on a set"):
        compare_set(open_set(folder, workdir=tmp_path / "w"), CompareSettings(methods=[("auto", {})]))


def test_the_trained_sample_keeps_its_outputs_and_a_damaged_variant_is_failed_in_words(tmp_path):
    """The bundled translation-like sample (sample_models/tiny_seq2seq: it writes a sentence's words in reverse
    order): 160 lines of its own prompts.txt through its tokenizer; float16 keeps every output, 4 values per
    tensor change what it writes, and the verdict shows one change as text."""
    from helpers import ROOT

    model_set = open_set(ROOT / "sample_models" / "tiny_seq2seq", workdir=tmp_path)
    settings = CompareSettings(methods=[("float16", {}), ("palettize", {"levels": 4})])
    comparison = compare_set(model_set, settings)
    assert "the lines of prompts.txt through tokenizer.json" in comparison.input_note
    fp16, damaged = comparison.variants
    kept = {o.name: o for o in fp16.parity.outputs}[GENERATED]
    assert fp16.parity.status == "pass" and kept.measures["continuations"] == 160
    changed = {o.name: o for o in damaged.parity.outputs}[GENERATED]
    assert damaged.parity.status == "fail" and changed.measures["continuation_agreement"] < 0.9
    assert 'came out as "' in changed.decisions and '" and now as "' in changed.decisions
    shown = damaged.examples[0]  # what the app's "What changes" and the reports show: the outputs as text
    assert shown.view == "text" and shown.changed > 0 and shown.worst.where.startswith("input ")
    assert shown.worst.original_text != shown.worst.variant_text and shown.worst.variant_marks
    assert "<|endoftext|><|endoftext|>" not in shown.worst.original_text  # no run of end tokens after the output


def _merged(decoder):
    """The plain decoder as optimum's merged form: a ``use_cache_branch`` flag and an empty past read beside it
    (on its no-cache branch the merged decoder computes what the plain one does)."""
    import onnx
    from onnx import TensorProto, helper

    merged = onnx.ModelProto()
    merged.CopyFrom(decoder)
    graph = merged.graph
    graph.input.extend([
        helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1]),
        helper.make_tensor_value_info("past_key_values.0.decoder.key", TensorProto.FLOAT,
                                      ["batch_size", 4, "past_decoder_sequence_length", 16]),
    ])  # fmt: skip
    graph.node.extend([helper.make_node("Cast", ["use_cache_branch"], ["branch_read"], to=TensorProto.FLOAT),
                       helper.make_node("Shape", ["past_key_values.0.decoder.key"], ["past_shape"])])  # fmt: skip
    graph.output.extend([helper.make_tensor_value_info("branch_read", TensorProto.FLOAT, [1]),
                         helper.make_tensor_value_info("past_shape", TensorProto.INT64, [4])])  # fmt: skip
    onnx.checker.check_model(merged)
    return merged


def test_a_merged_decoder_is_run_on_its_no_cache_branch_and_writes_what_the_plain_one_writes(tmp_path):
    import onnx

    from shrinkray.measure import seq2seq
    from shrinkray.pipeline.set_run import Route, run_set
    from tests.seq2seq_models import seq2seq_set

    models = seq2seq_set(width=32, layers=1)  # as write_set makes them
    write_set(tmp_path / "plain", config={"decoder_start_token_id": 0, "eos_token_id": 0})
    (tmp_path / "merged" / "onnx").mkdir(parents=True)
    onnx.save(models["encoder_model"], str(tmp_path / "merged" / "onnx" / "encoder_model.onnx"))
    onnx.save(_merged(models["decoder_model"]), str(tmp_path / "merged" / "onnx" / "decoder_model_merged.onnx"))
    sets = {name: open_set(tmp_path / name, workdir=tmp_path / "w") for name in ("plain", "merged")}
    assert sets["merged"].members == {"encoder": "onnx/encoder_model.onnx", "decoder_merged": "onnx/decoder_model_merged.onnx"}
    merged_layout = seq2seq.layout_of(models["encoder_model"], _merged(models["decoder_model"]), {})
    assert seq2seq.cache_step(_merged(models["decoder_model"]), _merged(models["decoder_model"])) is None  # no present.*
    assert merged_layout.use_cache == "use_cache_branch"
    assert [name for name, _, _ in merged_layout.past] == ["past_key_values.0.decoder.key"]
    plain_layout = seq2seq.layout_of(models["encoder_model"], models["decoder_model"], {})
    batches = seq2seq.input_batches(plain_layout, batches=2)
    plain_out = run_set({r: sets["plain"].path(r) for r in ("encoder", "decoder")}, Route("decoder"), plain_layout,
                          batches, None)  # fmt: skip
    merged_out = run_set({r: sets["merged"].path(r) for r in ("encoder", "decoder_merged")}, Route("decoder_merged"),
                           merged_layout, batches, None)  # fmt: skip
    assert (plain_out[GENERATED] == merged_out[GENERATED]).all()
    comparison = compare_set(sets["merged"], CompareSettings(methods=[("float16", {})]))
    assert "judged through decoder_model_merged.onnx" in comparison.input_note
    assert comparison.variants[0].parity.status == "pass"


def test_a_set_with_a_cached_decoder_is_run_token_by_token_through_it_and_writes_what_the_plain_one_writes(tmp_path):
    """optimum's three files: decoder_model (giving the cache) on the first step, decoder_with_past_model a token at a
    time after it, as runtimes run a set; the same weights without a cache write the same outputs."""
    import onnx

    from shrinkray.measure import seq2seq
    from shrinkray.pipeline.set_run import Route, run_set
    from tests.seq2seq_models import seq2seq_set

    cached = seq2seq_set(width=32, layers=1, cached=True)
    folder = tmp_path / "cached" / "onnx"
    folder.mkdir(parents=True)
    for stem, model in cached.items():
        onnx.save(model, str(folder / f"{stem}.onnx"))
    write_set(tmp_path / "plain", config={"decoder_start_token_id": 0, "eos_token_id": 0})
    model_set = open_set(tmp_path / "cached", workdir=tmp_path / "w")
    cache = seq2seq.cache_step(cached["decoder_model"], cached["decoder_with_past_model"])
    assert cache is not None and not cache.takes_states and len(cache.past) == 4
    layout = seq2seq.layout_of(cached["encoder_model"], cached["decoder_model"], {})
    batches = seq2seq.input_batches(layout, batches=2)
    route = Route("decoder", "decoder_with_past", cache)
    through_cache = run_set({r: model_set.path(r) for r in model_set.members}, route, layout, batches, None)
    plain = open_set(tmp_path / "plain", workdir=tmp_path / "w")
    whole = run_set({r: plain.path(r) for r in plain.members}, Route("decoder"), layout, batches, None)
    assert (through_cache[GENERATED][..., 0] == whole[GENERATED][..., 0]).all()
    comparison = compare_set(model_set, CompareSettings(methods=[("float16", {})]))
    assert ", then decoder_with_past_model.onnx through the cache a token at a time" in comparison.input_note
    assert comparison.variants[0].parity.status == "pass"
    assert len(comparison.variants[0].record["files"]) == 3  # every file shrunk, the cached one too
    import shutil

    from helpers import ROOT

    for name in ("tokenizer.json", "prompts.txt"):  # text of its own: weights-int4 learns, the cached file too
        shutil.copy(ROOT / "sample_models" / "tiny_seq2seq" / name, tmp_path / "cached" / name)
    learned = compare_set(open_set(tmp_path / "cached", workdir=tmp_path / "w"),
                          CompareSettings(methods=[("weights-int4", {})])).variants[0]  # fmt: skip
    told = next(n for n in learned.notes if n.startswith("Calibrated in the set"))
    assert "data-free" not in told and learned.parity is not None
    assert not [n for n in learned.notes if "Calibration was skipped" in n]  # each file's calibration ran


def test_an_undecided_set_verdict_gathers_more_lines_never_the_same_twice(tmp_path):
    """A verdict the 160 judged lines leave undecided (here: 99.9% asked of float16, which keeps every output, so
    no count of lines can prove it) runs the reserve: the rest of prompts.txt, every line once, but its last 32
    (held out: a calibrating method learns from them)."""
    import shutil

    from helpers import ROOT

    from shrinkray.measure.parity import build_verdict

    folder = write_set(tmp_path / "s2s", config={"decoder_start_token_id": 0, "eos_token_id": 0})
    for name in ("tokenizer.json", "prompts.txt"):  # 400 lines of text through a tokenizer of the same 512 ids
        shutil.copy(ROOT / "sample_models" / "tiny_seq2seq" / name, folder / name)
    verdict = build_verdict("relative", [f"{GENERATED}:min_continuation_agreement=0.999"], [])
    settings = CompareSettings(methods=[("float16", {})], verdict=verdict)
    comparison = compare_set(open_set(folder, workdir=tmp_path / "w"), settings)
    generated = {o.name: o for o in comparison.variants[0].parity.outputs}[GENERATED]
    assert generated.status == "undecided" and generated.measures["continuation_agreement"] == 1.0
    assert generated.measures["continuations"] + generated.measures["undecided_continuations"] == 400 - 32
    from shrinkray.cli import advice_lines

    assert any("--text FILE (one input per line)" in line for line in advice_lines(comparison))  # the set's own words


def test_a_capped_worker_judges_a_set_on_the_batches_its_time_allows():
    import time

    from shrinkray.pipeline.set_compare import _batches_that_fit

    assert _batches_that_fit(10, 30.0, 5, None) == 10  # a direct call has no cap
    now = time.perf_counter()
    # 600 s less the plan's 15% margin: 510 s left, 520 with the original's first batch already run; each batch
    # costs the original's 10 s again per variant run and per shrink: 110 s
    assert _batches_that_fit(10, 10.0, 5, (now, 600.0)) == 4
    assert _batches_that_fit(10, 1.0, 5, (now, 600.0)) == 10
    assert _batches_that_fit(10, 300.0, 5, (now, 600.0)) == 1  # at least one: the verdict then says what it rests on


def test_a_speech_set_is_fed_clips_of_voiced_audio_as_its_encoders_features(tmp_path):
    """Whisper's layout (input_features [batch, 80 bins, frames], a decoder without encoder_attention_mask, the
    cache): judged like a text set on clips of voiced audio, as log-mel features laid out as the encoder takes them."""
    import onnx

    from shrinkray.measure import seq2seq

    folder = _speech_folder(tmp_path, cached=True)
    models = {p.stem: onnx.load(str(p)) for p in (folder / "onnx").iterdir()}
    layout = seq2seq.layout_of(models["encoder_model"], models["decoder_model"], {})
    assert layout.features == (1, 2, 80, 200) and layout.decoder_mask is None
    batch = seq2seq.input_batches(layout, batches=1)[0]
    assert batch["input_features"].shape == (16, 80, 200) and batch["input_features"].dtype == np.float32
    comparison = compare_set(open_set(folder, workdir=tmp_path / "w"),
                             CompareSettings(methods=[("float16", {}), ("palettize", {"levels": 4})]))  # fmt: skip
    assert "clips of voiced audio as log-mel features (80 bins x 200 frames)" in comparison.input_note
    assert "decoder_with_past_model.onnx through the cache" in comparison.input_note
    fp16, damaged = comparison.variants
    assert fp16.parity.status == "pass" and damaged.parity.status == "fail"
    # more inputs of its own are recordings, in each front end's words (a text set's are lines of text)
    from app_ui.controls import APP_ADVICE
    from shrinkray.cli import CLI_ADVICE
    from shrinkray.verdict.advice import OWN_CLIPS, _own_inputs

    assert _own_inputs(comparison) is OWN_CLIPS
    assert "--inputs a.wav,b.wav" in CLI_ADVICE["own_inputs"](OWN_CLIPS)
    assert "upload WAV recordings" in APP_ADVICE["own_inputs"](OWN_CLIPS)


def test_the_browser_panel_gets_the_comparisons_first_inputs_each_on_its_own_and_the_variants_files(tmp_path):
    from helpers import ROOT

    from shrinkray.pipeline.set_inputs import BROWSER_INPUTS, browser_inputs
    from shrinkray.pipeline.set_run import variant_paths

    model_set = open_set(ROOT / "sample_models" / "tiny_seq2seq", workdir=tmp_path)
    settings = CompareSettings(methods=[("float16", {})], variants_dir=str(tmp_path / "variants"))
    comparison = compare_set(model_set, settings)
    inputs = browser_inputs(model_set, settings)
    assert inputs.same_as(comparison)  # the same inputs as the comparison's, by their values
    assert len(inputs.samples) == BROWSER_INPUTS and all(s["input_ids"].shape[0] == 1 for s in inputs.samples)
    assert all(s["attention_mask"].all() for s in inputs.samples)  # each input unpadded, as a page feeds it
    steps = inputs.model_set["steps"]
    ends = [int(np.argmax(row[:, 0] == 0)) + 1 for row in inputs.reference[GENERATED]]
    assert steps == ends  # each written up to its own end token
    assert inputs.payload()["set"]["encoderOutput"] == "last_hidden_state"
    paths = variant_paths(model_set, comparison.variants[0])
    assert {role: p.name for role, p in paths.items()} == {"encoder": "encoder_model_fp16.onnx",
                                                           "decoder": "decoder_model_fp16.onnx"}  # fmt: skip
    assert variant_paths(model_set, comparison.original)["encoder"] == model_set.path("encoder")
    from shrinkray.verdict.advice import OWN_LINES, _own_inputs

    assert _own_inputs(comparison) is OWN_LINES  # a text set's own inputs are lines of text


def test_a_members_external_data_counts_in_the_sets_size_under_optimums_naming(tmp_path):
    import onnx

    from tests.seq2seq_models import seq2seq_set

    folder = tmp_path / "s2s" / "onnx"
    folder.mkdir(parents=True)
    models = seq2seq_set(width=32, layers=1)
    onnx.save(models["encoder_model"], str(folder / "encoder_model.onnx"))
    onnx.save(models["decoder_model"], str(folder / "decoder_model.onnx"), save_as_external_data=True,
              location="decoder_model.onnx_data")  # as optimum names a decoder's weights
    comparison = compare_set(open_set(tmp_path / "s2s", workdir=tmp_path / "w"), CompareSettings(methods=[("float16", {})]))
    assert comparison.original.sizes.raw == sum(p.stat().st_size for p in folder.iterdir())
    assert (folder / "decoder_model.onnx_data").stat().st_size > 0.5 * comparison.original.sizes.raw
    assert comparison.variants[0].parity.status == "pass"


def _speech_folder(tmp_path, cached: bool = False):
    """A seeded Whisper-like set (input_features [batch, 80, 200]) in a transformers.js folder."""
    import json

    import onnx

    from tests.seq2seq_models import speech_set

    folder = tmp_path / "whisper-like"
    (folder / "onnx").mkdir(parents=True)
    for stem, model in speech_set(width=32, layers=1, cached=cached).items():
        onnx.save(model, str(folder / "onnx" / f"{stem}.onnx"))
    (folder / "generation_config.json").write_text(json.dumps({"decoder_start_token_id": 1, "eos_token_id": 0}))
    return folder


def test_a_speech_set_is_judged_on_the_users_own_clips_and_a_text_set_refuses_files_it_cannot_read(tmp_path):
    import wave

    from shrinkray.errors import OptionError
    from shrinkray.measure import content

    clips = []
    for index, clip in enumerate(content.speech(3, 32000, rate=16000, seed=5)):
        path = tmp_path / f"clip{index}.wav"
        with wave.open(str(path), "wb") as out:
            out.setnchannels(1), out.setsampwidth(2), out.setframerate(16000)
            out.writeframes((np.clip(clip, -1, 1) * 32767).astype("<i2").tobytes())
        clips.append(str(path))
    speech = open_set(_speech_folder(tmp_path), workdir=tmp_path / "w")
    comparison = compare_set(speech, CompareSettings(methods=[("float16", {})], sample_files=clips))
    assert "3 inputs, your 3 clips (clip0.wav, clip1.wav, clip2.wav) as log-mel features" in comparison.input_note
    generated = {o.name: o for o in comparison.variants[0].parity.outputs}[GENERATED]
    assert generated.measures["continuations"] + generated.measures["undecided_continuations"] == 3  # no reserve
    text_set = open_set(write_set(tmp_path / "s2s"), workdir=tmp_path / "w")
    with pytest.raises(OptionError, match="reads text, so it cannot be fed clip0.wav"):
        compare_set(text_set, CompareSettings(methods=[("float16", {})], sample_files=clips[:1]))
    with pytest.raises(OptionError, match="not arrays like inputs.npz"):
        compare_set(text_set, CompareSettings(methods=[("float16", {})], inputs_path=str(tmp_path / "inputs.npz")))


def test_a_failing_set_variant_is_never_advised_a_search_or_calibration_a_set_does_not_run(tmp_path):
    from shrinkray.verdict.advice import advise

    folder = write_set(tmp_path / "s2s", config={"decoder_start_token_id": 0, "eos_token_id": 0})
    comparison = compare_set(open_set(folder, workdir=tmp_path / "w"), CompareSettings(methods=[("weights-int4", {})]))
    assert comparison.variants[0].parity.status == "fail"
    hints = [h for a in advise(comparison) if a.variant == "weights-int4" for h in a.hints]
    assert not [h for h in hints if h.setting in ("culprits", "auto", "exclude")]
    assert "GPTQ" not in " ".join(a.text for a in advise(comparison))


def test_weights_int4_learns_in_a_set_from_its_own_held_out_lines_and_keeps_closer(tmp_path):
    """The sample's last 32 lines (never judged): the encoder calibrated on them, the decoder on the encoder's
    states and the original's outputs; its next-token distributions stay closer than the data-free build's.
    A set without text of its own is shrunk data-free and says so."""
    from helpers import ROOT

    from shrinkray.measure.seq2seq import LOGITS

    model_set = open_set(ROOT / "sample_models" / "tiny_seq2seq", workdir=tmp_path)
    methods = [("weights-int4", {}), ("weights-int4", {"activation_aware": False})]
    learned, free = compare_set(model_set, CompareSettings(methods=methods)).variants
    assert any(n.startswith("Calibrated in the set on 32 inputs not judged (the last lines of prompts.txt)")
               for n in learned.notes)  # fmt: skip
    assert not any("alibrated" in n for n in free.notes)  # data-free on request: nothing to say
    kl = [{o.name: o for o in v.parity.outputs}[LOGITS].measures["kl_divergence"] for v in (learned, free)]
    assert kl[0] < 0.8 * kl[1], kl  # measured 0.0026 against 0.0040
    seeded = open_set(write_set(tmp_path / "s2s"), workdir=tmp_path / "w")
    plain = compare_set(seeded, CompareSettings(methods=[("weights-int4", {})])).variants[0]
    assert any(n.startswith("Uncalibrated in a set") for n in plain.notes)


def test_review_findings_whisper_dims_from_config_a_blank_text_and_a_merged_decoder_with_spare_files(tmp_path):
    """Whisper's export names its mel bins and frames only in config.json; a text of blank lines is refused in one
    sentence; beside a merged decoder, the plain and cached ones are spare (transformers.js downloads neither)."""

    from shrinkray.errors import OptionError
    from shrinkray.io.model_set import set_members
    from shrinkray.measure import seq2seq
    from tests.seq2seq_models import speech_set

    models = speech_set(width=32, layers=1)
    encoder = models["encoder_model"]
    dims = encoder.graph.input[0].type.tensor_type.shape.dim
    dims[1].dim_param, dims[2].dim_param = "feature_size", "encoder_sequence_length"  # as optimum exports Whisper
    assert seq2seq.layout_of(encoder, models["decoder_model"], {}) is None
    layout = seq2seq.layout_of(encoder, models["decoder_model"], {"num_mel_bins": 80, "max_source_positions": 100})
    assert layout.features == (1, 2, 80, 200)
    import shutil

    from helpers import ROOT

    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n\n")
    write_set(tmp_path / "s2s")
    shutil.copy(ROOT / "sample_models" / "tiny_seq2seq" / "tokenizer.json", tmp_path / "s2s" / "tokenizer.json")
    settings = CompareSettings(methods=[("float16", {})])
    settings.inputs.text = str(blank)
    with pytest.raises(OptionError, match="blank.txt has no lines to feed the set"):
        compare_set(open_set(tmp_path / "s2s", workdir=tmp_path / "w"), settings)
    assert set_members(["onnx/encoder_model.onnx", "onnx/decoder_model.onnx", "onnx/decoder_with_past_model.onnx",
                        "onnx/decoder_model_merged.onnx"]) == {"encoder": "onnx/encoder_model.onnx",
                                                               "decoder_merged": "onnx/decoder_model_merged.onnx"}  # fmt: skip


def test_a_merged_decoders_cache_branch_keeps_the_first_steps_encoder_keys():
    """optimum's merged decoder returns empty placeholders for the encoder's keys and values on its cache branch:
    the steps after it are fed the first step's, never the placeholders."""
    from shrinkray.measure import seq2seq

    layout = seq2seq.Seq2SeqLayout("input_ids", None, "last_hidden_state", "input_ids", "encoder_hidden_states", None,
                                   "logits", 8, 0, None)  # fmt: skip
    cache = seq2seq.CacheStep(past=("past_key_values.0.encoder.key", "past_key_values.0.decoder.key"), takes_states=True,
                              use_cache="use_cache_branch")  # fmt: skip
    real = np.ones((2, 1, 5, 4), np.float32)
    seen = []

    def logits(step: int) -> np.ndarray:
        out = np.zeros((2, 1, 8), np.float32)
        out[:, :, (step + 1) % 8] = 5.0
        return out

    def first(feeds):
        return {"logits": logits(0), "present.0.encoder.key": real, "present.0.decoder.key": np.zeros((2, 1, 1, 4))}

    def step(feeds):
        seen.append(feeds["past_key_values.0.encoder.key"].shape)
        return {"logits": logits(len(seen)), "present.0.encoder.key": np.zeros((0, 1, 0, 4), np.float32),
                "present.0.decoder.key": np.zeros((2, 1, len(seen) + 1, 4))}  # fmt: skip

    encoder = lambda feeds: {"last_hidden_state": np.zeros((2, 3, 4), np.float32)}  # noqa: E731
    seq2seq.generate(encoder, first, layout, {"input_ids": np.ones((2, 3), np.int64)}, None, step, cache)
    assert seen and all(shape == real.shape for shape in seen)


def test_the_sets_run_hands_on_each_batchs_encoder_states_as_the_encoder_gives_them(tmp_path):
    """What the calibration inputs are built from (they ran the encoder a second time before): one array a batch,
    the encoder's own output on it, and the run's outputs the same with or without handing them on."""
    from shrinkray.graph.sessions import open_file_session
    from shrinkray.measure import seq2seq
    from shrinkray.pipeline.set_run import Route, run_set
    from tests.seq2seq_models import seq2seq_set

    models = seq2seq_set(width=32, layers=1)  # as write_set makes them
    write_set(tmp_path / "plain", config={"decoder_start_token_id": 0, "eos_token_id": 0})
    model_set = open_set(tmp_path / "plain", workdir=tmp_path / "w")
    paths = {role: model_set.path(role) for role in ("encoder", "decoder")}
    layout = seq2seq.layout_of(models["encoder_model"], models["decoder_model"], {})
    batches = seq2seq.input_batches(layout, batches=3)
    states: list[np.ndarray] = []
    handed = run_set(paths, Route("decoder"), layout, batches, None, states=states)
    encoder = open_file_session(paths["encoder"], optimized=True, threads=1)
    assert len(states) == len(batches) == 3
    for batch, kept in zip(batches, states, strict=True):
        np.testing.assert_array_equal(kept, encoder.run([layout.encoder_output], batch)[0])
    plain = run_set(paths, Route("decoder"), layout, batches, None)
    np.testing.assert_array_equal(handed[GENERATED], plain[GENERATED])

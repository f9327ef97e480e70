"""Decoder LMs: recognized by their layout, fed prompts as the layout defines them, judged by what they write."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from shrinkray.io.files import find_tokenizer
from shrinkray.measure import decoder_lm, lm_text
from shrinkray.measure.confidence import decisions_to_pass
from shrinkray.measure.decoder_lm import GENERATED, continuation_measures, generate, layout_of, mean_kl
from shrinkray.measure.inputs import InputOptions, synthesize
from shrinkray.measure.output_kinds import classify_outputs
from shrinkray.measure.parity import GENERATION, compare_outputs
from shrinkray.measure.parity_inputs import parity_inputs, session_outputs
from shrinkray.measure.results import CompareSettings
from shrinkray.verdict.parity_verdict import parity_verdict
from tests.lm_models import damaged
from tests.lm_models import decoder_lm as build_lm


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _runner(model: onnx.ModelProto):
    session = _session(model)
    names = [o.name for o in session.get_outputs()]
    return lambda feeds: dict(zip(names, session.run(None, feeds), strict=True))


@pytest.fixture(scope="module")
def cached() -> onnx.ModelProto:
    return build_lm("cached")


@pytest.mark.parametrize("layout", ["cached", "plain", "merged"])
def test_every_layout_is_recognized_with_its_inputs(layout: str) -> None:
    found = layout_of(build_lm(layout))
    assert found is not None and found.vocab == 512 and found.logits == "logits"
    assert found.cached == (layout != "plain")
    assert (found.use_cache == "use_cache_branch") == (layout == "merged")
    if found.cached:
        assert len(found.past) == 4 and {p.heads for p in found.past} == {4} and {p.head_dim for p in found.past} == {16}
        assert found.past[0].output == "present.0.key"


def _encoder(vocab: int = 512, width: int = 16) -> onnx.ModelProto:
    """input_ids, attention_mask -> logits [batch, sequence, vocab] with no causal mask: a masked LM's shape."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((vocab, width)).astype(np.float32), "table"),
             numpy_helper.from_array(rng.standard_normal((width, vocab)).astype(np.float32), "head")]
    nodes = [helper.make_node("Gather", ["table", "input_ids"], ["h"]), helper.make_node("MatMul", ["h", "head"], ["logits"])]
    graph = helper.make_graph(nodes, "mlm", [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "sequence", vocab])], inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def test_a_masked_lm_or_a_token_classifier_is_not_a_decoder() -> None:
    assert layout_of(_encoder()) is None  # no causal mask: it sees the whole sentence
    assert layout_of(build_lm("cached", vocab=9)) is None  # 9 labels per token: token classification


def test_prompts_fill_each_input_as_the_layout_defines_it(cached: onnx.ModelProto) -> None:
    """Issue 28: the past was guessed 64 long, positions all zeros and the cache filled like images."""
    feeds = synthesize(cached, InputOptions(seed=3), batch=8).feeds
    assert feeds["input_ids"].shape == (8, decoder_lm.PROMPT_TOKENS)
    assert feeds["attention_mask"].shape == (8, decoder_lm.PROMPT_TOKENS) and feeds["attention_mask"].all()
    assert (feeds["position_ids"] == np.arange(decoder_lm.PROMPT_TOKENS)).all()
    assert feeds["past_key_values.0.key"].shape == (8, 4, 0, 16)
    assert 0 <= feeds["input_ids"].min() and feeds["input_ids"].max() < 512
    # drawn like text: a few ids are most of it, so ids repeat far more than uniform draws would
    _, counts = np.unique(feeds["input_ids"], return_counts=True)  # float16-safe: int64 ids
    assert counts.max() >= 8
    other = synthesize(cached, InputOptions(seed=4), batch=8).feeds
    assert not np.array_equal(feeds["input_ids"], other["input_ids"])


def test_generation_through_the_cache_equals_generation_without_it() -> None:
    feeds = decoder_lm.synthesize_prompts(layout_of(build_lm("cached")), InputOptions(), 4)[0]
    made = {}
    for layout in ("cached", "plain", "merged"):
        model = build_lm(layout)
        found = layout_of(model)
        made[layout] = generate(_runner(model), found, decoder_lm.prompt_feeds(found, feeds["input_ids"]), tokens=6)
    assert made["cached"][GENERATED].shape == (4, 6, 2)  # each token and its margin over the runner-up
    assert (made["cached"][GENERATED][..., 1] >= 0).all()
    for layout in ("plain", "merged"):
        assert np.array_equal(made[layout][GENERATED][..., 0], made["cached"][GENERATED][..., 0])
        np.testing.assert_allclose(made[layout]["logits"], made["cached"]["logits"], atol=1e-4)


def _generated(tokens, margins=None) -> np.ndarray:
    tokens = np.asarray(tokens, np.float64)
    margins = np.full(tokens.shape, 5.0) if margins is None else np.asarray(margins, np.float64)
    return np.stack([tokens, margins], axis=-1)


def test_continuations_are_kept_whole_or_not() -> None:
    ref = _generated([[1, 2, 3, 4], [5, 6, 7, 8], [1, 1, 1, 1]])
    var = _generated([[1, 2, 3, 4], [5, 6, 9, 9], [2, 1, 1, 1]])
    got = continuation_measures(ref, var)
    assert got["continuation_agreement"] == pytest.approx(1 / 3)
    assert got["continuations"] == 3 and got["continuation_tokens"] == 4
    assert got["first_divergence"] == 2.0  # median of tokens 3 and 1
    assert continuation_measures(ref, ref)["first_divergence"] is None


def test_a_continuation_is_judged_up_to_the_originals_first_coin_toss() -> None:
    """Where the original's two best tokens were within TIE_LOGODDS, another pick changes nothing reliable."""
    tie = decoder_lm.TIE_LOGODDS / 2
    ref = _generated([[1, 2, 3, 4], [5, 6, 7, 8], [1, 1, 1, 1]], [[5, 5, tie, 5], [tie, 5, 5, 5], [5, 5, 5, 5]])
    var = _generated([[1, 2, 9, 9], [9, 6, 7, 8], [1, 1, 1, 2]])
    got = continuation_measures(ref, var)
    assert got["continuations"] == 2 and got["undecided_continuations"] == 1  # the second: a toss at once
    assert got["shortened_continuations"] == 1  # the first: judged on its first two tokens, which it keeps
    assert got["continuation_agreement"] == pytest.approx(1 / 2)  # the third changed its last token
    assert got["first_divergence"] == 4.0
    # a variant that parts before the toss is changed
    early = _generated([[1, 7, 3, 4], [5, 6, 7, 8], [1, 1, 1, 1]])
    assert continuation_measures(ref, early)["continuation_agreement"] == pytest.approx(1 / 2)


def test_kl_divergence_is_zero_for_the_same_logits_and_grows_with_change() -> None:
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((3, 5, 300)) * 4
    assert mean_kl(logits, logits) == pytest.approx(0.0, abs=1e-12)
    assert 0 < mean_kl(logits, logits + rng.standard_normal(logits.shape) * 0.1) < mean_kl(
        logits, logits + rng.standard_normal(logits.shape))
    assert mean_kl(logits, logits + 7.0) == pytest.approx(0.0, abs=1e-9)  # a shift is the same distribution


def test_outputs_are_the_logits_and_the_generated_tokens(cached: onnx.ModelProto) -> None:
    inputs = parity_inputs(cached, CompareSettings())
    assert set(inputs.reference) == {"logits", GENERATED}  # the cache's present.* are not judged apart
    assert inputs.decoder is not None
    assert inputs.kinds[GENERATED].kind == GENERATION
    assert inputs.kinds["logits"].kind == "scores" and inputs.kinds["logits"].tokens
    prompts = int(np.prod(inputs.reference[GENERATED].shape[:-2]))
    assert prompts >= 160  # sets enough for 160 decisions at the first set's rate of decided prompts
    assert decoder_lm.continuation_count(inputs.reference[GENERATED]) >= decisions_to_pass(0.95, flips=2)
    assert "greedy tokens" in inputs.note and "a decoder with a cache of 2 layers" in inputs.note


def test_a_damaged_variant_fails_by_what_it_writes_and_the_original_passes(cached: onnx.ModelProto) -> None:
    inputs = parity_inputs(cached, CompareSettings())
    same = session_outputs(_session(cached), inputs.samples, None, inputs.decoder)
    assert parity_verdict(compare_outputs(inputs.reference, same, inputs.kinds)).passed
    broken = session_outputs(_session(damaged(cached, 0.3)), inputs.samples, None, inputs.decoder)
    parity = compare_outputs(inputs.reference, broken, inputs.kinds)
    verdict = parity_verdict(parity)
    assert verdict.status == "fail"
    generated = next(o for o in verdict.outputs if o.output == GENERATED)
    assert generated.status == "fail" and "prompts" in generated.sentence and "continues the same way on only" in generated.sentence
    logits = next(o for o in parity.outputs if o.name == "logits")
    assert logits.measures["kl_divergence"] > 0.01


def test_classify_outputs_names_both_kinds(cached: onnx.ModelProto) -> None:
    kinds = classify_outputs(cached, {"logits": np.zeros((1, 4, 512), np.float32), GENERATED: np.zeros((1, 16, 2))})
    assert kinds[GENERATED].kind == GENERATION and "greedy continuation" in kinds[GENERATED].why
    assert kinds["logits"].tokens and "next-token logits" in kinds["logits"].why


def _tokenizer(tmp_path) -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([lm_text.TEXT.read_text()], trainers.BpeTrainer(vocab_size=400, show_progress=False,
                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))  # fmt: skip
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return str(path)


def test_a_tokenizer_gives_prompts_of_real_text(tmp_path) -> None:
    path = _tokenizer(tmp_path)
    prompts = lm_text.text_prompts(path, 512, 3, 12, seed=0)
    assert prompts.shape == (3, 12)
    words = lm_text.decode(path, prompts[0])
    assert words.strip() and words in lm_text.TEXT.read_text()  # a window of the text, as written
    assert not np.array_equal(prompts, lm_text.text_prompts(path, 512, 3, 12, seed=1))
    with pytest.raises(Exception, match="beyond the model's 100 tokens"):
        lm_text.text_prompts(path, 100, 3, 12, seed=0)


def test_the_tokenizer_is_found_beside_the_model_or_one_folder_up(tmp_path) -> None:
    (tmp_path / "onnx").mkdir()
    model = tmp_path / "onnx" / "model.onnx"
    assert find_tokenizer(model) == ""
    (tmp_path / "tokenizer.json").write_text("{}")
    assert find_tokenizer(model) == str(tmp_path / "tokenizer.json")


def test_a_broken_tokenizer_is_told_plainly(tmp_path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(Exception, match="could not be read"):
        lm_text.text_prompts(str(bad), 512, 2, 8, seed=0)


def test_the_browser_judges_a_decoders_next_tokens_on_the_same_prompts(cached: onnx.ModelProto) -> None:
    from shrinkray.measure.browser import _like_reference
    from shrinkray.measure.browser_inputs import prepare

    inputs = prepare(cached, CompareSettings())
    assert set(inputs.reference) == {"logits"} and inputs.kinds["logits"].tokens
    # the page runs each sample once and sends every output back: all positions' logits and the cache
    session = _session(cached)
    names = [o.name for o in session.get_outputs()]
    runs = [dict(zip(names, session.run(None, feeds), strict=True)) for feeds in inputs.samples]
    stacked = {name: np.stack([r[name] for r in runs]) for name in names}
    kept = _like_reference(stacked, inputs.reference)
    assert set(kept) == {"logits"} and kept["logits"].shape == inputs.reference["logits"].shape
    np.testing.assert_allclose(kept["logits"], inputs.reference["logits"], atol=1e-5)


def test_with_a_tokenizer_the_texts_perplexity_is_told_and_judged_only_when_asked(cached, tmp_path) -> None:
    from dataclasses import replace

    from shrinkray.measure.decoder_lm import PROMPT_LOSS
    from shrinkray.measure.parity import PERPLEXITY, VerdictSettings

    settings = CompareSettings()
    settings = replace(settings, inputs=replace(settings.inputs, tokenizer=_tokenizer(tmp_path)))
    inputs = parity_inputs(cached, settings)
    assert inputs.kinds[PROMPT_LOSS].kind == PERPLEXITY and inputs.decoder.text
    broken = session_outputs(_session(damaged(cached, 0.3)), inputs.samples, None, inputs.decoder)
    parity = compare_outputs(inputs.reference, broken, inputs.kinds)
    told = next(o for o in parity.outputs if o.name == PROMPT_LOSS)
    assert told.status == "pass" and told.measures["perplexity_change"] != 0  # told, not judged
    assert "perplexity on the prompts' text" in parity_verdict(parity).sentence
    strict = VerdictSettings(per_output={PROMPT_LOSS: {"max_perplexity_change": 0.0001}})
    judged = next(o for o in compare_outputs(inputs.reference, broken, inputs.kinds, strict).outputs if o.name == PROMPT_LOSS)
    assert judged.status == "fail" or judged.measures["perplexity_change"] <= 0.0001
    # without a tokenizer the prompts are made-up ids: no perplexity to tell
    assert PROMPT_LOSS not in parity_inputs(cached, CompareSettings()).reference


@pytest.mark.parametrize("mask", ["bool", "uint8", "additive"])
def test_a_plain_export_whose_causal_mask_is_a_constant_is_a_decoder(mask: str) -> None:
    """GPT-2's legacy export keeps its causal mask as a lower-triangular ``bias`` buffer, not as ops."""
    model = _encoder()
    lower = np.tril(np.ones((16, 16), bool))
    value = {"bool": lower, "uint8": lower.astype(np.uint8),
             "additive": np.where(lower, 0.0, -1e9).astype(np.float32)}[mask][None, None]  # fmt: skip
    model.graph.initializer.append(numpy_helper.from_array(value, "bias"))
    assert layout_of(model) is not None
    model.graph.initializer[-1].CopyFrom(numpy_helper.from_array(np.ones((1, 1, 16, 16), np.uint8), "bias"))
    assert layout_of(model) is None  # all ones: no mask at all


def _with_encoder_states(model: onnx.ModelProto) -> onnx.ModelProto:
    """The cached decoder with an ``encoder_hidden_states`` input (read, adding nothing): a seq2seq decoder's
    signature, which the decoder driver leaves to the general path."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    out.graph.input.append(helper.make_tensor_value_info("encoder_hidden_states", TensorProto.FLOAT,
                                                         ["batch_size", "encoder_sequence_length", 64]))  # fmt: skip
    out.graph.node.append(helper.make_node("ReduceSum", ["encoder_hidden_states"], ["enc_sum"], keepdims=0))
    out.graph.output.append(helper.make_tensor_value_info("enc_sum", TensorProto.FLOAT, []))
    return out


def test_a_seq2seq_decoder_gets_an_empty_past_and_counted_positions_on_the_general_path() -> None:
    """Issue 28: the past was guessed 64 long and positions were all zeros; an empty past could not be asked."""
    from shrinkray.measure.inputs import parse_dims

    model = _with_encoder_states(build_lm("cached"))
    assert layout_of(model) is None
    feeds = synthesize(model, InputOptions()).feeds
    assert feeds["past_key_values.0.key"].shape[2] == 0
    assert feeds["attention_mask"].shape[1] == feeds["input_ids"].shape[1]  # total = past (0) + sequence
    assert (feeds["position_ids"] == np.arange(feeds["input_ids"].shape[1])).all()
    _session(model).run(None, feeds)  # ONNX Runtime takes them as they are
    assert parse_dims(["past_sequence_length=0"]) == {"past_sequence_length": 0}
    with pytest.raises(Exception, match="positive integer"):
        parse_dims(["sequence_length=0"])


def test_a_graph_whose_weights_are_held_elsewhere_is_read_without_them() -> None:
    """compare's workers keep a skeleton (the graph, its initializers emptied): reading its layout must not
    decode them (CI: 'cannot reshape array of size 0 into shape (256,256)' on the shared_weight sample)."""
    model = _encoder()
    empty = onnx.TensorProto(name="bias", data_type=onnx.TensorProto.FLOAT, dims=[16, 16])
    model.graph.initializer.append(empty)
    assert layout_of(model) is None

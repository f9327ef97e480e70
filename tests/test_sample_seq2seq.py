"""The seq2seq sample (sample_models/tiny_seq2seq): an encoder-decoder in the transformers.js folder layout,
judged by what it writes (its prompt's words in reverse order); and the seeded test sets of the same graphs
(text-to-text and Whisper-like speech-to-text)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto
from seq2seq_models import decoder_graph, greedy, greedy_cached, seq2seq_set, speech_set

FOLDER = Path(__file__).resolve().parents[1] / "sample_models" / "tiny_seq2seq"
FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "prompts.txt",
         "onnx/encoder_model.onnx", "onnx/decoder_model.onnx")  # fmt: skip
BATCH, ENC, DEC = "batch_size", "encoder_sequence_length", "decoder_sequence_length"
PAST = "past_decoder_sequence_length"


def signature(width: int, vocab: int) -> dict[str, tuple[list, list]]:
    """optimum's encoder_model / decoder_model (no cache): (name, element type, dims) of inputs and outputs."""
    i64, f32 = TensorProto.INT64, TensorProto.FLOAT
    return {
        "encoder_model": ([("input_ids", i64, [BATCH, ENC]), ("attention_mask", i64, [BATCH, ENC])],
                          [("last_hidden_state", f32, [BATCH, ENC, width])]),
        "decoder_model": ([("encoder_attention_mask", i64, [BATCH, ENC]), ("input_ids", i64, [BATCH, DEC]),
                           ("encoder_hidden_states", f32, [BATCH, ENC, width])],
                          [("logits", f32, [BATCH, DEC, vocab])]),
    }  # fmt: skip


def cached_signature(width: int, vocab: int, layers: int, heads: int) -> dict[str, tuple[list, list]]:
    """optimum's decoder_model exported with past and its decoder_with_past_model, dims named as optimum names
    them (``past_decoder_sequence_length + 1``, ``encoder_sequence_length_out``; heads and head_dim fixed)."""
    i64, f32, head_dim = TensorProto.INT64, TensorProto.FLOAT, width // heads
    past, present, encoder = PAST, f"{PAST} + 1", "encoder_sequence_length_out"

    def cache(stem: str, sides: dict[str, str]) -> list:
        return [(f"{stem}.{i}.{side}.{w}", f32, [BATCH, heads, length, head_dim])
                for i in range(layers) for side, length in sides.items() for w in ("key", "value")]  # fmt: skip

    plain = signature(width, vocab)["decoder_model"]
    return {
        "encoder_model": signature(width, vocab)["encoder_model"],
        "decoder_model": (plain[0], plain[1] + cache("present", {"decoder": present, "encoder": encoder})),
        "decoder_with_past_model": (
            [("encoder_attention_mask", i64, [BATCH, ENC]), ("input_ids", i64, [BATCH, 1])]
            + cache("past_key_values", {"decoder": past, "encoder": encoder}),
            [("logits", f32, [BATCH, 1, vocab])] + cache("present", {"decoder": present})),
    }  # fmt: skip


def signature_of(model: onnx.ModelProto) -> tuple[list, list]:
    def values(infos) -> list:
        return [(v.name, v.type.tensor_type.elem_type, [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim])
                for v in infos]  # fmt: skip

    return values(model.graph.input), values(model.graph.output)


def sessions(models: dict[str, onnx.ModelProto]) -> tuple[ort.InferenceSession, ort.InferenceSession]:
    return tuple(ort.InferenceSession(models[n].SerializeToString(), providers=["CPUExecutionProvider"])
                 for n in ("encoder_model", "decoder_model"))  # fmt: skip


def sample() -> dict[str, onnx.ModelProto]:
    return {n: onnx.load(str(FOLDER / "onnx" / f"{n}.onnx")) for n in ("encoder_model", "decoder_model")}


def test_the_folder_is_what_transformers_js_reads_and_stays_small() -> None:
    from tokenizers import Tokenizer

    assert all((FOLDER / name).is_file() for name in FILES)
    assert sum(p.stat().st_size for p in FOLDER.rglob("*") if p.is_file()) <= 5 * 2**20
    config, generation = (json.loads((FOLDER / n).read_text()) for n in ("config.json", "generation_config.json"))
    json.loads((FOLDER / "tokenizer_config.json").read_text())
    eos = Tokenizer.from_file(str(FOLDER / "tokenizer.json")).token_to_id("<|endoftext|>")
    assert config["is_encoder_decoder"] and config["vocab_size"] == 512 and config["d_model"] == 128
    assert config["decoder_start_token_id"] == config["eos_token_id"] == config["pad_token_id"] == eos
    assert generation["decoder_start_token_id"] == generation["eos_token_id"] == eos and generation["max_length"] > 0
    assert (FOLDER / "tokenizer.json").read_bytes() == (FOLDER.parent / "tiny_lm" / "tokenizer.json").read_bytes()
    assert len((FOLDER / "prompts.txt").read_text().splitlines()) >= 300


def test_both_graphs_pass_the_checker_with_optimums_signatures() -> None:
    expected = signature(128, 512)
    for name, model in sample().items():
        onnx.checker.check_model(model, full_check=True)
        assert (model.ir_version, model.opset_import[0].version) == (9, 17)
        assert signature_of(model) == expected[name], name


def test_its_greedy_text_is_the_prompt_with_its_words_reversed() -> None:
    """A task check through ONNX Runtime: the encoder once, then the decoder on the whole sequence each step."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(FOLDER / "tokenizer.json"))
    eos = tok.token_to_id("<|endoftext|>")
    encoder, decoder = sessions(sample())
    prompts = (FOLDER / "prompts.txt").read_text().splitlines()[:5]
    right = []
    for prompt in prompts:
        ids = np.array([tok.encode(prompt).ids], np.int64)
        made = greedy(encoder, decoder, ids, np.ones_like(ids), eos, eos, 64)[0]
        right.append(tok.decode(made) == " ".join(reversed(prompt.split(" "))))
    assert sum(right) >= 4, list(zip(prompts, right, strict=True))


def test_the_seeded_set_runs_batched_and_padding_changes_nothing() -> None:
    """Batch 2, the second row right-padded: its real tokens' encoder states and its logits match the
    unpadded run, so both the encoder's mask and the decoder's cross-attention mask hold."""
    models = seq2seq_set()
    assert {n: signature_of(m) for n, m in models.items()} == signature(64, 512)
    encoder, decoder = sessions(models)
    rng = np.random.default_rng(7)
    ids, mask = rng.integers(1, 512, (2, 9)), np.ones((2, 9), np.int64)
    mask[1, 5:] = 0
    states = encoder.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    alone = encoder.run(None, {"input_ids": ids[1:, :5], "attention_mask": mask[1:, :5]})[0]
    assert states.shape == (2, 9, 64)
    np.testing.assert_allclose(states[1, :5], alone[0], atol=1e-4)
    assert np.abs(states[0, :5] - alone[0]).max() > 0.1  # the rows differ: the comparison can fail

    seq = rng.integers(1, 512, (2, 4))
    logits = decoder.run(None, {"encoder_attention_mask": mask, "input_ids": seq, "encoder_hidden_states": states})[0]
    single = decoder.run(None, {"encoder_attention_mask": mask[1:, :5], "input_ids": seq[1:],
                                "encoder_hidden_states": alone})[0]  # fmt: skip
    assert logits.shape == (2, 4, 512)
    np.testing.assert_allclose(logits[1], single[0], atol=1e-4)
    flat = logits.reshape(-1, 512).copy()
    best = flat.max(-1)
    flat[np.arange(len(flat)), flat.argmax(-1)] = -np.inf
    assert np.median(best - flat.max(-1)) > 0.1  # greedy steps are clear, not near-ties
    made = greedy(encoder, decoder, ids, mask, 0, 0, 8)
    assert len(made) == 2 and all(0 < len(row) <= 7 for row in made)


# ---- the cached layout: optimum's decoder_model with past and decoder_with_past_model -------------------------


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def padded_batch() -> tuple[np.ndarray, np.ndarray]:
    """Batch 2 of 9 encoder tokens, the second row right-padded after 5."""
    ids, mask = np.random.default_rng(7).integers(1, 512, (2, 9)), np.ones((2, 9), np.int64)
    mask[1, 5:] = 0
    return ids, mask


def test_the_cached_set_passes_the_checker_with_optimums_signatures() -> None:
    models = seq2seq_set(cached=True, layers=3)
    assert list(models) == ["encoder_model", "decoder_model", "decoder_with_past_model"]
    for model in models.values():
        onnx.checker.check_model(model, full_check=True)
        assert (model.ir_version, model.opset_import[0].version) == (9, 17)
    assert {n: signature_of(m) for n, m in models.items()} == cached_signature(64, 512, 3, 4)
    plain = seq2seq_set(layers=3)  # the same seed, the same weights; the plain layout is as it was
    assert models["encoder_model"].SerializeToString() == plain["encoder_model"].SerializeToString()
    assert signature_of(plain["decoder_model"]) == signature(64, 512)["decoder_model"]


def test_the_cached_decoder_gives_the_plain_logits_and_the_cache() -> None:
    """decoder_model with past: the plain decoder's logits, and as present.N.* the self-attention's keys and
    values over the decoder tokens and the cross-attention's over the encoder's states."""
    cached, plain = seq2seq_set(cached=True), seq2seq_set()
    encoder, decoder = (session(cached[n]) for n in ("encoder_model", "decoder_model"))
    reference = session(plain["decoder_model"])
    ids, mask = padded_batch()
    states = encoder.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    seq = np.random.default_rng(3).integers(1, 512, (2, 6))
    feeds = {"encoder_attention_mask": mask, "input_ids": seq, "encoder_hidden_states": states}
    out = dict(zip([o.name for o in decoder.get_outputs()], decoder.run(None, feeds), strict=True))
    want = reference.run(None, feeds)[0]
    np.testing.assert_array_equal(out["logits"], want)  # the same operations on the same weights
    assert np.abs(want).max() > 1.0  # not all near zero: the comparison can fail
    for i in range(2):
        assert out[f"present.{i}.decoder.key"].shape == out[f"present.{i}.decoder.value"].shape == (2, 4, 6, 16)
        assert out[f"present.{i}.encoder.key"].shape == out[f"present.{i}.encoder.value"].shape == (2, 4, 9, 16)
    # layer 0's cross-attention keys are encoder_hidden_states @ cross.k, split into heads
    weights = {t.name: onnx.numpy_helper.to_array(t) for t in cached["decoder_model"].graph.initializer}
    weight = weights["decoder.h.0.cross.k"]
    keys = (states @ weight).reshape(2, 9, 4, 16).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(out["present.0.encoder.key"], keys, atol=1e-4)


def test_cached_generation_is_the_plain_generation() -> None:
    """Batch 2 with padding: decoder_model on the start token, then decoder_with_past_model a token at a time
    (its own present.N.decoder.* fed back, the first step's present.N.encoder.*) gives the plain decoder's
    tokens and, step by step, its logits over the whole sequence."""
    cached, plain = seq2seq_set(cached=True), seq2seq_set()
    names = ("encoder_model", "decoder_model", "decoder_with_past_model")
    encoder, decoder, with_past = (session(cached[n]) for n in names)
    reference = session(plain["decoder_model"])
    ids, mask = padded_batch()
    never = 512  # an end token the model cannot make: every row runs all 11 steps
    made, steps = greedy_cached(encoder, decoder, with_past, ids, mask, 0, never, 12)
    assert steps.shape == (2, 11, 512) and [len(row) for row in made] == [11, 11]
    assert made == greedy(encoder, reference, ids, mask, 0, never, 12)
    assert made[0] != made[1] and len(set(made[1])) > 3  # the rows and the steps differ: the comparison can fail
    states = encoder.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    whole = np.concatenate([np.zeros((2, 1), np.int64), np.array(made, np.int64)[:, :-1]], axis=1)
    want = reference.run(None, {"encoder_attention_mask": mask, "input_ids": whole, "encoder_hidden_states": states})[0]
    np.testing.assert_allclose(steps, want, rtol=0, atol=1e-4)
    # with the end token it makes, the cached run ends where the plain one does
    made_eos, _ = greedy_cached(encoder, decoder, with_past, ids, mask, 0, 0, 12)
    assert made_eos == greedy(encoder, reference, ids, mask, 0, 0, 12)


def test_with_past_masks_causally_after_the_past() -> None:
    """decoder_with_past_model fed 3 new tokens after a past of 4 (its input_ids dim made symbolic): the new
    tokens sit at positions 4..6 and see the past and the new tokens before them, as in the plain decoder."""
    cached, plain = seq2seq_set(cached=True), seq2seq_set()
    step_model = cached["decoder_with_past_model"]
    for value in (step_model.graph.input[1], step_model.graph.output[0]):
        value.type.tensor_type.shape.dim[1].dim_param = "decoder_sequence_length"
    encoder, decoder, with_past = (session(m) for m in (cached["encoder_model"], cached["decoder_model"], step_model))
    reference = session(plain["decoder_model"])
    ids, mask = padded_batch()
    states = encoder.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    seq = np.random.default_rng(5).integers(1, 512, (2, 7))
    out = dict(zip([o.name for o in decoder.get_outputs()],
                   decoder.run(None, {"encoder_attention_mask": mask, "input_ids": seq[:, :4],
                                      "encoder_hidden_states": states}), strict=True))  # fmt: skip
    feeds = {"encoder_attention_mask": mask, "input_ids": seq[:, 4:],
             **{"past_key_values" + n[len("present"):]: a for n, a in out.items() if n.startswith("present.")}}  # fmt: skip
    logits = with_past.run(["logits"], feeds)[0]
    want = reference.run(None, {"encoder_attention_mask": mask, "input_ids": seq, "encoder_hidden_states": states})[0]
    assert logits.shape == (2, 3, 512)
    np.testing.assert_allclose(logits, want[:, 4:], rtol=0, atol=1e-4)


# ---- the Whisper-like speech set: input_features in, a decoder without encoder_attention_mask ---------------


def speech_signature(width: int, vocab: int, layers: int, heads: int) -> dict[str, tuple[list, list]]:
    """Whisper's as optimum exports it (bins and frames fixed, 80 x 200 here): the encoder takes input_features,
    the decoders are the text set's without encoder_attention_mask; the encoder's length is frames/2, fixed."""
    text = cached_signature(width, vocab, layers, heads)
    unmasked = {n: ([i for i in ins if i[0] != "encoder_attention_mask"], outs) for n, (ins, outs) in text.items()}
    unmasked["encoder_model"] = ([("input_features", TensorProto.FLOAT, [BATCH, 80, 200])],
                                 [("last_hidden_state", TensorProto.FLOAT, [BATCH, 100, width])])  # fmt: skip
    return unmasked


def features(batch: int = 2) -> np.ndarray:
    return np.random.default_rng(7).standard_normal((batch, 80, 200)).astype(np.float32)


def test_the_speech_set_passes_the_checker_with_whispers_signatures() -> None:
    for cached in (False, True):
        models = speech_set(cached=cached)
        want = speech_signature(64, 512, 2, 4)
        if not cached:
            want = {"encoder_model": want["encoder_model"], "decoder_model": signature(64, 512)["decoder_model"]}
            want["decoder_model"] = (want["decoder_model"][0][1:], want["decoder_model"][1])  # no encoder mask
        assert list(models) == list(want)
        assert {n: signature_of(m) for n, m in models.items()} == want
        for model in models.values():
            onnx.checker.check_model(model, full_check=True)
            assert (model.ir_version, model.opset_import[0].version) == (9, 17)
            used = {n for node in model.graph.node for n in node.input}
            assert all(t.name in used for t in model.graph.initializer)  # no initializer left unread
    assert speech_set()["encoder_model"].SerializeToString() == speech_set(cached=True)["encoder_model"].SerializeToString()


def test_the_speech_set_runs_batched_and_generates_greedily() -> None:
    """Batch 2 of random features: each row's encoder states are its own (the batch mixes nothing) and the
    plain decoder, without a mask, is the masked text decoder over the same weights given an all-ones mask."""
    models = speech_set()
    encoder, decoder = sessions(models)
    x = features()
    states = encoder.run(None, {"input_features": x})[0]
    alone = encoder.run(None, {"input_features": x[1:]})[0]
    assert states.shape == (2, 100, 64)
    np.testing.assert_allclose(states[1], alone[0], atol=1e-4)
    assert np.abs(states[0] - states[1]).max() > 0.1  # the rows differ: the comparison can fail

    seq = np.random.default_rng(3).integers(1, 512, (2, 5))
    logits = decoder.run(None, {"input_ids": seq, "encoder_hidden_states": states})[0]
    assert logits.shape == (2, 5, 512)
    weights = {t.name: onnx.numpy_helper.to_array(t) for t in models["decoder_model"].graph.initializer}
    masked = session(decoder_graph(weights, 2, 4))
    want = masked.run(None, {"encoder_attention_mask": np.ones((2, 100), np.int64), "input_ids": seq,
                             "encoder_hidden_states": states})[0]  # fmt: skip
    np.testing.assert_allclose(logits, want, rtol=0, atol=1e-4)
    flat = logits.reshape(-1, 512).copy()
    best = flat.max(-1)
    flat[np.arange(len(flat)), flat.argmax(-1)] = -np.inf
    assert np.median(best - flat.max(-1)) > 0.1  # greedy steps are clear, not near-ties
    made = greedy(encoder, decoder, x, None, 0, 512, 8)
    assert [len(row) for row in made] == [7, 7] and made[0] != made[1]


def test_cached_speech_generation_is_the_plain_generation() -> None:
    """decoder_model on the start token, then decoder_with_past_model a token at a time (no
    encoder_attention_mask anywhere) gives the plain decoder's tokens and, step by step, its logits."""
    cached, plain = speech_set(cached=True), speech_set()
    encoder, decoder, with_past = (session(cached[n]) for n in ("encoder_model", "decoder_model",
                                                                 "decoder_with_past_model"))  # fmt: skip
    reference = session(plain["decoder_model"])
    x = features()
    never = 512  # an end token the model cannot make: every row runs all 11 steps
    made, steps = greedy_cached(encoder, decoder, with_past, x, None, 0, never, 12)
    assert steps.shape == (2, 11, 512) and [len(row) for row in made] == [11, 11]
    assert made == greedy(encoder, reference, x, None, 0, never, 12)
    assert made[0] != made[1] and len(set(made[1])) > 3  # the rows and the steps differ: the comparison can fail
    states = encoder.run(None, {"input_features": x})[0]
    whole = np.concatenate([np.zeros((2, 1), np.int64), np.array(made, np.int64)[:, :-1]], axis=1)
    want = reference.run(None, {"input_ids": whole, "encoder_hidden_states": states})[0]
    np.testing.assert_allclose(steps, want, rtol=0, atol=1e-4)
    # with an end token it makes (row 1's third), the rows end where the plain run ends them
    eos = made[1][2]
    made_eos, _ = greedy_cached(encoder, decoder, with_past, x, None, 0, eos, 12)
    assert made_eos == greedy(encoder, reference, x, None, 0, eos, 12)
    assert len(made_eos[1]) == 2

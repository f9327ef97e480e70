"""The seq2seq sample (sample_models/tiny_seq2seq): an encoder-decoder in the transformers.js folder layout,
judged by what it writes (its prompt's words in reverse order); and the seeded test set of the same graphs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto
from seq2seq_models import greedy, seq2seq_set

FOLDER = Path(__file__).resolve().parents[1] / "sample_models" / "tiny_seq2seq"
FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "prompts.txt",
         "onnx/encoder_model.onnx", "onnx/decoder_model.onnx")  # fmt: skip
BATCH, ENC, DEC = "batch_size", "encoder_sequence_length", "decoder_sequence_length"


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

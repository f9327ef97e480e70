"""Build the seq2seq sample: a tiny encoder-decoder trained here to reverse a sentence's words, in the
transformers.js layout.

    pip install torch==2.13.0                    # for building only: Shrink Ray never imports torch
    python sample_models/build_seq2seq.py        # writes sample_models/tiny_seq2seq/
    python sample_models/build_seq2seq.py --out DIR --verify

The sentences are build_lm.py's template grammar and the tokenizer is tiny_lm's (copied, not retrained):
the input is one sentence, the target the same sentence with its words in reverse order (split on spaces,
punctuation stays with its word: "Ben found three maps." -> "maps. three found Ben"). torch trains an
encoder (2 layers) and a decoder (2 layers, causal self-attention then cross-attention), width 128, 4 heads,
for two minutes on two cores; the weights go into the ONNX graphs of sample_models/seq2seq_graph.py in
optimum's layout without a KV cache (onnx/encoder_model.onnx, onnx/decoder_model.onnx). The folder holds
what transformers.js reads: config.json, generation_config.json, tokenizer.json, tokenizer_config.json, and
a prompts.txt of held-out sentences (another seed, none seen in training). ``--verify`` generates greedily
through ONNX Runtime, checks it against torch, and prints the exact-match rate on 50 held-out sentences.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from pathlib import Path

import numpy as np
from build_lm import EOS, _sentence
from seq2seq_graph import decoder_graph, decoder_layer_names, encoder_graph, encoder_layer_names, greedy

SEED = 20261205
VOCAB, WIDTH, LAYERS, HEADS, POSITIONS = 512, 128, 2, 4, 64
SENTENCES, BATCH, STEPS, LR = 60000, 64, 800, 2e-3
HERE = Path(__file__).resolve().parent
TOKENIZER = HERE / "tiny_lm" / "tokenizer.json"


def reverse_words(sentence: str) -> str:
    return " ".join(reversed(sentence.split(" ")))


def sentences(count: int, seed: int, avoid: frozenset[str] = frozenset()) -> list[str]:
    """``count`` sentences of build_lm.py's grammar from ``seed``, none of them in ``avoid``."""
    rng = random.Random(seed)
    made: list[str] = []
    while len(made) < count:
        s = _sentence(rng)
        if s not in avoid:
            made.append(s)
    return made


def padded(rows: list[list[int]], pad: int) -> tuple[np.ndarray, np.ndarray]:
    """Right-padded int64 ids and their attention mask."""
    ids = np.full((len(rows), max(map(len, rows))), pad, np.int64)
    mask = np.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, :len(row)], mask[i, :len(row)] = row, 1
    return ids, mask


def make_model():
    """The torch twin of seq2seq_graph.py's graphs (same blocks, same order of operations)."""
    import torch
    from torch import nn

    def linear(n_in: int = WIDTH, n_out: int = WIDTH) -> nn.Linear:
        return nn.Linear(n_in, n_out, bias=False)

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q, self.k, self.v, self.proj = (linear() for _ in range(4))

        def forward(self, x, memory, allowed=None, causal=False):
            b, t, _ = x.shape

            def heads(y):
                return y.view(b, y.shape[1], HEADS, WIDTH // HEADS).transpose(1, 2)

            a = nn.functional.scaled_dot_product_attention(heads(self.q(x)), heads(self.k(memory)),
                                                           heads(self.v(memory)), attn_mask=allowed, is_causal=causal)  # fmt: skip
            return self.proj(a.transpose(1, 2).reshape(b, t, WIDTH))

    class Block(nn.Module):
        def __init__(self, cross: bool) -> None:
            super().__init__()
            self.ln_1, self.ln_2, self.attn = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH), Attention()
            if cross:
                self.ln_cross, self.cross = nn.LayerNorm(WIDTH), Attention()
            self.fc, self.out = linear(WIDTH, 4 * WIDTH), linear(4 * WIDTH, WIDTH)

        def forward(self, x, allowed, memory=None, memory_allowed=None):
            h = self.ln_1(x)
            x = x + (self.attn(h, h, allowed) if memory is None else self.attn(h, h, causal=True))
            if memory is not None:
                x = x + self.cross(self.ln_cross(x), memory, memory_allowed)
            return x + self.out(torch.relu(self.fc(self.ln_2(x))))

    class Side(nn.Module):
        def __init__(self, cross: bool) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB, WIDTH), nn.Embedding(POSITIONS, WIDTH)
            self.blocks = nn.ModuleList(Block(cross) for _ in range(LAYERS))
            self.ln_f = nn.LayerNorm(WIDTH)

        def embed(self, ids):
            return self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))

    class Seq2Seq(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder, self.decoder = Side(cross=False), Side(cross=True)
            self.head = linear(WIDTH, VOCAB)

        def encode(self, ids, mask):
            allowed = mask.bool()[:, None, None, :]
            x = self.encoder.embed(ids)
            for block in self.encoder.blocks:
                x = block(x, allowed)
            return self.encoder.ln_f(x)

        def decode(self, ids, states, mask):
            allowed = mask.bool()[:, None, None, :]
            x = self.decoder.embed(ids)
            for block in self.decoder.blocks:
                x = block(x, None, states, allowed)
            return self.head(self.decoder.ln_f(x))

    return Seq2Seq()


def train(pairs: list[tuple[list[int], list[int]]], eos: int):
    """Train on (source ids, target ids) pairs: the decoder reads [eos] + target and learns target + [eos]."""
    import torch
    from torch import nn

    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(2)
    model = make_model()
    src, src_mask = (torch.from_numpy(a) for a in padded([s for s, _ in pairs], eos))
    tgt, tgt_mask = (torch.from_numpy(a) for a in padded([[eos, *t, eos] for _, t in pairs], eos))
    labels = tgt[:, 1:].masked_fill(tgt_mask[:, 1:] == 0, -100)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=LR, total_steps=STEPS)
    generator = torch.Generator().manual_seed(SEED)
    started = time.perf_counter()
    for step in range(STEPS):
        rows = torch.randint(0, len(pairs), (BATCH,), generator=generator)
        s_len, t_len = int(src_mask[rows].sum(1).max()), int(tgt_mask[rows].sum(1).max()) - 1
        logits = model.decode(tgt[rows, :t_len], model.encode(src[rows, :s_len], src_mask[rows, :s_len]),
                              src_mask[rows, :s_len])  # fmt: skip
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), labels[rows, :t_len].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        if step % 100 == 0 or step == STEPS - 1:
            print(f"step {step}: loss {loss.item():.4f} ({time.perf_counter() - started:.0f} s)")
    return model.eval()


def weights_of(model) -> dict[str, np.ndarray]:
    """The torch model's weights as x @ W arrays under seq2seq_graph.py's names."""

    def t(p) -> np.ndarray:  # a Linear's weight is [out, in]: x @ W.T
        return p.detach().numpy().T.copy()

    def a(p) -> np.ndarray:
        return p.detach().numpy()

    weights = {"lm_head": t(model.head.weight)}
    for prefix, side, names in (("encoder", model.encoder, encoder_layer_names), ("decoder", model.decoder, decoder_layer_names)):  # fmt: skip
        weights |= {f"{prefix}.wte": a(side.wte.weight), f"{prefix}.wpe": a(side.wpe.weight),
                    f"{prefix}.ln_f.weight": a(side.ln_f.weight), f"{prefix}.ln_f.bias": a(side.ln_f.bias)}  # fmt: skip
        for i, block in enumerate(side.blocks):
            arrays = [a(block.ln_1.weight), a(block.ln_1.bias), *(t(m.weight) for m in (block.attn.q, block.attn.k, block.attn.v, block.attn.proj))]  # fmt: skip
            if prefix == "decoder":
                arrays += [a(block.ln_cross.weight), a(block.ln_cross.bias),
                           *(t(m.weight) for m in (block.cross.q, block.cross.k, block.cross.v, block.cross.proj))]  # fmt: skip
            arrays += [a(block.ln_2.weight), a(block.ln_2.bias), t(block.fc.weight), t(block.out.weight)]
            weights |= dict(zip(names(i), arrays, strict=True))
    return {k: np.ascontiguousarray(v, np.float32) for k, v in weights.items()}


def write_folder(out: Path, weights: dict[str, np.ndarray], eos: int, prompts: list[str]) -> None:
    import onnx

    (out / "onnx").mkdir(parents=True, exist_ok=True)
    onnx.save(encoder_graph(weights, LAYERS, HEADS, name="tiny_seq2seq_encoder"), str(out / "onnx" / "encoder_model.onnx"))
    onnx.save(decoder_graph(weights, LAYERS, HEADS, name="tiny_seq2seq_decoder"), str(out / "onnx" / "decoder_model.onnx"))
    shutil.copyfile(TOKENIZER, out / "tokenizer.json")
    # sentences in its own domain, held out from training (another seed): Shrink Ray's prompts come from it
    (out / "prompts.txt").write_text("\n".join(prompts) + "\n")
    config = {"model_type": "marian", "architectures": ["MarianMTModel"], "is_encoder_decoder": True,
              "vocab_size": VOCAB, "d_model": WIDTH, "encoder_layers": LAYERS, "decoder_layers": LAYERS,
              "encoder_attention_heads": HEADS, "decoder_attention_heads": HEADS, "encoder_ffn_dim": 4 * WIDTH,
              "decoder_ffn_dim": 4 * WIDTH, "activation_function": "relu", "max_position_embeddings": POSITIONS,
              "normalize_before": True, "decoder_start_token_id": eos, "eos_token_id": eos, "pad_token_id": eos,
              "bos_token_id": eos, "forced_eos_token_id": eos, "tie_word_embeddings": False, "use_cache": False}  # fmt: skip
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    generation = {"decoder_start_token_id": eos, "bos_token_id": eos, "eos_token_id": eos, "pad_token_id": eos,
                  "max_length": POSITIONS}  # fmt: skip
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    (out / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "GPT2Tokenizer", "bos_token": EOS, "eos_token": EOS, "pad_token": EOS, "unk_token": EOS,
         "model_max_length": POSITIONS}, indent=2) + "\n")  # fmt: skip


def verify(out: Path, model, tok, eos: int) -> None:
    """Greedy generation through ONNX Runtime (encoder once, decoder on the whole sequence each step) must
    equal torch's on a few sentences; then the exact-match rate on 50 held-out ones."""
    import onnxruntime as ort
    import torch

    encoder, decoder = (ort.InferenceSession(str(out / "onnx" / f"{n}_model.onnx"), providers=["CPUExecutionProvider"])
                        for n in ("encoder", "decoder"))  # fmt: skip
    prompts = (out / "prompts.txt").read_text().splitlines()
    for prompt in prompts[:5]:
        ids = np.array([tok.encode(prompt).ids], np.int64)
        made = greedy(encoder, decoder, ids, np.ones_like(ids), eos, eos, POSITIONS)[0]
        with torch.no_grad():
            src, mask = torch.from_numpy(ids), torch.ones(ids.shape, dtype=torch.int64)
            states, seq = model.encode(src, mask), [eos]
            while len(seq) < POSITIONS:
                token = int(model.decode(torch.tensor([seq]), states, mask)[0, -1].argmax())
                if token == eos:
                    break
                seq.append(token)
        assert made == seq[1:], (prompt, made, seq[1:])
        print(f"{prompt!r} -> {tok.decode(made)!r}")
    held = prompts[:50]
    ids, mask = padded([tok.encode(p).ids for p in held], eos)
    made = greedy(encoder, decoder, ids, mask, eos, eos, POSITIONS)
    right = sum(tok.decode(m) == reverse_words(p) for m, p in zip(made, held, strict=True))
    print(f"exact match (ONNX Runtime, greedy, batch of {len(held)} padded): {right}/{len(held)} = {right / len(held):.0%}")


def main(argv: list[str] | None = None) -> int:
    from tokenizers import Tokenizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "tiny_seq2seq")
    parser.add_argument("--verify", action="store_true")
    args = parser.parse_args(argv)
    tok = Tokenizer.from_file(str(TOKENIZER))
    eos = tok.token_to_id(EOS)
    seen = sentences(SENTENCES, SEED)
    prompts = sentences(400, SEED + 1, avoid=frozenset(seen))
    pairs = [(tok.encode(s).ids, tok.encode(reverse_words(s)).ids) for s in seen]
    print(f"training: {len(seen)} sentences ({len(set(seen))} distinct); held out: {len(prompts)}")
    started = time.perf_counter()
    model = train(pairs, eos)
    print(f"trained in {time.perf_counter() - started:.0f} s")
    write_folder(args.out, weights_of(model), eos, prompts)
    if args.verify:
        verify(args.out, model, tok, eos)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Build the generative sample: a tiny GPT-style decoder LM trained here, in the transformers.js layout.

    pip install torch==2.13.0                # for building only: Shrink Ray never imports torch
    python sample_models/build_lm.py         # writes sample_models/tiny_lm/
    python sample_models/build_lm.py --out DIR --verify

A seeded template grammar writes a small English corpus (short stories about people, animals, places and
things); ``tokenizers`` learns a byte-level BPE of 512 tokens on it; torch trains a 2-layer decoder (width
128, 4 heads) for a minute on two cores; the weights go into the ONNX graph of sample_models/lm_graph.py
with a KV cache (optimum's ``past_key_values.N.key/value`` -> ``present.N.key/value``). The folder holds
what transformers.js reads: config.json, generation_config.json, tokenizer.json, tokenizer_config.json and
onnx/model.onnx, and a prompts.txt of held-out stories (Shrink Ray takes its prompts from it). ``--verify`` generates greedily through ONNX Runtime with and without the cache and
checks both against torch.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np
from lm_graph import decoder_graph, layer_names

SEED = 20261128
VOCAB, WIDTH, LAYERS, HEADS, POSITIONS = 512, 128, 2, 4, 256
CONTEXT, BATCH, STEPS, LR = 64, 32, 1500, 3e-3
EOS = "<|endoftext|>"

NAMES = ["Anna", "Ben", "Clara", "David", "Emma", "Felix", "Grace", "Hugo", "Iris", "Jonas", "Lena", "Marco"]
ANIMALS = ["cat", "dog", "fox", "horse", "rabbit", "owl", "goat", "duck", "bear", "mouse"]
COLOURS = ["red", "blue", "green", "yellow", "brown", "white", "black", "grey"]
PLACES = ["the river", "the market", "the old bridge", "the forest", "the station", "the garden", "the beach",
          "the library", "the hill", "the harbour"]  # fmt: skip
THINGS = ["apples", "books", "shells", "flowers", "stones", "letters", "cakes", "maps", "candles", "coins"]
NUMBERS = ["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
TIMES = ["In the morning", "At noon", "In the evening", "On Sunday", "After lunch", "Before dawn", "Later that day"]
WEATHER = ["the sun was warm", "it began to rain", "the wind was cold", "the sky was clear", "snow fell softly"]


def _sentence(rng: random.Random) -> str:
    name, other = rng.sample(NAMES, 2)
    animal, colour, place = rng.choice(ANIMALS), rng.choice(COLOURS), rng.choice(PLACES)
    things, number, time = rng.choice(THINGS), rng.choice(NUMBERS), rng.choice(TIMES)
    templates = [
        f"{time}, {name} walked to {place} with the {colour} {animal}.",
        f"{name} found {number} {things} near {place} and gave them to {other}.",
        f"The {colour} {animal} slept by {place} while {name} read a book.",
        f"{time}, {rng.choice(WEATHER)}, so {name} stayed at home with {other}.",
        f"{name} asked {other} how many {things} were left, and {other} said {number}.",
        f"At {place}, the {animal} watched {name} carry {number} {things} home.",
        f"{name} and {other} went to {place} to look for the {colour} {animal}.",
        f"When {rng.choice(WEATHER)}, the {animal} ran back to {place}.",
    ]
    return rng.choice(templates)


def corpus(sentences: int = 12000, seed: int = SEED) -> list[str]:
    """Short stories of 3-6 sentences, each ending with the end-of-text token."""
    rng = random.Random(seed)
    stories, made = [], 0
    while made < sentences:
        count = rng.randint(3, 6)
        stories.append(" ".join(_sentence(rng) for _ in range(count)) + EOS)
        made += count
    return stories


def train_tokenizer(stories: list[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=[EOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    tok.train_from_iterator(stories, trainer)
    return tok


def train(ids: np.ndarray) -> dict[str, np.ndarray]:
    """Train the decoder on ``ids`` (one long token stream); its weights as x @ W arrays for lm_graph."""
    import torch
    from torch import nn

    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(2)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
            self.q, self.k, self.v, self.proj = (nn.Linear(WIDTH, WIDTH, bias=False) for _ in range(4))
            self.fc, self.out = nn.Linear(WIDTH, 4 * WIDTH, bias=False), nn.Linear(4 * WIDTH, WIDTH, bias=False)

        def forward(self, x):
            b, t, _ = x.shape
            h = self.ln_1(x)
            q, k, v = (m(h).view(b, t, HEADS, WIDTH // HEADS).transpose(1, 2) for m in (self.q, self.k, self.v))
            a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, WIDTH))
            return x + self.out(torch.relu(self.fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB, WIDTH), nn.Embedding(POSITIONS, WIDTH)
            self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
            self.ln_f, self.head = nn.LayerNorm(WIDTH), nn.Linear(WIDTH, VOCAB, bias=False)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    model = GPT()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=LR, total_steps=STEPS)
    data = torch.from_numpy(ids.astype(np.int64))
    generator = torch.Generator().manual_seed(SEED)
    for step in range(STEPS):
        starts = torch.randint(0, len(data) - CONTEXT - 1, (BATCH,), generator=generator)
        x = torch.stack([data[s:s + CONTEXT] for s in starts])
        y = torch.stack([data[s + 1:s + CONTEXT + 1] for s in starts])
        loss = nn.functional.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        if step % 300 == 0 or step == STEPS - 1:
            print(f"step {step}: loss {loss.item():.3f}")

    def t(p) -> np.ndarray:  # a Linear's weight is [out, in]: x @ W.T
        return p.detach().numpy().T.copy()

    weights = {"wte": model.wte.weight.detach().numpy(), "wpe": model.wpe.weight.detach().numpy(),
               "ln_f.weight": model.ln_f.weight.detach().numpy(), "ln_f.bias": model.ln_f.bias.detach().numpy(),
               "lm_head": t(model.head.weight)}  # fmt: skip
    for i, block in enumerate(model.blocks):
        ln1_g, ln1_b, wq, wk, wv, wo, ln2_g, ln2_b, fc, proj = layer_names(i)
        weights |= {ln1_g: block.ln_1.weight.detach().numpy(), ln1_b: block.ln_1.bias.detach().numpy(),
                    wq: t(block.q.weight), wk: t(block.k.weight), wv: t(block.v.weight), wo: t(block.proj.weight),
                    ln2_g: block.ln_2.weight.detach().numpy(), ln2_b: block.ln_2.bias.detach().numpy(),
                    fc: t(block.fc.weight), proj: t(block.out.weight)}  # fmt: skip
    return {k: np.ascontiguousarray(v, np.float32) for k, v in weights.items()}


def write_folder(out: Path, tok, weights: dict[str, np.ndarray]) -> None:
    import onnx

    (out / "onnx").mkdir(parents=True, exist_ok=True)
    onnx.save(decoder_graph(weights, LAYERS, HEADS, "cached", name="tiny_lm"), str(out / "onnx" / "model.onnx"))
    tok.save(str(out / "tokenizer.json"))
    # text in its own domain, held out from training (another seed): Shrink Ray's prompts are windows of it
    (out / "prompts.txt").write_text("\n".join(s.replace(EOS, "") for s in corpus(400, SEED + 1)) + "\n")
    eos = tok.token_to_id(EOS)
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": VOCAB, "n_embd": WIDTH,
              "n_layer": LAYERS, "n_head": HEADS, "n_positions": POSITIONS, "bos_token_id": eos, "eos_token_id": eos,
              "use_cache": True}  # fmt: skip
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": eos, "eos_token_id": eos}, indent=2) + "\n")
    (out / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "GPT2Tokenizer", "bos_token": EOS, "eos_token": EOS, "unk_token": EOS,
         "model_max_length": POSITIONS}, indent=2) + "\n")  # fmt: skip


def verify(out: Path, prompts: list[str]) -> None:
    """Greedy continuations through ONNX Runtime, with the cache and without it, must agree."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    session = ort.InferenceSession(str(out / "onnx" / "model.onnx"), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    head_dim = WIDTH // HEADS
    for prompt in prompts:
        ids = np.array([tok.encode(prompt).ids], np.int64)

        def feeds(seq: np.ndarray, past: dict | None, start: int) -> dict:
            total = start + seq.shape[1]
            f = {"input_ids": seq, "attention_mask": np.ones((1, total), np.int64),
                 "position_ids": np.arange(start, total, dtype=np.int64)[None]}  # fmt: skip
            for i in range(LAYERS):
                for which in ("key", "value"):
                    f[f"past_key_values.{i}.{which}"] = (past or {}).get(f"present.{i}.{which}",
                                                                       np.zeros((1, HEADS, 0, head_dim), np.float32))  # fmt: skip
            return f

        out_c = dict(zip(names, session.run(None, feeds(ids, None, 0)), strict=True))
        cached, seq = [], ids
        for _ in range(20):
            token = int(out_c["logits"][0, -1].argmax())
            cached.append(token)
            out_c = dict(zip(names, session.run(None, feeds(np.array([[token]]), out_c, seq.shape[1])), strict=True))
            seq = np.concatenate([seq, [[token]]], axis=1)
        plain, seq = [], ids
        for _ in range(20):
            token = int(dict(zip(names, session.run(None, feeds(seq, None, 0)), strict=True))["logits"][0, -1].argmax())
            plain.append(token)
            seq = np.concatenate([seq, [[token]]], axis=1)
        assert cached == plain, (prompt, cached, plain)
        print(f"{prompt!r} -> {tok.decode(cached)!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "tiny_lm")
    parser.add_argument("--verify", action="store_true")
    args = parser.parse_args(argv)
    stories = corpus()
    tok = train_tokenizer(stories)
    ids = np.concatenate([np.asarray(tok.encode(s).ids, np.int64) for s in stories])
    print(f"corpus: {len(stories)} stories, {len(ids)} tokens")
    write_folder(args.out, tok, train(ids))
    if args.verify:
        verify(args.out, ["In the morning, Anna walked to", "Ben found three", "The red fox slept by"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

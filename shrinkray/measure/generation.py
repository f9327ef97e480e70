"""What a decoder LM wrote, judged: continuations kept, where they part, next-token KL and perplexity.

The numbers only (numpy): measure/parity.py and the browser's results read them without loading onnx;
measure/decoder_lm.py drives the model and makes the arrays these functions read.
"""

from __future__ import annotations

import numpy as np

#: The extra output every decoder run gives: the greedy continuation of each prompt, [batch, tokens, 2]: each
#: token and its margin (the log-odds of the best token over the second: how sure the model was of it).
GENERATED = "generated tokens"
#: With real text (a tokenizer): each prompt's mean negative log-likelihood of its own next tokens (nats), [batch]:
#: the perplexity llama.cpp reports for a quantized model, on the prompts' text.
PROMPT_LOSS = "prompt loss"
#: A step whose two best tokens are within this log-odds (5% apart in probability) is a coin toss: where the
#: original itself hesitated, a variant that picks the other token changed nothing anyone could rely on. On the
#: sample LM every one of weights-int8's 19 changed continuations of 160 parted at such a step (margin <= 0.022).
TIE_LOGODDS = 0.05
#: Tokens generated per prompt (llama.cpp-style judges use a few dozen positions; a continuation of 16
#: tokens already reads as a phrase, and every token more multiplies the cost of a step through the model).
GENERATED_TOKENS = 16


def prompt_loss(logits: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Each prompt's mean negative log-likelihood (nats) of its tokens 2..n given those before: [batch]."""
    picked = np.empty(ids[:, 1:].shape)
    for row in range(len(ids)):  # a prompt at a time: a [positions, vocab] log-softmax in float64
        log_p = _log_softmax(logits[row, :-1])
        picked[row] = log_p[np.arange(ids.shape[1] - 1), ids[row, 1:]]
    return -picked.mean(axis=1)


def greedy_pick(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The greedy token of each row and its margin over the runner-up (log-odds, in float64)."""
    wide = np.asarray(logits, np.float64)
    top2 = np.partition(wide, wide.shape[-1] - 2, axis=-1)[:, -2:]  # float16-safe: float64 logits
    return np.argmax(wide, axis=-1).astype(np.int64), top2[:, 1] - top2[:, 0]


def continuation_count(generated: np.ndarray) -> int:
    """Prompts a ``GENERATED`` array [..., prompts, tokens, 2] decides: those whose first token was no coin toss."""
    first = np.asarray(generated, np.float64)[..., 0, 1]
    return int(np.sum(first >= TIE_LOGODDS))


def continuation_measures(reference: np.ndarray, variant: np.ndarray) -> dict[str, float | None]:
    """Continuations kept whole, each up to the original's first coin toss (``TIE_LOGODDS``): a prompt whose
    first generated token was already a coin toss decides nothing; where the changed ones part from the
    original's. ``reference`` and ``variant`` are ``GENERATED`` arrays [..., prompts, tokens, 2]."""
    ref = np.asarray(reference, np.float64).reshape(-1, np.shape(reference)[-2], 2)
    var = np.asarray(variant, np.float64).reshape(ref.shape)
    tokens = ref.shape[1]
    same = ref[:, :, 0] == var[:, :, 0]
    tie = ref[:, :, 1] < TIE_LOGODDS
    decided = np.where(tie.any(axis=1), np.argmax(tie, axis=1), tokens)  # steps before the first coin toss
    steps = np.arange(tokens)[None, :]
    kept = np.all(same | (steps >= decided[:, None]), axis=1)
    judged = decided > 0
    first = np.argmin(same, axis=1)
    changed = first[judged & ~kept]
    return {
        "continuation_agreement": float(kept[judged].mean()) if judged.any() else 1.0,
        "continuations": float(judged.sum()),
        "undecided_continuations": float((~judged).sum()),
        "shortened_continuations": float((judged & (decided < tokens)).sum()),
        "judged_tokens": float(decided[judged].mean()) if judged.any() else 0.0,  # tokens judged per prompt
        "continuation_tokens": float(tokens),
        "generated_token_agreement": float(same.mean()) if same.size else 1.0,
        # 1-based: "first differs at token 3"; None when every judged continuation is kept
        "first_divergence": float(np.median(changed) + 1) if len(changed) else None,
    }


def mean_kl(reference: np.ndarray, variant: np.ndarray) -> float:
    """Mean KL divergence (nats) of the variant's next-token distribution from the original's, per position,
    from logits [..., vocab]: log-softmax in float64 (large vocabularies would round it away in float32),
    a block of positions at a time (a 50k vocabulary in float64 is 400 KB a position)."""
    vocab = np.shape(reference)[-1]
    ref = np.asarray(reference).reshape(-1, vocab)
    var = np.asarray(variant).reshape(-1, vocab)
    if not len(ref):
        return 0.0
    block = max(1, (4 << 20) // max(vocab, 1))
    total = 0.0
    for start in range(0, len(ref), block):
        log_p = _log_softmax(ref[start:start + block])
        log_q = _log_softmax(var[start:start + block])
        total += float(np.sum(np.exp(log_p) * (log_p - log_q)))
    return total / len(ref)


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    x = np.asarray(logits, np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))

"""Prompts of real text for a decoder LM, through the tokenizer that travels with it.

A decoder judged on random token ids is judged on inputs unlike its own: positions in nonsense are near-ties
where any noise flips the next token, and calibration on them hurt a real 4-bit build (issue 28). When a
``tokenizer.json`` comes with the model (a transformers.js folder, a zip, ``--tokenizer``), prompts are
windows of text in the model's own domain (a ``prompts.txt`` beside it, ``--text``, an uploaded ``.txt``), else
of a bundled English text (``lm_text.txt``, everyday prose written for this purpose), encoded by that
tokenizer; :mod:`shrinkray.measure.decoder_lm` draws token sequences like text when none does.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from shrinkray.errors import OptionError
from shrinkray.io.files import MAX_TOKENIZER_BYTES

TEXT = Path(__file__).with_name("lm_text.txt")
@functools.lru_cache(maxsize=4)
def _tokenizer(path: str):
    from tokenizers import Tokenizer  # a compiled extension: loaded only for a decoder with a tokenizer

    try:
        if Path(path).stat().st_size > MAX_TOKENIZER_BYTES:
            raise OptionError(f"The tokenizer {Path(path).name} is over {MAX_TOKENIZER_BYTES >> 20} MB",
                              "Give the model's own tokenizer.json")  # fmt: skip
        return Tokenizer.from_file(path)
    except OptionError:
        raise
    except Exception as exc:  # noqa: BLE001 - tokenizers raises its own exception type
        raise OptionError(f"The tokenizer {Path(path).name} could not be read ({str(exc)[:120]})",
                          "Give the tokenizer.json that was exported with the model") from None  # fmt: skip


@functools.lru_cache(maxsize=4)
def text_ids(path: str, text: str = "") -> np.ndarray:
    """The text at ``text`` (the bundled one when ""), encoded by the tokenizer at ``path`` (no special tokens)."""
    source = Path(text) if text else TEXT
    try:
        if source.stat().st_size > MAX_TOKENIZER_BYTES:
            raise OptionError(f"The text {source.name} is over {MAX_TOKENIZER_BYTES >> 20} MB", "Give a shorter sample")
        words = source.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise OptionError(f"The text {source.name} could not be read ({exc.strerror})", "Give a readable text file") from None
    encoding = _tokenizer(path).encode(words, add_special_tokens=False)
    return np.asarray(encoding.ids, np.int64)


def text_prompts(path: str, vocab: int, batch: int, length: int, seed: int, text: str = "") -> np.ndarray:
    """``batch`` windows of ``length`` tokens from the text, at seeded places (different seeds, other places)."""
    ids = text_ids(path, text)
    if len(ids) < length + 1:
        raise OptionError(f"The text sample is only {len(ids)} tokens through this tokenizer",
                          f"Use prompts shorter than {len(ids)} tokens")  # fmt: skip
    if int(ids.max()) >= vocab:
        raise OptionError(f"The tokenizer gives ids up to {int(ids.max())}, beyond the model's {vocab} tokens",
                          "Give the tokenizer.json that was exported with this model")  # fmt: skip
    starts = np.random.default_rng(seed).integers(0, len(ids) - length, size=batch)
    return np.stack([ids[s:s + length] for s in starts])


def encode(path: str, text: str) -> list[int]:
    """One piece of text as token ids (no special tokens): an encoder's input line."""
    return list(_tokenizer(path).encode(text, add_special_tokens=False).ids)


def decode(path: str, ids: np.ndarray) -> str:
    """Token ids as text, for showing a continuation to the user."""
    return _tokenizer(path).decode([int(i) for i in np.asarray(ids).ravel()], skip_special_tokens=False)

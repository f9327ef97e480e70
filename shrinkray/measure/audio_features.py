"""Log-mel features of voiced audio, for models whose signature takes features rather than a waveform.

Speech recognizers and speaker embedders exported with their front end left out (Kaldi, WeNet,
WeSpeaker, NeMo style) take [batch, frames, bins], [batch, bins, frames] or [batch, 1, bins, frames]
log-mel filterbank features. N(0,1) noise is nothing like them: a speaker embedder's float16 kept row
cosine 0.9998 on real features and 0.49 on noise. This module makes them the way those front ends do,
numpy only: voiced audio (:func:`content.speech`) -> 25 ms frames every 10 ms at 16 kHz (Povey window,
pre-emphasis) -> power spectrum -> a triangular mel filterbank with the bins the signature declares ->
log -> mean and variance normalised per bin over time.
"""

from __future__ import annotations

import re

import numpy as np

from shrinkray.measure import content

#: Mel bin counts front ends use: an axis of one of these beside a time axis is a feature axis.
MEL_BINS = (40, 64, 80, 128)
FEATURE_RATE = 16000
WINDOW = 400  # 25 ms at 16 kHz
HOP = 160  # 10 ms at 16 kHz
N_FFT = 512


def fft_size(bins: int) -> int:
    """512 points (Kaldi's, for a 400-sample window); 1024 above 80 bins, where 512 leaves a low filter empty."""
    return N_FFT if bins <= 80 else 2 * N_FFT


LOW_HZ = 20.0
FRAMES_PER_SECOND = FEATURE_RATE // HOP
#: Frames synthesized when the time axis is free: 3 s, long enough for a speaker or a few words.
DEFAULT_FRAMES = 300

#: Input names that say features (not a waveform); audio words (audio_signal) count too when bins are declared.
FEATURE_WORDS = re.compile(r"feat|fbank|filterbank|(^|_)mels?($|_)|log_?mel|mel_?spec|spectro|speech", re.IGNORECASE)
#: Words in a model's outputs, name or metadata that say it listens (a speaker or speech model).
SPEECH_MODEL_WORDS = re.compile(
    r"speak|spk|speech|asr|voice|utter|wav|audio|whisper|wenet|kaldi|fbank|ecapa|campplus|eres2net", re.IGNORECASE
)
_TIME_WORDS = ("time", "frame", "len", "seq", "step")


def feature_axes(shape: list[int | str | None]) -> tuple[int, int] | None:
    """(mel axis, time axis) when a float input's shape reads as features, else None.

    The mel axis is fixed at one of :data:`MEL_BINS`; the time axis is beside it and free (or fixed
    longer than a few frames): [batch, frames, bins], [batch, bins, frames], [batch, 1, bins, frames],
    [batch, 1, frames, bins], or [frames, bins] when that free axis is named like time.
    """
    rank = len(shape)
    if rank == 2:
        timed = isinstance(shape[0], str) and any(w in shape[0].lower() for w in _TIME_WORDS)
        candidates = [(1, 0)] if timed else []
    elif rank == 3:
        candidates = [(2, 1), (1, 2)]
    elif rank == 4 and shape[1] == 1:
        candidates = [(3, 2), (2, 3)]
    else:
        candidates = []
    for mel, time in candidates:
        bins, frames = shape[mel], shape[time]
        if isinstance(bins, int) and bins in MEL_BINS and (not isinstance(frames, int) or frames >= 8):
            return mel, time
    return None


def mel_filterbank(bins: int, n_fft: int | None = None, rate: int = FEATURE_RATE, low: float = LOW_HZ,
                   high: float | None = None) -> np.ndarray:  # fmt: skip
    """Triangular filters [bins, n_fft // 2 + 1] equally spaced on the mel scale (HTK's 1127 ln(1 + f/700)),
    as Kaldi computes them: each triangle's sides are linear in mel, 20 Hz to the Nyquist frequency."""
    high = rate / 2 if high is None else high
    n_fft = fft_size(bins) if n_fft is None else n_fft

    def mel(hz):
        return 1127.0 * np.log1p(np.asarray(hz, dtype=np.float64) / 700.0)

    edges = np.linspace(mel(low), mel(high), bins + 2)
    centres = mel(np.arange(n_fft // 2 + 1) * rate / n_fft)
    left, centre, right = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (centres[None] - left) / (centre - left)
    falling = (right - centres[None]) / (right - centre)
    return np.clip(np.minimum(rising, falling), 0.0, None)


def _povey_window() -> np.ndarray:
    return (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(WINDOW) / (WINDOW - 1))) ** 0.85


def samples_for(frames: int) -> int:
    """Samples of 16 kHz audio that give ``frames`` frames (25 ms windows every 10 ms, no padding)."""
    return WINDOW + (max(frames, 1) - 1) * HOP


def log_mel(wave: np.ndarray, bins: int) -> np.ndarray:
    """Log mel filterbank energies [frames, bins] of one 16 kHz clip (Kaldi's fbank, without dither)."""
    wave = np.asarray(wave, dtype=np.float64) * 32768.0  # Kaldi works in 16-bit sample units
    if wave.size < WINDOW:
        wave = np.pad(wave, (0, WINDOW - wave.size))
    frames = 1 + (wave.size - WINDOW) // HOP
    index = np.arange(WINDOW)[None, :] + HOP * np.arange(frames)[:, None]
    framed = wave[index]
    framed = framed - framed.mean(axis=1, keepdims=True)  # remove DC per frame
    framed = np.concatenate([framed[:, :1] * (1 - 0.97), framed[:, 1:] - 0.97 * framed[:, :-1]], axis=1)
    power = np.abs(np.fft.rfft(framed * _povey_window(), n=fft_size(bins), axis=1)) ** 2
    energies = power @ mel_filterbank(bins).T
    return np.log(np.maximum(energies, np.finfo(np.float32).eps))


def normalize(feats: np.ndarray) -> np.ndarray:
    """Mean and variance normalised per bin over time (utterance CMVN), [frames, bins]."""
    mean = feats.mean(axis=0, keepdims=True)
    std = feats.std(axis=0, keepdims=True)
    return (feats - mean) / np.maximum(std, 1e-5)


def features(count: int, frames: int, bins: int, seed: int = 0) -> np.ndarray:
    """``count`` clips of voiced audio as normalised log-mel features [count, frames, bins]."""
    clips = content.speech(count, samples_for(frames), rate=FEATURE_RATE, seed=seed)
    return np.stack([normalize(log_mel(clip, bins))[:frames] for clip in clips])


def features_of_clip(wave: np.ndarray, bins: int, frames: int | None = None) -> np.ndarray:
    """Normalised log-mel features [frames, bins] of a real 16 kHz clip, cut or padded (repeating the
    last frame) to ``frames`` when the model fixes them."""
    feats = normalize(log_mel(wave, bins))
    if frames is not None and feats.shape[0] != frames:
        feats = feats[:frames] if feats.shape[0] > frames else np.pad(feats, ((0, frames - feats.shape[0]), (0, 0)),
                                                                      mode="edge")  # fmt: skip
    return feats


def lay_out(feats: np.ndarray, shape: list[int], mel_axis: int, time_axis: int) -> np.ndarray:
    """Features [rows, frames, bins] placed in the declared axis order ``shape`` (rows fill the other axes)."""
    others = [d for axis, d in enumerate(shape) if axis not in (mel_axis, time_axis)]
    arr = feats.reshape(*others, shape[time_axis], shape[mel_axis])
    return np.moveaxis(arr, [-2, -1], [time_axis, mel_axis])


def synthesize_features(shape: list[int], mel_axis: int, time_axis: int, seed: int = 0) -> np.ndarray:
    """Features for an input of ``shape``: one clip per row of the other axes (the batch)."""
    rows = int(np.prod([d for axis, d in enumerate(shape) if axis not in (mel_axis, time_axis)], dtype=np.int64))
    return lay_out(features(rows, shape[time_axis], shape[mel_axis], seed=seed), shape, mel_axis, time_axis)


def describe(bins: int, frames: int | None) -> str:
    """The input note's words: "log-mel features, 80 bins, 3 s of voiced audio"."""
    if not frames:
        return f"log-mel features, {bins} bins, of voiced audio"
    seconds = frames / FRAMES_PER_SECOND
    return f"log-mel features, {bins} bins, {seconds:.3g} s of voiced audio"

"""Block-wise 4-bit quantization maths on numpy arrays (used by the weights-int4 method).

A weight is laid out as a 2-D array ``[rows, length]`` whose second axis is the
consumer's reduction axis (the K of a MatMul, C_in x kernel of a Conv, the
width of an embedding row). Each row is cut into blocks of ``block_size``
values (the last one zero-padded); every block gets its own scale and, when
asymmetric, an integer zero point in 0..15:

* asymmetric: ``value = scale * (code - zero_point)``, codes and zero points in 0..15
* symmetric: the same with the zero point fixed at 8 (codes -8..7 around zero)

Error bounds (checked by property tests):

* round-to-nearest (``search="rtn"``): ``|x - decode(x)| <= scale / 2`` for every value,
  with ``scale = (max(block, 0) - min(block, 0)) / 15`` (asymmetric) or
  ``max|block| / 7`` (symmetric, or ``/ 8`` when the largest magnitude is negative)
* rescaled (``search="rescaled"``, the default): round-to-nearest codes, scale set so that
  ``<x, decode(x)> = |x|^2`` per block (no systematic shrinking of the weights)
* scale search (``search="mse"``): the block's (weighted) squared error is never
  larger than round-to-nearest's, since the min/max scale is one of the candidates.

Codes are stored two to a byte, low nibble first (element ``2j`` in bits 0-3,
``2j + 1`` in bits 4-7): the layout of ONNX INT4/UINT4 tensors, ONNX Runtime's
``MatMulNBits`` (``[rows, blocks, block_size / 2]``) and ``GatherBlockQuantized``.
Zero points are packed the same way along the block axis (``[rows, ceil(blocks / 2)]``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from shrinkray.methods.quant import ErrorStats, _ErrorSums

BLOCK_SIZES = (32, 64, 128)
#: Scale candidates tried by the "mse" search, as fractions of the min/max scale.
SEARCH_FRACTIONS = tuple(np.round(np.arange(1.0, 0.595, -0.025), 4))
#: Blocks handled per chunk: keeps temporaries cache-sized on big tensors.
CHUNK_VALUES = 1 << 16


@dataclass
class BlockCodes:
    """4-bit block codes of a ``[rows, length]`` array and what decodes them."""

    codes: np.ndarray  # uint8 in 0..15, [rows, blocks, block_size]
    scale: np.ndarray  # float32, [rows, blocks]
    zero_point: np.ndarray  # uint8 in 0..15, [rows, blocks] (all 8 when symmetric)
    length: int  # values per row before padding
    symmetric: bool

    @property
    def block_size(self) -> int:
        return int(self.codes.shape[2])

    @property
    def rows(self) -> int:
        return int(self.codes.shape[0])

    @property
    def blocks(self) -> int:
        return int(self.codes.shape[1])

    def decode(self) -> np.ndarray:
        """The float32 ``[rows, length]`` values: ``(code - zero_point) * scale`` in float32."""
        values = self.codes.astype(np.float32)  # then in place: one float copy of the tensor, not three
        values -= self.zero_point[..., None].astype(np.float32)
        values *= self.scale[..., None]
        return values.reshape(self.rows, -1)[:, : self.length]

    def packed_codes(self) -> np.ndarray:
        """uint8 ``[rows, blocks, block_size / 2]``, low nibble first."""
        return pack_nibbles(self.codes)

    def packed_zero_points(self) -> np.ndarray:
        """uint8 ``[rows, ceil(blocks / 2)]``, low nibble first (an odd count padded with 8... as 0)."""
        return pack_nibbles(self.zero_point)

    def error_against(self, original: np.ndarray) -> ErrorStats:
        """Max abs, RMS and relative RMS error of ``original`` ``[rows, length]`` against :meth:`decode`."""
        acc = _ErrorSums()
        step = max(1, CHUNK_VALUES * 4 // max(self.length, 1))
        for start in range(0, self.rows, step):
            part = BlockCodes(
                self.codes[start : start + step],
                self.scale[start : start + step],
                self.zero_point[start : start + step],
                self.length,
                self.symmetric,
            )
            acc.add(np.asarray(original[start : start + step], dtype=np.float32), part.decode(), finite=True)
        return acc.stats()


def pack_nibbles(codes: np.ndarray) -> np.ndarray:
    """Two 4-bit codes per byte along the last axis, low nibble first; an odd count is padded with 0."""
    codes = np.asarray(codes, dtype=np.uint8)
    if codes.shape[-1] % 2:
        codes = np.concatenate([codes, np.zeros(codes.shape[:-1] + (1,), dtype=np.uint8)], axis=-1)
    return (codes[..., 0::2] & 0x0F) | ((codes[..., 1::2] & 0x0F) << 4)


def unpack_nibbles(packed: np.ndarray, count: int) -> np.ndarray:
    """The inverse of :func:`pack_nibbles`: ``count`` codes along the last axis."""
    packed = np.asarray(packed, dtype=np.uint8)
    out = np.empty(packed.shape[:-1] + (packed.shape[-1] * 2,), dtype=np.uint8)
    out[..., 0::2] = packed & 0x0F
    out[..., 1::2] = packed >> 4
    return out[..., :count]


def _blocks(x2d: np.ndarray, block_size: int) -> np.ndarray:
    """``[rows, length]`` -> float32 ``[rows, blocks, block_size]``, zero-padded."""
    rows, length = x2d.shape
    blocks = max(1, math.ceil(length / block_size))
    padded = np.zeros((rows, blocks * block_size), dtype=np.float32)
    padded[:, :length] = x2d
    return padded.reshape(rows, blocks, block_size)


def _weights(importance: np.ndarray | None, length: int, block_size: int) -> np.ndarray | None:
    """Per-position weights ``[1, blocks, block_size]`` (0 on padding), or None for plain squared error."""
    blocks = max(1, math.ceil(length / block_size))
    if importance is None:
        if length == blocks * block_size:
            return None
        importance = np.ones(length, dtype=np.float32)
    imp = np.zeros(blocks * block_size, dtype=np.float32)
    imp[:length] = np.asarray(importance, dtype=np.float32).reshape(-1)
    return imp.reshape(1, blocks, block_size)


class _Rounder:
    """Codes for given scales and zero points, and their weighted squared error, for one chunk of blocks."""

    def __init__(self, x: np.ndarray, weights: np.ndarray | None, symmetric: bool, scale_of) -> None:
        self.x = x
        self.w = weights
        self.symmetric = symmetric
        self.scale_of = scale_of  # rounds raw scales to what is stored (float16 grid or float32)

    def codes(self, scale: np.ndarray, zero: np.ndarray) -> np.ndarray:
        q = np.divide(self.x, scale[..., None])
        np.rint(q, out=q)
        q += zero[..., None]
        np.clip(q, 0.0, 15.0, out=q)
        return q

    def error(self, q: np.ndarray, scale: np.ndarray, zero: np.ndarray) -> np.ndarray:
        d = (q - zero[..., None]) * scale[..., None]
        np.subtract(self.x, d, out=d)
        np.square(d, out=d)
        if self.w is not None:
            d *= self.w
        return d.sum(axis=-1)

    def unbiased_scale(self, q: np.ndarray, zero: np.ndarray, fallback: np.ndarray) -> np.ndarray:
        """The scale with <x, decoded> = |x|^2 (weighted): rounding no longer shrinks the block towards zero."""
        c = q - zero[..., None]
        wx = self.x * self.w if self.w is not None else self.x
        num = (wx * self.x).sum(axis=-1)
        den = (wx * c).sum(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = num / den
        ok = np.isfinite(s) & (s > 0)
        return np.where(ok, self.scale_of(np.where(ok, s, 1.0)), fallback)

    def least_squares_scale(self, q: np.ndarray, zero: np.ndarray, fallback: np.ndarray) -> np.ndarray:
        """The scale minimising the (weighted) error for fixed codes: sum(w x c) / sum(w c^2), c = q - zero."""
        c = q - zero[..., None]
        wc = c * self.w if self.w is not None else c
        num = (wc * self.x).sum(axis=-1)
        den = (wc * c).sum(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = num / den
        ok = np.isfinite(s) & (s > 0)
        return np.where(ok, self.scale_of(np.where(ok, s, 1.0)), fallback)


def _minmax_params(x: np.ndarray, symmetric: bool) -> tuple[np.ndarray, np.ndarray]:
    """Round-to-nearest scale and zero point per block (what ONNX Runtime's quantizer does)."""
    lo = np.minimum(x.min(axis=-1), 0.0).astype(np.float64)
    hi = np.maximum(x.max(axis=-1), 0.0).astype(np.float64)
    if symmetric:
        # Codes -8..7 must reach both ends: -8 * scale <= min and 7 * scale >= max.
        scale = np.maximum(-lo / 8.0, hi / 7.0)
        zero = np.full(scale.shape, 8.0)
    else:
        scale = (hi - lo) / 15.0
        with np.errstate(divide="ignore", invalid="ignore"):
            zero = np.where(scale > 0, np.clip(np.rint(-lo / scale), 0, 15), 8.0)
    return scale, zero


def quantize_blocks(
    x2d: np.ndarray,
    block_size: int,
    *,
    symmetric: bool = False,
    search: str = "mse",
    importance: np.ndarray | None = None,
    scale_dtype: type = np.float32,
    unit: float | None = None,
) -> BlockCodes:
    """4-bit block codes of a finite ``[rows, length]`` array, blocks along the second axis.

    ``search``: "rtn" keeps the min/max scale (round to nearest); "rescaled"
    keeps its codes and sets each block's scale to ``|x|^2 / <x, codes>``, so
    the decoded block is not shrunk towards zero on average; "mse" also
    tries smaller scales (:data:`SEARCH_FRACTIONS`) and the least-squares scale
    for the chosen codes, keeping whichever gives the lowest squared error per
    block (weighted by ``importance`` per position along the second axis, e.g.
    the mean squared activation of each input channel, when given).
    ``scale_dtype`` float16 keeps scales on the float16 grid *relative to the
    tensor's largest scale* (a power of two, stored by the caller; ``unit``
    overrides it, e.g. 1.0 for plain float16 scales): the codes are chosen
    for the scales exactly as they will be decoded.
    """
    if search not in ("rtn", "rescaled", "mse"):
        raise ValueError(f"unknown search {search!r}")
    x2d = np.asarray(x2d, dtype=np.float32)
    if x2d.ndim != 2:
        raise ValueError("quantize_blocks expects a 2-D array")
    rows, length = x2d.shape
    blocks = _blocks(x2d, block_size)
    weights = _weights(importance, length, block_size)
    scale_of = scale_rounder(blocks, symmetric, scale_dtype, unit)
    codes = np.empty(blocks.shape, dtype=np.uint8)
    scales = np.empty(blocks.shape[:2], dtype=np.float32)
    zeros = np.empty(blocks.shape[:2], dtype=np.uint8)
    step = max(1, CHUNK_VALUES // max(blocks.shape[1] * block_size, 1))
    for start in range(0, rows, step):
        x = blocks[start : start + step]
        r = _Rounder(x, weights, symmetric, scale_of)
        raw, zero = _minmax_params(x, symmetric)
        safe = np.where(raw > 0, raw, 1.0)  # an all-zero block: any scale codes it exactly
        best_s = scale_of(safe)
        best_q = r.codes(best_s, zero)
        if search == "mse":
            best_e = r.error(best_q, best_s, zero)
            candidates = [scale_of(safe * f) for f in SEARCH_FRACTIONS[1:]]
            for s in candidates:
                q = r.codes(s, zero)
                e = r.error(q, s, zero)
                better = e < best_e
                best_e = np.where(better, e, best_e)
                best_s = np.where(better, s, best_s)
                best_q = np.where(better[..., None], q, best_q)
            for _ in range(2):  # refit the scale to the chosen codes, re-round, keep if better
                s = r.least_squares_scale(best_q, zero, best_s)
                q = r.codes(s, zero)
                e = r.error(q, s, zero)
                better = e < best_e
                best_e = np.where(better, e, best_e)
                best_s = np.where(better, s, best_s)
                best_q = np.where(better[..., None], q, best_q)
        if search == "rescaled":  # same codes, scale s = |x|^2 / <x, c>: the block keeps its projection on x
            best_s = r.unbiased_scale(best_q, zero, best_s)
        codes[start : start + step] = best_q.astype(np.uint8)
        scales[start : start + step] = best_s
        zeros[start : start + step] = zero.astype(np.uint8)
    return BlockCodes(codes=codes, scale=scales, zero_point=zeros, length=length, symmetric=symmetric)


def scale_rounder(blocks: np.ndarray, symmetric: bool, scale_dtype: type, unit: float | None = None):
    """A function rounding raw scales to the values that will be stored.

    float32: plain float32 rounding (0 and non-finite become 1). float16:
    scales are stored as float16 multiples of :func:`scale_unit` (a power of
    two at least as large as every min/max scale), so each scale keeps 11
    significant bits wherever it sits in the tensor's range.
    """
    if np.dtype(scale_dtype) == np.float32:

        def to32(s: np.ndarray) -> np.ndarray:
            s = np.asarray(s, dtype=np.float64)
            s32 = s.astype(np.float32)
            s32 = np.where(s32.astype(np.float64) < s, np.nextafter(s32, np.float32(np.inf)), s32)  # never below
            return np.where(np.isfinite(s32) & (s32 > 0), s32, np.float32(1.0)).astype(np.float32)

        return to32
    unit = scale_unit(blocks, symmetric) if unit is None else unit

    def to16(s: np.ndarray) -> np.ndarray:
        want = np.asarray(s, dtype=np.float64) / unit
        with np.errstate(over="ignore"):  # beyond float16 (a fallback scale of 1 on a tiny tensor) -> 1 below
            rel = want.astype(np.float16)
        rel = np.where(rel.astype(np.float64) < want, np.nextafter(rel, np.float16(np.inf)), rel)  # never below
        rel = np.where(np.isfinite(rel) & (rel > 0), rel, np.float16(1.0))
        return (rel.astype(np.float32) * np.float32(unit)).astype(np.float32)

    return to16


def minmax_scales(blocks: np.ndarray, symmetric: bool) -> np.ndarray:
    """The round-to-nearest scale of every block of a ``[..., block_size]`` array."""
    return _minmax_params(blocks.reshape(-1, blocks.shape[-1]), symmetric)[0]


def scale_unit(blocks: np.ndarray, symmetric: bool) -> float:
    """A power of two >= the largest min/max scale of the blocks (1.0 for an all-zero array)."""
    raw, _ = _minmax_params(blocks.reshape(-1, blocks.shape[-1]), symmetric)
    top = float(raw.max()) if raw.size else 0.0
    if not (top > 0 and math.isfinite(top)):
        return 1.0
    return float(2.0 ** math.ceil(math.log2(top)))



#: A value is an outlier when it is at least this many times its row's RMS (a Gaussian row has
#: about 2e-9 of its values there; trained and generated layers with outlier features have 0.1-0.3%).
OUTLIER_Z = 6.0
#: At most this share of a tensor's values is kept exactly; beyond it the tensor is heavy-tailed
#: throughout and blocks serve it better than a list of exceptions.
OUTLIER_MAX_SHARE = 0.01


def find_outliers(x2d: np.ndarray, z_min: float = OUTLIER_Z, max_share: float = OUTLIER_MAX_SHARE) -> np.ndarray:
    """Flat indices (int64, ascending) of the values of ``[rows, length]`` at least ``z_min`` row RMS
    from zero, or none when there are more than ``max_share`` of them.

    One such value stretches its block's scale 2-4x, so the other 31 values of the block lose 1-2 bits;
    kept aside exactly (its block quantized without it), it costs 6 bytes instead.
    """
    if z_min <= 0 or x2d.size == 0:
        return np.zeros(0, dtype=np.int64)
    x = np.asarray(x2d, dtype=np.float32)
    rows, length = x.shape
    found = []
    step = max(1, CHUNK_VALUES // max(length, 1))  # rows at a time: float64 squares of a whole table were 2x it
    for start in range(0, rows, step):
        part = x[start : start + step]
        rms = np.sqrt(np.mean(np.square(part, dtype=np.float64), axis=1, keepdims=True))
        found.append(np.flatnonzero(np.abs(part) >= np.maximum(rms * z_min, np.finfo(np.float32).tiny)) + start * length)
    flat = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
    if flat.size > max_share * x.size:
        return np.zeros(0, dtype=np.int64)
    return flat.astype(np.int64)


def channel_scales(
    x2d: np.ndarray, importance: np.ndarray, block_size: int, search: str, alphas=(0.0, 0.25, 0.5, 0.75)
) -> np.ndarray:
    """Activation-aware scales per position along the reduction axis (AWQ): ``s = importance^(alpha/2)``.

    The weight is quantized as ``x * s`` and decoded divided by ``s``, so input channels that carry
    large activations get a finer grid. ``alpha`` is the one (of ``alphas``) with the least
    activation-weighted squared error, ``sum(importance * (x - decoded)^2)``, the expected output
    error when input channels are uncorrelated; alpha 0 (all ones) is among them, so the result is
    never worse than plain blocks by that measure.
    """
    x = np.asarray(x2d, dtype=np.float32)
    imp = np.asarray(importance, dtype=np.float64).reshape(-1)
    ones = np.ones(x.shape[1], dtype=np.float32)
    if imp.size != x.shape[1] or not np.all(np.isfinite(imp)) or imp.max() <= 0:
        return ones
    imp = np.maximum(imp / imp.mean(), 1e-6)
    best_err, best = math.inf, ones
    for alpha in alphas:
        s = np.power(imp, alpha / 2.0)
        s = (s / math.sqrt(s.max() * s.min())).astype(np.float32)  # centred: scales stay near 1
        codes = quantize_blocks(x * s[None, :], block_size, search=search)
        err = float((np.square(x - codes.decode() / s[None, :]) * imp[None, :]).sum())
        if err < best_err:
            best_err, best = err, s
    return best

"""Candidate 4-bit encodings for bench/int4_quality.py: each returns the decoded tensor and its stored bytes.

Bytes: codes at half a byte per value (padding included), scales at 4 bytes (MatMulNBits needs float32)
or 2 (float16 relative to a power of two, the standard form), zero points at half a byte per block,
outliers at 6 bytes each (int32 index + float16 value), per-input-channel AWQ scales at 2 bytes each.
"""

from __future__ import annotations

import numpy as np

from shrinkray.methods.blockquant import quantize_blocks
from shrinkray.methods.quant import quantize_linear
from shrinkray.methods.weights_int4 import WeightsInt4Options, choose_form, layouts_for


def _layout(ref):
    lays = layouts_for(ref)
    return lays[0] if lays else None


def _bytes(rows: int, length: int, block: int, scale_bytes: int, symmetric: bool) -> int:
    blocks = -(-length // block)
    return rows * blocks * (block // 2 + scale_bytes + (0 if symmetric else 0.5))


def block4(x2d, block=32, rounding="rescaled", symmetric=False, importance=None, scale16=False):
    codes = quantize_blocks(x2d, block, symmetric=symmetric, search=rounding, importance=importance,
                            scale_dtype=np.float16 if scale16 else np.float32, unit=None)  # fmt: skip
    nbytes = _bytes(x2d.shape[0], x2d.shape[1], block, 2 if scale16 else 4, symmetric)
    return codes.decode(), nbytes


def split_outliers(x2d: np.ndarray, frac: float, z_min: float = 0.0):
    """Take the largest |x| / row RMS values out (set to 0): returns (cleaned, mask)."""
    if frac <= 0:
        return x2d, np.zeros(x2d.shape, bool)
    row_rms = np.sqrt((x2d.astype(np.float64) ** 2).mean(axis=1, keepdims=True)) + 1e-30
    z = np.abs(x2d) / row_rms
    if z_min:
        mask = z >= z_min
        if mask.mean() <= frac:
            return np.where(mask, 0.0, x2d).astype(np.float32), mask
    k = max(1, int(round(frac * x2d.size)))
    thr = np.partition(z.ravel(), -k)[-k]  # float16-safe: float32 input
    mask = z >= thr
    return np.where(mask, 0.0, x2d).astype(np.float32), mask


def awq_scales(x2d: np.ndarray, act: np.ndarray, block: int, rounding: str, alphas=(0.0, 0.25, 0.5, 0.75)):
    """Per-input-channel scales s = act^alpha (normalised), alpha chosen by activation-weighted error."""
    best = None
    imp = act / act.mean()
    for a in alphas:
        s = (imp ** (a / 2)).astype(np.float32)
        s /= np.sqrt(s.max() * s.min())
        dec, _ = block4(x2d * s[None, :], block, rounding)
        dec = dec / s[None, :]
        err = float((((x2d - dec) ** 2) * imp[None, :]).sum())
        if best is None or err < best[0]:
            best = (err, a, dec)
    return best[2], best[1]


def int8_rows(x2d):
    q = quantize_linear(x2d, axis=0, symmetric=False)
    return q.decode().astype(np.float32), x2d.size + x2d.shape[0] * 8


def encode(ref, label: str, stats: dict, refs=None):
    values = ref.array().astype(np.float32)
    lay = _layout(ref)
    if lay is None:
        return values, values.size * 4
    x2d = lay.to_2d(values)
    form = choose_form(ref, WeightsInt4Options().form, 32)
    scale16 = form != "matmulnbits"
    act = stats.get(ref.name)
    parts = dict(p.split("=") if "=" in p else (p, "1") for p in label.split("+"))
    block = int(parts.get("b", 32))
    rounding = parts.get("round", "rescaled")
    if "allf16" in parts:
        scale16 = True
    name = ref.name.lower()
    is_emb = ref.consumers[0].op_type == "Gather"
    extra = 0
    if "emb8" in parts and is_emb:
        dec, nbytes = int8_rows(x2d)
        return _back(dec, lay, values), nbytes
    if "b16sens" in parts and any(k in name for k in parts["b16sens"].split("/")):
        block = 16
    if "int8" in parts and any(k.lower() in name for k in parts["int8"].split("/")):
        dec, nbytes = int8_rows(x2d)
        return _back(dec, lay, values), nbytes
    frac = float(parts.get("out", 0))
    zmin = float(parts.get("outz", 0))
    if zmin:
        frac = 0.01
    clean, mask = split_outliers(x2d, frac, zmin)
    if mask.any():
        scale16 = True  # outliers need the standard form
        extra += int(mask.sum()) * 6
    imp = act if ("imp" in parts and act is not None and act.size == x2d.shape[1]) else None
    if "awq" in parts and act is not None and act.size == x2d.shape[1]:
        dec, _alpha = awq_scales(clean, act, block, rounding)
        nbytes = _bytes(x2d.shape[0], x2d.shape[1], block, 2 if scale16 else 4, False) + x2d.shape[1] * 2
    else:
        dec, nbytes = block4(clean, block, rounding, importance=imp, scale16=scale16)
    if mask.any():
        dec = np.where(mask, x2d.astype(np.float16).astype(np.float32), dec)
    return _back(dec, lay, values), nbytes + extra


def _back(dec2d, lay, values):
    moved = dec2d.reshape(lay.moved_shape(values.shape))
    return np.transpose(moved, np.argsort(lay.perm)).astype(np.float32)  # float16-safe: an integer permutation


VARIANTS = {
    "outz=4+awq": None,
    "outz=5+awq": None,
    "outz=6+awq+int8=layers.0.attn.o_proj/layers.0.attn.v_proj/layers.1.attn.o_proj/layers.1.attn.v_proj/embed_positions": None,
    "outz=6+awq+int8=layer.5.attention.self.value/layer.4.attention.self.value/layer.5.attention.output.dense/layer.3.attention.self.value/layer.4.intermediate.dense/layer.5.intermediate.dense/layer.2.attention.self.value/layer.5.attention.self.key/layer.1.attention.self.value": None,
    "outz=6+awq": None,
    "outz=8+awq": None,
    "outz=6": None,
    "awq+allf16": None,
    "out=0.0025+awq+round=mse": None,
    "out=0.005+awq": None,
    "default": None,
    "round=rtn": None,
    "round=mse": None,
    "allf16": None,
    "round=mse+imp": None,
    "awq": None,
    "awq+round=mse": None,
    "out=0.001": None,
    "out=0.0025": None,
    "out=0.0025+round=mse": None,
    "out=0.0025+awq": None,
    "emb8": None,
    "out=0.0025+awq+allf16": None,
}

"""ONNX Runtime's per-channel weight quantization, one array operation per weight instead of a loop per channel.

``quantize_dynamic(per_channel=True)`` quantizes each output channel of each weight by itself in Python
(``BaseQuantizer.quantize_weight_per_channel_impl``: ~40,000 calls of ``quantize_data`` on a 100 MB
transformer, 1.4-1.6 s of dynamic-int8's 5.4 s, measured 2026-12-06). :func:`vectorized` puts in its place the
same arithmetic on all channels at once, in the same dtypes and order of operations (float64 scale, float32
division, round half to even, clip), so the quantized model is byte for byte ONNX Runtime's
(tests/methods/test_methods_ort_per_channel.py). A weight it does not cover (quantization overrides, a minimum
range, a type other than int8 / uint8, float16 or empty weights, a non-finite range) goes to ONNX Runtime's own.
Imported only by the quantizer's child process (methods/ort_quantize_worker.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx
from onnxruntime.quantization import base_quantizer
from onnxruntime.quantization.quant_utils import (
    TENSOR_NAME_QUANT_SUFFIX,
    find_by_name,
    get_qmin_qmax_for_qType,
    normalize_axis,
    tensor_proto_to_array,
)

COVERED = (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)


@contextlib.contextmanager
def vectorized() -> Iterator[None]:
    """ONNX Runtime's quantizers use :func:`quantize_weight_per_channel` while this is open."""
    cls = base_quantizer.BaseQuantizer
    own = cls.quantize_weight_per_channel_impl

    def impl(self: Any, weight_name: str, weight_qtype: int, channel_axis: int, reduce_range: bool = True,
             keep_float_weight: bool = False) -> tuple[str, str, str]:  # fmt: skip
        names = quantize_weight_per_channel(self, weight_name, weight_qtype, channel_axis, reduce_range,
                                            keep_float_weight)  # fmt: skip
        if names is None:
            return own(self, weight_name, weight_qtype, channel_axis, reduce_range, keep_float_weight)
        return names

    cls.quantize_weight_per_channel_impl = impl
    try:
        yield
    finally:
        cls.quantize_weight_per_channel_impl = own


def quantize_weight_per_channel(quantizer: Any, weight_name: str, qtype: int, channel_axis: int,
                                reduce_range: bool, keep_float_weight: bool) -> tuple[str, str, str] | None:  # fmt: skip
    """What ``quantize_weight_per_channel_impl`` does to ``quantizer``'s model, or None (nothing done) for a weight
    this does not cover."""
    initializer = find_by_name(weight_name, quantizer.model.initializer())
    if initializer is None or qtype not in COVERED or quantizer.min_real_range is not None:
        return None
    if quantizer.tensor_quant_overrides.overrides.get(weight_name):
        return None
    weights = tensor_proto_to_array(initializer)
    valid, axis = normalize_axis(channel_axis, weights.ndim)
    if not valid or weights.dtype != np.float32 or weights.size == 0:
        return None
    coded = _quantized(weights, axis, qtype, quantizer.is_weight_symmetric(qtype),
                       bool(quantizer.reduce_range and reduce_range))  # fmt: skip
    if coded is None:
        return None
    zero_point, scale, quantized = coded
    q_name, zp_name, scale_name = weight_name + TENSOR_NAME_QUANT_SUFFIX, weight_name + "_zero_point", weight_name + "_scale"
    shape = [initializer.dims[axis]]
    quantizer.model.initializer_extend([
        onnx.helper.make_tensor(scale_name, initializer.data_type, shape, scale.tolist()),
        onnx.helper.make_tensor(zp_name, qtype, shape, zero_point.tolist()),
    ])  # fmt: skip
    if not keep_float_weight:
        quantized = quantized.reshape(initializer.dims)
        quantizer.model.initializer_extend([onnx.numpy_helper.from_array(quantized, q_name)])
    return q_name, zp_name, scale_name


def _quantized(weights: np.ndarray, axis: int, qtype: int, symmetric: bool,
               reduce_range: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:  # fmt: skip
    """(zero points, scales, quantized weights) per channel along ``axis``, as ONNX Runtime's ``quantize_data``
    makes them one channel at a time (``compute_scale_zp``, ``quantize_nparray``); None for a non-finite range,
    where ONNX Runtime's own check speaks."""
    qmin, qmax = get_qmin_qmax_for_qType(qtype, reduce_range, symmetric=symmetric)
    rows = np.moveaxis(weights, axis, 0)
    moved_shape = rows.shape
    rows = rows.reshape(moved_shape[0], -1)
    rmin = np.minimum(rows.min(axis=1), np.float32(0))
    rmax = np.maximum(rows.max(axis=1), np.float32(0))
    if symmetric:
        rmax = np.maximum(np.abs(rmin), np.abs(rmax))
        rmin = -rmax
    wide = rmax.astype(np.float64) - rmin.astype(np.float64)
    if not np.isfinite(wide).all():
        return None
    scale = wide / (np.float64(qmax) - np.float64(qmin))
    flat = scale < np.finfo(np.float32).tiny  # a constant channel: scale 1, zero point 0
    if symmetric:
        zero_point = np.full(scale.shape, np.round((qmin + qmax) / np.float64(2.0)), dtype=qmin.dtype)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            zero_point = np.where(flat, 0.0, np.round(qmin - rmin / np.where(flat, 1.0, scale))).astype(qmin.dtype)
    zero_point[flat] = 0
    scale = scale.astype(np.float32)
    scale[flat] = np.float32(1.0)
    low, high = get_qmin_qmax_for_qType(qtype, reduce_range=False, symmetric=False)
    values = (rows / scale[:, None]).round() + zero_point[:, None]
    np.clip(values, low, high, out=values)
    quantized = np.moveaxis(values.astype(onnx.helper.tensor_dtype_to_np_dtype(qtype)).reshape(moved_shape), 0, axis)
    return zero_point, scale, np.ascontiguousarray(quantized)

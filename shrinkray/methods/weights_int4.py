"""Weights-only 4-bit: large float weights stored as block-wise 4-bit codes.

Each selected tensor is laid out as ``[rows, length]`` with the consumer's
reduction axis second (MatMul's K, a Conv's input channels x kernel taps, an
embedding row) and cut into blocks of 32, 64 or 128 values along it; every
block has its own scale and (asymmetric, the default) 4-bit zero point
(:mod:`shrinkray.methods.blockquant`). About 4.6 bits per weight at block 32.

How the graph gets the weights back (``--form``):

* ``standard``: plain ONNX ops (Cast, Floor, Sub, Mul, Concat, Reshape,
  Transpose) that unpack the nibbles and rebuild the float tensor under its
  original name. ONNX Runtime constant-folds them when the session starts,
  so inference runs on float weights at the original speed; any consumer,
  any opset from 7, weights shared by several nodes and subgraph weights.
* ``contrib``: ONNX Runtime's ``com.microsoft`` ops, which keep the weight
  packed in memory and decode inside the kernel: ``MatMulNBits`` for a
  MatMul (or Gemm) that is the weight's only consumer, ``GatherBlockQuantized``
  for an embedding table read by one Gather; other tensors as ``standard``.
* ``dequantize-linear``: ``DequantizeLinear`` with ``block_size`` on
  INT4/UINT4 codes (opset 21; ONNX Runtime does not fold it).
* ``auto`` (default): per consumer op, the form measured fastest on ONNX
  Runtime CPU (measured 2026-11-24: docs/benchmarks.md "weights-int4 and auto"; see README "weights-int4").

Kept as one module (over 600 lines): the method's options, its three ONNX layouts and its calibration
hooks; the block maths, GPTQ and activation statistics live in blockquant, gptq and activations.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from shrinkray.errors import MethodError
from shrinkray.graph.checks import default_opset
from shrinkray.graph.weights import (
    FLOAT_TYPES,
    Consumer,
    GraphEditor,
    NameAllocator,
    WeightRef,
    find_weights,
    iter_graphs,
)
from shrinkray.measure import decoder_lm
from shrinkray.methods.activations import calibrate
from shrinkray.methods.base import (
    MethodSpec,
    RunContext,
    TensorChange,
    TensorSelection,
    Variant,
    map_tensors,
    option,
    register,
    warn_if_damaged,
)
from shrinkray.methods.blockquant import (
    BLOCK_SIZES,
    OUTLIER_Z,
    BlockCodes,
    channel_scales,
    find_outliers,
    minmax_scales,
    pack_nibbles,
    quantize_blocks,
    scale_rounder,
    scale_unit,
)
from shrinkray.methods.gptq import feedback_of, forget_feedback, quantize_gptq, single_blas_thread
from shrinkray.methods.quant import ErrorStats, error_stats, fits_float32
from shrinkray.methods.weights_int8 import _decode_nodes, best_codes

FORMS = ["auto", "standard", "contrib", "dequantize-linear"]
MS_DOMAIN = "com.microsoft"
#: Consumer ops that form ``auto`` gives a com.microsoft op (docs/benchmarks.md "weights-int4 and auto", docs/methods.md "weights-int4"):
#: GatherBlockQuantized ran 0.98x the float Gather and opens sessions 50x faster than the folded standard
#: form (which rebuilds the whole table in float at load). Not MatMul/Gemm: re-measured with bursts at 1
#: thread (ONNX Runtime 1.31.1, `--sweep`), MatMulNBits ran 1.24-2.18x the float MatMul at 1-16 input rows
#: on 128-1024 square weights and 1.00-1.26x at 64-256 rows (ONNX Runtime's own quantizer's output alike),
#: where the folded standard form ran 0.87-1.02x at every size: it costs a slower session opening (the
#: decode runs once, at load) and float weights in memory, which `--form contrib` avoids. Conv has no such
#: op: standard (folded, 1.02x) beat DequantizeLinear (1.25x).
AUTO_CONTRIB_OPS: frozenset[str] = frozenset({"Gather"})


@dataclass
class WeightsInt4Options(TensorSelection):
    block_size: int = option(
        32, "Values per block along the reduction axis, each block with its own scale", choices=list(BLOCK_SIZES)
    )
    symmetric: bool = option(
        False,
        "Symmetric codes -8..7 around zero; off (default, lower error): codes 0..15 with a 4-bit zero point per block",
    )
    rounding: str = option(
        "rescaled",
        "rescaled (default, best output parity measured): round to nearest, then each block's scale set so the "
        "block is not shrunk towards zero; rtn: min/max scale, round to nearest (ONNX Runtime's 4-bit quantizer); "
        "mse: the scale (of 17 candidates and a least-squares refit) with the least squared weight error. Where "
        "error-compensating rounding runs, rescaled means mse",
        choices=["rescaled", "rtn", "mse"],
    )
    form: str = option(
        "auto",
        "How the graph rebuilds weights: standard (plain ONNX ops folded by ONNX Runtime at load: float speed), "
        "contrib (ONNX Runtime's MatMulNBits / GatherBlockQuantized: weights stay 4-bit in memory), "
        "dequantize-linear (opset 21 DequantizeLinear with block_size), auto (the fastest measured per op)",
        choices=FORMS,
    )
    outliers: float = option(
        OUTLIER_Z,
        "Values at least this many times their row's RMS are kept exactly beside the blocks (one such value "
        "stretches its block's scale); those tensors take the standard form; 0 turns it off",
        min=0.0,
    )
    activation_aware: bool = option(
        True,
        "Measure each MatMul/Gemm input channel's activation on the run's inputs and give busy channels a "
        "finer grid (AWQ-style scales, undone in the decode; not used where GPTQ runs); off: data-free",
    )
    gptq: str = option(
        "auto",
        "Error-compensating rounding (GPTQ) of MatMul/Gemm weights: measure how each weight's input channels "
        "move together on the calibration inputs and round every block so that the values still to come make "
        "up for the error of those already rounded. auto (default): on when you give two or more samples of your "
        "own (it learns from some and is judged on the others), off with synthesized ones (they made it worse: "
        "random tokens are not text); on; off",
        choices=["auto", "on", "off"],
    )
    int8_budget: float = option(
        0.16,
        "Where error-compensating rounding runs: the tensors whose 4-bit rounding loses the largest share of their "
        "output on the calibration inputs, per extra byte, are kept at 8-bit while the file stays within this share "
        "of the original's size (0.16: 16%); 0 turns it off",
        min=0.0,
        max=1.0,
    )


# --------------------------------------------------------------------------- layouts


@dataclass(frozen=True)
class Layout:
    """How a tensor becomes ``[rows, length]``: axes ``perm`` in order, the first ``split`` of them are rows."""

    perm: tuple[int, ...]
    split: int
    reason: str  # the consumer that set it ("" when no known consumer did)

    def to_2d(self, values: np.ndarray) -> np.ndarray:
        moved = np.transpose(values, self.perm) if self.perm != tuple(range(values.ndim)) else values
        rows = int(np.prod(moved.shape[: self.split], dtype=np.int64))
        return np.ascontiguousarray(moved).reshape(rows, -1)

    def moved_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(shape[a] for a in self.perm)


def _attr(node: onnx.NodeProto, name: str, default):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _reduction_layout(consumer: Consumer, rank: int) -> Layout | None:
    """The layout that puts this use's reduction axis second, or None for an op we do not know."""
    op, idx, node = consumer.op_type, consumer.input_index, consumer.node
    ident = tuple(range(rank))
    if rank == 0:
        return None
    if op == "MatMul" and idx == 1 and rank >= 2:
        k = rank - 2
        return Layout(tuple(a for a in ident if a != k) + (k,), rank - 1, "MatMul")
    if op == "MatMul" and idx == 0 and rank >= 2:
        return Layout(ident, rank - 1, "MatMul")
    if op == "Gemm" and idx in (0, 1) and rank == 2:
        trans = _attr(node, "transB" if idx == 1 else "transA", 0)
        row_is_k = (idx == 1) != bool(trans)  # B [K, N] (not transposed) keeps K on axis 0
        return Layout((1, 0) if row_is_k else (0, 1), 1, "Gemm")
    if op == "Conv" and idx == 1 and rank >= 3:
        return Layout(ident, 1, "Conv")
    if op == "ConvTranspose" and idx == 1 and rank >= 3:
        return Layout((1, 0, *range(2, rank)), 1, "ConvTranspose")
    if op == "Gather" and idx == 0 and rank >= 2 and _attr(node, "axis", 0) == 0:
        return Layout(ident, 1, "Gather")
    if op in ("LSTM", "GRU", "RNN") and idx in (1, 2) and rank == 3:
        return Layout(ident, 2, op)
    return None


def layouts_for(ref: WeightRef) -> list[Layout]:
    """Candidate layouts: the distinct ones known consumers ask for, else blocks along the last axis."""
    rank = len(ref.shape)
    found: list[Layout] = []
    for c in ref.consumers:
        lay = _reduction_layout(c, rank)
        if lay is not None and all((lay.perm, lay.split) != (f.perm, f.split) for f in found):
            found.append(lay)
    if found:
        return found
    if rank == 0:
        return []
    return [Layout(tuple(range(rank)), rank - 1, "")]


def _one_reduction_axis(layout: Layout) -> Layout:
    """DequantizeLinear blocks along one axis: keep the first reduction axis (a Conv's input channels) and
    make the others (kernel taps) rows."""
    rank = len(layout.perm)
    if rank - layout.split <= 1:
        return layout
    first = layout.perm[layout.split]
    return Layout(tuple(a for a in layout.perm if a != first) + (first,), rank - 1, layout.reason)


# --------------------------------------------------------------------------- encoding


@dataclass
class Encoded:
    layout: Layout
    codes: BlockCodes
    unit: float  # scales are stored as float16 multiples of this power of two (standard form), else 1
    stats: ErrorStats
    #: "standard", "matmulnbits", "matmulnbits16" / "gather16" (float16 scales), "gather" or "dequantize-linear"
    form: str
    outliers: np.ndarray | None = None  # flat indices into [rows, length] kept exactly
    outlier_values: np.ndarray | None = None  # their float32 values
    inv_scale: np.ndarray | None = None  # 1 / activation-aware scale per position along the reduction axis
    #: The share of the tensor's output lost to 4-bit: ``|X E.T|^2 / |X W.T|^2`` on the calibration inputs (E the
    #: rounding error, X the weight's input) where its second moments were measured, else ``|E|^2 / |W|^2``.
    loss: float = 0.0

    def decode(self) -> np.ndarray:
        """The float32 ``[rows, length]`` values the graph rebuilds."""
        values = self.codes.decode()  # a new array: edited in place
        if self.inv_scale is not None:
            values *= self.inv_scale[None, :]
        if self.outliers is not None and self.outliers.size:
            values = np.ascontiguousarray(values)  # a flat view to write through (a copy only when padded)
            values.reshape(-1)[self.outliers] = self.outlier_values
        return values


def _contrib_kind(ref: WeightRef) -> str | None:
    """"matmulnbits" / "gather" when the weight's single use can become a com.microsoft op."""
    if ref.kind != "initializer" or ref.dtype != onnx.TensorProto.FLOAT or len(ref.consumers) != 1:
        return None
    c = ref.consumers[0]
    if c.nested or len(ref.shape) != 2:
        return None
    node = c.node
    if c.op_type == "MatMul" and c.input_index == 1:
        return "matmulnbits"
    if c.op_type == "Gemm" and c.input_index == 1:
        if _attr(node, "transA", 0) or float(_attr(node, "alpha", 1.0)) != 1.0:
            return None
        if len(node.input) > 2 and node.input[2] and float(_attr(node, "beta", 1.0)) != 1.0:
            return None
        return "matmulnbits"
    if c.op_type == "Gather" and c.input_index == 0 and _attr(node, "axis", 0) == 0:
        return "gather"
    return None


def choose_form(ref: WeightRef, form: str, block_size: int) -> str:
    if form == "dequantize-linear":
        return "dequantize-linear"
    kind = _contrib_kind(ref) if form in ("contrib", "auto") else None
    if kind == "gather" and ref.shape[1] % block_size:
        kind = None  # GatherBlockQuantized returns whole blocks: the row length must be a multiple
    if kind is not None and form == "auto" and ref.consumers[0].op_type not in AUTO_CONTRIB_OPS:
        kind = None
    return kind or "standard"


def encode_tensor(
    values: np.ndarray, ref: WeightRef, options: WeightsInt4Options, form: str, importance: np.ndarray | None = None,
    outliers_ok: bool = True, gram: np.ndarray | None = None, measure_loss: bool = False,
) -> Encoded | None:
    """Block codes along the best layout for this tensor, or None when it holds inf/NaN (or values float32
    cannot hold).

    Outliers (``options.outliers``) are kept aside exactly, which needs the standard form (a contrib op
    rebuilds nothing but the blocks). ``importance`` (mean squared activation per input channel of a
    MatMul/Gemm weight) gives activation-aware scales along the reduction axis; ``gram`` (its inputs'
    second moments ``X.T X / tokens``, K x K) error-compensating rounding (:mod:`shrinkray.methods.gptq`).
    ``measure_loss``: fill :attr:`Encoded.loss` (the 8-bit budget's measure; a product of the size of GPTQ's).
    """
    if values.size and not fits_float32(np.array([np.min(values), np.max(values)], dtype=np.float64)):
        return None
    layouts = layouts_for(ref)
    if form == "dequantize-linear":
        layouts = [_one_reduction_axis(lay) for lay in layouts]
    if form in ("matmulnbits", "gather"):
        layouts = layouts[:1]
    best: Encoded | None = None
    for layout in layouts:
        x2d = layout.to_2d(values).astype(np.float32, copy=False)
        this_form, original = form, x2d
        idx = np.zeros(0, dtype=np.int64)
        if outliers_ok and form != "dequantize-linear":
            idx = find_outliers(x2d, options.outliers)
        if idx.size:
            this_form = "standard"
            x2d = x2d.copy()
            x2d.reshape(-1)[idx] = 0.0
        s = None
        if importance is not None and layout.reason in ("MatMul", "Gemm") and importance.size == x2d.shape[1]:
            s = channel_scales(x2d, importance, options.block_size, options.rounding)
            if np.all(s == 1.0):
                s = None
            else:
                x2d = x2d * s[None, :]
        use_gram = gram is not None and layout.reason in ("MatMul", "Gemm") and gram.shape == (x2d.shape[1],) * 2
        blocks_view = _padded_view(x2d, options.block_size)
        if this_form == "standard":
            unit = scale_unit(blocks_view, options.symmetric)
            scale_dtype = np.float16
        elif this_form in ("gather", "matmulnbits") and _float16_scales_fit(blocks_view, options.symmetric):
            # GatherBlockQuantized takes float16 scales (then a Cast of its output); MatMulNBits gets them through
            # a Cast that ONNX Runtime folds at load: 4.6 instead of 5.1 bits per weight, same speed
            unit, scale_dtype = 1.0, np.float16
        else:
            unit, scale_dtype = 1.0, np.float32
        kept = None
        if use_gram:
            f = feedback_of(gram)
            if s is not None:  # x @ W = (x / s) @ (W * s): H becomes D H D with D = diag(1 / s), F becomes D F D^-1
                f = f / s[:, None] * s[None, :]
            exact = None
            if idx.size:
                exact = np.zeros(x2d.shape, dtype=bool)
                exact.reshape(-1)[idx] = True
            params = None
            if options.rounding != "rtn":  # each block's scale by the search when its first column is reached
                params = _block_search(options, scale_dtype, unit, exact)
            codes, kept = quantize_gptq(
                x2d if not idx.size else original * (s[None, :] if s is not None else 1.0), f,
                options.block_size, symmetric=options.symmetric, exact=exact,
                scale_of=scale_rounder(blocks_view, options.symmetric, scale_dtype, unit), params=params,
            )  # fmt: skip
            if s is not None and kept.size:
                kept = kept / s[idx % x2d.shape[1]]
        else:
            codes = quantize_blocks(
                x2d, options.block_size, symmetric=options.symmetric, search=options.rounding,
                scale_dtype=scale_dtype, unit=unit,
            )  # fmt: skip
        if scale_dtype == np.float16 and this_form in ("gather", "matmulnbits"):
            this_form += "16"
        enc = Encoded(layout, codes, unit, ErrorStats(0.0, 0.0, 0.0), this_form)
        if idx.size:
            enc.outliers = idx
            enc.outlier_values = (kept if kept is not None else original.reshape(-1)[idx]).astype(np.float32)
        if s is not None:
            enc.inv_scale = (1.0 / s).astype(np.float32)
        enc.stats = _stats(enc, original, ref.dtype)
        if best is None or enc.stats.rms < best.stats.rms:
            if measure_loss:
                enc.loss = _loss(original, enc.decode(), gram if use_gram else None)
            best = enc
    return best


def _loss(original: np.ndarray, decoded: np.ndarray, gram: np.ndarray | None) -> float:
    """:attr:`Encoded.loss`: with ``H = X.T X`` (``gram``) the error and the output energy are ``tr(E H E.T)`` and
    ``tr(W H W.T)`` (one product of ``[W; E]`` by H), else plain squared sums."""
    err = original - decoded
    if gram is None:
        total = float(np.sum(np.square(original, dtype=np.float64)))
        return float(np.sum(np.square(err, dtype=np.float64))) / total if total > 0 else 0.0
    both = np.concatenate([original, err]).astype(np.float32, copy=False)
    prod = np.einsum("ij,ij->i", both @ gram, both, dtype=np.float64)  # per row: w H w.T, then e H e.T
    total = float(prod[: len(original)].sum())
    return float(prod[len(original) :].sum()) / total if total > 0 else 0.0


#: Plain float16 scales must stay normal numbers (11 significant bits) with room for the search's refits.
FLOAT16_MIN_SCALE, FLOAT16_MAX_SCALE = 2.0**-14, 2.0**14


def _float16_scales_fit(blocks: np.ndarray, symmetric: bool) -> bool:
    scales = minmax_scales(blocks, symmetric)
    scales = scales[scales > 0]
    return bool(scales.size) and float(scales.min()) >= FLOAT16_MIN_SCALE and float(scales.max()) <= FLOAT16_MAX_SCALE


def _padded_view(x2d: np.ndarray, block_size: int) -> np.ndarray:
    rows, length = x2d.shape
    if length % block_size == 0:
        return x2d.reshape(rows, -1, block_size)
    blocks = math.ceil(length / block_size)
    padded = np.zeros((rows, blocks * block_size), dtype=np.float32)
    padded[:, :length] = x2d
    return padded.reshape(rows, blocks, block_size)


def _stats(enc: Encoded, x2d: np.ndarray, dtype: int) -> ErrorStats:
    if dtype == onnx.TensorProto.FLOAT and enc.outliers is None and enc.inv_scale is None:
        return enc.codes.error_against(x2d)

    decoded = enc.decode().astype(FLOAT_TYPES[dtype], copy=False)  # the final Cast to the tensor's own type
    # no copy of the original when it already has that type; the decoded values become the difference
    return error_stats(x2d.astype(FLOAT_TYPES[dtype], copy=False), decoded, approx_is_scratch=True)


def _block_search(options: WeightsInt4Options, scale_dtype: type, unit: float, exact: np.ndarray | None):
    """GPTQ's block parameters from the block's updated values by the "mse" scale search (measured on
    MiniLM: hidden cosine 0.98858 against 0.98723 with min/max scales)."""

    def params(values: np.ndarray, col: int) -> tuple[np.ndarray, np.ndarray]:
        if exact is not None:
            values = np.where(exact[:, col : col + values.shape[1]], 0.0, values)
        c = quantize_blocks(values, options.block_size, symmetric=options.symmetric, search="mse",
                            scale_dtype=scale_dtype, unit=unit)  # fmt: skip
        return c.scale[:, 0], c.zero_point[:, 0]

    return params


# --------------------------------------------------------------------------- graph: standard form


class _Nodes:
    """Collects decode nodes and the small constants they need (as extra stored arrays)."""

    def __init__(self, alloc: NameAllocator, final: str, opset: int) -> None:
        """Tensors and nodes get short names (``int4_7/q_hi``, the node named like its output): decode nodes
        named after a long weight name cost kilobytes per tensor; ``final`` is the weight's own name."""
        self.alloc = alloc
        self.final = final
        self.prefix = alloc.new("int4")
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []

    def const(self, tag: str, value: np.ndarray) -> str:
        """A Constant node holding a small array (shapes, 16, 1/16): folded with the rest at load."""
        name = self.alloc.new(f"{self.prefix}/{tag}")
        tensor = numpy_helper.from_array(np.asarray(value), name)
        self.nodes.append(helper.make_node("Constant", [], [name], name=name, value=tensor))
        return name

    def add(self, op: str, inputs: list[str], tag: str, out: str | None = None, **attrs) -> str:
        out = out or self.alloc.new(f"{self.prefix}/{tag}")
        self.nodes.append(helper.make_node(op, inputs, [out], name=self.alloc.new(f"{self.prefix}/{tag}") if out ==
                                           self.final else out, **attrs))  # fmt: skip
        return out

    def _unpack_bits(self, packed: str, shape: tuple[int, ...], count: int, tag: str) -> str:
        """:meth:`unpack` with the nibbles split by BitShift in uint8: one float step (the Cast) instead of seven."""
        four = self.const("four", np.array(4, np.uint8))
        high = self.add("BitShift", [packed, four], f"{tag}_hi", direction="RIGHT")
        shifted = self.add("BitShift", [packed, four], f"{tag}_shl", direction="LEFT")  # high nibble dropped
        low = self.add("BitShift", [shifted, four], f"{tag}_lo", direction="RIGHT")
        return self.add("Cast", [self._interleave(low, high, shape, count, tag)], f"{tag}_f", to=onnx.TensorProto.FLOAT)

    def _interleave(self, low: str, high: str, shape: tuple[int, ...], count: int, tag: str) -> str:
        """Codes ``shape[:-1] + (count,)``: each byte's low nibble, then its high one, trimmed to ``count``."""
        column = self.const(f"{tag}_col", np.array([*shape, 1], dtype=np.int64))
        pairs = self.add(
            "Concat",
            [self.add("Reshape", [low, column], f"{tag}_lo_col"), self.add("Reshape", [high, column], f"{tag}_hi_col")],
            f"{tag}_pairs",
            axis=len(shape),
        )
        flat_len = shape[-1] * 2
        flat = self.add("Reshape", [pairs, self.const(f"{tag}_shape", np.array([*shape[:-1], flat_len], np.int64))],
                        f"{tag}_codes")  # fmt: skip
        if count != flat_len:
            out = self.alloc.new(f"{self.prefix}/{tag}_trim")
            self.nodes.append(self.slice(flat, count, len(shape) - 1, out))
            flat = out
        return flat

    def slice(self, data: str, end: int, axis: int, out: str) -> onnx.NodeProto:
        """``data[..., :end, ...]`` along ``axis``: attributes before opset 10, inputs from 10."""
        name = self.alloc.new(f"{out}_slice")
        if self.opset < 10:
            return helper.make_node("Slice", [data], [out], name=name, starts=[0], ends=[end], axes=[axis])
        bounds = [self.const(tag, np.array([v], np.int64)) for tag, v in (("starts", 0), ("ends", end), ("axes", axis))]
        return helper.make_node("Slice", [data, *bounds], [out], name=name)

    def unpack(self, packed: str, shape: tuple[int, ...], count: int, tag: str) -> str:
        """Float codes ``shape[:-1] + (count,)`` from uint8 ``packed`` (two codes per byte, low nibble first)."""
        if self.opset >= LEAN_OPSET:
            return self._unpack_bits(packed, shape, count, tag)
        as_f = self.add("Cast", [packed], f"{tag}_f", to=onnx.TensorProto.FLOAT)
        high = self.add("Floor", [self.add("Mul", [as_f, self.const("sixteenth", np.float32(1 / 16))], f"{tag}_div")],
                        f"{tag}_hi")  # fmt: skip
        low = self.add("Sub", [as_f, self.add("Mul", [high, self.const("sixteen", np.float32(16))], f"{tag}_hi16")],
                       f"{tag}_lo")  # fmt: skip
        return self._interleave(low, high, shape, count, tag)


#: From this opset the standard decode unpacks nibbles with BitShift (opset 11) in uint8 and keeps the float
#: steps few (:func:`_standard`). ONNX Runtime's constant folding holds every intermediate until it ends, so
#: each full-size float step costs a float copy of the weight while a session opens: the weights-int4
#: variant of the 101 MB benchmark transformer (15.8 MB) took 876 MB to open with the float unpacking
#: (issue 12, measured 2026-11-23). The folded weights are the same values either way.
LEAN_OPSET = 11


def _standard(enc: Encoded, ref: WeightRef, opset: int):
    """Stored arrays and the builder of the standard-ONNX decode nodes."""
    codes = enc.codes
    rows, blocks, size = codes.rows, codes.blocks, codes.block_size
    scale16 = (codes.scale / np.float32(enc.unit)).astype(np.float16).reshape(rows, blocks, 1)
    stored: dict[str, np.ndarray] = {"q4": codes.packed_codes(), "scale": scale16}
    if not codes.symmetric:
        stored["zero_point4"] = pack_flat(codes.zero_point)
    if enc.inv_scale is not None:
        stored["inv_scale"] = enc.inv_scale.reshape(1, -1)
    if enc.outliers is not None and enc.outliers.size:
        stored["outlier_at"] = enc.outliers.astype(np.int32).reshape(-1, 1)
        stored["outlier"] = enc.outlier_values
    tags = list(stored)
    moved = enc.layout.moved_shape(ref.shape)
    inverse = tuple(int(i) for i in np.argsort(enc.layout.perm))  # float16-safe: an integer permutation
    def build(names: list[str], output: str, alloc: NameAllocator) -> list[onnx.NodeProto]:
        b = _Nodes(alloc, output, opset)
        q = b.unpack(names[0], (rows, blocks, size // 2), size, "q")
        if codes.symmetric:
            centred = b.add("Sub", [q, b.const("eight", np.float32(8))], "centred")
        else:
            zp = b.unpack(names[tags.index("zero_point4")], (math.ceil(rows * blocks / 2),), rows * blocks, "zp")
            zp = b.add("Reshape", [zp, b.const("zp_shape", np.array([rows, blocks, 1], np.int64))], "zp_blocks")
            centred = b.add("Sub", [q, zp], "centred")
        scale = b.add("Cast", [names[1]], "scale_f", to=onnx.TensorProto.FLOAT)
        if enc.unit != 1.0:
            scale = b.add("Mul", [scale, b.const("unit", np.float32(enc.unit))], "scale_abs")
        values = b.add("Mul", [centred, scale], "values")
        if opset >= LEAN_OPSET and codes.length == blocks * size:
            values = _lean_tail(b, values, names, tags, blocks, size)  # on [rows, blocks, size]: no copies
        else:
            values = _rows_tail(b, values, names, tags, rows, blocks, size, codes.length)
        final_needs_cast = ref.dtype != onnx.TensorProto.FLOAT
        needs_transpose = inverse != tuple(range(len(inverse)))
        shaped_out = None if (needs_transpose or final_needs_cast) else output
        values = b.add("Reshape", [values, b.const("shape", np.array(moved, np.int64))], "shaped", out=shaped_out)
        if needs_transpose:
            values = b.add("Transpose", [values], "transposed", out=None if final_needs_cast else output,
                           perm=list(inverse))  # fmt: skip
        if final_needs_cast:
            b.add("Cast", [values], "to_type", out=output, to=ref.dtype)
        return b.nodes

    return stored, build


def _rows_tail(b: _Nodes, values: str, names: list[str], tags: list[str], rows: int, blocks: int, size: int,
               length: int) -> str:
    """``[rows, length]`` from the blocks: unpadded, activation-aware scales undone, outliers written back."""
    values = b.add("Reshape", [values, b.const("rows_shape", np.array([rows, blocks * size], np.int64))], "rows")
    if length != blocks * size:
        out = b.alloc.new(f"{b.prefix}/unpadded")
        b.nodes.append(b.slice(values, length, 1, out))
        values = out
    if "inv_scale" in tags:  # activation-aware scales undone along the reduction axis
        values = b.add("Mul", [values, names[tags.index("inv_scale")]], "unscaled")
    if "outlier" in tags:  # the values kept exactly, written over their (zeroed) places
        flat = b.add("Reshape", [values, b.const("flat", np.array([-1], np.int64))], "flat")
        at = b.add("Cast", [names[tags.index("outlier_at")]], "outlier_at64", to=onnx.TensorProto.INT64)
        flat = b.add("ScatterND", [flat, at, names[tags.index("outlier")]], "with_outliers")
        values = b.add("Reshape", [flat, b.const("rows2d", np.array([rows, length], np.int64))], "rows_exact")
    return values


def _lean_tail(b: _Nodes, values: str, names: list[str], tags: list[str], blocks: int, size: int) -> str:
    """:func:`_rows_tail` on the ``[rows, blocks, size]`` blocks themselves (no padding to cut): the scales and
    the outliers' places are reshaped instead of the weight (small tensors), so no full-size copy is made."""
    if "inv_scale" in tags:
        shape = b.const("inv_blocks", np.array([1, blocks, size], np.int64))
        values = b.add("Mul", [values, b.add("Reshape", [names[tags.index("inv_scale")], shape], "inv_3d")], "unscaled")
    if "outlier" in tags:  # flat places in [rows, length] as (row, block, position) triples
        at = b.add("Cast", [names[tags.index("outlier_at")]], "outlier_at64", to=onnx.TensorProto.INT64)
        length = b.const("length", np.array(blocks * size, np.int64))
        width = b.const("size", np.array(size, np.int64))
        column = b.add("Mod", [at, length], "outlier_col")
        parts = [b.add("Div", [at, length], "outlier_row"), b.add("Div", [column, width], "outlier_block"),
                 b.add("Mod", [column, width], "outlier_pos")]  # fmt: skip
        where = b.add("Concat", parts, "outlier_where", axis=1)
        values = b.add("ScatterND", [values, where, names[tags.index("outlier")]], "with_outliers")
    return values


def pack_flat(zero_point: np.ndarray) -> np.ndarray:
    return pack_nibbles(zero_point.reshape(-1))


# --------------------------------------------------------------------------- graph: the other forms


def _dequantize_linear(enc: Encoded, ref: WeightRef):
    """DequantizeLinear (opset 21) on INT4/UINT4 codes in the tensor's own axis order, blocked along its
    reduction axis, then Cast for non-float32 tensors."""
    codes = enc.codes
    lay = enc.layout
    moved = lay.moved_shape(ref.shape)
    inverse = tuple(int(i) for i in np.argsort(lay.perm))  # float16-safe: an integer permutation
    k_axes = len(moved) - lay.split
    if k_axes != 1:
        return None  # DequantizeLinear blocks along one axis: flattened reductions (Conv) cannot be expressed
    axis = lay.perm[-1]
    q = codes.codes.reshape(codes.rows, -1)[:, : codes.length].reshape(moved).transpose(inverse)
    zero = codes.zero_point if not codes.symmetric else None
    scale_shape = list(moved[:-1]) + [codes.blocks]
    sc = codes.scale.reshape(scale_shape).transpose(inverse)
    elem = onnx.TensorProto.INT4 if codes.symmetric else onnx.TensorProto.UINT4
    q_values = q.astype(np.int8) - 8 if codes.symmetric else q
    stored_tensors = {"q": (elem, q_values.view(_Int4)), "scale": (None, sc.astype(np.float32))}
    if zero is not None:
        stored_tensors["zero_point"] = (elem, np.ascontiguousarray(zero.reshape(scale_shape).transpose(inverse)).view(_Int4))
    return stored_tensors, axis


def _int4_tensor(name: str, elem: int, values: np.ndarray) -> onnx.TensorProto:
    return helper.make_tensor(name, elem, list(values.shape), np.asarray(values).reshape(-1).astype(np.int64).tolist())


# --------------------------------------------------------------------------- apply


def approximate(values: np.ndarray, ref: WeightRef) -> np.ndarray | None:
    """The values the default encoding rebuilds (None when no 4-bit layout fits the tensor)."""
    options = WeightsInt4Options()
    if not layouts_for(ref):
        return None
    enc = encode_tensor(values, ref, options, choose_form(ref, options.form, options.block_size))
    if enc is None:
        return None
    moved = enc.decode().reshape(enc.layout.moved_shape(tuple(values.shape)))
    return np.transpose(moved, np.argsort(enc.layout.perm))  # float16-safe: an integer permutation


def candidates(refs: list[WeightRef], options: WeightsInt4Options) -> list[WeightRef]:
    return [r for r in refs if options.selects(r) and layouts_for(r)]


def _ensure_ms_opset(model: onnx.ModelProto) -> None:
    if not any(o.domain == MS_DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))


def uses_gptq(options: WeightsInt4Options, context: RunContext | None, model: onnx.ModelProto) -> bool:
    """``gptq`` "auto" is on when the run calibrates on the user's own inputs (two or more samples, so some
    are held out for judging)."""
    if options.gptq != "auto":
        return options.gptq == "on"
    return context is not None and context.calibrates_on_user_data(model)


def _calibration_key(refs: list[WeightRef], gram: bool) -> tuple:
    return ("weights-int4 calibration", tuple(sorted((r.scope, r.name) for r in refs)), gram)


def _calibration_use(options: WeightsInt4Options, context: RunContext | None,
                     model: onnx.ModelProto) -> tuple[bool, bool]:  # fmt: skip
    """(activation-aware scales, GPTQ): what calibration is for; neither means no calibration, which is also
    what a decoder LM without real text to calibrate on gets (:data:`UNCALIBRATED_LM`)."""
    if not _calibrates_like_its_own(context, model):
        return False, False
    gptq = uses_gptq(options, context, model)
    # GPTQ replaces the activation-aware scales: together they measured +0.0007 hidden cosine on MiniLM and
    # -0.0010 on the generated transformer against GPTQ alone (issue 13, measured 2026-11-23), for more time.
    return options.activation_aware and options.form != "dequantize-linear" and not gptq, gptq


#: The note of a decoder LM's build without calibration (RunContext.calibrates_like_its_own).
UNCALIBRATED_LM = ("Not calibrated: this decoder LM came without its tokenizer.json, so there is no real text to "
                   "measure its activations on, and scales learned from made-up token ids hurt what it writes; "
                   "add the tokenizer (or samples of your own) to calibrate")  # fmt: skip


def _calibrates_like_its_own(context: RunContext | None, model: onnx.ModelProto) -> bool:
    return context.calibrates_like_its_own(model) if context is not None else decoder_lm.layout_of(model) is None


def prepare(header: onnx.ModelProto, options: WeightsInt4Options, context: RunContext, base_dir: Path) -> None:
    """Calibrate on the original before its weights are loaded (``header``'s tensors stay in their data file in
    ``base_dir``): the calibration session then never opens beside a loaded copy of the model (compare's
    weights-int4 step on the 101 MB benchmark model, measured 2026-11-27; docs/benchmarks.md "Speed and memory"). ``apply`` takes
    the result when it quantizes the same tensors with the same statistics, else calibrates itself."""
    refs = candidates(find_weights(header), options)
    awq, gptq = _calibration_use(options, context, header)
    if refs and (awq or gptq):
        context.prepared[_calibration_key(refs, gptq)] = calibrate(header, refs, context, gram=gptq,
                                                                   base_dir=base_dir)  # fmt: skip


def apply(model: onnx.ModelProto, options: WeightsInt4Options, context: RunContext | None = None) -> Variant:
    """``context``: the run's inputs, which activation-aware scales and GPTQ are calibrated on (the user's own
    when given, else the samples compare synthesizes)."""
    opset = default_opset(model)
    if options.form == "dequantize-linear" and opset < 21:
        raise MethodError(
            f"The dequantize-linear form needs opset 21 (INT4 and block_size); this model uses {opset}",
            "Use the default form, auto (or standard / contrib, which work at any opset)",
        )
    variant = Variant(method="weights-int4", options=options.as_dict(), model=model)
    refs = candidates(find_weights(model), options)
    forms = {r.name + "\0" + r.scope: choose_form(r, options.form, options.block_size) for r in refs}
    outliers_ok = opset >= 11  # ScatterND puts them back
    importance: dict[str, np.ndarray] = {}
    grams: dict[str, np.ndarray] = {}
    awq, gptq = _calibration_use(options, context, model)
    if refs and (options.activation_aware or options.gptq == "on") and not _calibrates_like_its_own(context, model):
        variant.notes.append(UNCALIBRATED_LM)
    if (awq or gptq) and refs:
        cal = context.prepared.pop(_calibration_key(refs, gptq), None) if context is not None else None
        if cal is None:
            cal = calibrate(model, refs, context, gram=gptq)
        importance = cal.power if awq else {}
        grams = cal.gram
        if cal.note:
            variant.notes.append(cal.note)

    original_bytes = model.ByteSize() if gptq and options.int8_budget > 0 else 0

    def encode(ref: WeightRef) -> Encoded | None:
        with single_blas_thread():  # many small products, one tensor per worker thread (gptq.py: measured 2x)
            return encode_one(ref)

    # Where GPTQ runs, its block scales come from the "mse" search; the tensors it cannot reach (embedding tables,
    # tied or shared weights, Conv) take the same search instead of "rescaled": hidden cosine +0.00085 on the
    # generated transformer, +0.00014 on MiniLM, ~5 s more for MiniLM's 11.7M-value table (issue 13, measured 2026-11-23).
    tensor_options = replace(options, rounding="mse") if gptq and options.rounding == "rescaled" else options

    def encode_one(ref: WeightRef) -> Encoded | None:
        local = not ref.scope
        return encode_tensor(ref.array(), ref, tensor_options, forms[ref.name + "\0" + ref.scope],
                             importance.get(ref.name) if local else None, outliers_ok,
                             grams.get(ref.name) if local else None, measure_loss=original_bytes > 0)  # fmt: skip

    editor = GraphEditor(model)
    contrib_edits: list[Callable[[], None]] = []
    fallback_axis: list[str] = []
    skipped_dq: list[str] = []
    try:
        encoded: Iterable[Encoded | None] = map_tensors(encode, refs)
        wider: dict[int, tuple[object, int]] = {}
        if original_bytes:  # the 4-bit losses of every tensor are needed before the first is written
            encoded = list(encoded)
            wider = pick_8bit(refs, encoded, options.int8_budget * original_bytes - original_bytes)
        for k, (ref, enc) in enumerate(zip(refs, encoded, strict=True)):
            if enc is None:
                variant.warnings.append(
                    f"Kept '{ref.name}' as it was: it holds inf or NaN values, or values beyond float32's range"
                )
                continue
            stats = enc.stats
            if k in wider:
                bytes_after, encoding, stats = _rewrite_8bit(ref, *wider[k], editor)
            else:
                if not enc.layout.reason:
                    fallback_axis.append(ref.name)
                bytes_after, encoding = _rewrite(ref, enc, opset, editor, contrib_edits, skipped_dq)
            if bytes_after is None:
                continue
            change = TensorChange.of(ref, bytes_after=bytes_after, stats=stats, encoding=encoding)
            variant.changes.append(change)
            warn_if_damaged(variant, change)
    finally:  # the feedback matrices cached for these second moments (K x K each) go with them
        forget_feedback(grams.values())
    casts = [c for edit in contrib_edits for c in edit()]  # consumers change in place, before the
    _insert_after(model, casts)  # editor rebuilds the node lists
    if contrib_edits:
        _ensure_ms_opset(model)
    editor.apply()
    if not variant.changes:
        variant.notes.append(f"No float tensor has at least {options.min_elements:,} values, so nothing was quantized")
    if wider:
        variant.notes.append(
            f"{len(wider)} tensor(s) whose 4-bit rounding lost the most of their output on the calibration inputs "
            f"per byte are kept at 8-bit within {options.int8_budget:.0%} of the original's size"
        )
    if fallback_axis:
        variant.notes.append(
            f"{len(fallback_axis)} tensor(s) feed no MatMul, Gemm, Conv, Gather or RNN directly, so their blocks "
            f"run along the last axis: {', '.join(fallback_axis[:5])}{' ...' if len(fallback_axis) > 5 else ''}"
        )
    if skipped_dq:
        variant.notes.append(
            "DequantizeLinear blocks along one axis only, so these tensors (reductions over several axes, e.g. "
            f"Conv kernels) were kept in float: {', '.join(skipped_dq[:5])}{' ...' if len(skipped_dq) > 5 else ''}"
        )
    return variant


def graph_bytes(form: str, name: str) -> int:
    """Bytes of graph (decode nodes, names) a rewritten tensor adds beside its stored arrays, for the 8-bit
    budget; on the high side of what MiniLM measured (~3.6 KB per standard decode with its 45-character names,
    ~0.3 KB per contrib op, ~0.75 KB per 8-bit decode). ``form``: an :class:`Encoded` form, or "8-bit"."""
    if form == "standard":
        return 3072 + 16 * len(name)
    if form.startswith(("matmulnbits", "gather")):
        return 256 + 4 * len(name)
    return 512 + 8 * len(name)


def stored_bytes(enc: Encoded) -> int:
    """Bytes the rewrite stores for ``enc`` (codes, scales, zero points, outliers, activation-aware scales)."""
    codes = enc.codes
    scales = codes.rows * codes.blocks
    total = math.ceil(codes.rows * codes.blocks * codes.block_size / 2)
    total += scales * (2 if enc.form in ("standard", "gather16", "matmulnbits16") else 4)
    if not codes.symmetric:  # packed flat (standard) or per row (contrib ops)
        total += math.ceil(scales / 2) if enc.form == "standard" else codes.rows * math.ceil(codes.blocks / 2)
    if enc.outliers is not None:
        total += 8 * int(enc.outliers.size)
    if enc.inv_scale is not None:
        total += 4 * int(enc.inv_scale.size)
    return total


def pick_8bit(refs: list[WeightRef], encoded: list[Encoded | None], room: float) -> dict[int, tuple[object, int]]:
    """Which tensors (by index) go 8-bit, with their codes and stored bytes: the 4-bit losses per extra byte
    (:attr:`Encoded.loss`, the share of the tensor's output lost on the calibration inputs), largest first,
    while the extra bytes fit in ``room`` (the budget's bytes minus the whole model's bytes: negative) plus what
    4-bit saves on every tensor. Only float32 initializers of the main graph, the 8-bit decode's domain."""
    def cost4(k: int) -> int:
        return stored_bytes(encoded[k]) + graph_bytes(encoded[k].form, refs[k].name)

    room += sum(r.nbytes - cost4(k) for k, r in enumerate(refs) if encoded[k] is not None)
    order = sorted((k for k, e in enumerate(encoded) if e is not None and e.loss > 0 and not refs[k].scope
                    and refs[k].dtype == onnx.TensorProto.FLOAT),
                   key=lambda k: -encoded[k].loss / max(refs[k].elements - cost4(k), 1))  # fmt: skip
    picked: dict[int, tuple[object, int]] = {}
    for k in order:
        ref = refs[k]
        if ref.elements - cost4(k) > room:  # at least one byte per value
            continue
        codes = best_codes(ref.array(), ref, symmetric=False)
        if codes is None:
            continue
        size = int(codes.codes.nbytes + codes.scale.nbytes + codes.zero_point.astype(np.float32).nbytes)
        extra = size + graph_bytes("8-bit", ref.name) - cost4(k)
        if extra <= room:
            picked[k] = (codes, size)
            room -= extra
    return picked


def _rewrite_8bit(ref: WeightRef, codes, size: int, editor: GraphEditor) -> tuple[int, str, ErrorStats]:
    """The weights-int8 encoding (uint8 codes per channel, decode folded at load) for a tensor the budget keeps
    at 8-bit."""
    stored, build = _decode_nodes(codes, ref.dtype, "cast-mul")
    editor.replace(ref, stored, build)
    where = f"per-channel (axis {codes.axis})" if codes.axis is not None else "per-tensor"
    stats = codes.error_against(ref.array(), FLOAT_TYPES[ref.dtype])
    return size, f"uint8 asymmetric {where}, kept at 8-bit (the most output lost at 4-bit per byte)", stats


def _insert_after(model: onnx.ModelProto, extra: list) -> None:
    """Put each ``(consumer, node, after)`` node right after (or before) its consumer's node, one rebuild
    per graph."""
    wanted: dict[str, list] = {}
    for c, node, after in extra:
        wanted.setdefault(c.node.output[0], []).append((node, after))
    for _, graph in reversed(list(iter_graphs(model.graph))):  # innermost first, as GraphEditor does
        if not any(o in wanted for n in graph.node for o in n.output[:1]):
            continue
        nodes = []
        for n in graph.node:
            adds = wanted.get(n.output[0], []) if n.output else []
            nodes.extend(add for add, after in adds if not after)
            nodes.append(n)
            nodes.extend(add for add, after in adds if after)
        graph.ClearField("node")
        graph.node.extend(nodes)


def _rewrite(ref, enc, opset, editor, contrib_edits, skipped_dq) -> tuple[int | None, str]:
    codes = enc.codes
    kind = "int4 symmetric" if codes.symmetric else "uint4 + 4-bit zero point"
    along = f"the {enc.layout.reason} reduction axis" if enc.layout.reason else "the last axis"
    desc = f"{kind}, blocks of {codes.block_size} along {along}"
    if enc.form == "standard":
        stored, build = _standard(enc, ref, opset)
        editor.replace(ref, stored, build)
        return _nbytes(stored.values()), f"{desc}, float16 block scales (standard ONNX decode, folded at load)"
    if enc.form == "dequantize-linear":
        built = _dequantize_linear(enc, ref)
        if built is None:
            skipped_dq.append(ref.name)
            return None, ""
        tensors, axis = built
        editor.replace(ref, {}, _dq_builder(ref, tensors, axis, codes.block_size))
        return _nbytes(v for _, v in tensors.values()), f"{desc}, float32 block scales (DequantizeLinear)"
    op = "MatMulNBits" if enc.form.startswith("matmulnbits") else "GatherBlockQuantized"
    half = enc.form.endswith("16")
    stored = {"q4": codes.packed_codes(), "scales": codes.scale.astype(np.float16 if half else np.float32)}
    if op != "MatMulNBits":
        stored["q4"] = stored["q4"].reshape(codes.rows, -1)
    if not codes.symmetric:
        stored["zero_points"] = codes.packed_zero_points()
    if enc.inv_scale is not None:  # undone on the activations: x @ (W / s) = (x / s) @ W
        stored["inv_scale"] = enc.inv_scale
    names = dict(zip(stored, editor.replace(ref, stored, lambda names, output, alloc: []), strict=True))
    contrib_edits.append(lambda: _to_contrib(ref, enc, names, op, editor.names))
    return _nbytes(stored.values()), f"{desc}, float{16 if half else 32} block scales ({op})"


def _nbytes(arrays) -> int:
    """Stored bytes; INT4 arrays (one code per int8/uint8 element here) count half a byte per value."""
    total = 0
    for a in arrays:
        a = np.asarray(a)
        total += math.ceil(a.size / 2) if getattr(a, "_int4", False) else int(a.nbytes)
    return total


def _to_contrib(ref: WeightRef, enc: Encoded, names: dict[str, str], op: str, alloc: NameAllocator):
    """Turn the weight's consumer (MatMul / Gemm / Gather) into the com.microsoft op, in place.

    Returns ``(consumer, node, after)`` triples: nodes to place right after the consumer (a Cast when the op's
    output is float16 while the Gather gave float32) or right before it (the Cast of float16 scales to the
    float32 MatMulNBits takes, folded at load; the Mul of the activations by the activation-aware scales).
    """
    consumer = ref.consumers[0]
    node = consumer.node
    codes = enc.codes
    outputs = list(node.output)
    extra = []
    if enc.form == "gather16":
        half = alloc.new(f"{outputs[0]}__f16")
        extra.append(helper.make_node("Cast", [half], [outputs[0]], name=alloc.new(f"{half}_cast"), to=ref.dtype))
        outputs[0] = half
    q, scales = names["q4"], names["scales"]
    zero = names.get("zero_points", "")
    if op == "MatMulNBits":
        bias = node.input[2] if node.op_type == "Gemm" and len(node.input) > 2 else ""
        act = node.input[0]
        if enc.form == "matmulnbits16":
            wide = alloc.new(f"{scales}_f32")
            extra.append(helper.make_node("Cast", [scales], [wide], name=wide, to=onnx.TensorProto.FLOAT))
            scales = wide
        if "inv_scale" in names:
            scaled = alloc.new(f"{act}__awq")
            extra.append(helper.make_node("Mul", [act, names["inv_scale"]], [scaled], name=scaled))
            act = scaled
        inputs = [act, q, scales, zero, "", bias]
        while not inputs[-1]:
            inputs.pop()
        attrs = {"K": codes.length, "N": codes.rows, "bits": 4, "block_size": codes.block_size}
    else:
        inputs = [q, node.input[1], scales] + ([zero] if zero else [])
        attrs = {"bits": 4, "block_size": codes.block_size, "gather_axis": 0, "quantize_axis": 1}
    new = helper.make_node(op, inputs, outputs, name=node.name, domain=MS_DOMAIN, **attrs)
    node.CopyFrom(new)
    return [(consumer, n, op != "MatMulNBits") for n in extra]


class _Int4(np.ndarray):
    """A code array marked as stored in INT4/UINT4 (half a byte per value) for the byte count."""

    _int4 = True


def _dq_builder(ref: WeightRef, tensors: dict, axis: int, block_size: int):
    def build(_names: list[str], output: str, alloc: NameAllocator) -> list[onnx.NodeProto]:
        nodes = []
        inputs = []
        for tag, (elem, values) in tensors.items():
            name = alloc.new(f"{output}__{tag}")
            if elem is None:
                tensor = numpy_helper.from_array(np.asarray(values), name)
            else:
                tensor = _int4_tensor(name, elem, np.asarray(values))
            nodes.append(helper.make_node("Constant", [], [name], name=alloc.new(f"{name}_const"), value=tensor))
            inputs.append(name)
        final = output if ref.dtype == onnx.TensorProto.FLOAT else alloc.new(f"{output}__f32")
        nodes.append(helper.make_node("DequantizeLinear", inputs, [final], name=alloc.new(f"{output}_dequant"),
                                      axis=axis, block_size=block_size))  # fmt: skip
        if final != output:
            nodes.append(helper.make_node("Cast", [final], [output], name=alloc.new(f"{output}_to_type"), to=ref.dtype))
        return nodes

    return build


register(
    MethodSpec(
        name="weights-int4",
        transformers_js="q4",  # its file in a transformers.js folder: model_q4.onnx
        title="Weights-only 4-bit",
        summary="Stores large float weights as 4-bit codes in blocks of 32-128 values with a scale each "
        "(about 7x smaller); compute stays float at the original speed.",
        options_type=WeightsInt4Options,
        apply=apply,
        candidates=candidates,
        position=3,
        approximate=approximate,
        bytes_per_value=0.5625,  # 4 bits + a 16-bit scale per block of 32
        uses_context=True,  # activation-aware scales and GPTQ are calibrated on the run's inputs
        prepare=prepare,
        parity_hint="Leave the tensors that move the outputs most in higher precision (exclude them); with two or "
        "more samples of your own its rounding is calibrated on them (GPTQ), which measured far closer than "
        "without.",
        alternatives=("weights-int8",),
        alternatives_why="",
    )
)

"""gzip -9 sizes of large files estimated from sampled blocks, with a 95% interval.

Why: gzip -9 runs at 15-35 MB/s on weights (brotli q6 at 100-200 MB/s), so the exact sizes of a 1 GB model
and two of its variants took ~70 s of CPU, more than shrinking, parity and latency together (issue 28).
Deflate's window is 32 KiB, so a file's gzip size is the sum of its 256 KiB blocks, each deflated with the
32 KiB before it as its preset dictionary (the history the stream has there), to within 90 bytes a block
(deflated alone, a block of 4-bit codes came out 0.05% larger). Brotli is never estimated so: its window
reaches 16 MiB, and blocks alone came out 2-7% larger than the stream on a palettized model; quality 6, which
files this large get, is quick enough to run whole.

One block of :data:`BLOCK` bytes is taken at random in each of 32 equal strata across the file (every tensor
in proportion to its bytes) and deflated; their ratio to each block's order-0 entropy (byte histograms of the
whole file, 1-2 s a GB) scales the file's entropy to its gzip size. The 95% interval pairs neighbouring strata
(normal approximation, finite-population corrected) and adds what each block's fresh start may cost. The
strata double, keeping the blocks taken, until the interval is within :data:`MARGIN` of the estimate; when
that would deflate more than half of the file, the whole file is compressed and the number is exact. The
blocks are drawn from a generator seeded by the file's length: the same file always gives the same number.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: Bytes per sampled block (8 deflate windows): small blocks, many strata, little deflated.
BLOCK = 256 << 10
#: Bytes of the pieces whose byte histograms give a block's entropy size.
PIECE = 64 << 10
#: Files larger than this are estimated (32 MiB: its exact gzip -9 costs 1-2 s of CPU; a 100 MB model's
#: compare spent 18 s of CPU on exact gzip -9 of the original and five variants).
SAMPLE_ABOVE = 32 << 20
#: Strata of the first round; each further round doubles them.
FIRST_STRATA = 32
#: Bytes a block's fresh start may add or save against the stream (its own Huffman tables, a deflate block
#: cut short), counted into the interval for every block of the file: measured -87 to +24 a 256 KiB block
#: on float32, float16, int8 and palettized weights (-63 to +33 a 1 MiB block, with 4-bit codes and zeros).
RESTART_BYTES = 160
#: The 95% interval the sampling stops at, relative to the estimate.
MARGIN = 0.005
#: The two-sided 95% normal quantile.
Z95 = 1.959964


@dataclass(frozen=True)
class Estimate:
    """Compressed bytes of ``raw`` bytes of files: ``margin`` is the 95% half-width (0 when every byte was
    compressed) and ``covered`` the raw bytes that were compressed to get it."""

    bytes: int
    raw: int
    margin: int = 0
    covered: int | None = None  # None: all of them
    #: the part of ``margin`` that bounds a bias of one sign (the blocks' fresh starts): it adds up across
    #: files, where the sampling error adds in quadrature
    bias: int = 0

    @property
    def share(self) -> float:
        """The part of the raw bytes that were compressed."""
        return 1.0 if self.covered is None or not self.raw else self.covered / self.raw

    def __add__(self, other: Estimate) -> Estimate:
        """Files served apart: bytes add, sampling errors add in quadrature, bias bounds add up."""
        covered = None if self.covered is None and other.covered is None else (
            (self.raw if self.covered is None else self.covered) + (other.raw if other.covered is None else other.covered))
        sampling = math.hypot(self.margin - self.bias, other.margin - other.bias)
        bias = self.bias + other.bias
        return Estimate(self.bytes + other.bytes, self.raw + other.raw, math.ceil(sampling) + bias, covered, bias)


def strata_bounds(blocks: int, strata: int) -> list[tuple[int, int]]:
    """``strata`` parts of ``blocks`` whole blocks as (first, end) ranges; doubling the strata splits each part
    in two at the same boundaries, so a round keeps the blocks of the round before."""
    return [(s * blocks // strata, (s + 1) * blocks // strata) for s in range(strata)]


def entropy_sizes(path: Path | str, blocks: int, tick: Callable[[], None] = lambda: None) -> np.ndarray:
    """Per whole block, the bytes an order-0 coder would need for it, summed over its 64 KiB pieces: cheap
    (1-2 s a GB) and close to deflate's size (both see zero runs and narrow codes), so it carries the structure
    the sampled blocks cannot see to the estimate. ``tick`` is called once a block (it may raise to stop)."""
    out = np.empty(blocks)
    pieces = max(1, BLOCK // PIECE)
    offsets = (np.arange(pieces, dtype=np.int32) * 256)[:, None]
    with open(path, "rb") as fh:
        for index in range(blocks):
            tick()
            codes = np.frombuffer(fh.read(BLOCK), np.uint8).reshape(pieces, -1).astype(np.int32) + offsets
            counts = np.bincount(codes.ravel(), minlength=256 * pieces).reshape(pieces, 256)
            p = counts / counts.sum(axis=1, keepdims=True)
            out[index] = -(counts * np.log2(np.where(counts > 0, p, 1.0))).sum() / 8
    return out


def sampled_size(
    path: Path | str,
    compress_block: Callable[[bytes, bytes], int],
    exact: Callable[[Path], int],
    *,
    context: int = 0,
    overhead: int = 0,
    margin: float = MARGIN,
    tick: Callable[[], None] = lambda: None,
) -> Estimate:
    """Compressed bytes of the file at ``path``, estimated from blocks ``compress_block`` measures alone.

    One block at random in each stratum (seeded by the file's length: the same file, the same blocks), the
    strata doubled until the 95% interval is narrow enough: a stratified sample, so structure that repeats
    along the file (a model's layers) cannot alias with the sampling step. The sampled blocks give the ratio
    of compressed bytes to :func:`entropy_sizes` (known for every block), and that ratio times the file's
    entropy total is the estimate (a ratio estimator: a few compressible blocks the sample misses still count).
    The interval pairs neighbouring strata (the collapsed-strata estimator on the ratio's residuals), which
    errs wide. ``compress_block(block, before)`` gets the ``context`` bytes that precede the block in the file
    (a compressor's window, given as its history). ``overhead``: bytes the whole stream adds once (gzip's
    header and trailer). ``exact`` measures the whole file; it is used when sampling would compress more than
    half of it. Each may raise to stop part-way (``tick`` is called once a block of the entropy pass).
    """
    path = Path(path)
    size = path.stat().st_size
    whole, tail = divmod(size, BLOCK)
    rng = random.Random(size)
    chosen: list[int] = []  # one block per stratum of the current round
    strata = FIRST_STRATA // 2
    measured: dict[int, int] = {}
    entropy = entropy_sizes(path, whole, tick)
    with open(path, "rb") as fh:

        def block(index: int, length: int = BLOCK) -> int:
            if index not in measured:
                start = max(0, index * BLOCK - context)
                fh.seek(start)
                before = fh.read(index * BLOCK - start)
                measured[index] = compress_block(fh.read(length), before)
            return measured[index]

        tail_bytes = block(whole, tail) if tail else 0
        while True:
            strata *= 2
            if strata * 2 > whole:  # about as dear as the exact number: take that
                return Estimate(exact(path), size)
            bounds = strata_bounds(whole, strata)
            kept = {first: b for b in chosen for first, end in bounds if first <= b < end}
            chosen = [kept[first] if first in kept else rng.randrange(first, end) for first, end in bounds]
            counts = np.array([end - first for first, end in bounds], float)
            y = np.array([block(b) for b in chosen], float)
            x = entropy[chosen]
            sampled_x = float(counts @ x)
            ratio = float(counts @ y) / sampled_x if sampled_x > 0 else 0.0
            residual = y - ratio * x if sampled_x > 0 else y
            estimate = (ratio * float(entropy.sum()) if sampled_x > 0 else float(counts @ y)) + tail_bytes + overhead
            # each pair of neighbours: (n_a^2 + n_b^2) / 2 * (d_a - d_b)^2, the (t_a - t_b)^2 of equal strata
            pairs = float(((counts[::2] ** 2 + counts[1::2] ** 2) / 2 * (residual[::2] - residual[1::2]) ** 2).sum())
            bias = RESTART_BYTES * whole
            half = Z95 * math.sqrt(pairs * (1 - strata / whole)) + bias
            if half <= margin * estimate:
                covered = (len(measured) - (1 if tail else 0)) * BLOCK + tail  # the tail block is the tail's bytes
                return Estimate(round(estimate), size, math.ceil(half), covered, bias)

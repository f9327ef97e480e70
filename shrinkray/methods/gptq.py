"""Error-compensating 4-bit rounding (GPTQ, Frantar et al. 2022) with numpy only.

Round-to-nearest treats every weight alone. A MatMul/Gemm weight ``W`` ``[rows, K]`` (output
channels x the reduction axis) is used as ``X @ W.T``, so what matters is the output error
``|X (W - Q).T|^2 = sum_r (w_r - q_r) H (w_r - q_r).T`` with ``H = X.T X`` measured on
calibration inputs. GPTQ quantizes the K columns in order; each column's rounding error is
spread over the columns not yet quantized, weighted through the upper Cholesky factor of
``H^-1``, so later columns absorb what earlier ones lost. Columns are handled in lazy batches
of :data:`LAZY_COLUMNS` (the rest of the matrix is updated once per batch with one matrix
product). Block scales and zero points (blocks of 32-128 along K, as :mod:`shrinkray.methods.blockquant`
stores them) are chosen from the updated values when the block's first column is reached.

Values kept exactly (outliers) are never rounded, so they contribute no error, and their stored
value is the updated one (they absorb error too).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterable

import numpy as np

from shrinkray.methods.blockquant import BlockCodes, _minmax_params, scale_rounder

#: Damping added to H's diagonal, as a share of its mean diagonal. The paper's 1% fits hundreds of
#: thousands of calibration tokens; with the few hundred to few thousand a user gives, 10% generalised
#: better to other inputs (hidden cosine 0.98929 -> 0.99003 generated, 0.98495 -> 0.98723 MiniLM;
#: 5% / 20% / 40% on MiniLM: 0.98693 / 0.98741 / 0.98709).
DAMP = 0.1
#: Columns per lazy batch: the rest of the matrix is updated once per batch.
LAZY_COLUMNS = 128


def feedback(h: np.ndarray, damp: float = DAMP) -> np.ndarray:
    """GPTQ's error feedback ``F`` (float64, strictly upper triangular): column ``k`` is rounded from
    ``w_k + sum_{i<k} (w_i - q_i) F[i, k]``.

    With ``H + damp * mean(diag H) * I = R R.T`` (``R`` upper triangular: the Cholesky factor of H with
    its axes reversed), ``F = R diag(R)^-1 - I`` (QuIP's LDLQ form, equal to GPTQ's updates through the
    Cholesky factor of ``H^-1`` but needing one factorisation and no inverse). Channels never active
    in calibration (zero diagonal) pass no error on and receive none. The damping doubles until the
    factorisation succeeds.
    """
    h = np.array(h, dtype=np.float64)
    k = h.shape[0]
    dead = ~(np.diagonal(h) > 0)
    h[dead, :] = 0.0
    h[:, dead] = 0.0
    h[dead, dead] = 1.0
    mean = float(np.mean(np.diagonal(h))) if k else 1.0
    step = max(damp, 1e-6) * (mean if mean > 0 and math.isfinite(mean) else 1.0)
    flipped = h[::-1, ::-1]
    for _ in range(12):
        try:
            lower = cholesky(flipped + step * np.eye(k))
        except np.linalg.LinAlgError:
            step *= 2.0
            continue
        r = lower[::-1, ::-1]  # upper: H + step I = R R.T
        f = r / np.diagonal(r)[None, :]
        np.fill_diagonal(f, 0.0)
        return f
    return np.zeros((k, k))  # not reachable for a finite symmetric H: round to nearest


_FEEDBACK: dict[int, tuple[np.ndarray, np.ndarray]] = {}
_FEEDBACK_LOCK = threading.Lock()


def feedback_of(gram: np.ndarray) -> np.ndarray:
    """:func:`feedback` as float32, computed once per matrix object while it lives (weights fed by the same
    activation share one second-moment matrix: a layer's query, key and value)."""
    key = id(gram)
    with _FEEDBACK_LOCK:
        hit = _FEEDBACK.get(key)
        if hit is not None and hit[0] is gram:
            return hit[1]
        f = feedback(gram).astype(np.float32)
        if len(_FEEDBACK) >= 4:
            _FEEDBACK.pop(next(iter(_FEEDBACK)))
        _FEEDBACK[key] = (gram, f)
        return f


def forget_feedback(grams: Iterable[np.ndarray]) -> None:
    """Drop the cached feedback of these second-moment matrices (a method's run is over): the cache would
    otherwise keep up to four K x K matrices and their feedback alive for the rest of the process."""
    with _FEEDBACK_LOCK:
        for gram in grams:
            hit = _FEEDBACK.get(id(gram))
            if hit is not None and hit[0] is gram:
                del _FEEDBACK[id(gram)]


_BLAS_NAMES = ("scipy_openblas_{}_num_threads64_", "scipy_openblas_{}_num_threads", "openblas_{}_num_threads64_",
               "openblas_{}_num_threads")  # fmt: skip
_BLAS_LOCK = threading.Lock()
_BLAS_USERS = [0, 0]  # callers inside single_blas_thread, threads to restore


def _openblas():
    """(get, set) of the OpenBLAS that numpy loaded, or None (another BLAS, or not found)."""
    import ctypes

    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "openblas" in line.lower() and ".so" in line})
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _BLAS_NAMES:
            get, put = name.format("get"), name.format("set")
            if hasattr(lib, get) and hasattr(lib, put):
                return getattr(lib, get), getattr(lib, put)
    return None


@contextlib.contextmanager
def single_blas_thread():
    """numpy's OpenBLAS on one thread inside the block (process-wide; nesting and threads are counted).

    GPTQ makes many small matrix products and factorisations; each parallel OpenBLAS call wakes its
    threads, and on this 2-core machine under load that made weights-int4 with GPTQ take 67 s instead
    of 34 s (the tensors already run on one worker thread per core). Does nothing when numpy uses
    another BLAS.
    """
    funcs = _openblas()
    if funcs is None:
        yield
        return
    get, put = funcs
    with _BLAS_LOCK:
        if _BLAS_USERS[0] == 0:
            _BLAS_USERS[1] = int(get())
            put(1)
        _BLAS_USERS[0] += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS_USERS[0] -= 1
            if _BLAS_USERS[0] == 0:
                put(max(1, _BLAS_USERS[1]))


#: Panel width of :func:`cholesky`.
PANEL = 64


def cholesky(a: np.ndarray) -> np.ndarray:
    """Lower Cholesky factor of a symmetric positive definite matrix, by panels of :data:`PANEL`.

    Only small factorisations go to LAPACK; the rest is matrix products. On this 2-core machine under
    load, numpy's multi-threaded LAPACK took 0.6 s for a 512 x 512 factorisation that takes 0.025 s on
    one thread (matrix products do not suffer so). Raises LinAlgError when ``a`` is not positive definite.
    """
    a = np.array(a, dtype=np.float64)
    n = a.shape[0]
    lower = np.zeros_like(a)
    for j in range(0, n, PANEL):
        e = min(j + PANEL, n)
        l11 = np.linalg.cholesky(a[j:e, j:e])
        lower[j:e, j:e] = l11
        if e < n:
            l21 = a[e:, j:e] @ np.linalg.inv(l11).T
            lower[e:, j:e] = l21
            a[e:, e:] -= l21 @ l21.T
    return lower


def quantize_gptq(
    x2d: np.ndarray,
    feedback_matrix: np.ndarray,
    block_size: int,
    *,
    symmetric: bool = False,
    scale_of: Callable[[np.ndarray], np.ndarray] | None = None,
    exact: np.ndarray | None = None,
    params: Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]] | None = None,
) -> tuple[BlockCodes, np.ndarray]:
    """GPTQ block codes of a finite ``[rows, K]`` array, and the final values at the ``exact`` positions.

    ``feedback_matrix`` comes from :func:`feedback` (``K x K``). ``scale_of`` rounds raw scales to what
    is stored (:func:`shrinkray.methods.blockquant.scale_rounder`; plain float32 by default). ``exact`` (boolean
    ``[rows, K]``, optional) marks values kept exactly beside the blocks; they are left out of their
    block's scale and returned (with the error fed onto them) as float32 in row-major order.
    """
    w = np.asarray(x2d, dtype=np.float32)
    rows, length = w.shape
    if feedback_matrix.shape != (length, length):
        raise ValueError("feedback_matrix must be K x K for a [rows, K] weight")
    f = np.asarray(feedback_matrix, dtype=np.float32)
    scale_of = scale_of or scale_rounder(w[:1, :1].reshape(1, 1, 1), symmetric, np.float32)  # as quantize_blocks
    blocks = max(1, math.ceil(length / block_size))
    codes = np.empty((rows, blocks, block_size), dtype=np.uint8)
    scales = np.empty((rows, blocks), dtype=np.float32)
    zeros = np.empty((rows, blocks), dtype=np.uint8)
    keep = np.asarray(exact, dtype=bool) if exact is not None else None
    kept = np.zeros((rows, length), dtype=np.float32) if keep is not None else None
    lazy = max(block_size, (LAZY_COLUMNS // block_size) * block_size)
    pending = np.zeros((rows, length), dtype=np.float32)  # feedback received from earlier batches
    for start in range(0, length, lazy):
        stop = min(start + lazy, length)
        part = w[:, start:stop] + pending[:, start:stop]  # the values to round, updated as columns are done
        err = np.empty((rows, stop - start), dtype=np.float32)  # original - decoded
        for first in range(start, stop, block_size):
            b = first // block_size
            last = min(first + block_size, stop)
            i0 = first - start
            if params is not None:
                s, z = params(part[:, i0 : i0 + block_size], first)
            else:
                s, z = _block_params(part[:, i0 : i0 + block_size], keep, first, block_size, symmetric, scale_of)
            scales[:, b], zeros[:, b] = s, z
            if first + block_size > length:  # a short last block: its padding decodes to zero
                codes[:, b, length - first :] = z[:, None]
            z = z.astype(np.float32)
            inv_s = np.float32(1.0) / s
            for col in range(first, last):
                i = col - start
                v = part[:, i]
                q = np.rint(v * inv_s)
                q += z
                np.clip(q, 0.0, 15.0, out=q)
                codes[:, b, col - first] = q
                deq = (q - z) * s
                if keep is not None:
                    deq = np.where(keep[:, col], v, deq)
                    kept[:, col] = v
                e = w[:, col] - deq
                err[:, i] = e
                if col + 1 < last:  # within the block, column by column
                    part[:, i + 1 : last - start] += e[:, None] * f[col, col + 1 : last]
            if last < stop:  # the rest of the batch, once per block
                part[:, last - start :] += err[:, i0 : last - start] @ f[first:last, last:stop]
        if stop < length:  # the rest of the matrix, once per batch
            pending[:, stop:] += err @ f[start:stop, stop:]
    values = kept[keep] if keep is not None else np.zeros(0, dtype=np.float32)
    return BlockCodes(codes=codes, scale=scales, zero_point=zeros, length=length, symmetric=symmetric), values


def _block_params(values, keep, col, block_size, symmetric, scale_of):
    """Scale and zero point of one block from its current values (exact positions left out)."""
    if keep is not None:
        values = np.where(keep[:, col : col + block_size], 0.0, values)
    raw, zero = _minmax_params(values, symmetric)
    safe = np.where(raw > 0, raw, 1.0)
    return scale_of(safe).astype(np.float32), zero.astype(np.uint8)


def output_error(x: np.ndarray, w: np.ndarray, approx: np.ndarray) -> float:
    """``|X W.T - X approx.T|_F^2``: what GPTQ minimises (rows of ``w`` are output channels)."""
    d = np.asarray(x, dtype=np.float64) @ (np.asarray(w, dtype=np.float64) - approx).T
    return float(np.sum(d * d))

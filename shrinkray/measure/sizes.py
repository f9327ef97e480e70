"""Download sizes: raw bytes, gzip -9, brotli (and zstd), as a server would deliver them.

These numbers feed the pricing calculator, so they are exactly what Python's
``gzip`` (level 9, mtime 0), the ``brotli`` package (streamed and flushed every
4 MiB of input, as a server streams a file: :data:`BROTLI_FLUSH_BYTES`) and
(optional) the ``zstandard`` package produce.

**Delivered size rule.** A server that can send brotli also sends gzip, and
would send whichever file is smaller. Brotli below quality 10 can come out
*larger* than gzip -9 on float weights (an 11.6 MiB detector: q6 10.66 MiB vs
gzip 10.08 MiB). So ``Sizes.brotli`` (and ``Sizes.zstd``) is the smaller of
that encoder's output and gzip -9's, and ``brotli_encoding`` says which one
a server sends ("br" or "gzip"); ``brotli_encoded`` keeps the encoder's own
byte count. The "brotli" price is therefore never worse than gzip's.

**Quality within a time budget.** Brotli quality 10-11 is 15-25% smaller
than 9 on palettized or quantized weights but runs at only 0.1-0.8 MB/s.
``quality="auto"`` plans every compression of one measurement (gzip, brotli,
zstd; largest first, spread over the usable cores) with the planning speeds
below and takes the best quality from :data:`BROTLI_LADDER` whose predicted
wall time fits ``budget_s``; one quality serves all files measured together,
so savings compare like with like. The window (``lgwin``) follows each
file's size: 2^22 up to 4 MiB, up to 2^24 (16 MiB, brotli's streaming
maximum) above, so repeats far apart (a tied embedding stored twice) are
found. The plan is deterministic: the same files on the same number of
cores always get the same quality, and the quality is recorded next to the number.
"""

from __future__ import annotations

import functools
import gzip
import heapq
import math
import operator
import os
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import brotli

from shrinkray.cores import usable_cores
from shrinkray.errors import OptionError
from shrinkray.measure.sampled_sizes import BLOCK, SAMPLE_ABOVE, Estimate, sampled_size

GZIP_LEVEL = 9
#: Bytes deflate looks back (zlib's 32 KiB window).
DEFLATE_WINDOW = 1 << zlib.MAX_WBITS
DELIVERIES = ("raw", "gzip", "brotli", "zstd")
#: Seconds (wall clock) the compressions of one measurement are planned to fit in with quality "auto".
BUDGET_S = 4.0  # a person waits for this: q10-11 only where it is quick (files up to ~1 MB)
#: Brotli qualities "auto" chooses from, best first; 9 is at most 2.5% smaller than 6 on weights for
#: 3-10x its time, 10 and 11 are where the large gains are (bench figures in the module docstring).
#: Not 5: 2.5x faster than 6 on a palettized 101 MB model, but it missed a 5 MiB block stored twice
#: (a tied embedding written twice) that 4 and 6 find with the same window.
BROTLI_LADDER = (11, 10, 9, 6)
#: The quality "auto" falls back to when nothing better fits (fast: 4-50 MB/s).
AUTO_LARGE_QUALITY = BROTLI_LADDER[-1]
#: Planning speeds in bytes per second on one core: the slowest seen on weight data (float, palettized,
#: int8; 0.15-12 MB models) on a loaded 2-core machine, so plans err towards finishing early.
BROTLI_SPEED = {11: 0.12e6, 10: 0.2e6, 9: 0.5e6, 8: 1.0e6, 7: 1.5e6, 6: 4e6}
GZIP_SPEED = 4e6
#: zstd levels "auto" chooses from, best first, and their planning speeds (bytes/s, one core).
ZSTD_LADDER = (19, 15, 9, 3)
ZSTD_SPEED = {19: 0.8e6, 15: 2e6, 9: 10e6, 3: 60e6}
#: Brotli window bounds: 2^22 is the package's default, 2^24 the largest a streaming decoder must accept.
MIN_LGWIN, MAX_LGWIN = 22, 24
#: Input bytes between brotli flushes. A flush ends a metablock (the window carries over); without it an
#: encoder at quality 5-9 holds the commands of a window-sized metablock: +120 MB on a palettized 101 MB model
#: at window 2^24, +48 MB flushed every 4 MiB, same CPU time, sizes within 0.02% (the palettized one smaller).
#: Files up to 4 MiB are one metablock as before (issue 12, measured 2026-11-27).
BROTLI_FLUSH_BYTES = 4 << 20
#: Browsers decode zstd Content-Encoding with windows up to 8 MiB (RFC 8878): levels above 19 are capped.
ZSTD_MAX_WINDOW_LOG = 23


def _largest_with_q11() -> int:
    """The largest single file (one core, its gzip run beside it) whose quality-11 plan fits the budget."""
    return int(BUDGET_S / (1 / BROTLI_SPEED[11] + 1 / GZIP_SPEED))


#: The largest lone file that "auto" compresses at quality 11 on one core (more cores: larger).
AUTO_Q11_LIMIT = _largest_with_q11()


@dataclass(frozen=True)
class Sizes:
    """Byte counts of one file, raw and as delivered compressed.

    ``brotli`` and ``zstd`` are the bytes a server sends to a client that accepts
    them: the smaller of that encoder's output and gzip -9's, with
    ``brotli_encoding`` / ``zstd_encoding`` naming what is sent ("br", "zstd" or
    "gzip"); ``brotli_encoded`` / ``zstd_encoded`` are the encoders' own sizes.
    """

    raw: int
    gzip: int
    brotli: int
    brotli_quality: int
    gzip_level: int = GZIP_LEVEL
    zstd: int | None = None
    zstd_level: int | None = None
    brotli_window: int = MIN_LGWIN
    brotli_encoded: int | None = None
    brotli_encoding: str = "br"
    zstd_encoded: int | None = None
    zstd_encoding: str | None = None
    #: gzip of a file over 32 MiB is estimated from sampled blocks (sampled_sizes.py): its 95% half-width in
    #: bytes (0: every byte compressed) and the share of the raw bytes that were compressed for it
    gzip_margin: int = 0
    gzip_share: float = 1.0

    def get(self, delivery: str) -> int:
        """Bytes served for a delivery mode: raw, gzip, brotli (or zstd)."""
        value = getattr(self, delivery, None) if delivery in DELIVERIES else None
        if not isinstance(value, int):
            raise OptionError(f"Unknown or unmeasured delivery '{delivery}'", "Use raw, gzip or brotli")
        return value

    def encoding(self, delivery: str) -> str:
        """The Content-Encoding a server sends for a delivery mode: identity, gzip, br or zstd."""
        self.get(delivery)
        return {"raw": "identity", "gzip": "gzip", "brotli": self.brotli_encoding,
                "zstd": self.zstd_encoding or "zstd"}[delivery]  # fmt: skip

    def margin(self, delivery: str) -> int:
        """The 95% half-width of a delivery's bytes: 0 unless gzip -9 was estimated and is what it sends."""
        return self.gzip_margin if self.encoding(delivery) == "gzip" else 0

    def method(self, delivery: str) -> str:
        """How the number was obtained, for labels: 'brotli q11', 'gzip -9 (smaller than brotli q6)',
        'gzip -9, estimated from 4% of the bytes: ±0.03% (95%)'."""
        encoding = self.encoding(delivery)
        if delivery == "raw":
            return "raw bytes"
        estimated = (f", estimated from {share_words(self.gzip_share)} of the bytes: ±{self.gzip_margin / self.gzip:.2%} "
                     "(95%)" if self.margin(delivery) else "")  # fmt: skip
        if delivery == "gzip":
            return f"gzip -{self.gzip_level}{estimated}"
        own = f"brotli q{self.brotli_quality}" if delivery == "brotli" else f"zstd -{self.zstd_level}"
        return f"gzip -{self.gzip_level} (smaller than {own}){estimated}" if encoding == "gzip" else own

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _check_quality(quality: int | str) -> int:
    try:
        if isinstance(quality, bool) or (isinstance(quality, float) and not quality.is_integer()):
            raise ValueError(quality)
        value = int(quality)
    except (TypeError, ValueError):
        raise OptionError(f"--brotli-quality must be 0-11 or auto, not {quality!r}", "Use e.g. 11 or 9") from None
    if not 0 <= value <= 11:
        raise OptionError(f"--brotli-quality must be between 0 and 11, not {value}", "Use e.g. 11 or 9")
    return value


def check_zstd_level(level: int | str | None) -> int | str | None:
    if level is None or level == "auto":
        return level
    try:
        if isinstance(level, bool) or (isinstance(level, float) and not level.is_integer()):
            raise ValueError(level)
        value = int(level)
    except (TypeError, ValueError):
        raise OptionError(f"--zstd must be a level 1-22 or auto, not {level!r}", "Use e.g. --zstd 19") from None
    if not 1 <= value <= 22:
        raise OptionError(f"--zstd level must be between 1 and 22, not {value}", "Use e.g. --zstd 19")
    return value


def combined(parts: Sequence[Sizes]) -> Sizes:
    """Several files a page downloads together, each served as a server chooses for it (brotli or gzip, the
    smaller): bytes summed, the served encoding "br" only when every file is sent so; estimated gzip margins
    add up (conservative)."""
    raw = sum(p.raw for p in parts)
    return Sizes(
        raw=raw, gzip=sum(p.gzip for p in parts), brotli=sum(p.brotli for p in parts),
        brotli_quality=parts[0].brotli_quality, brotli_window=max(p.brotli_window for p in parts),
        brotli_encoded=sum(p.brotli_encoded or p.brotli for p in parts),
        brotli_encoding="br" if all(p.brotli_encoding == "br" for p in parts) else "gzip",
        gzip_margin=sum(p.gzip_margin for p in parts),
        gzip_share=round(sum(p.gzip_share * p.raw for p in parts) / raw, 4) if raw else 1.0,
    )  # fmt: skip


def share_words(share: float) -> str:
    """A share of the bytes as a percentage that never reads 0%: '0.4%', '7.2%', '34%'."""
    return f"{share:.0%}" if share >= 0.1 else f"{share:.1%}" if share >= 0.001 else "under 0.1%"


def estimated_note(measured: Iterable[Sizes | None]) -> str:
    """One sentence when some gzip -9 sizes were estimated (files over 32 MiB), else ""."""
    estimated = [s for s in measured if s is not None and s.gzip_margin]
    if not estimated:
        return ""
    low, high = min(s.gzip_share for s in estimated), max(s.gzip_share for s in estimated)
    worst = max(s.gzip_margin / s.gzip for s in estimated)
    share = share_words(low) if share_words(low) == share_words(high) else f"{share_words(low)}-{share_words(high)}"
    return (f"gzip -9 sizes of files over {SAMPLE_ABOVE >> 20} MiB are estimated from {BLOCK >> 10} KiB blocks sampled across "
            f"each file ({share} of the bytes compressed): within ±{worst:.2%} with 95% confidence; brotli is exact")


def brotli_window(size: int) -> int:
    """``lgwin`` for a file of ``size`` bytes: just covers the file, between 2^22 and 2^24."""
    return min(MAX_LGWIN, max(MIN_LGWIN, math.ceil(math.log2(max(size, 1)))))


def _brotli_speed(quality: int) -> float:
    return BROTLI_SPEED.get(quality, BROTLI_SPEED[6] if quality < 6 else BROTLI_SPEED[11])


def _zstd_speed(level: int) -> float:
    return next((ZSTD_SPEED[lv] for lv in sorted(ZSTD_SPEED) if level <= lv), ZSTD_SPEED[19] / 4)


def makespan(costs: list[float], workers: int) -> float:
    """Wall time of jobs started largest first, each on the first free worker (the pool's own order)."""
    loads = [0.0] * max(1, workers)
    for cost in sorted(costs, reverse=True):
        heapq.heapreplace(loads, loads[0] + cost)
    return max(loads)


def plan(
    sizes: list[int],
    brotli_quality: int | str = "auto",
    zstd_level: int | str | None = None,
    *,
    budget_s: float = BUDGET_S,
    workers: int = 1,
) -> tuple[int, int | None]:
    """(brotli quality, zstd level) for compressing files of these sizes together within ``budget_s``.

    Brotli is planned first (gzip always runs beside it); zstd "auto" then gets
    the best level that still fits. When nothing fits, the fastest rung is used.
    """
    zstd_level = check_zstd_level(zstd_level)
    gzip_costs = [n / GZIP_SPEED for n in sizes]
    zstd_floor = [n / _zstd_speed(ZSTD_LADDER[-1] if zstd_level == "auto" else zstd_level) for n in sizes] \
        if zstd_level is not None else []  # fmt: skip
    if brotli_quality == "auto":
        quality = next(
            (q for q in BROTLI_LADDER
             if makespan(gzip_costs + zstd_floor + [n / _brotli_speed(q) for n in sizes], workers) <= budget_s),
            BROTLI_LADDER[-1],
        )  # fmt: skip
    else:
        quality = _check_quality(brotli_quality)
    level = zstd_level
    if zstd_level == "auto":
        brotli_costs = [n / _brotli_speed(quality) for n in sizes]
        level = next(
            (lv for lv in ZSTD_LADDER
             if makespan(gzip_costs + brotli_costs + [n / _zstd_speed(lv) for n in sizes], workers) <= budget_s),
            ZSTD_LADDER[-1],
        )  # fmt: skip
    return quality, level


def resolve_brotli_quality(quality: int | str, size: int, *, budget_s: float = BUDGET_S, workers: int = 1) -> int:
    """The quality used for one file of ``size`` bytes (``"auto"``: the best that fits the budget)."""
    return plan([size], quality, budget_s=budget_s, workers=workers)[0]


def gzip_size(data: bytes) -> int:
    return len(gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0))


def brotli_size(data: bytes, quality: int, lgwin: int | None = None) -> int:
    """Bytes of :func:`brotli_stream` (``len(brotli.compress(...))`` up to 4 MiB); the window follows the size
    unless given."""
    return sum(map(len, brotli_stream(data, quality, lgwin)))


def _zstandard():
    try:
        import zstandard
    except ImportError:
        raise OptionError("zstd sizes need the zstandard package", "pip install zstandard") from None
    return zstandard


def zstd_size(data: bytes, level: int) -> int:
    """Bytes of ``zstandard.ZstdCompressor(level=level)``; levels above 19 keep an 8 MiB window."""
    zstandard = _zstandard()
    if level <= 19:
        return len(zstandard.ZstdCompressor(level=level).compress(data))
    params = zstandard.ZstdCompressionParameters.from_level(level, window_log=ZSTD_MAX_WINDOW_LOG)
    return len(zstandard.ZstdCompressor(compression_params=params).compress(data))


def measure_sizes(
    data: bytes,
    *,
    brotli_quality: int | str = "auto",
    zstd_level: int | str | None = None,
    budget_s: float = BUDGET_S,
    workers: int | None = None,
) -> Sizes:
    """Sizes of one blob (gzip and brotli run side by side when there are cores for it)."""
    return measure_many(
        {"_": data}, brotli_quality=brotli_quality, zstd_level=zstd_level, budget_s=budget_s, workers=workers
    )["_"]


def measure_many(
    blobs: dict[str, bytes],
    *,
    brotli_quality: int | str = "auto",
    zstd_level: int | str | None = None,
    budget_s: float = BUDGET_S,
    workers: int | None = None,
) -> dict[str, Sizes]:
    """Sizes of several blobs, compressing in parallel threads (zlib, brotli and zstd release the GIL).

    One brotli quality (and zstd level) serves all blobs, planned from all their
    sizes (see :func:`plan`); jobs start largest predicted first so slow brotli runs overlap.
    """
    workers = workers or usable_cores()
    quality, level = plan([len(v) for v in blobs.values()], brotli_quality, zstd_level, budget_s=budget_s,
                          workers=workers)  # fmt: skip
    if level is not None:
        _zstandard()  # fail before any work
    jobs: list[tuple[float, str, str, Any]] = []
    for key, data in blobs.items():
        n = len(data)
        jobs.append((n / _brotli_speed(quality), key, "brotli", lambda d=data: brotli_size(d, quality)))
        jobs.append((n / GZIP_SPEED, key, "gzip", lambda d=data: gzip_size(d)))
        if level is not None:
            jobs.append((n / _zstd_speed(level), key, "zstd", lambda d=data: zstd_size(d, level)))
    jobs.sort(key=lambda job: -job[0])
    results: dict[tuple[str, str], int] = {}
    if workers == 1 or len(jobs) <= 1:
        results = {(key, kind): fn() for _, key, kind, fn in jobs}
    else:
        with ThreadPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
            futures = {(key, kind): pool.submit(fn) for _, key, kind, fn in jobs}
            results = {k: fut.result() for k, fut in futures.items()}
    out = {}
    for key, data in blobs.items():
        gz, br, zs = results[(key, "gzip")], results[(key, "brotli")], results.get((key, "zstd"))
        out[key] = Sizes(
            raw=len(data),
            gzip=gz,
            brotli=min(br, gz),
            brotli_quality=quality,
            zstd=None if zs is None else min(zs, gz),
            zstd_level=level if zs is not None else None,
            brotli_window=brotli_window(len(data)),
            brotli_encoded=br,
            brotli_encoding="br" if br <= gz else "gzip",
            zstd_encoded=zs,
            zstd_encoding=None if zs is None else ("zstd" if zs <= gz else "gzip"),
        )
    return out


# ---------------------------------------------------------------- files, compressed in the background

#: Bytes read and fed to a compressor at a time: memory stays flat whatever the file's size. Feeding
#: zlib and brotli in chunks gives byte-for-byte the output of one call on the whole file.
CHUNK = 4 << 20


class Abandoned(Exception):
    """A size measurement stopped part-way because its caller gave it up (:meth:`BackgroundSizes.abandon`)."""


def _chunks(source: bytes | Path, stop: threading.Event | None = None) -> Iterator[bytes | memoryview]:
    """The bytes of ``source`` in :data:`CHUNK` pieces; :class:`Abandoned` once ``stop`` is set."""

    def checked(chunk: bytes | memoryview) -> bytes | memoryview:
        _check(stop)
        return chunk

    if isinstance(source, (bytes, bytearray)):
        view = memoryview(source)
        for start in range(0, len(view), CHUNK):
            yield checked(view[start:start + CHUNK])
        return
    with open(source, "rb") as fh:
        while chunk := fh.read(CHUNK):
            yield checked(chunk)


def _length(source: bytes | Path) -> int:
    return len(source) if isinstance(source, (bytes, bytearray)) else os.path.getsize(source)


def gzip_stream_size(source: bytes | Path, stop: threading.Event | None = None) -> int:
    """``len(gzip.compress(data, 9, mtime=0))``, read in chunks: header 10 + raw deflate + trailer 8."""
    deflate = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    total = 10 + 8
    for chunk in _chunks(source, stop):
        total += len(deflate.compress(chunk))
    return total + len(deflate.flush())


def _check(stop: threading.Event | None) -> None:
    """:class:`Abandoned` once ``stop`` is set (the caller gave the measurement up)."""
    if stop is not None and stop.is_set():
        raise Abandoned


def _deflated(block: bytes, before: bytes, stop: threading.Event | None = None) -> int:
    """Raw deflate bytes of one block with the window before it as history (gzip's header and trailer not
    counted): what the block adds to the whole stream, to within its parser's restart."""
    _check(stop)
    deflate = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS, **({"zdict": before} if before else {}))
    return len(deflate.compress(block)) + len(deflate.flush())


def gzip_estimate(source: bytes | Path, stop: threading.Event | None = None) -> Estimate:
    """gzip -9 bytes of ``source``: exact up to :data:`~shrinkray.measure.sampled_sizes.SAMPLE_ABOVE`, above it
    estimated from sampled blocks with a 95% interval (sampled_sizes.py: 30x quicker on a 1 GB model)."""
    if isinstance(source, (bytes, bytearray)) or _length(source) <= SAMPLE_ABOVE:
        return Estimate(gzip_stream_size(source, stop), _length(source))
    return sampled_size(source, lambda block, before: _deflated(block, before, stop),
                        lambda path: gzip_stream_size(path, stop), context=DEFLATE_WINDOW, overhead=10 + 8,
                        tick=lambda: _check(stop))  # fmt: skip


def brotli_stream_size(source: bytes | Path, quality: int, lgwin: int | None = None,
                       stop: threading.Event | None = None) -> int:  # fmt: skip
    """:func:`brotli_size` of a file read in chunks (the same bytes)."""
    return sum(map(len, brotli_stream(source, quality, lgwin, stop)))


def brotli_stream(source: bytes | Path, quality: int, lgwin: int | None = None,
                  stop: threading.Event | None = None) -> Iterator[bytes]:  # fmt: skip
    """Brotli of ``source`` as a server streams it: flushed every :data:`BROTLI_FLUSH_BYTES` of input (the
    window carries over a flush, so repeats up to 2^lgwin apart are still found), whatever the chunking."""
    compressor = brotli.Compressor(quality=quality, lgwin=lgwin or brotli_window(_length(source)))
    pending = 0
    for chunk in _chunks(source, stop):
        view = memoryview(chunk)
        while len(view):
            take = min(len(view), BROTLI_FLUSH_BYTES - pending)
            yield compressor.process(bytes(view[:take]))
            pending, view = pending + take, view[take:]
            if pending == BROTLI_FLUSH_BYTES:
                yield compressor.flush()
                pending = 0
    yield compressor.finish()


def zstd_stream_size(source: bytes | Path, level: int, stop: threading.Event | None = None) -> int:
    """:func:`zstd_size` read in chunks."""
    zstandard = _zstandard()
    if level <= 19:
        compressor = zstandard.ZstdCompressor(level=level)
    else:
        params = zstandard.ZstdCompressionParameters.from_level(level, window_log=ZSTD_MAX_WINDOW_LOG)
        compressor = zstandard.ZstdCompressor(compression_params=params)
    stream = compressor.compressobj(size=_length(source))
    total = 0
    for chunk in _chunks(source, stop):
        total += len(stream.compress(bytes(chunk)))
    return total + len(stream.flush())


class BackgroundSizes:
    """Sizes of files measured in threads while the caller goes on (compare's next variant, its parity).

    The brotli quality (and zstd level) is planned once, before the files exist,
    from an upper bound of their sizes (:func:`plan`), so every file of a
    comparison is compressed alike. Files are read in chunks: a 100 MB model
    costs a few MB of memory to measure, not a copy. A model with external
    data is several files; its sizes are their sums (a server sends each).
    """

    def __init__(self, quality: int, zstd_level: int | None = None, workers: int | None = None) -> None:
        self.quality = quality
        self.zstd_level = zstd_level
        if zstd_level is not None:
            _zstandard()  # fail before any work
        self._pool = ThreadPoolExecutor(max_workers=workers or usable_cores(), thread_name_prefix="sizes")
        # Brotli of a file over 4 MiB (window 2^23-2^24) holds 50-120 MB while it runs: those run one at a time,
        # on a thread of their own, so two never stack on a shrink step (they are quick: q6 on weights runs at
        # 30-45 MB/s; gzip -9, at ~15 MB/s and a few hundred KB, is what takes the time).
        self._large = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sizes-large")
        self._jobs: dict[str, list[tuple[str, Future[int]]]] = {}
        self._raw: dict[str, tuple[int, int]] = {}  # key -> (raw bytes, brotli window)
        self._taken: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()

    @classmethod
    def planned(cls, upper_bounds: Sequence[int], brotli_quality: int | str = "auto",
                zstd_level: int | str | None = None, *, budget_s: float = BUDGET_S,
                workers: int | None = None) -> BackgroundSizes:  # fmt: skip
        """A pool whose quality fits files of at most these sizes in ``budget_s`` (see :func:`plan`)."""
        workers = workers or usable_cores()
        quality, level = plan(list(upper_bounds), brotli_quality, zstd_level, budget_s=budget_s, workers=workers)
        return cls(quality, level, workers)

    def submit(self, key: str, files: Sequence[bytes | Path]) -> None:
        """Start gzip, brotli (and zstd) of ``files`` (paths, or bytes that are not modified meanwhile)."""
        sources = [f if isinstance(f, (bytes, bytearray)) else Path(f) for f in files]
        raw = sum(_length(f) for f in sources)
        lgwin = brotli_window(max((_length(f) for f in sources), default=0))
        stop = self._stop
        kinds: list[tuple[str, Callable[[bytes | Path], Estimate]]] = [
            ("gzip", lambda f: gzip_estimate(f, stop)),
            ("brotli", lambda f: Estimate(brotli_stream_size(f, self.quality, lgwin, stop), _length(f))),
        ]
        if self.zstd_level is not None:
            kinds.append(("zstd", lambda f: Estimate(zstd_stream_size(f, self.zstd_level, stop), _length(f))))
        with self._lock:
            self._raw[key] = (raw, lgwin)
            self._jobs[key] = [(kind, self._pool_for(kind, lgwin).submit(_sum_of, fn, sources)) for kind, fn in kinds]

    def pending(self) -> set[str]:
        """Keys whose sizes are not known yet (and not given up)."""
        with self._lock:
            return {k for k, jobs in self._jobs.items() if k not in self._taken and not all(f.done() for _, f in jobs)}

    def finished(self) -> dict[str, Sizes]:
        """Sizes that became known since the last call (a compression error is raised here)."""
        with self._lock:
            ready = [k for k, jobs in self._jobs.items() if k not in self._taken and all(f.done() for _, f in jobs)]
            self._taken.update(ready)
        return {key: self._sizes(key) for key in ready}

    def wait_any(self, timeout: float | None = None) -> None:
        """Block until one more file is measured (or ``timeout``); returns at once when none is pending."""
        with self._lock:
            futures = [f for k, jobs in self._jobs.items() if k not in self._taken for _, f in jobs if not f.done()]
        if futures:
            wait(futures, timeout=timeout, return_when=FIRST_COMPLETED)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._large.shutdown(wait=True, cancel_futures=True)

    def abandon(self) -> set[str]:
        """Give up the sizes not known yet (a run's time limit is near): the compressions stop at their next
        chunk, and those not started never run. The keys given up; :meth:`finished` never returns them."""
        self._stop.set()
        with self._lock:
            dropped = {
                k for k, jobs in self._jobs.items() if k not in self._taken and not all(f.done() for _, f in jobs)
            }
            self._taken.update(dropped)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._large.shutdown(wait=False, cancel_futures=True)
        return dropped

    def settle_large(self, timeout: float | None = None) -> None:
        """Wait (at most ``timeout`` s) until no large-window brotli runs or waits: compare calls it before it
        loads the original for the next method, so the encoder's memory is not stacked on that step's."""
        with self._lock:
            large = [f for key, jobs in self._jobs.items() for kind, f in jobs
                     if _is_large(kind, self._raw[key][1]) and not f.done()]  # fmt: skip
        if large:
            wait(large, timeout=timeout)

    def _pool_for(self, kind: str, lgwin: int) -> ThreadPoolExecutor:
        return self._large if _is_large(kind, lgwin) else self._pool

    def result(self, key: str) -> Sizes:
        """The sizes of ``key``, waiting for them (a compression error is raised here)."""
        with self._lock:
            futures = [f for _, f in self._jobs[key]]
        wait(futures)
        with self._lock:
            self._taken.add(key)
        return self._sizes(key)

    def _sizes(self, key: str) -> Sizes:
        results = {kind: future.result() for kind, future in self._jobs[key]}
        (raw, lgwin), gzipped = self._raw[key], results["gzip"]
        gz, br = gzipped.bytes, results["brotli"].bytes
        zs = results["zstd"].bytes if "zstd" in results else None
        return Sizes(
            raw=raw,
            gzip=gz,
            brotli=min(br, gz),
            brotli_quality=self.quality,
            zstd=None if zs is None else min(zs, gz),
            zstd_level=self.zstd_level if zs is not None else None,
            brotli_window=lgwin,
            brotli_encoded=br,
            brotli_encoding="br" if br <= gz else "gzip",
            zstd_encoded=zs,
            zstd_encoding=None if zs is None else ("zstd" if zs <= gz else "gzip"),
            gzip_margin=gzipped.margin,
            gzip_share=round(gzipped.share, 4),
        )


def _is_large(kind: str, lgwin: int) -> bool:
    """A brotli job with a window past the minimum (a file over 4 MiB): the one kind that holds tens of MB."""
    return kind == "brotli" and lgwin > MIN_LGWIN


def _sum_of(fn: Callable[[bytes | Path], Estimate], sources: list[bytes | Path]) -> Estimate:
    return functools.reduce(operator.add, (fn(source) for source in sources))

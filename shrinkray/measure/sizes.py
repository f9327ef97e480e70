"""Download sizes: raw bytes, gzip -9 and brotli, as a CDN would serve them.

These numbers feed the pricing calculator, so they are exactly what Python's
``gzip`` (level 9, mtime 0) and the ``brotli`` package produce. Brotli at
quality 11 runs at about 0.3-3 MB/s, so ``quality="auto"`` uses 11 when the
largest file measured together is at most :data:`AUTO_Q11_LIMIT` bytes and
:data:`AUTO_LARGE_QUALITY` otherwise (a few % larger, 100x faster); the
quality used is always recorded next to the number.
"""

from __future__ import annotations

import gzip
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import brotli

from shrinkray.cores import usable_cores
from shrinkray.errors import OptionError

GZIP_LEVEL = 9
DELIVERIES = ("raw", "gzip", "brotli", "zstd")
AUTO_Q11_LIMIT = 4 * 2**20
#: Quality "auto" uses above the limit: 5x faster than 9 on weight data, within 0-2% of its size
#: (bench/results.md), so the original and four variants of a 50 MB model measure in well under 30 s.
AUTO_LARGE_QUALITY = 6


@dataclass(frozen=True)
class Sizes:
    """Byte counts of one file, raw and compressed."""

    raw: int
    gzip: int
    brotli: int
    brotli_quality: int
    gzip_level: int = GZIP_LEVEL
    zstd: int | None = None
    zstd_level: int | None = None

    def get(self, delivery: str) -> int:
        """Bytes served for a delivery mode: raw, gzip, brotli (or zstd)."""
        value = getattr(self, delivery, None) if delivery in DELIVERIES else None
        if not isinstance(value, int):
            raise OptionError(f"Unknown or unmeasured delivery '{delivery}'", "Use raw, gzip or brotli")
        return value

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def resolve_brotli_quality(quality: int | str, size: int) -> int:
    if quality == "auto":
        return 11 if size <= AUTO_Q11_LIMIT else AUTO_LARGE_QUALITY
    try:
        if isinstance(quality, bool) or (isinstance(quality, float) and not quality.is_integer()):
            raise ValueError(quality)
        value = int(quality)
    except (TypeError, ValueError):
        raise OptionError(f"--brotli-quality must be 0-11 or auto, not {quality!r}", "Use e.g. 11 or 9") from None
    if not 0 <= value <= 11:
        raise OptionError(f"--brotli-quality must be between 0 and 11, not {value}", "Use e.g. 11 or 9")
    return value


def gzip_size(data: bytes) -> int:
    return len(gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0))


def brotli_size(data: bytes, quality: int) -> int:
    return len(brotli.compress(data, quality=quality))


def zstd_size(data: bytes, level: int) -> int:
    try:
        import zstandard
    except ImportError:
        raise OptionError("zstd sizes need the zstandard package", "pip install zstandard") from None
    return len(zstandard.ZstdCompressor(level=level).compress(data))


def measure_sizes(
    data: bytes, *, brotli_quality: int | str = "auto", zstd_level: int | None = None
) -> Sizes:
    """Sizes of one blob (compressions run one after another)."""
    return measure_many({"_": data}, brotli_quality=brotli_quality, zstd_level=zstd_level, workers=1)["_"]


def measure_many(
    blobs: dict[str, bytes],
    *,
    brotli_quality: int | str = "auto",
    zstd_level: int | None = None,
    workers: int | None = None,
) -> dict[str, Sizes]:
    """Sizes of several blobs, compressing in parallel threads (zlib and brotli release the GIL).

    Jobs are started largest first so the slow brotli runs overlap. With
    ``"auto"`` one quality is chosen from the largest blob and used for all,
    so savings always compare like with like.
    """
    largest = max((len(v) for v in blobs.values()), default=0)
    quality = resolve_brotli_quality(brotli_quality, largest)
    qualities = dict.fromkeys(blobs, quality)
    jobs: list[tuple[str, str, Any]] = []
    for key, data in blobs.items():
        jobs.append((key, "brotli", lambda d=data, q=qualities[key]: brotli_size(d, q)))
        jobs.append((key, "gzip", lambda d=data: gzip_size(d)))
        if zstd_level is not None:
            jobs.append((key, "zstd", lambda d=data: zstd_size(d, zstd_level)))
    jobs.sort(key=lambda job: -len(blobs[job[0]]) * (20 if job[1] == "brotli" else 1))
    results: dict[tuple[str, str], int] = {}
    with ThreadPoolExecutor(max_workers=workers or usable_cores()) as pool:
        futures = {(key, kind): pool.submit(fn) for key, kind, fn in jobs}
        for k, fut in futures.items():
            results[k] = fut.result()
    return {
        key: Sizes(
            raw=len(data),
            gzip=results[(key, "gzip")],
            brotli=results[(key, "brotli")],
            brotli_quality=qualities[key],
            zstd=results.get((key, "zstd")),
            zstd_level=zstd_level,
        )
        for key, data in blobs.items()
    }

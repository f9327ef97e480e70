"""gzip -9 of large files estimated from sampled blocks (shrinkray/measure/sampled_sizes.py)."""

from __future__ import annotations

import gzip
import threading
from pathlib import Path

import numpy as np
import pytest

from shrinkray.measure import sampled_sizes, sizes
from shrinkray.measure.sampled_sizes import Estimate


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 64 KiB (still two deflate windows) and sampling above 1 MiB, so files of a few MiB sample."""
    monkeypatch.setattr(sampled_sizes, "BLOCK", 64 << 10)
    monkeypatch.setattr(sampled_sizes, "SAMPLE_ABOVE", 1 << 20)
    monkeypatch.setattr(sizes, "SAMPLE_ABOVE", 1 << 20)


def _weights_file(path: Path, mib: int = 12) -> Path:
    """Weight-like bytes whose compressibility changes along the file: float32 normals at several scales,
    a run of 4-bit-like codes, a zero block."""
    rng = np.random.default_rng(7)
    quarter = (mib << 20) // 16
    parts = [
        rng.normal(0, 0.02, quarter).astype(np.float32).tobytes(),
        rng.integers(0, 16, quarter * 4, dtype=np.uint8).tobytes(),
        rng.normal(0, 1.0, quarter).astype(np.float32).tobytes(),
        np.zeros(quarter, np.float32).tobytes(),
    ]
    path.write_bytes(b"".join(parts) + rng.bytes(12345))  # a partial last block
    return path


def test_estimate_holds_the_exact_size_within_its_interval(tmp_path, small_blocks):
    path = _weights_file(tmp_path / "w.bin")
    data = path.read_bytes()
    exact = len(gzip.compress(data, compresslevel=9, mtime=0))
    estimate = sizes.gzip_estimate(path)
    assert 0 < estimate.margin < 0.01 * exact
    assert abs(estimate.bytes - exact) <= estimate.margin
    assert 0 < estimate.share < 0.5  # blocks were sampled, not the whole file
    assert estimate.raw == len(data)
    assert sizes.gzip_estimate(path) == estimate  # the blocks are fixed by the length: the same number again


def test_small_files_and_bytes_are_exact(tmp_path, small_blocks):
    data = np.random.default_rng(1).normal(size=100_000).astype(np.float32).tobytes()
    path = tmp_path / "small.bin"
    path.write_bytes(data)
    exact = len(gzip.compress(data, compresslevel=9, mtime=0))
    assert sizes.gzip_estimate(path) == Estimate(exact, len(data))
    assert sizes.gzip_estimate(data) == Estimate(exact, len(data))


def test_a_file_that_would_need_most_of_its_blocks_is_compressed_whole(tmp_path, small_blocks):
    # random bytes in some blocks, zeros in others: the spread never narrows enough on 40 blocks
    rng = np.random.default_rng(3)
    block = sampled_sizes.BLOCK
    path = tmp_path / "mixed.bin"
    path.write_bytes(b"".join(rng.bytes(block) if i % 3 else bytes(block) for i in range(40)))
    exact = len(gzip.compress(path.read_bytes(), compresslevel=9, mtime=0))
    estimate = sizes.gzip_estimate(path)
    assert estimate == Estimate(exact, path.stat().st_size)
    assert estimate.margin == 0 and estimate.share == 1.0


def test_a_stop_ends_the_sampling(tmp_path, small_blocks):
    path = _weights_file(tmp_path / "w.bin")
    stop = threading.Event()
    stop.set()
    with pytest.raises(sizes.Abandoned):
        sizes.gzip_estimate(path, stop)


def test_strata_split_in_two_at_the_same_boundaries():
    assert sampled_sizes.strata_bounds(100, 4) == [(0, 25), (25, 50), (50, 75), (75, 100)]
    coarse, fine = sampled_sizes.strata_bounds(1000, 32), sampled_sizes.strata_bounds(1000, 64)
    assert [first for first, _ in coarse] == [first for first, _ in fine[::2]]
    assert fine[-1][1] == 1000 and all(a[1] == b[0] for a, b in zip(fine, fine[1:], strict=False))


def test_estimates_of_two_files_add_with_errors_in_quadrature():
    total = Estimate(1000, 4000, 30, 400) + Estimate(500, 1000, 40, 100) + Estimate(10, 10)
    assert (total.bytes, total.raw, total.margin, total.covered) == (1510, 5010, 50, 510)
    assert total.share == pytest.approx(510 / 5010)
    assert (Estimate(5, 10) + Estimate(6, 20)).covered is None


def test_background_sizes_say_which_numbers_are_estimated(tmp_path, small_blocks):
    path = _weights_file(tmp_path / "w.bin")
    header = tmp_path / "w.onnx"
    header.write_bytes(b"graph" * 100)
    pool = sizes.BackgroundSizes(6, workers=2)
    try:
        pool.submit("model", [header, path])
        measured = pool.result("model")
    finally:
        pool.close()
    exact = sum(len(gzip.compress(p.read_bytes(), compresslevel=9, mtime=0)) for p in (header, path))
    assert measured.gzip_margin > 0 and abs(measured.gzip - exact) <= measured.gzip_margin
    assert 0 < measured.gzip_share < 0.5
    assert "estimated from" in measured.method("gzip") and "(95%)" in measured.method("gzip")
    assert measured.margin("raw") == 0
    assert measured.margin("brotli") == (measured.gzip_margin if measured.brotli_encoding == "gzip" else 0)
    note = sizes.estimated_note([measured, None])
    assert "estimated from" in note and "95% confidence" in note
    assert sizes.estimated_note([sizes.Sizes(raw=10, gzip=5, brotli=4, brotli_quality=6)]) == ""


def test_bias_bounds_add_up_across_files_while_sampling_errors_add_in_quadrature():
    total = Estimate(1000, 4000, 30 + 20, 400, bias=20) + Estimate(500, 1000, 40 + 10, 100, bias=10)
    assert total.bias == 30 and total.margin == 50 + 30  # hypot(30, 40) = 50, then 20 + 10


def test_the_share_deflated_never_reads_zero():
    assert sizes.share_words(0.004) == "0.4%" and sizes.share_words(0.072) == "7.2%" and sizes.share_words(0.34) == "34%"
    assert sizes.share_words(0.0002) == "under 0.1%"


def test_the_covered_bytes_count_a_partial_last_block_once(tmp_path, small_blocks):
    path = _weights_file(tmp_path / "w.bin")
    estimate = sizes.gzip_estimate(path)
    tail = path.stat().st_size % sampled_sizes.BLOCK
    assert tail and (estimate.covered - tail) % sampled_sizes.BLOCK == 0


def test_files_served_together_sum_each_files_own_choice():
    a = sizes.Sizes(raw=100, gzip=60, brotli=50, brotli_quality=6, brotli_encoded=50, gzip_margin=2, gzip_share=0.5)
    b = sizes.Sizes(raw=300, gzip=90, brotli=90, brotli_quality=6, brotli_encoded=95, brotli_encoding="gzip",
                    brotli_window=24)  # fmt: skip
    both = sizes.combined([a, b])
    assert (both.raw, both.gzip, both.brotli, both.brotli_encoded) == (400, 150, 140, 145)
    assert both.brotli_encoding == "gzip" and both.brotli_window == 24
    assert both.gzip_margin == 2 and both.gzip_share == pytest.approx((0.5 * 100 + 300) / 400)

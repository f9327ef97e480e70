"""Download sizes: exactly what gzip -9 (mtime 0) and the brotli package produce."""

from __future__ import annotations

import gzip
import json

import brotli
import numpy as np
import pytest
from helpers import sample_path

from shrinkray.errors import OptionError
from shrinkray.measure.sizes import (
    AUTO_LARGE_QUALITY,
    AUTO_Q11_LIMIT,
    GZIP_LEVEL,
    Sizes,
    brotli_size,
    gzip_size,
    measure_many,
    measure_sizes,
    resolve_brotli_quality,
)

TEXT = b"The quick brown fox jumps over the lazy dog. " * 200
RANDOM = np.random.default_rng(7).integers(0, 256, size=20_000, dtype=np.uint8).tobytes()
ZEROS = bytes(20_000)


@pytest.fixture(scope="module")
def mlp_bytes() -> bytes:
    return sample_path("mlp").read_bytes()


# ------------------------------------------------------------------ gzip


@pytest.mark.parametrize("data", [TEXT, RANDOM, ZEROS, b"", b"x"], ids=["text", "random", "zeros", "empty", "one"])
def test_gzip_size_is_python_gzip_level_9_mtime_0(data):
    expected = gzip.compress(data, 9, mtime=0)
    assert GZIP_LEVEL == 9
    assert gzip_size(data) == len(expected)
    assert gzip.decompress(expected) == data
    # mtime=0 makes the output reproducible: the same call gives the same bytes
    assert gzip.compress(data, 9, mtime=0) == expected


def test_gzip_size_differs_from_other_levels_on_real_data(mlp_bytes):
    """Level 9 is really used (level 1 gives another size on a real model)."""
    level9 = len(gzip.compress(mlp_bytes, 9, mtime=0))
    assert gzip_size(mlp_bytes) == level9
    assert len(gzip.compress(mlp_bytes, 1, mtime=0)) != level9


def test_measure_sizes_gzip_matches_and_round_trips():
    sizes = measure_sizes(TEXT, brotli_quality=5)
    blob = gzip.compress(TEXT, 9, mtime=0)
    assert sizes.gzip == len(blob)
    assert gzip.decompress(blob) == TEXT
    assert sizes.gzip_level == 9


# ------------------------------------------------------------------ brotli


@pytest.mark.parametrize("quality", [0, 1, 5, 9, 11])
def test_brotli_size_matches_brotli_package(quality):
    expected = brotli.compress(TEXT, quality=quality)
    assert brotli.decompress(expected) == TEXT
    assert brotli_size(TEXT, quality) == len(expected)
    sizes = measure_sizes(TEXT, brotli_quality=quality)
    assert sizes.brotli == len(expected)
    assert sizes.brotli_quality == quality


def test_brotli_quality_changes_the_number_on_real_data(mlp_bytes):
    chunk = mlp_bytes[:200_000]
    q1 = measure_sizes(chunk, brotli_quality=1)
    q9 = measure_sizes(chunk, brotli_quality=9)
    assert q1.brotli == len(brotli.compress(chunk, quality=1))
    assert q9.brotli == len(brotli.compress(chunk, quality=9))
    assert q1.brotli != q9.brotli
    assert (q1.brotli_quality, q9.brotli_quality) == (1, 9)


def test_brotli_quality_given_as_string_is_accepted():
    assert resolve_brotli_quality("7", 10) == 7
    assert measure_sizes(TEXT, brotli_quality="7").brotli == len(brotli.compress(TEXT, quality=7))


# ------------------------------------------------------------------ quality "auto"


def test_auto_quality_boundary_resolution():
    assert resolve_brotli_quality("auto", 0) == 11
    assert resolve_brotli_quality("auto", AUTO_Q11_LIMIT - 1) == 11
    assert resolve_brotli_quality("auto", AUTO_Q11_LIMIT) == 11
    assert resolve_brotli_quality("auto", AUTO_Q11_LIMIT + 1) == AUTO_LARGE_QUALITY
    assert resolve_brotli_quality("auto", 10 * AUTO_Q11_LIMIT) == AUTO_LARGE_QUALITY
    assert AUTO_LARGE_QUALITY < 11


def test_auto_quality_at_exact_boundary_in_measure_many():
    at_limit = bytes(AUTO_Q11_LIMIT)  # zeros: fast even at quality 11
    above = bytes(AUTO_Q11_LIMIT + 1)
    alone = measure_many({"at": at_limit}, brotli_quality="auto")["at"]
    assert alone.brotli_quality == 11
    assert alone.brotli == len(brotli.compress(at_limit, quality=11))
    sizes = measure_many({"at": at_limit, "above": above}, brotli_quality="auto")
    # One quality per measurement, chosen from the largest blob, so savings compare like with like.
    assert sizes["at"].brotli_quality == sizes["above"].brotli_quality == AUTO_LARGE_QUALITY
    assert sizes["at"].brotli == len(brotli.compress(at_limit, quality=AUTO_LARGE_QUALITY))
    assert sizes["above"].brotli == len(brotli.compress(above, quality=AUTO_LARGE_QUALITY))
    assert sizes["at"].raw == AUTO_Q11_LIMIT
    assert sizes["above"].raw == AUTO_Q11_LIMIT + 1


def test_auto_is_the_default():
    assert measure_sizes(TEXT).brotli_quality == 11
    assert measure_sizes(TEXT).brotli == len(brotli.compress(TEXT, quality=11))


# ------------------------------------------------------------------ bad qualities


@pytest.mark.parametrize("quality", [-1, 12, 100, "12", "-3"])
def test_quality_out_of_range_is_option_error(quality):
    with pytest.raises(OptionError, match="between 0 and 11"):
        resolve_brotli_quality(quality, 100)
    with pytest.raises(OptionError):
        measure_sizes(TEXT, brotli_quality=quality)


@pytest.mark.parametrize("quality", ["best", "", "11.0", None, "AUTO", [11]])
def test_garbage_quality_is_option_error(quality):
    with pytest.raises(OptionError, match="0-11 or auto"):
        resolve_brotli_quality(quality, 100)
    with pytest.raises(OptionError):
        measure_many({"a": TEXT}, brotli_quality=quality)


def test_option_error_message_has_a_hint():
    with pytest.raises(OptionError) as info:
        resolve_brotli_quality(42, 1)
    assert "42" in str(info.value)
    assert info.value.hint


# ------------------------------------------------------------------ measure_many


def test_measure_many_equals_measure_sizes_per_blob(mlp_bytes):
    blobs = {"text": TEXT, "random": RANDOM, "zeros": ZEROS, "empty": b"", "model": mlp_bytes[:300_000]}
    many = measure_many(blobs, brotli_quality=9)
    assert set(many) == set(blobs)
    for key, data in blobs.items():
        assert many[key] == measure_sizes(data, brotli_quality=9), key
        assert many[key].raw == len(data)


def test_measure_many_workers_do_not_change_results():
    blobs = {"text": TEXT, "random": RANDOM, "zeros": ZEROS}
    assert measure_many(blobs, brotli_quality=5, workers=1) == measure_many(blobs, brotli_quality=5, workers=4)


def test_measure_many_empty_dict():
    assert measure_many({}, brotli_quality=11) == {}


def test_measure_many_auto_quality_is_shared_by_all_blobs():
    sizes = measure_many({"small": TEXT, "big": bytes(AUTO_Q11_LIMIT + 10)}, brotli_quality="auto")
    assert sizes["small"].brotli_quality == sizes["big"].brotli_quality == AUTO_LARGE_QUALITY
    assert sizes["small"].brotli == len(brotli.compress(TEXT, quality=AUTO_LARGE_QUALITY))
    assert measure_many({"small": TEXT}, brotli_quality="auto")["small"].brotli_quality == 11


# ------------------------------------------------------------------ Sizes


def test_sizes_get_each_delivery():
    sizes = measure_sizes(TEXT, brotli_quality=5)
    assert sizes.get("raw") == len(TEXT)
    assert sizes.get("gzip") == len(gzip.compress(TEXT, 9, mtime=0))
    assert sizes.get("brotli") == len(brotli.compress(TEXT, quality=5))


@pytest.mark.parametrize("delivery", ["deflate", "", "RAW", "as_dict", "zstd"])
def test_sizes_get_unknown_or_unmeasured_delivery(delivery):
    sizes = measure_sizes(TEXT, brotli_quality=5)
    assert sizes.zstd is None
    with pytest.raises(OptionError, match="delivery"):
        sizes.get(delivery)


@pytest.mark.parametrize("delivery", ["brotli_quality", "gzip_level"])
def test_sizes_get_rejects_non_delivery_int_fields(delivery):
    sizes = measure_sizes(TEXT, brotli_quality=5)
    with pytest.raises(OptionError):
        sizes.get(delivery)


def test_sizes_as_dict_is_json_ready():
    sizes = measure_sizes(TEXT, brotli_quality=5)
    data = sizes.as_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["raw"] == len(TEXT)
    assert data["brotli_quality"] == 5
    assert data["gzip_level"] == 9
    assert Sizes(**data) == sizes


# ------------------------------------------------------------------ edge data


def test_empty_bytes():
    sizes = measure_sizes(b"", brotli_quality=11)
    assert sizes.raw == 0
    assert sizes.gzip == len(gzip.compress(b"", 9, mtime=0)) > 0  # gzip header + trailer
    assert sizes.brotli == len(brotli.compress(b"", quality=11)) >= 1
    assert brotli.decompress(brotli.compress(b"", quality=11)) == b""
    assert sizes.brotli_quality == 11


def test_compressible_vs_random_ordering():
    compressible = measure_sizes(ZEROS, brotli_quality=9)
    text = measure_sizes(TEXT[: len(ZEROS)], brotli_quality=9)
    noise = measure_sizes(RANDOM, brotli_quality=9)
    assert len(ZEROS) == len(RANDOM)
    # highly compressible data shrinks a lot
    assert compressible.gzip < compressible.raw / 100
    assert compressible.brotli < compressible.raw / 100
    # random bytes do not compress: gzip and brotli both add a little framing
    assert noise.gzip >= noise.raw
    assert noise.brotli >= noise.raw
    assert compressible.gzip < text.gzip < noise.gzip
    assert compressible.brotli < text.brotli < noise.brotli


def test_brotli_beats_gzip_on_a_real_model(mlp_bytes):
    sizes = measure_sizes(mlp_bytes[:300_000], brotli_quality=9)
    assert sizes.brotli < sizes.gzip < sizes.raw

"""Synthetic content: images (text lines, pages, scenes), value ranges, channel layouts, speech, token ids."""

from __future__ import annotations

import numpy as np
import pytest

from shrinkray.measure import content

# ------------------------------------------------------------------ images


@pytest.mark.parametrize(("count", "height", "width"), [(3, 64, 64), (2, 32, 256), (1, 17, 23), (4, 128, 96)])
def test_rgb_images_shape_and_range(count, height, width):
    images = content.rgb_images(count, height, width, seed=1)
    assert images.shape == (count, height, width, 3)
    assert images.dtype == np.float64
    assert images.min() >= 0.0 and images.max() <= 1.0


def test_rgb_images_are_deterministic_per_seed():
    a = content.rgb_images(3, 64, 64, seed=5)
    np.testing.assert_array_equal(a, content.rgb_images(3, 64, 64, seed=5))
    assert not np.array_equal(a, content.rgb_images(3, 64, 64, seed=6))
    # sample i does not depend on how many are drawn
    np.testing.assert_array_equal(a[:2], content.rgb_images(2, 64, 64, seed=5))


def test_samples_differ_and_are_not_noise():
    images = content.rgb_images(3, 96, 96, seed=0)  # a page, a scene with a sign, a plain scene
    assert not np.allclose(images[0], images[1]) and not np.allclose(images[1], images[2])
    for image in images:
        assert image.std() > 0.02  # there is something to see
        # neighbouring pixels are mostly alike (smooth areas), unlike uniform noise
        steps = np.abs(np.diff(image, axis=1)).mean()
        assert steps < 0.1
    noise = np.random.default_rng(0).random((96, 96, 3))
    assert np.abs(np.diff(noise, axis=1)).mean() > 0.3


def test_a_page_is_light_with_dark_text():
    page = content.rgb_images(1, 128, 128, seed=0)[0]  # sample 0 is a document page
    luma = page.mean(axis=-1)
    assert np.median(luma) > 0.9  # mostly paper
    assert (luma < 0.3).mean() > 0.005  # and some ink


def test_short_wide_inputs_get_a_line_of_text():
    lines = content.rgb_images(3, 32, 256, seed=0)
    for line in lines:
        luma = line.mean(axis=-1)
        assert np.median(luma) > 0.7  # a light background
        assert luma.min() < 0.35  # dark strokes
        ink_columns = (luma < 0.5).any(axis=0)
        assert ink_columns.mean() > 0.2  # the text runs along the line


@pytest.mark.parametrize(
    ("value_range", "low", "high"),
    [("0-1", 0.0, 1.0), ("-1-1", -1.0, 1.0), ("0-255", 0.0, 255.0)],
)
def test_to_model_range_linear(value_range, low, high):
    rgb = np.array([[[[0.0, 0.5, 1.0]]]])
    out = content.to_model_range(rgb, value_range)
    np.testing.assert_allclose(out.ravel(), [low, (low + high) / 2, high])


def test_to_model_range_imagenet():
    rgb = np.stack([content.IMAGENET_MEAN, content.IMAGENET_MEAN + content.IMAGENET_STD])[None, None]
    out = content.to_model_range(rgb, "imagenet")
    np.testing.assert_allclose(out[0, 0, 0], 0.0, atol=1e-12)  # the mean maps to 0
    np.testing.assert_allclose(out[0, 0, 1], 1.0)  # one std above it to 1
    assert set(content.IMAGE_RANGES) == {"imagenet", "0-1", "-1-1", "0-255"}


def test_layout_channels():
    rgb = content.rgb_images(2, 20, 30, seed=0)
    first = content.layout_channels(rgb, 3, channels_first=True)
    assert first.shape == (2, 3, 20, 30)
    np.testing.assert_array_equal(first[:, 1], rgb[..., 1])
    last = content.layout_channels(rgb, 3, channels_first=False)
    np.testing.assert_array_equal(last, rgb)
    gray = content.layout_channels(rgb, 1, channels_first=True)
    assert gray.shape == (2, 1, 20, 30)
    np.testing.assert_allclose(gray[:, 0], rgb @ np.array([0.299, 0.587, 0.114]))
    rgba = content.layout_channels(rgb, 4, channels_first=False)
    assert rgba.shape == (2, 20, 30, 4)
    np.testing.assert_array_equal(rgba[..., :3], rgb)
    assert np.all(rgba[..., 3] == rgba[..., 3].flat[0])  # opaque: one alpha value everywhere


# ------------------------------------------------------------------ speech


def test_speech_shape_range_and_peak():
    clips = content.speech(3, 16000, seed=0)
    assert clips.shape == (3, 16000)
    for clip in clips:
        assert np.abs(clip).max() == pytest.approx(0.5)  # normalized to half of full scale
        assert abs(clip.mean()) < 0.05  # no DC offset


def test_speech_is_voiced_with_a_pause():
    rate = 16000
    clip = content.speech(1, rate, rate=rate, seed=2)[0]
    # a voice: most energy between 80 Hz and 4 kHz
    spectrum = np.abs(np.fft.rfft(clip)) ** 2
    freqs = np.fft.rfftfreq(clip.size, 1 / rate)
    assert spectrum[(freqs > 80) & (freqs < 4000)].sum() > 0.9 * spectrum.sum()
    # syllables and a pause: 20 ms frames whose loudness varies a lot, some near silence
    frames = clip[: rate // 320 * 320].reshape(-1, 320)
    rms = np.sqrt((frames**2).mean(axis=1))
    assert rms.min() < 0.02 < 0.1 < rms.max()


def test_speech_deterministic_per_seed_and_short_clips():
    np.testing.assert_array_equal(content.speech(2, 800, seed=3), content.speech(2, 800, seed=3))
    assert not np.array_equal(content.speech(1, 800, seed=3), content.speech(1, 800, seed=4))
    one = content.speech(1, 1)
    assert one.shape == (1, 1) and np.all(np.isfinite(one))


# ------------------------------------------------------------------ token ids


@pytest.mark.parametrize("vocab", [2, 10, 21, 512, 2000, 30522])
def test_token_ids_stay_in_the_vocabulary(vocab):
    ids = content.token_ids(4, 256, vocab, seed=0)
    assert ids.shape == (4, 256)
    assert ids.min() >= 0 and ids.max() < vocab
    assert np.issubdtype(ids.dtype, np.integer)


def test_token_ids_avoid_special_ids_and_are_zipf_like():
    ids = content.token_ids(8, 512, 30522, seed=0)
    assert ids.min() >= 1000  # the first ids of large vocabularies are special tokens
    _, counts = np.unique(ids, return_counts=True)  # float16-safe: integer ids
    counts = np.sort(counts)[::-1]  # float16-safe: integer counts
    assert counts[0] > 0.1 * ids.size  # the commonest token is very common
    assert len(counts) > 100  # and there is a long tail
    small = content.token_ids(2, 64, 21, seed=0)
    assert small.min() >= 2  # vocab // 10 for small tables


def test_token_ids_deterministic_per_seed():
    np.testing.assert_array_equal(content.token_ids(2, 16, 500, seed=1), content.token_ids(2, 16, 500, seed=1))
    assert not np.array_equal(content.token_ids(2, 16, 500, seed=1), content.token_ids(2, 16, 500, seed=2))

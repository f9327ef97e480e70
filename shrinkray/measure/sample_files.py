"""Real input samples the user gives as files: images and WAV clips, fed at the size the model takes.

An image is fed at the model's declared height and width, or at the size synthesized inputs get for its
family when they are free (a page for a text detector, a text line for a recognizer:
:func:`inputs.image_size`), scaled to fit keeping its aspect and padded, never stretched to a fixed size.
A WAV clip feeds a waveform input, or an input of log-mel features as a front end would make them.
The model's other inputs are synthesized as usual (masks, states, sample rate).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx

from shrinkray.errors import OptionError
from shrinkray.measure import audio_features, content
from shrinkray.measure.inputs import (
    DEFAULT_SAMPLE_RATE,
    InputOptions,
    InputRole,
    InputSignature,
    image_value_range,
    input_roles,
    resolve_shape,
    signature,
    synthesize,
)

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp", ".gif", ".tif", ".tiff")
AUDIO_SUFFIXES = (".wav",)
#: Widest a text line given as a sample file is fed to a recognizer with a free width (26 x its height at 48).
MAX_LINE_WIDTH = 1280


def is_sample_file(path: str | os.PathLike) -> bool:
    """An image or WAV file the user gives as a real input sample (as opposed to an .npz/.npy array file)."""
    return Path(path).suffix.lower() in IMAGE_SUFFIXES + AUDIO_SUFFIXES


def _fixed_or_none(dim: int | str | None) -> int | None:
    return dim if isinstance(dim, int) else None


def sample_image_size(sig: InputSignature, role: InputRole, options: InputOptions,
                      image_size: tuple[int, int]) -> tuple[int, int]:  # fmt: skip
    """(H, W) a user's image is fed at: the model's declared sides, the user's --dim, else the size synthesized
    inputs get (a page for a detector, a line for a recognizer: :func:`image_size`). A text line's free width
    follows the image's aspect when it is longer (up to :data:`MAX_LINE_WIDTH`), so its characters keep their size."""
    guesses: dict[str, int] = {}
    shape = resolve_shape(sig, options, 1, guesses, role)
    h_axis, w_axis = (2, 3) if role.channels_first else (1, 2)
    height, width = shape[h_axis], shape[w_axis]
    w_label = sig.shape[w_axis] if isinstance(sig.shape[w_axis], str) else f"{sig.name}:{w_axis}"
    line = role.text_line or (isinstance(sig.shape[h_axis], int) and height <= 64)
    if line and w_label in guesses:
        h0, w0 = image_size
        wanted = 32 * int(np.ceil(height * w0 / max(h0, 1) / 32))
        width = max(width, min(MAX_LINE_WIDTH, wanted))
    return height, width


def letterbox(image, height: int, width: int) -> np.ndarray:
    """A PIL RGB image scaled to fit ``height`` x ``width`` keeping its aspect, placed top left on its own border
    colour (a page's paper, a line's background), as float64 [height, width, 3] in [0, 1]."""
    from PIL import Image

    pixels = np.asarray(image, dtype=np.float64) / 255.0
    border = np.concatenate([pixels[0], pixels[-1], pixels[:, 0], pixels[:, -1]]).mean(axis=0)
    w0, h0 = image.size
    scale = min(width / w0, height / h0)
    new_w, new_h = min(width, max(1, round(w0 * scale))), min(height, max(1, round(h0 * scale)))
    canvas = np.empty((height, width, 3))
    canvas[:] = border
    canvas[:new_h, :new_w] = np.asarray(image.resize((new_w, new_h), Image.BILINEAR), dtype=np.float64) / 255.0
    return canvas


def _image_feed(path: Path, sig: InputSignature, role: InputRole, value_range: str,
                size: tuple[int, int] | None = None, options: InputOptions | None = None) -> np.ndarray:  # fmt: skip
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            img.load()
            rgb = img.convert("RGB")
    except (UnidentifiedImageError, OSError) as exc:
        raise OptionError(f"Cannot read {path.name} as an image ({exc})", "Give a PNG or JPEG file") from None
    channels = sig.shape[1] if role.channels_first else sig.shape[3]
    w0, h0 = rgb.size
    # every sample at the first one's size, so their outputs line up
    height, width = size if size is not None else sample_image_size(sig, role, options or InputOptions(), (h0, w0))
    values = content.to_model_range(letterbox(rgb, int(height), int(width))[None], value_range)
    return content.layout_channels(values, channels if isinstance(channels, int) else 3, role.channels_first)


def read_wav(path: Path, rate: int) -> np.ndarray:
    """Mono float samples in [-1, 1] at ``rate`` Hz from a PCM WAV file (linear resampling)."""
    import wave

    try:
        with wave.open(str(path), "rb") as wav:
            channels, width, source_rate = wav.getnchannels(), wav.getsampwidth(), wav.getframerate()
            frames = wav.getnframes()
            if frames > source_rate * 600:
                raise OptionError(f"{path.name} is longer than 10 minutes", "Give a shorter clip")
            data = wav.readframes(frames)
    except (wave.Error, EOFError) as exc:
        raise OptionError(f"Cannot read {path.name} as a PCM WAV file ({exc})", "Save it as 16-bit PCM WAV") from None
    kinds = {1: np.uint8, 2: np.int16, 4: np.int32}
    if width not in kinds:
        raise OptionError(f"{path.name} has {8 * width}-bit samples", "Save it as 16-bit PCM WAV")
    samples = np.frombuffer(data, dtype=kinds[width]).astype(np.float64)
    samples = (samples - 128) / 128 if width == 1 else samples / float(2 ** (8 * width - 1))
    mono = samples.reshape(-1, channels).mean(axis=1)
    if source_rate != rate and mono.size > 1:
        target = int(round(mono.size * rate / source_rate))
        mono = np.interp(np.linspace(0, mono.size - 1, max(target, 1)), np.arange(mono.size), mono)
    return mono


def _features_feed(clip: np.ndarray, sig: InputSignature, role: InputRole,
                   frames: int | None) -> tuple[np.ndarray, int]:  # fmt: skip
    """A WAV clip as one row of the features input, as many frames as the model fixes (or the first clip had)."""
    mel, time = role.axes
    feats = audio_features.features_of_clip(clip, int(sig.shape[mel]), _fixed_or_none(sig.shape[time]) or frames)
    shape = [1] * len(sig.shape)
    shape[mel], shape[time] = feats.shape[1], feats.shape[0]
    return audio_features.lay_out(feats[None], shape, mel, time), feats.shape[0]


def load_sample_files(
    paths: list[str | os.PathLike], model: onnx.ModelProto, options: InputOptions | None = None,
    image_range: str = "auto",
) -> list[dict[str, np.ndarray]]:  # fmt: skip
    """One sample per image or WAV file: the file feeds the model's image or audio input, the other
    inputs are synthesized as usual (masks, states, sample rate). ``image_range`` is ``auto`` (read
    from the graph, :func:`image_value_range`) or one of :data:`content.IMAGE_RANGES`."""
    options = options or InputOptions()
    roles = input_roles(model)
    sigs = {s.name: s for s in signature(model)}
    if image_range != "auto" and image_range not in content.IMAGE_RANGES:
        raise OptionError(f"Unknown image range '{image_range}'", "Use auto or one of " + ", ".join(content.IMAGE_RANGES))
    images = [n for n, r in roles.items() if r.kind == "image"]
    audio = [n for n, r in roles.items() if r.kind == "audio"] or [n for n, r in roles.items() if r.kind == "features"]
    rate_input = next((n for n, r in roles.items() if r.kind == "sample_rate"), None)
    rate = int(options.ranges[rate_input][0]) if rate_input and rate_input in options.ranges else DEFAULT_SAMPLE_RATE
    samples = []
    size: tuple[int, int] | None = None
    length: int | None = None
    for raw in paths:
        path = Path(raw)
        if not path.is_file():
            raise OptionError(f"Input file {path.name} does not exist", "Give the path of an image or WAV file")
        suffix = path.suffix.lower()
        if suffix in IMAGE_SUFFIXES:
            if len(images) != 1:
                raise OptionError(
                    f"{path.name} is an image, but the model has {len(images) or 'no'} image inputs "
                    f"({', '.join(images) or 'its inputs: ' + ', '.join(sigs)})",
                    "Give an .npz file with one array per input name",
                )
            name, role = images[0], roles[images[0]]
            value_range = image_value_range(model, name)[0] if image_range == "auto" else image_range
            feed = _image_feed(path, sigs[name], role, value_range, size, options)
            size = feed.shape[2:4] if role.channels_first else feed.shape[1:3]
        elif suffix in AUDIO_SUFFIXES:
            if len(audio) != 1:
                raise OptionError(
                    f"{path.name} is audio, but the model has {len(audio) or 'no'} audio inputs",
                    "Give an .npz file with one array per input name",
                )
            name = audio[0]
            if roles[name].kind == "features":  # the clip's log-mel features, at 16 kHz as front ends take it
                feed, length = _features_feed(read_wav(path, audio_features.FEATURE_RATE), sigs[name], roles[name], length)
            else:
                clip = read_wav(path, rate)
                rank = len(sigs[name].shape)
                fixed = _fixed_or_none(sigs[name].shape[-1]) if rank else None
                fixed = fixed or length  # every clip as long as the first, so their outputs line up
                if fixed:
                    clip = np.pad(clip[:fixed], (0, max(0, fixed - clip.size)))
                length = clip.size
                feed = clip.reshape((1,) * (rank - 1) + (clip.size,)) if rank else clip
        else:
            raise OptionError(f"{path.name} is not an image or a WAV file", "Give PNG/JPEG images or WAV audio")
        dims = {f"{name}:{axis}": int(size) for axis, size in enumerate(feed.shape)}
        sig_dims = sigs[name].shape
        for axis, dim in enumerate(sig_dims):
            if isinstance(dim, str):
                dims[dim] = int(feed.shape[axis])
        synth = synthesize(model, replace(options, dims={**dims, **options.dims}))
        feeds = dict(synth.feeds)
        feeds[name] = feed.astype(sigs[name].dtype)
        samples.append(feeds)
    if not samples:
        raise OptionError("No input files given", "Give images or WAV files")
    return samples

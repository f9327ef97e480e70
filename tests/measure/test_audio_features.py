"""Log-mel features of voiced audio for models whose signature takes features: roles, axis order, bins, values."""

from __future__ import annotations

import wave

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from shrinkray.graph.sessions import open_session
from shrinkray.measure import audio_features, content
from shrinkray.measure.inputs import InputOptions, input_roles, synthesize
from shrinkray.measure.parity_inputs import _samples
from shrinkray.measure.sample_files import load_sample_files


def features_model(name: str, shape: list, outputs: tuple[str, ...] = ("out",), graph_name: str = "g") -> onnx.ModelProto:
    """name -> ReduceMean -> out (a runnable stand-in for a speech or speaker model's signature)."""
    nodes = [helper.make_node("ReduceMean", [name], [outputs[0]], keepdims=0)]
    graph = helper.make_graph(nodes, graph_name, [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(outputs[0], TensorProto.FLOAT, [])])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def lag1(feats: np.ndarray) -> float:
    """Mean lag-1 autocorrelation over time of each bin of [frames, bins]."""
    centred = feats - feats.mean(axis=0)
    num = (centred[1:] * centred[:-1]).sum(axis=0)
    den = (centred**2).sum(axis=0)
    return float(np.mean(num / den))


# ------------------------------------------------------------------ the front end


@pytest.mark.parametrize("bins", audio_features.MEL_BINS)
def test_mel_filterbank_triangles(bins):
    bank = audio_features.mel_filterbank(bins)
    assert bank.shape == (bins, audio_features.fft_size(bins) // 2 + 1)
    assert bank.min() >= 0 and bank.max() <= 1 + 1e-9
    assert np.all(bank.max(axis=1) > 0.4)  # no filter is empty (none falls between two FFT bins)
    peaks = bank.argmax(axis=1)
    assert np.all(np.diff(peaks) >= 0) and peaks[-1] > peaks[0]  # centres rise with the bin
    widths = (bank > 0).sum(axis=1)
    assert widths[-1] > widths[0]  # mel: high filters are wider in Hz


def test_log_mel_frames_and_tone_lands_in_its_bin():
    rate, frames = audio_features.FEATURE_RATE, 100
    t = np.arange(audio_features.samples_for(frames)) / rate
    feats = audio_features.log_mel(0.5 * np.sin(2 * np.pi * 1000 * t), 80)
    assert feats.shape == (frames, 80)
    bank = audio_features.mel_filterbank(80)
    expected = bank[:, round(1000 * audio_features.fft_size(80) / rate)].argmax()
    assert abs(int(np.median(feats.argmax(axis=1))) - int(expected)) <= 1


def test_features_are_speech_like_not_noise():
    feats = audio_features.features(2, 300, 80, seed=0)
    assert feats.shape == (2, 300, 80) and np.isfinite(feats).all()
    for one in feats:
        np.testing.assert_allclose(one.mean(axis=0), 0, atol=1e-6)  # per-bin mean ~0 (CMVN)
        np.testing.assert_allclose(one.std(axis=0), 1, atol=1e-3)
        assert lag1(one) > 0.5  # adjacent frames overlap and speech is smooth; N(0,1) gives ~0
    noise = np.random.default_rng(0).standard_normal((300, 80))
    assert abs(lag1(noise)) < 0.1
    assert not np.allclose(feats[0], feats[1])  # each row its own clip


def test_features_deterministic_per_seed():
    a = audio_features.features(2, 50, 40, seed=3)
    np.testing.assert_array_equal(a, audio_features.features(2, 50, 40, seed=3))
    assert not np.allclose(a, audio_features.features(2, 50, 40, seed=4))


@pytest.mark.parametrize(
    ("shape", "axes"),
    [
        (["batch", "frames", 80], (2, 1)),
        (["batch", 80, "frames"], (1, 2)),
        (["batch", 1, 80, "frames"], (2, 3)),
        (["batch", 1, "T", 64], (3, 2)),
        (["time", 40], (1, 0)),
        ([None, None, 128], (2, 1)),
        (["batch", 81, "frames"], None),  # not a mel bin count
        (["batch", 64], None),  # a plain feature vector
        (["batch", 2, 80, "frames"], None),  # two channels: not a filterbank
        (["batch", 3, 80], None),  # three frames: not a time axis
    ],
)
def test_feature_axes(shape, axes):
    assert audio_features.feature_axes(shape) == axes


# ------------------------------------------------------------------ roles and synthesis


@pytest.mark.parametrize(
    ("name", "shape", "expected"),
    [
        ("feats", ["batch", "frames", 80], (1, 300, 80)),
        ("speech", ["B", "T", 80], (1, 300, 80)),
        ("input_features", ["batch", 128, "frames"], (1, 128, 300)),
        ("audio_signal", ["batch", 64, "time"], (1, 64, 300)),
        ("fbank", ["batch", 1, 80, "frames"], (1, 1, 80, 300)),
        ("mel", ["batch", 1, "frames", 40], (1, 1, 300, 40)),
    ],
)
def test_feature_inputs_get_log_mel_in_the_declared_order(name, shape, expected):
    model = features_model(name, shape)
    role = input_roles(model)[name]
    assert role.kind == "features"
    synth = synthesize(model)
    feats = synth.feeds[name]
    assert feats.shape == expected and feats.dtype == np.float32
    mel, time = role.axes
    bins = expected[mel]
    assert role.detail == str(bins)
    rows = np.moveaxis(feats, [time, mel], [-2, -1]).reshape(-1, expected[time], bins)
    np.testing.assert_allclose(rows, audio_features.features(1, 300, bins), atol=1e-5)
    open_session(model).run(None, synth.feeds)


def test_a_speaker_model_by_its_outputs():
    plain = features_model("x", ["batch", "frames", 80])
    assert input_roles(plain)["x"].kind == "float"  # nothing says it listens: N(0,1) as before
    speaker = features_model("x", ["batch", "frames", 80], outputs=("speaker_embedding",))
    assert input_roles(speaker)["x"].kind == "features"
    speaker.metadata_props.add(key="task", value="speaker verification")
    assert input_roles(features_model("x", ["batch", "frames", 80], graph_name="wespeaker"))["x"].kind == "features"


def test_states_and_images_are_not_features():
    model = features_model("state", [2, "batch", 128], outputs=("speech_out",))
    assert input_roles(model)["state"].kind == "state"
    image = features_model("pixel_values", ["batch", 1, 64, "width"])
    assert input_roles(image)["pixel_values"].kind == "image"


def test_features_batch_seed_and_range():
    model = features_model("feats", ["batch", "frames", 80])
    batch = synthesize(model, batch=3).feeds["feats"]
    assert batch.shape == (3, 300, 80) and not np.allclose(batch[0], batch[1])
    one = synthesize(model, InputOptions(seed=1)).feeds["feats"]
    np.testing.assert_array_equal(one, synthesize(model, InputOptions(seed=1)).feeds["feats"])
    assert not np.allclose(one, synthesize(model, InputOptions(seed=2)).feeds["feats"])
    short = synthesize(model, InputOptions(dims={"frames": 120})).feeds["feats"]
    assert short.shape == (1, 120, 80)
    ranged = synthesize(model, InputOptions(ranges={"feats": (-5.0, 5.0)})).feeds["feats"]
    assert ranged.min() == pytest.approx(-5.0) and ranged.max() == pytest.approx(5.0)


def test_input_note_words_features_plainly():
    model = features_model("feats", ["batch", "frames", 80])
    _, note = _samples(model, InputOptions(), None, 1)
    assert "feats as log-mel features, 80 bins, 3 s of voiced audio" in note


def test_a_wav_file_feeds_a_features_input(tmp_path):
    path = tmp_path / "clip.wav"
    pcm = (content.speech(1, 16000)[0] * 32767).astype(np.int16)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        out.writeframes(pcm.tobytes())
    model = features_model("feats", ["batch", 80, "frames"])
    samples = load_sample_files([path, path], model)
    frames = 1 + (16000 - audio_features.WINDOW) // audio_features.HOP
    assert [s["feats"].shape for s in samples] == [(1, 80, frames)] * 2
    np.testing.assert_allclose(samples[0]["feats"][0].T, audio_features.features_of_clip(pcm / 32768.0, 80), atol=1e-4)

"""Methods that learn from inputs (calibrate or search) are judged on samples they never saw."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import onnx
from helpers import sample_path
from onnx import TensorProto, helper, numpy_helper

import shrinkray
from shrinkray.measure.parity_inputs import ParityInputs, parity_inputs, split_for_calibration, user_halves
from shrinkray.measure.results import CompareSettings
from shrinkray.methods.base import RunContext
from shrinkray.pipeline.compare import compare


def _mlp(batch: str | int = "batch") -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 32])],
        [numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "w")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _rows(feeds: list[dict[str, np.ndarray]]) -> set[bytes]:
    return {row.tobytes() for f in feeds for row in np.asarray(f["x"]).reshape(-1, 64)}


def test_user_samples_split_every_other_run_or_one_batch_in_halves():
    runs = [{"x": np.full((1, 64), k, np.float32)} for k in range(5)]
    judged, calibration = user_halves(runs, _mlp())
    assert [int(f["x"][0, 0]) for f in judged] == [0, 2, 4] and [int(f["x"][0, 0]) for f in calibration] == [1, 3]
    batch = [{"x": np.arange(5 * 64, dtype=np.float32).reshape(5, 64)}]
    judged, calibration = user_halves(batch, _mlp())
    assert judged[0]["x"].shape == (3, 64) and calibration[0]["x"].shape == (2, 64)
    assert not _rows(judged) & _rows(calibration)
    assert user_halves([{"x": np.zeros((1, 64), np.float32)}], _mlp()) is None  # one sample: nothing to hold out
    assert user_halves(batch, _mlp(batch=5)) is None  # a fixed first axis may not be a batch


def test_a_batch_from_the_users_file_is_split_and_each_part_has_the_originals_outputs(tmp_path):
    model = _mlp()
    x = np.random.default_rng(1).standard_normal((6, 64)).astype(np.float32)
    np.savez(tmp_path / "mine.npz", x=x)
    settings = CompareSettings(inputs_path=str(tmp_path / "mine.npz"))
    inputs = parity_inputs(model, settings)
    split = split_for_calibration(inputs, model, settings)
    assert split.judged.count == 3 and split.calibration.count == 3
    assert split.judged.user_data and split.calibration.user_data
    assert not _rows(split.judged.samples) & _rows(split.calibration.samples)
    w = numpy_helper.to_array(model.graph.initializer[0])
    np.testing.assert_allclose(split.judged.reference["y"], np.maximum(x[:3] @ w, 0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(split.calibration.reference["y"], np.maximum(x[3:] @ w, 0), rtol=1e-5, atol=1e-5)
    assert "judged on the other 3" in split.note


def test_synthesized_inputs_get_another_synthesized_set_for_calibration():
    model = _mlp()
    inputs = parity_inputs(model, CompareSettings())
    split = split_for_calibration(inputs, model, CompareSettings())
    assert split.judged is inputs  # judging is unchanged
    assert split.calibration.count == inputs.count and not split.calibration.user_data
    assert not _rows(split.calibration.samples) & _rows(inputs.samples)


def test_a_single_user_sample_is_kept_for_judging_and_calibration_is_synthesized(tmp_path):
    model = _mlp()
    np.save(tmp_path / "one.npy", np.ones((1, 64), np.float32))
    settings = CompareSettings(inputs_path=str(tmp_path / "one.npy"))
    split = split_for_calibration(parity_inputs(model, settings), model, settings)
    assert split.judged.count == 1 and split.judged.user_data and not split.calibration.user_data
    assert "single sample is kept for judging" in split.note
    assert not RunContext(settings).calibrates_on_user_data(model)  # so GPTQ's "auto" stays off
    np.save(tmp_path / "two.npy", np.ones((2, 64), np.float32))
    assert RunContext(replace(settings, inputs_path=str(tmp_path / "two.npy"))).calibrates_on_user_data(model)


def test_without_a_split_the_context_makes_the_same_one_as_compare(tmp_path):
    """The CLI's shrink has no compare around it: its calibration samples are the ones compare would use."""
    model = _mlp()
    np.savez(tmp_path / "mine.npz", x=np.random.default_rng(2).standard_normal((4, 64)).astype(np.float32))
    settings = CompareSettings(inputs_path=str(tmp_path / "mine.npz"))
    lazy = RunContext(settings).calibration_inputs(model)
    made = split_for_calibration(parity_inputs(model, settings), model, settings).calibration
    assert _rows(lazy.samples) == _rows(made.samples)


def test_compare_judges_a_calibrated_method_only_on_samples_it_did_not_learn_from(tmp_path, monkeypatch):
    model = shrinkray.load(sample_path("mlp"))
    name = model.model.graph.input[0].name
    shape = [d.dim_value or 1 for d in model.model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(3).standard_normal([4, *shape[1:]]).astype(np.float32)
    np.savez(tmp_path / "mine.npz", **{name: x})
    seen: list[ParityInputs] = []
    original = RunContext.calibration_inputs
    monkeypatch.setattr(RunContext, "calibration_inputs", lambda self, *a, **k: seen.append(original(self, *a, **k)) or seen[-1])
    settings = CompareSettings(methods=[("weights-int4", {"min_elements": 1}), ("weights-int8", {})], latency=False,
                               inputs_path=str(tmp_path / "mine.npz"))  # fmt: skip
    c = compare(model, settings)
    int4, int8 = c.variants
    assert int4.ok and int8.ok and seen
    assert int4.parity.samples == 2 and int8.parity.samples == 4  # held out: the other 2 rows
    assert any("judged on the other 2" in n for n in int4.notes)
    assert not any("judged on the other" in n for n in int8.notes)
    learned = {row.tobytes() for p in seen for f in p.samples for row in f[name]}
    assert learned and not learned & {row.tobytes() for row in x[:2]}  # the judged rows were never learned from

"""Interleaved CPU latency: stats for every model, run counts, budget, callback. No timing thresholds."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from shrinkray.errors import RuntimeUnsupportedError
from shrinkray.measure import latency
from shrinkray.measure.latency import LatencyStats, default_threads, measure_latency


def tiny(op: str) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], f"tiny_{op}", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


@pytest.fixture(scope="module")
def models() -> dict[str, onnx.ModelProto]:
    return {"original": tiny("Relu"), "variant": tiny("Tanh")}


@pytest.fixture(scope="module")
def feeds() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)}


@pytest.fixture(scope="module")
def stats(models, feeds) -> dict[str, LatencyStats]:
    return measure_latency(models, feeds, batch=2, threads=1, runs=7, warmup=1)


def test_stats_for_every_model(stats, models):
    assert set(stats) == set(models)


def test_runs_and_percentiles(stats):
    for key, s in stats.items():
        assert 1 <= s.runs <= 7, key
        assert s.runs == 7  # no budget: every requested round runs
        assert s.median_ms > 0
        assert s.p90_ms >= s.median_ms
        assert s.mean_ms > 0
        assert s.session_ms > 0


def test_batch_and_threads_recorded(stats):
    for s in stats.values():
        assert s.batch == 2
        assert s.threads == 1


def test_throughput_is_batch_over_median(stats):
    for s in stats.values():
        assert s.throughput == pytest.approx(s.batch / (s.median_ms / 1000.0))


def test_throughput_zero_median_guard():
    s = LatencyStats(threads=1, batch=8, runs=3, median_ms=0.0, p90_ms=0.0, mean_ms=0.0, session_ms=1.0)
    assert s.throughput == 0.0


def test_as_dict_adds_throughput(stats):
    s = stats["variant"]
    data = s.as_dict()
    assert data["throughput_per_s"] == pytest.approx(s.throughput)
    assert data["runs"] == s.runs and data["batch"] == 2
    json.dumps(data, allow_nan=False)


def test_hand_made_stats_percentile_fields():
    s = LatencyStats(threads=2, batch=4, runs=3, median_ms=2.0, p90_ms=3.0, mean_ms=2.5, session_ms=1.0)
    assert s.throughput == 2000.0
    assert s.as_dict()["threads"] == 2


def test_budget_stops_early_but_three_rounds_minimum(models, feeds):
    result = measure_latency(models, feeds, batch=2, runs=50, warmup=0, budget_s=0.0)
    for s in result.values():
        assert s.runs == 3
        assert s.p90_ms >= s.median_ms > 0


def test_fewer_runs_than_minimum_when_fewer_requested(models, feeds):
    result = measure_latency(models, feeds, batch=2, runs=2, warmup=0, budget_s=0.0)
    assert all(s.runs == 2 for s in result.values())


def test_generous_budget_runs_everything(models, feeds):
    result = measure_latency(models, feeds, batch=2, runs=6, warmup=0, budget_s=600.0)
    assert all(s.runs == 6 for s in result.values())


def test_on_round_callback(models, feeds):
    calls: list[tuple[int, int]] = []
    measure_latency(models, feeds, batch=2, runs=4, warmup=0, on_round=lambda i, n: calls.append((i, n)))
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_on_round_callback_with_budget(models, feeds):
    calls: list[tuple[int, int]] = []
    result = measure_latency(
        models, feeds, batch=2, runs=40, warmup=0, budget_s=0.0, on_round=lambda i, n: calls.append((i, n))
    )
    assert calls == [(1, 40), (2, 40), (3, 40)]
    assert all(s.runs == len(calls) for s in result.values())


def test_single_model_and_threads(feeds):
    result = measure_latency({"only": tiny("Relu")}, feeds, batch=2, threads=2, runs=3, warmup=0)
    assert list(result) == ["only"]
    assert result["only"].threads == 2
    assert result["only"].runs == 3


def test_bad_model_raises_shrinkray_error(feeds):
    bad = tiny("Relu")
    bad.graph.node[0].op_type = "NoSuchOp"
    with pytest.raises(RuntimeUnsupportedError):
        measure_latency({"bad": bad}, feeds, batch=2, runs=3, warmup=0)


@pytest.mark.parametrize(("cores", "expected"), [(1, [1]), (2, [1, 2]), (16, [1, 16])])
def test_default_threads_are_one_and_every_usable_core(cores, expected, monkeypatch):
    monkeypatch.setattr(latency, "usable_cores", lambda: cores)
    assert default_threads() == expected

"""compare(): every method measured side by side with the original (sizes, parity, culprits, latency)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import cached_sample
from onnx import TensorProto, helper, numpy_helper

import shrinkray.compare as compare_module
from shrinkray.compare import ORIGINAL, TRACEABLE, CompareSettings, Comparison, compare
from shrinkray.errors import OptionError, RuntimeUnsupportedError, ShrinkRayError
from shrinkray.io import LoadedModel, serialize
from shrinkray.measure.inputs import InputOptions
from shrinkray.measure.sizes import measure_sizes
from shrinkray.methods import all_methods

METHODS = [spec.name for spec in all_methods()]
LOSSY = [("weights-int8", {}), ("palettize", {}), ("float16", {})]
#: Fast settings: few timed runs, cheap brotli (sizes are checked against the same quality).
FAST = {"runs": 5, "warmup": 1, "latency_budget_s": 1, "culprit_budget_s": 5, "threads": [1], "brotli_quality": 5}


def settings(**overrides) -> CompareSettings:
    return CompareSettings(**(FAST | overrides))


# ------------------------------------------------------------------ mlp, every method, auto


@pytest.fixture(scope="module")
def progress_calls() -> list[tuple[str, float]]:
    return []


@pytest.fixture(scope="module")
def mlp_all(progress_calls) -> Comparison:
    return compare(cached_sample("mlp"), settings(auto=True), progress=lambda s, f: progress_calls.append((s, f)))


def requested(comparison: Comparison):
    return [r for r in comparison.variants if "auto-exclude" not in r.key]


def test_one_result_per_method_plus_original(mlp_all):
    assert mlp_all.original.key == ORIGINAL
    assert mlp_all.all[0] is mlp_all.original
    assert [r.method for r in requested(mlp_all)] == METHODS
    assert [r.key for r in requested(mlp_all)] == METHODS  # no options: the key is the method name
    keys = [r.key for r in mlp_all.all]
    assert len(keys) == len(set(keys))
    assert mlp_all.get("float16").method == "float16"
    with pytest.raises(KeyError):
        mlp_all.get("no-such-variant")


def test_every_method_succeeds_on_mlp(mlp_all):
    for result in mlp_all.variants:
        assert result.ok, (result.key, result.error)
        assert result.model is not None
        assert result.record["tensors_changed"] >= 1


def test_sizes_for_all(mlp_all):
    for result in mlp_all.all:
        assert result.sizes is not None, result.key
        assert result.sizes.raw == len(serialize(result.model))
        assert result.sizes.brotli_quality == 5
        assert 0 < result.sizes.brotli < result.sizes.raw
    original = mlp_all.original.sizes
    assert original == measure_sizes(serialize(cached_sample("mlp")), brotli_quality=5)
    int8 = mlp_all.get("weights-int8")
    assert int8.sizes == measure_sizes(serialize(int8.model), brotli_quality=5)
    for result in mlp_all.variants:
        assert result.sizes.brotli < original.brotli, result.key


def test_original_parity_passes_trivially(mlp_all):
    parity = mlp_all.original.parity
    assert parity is not None and parity.passed
    assert parity.max_abs_error == 0.0
    assert parity.mean_abs_error == 0.0
    assert parity.worst_cosine == pytest.approx(1.0)
    assert [o.name for o in parity.outputs] == ["logits", "probs"]
    assert all(o.top1_agreement == 1.0 for o in parity.outputs)


def test_every_ok_variant_has_parity(mlp_all):
    for result in mlp_all.variants:
        assert result.parity is not None, result.key
        assert [o.name for o in result.parity.outputs] == ["logits", "probs"]
        assert all(o.shape == [4, 10] for o in result.parity.outputs)  # parity batch 4
        assert result.parity.max_abs_error > 0.0  # every method moves the outputs a little


def test_default_tolerance_verdicts(mlp_all):
    assert mlp_all.get("float16").parity.passed
    int8 = mlp_all.get("weights-int8").parity
    assert not int8.passed
    assert int8.max_abs_error > int8.abs_tol == 0.06


def test_input_note_describes_synthesized_inputs(mlp_all):
    assert "Synthesized inputs (seed 0)" in mlp_all.input_note
    assert "features [4, 64] float32" in mlp_all.input_note


def test_culprits_only_for_failing_traceable_variants(mlp_all):
    for result in requested(mlp_all):
        if result.culprits:
            assert result.method in TRACEABLE
            assert not result.parity.passed
        if result.parity.passed or result.method not in TRACEABLE:
            assert result.culprits == [], result.key
    assert mlp_all.get("dynamic-int8").culprits == []  # fails, but not traceable
    assert mlp_all.get("weights-int8").culprits


def test_culprits_name_changed_tensors(mlp_all):
    result = mlp_all.get("weights-int8")
    changed = {c["name"] for c in result.record["changes"]}
    assert changed == {"fc1.weight", "fc2.weight", "fc3.weight"}
    assert {c.tensor for c in result.culprits} == changed  # budget was enough for all three
    ranks = [c.max_abs_error / 0.06 + c.mean_abs_error / 0.02 for c in result.culprits]
    assert ranks == sorted(ranks, reverse=True)
    # one tensor alone moves the outputs less than all three together
    assert all(c.max_abs_error <= result.parity.max_abs_error + 1e-6 for c in result.culprits)
    assert all(c.max_abs_error > 0 for c in result.culprits)


def test_auto_adds_a_passing_exclude_variant(mlp_all):
    autos = [r for r in mlp_all.variants if "auto-exclude" in r.key]
    assert autos
    int8_auto = next(r for r in autos if r.method == "weights-int8")
    assert int8_auto.key.startswith("weights-int8 auto-exclude=")
    assert int8_auto.parity.passed
    culprits = [c.tensor for c in mlp_all.get("weights-int8").culprits]
    count = int(int8_auto.key.split("=")[1])
    assert int8_auto.options["exclude"] == culprits[:count]
    assert count < len(culprits)  # something is still quantized
    assert 0 < int8_auto.record["tensors_changed"] == len(culprits) - count
    assert any("found by --auto" in n for n in int8_auto.notes)
    # measured like any other variant
    assert int8_auto.sizes is not None
    assert int8_auto.sizes.raw == len(serialize(int8_auto.model))
    assert mlp_all.get("weights-int8").sizes.brotli < int8_auto.sizes.brotli < mlp_all.original.sizes.brotli
    assert {s.batch for s in int8_auto.latency} == {1, 8, 32}


def test_latency_for_batches_1_8_32_on_dynamic_mlp(mlp_all):
    for result in mlp_all.all:
        assert [(s.threads, s.batch) for s in result.latency] == [(1, 1), (1, 8), (1, 32)], result.key
        for s in result.latency:
            assert 3 <= s.runs <= 5
            assert s.p90_ms >= s.median_ms > 0
        assert result.latency_at(1, 8).batch == 8
        assert result.latency_at(2, 8) is None
    assert "up to 5 interleaved runs" in mlp_all.latency_note


def test_progress_reported(mlp_all, progress_calls):
    assert progress_calls
    assert progress_calls[-1] == ("Done", 1.0)
    assert all(0.0 <= f <= 1.0 for _, f in progress_calls)
    steps = [s for s, _ in progress_calls]
    assert any(s.startswith("Shrinking: weights-int8") for s in steps)
    assert any(s.startswith("Timing:") for s in steps)


def test_loaded_model_accepted():
    model = cached_sample("tree")
    loaded = LoadedModel(model=model, name="my-tree", file_bytes=model.ByteSize())
    result = compare(loaded, settings(methods=[("float16", {})], latency=False))
    assert result.name == "my-tree"
    assert result.summary.name == "my-tree"


# ------------------------------------------------------------------ failures recorded, errors raised


@pytest.fixture(scope="module")
def messy_failing() -> Comparison:
    methods = [("weights-int8", {"form": "dequantize-linear"}), ("float16", {})]
    return compare(cached_sample("messy"), settings(methods=methods, latency=False))


def test_failed_method_recorded_with_error(messy_failing):
    failed = messy_failing.variants[0]
    assert failed.key == "weights-int8 form=dequantize-linear"
    assert failed.options == {"form": "dequantize-linear"}
    assert not failed.ok
    assert "opset" in failed.error and "11" in failed.error
    assert failed.model is None and failed.sizes is None and failed.parity is None
    assert failed.culprits == [] and failed.latency == []


def test_other_methods_still_measured(messy_failing):
    ok = messy_failing.get("float16")
    assert ok.ok
    assert ok.sizes is not None and ok.sizes.brotli < messy_failing.original.sizes.brotli
    assert ok.parity is not None
    assert [o.name for o in ok.parity.outputs] == ["output", "label", "probs"]
    label = next(o for o in ok.parity.outputs if o.name == "label")
    assert label.exact  # the int64 ArgMax output is compared exactly
    assert messy_failing.original.parity.passed


def test_unknown_method_raises():
    with pytest.raises(ShrinkRayError, match="Unknown method 'no-such-method'"):
        compare(cached_sample("mlp"), settings(methods=[("no-such-method", {})], latency=False))


def test_unknown_method_fails_before_any_work():
    steps: list[str] = []
    with pytest.raises(ShrinkRayError):
        compare(
            cached_sample("mlp"),
            settings(methods=[("float16", {}), ("no-such-method", {})], latency=False),
            progress=lambda s, _f: steps.append(s),
        )
    assert not any(s.startswith("Shrinking") for s in steps)


@pytest.mark.parametrize(
    ("method", "options"),
    [("palettize", {"levels": 1}), ("weights-int8", {"granularity": "per-row"}), ("float16", {"bogus": 1})],
)
def test_bad_options_raise_option_error(method, options):
    with pytest.raises(OptionError):
        compare(cached_sample("mlp"), settings(methods=[(method, options)], latency=False))


def test_same_method_twice_gets_distinct_keys():
    result = compare(
        cached_sample("tree"), settings(methods=[("float16", {}), ("float16", {})], latency=False, culprits=False)
    )
    assert [r.key for r in result.variants] == ["float16", "float16 #2"]


# ------------------------------------------------------------------ tolerances and culprits


@pytest.fixture(scope="module")
def mlp_loose() -> Comparison:
    return compare(cached_sample("mlp"), settings(methods=LOSSY, abs_tol=1e9, mean_tol=1e9, latency=False))


@pytest.fixture(scope="module")
def mlp_tight() -> Comparison:
    return compare(cached_sample("mlp"), settings(methods=LOSSY, abs_tol=1e-9, mean_tol=1e-9, latency=False))


def test_loose_tolerances_all_pass(mlp_loose):
    assert mlp_loose.settings.abs_tol == 1e9
    for result in mlp_loose.all:
        assert result.parity.passed, result.key
        assert result.parity.abs_tol == 1e9 and result.parity.mean_tol == 1e9
        assert result.culprits == []  # nothing fails, so nothing to trace


def test_tight_tolerances_lossy_fail(mlp_tight):
    assert mlp_tight.original.parity.passed  # identical outputs pass any tolerance
    for result in mlp_tight.variants:
        assert not result.parity.passed, result.key
        assert any("max abs error" in o.reason for o in result.parity.outputs)


def test_verdict_changes_with_tolerances_not_errors(mlp_loose, mlp_tight):
    for key in ("weights-int8", "palettize", "float16"):
        loose, tight = mlp_loose.get(key).parity, mlp_tight.get(key).parity
        assert loose.passed and not tight.passed
        assert loose.max_abs_error == pytest.approx(tight.max_abs_error)


def test_culprits_with_tight_tolerances(mlp_tight):
    for key in ("weights-int8", "palettize", "float16"):
        result = mlp_tight.get(key)
        changed = [c["name"] for c in result.record["changes"]]
        assert result.culprits, key
        names = [c.tensor for c in result.culprits]
        assert set(names) == set(changed)
        assert len(names) == len(set(names))
        assert all(not c.passes_alone for c in result.culprits)  # nothing passes 1e-9
        assert all(c.max_abs_error > 1e-9 for c in result.culprits)
        model_tensors = {t.name for t in cached_sample("mlp").graph.initializer}
        assert set(names) <= model_tensors


def test_auto_finds_nothing_under_impossible_tolerances(mlp_tight):
    assert not any("auto-exclude" in r.key for r in mlp_tight.variants)


def test_culprit_budget_zero_leaves_a_note():
    result = compare(
        cached_sample("mlp"),
        settings(methods=[("weights-int8", {})], abs_tol=1e-9, mean_tol=1e-9, latency=False, culprit_budget_s=0),
    )
    variant = result.get("weights-int8")
    assert len(variant.culprits) < 3
    assert any(f"Tested {len(variant.culprits)} of 3 tensors" in n for n in variant.notes)


def test_culprits_off():
    result = compare(
        cached_sample("mlp"),
        settings(methods=[("weights-int8", {})], abs_tol=1e-9, mean_tol=1e-9, latency=False, culprits=False),
    )
    assert not result.get("weights-int8").parity.passed
    assert result.get("weights-int8").culprits == []


# ------------------------------------------------------------------ inputs


@pytest.fixture
def mlp_npz(tmp_path):
    path = tmp_path / "features.npz"
    np.savez(path, features=np.random.default_rng(5).standard_normal((3, 64)).astype(np.float32))
    return path


def test_inputs_path_npz(mlp_npz):
    result = compare(cached_sample("mlp"), settings(methods=[("float16", {})], inputs_path=str(mlp_npz), latency=False))
    assert result.input_note == f"Inputs loaded from {mlp_npz}"
    for r in result.all:
        assert all(o.shape == [3, 10] for o in r.parity.outputs)
    assert result.get("float16").parity.passed


def test_inputs_path_mismatch_raises(tmp_path):
    path = tmp_path / "wrong.npz"
    np.savez(path, x=np.zeros((1, 64), np.float32))
    with pytest.raises(OptionError, match="missing: features"):
        compare(cached_sample("mlp"), settings(methods=[("float16", {})], inputs_path=str(path), latency=False))


def test_inputs_path_latency_measured_on_dynamic_model(mlp_npz):
    result = compare(
        cached_sample("mlp"), settings(methods=[("float16", {})], inputs_path=str(mlp_npz), runs=3, culprits=False)
    )
    assert result.original.latency
    assert result.original.latency[0].batch == 3


def test_seed_changes_synthesized_inputs():
    a = compare(cached_sample("mlp"), settings(methods=[("float16", {})], latency=False, culprits=False))
    b = compare(
        cached_sample("mlp"),
        settings(methods=[("float16", {})], latency=False, culprits=False, inputs=InputOptions(seed=9)),
    )
    assert "seed 9" in b.input_note
    assert a.get("float16").parity.max_abs_error != b.get("float16").parity.max_abs_error


def fixed_dim_model() -> onnx.ModelProto:
    """y = x + w with w of 7 values: x's free dim must be 7, which no guess gives."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])
    w = numpy_helper.from_array(np.arange(7, dtype=np.float32), "w")
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "needs7", [x], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model


def test_model_rejecting_synthesized_inputs_explains_dim():
    with pytest.raises(RuntimeUnsupportedError) as info:
        compare(fixed_dim_model(), settings(methods=[("float16", {})], latency=False))
    text = str(info.value)
    assert "--dim" in text
    assert "rejected the inputs" in text


def test_model_rejecting_synthesized_inputs_raises():
    """Whatever the exception type, compare does not silently succeed with a rejected input."""
    with pytest.raises(Exception, match="broadcast|7|dimension"):
        compare(fixed_dim_model(), settings(methods=[("float16", {})], latency=False))


def test_dim_option_fixes_the_rejection():
    result = compare(
        fixed_dim_model(),
        settings(methods=[("float16", {})], latency=False, inputs=InputOptions(dims={"x:0": 7})),
    )
    assert result.original.parity.passed
    assert result.original.parity.outputs[0].shape == [7]
    assert "x [7] float32" in result.input_note


def add_model(length: int | None) -> onnx.ModelProto:
    """y = x + w, with w of 1 value (any x works) or of ``length`` values (x must have that length)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])
    w = numpy_helper.from_array(np.ones(length or 1, dtype=np.float32), "w")
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "add", [x], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def test_variant_failing_at_run_time_is_recorded(monkeypatch):
    real_shrink = compare_module.shrink

    def shrink_with_a_broken_palettize(source, method, **options):
        variant = real_shrink(source, method, **options)
        if method == "palettize":
            variant.model = add_model(7)  # opens in ONNX Runtime, rejects the 4-element input when run
        return variant

    monkeypatch.setattr(compare_module, "shrink", shrink_with_a_broken_palettize)
    result = compare(add_model(None), settings(methods=[("palettize", {}), ("float16", {})], latency=False))
    assert not result.get("palettize").ok
    assert result.get("float16").parity.passed


# ------------------------------------------------------------------ tree: nothing to change


@pytest.fixture(scope="module")
def tree_all() -> Comparison:
    return compare(cached_sample("tree"), settings(latency=False))


def test_tree_nothing_changes(tree_all):
    original_bytes = serialize(cached_sample("tree"))
    assert [r.method for r in tree_all.variants] == METHODS
    for result in tree_all.variants:
        assert result.ok, result.error
        assert result.record["tensors_changed"] == 0
        assert result.notes  # says why nothing changed
        assert serialize(result.model) == original_bytes
        assert result.sizes == tree_all.original.sizes
        assert result.parity.passed
        assert result.parity.max_abs_error == 0.0
        assert result.culprits == []
    label = next(o for o in tree_all.original.parity.outputs if o.name == "label")
    assert label.exact and label.mismatch_fraction == 0.0


# ------------------------------------------------------------------ latency settings


@pytest.fixture(scope="module")
def subgraph_timed() -> Comparison:
    return compare(cached_sample("subgraph"), settings(methods=[("float16", {})], runs=3))


def test_fixed_shape_model_timed_at_its_own_batch_only(subgraph_timed):
    for result in subgraph_timed.all:
        assert len(result.latency) == 1, result.key
        stats = result.latency[0]
        assert stats.batch == 1  # x is [1, 128]
        assert stats.threads == 1
        assert 3 <= stats.runs <= 3
    assert "features" not in subgraph_timed.input_note
    assert "use_branch_a [] bool" in subgraph_timed.input_note


def test_explicit_batches_setting():
    result = compare(cached_sample("tree"), settings(methods=[("float16", {})], batches=[2], runs=3, culprits=False))
    assert [(s.threads, s.batch) for s in result.original.latency] == [(1, 2)]
    assert [(s.threads, s.batch) for s in result.get("float16").latency] == [(1, 2)]


def test_latency_off():
    result = compare(cached_sample("tree"), settings(methods=[("float16", {})], latency=False))
    assert all(r.latency == [] for r in result.all)
    assert result.latency_note == ""


def test_recorded_batch_is_the_batch_actually_run(monkeypatch):
    seen: list[tuple[int, int]] = []
    real = compare_module.measure_latency

    def spy(models, feeds, **kwargs):
        seen.append((kwargs["batch"], feeds["features"].shape[0]))
        return real(models, feeds, **kwargs)

    monkeypatch.setattr(compare_module, "measure_latency", spy)
    compare(
        cached_sample("mlp"),
        settings(methods=[("float16", {})], runs=3, culprits=False, inputs=InputOptions(dims={"batch": 2})),
    )
    assert seen
    assert all(recorded == actual for recorded, actual in seen), seen


def test_parity_budget_gives_a_clear_partial_result():
    from shrinkray.advice import advise

    settings = CompareSettings(latency=False, culprits=False, brotli_quality=5, parity_budget_s=0.0)
    c = compare(cached_sample("mlp"), settings)
    assert c.original.parity is not None and c.original.parity.passed
    for result in c.variants:
        assert result.sizes is not None  # sizes are still measured
        assert result.parity is None
        assert any(n.startswith("Parity not measured") and "SHRINKRAY_MAX_RUN_SECONDS" in n for n in result.notes)
    texts = [a.text for a in advise(c)]
    assert sum("Parity not measured" in t for t in texts) == len(c.variants)
    assert texts[0].startswith("No variant is both smaller")

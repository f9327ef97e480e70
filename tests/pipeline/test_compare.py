"""compare(): every method measured side by side with the original (sizes, parity, culprits, latency)."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from helpers import cached_sample, framed_audio_model
from onnx import TensorProto, helper, numpy_helper

import shrinkray.measure.parity_inputs as parity_inputs_module
import shrinkray.pipeline.compare as compare_module
from shrinkray.errors import OptionError, RuntimeUnsupportedError, ShrinkRayError
from shrinkray.io.files import LoadedModel, serialize
from shrinkray.measure.inputs import InputOptions
from shrinkray.measure.parity import RELATIVE_PROFILE, VerdictSettings
from shrinkray.measure.results import ORIGINAL, CompareSettings, Comparison
from shrinkray.measure.sizes import measure_sizes
from shrinkray.methods import all_methods, get_method
from shrinkray.pipeline.compare import compare
from shrinkray.verdict.advice import advise

METHODS = [spec.name for spec in all_methods() if spec.in_default_set]  # what a plain compare runs
LOSSY = [("weights-int8", {}), ("palettize", {}), ("float16", {})]
#: Fast settings: few timed runs, cheap brotli (sizes are checked against the same quality).
FAST = {"runs": 5, "warmup": 1, "latency_budget_s": 1, "culprit_budget_s": 5, "threads": [1], "brotli_quality": 5,
        "culprits": True}
#: The original script's tolerances (max abs 0.06, mean abs 0.02, cosine 0.99), under which the int8 and
#: palettized mlp fail: the culprit search and --auto need failing variants.
ABSOLUTE = VerdictSettings(profile="absolute")


def absolute(max_abs: float, max_mean: float) -> VerdictSettings:
    return VerdictSettings(profile="absolute", criteria={"max_abs_error": max_abs, "max_mean_abs_error": max_mean})


def settings(**overrides) -> CompareSettings:
    return CompareSettings(**(FAST | overrides))


# ------------------------------------------------------------------ mlp, every method, auto


@pytest.fixture(scope="module")
def progress_calls() -> list[tuple[str, float]]:
    return []


@pytest.fixture(scope="module")
def mlp_all(progress_calls) -> Comparison:
    return compare(
        cached_sample("mlp"),
        settings(auto=True, verdict=ABSOLUTE, batches=[1, 8, 32]),
        progress=lambda s, f: progress_calls.append((s, f)),
    )


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
        assert all(o.shape[-2:] == [4, 10] for o in result.parity.outputs)  # batches of 4 (parity_batch)
        assert result.parity.max_abs_error > 0.0  # every method moves the outputs a little


def test_absolute_profile_verdicts(mlp_all):
    assert mlp_all.settings.verdict.profile == "absolute"
    assert mlp_all.get("float16").parity.passed
    int8 = mlp_all.get("weights-int8").parity
    assert not int8.passed
    assert int8.verdict.profile == "absolute"
    assert int8.max_abs_error > 0.06
    assert int8.decided_by.startswith("logits (scores): abs error")


def test_relative_profile_judges_the_mlp_by_its_decisions():
    """The default verdict: the int8 and palettized mlp keep (nearly) every top-1 class, so they pass."""
    result = compare(cached_sample("mlp"), settings(methods=LOSSY, latency=False))
    assert result.settings.verdict == VerdictSettings()
    for variant in result.variants:
        parity = variant.parity
        assert parity.passed, (variant.key, parity.decided_by)
        # 40 batches of 4 classifications, and the 120 of the reserve when those leave a verdict undecided
        assert parity.samples in (parity_inputs_module.MIN_DECISIONS, 4 * parity_inputs_module.MIN_DECISIONS)
        by_name = {o.name: o for o in parity.outputs}
        assert by_name["logits"].kind == by_name["probs"].kind == "scores"
        assert by_name["logits"].top1_agreement >= 0.99
        assert 0.0 <= parity.severity < 1.0
        assert variant.culprits == []  # nothing failed, so no culprit search
    assert result.get("weights-int8").parity.max_abs_error > 0.06  # what the absolute profile fails on


def test_input_note_describes_synthesized_inputs(mlp_all):
    assert "Synthesized inputs (40 batches of 4, seeds 0-39)" in mlp_all.input_note
    assert "features [4, 64] float32" in mlp_all.input_note
    # what a variant's verdict may rest on past the first 160 decisions is said too (the cards say "632 of 638")
    held = re.search(r"; (\d+) more held back for a verdict these leave undecided$", mlp_all.input_note)
    assert held and 400 <= int(held[1]) <= 480  # 120 batches of 4, ties between the top two classes aside


def test_culprits_only_for_failing_traceable_variants(mlp_all):
    for result in requested(mlp_all):
        if result.culprits:
            assert get_method(result.method).traceable
            assert not result.parity.passed
        if result.parity.passed or not get_method(result.method).traceable:
            assert result.culprits == [], result.key
    assert mlp_all.get("dynamic-int8").culprits == []  # fails, but not traceable
    assert mlp_all.get("weights-int8").culprits


def test_culprits_name_changed_tensors(mlp_all):
    result = mlp_all.get("weights-int8")
    changed = {c["name"] for c in result.record["changes"]}
    assert changed == {"fc1.weight", "fc2.weight", "fc3.weight"}
    assert {c.tensor for c in result.culprits} == changed  # budget was enough for all three
    ranks = [c.severity for c in result.culprits]
    assert ranks == sorted(ranks, reverse=True)
    for c in result.culprits:  # the share of the absolute profile's allowed error the tensor uses
        shares = (c.max_abs_error / 0.06, c.mean_abs_error / 0.02, (1 - c.worst_cosine) / 0.01)
        assert c.severity == pytest.approx(max(shares))
        assert c.passes_alone is (c.severity <= 1.0)
    # one tensor alone moves the outputs less than all three together
    assert all(c.max_abs_error <= result.parity.max_abs_error + 1e-6 for c in result.culprits)
    assert all(c.max_abs_error > 0 for c in result.culprits)


def test_auto_adds_a_passing_exclude_variant(mlp_all):
    autos = [r for r in mlp_all.variants if "auto-exclude" in r.key]
    assert autos
    int8_auto = autos[0]  # absolute abs error on 40 samples: palettize passes with two tensors left in float
    assert int8_auto.key.startswith(f"{int8_auto.method} auto-exclude=")
    assert int8_auto.parity.passed
    culprits = [c.tensor for c in mlp_all.get(int8_auto.method).culprits]
    count = int(int8_auto.key.split("=")[1])
    assert int8_auto.options["exclude"] == culprits[:count]
    assert count < len(culprits)  # something is still quantized
    assert 0 < int8_auto.record["tensors_changed"] == len(culprits) - count
    assert any("found by the automatic fix" in n for n in int8_auto.notes)
    # measured like any other variant
    assert int8_auto.sizes is not None
    assert int8_auto.sizes.raw == len(serialize(int8_auto.model))
    assert mlp_all.get(int8_auto.method).sizes.brotli < int8_auto.sizes.brotli < mlp_all.original.sizes.brotli
    assert {s.batch for s in int8_auto.latency} == {1, 8, 32}


def test_latency_for_batches_1_8_32_on_dynamic_mlp(mlp_all):
    for result in mlp_all.all:
        assert [(s.threads, s.batch) for s in result.latency] == [(1, 1), (1, 8), (1, 32)], result.key
        pairs = len([v for v in mlp_all.variants if v.ok]) if result.key == ORIGINAL else 1
        for s in result.latency:
            assert 3 * pairs <= s.runs <= 5 * pairs  # the original runs beside each variant in turn
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
    return compare(cached_sample("mlp"), settings(methods=LOSSY, verdict=absolute(1e9, 1e9), latency=False))


@pytest.fixture(scope="module")
def mlp_tight() -> Comparison:
    return compare(cached_sample("mlp"), settings(methods=LOSSY, verdict=absolute(1e-9, 1e-9), latency=False))


def test_loose_tolerances_all_pass(mlp_loose):
    assert mlp_loose.settings.verdict.criteria == {"max_abs_error": 1e9, "max_mean_abs_error": 1e9}
    for result in mlp_loose.all:
        assert result.parity.passed, result.key
        assert result.parity.verdict is mlp_loose.settings.verdict
        assert result.culprits == []  # nothing fails, so nothing to trace


def test_tight_tolerances_lossy_fail(mlp_tight):
    assert mlp_tight.original.parity.passed  # identical outputs pass any tolerance
    for result in mlp_tight.variants:
        assert not result.parity.passed, result.key
        assert any(o.reason.startswith("abs error") for o in result.parity.outputs)
        assert all(c.passed is False for o in result.parity.outputs for c in o.checks if c.criterion == "max_abs_error")


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
        settings(methods=[("weights-int8", {})], verdict=absolute(1e-9, 1e-9), latency=False, culprit_budget_s=0),
    )
    variant = result.get("weights-int8")
    assert len(variant.culprits) < 3
    assert any(f"Tested {len(variant.culprits)} of 3 tensors" in n for n in variant.notes)


def test_culprits_are_off_by_default():
    assert CompareSettings().culprits is False  # only on request (or with auto): they cost a run per tensor
    result = compare(
        cached_sample("mlp"),
        settings(methods=[("weights-int8", {})], verdict=absolute(1e-9, 1e-9), latency=False, culprits=False),
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
    assert result.input_note == f"Inputs loaded from {mlp_npz.name}"  # the file's name, not where it lives
    for r in result.all:
        assert all(o.shape == [3, 10] for o in r.parity.outputs)
    # 3 samples keep every top class, but 3 decisions cannot show that 97% would be kept: undecided, not a pass
    assert result.get("float16").parity.status == "undecided"
    assert "Give more inputs of your own" in " ".join(a.text for a in advise(result) if a.variant == "float16")


def test_a_big_user_batch_runs_a_few_rows_at_a_time_and_every_row_is_judged(tmp_path, monkeypatch):
    """30 pages in one run took a PP-OCRv6 detector's int8 past the 60 s an inference may take: a user's batch
    runs USER_ROWS_PER_RUN rows at a time, and the verdict still rests on every row."""
    path = tmp_path / "big.npz"
    rows = np.random.default_rng(5).standard_normal((10, 64)).astype(np.float32)
    np.savez(path, features=rows)
    calls = []
    real = parity_inputs_module.run_within

    def counted(session, feeds, *args, **kwargs):
        calls.append(len(feeds["features"]))
        return real(session, feeds, *args, **kwargs)

    monkeypatch.setattr(parity_inputs_module, "run_within", counted)
    result = compare(cached_sample("mlp"), settings(methods=[("float16", {})], inputs_path=str(path), latency=False))
    assert result.input_note == "Inputs loaded from big.npz (5 runs of 2 rows)"
    assert max(calls) <= parity_inputs_module.USER_ROWS_PER_RUN and calls[:5] == [2] * 5
    top1 = result.get("float16").parity.outputs[0].checks[0]
    assert top1.decisions == 10  # every row of the file, none dropped or doubled


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
    assert "seeds 9-" in b.input_note
    assert a.get("float16").parity.mean_abs_error != b.get("float16").parity.mean_abs_error


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
    from app_ui.controls import app_message
    from shrinkray.cli import cli_message

    exc = info.value
    assert exc.setting == "inputs"  # each front end words the fix as its own controls
    assert exc.problem.startswith("The original model could not run on the synthesized inputs (as guessed: ")
    assert "It also refused" in exc.problem  # other sizes were tried before giving up
    assert "\n" not in str(exc)
    assert "--dim" not in str(exc)  # the engine names no CLI flag
    assert "--dim NAME=VALUE" in cli_message(exc)
    assert "Inputs used for parity" in app_message(exc)


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
            variant.session = None
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
    real = compare_module._runner

    def spy(files, threads, feeds, *more):
        runner = real(files, threads, feeds, *more)
        seen.append((runner.args[1]["features"].shape[0], feeds["features"].shape[0]))
        return runner

    real_pairwise = compare_module.time_pairwise

    def spy_pairwise(*args, **kwargs):
        stats = real_pairwise(*args, **kwargs)
        seen.extend((s.batch, kwargs["batch"]) for s in stats.values())
        return stats

    monkeypatch.setattr(compare_module, "_runner", spy)
    monkeypatch.setattr(compare_module, "time_pairwise", spy_pairwise)
    compare(
        cached_sample("mlp"),
        settings(methods=[("float16", {})], runs=3, culprits=False, inputs=InputOptions(dims={"batch": 2})),
    )
    assert seen
    assert all(recorded == actual for recorded, actual in seen), seen


@pytest.mark.slow  # every method, dynamic-int8 included, run afresh
def test_parity_budget_gives_a_clear_partial_result():
    from shrinkray.verdict.advice import advise

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


# ------------------------------------------------------------------ verdicts in each output's own terms


def box_model() -> onnx.ModelProto:
    """A box regressor in pixel units: boxes = relu(features @ w1) @ w2 * 100 + 320 (outputs ~0..640 px)."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array((rng.standard_normal((64, 256)) / 8).astype(np.float32), "w1"),
        numpy_helper.from_array((rng.standard_normal((256, 4)) / 16).astype(np.float32), "w2"),
        numpy_helper.from_array(np.array([100.0], np.float32), "scale"),
        numpy_helper.from_array(np.array([320.0], np.float32), "centre"),
    ]
    nodes = [
        helper.make_node("MatMul", ["features", "w1"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["o"]),
        helper.make_node("Mul", ["o", "scale"], ["px"]),
        helper.make_node("Add", ["px", "centre"], ["boxes"]),
    ]
    graph = helper.make_graph(
        nodes, "boxes", [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, ["batch", 4])], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model


def test_pixel_outputs_fail_the_absolute_tolerance_but_pass_in_their_own_terms():
    model = box_model()
    methods = [("weights-int8", {})]
    relative = compare(model, settings(methods=methods, latency=False, culprits=False)).get("weights-int8")
    absolute_ = compare(model, settings(methods=methods, latency=False, culprits=False, verdict=ABSOLUTE))
    absolute_ = absolute_.get("weights-int8")
    assert relative.record["tensors_changed"] >= 1
    boxes = relative.parity.outputs[0]
    assert (boxes.name, boxes.kind) == ("boxes", "continuous")
    assert boxes.max_abs_error > 0.06  # a fraction of a pixel, far above 0.06
    assert boxes.measures["range"] > 100  # boxes span hundreds of pixels
    assert boxes.measures["relative_error"] < 0.01
    assert relative.parity.passed, relative.parity.decided_by
    assert relative.parity.decided_by.startswith("boxes (continuous): relative rms error")
    assert not absolute_.parity.passed
    assert absolute_.parity.outputs[0].max_abs_error == boxes.max_abs_error  # same numbers, another verdict
    assert absolute_.parity.decided_by.startswith("boxes (continuous): abs error")


def logits_model(bias: list[float]) -> onnx.ModelProto:
    """logits = features @ w + bias with a tiny w: the bias decides the top-1 class everywhere."""
    w = (np.random.default_rng(1).standard_normal((64, 10)) * 1e-4).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["features", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["logits"])],
        "logits",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(bias, np.float32), "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model


ORIGINAL_BIAS = [10.02, 10.0, 9.9, 9.8, 9.7, 9.6, 9.5, 9.4, 9.3, 9.2]  # class 0 wins by 0.02
FLIPPED_BIAS = [10.02, 10.04, 9.9, 9.8, 9.7, 9.6, 9.5, 9.4, 9.3, 9.2]  # class 1 now wins, by 0.02


def compare_with_variant(source: onnx.ModelProto, variant_model: onnx.ModelProto, monkeypatch, **overrides):
    """compare() where the float16 method returns ``variant_model`` (a variant with a known change)."""
    real_shrink = compare_module.shrink

    def shrink(model, method, **options):
        variant = real_shrink(model, method, **options)
        variant.model = variant_model
        variant.session = None  # the session validation opened belongs to the replaced model
        return variant

    monkeypatch.setattr(compare_module, "shrink", shrink)
    return compare(source, settings(methods=[("float16", {})], latency=False, culprits=False, **overrides))


def test_a_changed_top1_fails_although_cosine_stays_above_099(monkeypatch):
    source, variant = logits_model(ORIGINAL_BIAS), logits_model(FLIPPED_BIAS)
    result = compare_with_variant(source, variant, monkeypatch).get("float16")
    logits = result.parity.outputs[0]
    assert logits.kind == "scores"
    assert logits.cosine > 0.9999
    assert logits.max_abs_error == pytest.approx(0.04, abs=1e-5)
    assert logits.top1_agreement == 0.0  # every position now picks class 1
    assert not result.parity.passed
    assert [c.criterion for c in logits.checks if not c.passed] == ["min_top1_agreement"]
    limit = RELATIVE_PROFILE["scores"]["min_top1_agreement"]
    assert result.parity.decided_by == f"logits (scores): top1 agreement 0 (needs >= {limit:g})"
    # the absolute tolerances are blind to it: 0.04 < 0.06 and the cosine is near 1
    blind = compare_with_variant(source, variant, monkeypatch, verdict=ABSOLUTE).get("float16")
    assert blind.parity.passed


def test_an_unchanged_top1_with_the_same_error_passes(monkeypatch):
    """The same 0.04 change on a class that does not win: decisions kept, the verdict passes."""
    bias = list(ORIGINAL_BIAS)
    bias[5] += 0.04
    result = compare_with_variant(logits_model(ORIGINAL_BIAS), logits_model(bias), monkeypatch).get("float16")
    logits = result.parity.outputs[0]
    assert logits.max_abs_error == pytest.approx(0.04, abs=1e-5)
    assert logits.top1_agreement == 1.0
    assert result.parity.passed


def test_output_kind_override_changes_the_verdict(monkeypatch):
    source, variant = logits_model(ORIGINAL_BIAS), logits_model(FLIPPED_BIAS)
    as_values = VerdictSettings(kinds={"logits": "continuous"})
    result = compare_with_variant(source, variant, monkeypatch, verdict=as_values).get("float16")
    logits = result.parity.outputs[0]
    assert logits.kind == "continuous" and logits.kind_reason == "set by you"
    assert logits.top1_agreement is None
    # judged as values relative to their range (about 0.8 here), 0.04 at one place of ten is within 10%
    assert logits.measures["relative_error"] < 0.1
    strict = VerdictSettings(per_output={"logits": {"max_relative_error": 0.01}}, kinds={"logits": "continuous"})
    assert not compare_with_variant(source, variant, monkeypatch, verdict=strict).get("float16").parity.passed


# ------------------------------------------------------------------ samples and probing


def embedding_model() -> onnx.ModelProto:
    """x [N, 8] -> embedding [N, 16]: a free batch axis and no class scores (nothing decided by top-1)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])
    y = helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["N", 16])
    w = numpy_helper.from_array(np.random.default_rng(0).normal(size=(8, 16)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["embedding"])], "emb", [x], [y], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def test_parity_runs_on_one_batch_when_the_batch_axis_is_free():
    inputs = parity_inputs_module.parity_inputs(embedding_model(), settings(parity_batch=6))
    assert len(inputs.samples) == 1 and inputs.count == 6
    assert inputs.samples[0]["x"].shape == (6, 8)
    assert inputs.reference["embedding"].shape == (6, 16)
    assert "one batch of 6" in inputs.note
    assert inputs.tried == []


def test_a_classifier_gets_enough_decisions_for_its_top1_verdict():
    """6 classifications cannot pass at 0.97 agreement with 95% confidence: more batches of the same size
    until 160 are decided, and a reserve of 3x as many for a variant those leave undecided."""
    inputs = parity_inputs_module.parity_inputs(cached_sample("mlp"), settings(parity_batch=6))
    assert len(inputs.samples) == 27 and inputs.count == 162  # 27 batches of 6 >= MIN_DECISIONS
    assert len(inputs.reserve) == 81 and inputs.reserve_reference["logits"].shape == (81, 6, 10)
    assert all(s["features"].shape == (6, 64) for s in inputs.samples)
    assert not np.array_equal(inputs.samples[0]["features"], inputs.samples[1]["features"])  # other seeds
    assert inputs.reference["logits"].shape == (27, 6, 10)
    assert parity_inputs_module.decisions_given(inputs.reference, inputs.kinds) >= parity_inputs_module.MIN_DECISIONS
    assert "27 batches of 6, seeds 0-26" in inputs.note and "161 decisions" in inputs.note
    assert not np.array_equal(inputs.reserve[0]["features"], inputs.samples[-1]["features"])  # seeds 27-107


def fixed_batch_classifier() -> onnx.ModelProto:
    """x [1, 8] -> logits [1, 5]: a batch axis fixed at 1, so samples come as runs."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 5])
    w = numpy_helper.from_array(np.random.default_rng(1).normal(size=(8, 5)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["logits"])], "cls", [x], [y], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def test_a_fixed_batch_classifier_gets_more_runs():
    inputs = parity_inputs_module.parity_inputs(fixed_batch_classifier(), settings())
    assert len(inputs.samples) == inputs.count == parity_inputs_module.MIN_DECISIONS
    assert inputs.reference["logits"].shape == (160, 1, 5)
    assert "(160 runs, seeds 0-159)" in inputs.note


def test_a_slow_set_of_samples_is_not_repeated(monkeypatch):
    monkeypatch.setattr(parity_inputs_module, "SLOW_SET_S", 0.0)
    inputs = parity_inputs_module.parity_inputs(cached_sample("mlp"), settings(parity_batch=6))
    assert len(inputs.samples) == 1 and inputs.count == 6 and "one batch of 6" in inputs.note
    assert "only 6 decisions" in inputs.note and "too few for a verdict to pass" in inputs.note
    assert not inputs.reserve


def test_more_decisions_stay_within_the_output_bytes(monkeypatch):
    monkeypatch.setattr(parity_inputs_module, "DECISIONS_MAX_BYTES", 3 * 2 * 6 * 10 * 4)  # three sets of both outputs
    inputs = parity_inputs_module.parity_inputs(cached_sample("mlp"), settings(parity_batch=6))
    assert len(inputs.samples) == 3 and inputs.count == 18
    assert not inputs.reserve  # no bytes left for it


def line_reader(classes: int = 100) -> onnx.ModelProto:
    """[batch, 8 steps, 16] -> [batch, 8, classes] scores: a reader of a big alphabet, each step its own class."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, 16])
    y = helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", 8, classes])
    w = numpy_helper.from_array(np.random.default_rng(3).normal(size=(16, classes)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["scores"])], "reader", [x], [y], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def test_sets_past_the_output_bytes_are_judged_by_their_top_classes(monkeypatch):
    """A big alphabet's full outputs fit few sets in memory (PP-OCRv5's reader: 20 lines in 64 MiB, too few
    for any verdict); further sets keep each position's top class, and every variant is judged on them too."""
    per_set = 2 * 8 * 100 * 4
    monkeypatch.setattr(parity_inputs_module, "DECISIONS_MAX_BYTES", 2 * per_set)  # two sets held in full
    model = line_reader()
    inputs = parity_inputs_module.parity_inputs(model, settings(parity_batch=2))
    assert len(inputs.samples) == 2 and inputs.tally and set(inputs.tally_reference) == {"scores"}
    assert inputs.tally_reference["scores"].shape == (len(inputs.tally), 2, 8, 2)
    held = parity_inputs_module.decisions_given(inputs.reference, inputs.kinds)
    given = parity_inputs_module.decisions_given(inputs.reference, inputs.kinds, inputs.tally_reference)
    assert held <= 32 and given >= 4 * held  # sets for 160 decisions at the first set's rate
    assert "judged by each position's top class alone to spare memory" in inputs.note
    assert f"{given} decisions in all" in inputs.note
    assert "as many as the outputs' memory allows" not in inputs.note
    result = compare(model, settings(methods=[("float16", {}), ("weights-int8", {})], latency=False, parity_batch=2))
    for variant in result.variants:
        judged = variant.parity.outputs[0]
        assert judged.measures["positions"] == 16 * (2 + len(inputs.tally)), judged.measures
    assert result.original.parity.samples == 2 * (2 + len(inputs.tally))


def test_a_verdict_the_tally_leaves_undecided_is_judged_again_with_the_tallys_reserve(monkeypatch):
    """PP-OCRv4's reader: weights-int8 read 155 of 160 lines the same, either side of the bar; more tallied
    sets are held back (their top classes only), run for a variant only when the tally leaves it undecided."""
    per_set = 2 * 8 * 100 * 4
    monkeypatch.setattr(parity_inputs_module, "DECISIONS_MAX_BYTES", 2 * per_set)  # two sets held in full
    model = line_reader()
    inputs = parity_inputs_module.parity_inputs(model, settings(parity_batch=2))
    assert inputs.tally and inputs.tally_reserve and not inputs.reserve
    input_bytes = 2 * 8 * 16 * 4
    assert len(inputs.tally_reserve) == min(3 * (2 + len(inputs.tally)), 2 * per_set // input_bytes)
    assert not np.array_equal(inputs.tally_reserve[0]["x"], inputs.tally[-1]["x"])  # other seeds
    assert "held back for a verdict these leave undecided" in inputs.note
    merged = inputs.with_tally_reserve()
    assert len(merged.tally) == len(inputs.tally) + len(inputs.tally_reserve) and not merged.tally_reserve
    assert merged.tally_reference["scores"].shape[0] == len(merged.tally)
    real_judge, seen = compare_module.judge, []

    def undecided_on_the_tally_alone(reference, outputs, judged, verdict, tally=None):
        parity = real_judge(reference, outputs, judged, verdict, tally)
        seen.append(len(judged.tally))
        if len(judged.tally) == len(inputs.tally):  # as if its decisions straddled the bar
            parity.outputs[0].status, parity.outputs[0].passed = "undecided", False
        return parity

    monkeypatch.setattr(compare_module, "judge", undecided_on_the_tally_alone)
    result = compare(model, settings(methods=[("float16", {})], latency=False, parity_batch=2))
    (variant,) = result.variants
    assert seen[-2:] == [len(inputs.tally), len(merged.tally)]
    assert variant.parity.status == "pass"
    assert variant.parity.outputs[0].measures["positions"] == 16 * (2 + len(merged.tally))


def test_parity_runs_several_seeds_when_the_batch_is_fixed():
    inputs = parity_inputs_module.parity_inputs(cached_sample("subgraph"), settings(parity_batch=3))
    assert len(inputs.samples) == 3 and inputs.count == 3
    first, second = inputs.samples[0]["x"], inputs.samples[1]["x"]
    assert first.shape == (1, 128) and not np.array_equal(first, second)  # seeds 0, 1, 2
    assert inputs.reference["y"].shape == (3, 1, 128)  # stacked on a new axis 0
    assert "3 runs, seed 0" in inputs.note
    result = compare(cached_sample("subgraph"), settings(methods=[("float16", {})], latency=False, parity_batch=3))
    assert result.original.parity.samples == 3
    assert [o.shape for o in result.get("float16").parity.outputs] == [[3, 1, 128], [3, 1, 128]]


def test_probing_finds_the_frame_length_of_a_streaming_speech_model(capfd):
    model = framed_audio_model(512)
    result = compare(model, settings(methods=[("float16", {}), ("weights-int8", {})], runs=3))
    note = result.input_note
    assert "audio [1, 512] float32, state [2, 1, 16] float32" in note  # the state's batch matches the audio's
    assert "content audio as speech, state as zeros (initial state)" in note
    assert "found by trying other sizes: length 512; refused: as guessed" in note
    parity = result.original.parity
    # one clip in STREAM_STEPS consecutive chunks (the batch being fixed by the state), the state fed back
    steps = parity_inputs_module.STREAM_STEPS
    assert "audio as consecutive chunks of one" in note
    assert parity.passed and parity.samples == steps and f"judged streaming over {steps} steps" in note
    assert [o.shape for o in parity.outputs] == [[steps, 1, 16], [steps, 2, 1, 16]]
    for variant in result.variants:
        assert variant.ok and variant.parity is not None, variant.error
    # latency runs on the sizes that worked
    assert all(r.latency and r.latency[0].batch == 1 for r in result.all)
    err = capfd.readouterr().err
    assert "onnxruntime" not in err.lower() and "[E:" not in err and "[W:" not in err, err


def test_probing_records_every_size_it_tried():
    inputs = parity_inputs_module.parity_inputs(framed_audio_model(512), settings())
    assert len(inputs.tried) == 1 and inputs.tried[0].startswith("as guessed: ")
    assert "Reshape node: The input tensor cannot be reshaped" in inputs.tried[0]
    assert inputs.options.dims == {"audio:1": 512}  # what latency runs use


def test_probing_a_rank1_input_tries_lengths():
    """y = x + w with 64 weights: x's only (free) axis is a length, found by the length probes."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])
    w = numpy_helper.from_array(np.ones(64, dtype=np.float32), "w")
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "needs64", [x], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    inputs = parity_inputs_module.parity_inputs(model, settings())
    assert inputs.samples[0]["x"].shape == (64,)
    assert "length 64" in inputs.note and "refused: as guessed" in inputs.note


def test_a_model_refusing_every_probe_gives_one_line_naming_the_problem():
    from app_ui.controls import app_message
    from shrinkray.cli import cli_message

    with pytest.raises(RuntimeUnsupportedError) as info:
        compare(framed_audio_model(511), settings(methods=[("float16", {})], latency=False))
    exc = info.value
    assert exc.setting == "inputs"
    assert "Reshape node: The input tensor cannot be reshaped to the requested shape" in exc.problem
    assert "requested shape:{1,-1,511}" in exc.problem
    assert "It also refused 5 other sizes" in exc.problem  # lengths 512, 64, 1024, 4096, 16000
    cli_text, app_text = cli_message(exc), app_message(exc)
    for text in (cli_text, app_text):
        assert "\n" not in text and text.startswith(exc.problem)
    assert "--dim NAME=VALUE" in cli_text and "--inputs" in cli_text
    assert "On the Compare page" in app_text and "--" not in app_text


def test_the_dim_the_probes_could_not_guess_fixes_it():
    result = compare(
        framed_audio_model(511),
        settings(methods=[("float16", {})], latency=False, inputs=InputOptions(dims={"audio:1": 1022})),
    )
    assert result.original.parity.passed
    assert "audio [1, 1022]" in result.input_note and "trying other sizes" not in result.input_note


def test_a_failed_node_is_named_in_its_own_words():
    from shrinkray.graph.checks import explain_runtime_error

    message = (
        "[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Non-zero status code returned while running Add node. Name:'' "
        "Status Message: /onnxruntime_src/onnxruntime/core/providers/cpu/math/element_wise_ops.h:563 void "
        "onnxruntime::BroadcastIterator::Init(ptrdiff_t, ptrdiff_t) axis == 1 || axis == largest was false. "
        "Attempting to broadcast an axis by a dimension other than 1. 4 by 7"
    )
    exc = explain_runtime_error(RuntimeError(message), running=True)
    assert exc.problem == (
        "ONNX Runtime opened the model but could not run it on these inputs: "
        "Add node: Attempting to broadcast an axis by a dimension other than 1. 4 by 7"
    )
    assert exc.setting == "inputs"

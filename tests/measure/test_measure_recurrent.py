"""Recurrent state: pairs found from the graph, streams planned from the parity samples, drift caught.

The model here is a small leaky integrator (state <- tanh(0.99 state + x B), output = sigmoid(state w));
its "variant" leaks 5% less. One step from the original's own state moves the output by ~1% of its range
(a per-step verdict passes it), while the variant's state, fed back to itself, drifts: streamed, the
output moves by ~5% and the default verdict fails it, as silero-vad weights-int4 does (bench/verdicts.md).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from shrinkray.graph.sessions import open_session
from shrinkray.measure import recurrent
from shrinkray.measure.parity import OutputKind, compare_outputs
from shrinkray.measure.parity_inputs import parity_inputs, session_outputs
from shrinkray.measure.recurrent import Port, StatePair, plan_steps, run_stream, state_pairs
from shrinkray.measure.results import CompareSettings

STEPS = 32


def integrator(scale: float = 0.99, state: str = "state", update: str = "stateN") -> onnx.ModelProto:
    """x [batch, 4], state [batch, 8] -> output [batch, 1] (a probability), update [batch, 8]."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array((np.eye(8) * scale).astype(np.float32), "A"),
        numpy_helper.from_array(rng.normal(0, 0.15, (4, 8)).astype(np.float32), "B"),
        numpy_helper.from_array(rng.normal(0, 1, (8, 1)).astype(np.float32), "w"),
    ]
    nodes = [
        helper.make_node("MatMul", [state, "A"], ["sa"]),
        helper.make_node("MatMul", ["x", "B"], ["xb"]),
        helper.make_node("Add", ["sa", "xb"], ["pre"]),
        helper.make_node("Tanh", ["pre"], [update]),
        helper.make_node("MatMul", [update, "w"], ["logit"]),
        helper.make_node("Sigmoid", ["logit"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes, "integrator",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info(state, TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 1]),
         helper.make_tensor_value_info(update, TensorProto.FLOAT, ["batch", 8])],
        inits,
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def recorded_chunks(model: onnx.ModelProto, steps: int = STEPS) -> dict[str, np.ndarray]:
    """One batch of consecutive chunks, each row with the state the original really had there (like the
    .npz a user saves from their own streaming loop)."""
    session = open_session(model)
    xs = np.random.default_rng(1).normal(0, 1, (steps, 1, 4)).astype(np.float32)
    state = np.zeros((1, 8), np.float32)
    states = []
    for x in xs:
        states.append(state)
        state = session.run(None, {"x": x, "state": state})[1]
    return {"x": xs[:, 0], "state": np.concatenate(states)}


# ------------------------------------------------------------------ pairs from names, types and shapes


@pytest.mark.parametrize(
    ("inp", "out"),
    [("state", "stateN"), ("h", "hn"), ("c", "cn"), ("h0", "hn"), ("c0", "cn"), ("state_in", "state_out"),
     ("prev_hidden", "next_hidden"), ("state", "next_state"), ("past_conv", "present_conv"), ("h_0", "h_n"), ("cache_in", "cache_out")],
)  # fmt: skip
def test_state_pairs_are_found_by_name(inp, out):
    ports_in = [Port("input", "f", (None, 512)), Port(inp, "f", (2, None, 128))]
    ports_out = [Port("output", "f", (None, 1)), Port(out, "f", (None, None, None))]
    assert state_pairs(ports_in, ports_out) == [StatePair(inp, out)]


@pytest.mark.parametrize(
    ("inp", "out"),
    [("input", "output"), ("x", "xn"), ("image", "image_out"), ("ids", "ids_out"), ("input_ids", "output_ids")],
)
def test_names_that_do_not_look_like_a_state_are_not_paired(inp, out):
    assert state_pairs([Port(inp, "f", (1, 8))], [Port(out, "f", (1, 8))]) == []


def test_a_pair_needs_the_same_type_and_a_compatible_shape():
    assert state_pairs([Port("state", "float", (2, None, 128))], [Port("stateN", "float16", (2, None, 128))]) == []
    assert state_pairs([Port("state", "f", (2, None, 128))], [Port("stateN", "f", (2, None, 64))]) == []
    assert state_pairs([Port("state", "f", (2, None, 128))], [Port("stateN", "f", (2, 128))]) == []
    assert state_pairs([Port("state", "f", None)], [Port("stateN", "f", (2, 1, 128))]) == [StatePair("state", "stateN")]


def test_graph_and_session_give_the_same_pairs():
    model = integrator(state="h0", update="hn")
    assert recurrent.model_pairs(model) == recurrent.session_pairs(open_session(model)) == [StatePair("h0", "hn")]


# ------------------------------------------------------------------ planning the steps


def test_batch_rows_become_consecutive_chunks_with_the_state_axis_found_by_size():
    feeds = {"input": np.arange(94 * 3, dtype=np.float32).reshape(94, 3),
             "state": np.random.default_rng(0).normal(size=(2, 94, 5)).astype(np.float32),
             "sr": np.array(16000, np.int64)}  # fmt: skip
    steps, how = plan_steps([feeds], [StatePair("state", "stateN")], {"state": (2, None, 5)})
    assert len(steps) == 94 and "94 rows of the batch" in how
    assert steps[7]["input"].shape == (1, 3) and np.array_equal(steps[7]["input"][0], feeds["input"][7])
    assert steps[7]["state"].shape == (2, 1, 5) and np.array_equal(steps[7]["state"][:, 0], feeds["state"][:, 7])
    assert steps[7]["sr"] is feeds["sr"]


def test_a_batch_the_graph_fixes_is_repeated_not_cut_into_rows():
    feeds = {"x": np.zeros((4, 3), np.float32), "state": np.zeros((4, 8), np.float32)}
    steps, how = plan_steps([feeds], [StatePair("state", "stateN")], {"x": (4, 3), "state": (4, 8)})
    assert how == "the sample repeated" and steps[0]["x"].shape == (4, 3)
    steps, how = plan_steps([feeds], [StatePair("state", "stateN")], {"x": (None, 3), "state": (None, 8)})
    assert how.startswith("the 4 rows") and steps[0]["state"].shape == (1, 8)


def test_few_runs_are_cycled_and_one_sample_is_repeated():
    runs = [{"x": np.full((1, 4), k, np.float32), "state": np.zeros((1, 8), np.float32)} for k in range(4)]
    steps, how = plan_steps(runs, [StatePair("state", "stateN")], {})
    assert len(steps) == recurrent.MIN_STEPS and "cycled" in how
    assert [float(s["x"][0, 0]) for s in steps[:6]] == [0, 1, 2, 3, 0, 1]
    steps, how = plan_steps(runs[:1], [StatePair("state", "stateN")], {})
    assert len(steps) == recurrent.MIN_STEPS and how == "the sample repeated"


def test_long_streams_are_cut():
    runs = [{"x": np.zeros((1, 4), np.float32)}] * (recurrent.MAX_STEPS + 5)
    assert len(plan_steps(runs, [StatePair("state", "stateN")], {})[0]) == recurrent.MAX_STEPS


def test_a_time_budget_ends_the_stream_after_two_steps():
    calls = []

    def run(feeds):
        calls.append(feeds)
        return [np.zeros((1, 1), np.float32), feeds["state"] + 1]

    steps = [{"state": np.zeros((1, 8), np.float32)}] * 10
    runs, fed = run_stream(run, steps, [StatePair("state", "stateN")], ["output", "stateN"], budget_s=0.0)
    assert len(runs) == len(fed) == 2
    assert float(fed[1]["state"][0, 0]) == 1.0  # the second step got the first step's state


# ------------------------------------------------------------------ the stream in parity


def test_the_original_streams_its_own_state_and_the_note_says_so(tmp_path):
    model = integrator()
    npz = tmp_path / "chunks.npz"
    chunks = recorded_chunks(model)
    np.savez(npz, **chunks)
    inputs = parity_inputs(model, CompareSettings(inputs_path=str(npz)))
    assert len(inputs.samples) == STEPS and inputs.count == STEPS
    assert f"judged streaming over {STEPS} steps" in inputs.note and "stateN -> state" in inputs.note
    assert inputs.reference["output"].shape == (STEPS, 1, 1)
    # every step's state is the one the original returned the step before: the recorded one
    fed = np.concatenate([s["state"] for s in inputs.samples])
    np.testing.assert_allclose(fed, chunks["state"], atol=1e-6)
    np.testing.assert_allclose(inputs.reference["stateN"][:-1, 0], chunks["state"][1:], atol=1e-6)


def test_drift_that_single_steps_hide_fails_the_streamed_verdict(tmp_path):
    original, variant = integrator(0.99), integrator(0.99 * 1.05)
    npz = tmp_path / "chunks.npz"
    chunks = recorded_chunks(original)
    np.savez(npz, **chunks)
    inputs = parity_inputs(original, CompareSettings(inputs_path=str(npz)))
    assert inputs.kinds["output"].kind == "probability"
    # judged by its values here: no step crosses 0.5 in 32, and the drift is what streaming must show
    kinds = inputs.kinds | {"output": OutputKind("continuous", probability=True)}
    streamed = compare_outputs(inputs.reference, session_outputs(open_session(variant), inputs.samples, variant),
                               kinds)  # fmt: skip
    assert not streamed.passed
    assert "output" in streamed.decided_by and "relative rms error" in streamed.decided_by
    # the same chunks, each from the original's recorded state (one step each): within the same verdict
    names = ["output", "stateN"]
    each = dict(zip(names, open_session(original).run(None, chunks), strict=True))
    moved = dict(zip(names, open_session(variant).run(None, chunks), strict=True))
    assert compare_outputs(each, moved, kinds).passed


def test_the_variant_feeds_itself_not_the_original(tmp_path):
    """With the original as its own variant the stream agrees exactly; with another model the states it
    gets from step 2 on are its own."""
    model = integrator()
    npz = tmp_path / "chunks.npz"
    np.savez(npz, **recorded_chunks(model))
    inputs = parity_inputs(model, CompareSettings(inputs_path=str(npz)))
    again = session_outputs(open_session(model), inputs.samples, model)
    assert all(np.array_equal(again[k], inputs.reference[k]) for k in inputs.reference)
    other = integrator(0.5)
    out = session_outputs(open_session(other), inputs.samples, other)
    session = open_session(other)
    state = inputs.samples[0]["state"]
    for step, feeds in enumerate(inputs.samples[:5]):
        expected = session.run(None, {"x": feeds["x"], "state": state})
        np.testing.assert_array_equal(out["stateN"][step], expected[1])
        state = expected[1]


def test_synthesized_inputs_stream_too():
    inputs = parity_inputs(integrator(), CompareSettings())
    assert "judged streaming over" in inputs.note
    assert len(inputs.samples) >= recurrent.MIN_STEPS


def test_a_model_without_state_is_not_streamed():
    model = integrator(state="s_prev_ignored", update="unrelated")
    assert recurrent.model_pairs(model) == []
    inputs = parity_inputs(model, CompareSettings())
    assert "streaming" not in inputs.note


def test_a_growing_cache_is_not_fed_back():
    """past -> present that grows by the new step (a key/value cache) is not a fixed-size state."""
    graph = helper.make_graph(
        [helper.make_node("Concat", ["past", "x"], ["present"], axis=1),
         helper.make_node("ReduceSum", ["present"], ["output"], keepdims=0)],
        "cache",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1]),
         helper.make_tensor_value_info("past", TensorProto.FLOAT, [1, "n"])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("present", TensorProto.FLOAT, [1, "m"])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    assert recurrent.model_pairs(model) == [StatePair("past", "present")]  # by name and declared shape
    session = open_session(model)
    feeds = [{"x": np.ones((1, 1), np.float32), "past": np.zeros((1, 3), np.float32)}] * 3
    assert recurrent.stream_reference(session, feeds, lambda f: session.run(None, f)) is None
    out = session_outputs(session, feeds, model)
    assert out["present"].shape == (3, 1, 4)  # every run from its own past: nothing grew


def vad_like() -> onnx.ModelProto:
    """input [1, 512] audio, state [1, 8], sr (as silero-vad) -> output [1, 1] (a speech probability), stateN [1, 8]."""
    inits = [numpy_helper.from_array(np.full((512, 8), 0.01, np.float32), "W"),
             numpy_helper.from_array(np.ones((8, 1), np.float32), "v")]  # fmt: skip
    nodes = [
        helper.make_node("Abs", ["input"], ["energy"]),
        helper.make_node("MatMul", ["energy", "W"], ["e"]),
        helper.make_node("Add", ["e", "state"], ["pre"]),
        helper.make_node("Tanh", ["pre"], ["stateN"]),
        helper.make_node("MatMul", ["stateN", "v"], ["logit"]),
        helper.make_node("Sigmoid", ["logit"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes, "vad",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 512]),
         helper.make_tensor_value_info("state", TensorProto.FLOAT, [1, 8]),
         helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1]),
         helper.make_tensor_value_info("stateN", TensorProto.FLOAT, [1, 8])],
        inits,
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def test_a_streaming_audio_model_hears_one_clip_in_consecutive_chunks_enough_to_decide():
    """silero-vad on 4 synthesized chunks cycled to 16 steps: its probability judged on 15 decisions, every
    variant undecided. A synthesized stream is one clip cut into MIN_DECISIONS consecutive chunks."""
    from shrinkray.measure import content
    from shrinkray.measure.parity_inputs import MIN_DECISIONS

    model = vad_like()
    inputs = parity_inputs(model, CompareSettings())
    assert len(inputs.samples) == MIN_DECISIONS and "consecutive chunks of one" in inputs.note
    heard = np.concatenate([s["input"].ravel() for s in inputs.samples])
    np.testing.assert_allclose(heard, content.speech(1, 512 * MIN_DECISIONS, seed=0).ravel(), atol=1e-6)
    assert inputs.kinds["output"].kind == "probability"

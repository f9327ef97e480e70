"""Shared helpers for the method, inspect and CLI tests: sample paths and input synthesis.

Inputs are built from ``session.get_inputs()`` so any model ONNX Runtime can
open gets a feed: symbolic or unknown dims become small values (every unnamed
dim gets the same value so inputs that must agree on their batch size do),
int64 token inputs get ids in [0, 100), masks get ones, an int64 scalar is 2,
a bool scalar is True, and float16 inputs are float16.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_models"
SAMPLE_NAMES = ["mlp", "cnn", "transformer", "rnn", "subgraph", "fp16", "shared_weight", "tree", "messy"]

#: Value for a dim that is neither fixed nor named (None / '?'): every such dim
#: gets the same value, so messy.onnx's two batch dims agree.
UNNAMED_DIM = 2
#: Values for named symbolic dims; anything not listed gets DEFAULT_NAMED_DIM.
NAMED_DIMS = {"seq": 4, "sequence": 4}
DEFAULT_NAMED_DIM = 2

_NUMPY_TYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(bool)": np.bool_,
}


def open_pricing(params: dict[str, str]):
    """The app's Pricing page in an AppTest, opened from a link (the query is read on the page's first run)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    at.switch_page("app_pages/pricing.py")
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def sample_path(name: str) -> Path:
    return SAMPLES / f"{name}.onnx"


def read_sample(name: str) -> onnx.ModelProto:
    return onnx.load(str(sample_path(name)))


@functools.cache
def cached_sample(name: str) -> onnx.ModelProto:
    """One shared ModelProto per sample for the whole session: never modify it."""
    return read_sample(name)


@functools.cache
def shrunk(method: str, name: str, options: tuple = ()):
    """shrinkray.shrink(sample, method, **dict(options)), computed once per session.

    Shared by test modules so each (slow) dynamic-int8 run happens once.
    """
    import shrinkray

    return shrinkray.shrink(cached_sample(name), method, **dict(options))


def runs_slowly(method: str, model: str) -> bool:
    """dynamic-int8 runs ONNX Runtime's quantize_dynamic in a child process, about a second per
    model: its per-sample tests are in the slow tier (the unit tier still runs it, once, through
    test_compare's every-method comparison of the mlp)."""
    return method == "dynamic-int8"


def method_model_params(methods: list[str], models: list[str]) -> list:
    """(method, model) parameters for every pair, the slow ones marked ``slow``."""
    import pytest

    return [
        pytest.param(method, model, id=f"{method}-{model}", marks=[pytest.mark.slow] if runs_slowly(method, model) else [])
        for method in methods
        for model in models
    ]


def method_params(methods: list[str], model: str) -> list:
    """``method`` parameters for tests on one sample, the slow ones marked ``slow``."""
    import pytest

    return [pytest.param(m, id=m, marks=[pytest.mark.slow] if runs_slowly(m, model) else []) for m in methods]


def concrete_shape(shape: list) -> list[int]:
    dims = []
    for d in shape:
        if isinstance(d, int) and d >= 0:
            dims.append(d)
        elif isinstance(d, str) and d and d != "?":
            dims.append(NAMED_DIMS.get(d, DEFAULT_NAMED_DIM))
        else:
            dims.append(UNNAMED_DIM)
    return dims


def make_feeds(session: ort.InferenceSession, seed: int = 0) -> dict[str, np.ndarray]:
    """One feed per declared input of ``session``, deterministic for a seed."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for inp in session.get_inputs():
        if inp.type not in _NUMPY_TYPES:
            raise AssertionError(f"no synthesis rule for input {inp.name} of type {inp.type}")
        dtype = _NUMPY_TYPES[inp.type]
        shape = concrete_shape(list(inp.shape))
        if dtype is np.bool_:
            feeds[inp.name] = np.full(shape, True) if shape else np.array(True)
        elif np.issubdtype(dtype, np.integer):
            if not shape:
                feeds[inp.name] = np.array(2, dtype=dtype)
            elif "mask" in inp.name:
                feeds[inp.name] = np.ones(shape, dtype=dtype)
            else:
                feeds[inp.name] = rng.integers(0, 100, size=shape).astype(dtype)
        else:
            feeds[inp.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def run_model(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray] | None = None, *, optimized: bool = True
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Run a model on CPU; returns (feeds, outputs by name)."""
    from shrinkray.graph.sessions import open_session

    session = open_session(model, optimized=optimized)
    if feeds is None:
        feeds = make_feeds(session)
    names = [o.name for o in session.get_outputs()]
    values = session.run(names, feeds)
    return feeds, dict(zip(names, values, strict=True))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    nx, ny = np.linalg.norm(x), np.linalg.norm(y)
    if nx == 0 and ny == 0:
        return 1.0
    if nx == 0 or ny == 0:
        return 0.0
    return float(np.dot(x, y) / (nx * ny))


def relative_max_abs(reference: np.ndarray, other: np.ndarray) -> float:
    """max |a - b| divided by the reference output's scale (its max |value|)."""
    a = np.asarray(reference, dtype=np.float64)
    b = np.asarray(other, dtype=np.float64)
    scale = max(float(np.max(np.abs(a))) if a.size else 0.0, 1e-12)
    return float(np.max(np.abs(a - b))) / scale if a.size else 0.0


def is_float_array(a: np.ndarray) -> bool:
    return np.issubdtype(np.asarray(a).dtype, np.floating)


def all_tensors(model: onnx.ModelProto) -> list[tuple[str, str, onnx.TensorProto]]:
    """(scope, name, tensor) for every initializer and Constant value, in all subgraphs.

    A Constant's name is its output's name. Scope is "" for the main graph.
    """
    from shrinkray.graph.weights import iter_graphs

    found = []
    for scope, graph in iter_graphs(model.graph):
        found.extend((scope, t.name, t) for t in graph.initializer)
        for node in graph.node:
            if node.op_type == "Constant" and node.output:
                for attr in node.attribute:
                    if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
                        found.append((scope, node.output[0], attr.t))
    return found


def steady_timings(comparison):
    """Make every variant time exactly like the original (median, p90, mean), in place.

    Real timings on a shared machine are noisy: with a handful of runs a variant
    can look 10% slower by chance, which flips the recommendation. Tests about
    anything but timing use this so their expectations do not depend on noise.
    """
    base = {(s.threads, s.batch): s for s in comparison.original.latency}
    for result in comparison.variants:
        result.latency = [
            dataclasses.replace(
                s,
                median_ms=base[(s.threads, s.batch)].median_ms,
                p90_ms=base[(s.threads, s.batch)].p90_ms,
                mean_ms=base[(s.threads, s.batch)].mean_ms,
                # the paired ratio too: advice reads it first, and on a loaded machine it measured float16
                # "slower", so nothing was recommended (CI 2026-11-27)
                ratio=1.0 if s.ratio is not None else None,
                ratio_low=1.0 if s.ratio_low is not None else None,
                ratio_high=1.0 if s.ratio_high is not None else None,
            )
            for s in result.latency
        ]
    return comparison


def framed_audio_model(frame: int = 512) -> onnx.ModelProto:
    """A streaming speech model that probing must size: ``audio`` [batch, ?] is cut into frames of
    ``frame`` samples (a length that is not a multiple is refused), and a recurrent ``state``
    [2, batch, 16] is concatenated with the new frame summary (its batch must match the audio's).

    Outputs ``logits`` [batch, 16] and ``next_state`` [2, batch, 16]; IR 8, opset 17.
    """
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    inits = [
        numpy_helper.from_array(np.array([0, -1, frame], np.int64), "frames_shape"),
        numpy_helper.from_array((rng.standard_normal((frame, 16)) / 8).astype(np.float32), "proj.weight"),
        numpy_helper.from_array(np.array([0], np.int64), "axis0"),
        numpy_helper.from_array(np.array([1], np.int64), "start"),
        numpy_helper.from_array(np.array([3], np.int64), "end"),
    ]
    nodes = [
        helper.make_node("Reshape", ["audio", "frames_shape"], ["frames"]),
        helper.make_node("ReduceMean", ["frames"], ["summary"], axes=[1], keepdims=0),
        helper.make_node("MatMul", ["summary", "proj.weight"], ["logits"]),
        helper.make_node("Unsqueeze", ["logits", "axis0"], ["step"]),
        helper.make_node("Concat", ["state", "step"], ["stacked"], axis=0),
        helper.make_node("Slice", ["stacked", "start", "end", "axis0"], ["next_state"]),
    ]
    graph = helper.make_graph(
        nodes,
        "framed_audio",
        [
            helper.make_tensor_value_info("audio", TensorProto.FLOAT, ["batch", None]),
            helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, "batch", 16]),
        ],
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 16]),
            helper.make_tensor_value_info("next_state", TensorProto.FLOAT, [2, "batch", 16]),
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def press(page, name: str, timeout_ms: int = 60_000) -> None:
    """Click the app's one button called ``name`` once Streamlit has finished redrawing: while a rerun is
    drawing, the stale copy of a widget and its new one are both on the page (strict-mode clicks then fail)."""
    from playwright.sync_api import expect

    button = page.get_by_role("button", name=name)
    expect(button).to_have_count(1, timeout=timeout_ms)
    button.click()


def run_sample_in_app(page, sample: Path, remove: tuple[str, ...] = ("Dynamic INT8 (ONNX Runtime)", "N-value palettization"),
                      timeout_ms: int = 240_000) -> None:  # fmt: skip
    """In the app at ``page``: upload ``sample``, open Shrink, drop the ``remove`` methods, run, wait for the results."""
    from tests.e2e.conftest import upload_model  # once the app is idle: a file given while it draws is dropped

    upload_model(page, sample)
    page.get_by_role("link", name="Shrink").click()
    page.wait_for_selector("text=Shrink and measure", timeout=30_000)
    for name in remove:
        page.get_by_role("button", name=f"Remove {name}").click()
        page.wait_for_timeout(500)
    press(page, "Shrink and measure")
    page.wait_for_selector("text=Reports", timeout=timeout_ms)


def whole_page_screenshot(page, path: Path, most: int = 12_000) -> None:
    """A screenshot of the whole page, down to its last element: Streamlit scrolls inside its main section, so
    Playwright's ``full_page`` stops at the window's height. The window is stretched to the content (at most
    ``most`` px), shot, and put back."""
    size = page.viewport_size
    tall = page.evaluate("""() => Math.max(document.documentElement.scrollHeight,
        ...[...document.querySelectorAll('[data-testid=stMain], [data-testid=stAppViewContainer], section')]
            .map(e => e.scrollHeight))""")
    page.set_viewport_size({"width": size["width"], "height": max(size["height"], min(int(tall), most))})
    page.wait_for_timeout(800)  # charts redraw at the new height
    page.screenshot(path=str(path))
    page.set_viewport_size(size)
    page.wait_for_timeout(300)

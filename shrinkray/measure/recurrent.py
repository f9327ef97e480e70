"""Models that carry a recurrent state, judged the way they are used: as a stream of steps.

A voice-activity detector or a streaming encoder takes its own state back at every chunk (silero-vad:
input ``state`` -> output ``stateN``). One step from a given state hides what a shrunk variant does over
time: its state drifts from the original's and the drift, not one step's error, flips decisions
(silero-vad weights-int4: every single step within 0.065 of the original, 3 of 94 frames flipped when
streamed; measured 2026-11-23, docs/benchmarks.md "Verdicts on real models"). So such a model is judged over K consecutive steps, each fed the state
the same model returned the step before, for the original and for the variant alike; every step's
outputs (the last state included) are judged by the usual rules.

A state pair is recognised from the graph alone: an input and an output with the same data type and a
compatible declared shape whose names pair up like a state and its update (``state``/``stateN``,
``h``/``hn``, ``c0``/``cn``, ``h_in``/``h_out``, ``state``/``next_state``, ``prev_state``/``next_state``, ``past``/``present``);
at run time it is fed back only when the output's shape equals the input's (a key/value cache that
grows is not a fixed-size state and is left alone).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: A stream has at least this many steps (a short one repeated or cycled), at most MAX_STEPS.
MIN_STEPS = 16
MAX_STEPS = 160
#: The original's stream stops early (at least 2 steps) once it took this long; the variants run as many.
STREAM_BUDGET_S = 5.0
#: ... or once its outputs held this many bytes (every step's outputs are kept to judge them).
STREAM_MAX_BYTES = 256 * 2**20

#: Names that look like a state (the stem left once the pairing suffix or prefix is removed).
_STATEISH = re.compile(
    r"state|hidden|cell|memory|cache|past|present|rnn|lstm|gru|carry|context|ctx|"
    r"^[hcs]x?\d*$|(^|[_.])[hc](\d*)([_.]|$)",
    re.IGNORECASE,
)
#: Output = input + one of these (state -> stateN, h -> hn, c -> c_out).
_UPDATE_SUFFIXES = ("n", "_n", ".n", "out", "_out", ".out", "_new", "_next", "_o", "_t1")
#: Input = stem + one of these, output = stem + one of _STEM_OUT (h0 -> hn, state_in -> state_out).
_STEM_IN = ("0", "_0", ".0", "_in", ".in", "_prev")
_STEM_OUT = ("", "n", "_n", "1", "_1", ".1", "_out", ".out", "out", "_next")
#: prefix forms: prev_state -> next_state, in_h -> out_h.
_PREFIXES = (("prev_", "next_"), ("in_", "out_"), ("input_", "output_"), ("old_", "new_"), ("last_", "next_"))


@dataclass(frozen=True)
class Port:
    """A graph input or output as declared: name, element type and shape (None for a free dimension)."""

    name: str
    dtype: str
    shape: tuple[int | None, ...] | None  # None: rank unknown


@dataclass(frozen=True)
class StatePair:
    """An input fed, at the next step, by the output the model computed for it."""

    input: str
    output: str


def _stem_pairs(i: str, o: str) -> str | None:
    """The state stem when output name ``o`` is the update of input name ``i``, else None."""
    li, lo = i.lower(), o.lower()
    if li == lo:
        return None
    if lo.startswith(li) and lo[len(li):] in _UPDATE_SUFFIXES:
        return li
    for suffix in _STEM_IN:
        if li.endswith(suffix) and len(li) > len(suffix):
            stem = li[: -len(suffix)]
            if lo.startswith(stem) and lo[len(stem):] in _STEM_OUT:
                return stem
    for before, after in _PREFIXES:
        if li.startswith(before) and lo == after + li[len(before):]:
            return li[len(before):]
    for after in ("next_", "new_", "out_", "updated_"):
        if lo == after + li:  # state -> next_state
            return li
    if "past" in li:
        for old, new in (("past_key_values", "present"), ("past", "present")):
            if old in li and lo == li.replace(old, new, 1):
                return li
    return None


def _shapes_agree(a: tuple[int | None, ...] | None, b: tuple[int | None, ...] | None) -> bool:
    """Same rank (when both are known) and equal fixed dimensions where both are fixed."""
    if a is None or b is None:
        return True
    if len(a) != len(b):
        return False
    return all(x is None or y is None or x == y for x, y in zip(a, b, strict=True))


def state_pairs(inputs: Sequence[Port], outputs: Sequence[Port]) -> list[StatePair]:
    """Recurrent state pairs of a graph: names that pair up like a state and its update, the stem looking
    like a state, the same element type and compatible declared shapes; each input and output used once."""
    pairs: list[StatePair] = []
    taken: set[str] = set()
    for inp in inputs:
        for out in outputs:
            if out.name in taken or inp.dtype != out.dtype:
                continue
            stem = _stem_pairs(inp.name, out.name)
            if stem is None or not _STATEISH.search(stem) or not _shapes_agree(inp.shape, out.shape):
                continue
            pairs.append(StatePair(inp.name, out.name))
            taken.add(out.name)
            break
    return pairs


def _session_ports(args) -> list[Port]:
    ports = []
    for arg in args:
        shape = getattr(arg, "shape", None)
        dims = tuple(d if isinstance(d, int) and d > 0 else None for d in shape) if shape is not None else None
        ports.append(Port(arg.name, str(arg.type), dims))
    return ports


def session_pairs(session) -> list[StatePair]:
    """State pairs of the model an ONNX Runtime session runs (its declared inputs and outputs)."""
    return state_pairs(_session_ports(session.get_inputs()), _session_ports(session.get_outputs()))


def model_pairs(model) -> list[StatePair]:
    """State pairs of an ``onnx.ModelProto`` (initializers are not inputs)."""
    initializers = {t.name for t in model.graph.initializer}

    def port(value) -> Port:
        tensor = value.type.tensor_type
        dims = None
        if tensor.HasField("shape"):
            dims = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in tensor.shape.dim)
        return Port(value.name, str(tensor.elem_type), dims)

    inputs = [port(v) for v in model.graph.input if v.name not in initializers and v.type.HasField("tensor_type")]
    outputs = [port(v) for v in model.graph.output if v.type.HasField("tensor_type")]
    return state_pairs(inputs, outputs)


# ---- running a stream ------------------------------------------------------------------------

Run = Callable[[dict[str, np.ndarray]], list]


def run_stream(
    run: Run, steps: Sequence[dict[str, np.ndarray]], pairs: Sequence[StatePair], names: Sequence[str],
    budget_s: float | None = None, max_bytes: int | None = None,
) -> tuple[list[list], list[dict[str, np.ndarray]]]:  # fmt: skip
    """Run ``steps`` in order, each (after the first) fed the states the previous step returned; a state is
    fed back only when its shape and type equal the input's. Returns every step's outputs and the feeds
    each step really got. ``budget_s`` / ``max_bytes`` end the stream early (never before 2 steps)."""
    where = {name: index for index, name in enumerate(names)}
    pairs = [p for p in pairs if p.output in where]
    runs: list[list] = []
    fed: list[dict[str, np.ndarray]] = []
    carried: dict[str, np.ndarray] = {}
    started, held = time.perf_counter(), 0
    for feeds in steps:
        feeds = {**feeds, **carried} if carried else dict(feeds)
        outputs = run(feeds)
        runs.append(outputs)
        fed.append(feeds)
        carried = {}
        for pair in pairs:
            value = np.asarray(outputs[where[pair.output]])
            given = feeds.get(pair.input)
            if given is not None and value.shape == np.shape(given) and value.dtype == np.asarray(given).dtype:
                carried[pair.input] = value
        held += sum(np.asarray(v).nbytes for v in outputs)
        if len(runs) >= 2 and (
            (budget_s is not None and time.perf_counter() - started > budget_s)
            or (max_bytes is not None and held > max_bytes)
        ):
            break
    return runs, fed


def fed_back(outputs: list, feeds: dict[str, np.ndarray], pairs: Sequence[StatePair], names: Sequence[str]) -> list[StatePair]:
    """The pairs whose output can feed their input (same shape and type) after one run."""
    where = {name: index for index, name in enumerate(names)}
    found = []
    for pair in pairs:
        if pair.output not in where or pair.input not in feeds:
            continue
        value, given = np.asarray(outputs[where[pair.output]]), np.asarray(feeds[pair.input])
        if value.shape == given.shape and value.dtype == given.dtype:
            found.append(pair)
    return found


def run_samples(session, samples: Sequence[dict[str, np.ndarray]], run: Run) -> list[list]:
    """Every sample's outputs: as one stream (states fed back) when the model has a recurrent state and
    there are several samples, else each sample on its own."""
    pairs = session_pairs(session) if len(samples) > 1 else []
    if not pairs:
        return [run(feeds) for feeds in samples]
    names = [o.name for o in session.get_outputs()]
    return run_stream(run, samples, pairs, names)[0]


# ---- planning the stream of the parity samples ----------------------------------------------


@dataclass
class Stream:
    """The steps the original ran (with the states it fed itself) and its outputs at each step."""

    steps: list[dict[str, np.ndarray]]
    runs: list[list]
    pairs: list[StatePair]
    how: str

    def note(self) -> str:
        fed = ", ".join(f"{p.output} -> {p.input}" for p in self.pairs)
        return (f"; judged streaming over {len(self.steps)} steps ({self.how}; each step fed the state the same "
                f"model returned the step before: {fed})")  # fmt: skip


def _fixed(declared: tuple[int | None, ...] | None, axis: int) -> bool:
    """Whether the graph declares a fixed size for ``axis``."""
    return declared is not None and axis < len(declared) and declared[axis] is not None


def _state_axis(value: np.ndarray, rows: int, declared: tuple[int | None, ...] | None) -> int | None:
    """The batch axis of a state input holding ``rows`` rows: the only axis of that size the graph leaves free."""
    free = [a for a in range(value.ndim) if value.shape[a] == rows and not _fixed(declared, a)]
    return free[0] if len(free) == 1 else None


def plan_steps(samples: Sequence[dict[str, np.ndarray]], pairs: Sequence[StatePair],
               declared: dict[str, tuple[int | None, ...] | None]) -> tuple[list[dict[str, np.ndarray]], str]:  # fmt: skip
    """The stream's steps from the parity samples: several runs in order; one batch of N rows split into N
    consecutive chunks (batch 1 each, the state's batch axis found by size); else the sample repeated.
    Fewer than MIN_STEPS are cycled, more than MAX_STEPS cut."""
    states = {p.input for p in pairs}
    if len(samples) >= 2:
        steps, how = list(samples), f"the {len(samples)} runs in order"
    else:
        feeds = samples[0]
        steps, how = _rows_as_steps(feeds, states, declared), ""
        if steps is not None:
            how = f"the {len(steps)} rows of the batch as consecutive chunks"
        else:
            steps, how = [feeds], "the sample repeated"
    if len(steps) < MIN_STEPS:
        n = len(steps)
        if n > 1:
            how += f", cycled to {MIN_STEPS}"
        steps = [steps[k % n] for k in range(MIN_STEPS)]
    if len(steps) > MAX_STEPS:
        how += f", the first {MAX_STEPS}"
        steps = steps[:MAX_STEPS]
    return steps, how


def _rows_as_steps(feeds: dict[str, np.ndarray], states: set[str],
                   declared: dict[str, tuple[int | None, ...] | None]) -> list[dict[str, np.ndarray]] | None:  # fmt: skip
    """One batch split into its rows, or None when its rows cannot be told apart (one row, no common batch
    size). A state with an axis of that size is split with them; run time confirms the shapes."""
    others = {k: np.asarray(v) for k, v in feeds.items() if k not in states and np.ndim(v) >= 1}
    firsts = {v.shape[0] for v in others.values()}
    if len(firsts) != 1 or any(_fixed(declared.get(k), 0) for k in others):
        return None  # a batch the graph fixes cannot be cut into rows
    rows = firsts.pop()
    if rows < 2:
        return None
    axes = {}
    for name in states & set(feeds):
        axis = _state_axis(np.asarray(feeds[name]), rows, declared.get(name))
        if axis is not None:  # else one state for every row (batch 1 broadcast): the first step takes it as is
            axes[name] = axis
    steps = []
    for r in range(rows):
        step = {}
        for name, value in feeds.items():
            if name in axes:
                step[name] = np.take(np.asarray(value), [r], axis=axes[name])
            elif name in others:
                step[name] = others[name][r : r + 1]
            else:
                step[name] = value
        steps.append(step)
    return steps


def stream_reference(session, samples: Sequence[dict[str, np.ndarray]], run: Run) -> Stream | None:
    """The original run as a stream over the parity samples, or None when it has no recurrent state (or
    none whose output can feed its input at run time). Bounded by STREAM_BUDGET_S and STREAM_MAX_BYTES."""
    pairs = session_pairs(session)
    if not pairs or not samples:
        return None
    declared = {p.name: p.shape for p in _session_ports(session.get_inputs())}
    names = [o.name for o in session.get_outputs()]
    steps, how = plan_steps(samples, pairs, declared)
    first = run(steps[0])
    pairs = fed_back(first, steps[0], pairs, names)
    if not pairs:
        return None
    rest, fed = run_stream(run, steps, pairs, names, STREAM_BUDGET_S, STREAM_MAX_BYTES)
    if len(fed) < len(steps):
        how += f", stopped at {len(fed)} of {len(steps)} steps to stay within {STREAM_BUDGET_S:g} s"
    return Stream(fed, rest, pairs, how)

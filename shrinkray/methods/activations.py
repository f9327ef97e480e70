"""What the activations feeding each MatMul/Gemm weight look like on the inputs parity would use.

Two statistics per weight, over the input channels (the K axis), measured by running the original
once per sample of the run's parity inputs (the user's own when given, else synthesized) with those
activations added as outputs:

* the mean squared activation per channel (activation-aware 4-bit scales give busy channels a
  finer grid), and
* optionally the second-moment matrix ``X.T X / tokens`` (``K x K``), which error-compensating
  rounding (:mod:`shrinkray.methods.gptq`) needs. Weights fed by the same activation (a layer's query, key
  and value) share one matrix; matrices are kept in float32 and at most :data:`MAX_GRAM_BYTES` of
  them (the largest are left out first: their weights fall back to the per-channel statistic).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from shrinkray.errors import DeadlineExceededError, ShrinkRayError
from shrinkray.graph.prefold import measuring_session
from shrinkray.graph.weights import WeightRef
from shrinkray.measure.deadline import run_within
from shrinkray.memory import release_free_memory
from shrinkray.methods.base import RunContext

#: Memory for the K x K second-moment matrices of one model (float32): 2048 x 2048 takes 16 MB.
MAX_GRAM_BYTES = 512 << 20


@dataclass
class Calibration:
    """Per-weight activation statistics (by weight name) and a note when they could not be measured."""

    power: dict[str, np.ndarray] = field(default_factory=dict)  # mean squared activation per channel
    gram: dict[str, np.ndarray] = field(default_factory=dict)  # X.T X / tokens, float32 [K, K] (shared)
    tokens: int = 0  # activation rows seen per weight (the most of any weight)
    note: str = ""


def _activation_of(ref: WeightRef) -> str | None:
    """The input feeding ``ref``'s only consumer when that is a MatMul/Gemm weight (B), else None."""
    if ref.scope or len(ref.consumers) != 1:
        return None
    c = ref.consumers[0]
    if c.nested or c.input_index != 1 or c.op_type not in ("MatMul", "Gemm"):
        return None
    if c.op_type == "Gemm" and any(a.name == "transA" and a.i for a in c.node.attribute):
        return None
    return c.node.input[0] or None


def calibrate(
    model: onnx.ModelProto, refs: list[WeightRef], context: RunContext | None = None,
    *, gram: bool = False, max_gram_bytes: int = MAX_GRAM_BYTES, base_dir: Path | None = None,
) -> Calibration:  # fmt: skip
    """Activation statistics of the MatMul/Gemm weights in ``refs`` on the run's parity inputs (``context``;
    None: the default synthesized ones); ``gram`` also collects the second-moment matrices. ``base_dir``: the
    folder of ``model``'s external data when its tensors are not loaded (see ``MethodSpec.prepare``)."""
    acts = {r.name: a for r in refs if (a := _activation_of(r)) is not None}
    if not acts:
        return Calibration()
    try:
        # from a measuring copy on disk: neither a second copy of the model nor its bytes are held while the
        # session opens (measure/prefold.py; this step's peak on the 101 MB benchmark model: +391 -> +194 MB)
        session, probe = measuring_session(model, outputs=sorted(set(acts.values())), base_dir=base_dir)
        samples = (context or RunContext()).calibration_inputs(probe, session=session).samples  # never the judged ones
    except DeadlineExceededError:
        raise  # the model cannot run here within the limit: the job ends with it, not with a data-free build
    except ShrinkRayError as exc:
        return Calibration(note=f"Calibration was skipped (blocks are data-free): {exc.problem}")
    del probe
    names = [o.name for o in session.get_outputs()]
    power: dict[str, np.ndarray] = {}
    grams: dict[str, np.ndarray] | None = None
    rows: dict[str, int] = {}
    left_out = 0
    for feeds in samples:
        # each run within the inference deadline, as every run of the user's model (measure/deadline.py)
        outs = dict(zip(names, run_within(session, feeds, what="One calibration run"), strict=True))
        found = {}
        for act in sorted(set(acts.values())):
            a = np.asarray(outs[act])
            if a.ndim and np.issubdtype(a.dtype, np.floating) and np.all(np.isfinite(a)):
                found[act] = a.reshape(-1, a.shape[-1]).astype(np.float32)
        del outs
        if grams is None:  # the first sample: room for the smallest matrices first
            grams = {}
            room = max_gram_bytes if gram else 0
            for act in sorted(found, key=lambda n: (found[n].shape[1], n)):
                k = found[act].shape[1]
                if k * k * 4 <= room:
                    grams[act] = np.zeros((k, k), dtype=np.float32)
                    room -= k * k * 4
                elif gram:
                    left_out += 1
        for act, a in found.items():
            power[act] = power.get(act, 0.0) + np.square(a, dtype=np.float64).sum(axis=0)
            rows[act] = rows.get(act, 0) + a.shape[0]
            if act in grams and grams[act].shape[1] == a.shape[1]:
                grams[act] += a.T @ a
    del session, samples  # what opening and running it freed goes back to the system before the caller quantizes
    release_free_memory()  # (glibc kept ~110 MB of it on the 101 MB benchmark model)
    grams = grams or {}
    for act, g in grams.items():
        g /= np.float32(max(rows.get(act, 0), 1))
    out = Calibration(tokens=max(rows.values(), default=0))
    for name, act in acts.items():
        if act in power and rows.get(act):
            out.power[name] = power[act] / rows[act]
        if act in grams:
            if not np.all(np.isfinite(grams[act])):
                continue
            out.gram[name] = grams[act]
    if left_out:
        out.note = (f"{left_out} activation(s) too large to keep their second moments in memory: their weights "
                    "were rounded without error compensation")  # fmt: skip
    return out


def input_channel_power(model: onnx.ModelProto, refs: list[WeightRef],
                        context: RunContext | None = None) -> tuple[dict[str, np.ndarray], str]:  # fmt: skip
    """Mean squared activation per input channel for each MatMul/Gemm weight in ``refs`` (by name), and a
    note when they could not be measured (then the dict is empty and the caller stays data-free).
    ``context``: the run's inputs (None: the default synthesized ones)."""
    cal = calibrate(model, refs, context)
    return cal.power, cal.note

"""How busy each input channel of a weight's MatMul/Gemm is, on the inputs parity would use.

Activation-aware 4-bit scales (weights-int4) give channels that carry large activations a finer grid;
the statistic is the mean squared activation per input channel (the K axis), measured by running the
original once on the run's parity inputs (the user's own when given, else synthesized) with those
activations added as outputs.
"""

from __future__ import annotations

import numpy as np
import onnx

from shrinkray.errors import ShrinkRayError
from shrinkray.graph import WeightRef
from shrinkray.methods.base import RunContext


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


def input_channel_power(model: onnx.ModelProto, refs: list[WeightRef],
                        context: RunContext | None = None) -> tuple[dict[str, np.ndarray], str]:  # fmt: skip
    """Mean squared activation per input channel for each MatMul/Gemm weight in ``refs`` (by name), and a
    note when they could not be measured (then the dict is empty and the caller stays data-free).
    ``context``: the run's inputs (None: the default synthesized ones)."""
    from shrinkray.validate import open_session

    acts = {r.name: a for r in refs if (a := _activation_of(r)) is not None}
    if not acts:
        return {}, ""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    present = {o.name for o in probe.graph.output}
    for act in sorted(set(acts.values())):
        if act not in present:
            probe.graph.output.append(onnx.ValueInfoProto(name=act))
    try:
        session = open_session(probe)
        inputs = (context or RunContext()).parity_inputs(probe, session=session)
    except ShrinkRayError as exc:
        return {}, f"Activation-aware scales were skipped (blocks are data-free): {exc.problem}"
    names = [o.name for o in session.get_outputs()]
    sums: dict[str, np.ndarray] = {}
    for feeds in inputs.samples:
        outs = dict(zip(names, session.run(None, feeds), strict=True))
        for act in set(acts.values()):
            a = np.asarray(outs[act])
            if a.ndim == 0 or not np.issubdtype(a.dtype, np.floating):
                continue
            a = a.reshape(-1, a.shape[-1]).astype(np.float64)
            power = np.mean(np.square(a), axis=0) / len(inputs.samples)
            sums[act] = sums.get(act, 0.0) + power
    return {name: sums[act] for name, act in acts.items() if act in sums and np.all(np.isfinite(sums[act]))}, ""

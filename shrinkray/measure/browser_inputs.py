"""The inputs a browser run gets: the comparison's parity samples (and reserve) and the feeds its latency timed.

Synthesis is deterministic for the same settings, so the page runs the **same inputs** the server's
parity used; their digest must match the comparison's (:meth:`BrowserInputs.same_as`).
"""

from __future__ import annotations

import numpy as np

from shrinkray.measure.browser import MAX_RESERVE_BYTES, BrowserInputs
from shrinkray.measure.inputs import first_axis_dynamic, load_inputs, samples_digest, synthesize
from shrinkray.measure.parity_inputs import MIN_DECISIONS, batch_dim_fixed, first_sets, parity_inputs
from shrinkray.measure.sample_files import load_sample_files


def prepare(model, settings) -> BrowserInputs:
    """The comparison's parity inputs, the server original's outputs on them, and the feeds its latency
    timed (runs ONNX Runtime: call it in a capped worker, ``sandbox.run_capped(prepare, model, settings)``)."""

    inputs = parity_inputs(model, settings)
    reserve_bytes = sum(int(np.asarray(v).nbytes) for feeds in inputs.reserve for v in feeds.values())
    whole = inputs.with_reserve() if reserve_bytes <= MAX_RESERVE_BYTES else inputs
    timing = latency_feeds(model, settings, inputs.options)
    first = next(iter(timing.values()), None)
    batch = int(first.shape[0]) if first is not None and first.ndim else 1
    first = len(inputs.samples) if whole is not inputs and inputs.reserve else 0
    reference, kinds, samples, count = whole.reference, whole.kinds, whole.samples, whole.count
    if inputs.decoder is not None:
        # the page runs each prompt once: its next tokens are judged (generation is the server's), on the first
        # sets that give BROWSER_POSITIONS of them: every model's logits go back through one message
        logits = inputs.decoder.logits
        per_set = int(np.prod(np.shape(inputs.reference[logits])[1:-1])) if len(inputs.samples) > 1 else 0
        part = first_sets(inputs, -(-BROWSER_POSITIONS // per_set)) if per_set else inputs
        reference, kinds, samples, first = {logits: part.reference[logits]}, {logits: kinds[logits]}, part.samples, 0
        count = part.count
    return BrowserInputs(samples, reference, kinds, inputs.note, count, settings.verdict,
                         timing, batch, samples_digest(inputs.samples), first, inputs.count, inputs.decoder,
                         tally=inputs.tally, tally_reference=inputs.tally_reference, tally_count=len(inputs.tally) * inputs.per_run)  # fmt: skip


#: Next-token positions a decoder is judged on in the browser: twice the decisions a top-1 verdict needs, so
#: that the page sends back a few MB of logits, not the server's every set (Streamlit's messages are capped).
BROWSER_POSITIONS = 2 * MIN_DECISIONS


def latency_feeds(model, settings, options) -> dict[str, np.ndarray]:
    """The inputs the comparison's first latency setting ran (batch 1 when the batch axis is free), so the
    browser's times compare with the server's like with like."""

    if settings.sample_files:
        return load_sample_files(settings.sample_files[:1], model, settings.inputs, settings.image_range)[0]
    if settings.inputs_path:
        return load_inputs(settings.inputs_path, model)
    batch = None
    if first_axis_dynamic(model) and not batch_dim_fixed(model, settings):
        batch = (settings.batches or [1])[0]
    return synthesize(model, options, batch=batch).feeds

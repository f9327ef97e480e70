"""Runs in the user's own browser (ONNX Runtime Web): the inputs it gets and how its outputs are judged.

Every other number in a comparison comes from ONNX Runtime on the server's CPU; a web page runs the
model in ONNX Runtime Web (WebAssembly), whose operator set, kernels and speed differ. The page runs
the **same inputs** the server's parity used (:func:`prepare` rebuilds them: synthesis is
deterministic for the same settings, and the input note must match the comparison's), and each
model's browser outputs are judged against the **server's original** with the same verdict
(:func:`judge`), so "passes in the browser" means what "passes" means everywhere else.

Tensors travel to and from JavaScript as ``{"name", "type", "dims", "data"}`` with ``data`` the
little-endian bytes in base64 (strings as a list), ``type`` ONNX Runtime Web's name for the dtype.
This module imports only numpy and the parity measures; :func:`prepare` loads the comparison code
(ONNX Runtime) when called, so the result dataclasses can import :class:`BrowserRun` cheaply.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shrinkray.measure.parity import OutputKind, Parity, VerdictSettings, compare_outputs
from shrinkray.verdict.parity_verdict import parity_verdict

#: numpy dtype -> ONNX Runtime Web tensor type (onnxruntime-common's Tensor.Type).
JS_TYPES: dict[str, str] = {
    "float32": "float32", "float64": "float64", "float16": "float16", "int8": "int8", "uint8": "uint8",
    "int16": "int16", "uint16": "uint16", "int32": "int32", "uint32": "uint32", "int64": "int64",
    "uint64": "uint64", "bool": "bool",
}  # fmt: skip
NUMPY_TYPES: dict[str, np.dtype] = {js: np.dtype(name) for name, js in JS_TYPES.items()}
#: Inputs larger than this (all samples together) are not sent to the page: a browser tab holds them twice.
MAX_INPUT_BYTES = 256 * 2**20
#: The server's reserve samples go to the page too (so it judges as the server did) up to this many bytes.
MAX_RESERVE_BYTES = 32 * 2**20
#: Runs timed per model after the first, in rounds across the models (the median is shown); the page stops sooner after a time budget.
DEFAULT_RUNS = 30
#: The runtime as the page reports it when it does not say (the shipped version).
RUNTIME = "onnxruntime-web"


class BrowserInputError(ValueError):
    """A tensor from the page that cannot be read (unknown type, wrong byte count)."""


@dataclass
class BrowserInputs:
    """What the page runs and what its outputs are judged against: the server's parity inputs and the
    server original's outputs on them."""

    samples: list[dict[str, np.ndarray]]
    reference: dict[str, np.ndarray]
    kinds: dict[str, OutputKind]
    note: str
    count: int  # input samples: the batch size when they run as one batch, else the number of runs
    verdict: VerdictSettings = field(default_factory=VerdictSettings)
    timing: dict[str, np.ndarray] = field(default_factory=dict)  # the feeds the server's latency timed
    timing_batch: int = 1  # their batch (the first axis of the first input), for like-with-like speed
    digest: str = ""  # measure.inputs.samples_digest of the parity samples (``samples[:first_sets]``)
    #: ``samples`` = the parity sets, then the server's reserve: a model is judged on the first ``first_sets``,
    #: and on all of them when those leave it undecided, as the server judged it (0: no reserve)
    first_sets: int = 0
    first_count: int = 0

    def same_as(self, comparison: Any) -> bool:
        """Whether these are the samples ``comparison`` judged on (its digest; a run from before digests were
        kept: its note, which then carried no measured time)."""
        kept = getattr(comparison, "inputs_digest", "")
        return self.digest == kept if kept else self.note == comparison.input_note

    def payload(self) -> dict[str, Any]:
        """What the page runs, as JSON: the parity samples (one list of tensors per run) and the timing feeds."""
        return {
            "samples": [[encode_tensor(name, value) for name, value in feeds.items()] for feeds in self.samples],
            "timing": [encode_tensor(name, value) for name, value in (self.timing or self.samples[0]).items()],
        }

    @property
    def input_bytes(self) -> int:
        return sum(int(np.asarray(v).nbytes) for feeds in self.samples for v in feeds.values())


@dataclass
class BrowserRun:
    """One model run in the user's browser: where it ran, how long each step took, and its parity."""

    key: str
    user_agent: str = ""
    threads: int | None = None  # ONNX Runtime Web's WASM threads (1 without cross-origin isolation)
    backend: str = "wasm"  # "wasm" or "webgpu"
    runtime: str = RUNTIME  # e.g. "onnxruntime-web 1.30.0"
    runtime_start_ms: float | None = None  # the runtime's own start (its WebAssembly fetched and compiled), once a page
    transfer_ms: float | None = None  # request start to the last byte of the model
    transfer_bytes: int | None = None  # bytes on the wire (the browser's encoded body size)
    model_bytes: int | None = None  # the model's own size once decoded
    content_encoding: str = ""  # what the browser got: "gzip", "br", "" (none)
    session_ms: float | None = None  # ort.InferenceSession.create from the downloaded bytes
    first_run_ms: float | None = None  # the first inference (includes the runtime's one-off set-up)
    median_ms: float | None = None  # median of the timed runs after the first
    runs: int = 0  # timed runs behind the median
    batch: int | None = None  # batch of the timed input (the server's latency input)
    parity: Parity | None = None  # the browser's outputs against the server original's
    error: str | None = None  # why the model did not load or run in the browser (the runtime's words)
    stage: str = ""  # where it failed: "download", "session", "run", "outputs"
    served_by: str = ""  # how the app's server sent the file (compression on the fly, precompressed or not)
    note: str = ""  # why parity was not judged although the model ran

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def passed(self) -> bool | None:
        """True/False when parity was measured, None when the model did not run."""
        return None if self.parity is None else self.parity.passed

    @property
    def failed(self) -> bool:
        """Did not run, or its outputs fail the verdict (undecided is not a failure: the browser runs the
        parity samples without the server's reserve, so a close call may rest on fewer decisions here)."""
        return not self.ok or (self.parity is not None and self.parity.status == "fail")

    def problem(self) -> str:
        """One sentence for a model that failed in the browser (empty when it ran)."""
        if self.ok:
            return ""
        where = {"download": "could not be downloaded", "session": "did not load", "run": "did not run",
                 "outputs": "ran but its outputs could not be read"}.get(self.stage, "did not run")  # fmt: skip
        return f"{self.key} {where} in {self.runtime} ({self.backend}): {self.error}"

    def as_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "parity"}
        data["parity"] = self.parity.as_dict() if self.parity is not None else None
        data["passed"] = self.passed
        return data


def encode_tensor(name: str, value: np.ndarray) -> dict[str, Any]:
    """One input as JSON for the page: dtype by ONNX Runtime Web's name, little-endian bytes in base64."""
    array = np.asarray(value)
    if array.dtype.kind in "OUS":
        return {"name": name, "type": "string", "dims": list(array.shape), "data": [str(s) for s in array.ravel()]}
    js = JS_TYPES.get(array.dtype.name)
    if js is None:
        raise BrowserInputError(f"Input {name} has type {array.dtype}, which ONNX Runtime Web cannot take")
    raw = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
    return {"name": name, "type": js, "dims": [int(d) for d in array.shape], "data": base64.b64encode(raw).decode()}


def decode_tensor(tensor: dict[str, Any]) -> np.ndarray:
    """A tensor from the page (the format :func:`encode_tensor` writes) as a numpy array."""
    kind, dims = tensor.get("type"), [int(d) for d in tensor.get("dims", [])]
    if any(d < 0 for d in dims):
        raise BrowserInputError(f"Tensor {tensor.get('name')} has a negative dimension {dims}")
    if kind == "string":
        values = list(tensor.get("data") or [])
        if len(values) != math.prod(dims):
            raise BrowserInputError(f"Tensor {tensor.get('name')}: {len(values)} strings for shape {dims}")
        return np.array(values, dtype=object).reshape(dims)
    dtype = NUMPY_TYPES.get(str(kind))
    if dtype is None:
        raise BrowserInputError(f"Tensor {tensor.get('name')} has type {kind!r}, which is not a known tensor type")
    raw = base64.b64decode(tensor.get("data") or "", validate=True)
    if len(raw) != math.prod(dims) * dtype.itemsize:
        raise BrowserInputError(f"Tensor {tensor.get('name')}: {len(raw)} bytes for shape {dims} of {kind}")
    return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype).reshape(dims)


def prepare(model, settings) -> BrowserInputs:
    """The comparison's parity inputs, the server original's outputs on them, and the feeds its latency
    timed (runs ONNX Runtime: call it in a capped worker, ``sandbox.run_capped(prepare, model, settings)``)."""
    from shrinkray.compare import parity_inputs
    from shrinkray.measure.inputs import samples_digest

    inputs = parity_inputs(model, settings)
    reserve_bytes = sum(int(np.asarray(v).nbytes) for feeds in inputs.reserve for v in feeds.values())
    whole = inputs.with_reserve() if reserve_bytes <= MAX_RESERVE_BYTES else inputs
    timing = latency_feeds(model, settings, inputs.options)
    first = next(iter(timing.values()), None)
    batch = int(first.shape[0]) if first is not None and first.ndim else 1
    first = len(inputs.samples) if whole is not inputs and inputs.reserve else 0
    return BrowserInputs(whole.samples, whole.reference, whole.kinds, inputs.note, whole.count, settings.verdict,
                         timing, batch, samples_digest(inputs.samples), first, inputs.count)  # fmt: skip


def latency_feeds(model, settings, options) -> dict[str, np.ndarray]:
    """The inputs the comparison's first latency setting ran (batch 1 when the batch axis is free), so the
    browser's times compare with the server's like with like."""
    from shrinkray.compare import _batch_dim_fixed
    from shrinkray.measure.inputs import first_axis_dynamic, load_inputs, load_sample_files, synthesize

    if settings.sample_files:
        return load_sample_files(settings.sample_files[:1], model, settings.inputs, settings.image_range)[0]
    if settings.inputs_path:
        return load_inputs(settings.inputs_path, model)
    batch = None
    if first_axis_dynamic(model) and not _batch_dim_fixed(model, settings):
        batch = (settings.batches or [1])[0]
    return synthesize(model, options, batch=batch).feeds


def _stack(runs: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Several runs stacked on a new first axis, as the server's parity stacks them."""
    if len(runs) == 1:
        return runs[0]
    names = [name for name in runs[0] if all(name in r for r in runs)]
    return {name: np.stack([r[name] for r in runs]) for name in names}


def judge(inputs: BrowserInputs, result: dict[str, Any]) -> BrowserRun:
    """One model's report from the page, its outputs judged against the server original's."""

    def number(name: str) -> float | None:
        value = result.get(name)
        return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None

    run = BrowserRun(
        key=str(result.get("key", "")),
        user_agent=str(result.get("userAgent", "")),
        threads=int(result["threads"]) if isinstance(result.get("threads"), int) else None,
        backend="webgpu" if result.get("backend") == "webgpu" else "wasm",  # shown unescaped: only the two we ship
        runtime=str(result.get("runtime") or RUNTIME),
        runtime_start_ms=number("runtimeStartMs"),
        transfer_ms=number("transferMs"),
        transfer_bytes=int(result["transferBytes"]) if isinstance(result.get("transferBytes"), int) else None,
        model_bytes=int(result["modelBytes"]) if isinstance(result.get("modelBytes"), int) else None,
        content_encoding=str(result.get("contentEncoding") or ""),
        session_ms=number("sessionMs"),
        first_run_ms=number("firstRunMs"),
        median_ms=number("medianMs"),
        runs=int(result["runs"]) if isinstance(result.get("runs"), int) else 0,
        error=str(result["error"]) if result.get("error") else None,
        stage=str(result.get("stage") or ""),
    )
    if run.error:
        return run
    if result.get("outputsTooLarge"):
        run.note = "its outputs were too large to send back from the browser, so parity was not judged here"
        return run
    try:
        runs = [{t["name"]: decode_tensor(t) for t in outputs} for outputs in result.get("outputs") or []]
    except (BrowserInputError, KeyError, TypeError, ValueError) as exc:
        run.error, run.stage = f"its outputs could not be read ({exc})", "outputs"
        return run
    if len(runs) != len(inputs.samples):
        run.error, run.stage = f"it returned {len(runs)} runs' outputs for {len(inputs.samples)} inputs", "outputs"
        return run
    try:  # runs whose outputs differ in shape or type from each other or the server's cannot be compared
        outputs = _stack(runs)
        if inputs.first_sets:  # the parity sets first; the reserve too only when they leave it undecided
            first = {k: v[:inputs.first_sets] for k, v in outputs.items()}
            reference = {k: v[:inputs.first_sets] for k, v in inputs.reference.items()}
            run.parity = compare_outputs(reference, first, inputs.kinds, inputs.verdict, samples=inputs.first_count)
            if run.parity.status != "undecided":
                return run
        run.parity = compare_outputs(inputs.reference, outputs, inputs.kinds, inputs.verdict,
                                     samples=inputs.count)  # fmt: skip
    except (TypeError, ValueError) as exc:
        run.error, run.stage = f"its outputs could not be read ({exc})", "outputs"
    return run


def judge_all(inputs: BrowserInputs, results: list[dict[str, Any]], served_by: str = "") -> list[BrowserRun]:
    """Every model the page ran, in the page's order."""
    runs = [judge(inputs, result) for result in results]
    for run in runs:
        run.served_by, run.batch = served_by, inputs.timing_batch
    return runs


def summary_line(run: BrowserRun) -> str:
    """One line per model for text reports: timings and parity, or the failure."""
    if not run.ok:
        return run.problem()

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:,.1f} ms"

    verdict = "not judged" if run.parity is None else parity_verdict(run.parity).sentence
    return (
        f"{run.key}: download {ms(run.transfer_ms)}, session {ms(run.session_ms)}, first run {ms(run.first_run_ms)}, "
        f"median {ms(run.median_ms)} ({run.runs} runs); parity against the server original {verdict}"
    )


def _bytes(n: int) -> str:
    from shrinkray.units import format_bytes

    return format_bytes(n)


def delivery_line(run: BrowserRun, sizes) -> str:
    """What the browser received against what a host with precompressed files would send (``sizes``: the
    model's measured :class:`~shrinkray.measure.sizes.Sizes`, or None)."""
    if run.transfer_bytes is None:
        return ""
    got = f"{_bytes(run.transfer_bytes)} as {run.content_encoding or 'uncompressed'}"
    text = f"{run.key}: the browser received {got}"
    if run.model_bytes:
        text += f" for a {_bytes(run.model_bytes)} file"
    if sizes is not None and getattr(sizes, "brotli", None):
        how = ("gzip -9" if sizes.brotli_encoding == "gzip"  # the smaller file a server has: brotli lost to gzip
               else f"{sizes.brotli_encoding or 'br'}, quality {sizes.brotli_quality}")  # fmt: skip
        best = f"{_bytes(sizes.brotli)} ({how})"
        text += f"; a host serving precompressed files would send {best}"
    return text


def advice_lines(comparison, runs: list[BrowserRun]) -> list[str]:
    """Plain sentences about the browser runs of ``comparison`` (a leading "!" marks a problem): a model
    that runs on the server but not in ONNX Runtime Web, parity that holds on the server but not in the
    browser, and how the files were delivered."""
    by_key = {run.key: run for run in runs}
    lines: list[str] = []
    original = by_key.get("original")
    same: list[str] = []  # variants failing exactly as the original does: said once
    if original is not None and not original.ok:
        same = [r.key for r in comparison.variants if r.key in by_key and by_key[r.key].error == original.error]
        also = f" Nor do its variants ({', '.join(same)}), with the same error." if same else ""
        lines.append(f"! The original runs on the server but not in {original.runtime} ({original.backend}): "
                     f"{original.error}.{also} Shrinking cannot fix that: run it with a runtime that has this "
                     "operator, or replace the operator in the model.")  # fmt: skip
    for result in comparison.variants:
        run = by_key.get(result.key)
        if run is None or result.key in same:
            continue
        if not run.ok:
            where = "runs on the server but not" if result.ok else "does not run on the server, nor"
            lines.append(f"! {result.key} {where} in {run.runtime} ({run.backend}): {run.error}. "
                         "Do not ship it to web pages; pick a variant that ran here.")  # fmt: skip
        elif run.failed and result.parity is not None and result.parity.passed:
            lines.append(f"! {result.key} passes parity on the server but not in the browser "
                         f"({parity_verdict(run.parity).sentence.rstrip('.')}): "
                         f"{run.runtime} computes it differently. Do not ship it to web pages.")  # fmt: skip
    if runs and runs[0].served_by:
        lines.append(f"Files were sent by {runs[0].served_by}.")
    return lines


def browser_name(user_agent: str) -> str:
    """A short name for a user agent ("HeadlessChrome 142", "Firefox 140"), for chart labels."""
    import re

    for name in ("Edg", "OPR", "Firefox", "HeadlessChrome", "Chrome", "Version"):
        found = re.search(rf"\b{name}/(\d+)", user_agent)
        if found:
            label = {"Edg": "Edge", "OPR": "Opera", "Version": "Safari"}.get(name, name)
            return f"{label} {found.group(1)}"
    return user_agent[:40] or "browser"


#: An empty cell (a plain "-" turns into a list bullet in Markdown tables).
DASH = "–"


def _ms(value: float | None) -> str:
    return DASH if value is None else (f"{value:,.0f} ms" if value >= 100 else f"{value:.1f} ms")


def median_ratio(runs: dict[str, BrowserRun], key: str) -> float | None:
    """A variant's median in the browser over the original's in the same browser and page (None for the
    original, or where either was not timed)."""
    from shrinkray.results import ORIGINAL  # results imports this module's BrowserRun

    run, base = runs.get(key), runs.get(ORIGINAL)
    if key == ORIGINAL or run is None or base is None or run.median_ms is None or not base.median_ms:
        return None
    return run.median_ms / base.median_ms


def _ratio(value: float | None) -> str:
    return DASH if value is None else f"{value:.2f}x"


def report_table(comparison, runs: list[BrowserRun]) -> tuple[list[str], list[list[str]]]:
    """The browser runs as a table for the reports and the app: one row per model, the server beside it."""
    header = ["model", "received", "download", "session", "first run", "median", "vs original",
              "server median (1 thread)",
              "parity in the browser", "parity on the server"]  # fmt: skip
    rows = []
    by_key = {run.key: run for run in runs}
    for run in runs:
        try:
            server = comparison.get(run.key)
        except KeyError:
            continue
        stats = server.latency_at(1, run.batch) if run.batch is not None else None
        if not run.ok:
            verdict = f"did not run ({run.stage}): see the advice"
        elif run.parity is None:
            verdict = "not judged: outputs too large to send back" if run.note else DASH
        else:
            verdict = parity_verdict(run.parity).sentence
        received = DASH if run.transfer_bytes is None else f"{_bytes(run.transfer_bytes)} as {run.content_encoding or 'identity'}"
        rows.append([
            run.key, received, _ms(run.transfer_ms), _ms(run.session_ms), _ms(run.first_run_ms),
            f"{_ms(run.median_ms)} ({run.runs} runs)" if run.median_ms is not None else DASH,
            _ratio(median_ratio(by_key, run.key)), _ms(stats.median_ms) if stats else DASH,
            verdict, DASH if server.parity is None else parity_verdict(server.parity).label,
        ])  # fmt: skip
    return header, rows


def report_notes(comparison, runs: list[BrowserRun]) -> list[str]:
    """Where the runs were measured, the delivery facts per model and the advice, as sentences."""
    if not runs:
        return []
    first = runs[0]
    threads = f"{first.threads} thread{'s' if (first.threads or 1) > 1 else ''}" if first.threads else "threads unknown"
    start = f"; the runtime itself started in {_ms(first.runtime_start_ms)}" if first.runtime_start_ms is not None else ""
    lines = [f"Measured in {first.user_agent or 'an unknown browser'} with {first.runtime} ({first.backend}, {threads}){start}; "
             f"timed on the server's latency input (batch {first.batch}), median of the runs after the first, in "
             "rounds that run every model once."]  # fmt: skip
    for run in runs:
        try:
            sizes = comparison.get(run.key).sizes
        except KeyError:
            sizes = None
        line = delivery_line(run, sizes)
        if line:
            lines.append(line + ".")
    return lines + [line for line in advice_lines(comparison, runs) if not line.startswith("!")]  # problems: advise()

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

from shrinkray.measure.generation import GENERATED_TOKENS
from shrinkray.measure.parity import OutputKind, Parity, VerdictSettings, compare_outputs

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
    #: a decoder LM's layout, for the page to generate with it (tokens per second): measure/decoder_lm.py
    decoder: Any = None
    #: an encoder–decoder set's roles for the page (pipeline/set_compare.browser_inputs): each sample is one input
    #: the page writes an output for, greedy, ``steps`` tokens each (the server original's own length)
    model_set: dict | None = None
    #: the server's tally (measure/parity_inputs.py): sets whose big scores outputs the page sends back as each
    #: position's top class and gap along its class axis (its kind's), judged with the samples
    tally: list[dict[str, np.ndarray]] = field(default_factory=list, repr=False)
    tally_reference: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    tally_count: int = 0  # input samples in the tally

    def same_as(self, comparison: Any) -> bool:
        """Whether these are the samples ``comparison`` judged on (its digest; a run from before digests were
        kept: its note, which then carried no measured time)."""
        kept = getattr(comparison, "inputs_digest", "")
        return self.digest == kept if kept else self.note == comparison.input_note

    def payload(self) -> dict[str, Any]:
        """What the page runs, as JSON: the parity samples (one list of tensors per run) and the timing feeds."""
        payload: dict[str, Any] = {
            "samples": [[encode_tensor(name, value) for name, value in feeds.items()] for feeds in self.samples],
            "timing": [encode_tensor(name, value) for name, value in (self.timing or self.samples[0]).items()],
        }
        if self.tally:  # the page keeps each position's top class and gap of these outputs, as the server did
            payload["tally"] = [[encode_tensor(name, value) for name, value in feeds.items()] for feeds in self.tally]
            payload["tallied"] = {name: self.kinds[name].axis for name in self.tally_reference}
        if self.model_set is not None:  # the page writes each input's output through the set, token by token
            payload["set"] = self.model_set
        if self.decoder is not None:  # the page sends back only what is judged, and generates from the timing prompt
            d = self.decoder
            payload["judged"] = sorted(self.reference)
            payload["decoder"] = {"inputIds": d.input_ids, "logits": d.logits, "attentionMask": d.attention_mask,
                                  "positionIds": d.position_ids, "useCache": d.use_cache,
                                  "past": [[p.input, p.output] for p in d.past], "tokens": GENERATED_TOKENS}  # fmt: skip
        return payload

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
    #: a decoder LM generating in the page from the timing prompt: the prompt's pass, then tokens a second
    #: through its cache (the whole sequence again without one), and the tokens it wrote
    prefill_ms: float | None = None
    tokens_per_s: float | None = None
    generated: list[int] = field(default_factory=list)
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


def _stack(runs: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Several runs stacked on a new first axis, as the server's parity stacks them."""
    if len(runs) == 1:
        return runs[0]
    names = [name for name in runs[0] if all(name in r for r in runs)]
    return {name: np.stack([r[name] for r in runs]) for name in names}


def _like_reference(outputs: dict[str, np.ndarray], reference: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The outputs the server judged, as it kept them: a decoder LM's logits over the prompt's last positions
    only (measure/decoder_lm.py), its cache outputs not at all. Others pass as they are."""
    kept = dict(outputs)
    for name, ref in reference.items():
        value = kept.get(name)
        if value is not None and value.ndim == ref.ndim >= 2 and value.shape[-2] > ref.shape[-2] and \
                value.shape[:-2] == ref.shape[:-2] and value.shape[-1] == ref.shape[-1]:  # fmt: skip
            kept[name] = value[..., value.shape[-2] - ref.shape[-2]:, :]
    if len(reference) < len(kept) and set(reference) <= set(kept):
        kept = {name: kept[name] for name in reference}
    return kept


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
        prefill_ms=number("prefillMs"),
        tokens_per_s=number("tokensPerSecond"),
        generated=[int(t) for t in result.get("generated") or [] if isinstance(t, int)][:GENERATED_TOKENS],
    )
    if run.error:
        return run
    if inputs.model_set is not None:
        return _judge_set(inputs, result, run)
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
        outputs = _like_reference(_stack(runs), inputs.reference)
        tally = _tally(inputs, result)
        if inputs.first_sets:  # the parity sets first; the reserve too only when they leave it undecided
            first = {k: v[:inputs.first_sets] for k, v in outputs.items()}
            reference = {k: v[:inputs.first_sets] for k, v in inputs.reference.items()}
            run.parity = compare_outputs(reference, first, inputs.kinds, inputs.verdict,
                                         samples=inputs.first_count + inputs.tally_count, tally=tally)  # fmt: skip
            if run.parity.status != "undecided":
                return run
        run.parity = compare_outputs(inputs.reference, outputs, inputs.kinds, inputs.verdict,
                                     samples=inputs.count + inputs.tally_count, tally=tally)  # fmt: skip
    except (BrowserInputError, KeyError, TypeError, ValueError) as exc:
        run.error, run.stage = f"its outputs could not be read ({exc})", "outputs"
    return run


def _tally(inputs: BrowserInputs, result: dict[str, Any]) -> dict | None:
    """The page's top classes on the tally's sets beside the server original's, by output (compare_outputs'
    ``tally``); None without a tally. Raises ValueError when the page sent too few or odd ones."""
    if not inputs.tally:
        return None
    runs = result.get("tally")
    if not isinstance(runs, list) or len(runs) != len(inputs.tally):
        raise ValueError(f"it returned {len(runs) if isinstance(runs, list) else 'no'} sets of top classes for {len(inputs.tally)}")
    tops = [{t["name"]: decode_tensor(t) for t in run} for run in runs]
    found = {}
    for name, ref in inputs.tally_reference.items():
        var = np.stack([np.asarray(run[name], np.float64) for run in tops])
        if var.shape != ref.shape:
            raise ValueError(f"its top classes of {name} have shape {list(var.shape)}, not {list(ref.shape)}")
        found[name] = (ref, var)
    return found


def _judge_set(inputs: BrowserInputs, result: dict[str, Any], run: BrowserRun) -> BrowserRun:
    """A set's outputs written in the page (token lists, one per input) judged as the server judged its own:
    each up to the server original's length, its end token after, against the original's tokens and margins."""
    from shrinkray.measure.generation import GENERATED

    reference = np.asarray(inputs.reference[GENERATED], np.float64)
    rows = result.get("generatedRows")
    if not isinstance(rows, list) or len(rows) != len(reference):
        run.error, run.stage = f"it wrote {len(rows) if isinstance(rows, list) else 'no'} outputs for {len(reference)} inputs", "outputs"
        return run
    end = inputs.model_set.get("end")
    written = np.full(reference.shape[:2], -1 if end is None else end, np.float64)
    for index, row in enumerate(rows):
        tokens = [int(t) for t in row if isinstance(t, int)][: reference.shape[1]]
        written[index, : len(tokens)] = tokens
    variant = np.stack([written, reference[:, :, 1]], axis=-1)  # the original's margins: where it hesitated
    run.parity = compare_outputs({GENERATED: reference}, {GENERATED: variant}, inputs.kinds, inputs.verdict,
                                 samples=len(reference))  # fmt: skip
    return run


def judge_all(inputs: BrowserInputs, results: list[dict[str, Any]], served_by: str = "") -> list[BrowserRun]:
    """Every model the page ran, in the page's order."""
    runs = [judge(inputs, result) for result in results]
    for run in runs:
        run.served_by, run.batch = served_by, inputs.timing_batch
    return runs

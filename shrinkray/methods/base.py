"""What every shrinking method shares: options, selection, results, registry.

A method is an options dataclass plus ``apply(model, options) -> Variant``,
registered once with :func:`register`. A method that judges or calibrates on
the run's inputs says so in its spec (``uses_context``) and receives a
:class:`RunContext` as a third argument. The CLI builds its flags and the app
its controls from the options' fields and their ``metadata`` (help text,
choices, bounds), so adding a method touches one module.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import typing
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import onnx

from shrinkray.cores import usable_cores
from shrinkray.errors import MethodError, OptionError
from shrinkray.graph.sessions import open_session
from shrinkray.graph.weights import WeightRef
from shrinkray.measure import decoder_lm
from shrinkray.measure.inputs import load_inputs
from shrinkray.measure.parity_inputs import parity_inputs, split_for_calibration, user_halves
from shrinkray.measure.results import CompareSettings
from shrinkray.methods.quant import ErrorStats

T = TypeVar("T")


def option(default: Any, help: str, **meta: Any) -> Any:
    """A dataclass field carrying the help text and bounds used by CLI and UI."""
    return field(default=default, metadata={"help": help, **meta})


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _coerce(value: Any, kind: str, flag: str) -> Any:
    """Accept strings (CLI, URLs) and numbers for typed option fields."""
    try:
        if kind == "bool" and isinstance(value, str):
            if value.strip().lower() not in _TRUE | _FALSE:
                raise ValueError(value)
            return value.strip().lower() in _TRUE
        if kind == "int" and not isinstance(value, bool):
            as_float = float(value)
            if as_float != int(as_float):
                raise ValueError(value)
            return int(as_float)
        if kind == "float" and not isinstance(value, bool):
            return float(value)
    except (TypeError, ValueError, OverflowError):
        raise OptionError(f"{flag} expects a{'n' if kind == 'int' else ''} {kind}, not {value!r}", "Fix the value") from None
    return value


def _kind_of(annotation: Any) -> str:
    """bool, int, float, str or list: what the CLI, the app and the checks make of a field's type."""
    if annotation in (bool, int, float, str):
        return annotation.__name__
    origin = typing.get_origin(annotation)
    if origin in (list, tuple) or annotation in (list, tuple):
        return "list"
    return "str"


@dataclass
class MethodOptions:
    """Base class: checks every field against its declared choices and bounds."""

    @classmethod
    def field_kinds(cls) -> dict[str, str]:
        """Each option's kind from its real (resolved) type annotation, never from annotation text."""
        hints = typing.get_type_hints(cls)
        return {f.name: _kind_of(hints[f.name]) for f in dataclasses.fields(cls)}

    def __post_init__(self) -> None:
        kinds = self.field_kinds()
        for f in dataclasses.fields(self):
            flag = "--" + f.name.replace("_", "-")
            value = _coerce(getattr(self, f.name), kinds[f.name], flag)
            setattr(self, f.name, value)
            meta = f.metadata
            if "choices" in meta and value not in meta["choices"]:
                raise OptionError(
                    f"{flag} must be one of {', '.join(map(str, meta['choices']))}, not {value!r}",
                    "Pick one of the listed values",
                )
            if "min" in meta and value < meta["min"]:
                raise OptionError(f"{flag} must be at least {meta['min']}, not {value}", "Use a larger value")
            if "max" in meta and value > meta["max"]:
                raise OptionError(f"{flag} must be at most {meta['max']}, not {value}", "Use a smaller value")
            is_list = isinstance(f.default, (list, tuple)) or f.default_factory is not dataclasses.MISSING
            if is_list and isinstance(value, str):
                setattr(self, f.name, [v.strip() for v in value.split(",") if v.strip()])

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class TensorSelection(MethodOptions):
    """Which stored float tensors a weight method rewrites."""

    min_elements: int = option(16384, "Only tensors with at least this many values are rewritten", min=1)
    include: list[str] = field(
        default_factory=list,
        metadata={"help": "Only tensors whose name matches one of these globs (comma-separated)"},
    )
    exclude: list[str] = field(
        default_factory=list, metadata={"help": "Skip tensors whose name matches one of these globs (comma-separated)"}
    )

    def selects(self, ref: WeightRef) -> bool:
        if not ref.is_float or ref.is_graph_input or ref.elements < self.min_elements:
            return False
        if self.include and not any(fnmatch.fnmatchcase(ref.name, p) for p in self.include):
            return False
        return not any(fnmatch.fnmatchcase(ref.name, p) for p in self.exclude)


@dataclass
class TensorChange:
    """One rewritten tensor: where it lives, its bytes and how far it moved."""

    name: str
    where: str
    dtype: str
    shape: list[int]
    bytes_before: int
    bytes_after: int
    max_abs_error: float
    rms_error: float
    relative_rms_error: float
    encoding: str = ""

    @classmethod
    def of(cls, ref: WeightRef, bytes_after: int, stats: ErrorStats, encoding: str) -> TensorChange:
        return cls(
            name=ref.name,
            where=ref.where,
            dtype=ref.dtype_name,
            shape=list(ref.shape),
            bytes_before=ref.nbytes,
            bytes_after=bytes_after,
            max_abs_error=stats.max_abs,
            rms_error=stats.rms,
            relative_rms_error=stats.relative_rms,
            encoding=encoding,
        )


@dataclass
class Variant:
    """A shrunk model and the record of what the method changed."""

    method: str
    options: dict[str, Any]
    model: onnx.ModelProto
    changes: list[TensorChange] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Method-specific records for reports (auto: the per-tensor ``precision_map``).
    details: dict[str, Any] = field(default_factory=dict)
    #: The optimized ONNX Runtime session validation opened (shrink(keep_session=True)); never pickled.
    session: Any = field(default=None, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "session": None}

    @property
    def bytes_before(self) -> int:
        return sum(c.bytes_before for c in self.changes)

    @property
    def bytes_after(self) -> int:
        return sum(c.bytes_after for c in self.changes)

    def summary(self) -> dict[str, Any]:
        """JSON-ready record (without the model itself)."""
        return {
            "method": self.method,
            "options": self.options,
            "tensors_changed": len(self.changes),
            "weight_bytes_before": self.bytes_before,
            "weight_bytes_after": self.bytes_after,
            "changes": [_json_safe(dataclasses.asdict(c)) for c in self.changes],
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            **({"details": self.details} if self.details else {}),
        }


#: A tensor whose RMS error exceeds this share of its own RMS value has lost
#: much of its information; it is always reported, never passed silently.
DAMAGE_THRESHOLD = 0.25


def warn_if_damaged(variant: Variant, change: TensorChange) -> None:
    """Add a warning to the variant when one tensor moved too far."""
    if change.relative_rms_error > DAMAGE_THRESHOLD:
        variant.warnings.append(
            f"Tensor '{change.name}' moved a lot: its RMS error is {change.relative_rms_error:.0%} "
            f"of its RMS value ({change.encoding}); outputs may change. Leave it in float (exclude it) "
            "or use more levels / another method"
        )


#: Threads for per-tensor numpy work; numpy releases the GIL inside its loops,
#: so tensors are encoded in parallel while the graph is edited in order.
MAX_TENSOR_WORKERS = 4


#: A tensor this large is worked on with nothing else in flight: a method's temporaries are a few times the
#: tensor, and two large ones at once set compare's peak (weights-int4's 25 MB embedding beside another tensor
#: on the 101 MB benchmark model, measured 2026-11-27; docs/benchmarks.md "Speed and memory").
ALONE_BYTES = 16 << 20


def map_tensors(work: Callable[[WeightRef], T], refs: list[WeightRef]) -> Iterator[T]:
    """``work(r) for r in refs``, on up to MAX_TENSOR_WORKERS threads (one per core), yielded in order.

    At most one result per worker is in flight or waiting, so the caller's
    memory holds a few tensors' results, not all of them. ``work`` must only
    read its tensor and return new arrays: the caller edits the model.
    """
    workers = min(MAX_TENSOR_WORKERS, usable_cores(), len(refs))
    if workers <= 1:
        yield from (work(r) for r in refs)
        return
    waiting = deque(refs)
    pending: deque[tuple[Future, bool]] = deque()  # (its result, a tensor that runs alone)

    def alone(ref: WeightRef) -> bool:
        return getattr(ref, "nbytes", 0) >= ALONE_BYTES

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="shrinkray-tensor") as pool:

        def fill() -> None:
            while waiting and not (pending and (len(pending) >= workers or alone(waiting[0]) or pending[-1][1])):
                ref = waiting.popleft()
                pending.append((pool.submit(work, ref), alone(ref)))

        fill()
        while pending:
            result = pending.popleft()[0].result()
            fill()  # the next ones start before the caller takes this result
            yield result


def _json_safe(record: dict[str, Any]) -> dict[str, Any]:
    """NaN (an error that could not be measured) becomes null, which strict JSON allows."""
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in record.items()}


@dataclass
class RunContext:
    """What the run judges by and calibrates on, for methods whose spec has ``uses_context``.

    ``settings``: the run's CompareSettings (verdict, tolerances, the user's inputs or how to
    synthesize them); None stands for the defaults. ``inputs``: the samples parity uses with the
    original's outputs on them (compare's ``ParityInputs``), when the caller already has them, so
    a method judges and calibrates on exactly what compare judges its result on. Without them
    :meth:`parity_inputs` derives them from ``settings`` (the CLI's ``shrink``)."""

    settings: Any = None
    inputs: Any = None
    #: The samples a method may learn from (compare's ``CalibrationSplit.calibration``): never those its
    #: result is judged on. None: :meth:`calibration_inputs` splits the run's inputs the same way.
    calibration: Any = None
    #: What a method's ``prepare`` worked out on the original before its weights were loaded, for its
    #: ``apply`` to take (keyed by the method); empty unless a caller ran ``prepare``.
    prepared: dict = field(default_factory=dict)

    def judging_settings(self) -> Any:
        return self.settings if self.settings is not None else CompareSettings()

    def parity_inputs(self, model: onnx.ModelProto, session: Any = None) -> Any:
        """The run's parity inputs for ``model`` (the original, or a copy that accepts the same inputs)."""
        if self.inputs is not None:
            return self.inputs

        return parity_inputs(model, self.judging_settings(), session=session)

    def calibration_inputs(self, model: onnx.ModelProto, session: Any = None, tally: bool = False) -> Any:
        """Samples with the original's outputs that calibration or a search may use: the run's own split,
        or one made here from the run's inputs (``model``: the original, or a copy with the same inputs;
        ``tally``: a search judges on them, so the sets past the cap are tallied, as compare's split does for
        a method that ``judges_candidates``)."""
        if self.calibration is not None:
            return self.calibration

        session = session if session is not None else open_session(model)
        inputs = self.parity_inputs(model, session)
        self.calibration = split_for_calibration(inputs, model, self.judging_settings(), session, tally).calibration
        return self.calibration

    def calibrates_on_user_data(self, model: onnx.ModelProto) -> bool:
        """Whether calibration gets the user's own samples (two or more of them, so some are held out)."""
        if self.calibration is not None:
            return bool(self.calibration.user_data)
        settings = self.judging_settings()
        if len(settings.sample_files or []) >= 2:
            return True
        if not settings.inputs_path:
            return False

        return user_halves([load_inputs(settings.inputs_path, model)], model) is not None

    def calibrates_like_its_own(self, model: onnx.ModelProto) -> bool:
        """Whether calibration inputs are like the model's own. A decoder LM's are only real text (its
        tokenizer.json, or the user's samples): activation-aware scales calibrated on token ids drawn without
        one changed the greedy continuation of 11 of 20 real prompts where the uncalibrated build kept all
        (issue 28). Any other model: its synthesized inputs are built to look real (measure/inputs.py)."""
        if decoder_lm.layout_of(model) is None:
            return True
        settings = self.judging_settings()
        return bool(settings.inputs.tokenizer) or self.calibrates_on_user_data(model)

    def __getstate__(self) -> dict[str, Any]:
        # A worker derives the samples itself (they can be large); what ``prepare`` worked out travels with it.
        return {"settings": self.settings, "inputs": None, "calibration": None, "prepared": self.prepared}


@dataclass(frozen=True)
class MethodSpec:
    """A registered method: its name, what it does, options and functions."""

    name: str
    title: str
    summary: str
    options_type: type[MethodOptions]
    apply: Callable[..., Variant]  # (model, options), or (model, options, context) with uses_context
    candidates: Callable[[list[WeightRef], Any], list[WeightRef]]
    position: int = 99  # order in listings, menus and reports
    #: What the method changes besides storage: True when the model computes differently (e.g. int8
    #: activations), so speed and accuracy can move in ways weight errors do not predict.
    changes_compute: bool = False
    #: What to try with this method's own options when one of its variants fails parity (plain words, no
    #: front-end syntax, no other method's name: those are :attr:`alternatives`).
    parity_hint: str = ""
    #: The option value that makes ``parity_hint`` moot (already in use): ("granularity", "per-channel").
    parity_hint_done: tuple[str, Any] | None = None
    #: Other methods to try when a variant of this method fails parity, best first, and why, as a clause
    #: that agrees with more than one ("which keep activations in float"). Advice drops those already run.
    alternatives: tuple[str, ...] = ("float16",)
    alternatives_why: str = "which is near-lossless"
    #: Its variants compute as the original does once ONNX Runtime has opened them (the decode is folded
    #: at load), so they run at the original's speed: what advice offers instead of a slower variant.
    keeps_speed: bool = False
    #: Advice on a choice of options (e.g. very few palette levels), or None when there is none.
    option_advice: Callable[[dict[str, Any]], str | None] | None = None
    #: The float values the model will compute with after this method rewrites one tensor with its
    #: default options (None: the method would leave it as it is). Lets the precision search (auto)
    #: try a tensor's precision without building a model.
    approximate: Callable[[np.ndarray, WeightRef], np.ndarray | None] | None = None
    #: Bytes per value this method stores with its default options (the precision search's size model).
    bytes_per_value: float = 0.0
    #: Part of "all methods" (a plain compare): False for searches that run the model many times.
    in_default_set: bool = True
    #: The transformers.js dtype its default variant stands for, whose file name it takes in a transformers.js
    #: folder (``model_quantized.onnx`` for "quantized", ``model_fp16.onnx`` for "fp16"); "" for none.
    transformers_js: str = ""
    #: Judges candidate variants by the run's verdict on its calibration inputs (a search): those then carry a
    #: tally of top classes, so that its verdicts rest on as many decisions as compare's.
    judges_candidates: bool = False
    #: The work happens in a child process (the caller's thread mostly waits): compare builds such a
    #: variant in the background while it builds and measures the others.
    runs_in_child_process: bool = False
    #: ``apply`` with the caller supplying ``read`` (a tensor's values) and ``editor`` (a GraphEditor):
    #: lets :mod:`shrinkray.pipeline.streaming` convert a model whose weights stay in external data files,
    #: one tensor at a time. None: the method needs the whole model in memory.
    stream: Callable[..., Variant] | None = None
    #: Whether ``stream`` works with these options (None: with any); float16's compute mode, say, rewrites the
    #: whole graph and cannot.
    streams_with: Callable[[Any], bool] | None = None
    #: Judges or calibrates on the run's inputs: ``apply(model, options, context)`` receives the
    #: :class:`RunContext` (the verdict and inputs compare judges with), so its result is chosen on
    #: what it will be shown against.
    uses_context: bool = False
    #: ``prepare(header, options, context, base_dir)``: work on the original before its weights are loaded
    #: (``header``: its graph with every large tensor in a data file in ``base_dir``), kept in
    #: ``context.prepared`` for ``apply``. compare runs it so that, e.g., weights-int4's calibration session
    #: does not open beside a loaded copy of the model. None: nothing to prepare.
    prepare: Callable[..., None] | None = None

    def run(self, model: onnx.ModelProto, options: Any, context: RunContext | None = None) -> Variant:
        """``apply`` with the run's context when the method takes one (the defaults when none is given)."""
        if self.uses_context:
            return self.apply(model, options, context or RunContext())
        return self.apply(model, options)

    @property
    def traceable(self) -> bool:
        """Rewrites tensors one by one under include/exclude: damage can be traced to single tensors,
        and a model without large float tensors gives it nothing to do."""
        return issubclass(self.options_type, TensorSelection)

    def streams(self, options: MethodOptions) -> bool:
        """Whether this method converts a model tensor by tensor (``stream``) with ``options``."""
        return self.stream is not None and (self.streams_with is None or self.streams_with(options))

    def make_options(self, **values: Any) -> MethodOptions:
        known = {f.name for f in dataclasses.fields(self.options_type)}
        unknown = sorted(set(values) - known)
        if unknown:
            flags = ", ".join("--" + u.replace("_", "-") for u in unknown)
            raise OptionError(
                f"The {self.name} method has no option {flags}",
                "Options it takes: " + ", ".join("--" + k.replace("_", "-") for k in sorted(known)),
            )
        return self.options_type(**values)


_REGISTRY: dict[str, MethodSpec] = {}


def register(spec: MethodSpec) -> MethodSpec:
    if spec.name in _REGISTRY:
        raise ValueError(f"method {spec.name} registered twice")
    _REGISTRY[spec.name] = spec
    return spec


def get_method(name: str) -> MethodSpec:
    key = name.strip().lower().replace("_", "-")
    if key not in _REGISTRY:
        raise MethodError(f"Unknown method '{name}'", "Available methods: " + ", ".join(sorted(_REGISTRY)))
    return _REGISTRY[key]


def default_methods() -> list[tuple[str, dict[str, Any]]]:
    """(name, options) of the methods a comparison runs when none are asked for: each in the default set."""
    return [(spec.name, {}) for spec in all_methods() if spec.in_default_set]


def all_methods() -> list[MethodSpec]:
    return sorted(_REGISTRY.values(), key=lambda spec: (spec.position, spec.name))

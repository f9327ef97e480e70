"""What a comparison found: plain dataclasses, so readers stay light.

``advice``, ``pricing``, ``charts`` and ``report`` (and the app's job queue,
which sends these between processes) only read results. Keeping them here,
away from :mod:`shrinkray.pipeline.compare`, means reading a result never imports
ONNX Runtime or the methods: no imports beyond numpy and the light
measurement types, and ``onnx`` only for type checking.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shrinkray.measure.browser import BrowserRun
from shrinkray.measure.examples import OutputExamples
from shrinkray.measure.latency import DEFAULT_BUDGET_S, DEFAULT_WARMUP, TARGET, LatencyStats, default_threads
from shrinkray.measure.parity import Parity, VerdictSettings
from shrinkray.measure.sizes import Sizes

if TYPE_CHECKING:
    import onnx

    from shrinkray.measure.inputs import InputOptions
    from shrinkray.pipeline.inspect import ModelSummary

#: The key of the original model among a comparison's results.
ORIGINAL = "original"


def _max_run_seconds() -> float:
    from shrinkray.io.limits import Limits  # at call time: limits parses models (onnx)

    return Limits.from_env().max_run_seconds


def _input_options() -> InputOptions:
    from shrinkray.measure.inputs import InputOptions  # at call time: the synthesizer needs onnx and Pillow

    return InputOptions()


@dataclass
class CompareSettings:
    """Everything that shapes a comparison; defaults are what the CLI uses."""

    methods: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # empty: the default set
    verdict: VerdictSettings = field(default_factory=VerdictSettings)
    runs: int | None = None  # None: adaptive (until every ratio is known within ±latency_target, or the budget)
    warmup: int = DEFAULT_WARMUP
    threads: list[int] = field(default_factory=default_threads)
    batches: list[int] | None = None  # None: batch 1 when the batch axis is free, else the fixed size; sweep: [1, 8, 32]
    latency_budget_s: float | None = DEFAULT_BUDGET_S  # per (threads, batch) setting; adaptive timing often stops sooner
    latency_target: float = TARGET  # half-width of the ratio's 95% interval at which timing stops (0.03 = ±3%)
    latency: bool = True
    brotli_quality: int | str = "auto"
    zstd_level: int | None = None
    inputs: InputOptions = field(default_factory=_input_options)
    inputs_path: str | None = None  # an .npz / .npy file
    sample_files: list[str] = field(default_factory=list)  # images or WAV files, one sample each
    image_range: str = "auto"  # value range images are mapped to: auto (from the graph) or content.IMAGE_RANGES
    parity_batch: int = 4  # input samples for parity (one batch when the batch axis is free)
    probe_budget_s: float = 20.0  # trying other free dimensions when the original rejects the inputs
    parity_budget_s: float = field(default_factory=_max_run_seconds)
    culprits: bool = False  # search the tensors behind a failing variant (auto turns it on)
    culprit_budget_s: float = 60.0
    auto: bool = False
    # Write each variant here as soon as it is validated (VariantResult.file) and drop its model from
    # memory, so a worker holds the original and one variant at a time; None: keep the models.
    variants_dir: str | None = None


@dataclass
class Culprit:
    """A tensor whose rewriting alone moves the outputs this much."""

    tensor: str
    max_abs_error: float
    mean_abs_error: float
    worst_cosine: float | None
    passes_alone: bool
    severity: float = 0.0  # share of the allowed error used (1.0 = at the limit)


@dataclass
class VariantResult:
    """One model of a comparison (the original or a variant) and everything measured on it."""

    key: str
    method: str | None
    options: dict[str, Any]
    model: onnx.ModelProto | None = field(default=None, repr=False)
    sizes: Sizes | None = None
    parity: Parity | None = None
    latency: list[LatencyStats] = field(default_factory=list)
    record: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    culprits: list[Culprit] = field(default_factory=list)
    error: str | None = None
    file: str | None = None  # where the variant was written (compare --save-dir, settings.variants_dir)
    #: what changes: per output, the inputs where it differs most from the original's (measure/what_changes.py)
    examples: list[OutputExamples] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None

    def latency_at(self, threads: int, batch: int) -> LatencyStats | None:
        return next((s for s in self.latency if s.threads == threads and s.batch == batch), None)


@dataclass
class Comparison:
    """The original and its variants, measured alike; also the partial snapshots ``on_partial`` receives."""

    name: str
    summary: ModelSummary
    settings: CompareSettings
    original: VariantResult
    variants: list[VariantResult]
    input_note: str = ""
    latency_note: str = ""
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase: shrink, sizes, parity, culprits, latency
    input_files: list[str] = field(default_factory=list)  # the user's model files: reports never land on these
    browser: list[BrowserRun] = field(default_factory=list)  # runs in the user's browser (ONNX Runtime Web), if any
    inputs_digest: str = ""  # measure.inputs.samples_digest of the parity samples: the browser panel reruns these

    @property
    def all(self) -> list[VariantResult]:
        return [self.original, *self.variants]

    def get(self, key: str) -> VariantResult:
        for result in self.all:
            if result.key == key:
                return result
        raise KeyError(key)

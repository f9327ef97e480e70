"""Output parity: the same inputs through the original and a variant, every output compared.

Float outputs get max and mean absolute error, cosine similarity and, when
they look like class scores, top-1 agreement; the verdict uses two absolute
tolerances (defaults 0.06 max, 0.02 mean). Non-float outputs (labels, ids,
masks) must match exactly.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

DEFAULT_ABS_TOL = 0.06
DEFAULT_MEAN_TOL = 0.02
#: Small absolute errors can hide a destroyed output (a detector's near-zero probability map whose
#: pattern is gone still passes 0.06): a float output must also keep this cosine similarity.
DEFAULT_MIN_COSINE = 0.99
#: Points kept per output for the error histogram and the scatter chart.
SAMPLE_POINTS = 2000


@dataclass
class OutputParity:
    name: str
    dtype: str
    shape: list[int]
    exact: bool  # compared for equality (non-float output)
    max_abs_error: float
    mean_abs_error: float
    cosine: float | None
    top1_agreement: float | None
    mismatch_fraction: float | None  # non-float outputs: share of elements that differ
    passed: bool
    reason: str = ""
    sample_reference: list[float] = field(default_factory=list, repr=False)
    sample_variant: list[float] = field(default_factory=list, repr=False)

    def as_dict(self, with_samples: bool = False) -> dict[str, Any]:
        data = asdict(self)
        if not with_samples:
            data.pop("sample_reference")
            data.pop("sample_variant")
        return data


@dataclass
class Parity:
    outputs: list[OutputParity]
    abs_tol: float
    mean_tol: float
    min_cosine: float = DEFAULT_MIN_COSINE

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs)

    @property
    def worst_cosine(self) -> float | None:
        values = [o.cosine for o in self.outputs if o.cosine is not None]
        return min(values) if values else None

    @property
    def max_abs_error(self) -> float:
        return max((o.max_abs_error for o in self.outputs if not o.exact), default=0.0)

    @property
    def mean_abs_error(self) -> float:
        return max((o.mean_abs_error for o in self.outputs if not o.exact), default=0.0)

    def as_dict(self, with_samples: bool = False) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "abs_tol": self.abs_tol,
            "mean_tol": self.mean_tol,
            "min_cosine": self.min_cosine,
            "worst_cosine": self.worst_cosine,
            "max_abs_error": self.max_abs_error,
            "mean_abs_error": self.mean_abs_error,
            "outputs": [o.as_dict(with_samples) for o in self.outputs],
        }


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> float:
    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    nx, ny = float(np.linalg.norm(x)), float(np.linalg.norm(y))
    if nx == 0.0 and ny == 0.0:
        return 1.0
    if nx == 0.0 or ny == 0.0:
        return 0.0
    return float(np.dot(x, y) / (nx * ny))


def looks_like_scores(shape: tuple[int, ...]) -> bool:
    """[batch, classes] or [batch, ..., classes] with a real class axis."""
    return len(shape) >= 2 and 2 <= shape[-1] <= 100_000


def _sample(a: np.ndarray, b: np.ndarray, seed: int = 0) -> tuple[list[float], list[float]]:
    x, y = a.ravel(), b.ravel()
    if x.size > SAMPLE_POINTS:
        idx = np.random.default_rng(seed).choice(x.size, SAMPLE_POINTS, replace=False)
        idx.sort()
        x, y = x[idx], y[idx]
    return x.astype(np.float64).tolist(), y.astype(np.float64).tolist()


def _beyond(value: float, tol: float) -> str:
    """Enough digits that a value just over the tolerance does not print as the tolerance."""
    for digits in range(4, 12):
        text = f"{value:.{digits}g}"
        if float(text) > tol:
            return text
    return repr(value)


def compare_output(
    name: str,
    reference: np.ndarray,
    variant: np.ndarray,
    abs_tol: float,
    mean_tol: float,
    min_cosine: float = DEFAULT_MIN_COSINE,
) -> OutputParity:
    ref, var = np.asarray(reference), np.asarray(variant)
    base = {"name": name, "dtype": str(ref.dtype), "shape": list(ref.shape)}
    if ref.shape != var.shape:
        return OutputParity(
            **base, exact=False, max_abs_error=float("inf"), mean_abs_error=float("inf"), cosine=None,
            top1_agreement=None, mismatch_fraction=None, passed=False,
            reason=f"shape changed from {list(ref.shape)} to {list(var.shape)}",
        )  # fmt: skip
    if ref.dtype.kind not in "fc":
        differ = float(np.mean(ref != var)) if ref.size else 0.0
        diff = np.abs(ref.astype(np.float64) - var.astype(np.float64)) if ref.dtype.kind in "iub" else np.zeros(1)
        return OutputParity(
            **base, exact=True, max_abs_error=float(diff.max(initial=0.0)),
            mean_abs_error=float(diff.mean()) if diff.size else 0.0, cosine=None, top1_agreement=None,
            mismatch_fraction=differ, passed=differ == 0.0,
            reason="" if differ == 0.0 else f"{differ:.1%} of values differ (must match exactly)",
        )  # fmt: skip
    r64, v64 = ref.astype(np.float64), var.astype(np.float64)
    finite = np.isfinite(r64) & np.isfinite(v64)
    same_nonfinite = bool(np.all(np.isfinite(r64) == np.isfinite(v64))) and np.array_equal(
        r64[~finite], v64[~finite], equal_nan=True
    )
    diff = np.abs(r64[finite] - v64[finite])
    max_abs = float(diff.max(initial=0.0))
    mean_abs = float(diff.mean()) if diff.size else 0.0
    top1 = None
    if looks_like_scores(ref.shape) and ref.size:
        top1 = float(np.mean(np.argmax(r64, axis=-1) == np.argmax(v64, axis=-1)))
    reasons = []
    if not same_nonfinite:
        reasons.append("inf/NaN values differ from the original's")
    if max_abs > abs_tol:
        reasons.append(f"max abs error {_beyond(max_abs, abs_tol)} > {abs_tol:g}")
    if mean_abs > mean_tol:
        reasons.append(f"mean abs error {_beyond(mean_abs, mean_tol)} > {mean_tol:g}")
    cosine = cosine_similarity(np.where(finite, r64, 0), np.where(finite, v64, 0))
    if cosine < min_cosine and np.any(r64[finite] != 0):  # an all-zero reference has no pattern to keep
        reasons.append(f"cosine similarity {cosine:.4f} < {min_cosine:g} (the output's pattern changed)")
    sample_ref, sample_var = _sample(np.where(finite, r64, 0.0), np.where(finite, v64, 0.0))
    return OutputParity(
        **base, exact=False, max_abs_error=max_abs, mean_abs_error=mean_abs,
        cosine=cosine,
        top1_agreement=top1, mismatch_fraction=None, passed=not reasons, reason="; ".join(reasons),
        sample_reference=sample_ref, sample_variant=sample_var,
    )  # fmt: skip


def compare_outputs(
    reference: dict[str, np.ndarray],
    variant: dict[str, np.ndarray],
    *,
    abs_tol: float = DEFAULT_ABS_TOL,
    mean_tol: float = DEFAULT_MEAN_TOL,
    min_cosine: float = DEFAULT_MIN_COSINE,
) -> Parity:
    """Compare every output of the original with the variant's output of the same name."""
    outputs = []
    for name, ref in reference.items():
        if name not in variant:
            outputs.append(
                OutputParity(
                    name=name, dtype=str(np.asarray(ref).dtype), shape=list(np.shape(ref)), exact=False,
                    max_abs_error=float("inf"), mean_abs_error=float("inf"), cosine=None, top1_agreement=None,
                    mismatch_fraction=None, passed=False, reason="output missing from the variant",
                )
            )
            continue
        outputs.append(compare_output(name, ref, variant[name], abs_tol, mean_tol, min_cosine))
    return Parity(outputs=outputs, abs_tol=abs_tol, mean_tol=mean_tol, min_cosine=min_cosine)

"""Plain-language verdicts computed from a comparison's measurements.

Every sentence comes from a number in the comparison (never from folklore):
the rules below say when a method does not pay and which variant is the best
trade-off, and :func:`pareto` marks the size-vs-error frontier.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from shrinkray.methods import get_method
from shrinkray.results import ORIGINAL, Comparison, VariantResult
from shrinkray.units import format_bytes, format_percent

#: A variant this much slower than the original (median, batch 1, 1 thread) is called slower.
SLOWER_RATIO = 1.10


@dataclass
class Advice:
    level: str  # "good", "info", "warning", "bad"
    text: str
    variant: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ParetoPoint:
    key: str
    size: int
    error: float
    passed: bool
    on_frontier: bool
    recommended: bool


def _size(result: VariantResult, delivery: str) -> int | None:
    return result.sizes.get(delivery) if result.sizes else None


def latency_ratio(comparison: Comparison, result: VariantResult) -> float | None:
    """Median latency of the variant over the original at the first measured setting."""
    if not comparison.original.latency or not result.latency:
        return None
    base = comparison.original.latency[0]
    mine = result.latency_at(base.threads, base.batch)
    if mine is None or base.median_ms <= 0:
        return None
    return mine.median_ms / base.median_ms


def is_slower(comparison: Comparison, result: VariantResult) -> bool:
    """Slower by more than SLOWER_RATIO, and sure of it: when timing ended too noisy to call, only if
    even the low end of the ratio's 95% interval is beyond the bar."""
    ratio = latency_ratio(comparison, result)
    if ratio is None or ratio <= SLOWER_RATIO:
        return False
    base = comparison.original.latency[0]
    mine = result.latency_at(base.threads, base.batch)
    if mine is not None and mine.settled is False and mine.ratio_low is not None:
        return mine.ratio_low > SLOWER_RATIO
    return True


def recommended(comparison: Comparison, delivery: str = "brotli") -> VariantResult | None:
    """The smallest delivered file among variants that pass parity and are not slower."""
    best = None
    for result in comparison.variants:
        if not result.ok or result.parity is None or not result.parity.passed or not result.record.get("tensors_changed"):
            continue
        if is_slower(comparison, result):
            continue
        size = _size(result, delivery)
        if size is None or size >= (_size(comparison.original, delivery) or 0):
            continue
        if best is None or size < (_size(best, delivery) or 0):
            best = result
    return best


def pareto(comparison: Comparison, delivery: str = "brotli") -> list[ParetoPoint]:
    """Size (delivered bytes) vs parity severity (the worst output's share of its allowed error, 1.0 = the
    limit; scale-free, so pixels, logits and probabilities compare); frontier = nothing both smaller and closer."""
    best = recommended(comparison, delivery)
    points = [
        (r, _size(r, delivery), r.parity.severity if r.parity else float("inf"))
        for r in comparison.all
        if r.ok and r.sizes is not None and r.parity is not None
    ]
    out = []
    for result, size, error in points:
        dominated = any(
            s <= size and e <= error and (s < size or e < error) for other, s, e in points if other is not result
        )
        out.append(
            ParetoPoint(
                key=result.key,
                size=size,
                error=error,
                passed=result.parity.passed,
                on_frontier=not dominated,
                recommended=best is not None and result.key == best.key,
            )
        )
    out.sort(key=lambda p: p.size)
    return out


def advise(comparison: Comparison, delivery: str = "brotli") -> list[Advice]:
    """All advice for a comparison, most important first."""
    notes: list[Advice] = []
    summary = comparison.summary
    weight_methods = [r for r in comparison.variants if r.ok and r.method and get_method(r.method).traceable]
    if weight_methods and all(not r.record.get("tensors_changed") for r in weight_methods):
        notes.append(
            Advice(
                "warning",
                f"This model has no float weight tensors large enough to shrink ({format_bytes(summary.weight_bytes)} "
                f"of weights, {format_percent(summary.weight_share)} of the file), so the weight methods change "
                "nothing. Lower the minimum tensor size (min elements) if small tensors matter, or keep the original.",
            )
        )
    original_size = _size(comparison.original, delivery)
    for result in comparison.variants:
        key = result.key
        if not result.ok:
            notes.append(Advice("bad", f"{key} could not be used: {result.error}", key))
            continue
        size = _size(result, delivery)
        if result.parity is None:
            reason = next((n for n in result.notes if n.startswith("Parity not measured")), "Parity not measured")
            notes.append(Advice("warning", f"{key}: {reason}; it cannot be recommended without it.", key))
        if result.record.get("tensors_changed") == 0:
            notes.append(Advice("info", f"{key} changed nothing in this model.", key))
            continue
        if size is not None and original_size and size >= original_size:
            notes.append(
                Advice("warning", f"{key} does not make the {delivery} download smaller "
                       f"({format_bytes(size)} vs {format_bytes(original_size)}).", key)
            )  # fmt: skip
        ratio = latency_ratio(comparison, result)
        if is_slower(comparison, result):
            notes.append(
                Advice("bad", f"{key} runs {ratio:.2f}x slower than the original on this CPU "
                       "(median latency); prefer weights-int8 or float16, which keep float compute.", key)
            )  # fmt: skip
        if result.parity is not None and not result.parity.passed:
            failing = [o for o in result.parity.outputs if not o.passed]
            reason = "; ".join(f"{o.name} ({o.kind}): {o.reason}" for o in failing[:2])
            hint = _parity_hint(result)
            notes.append(Advice("bad", f"{key} fails parity ({reason}). {hint}", key))
        spec = get_method(result.method) if result.method else None
        option_note = spec.option_advice(result.options) if spec and spec.option_advice else None
        if option_note:
            notes.append(Advice("warning", f"{key} {option_note}", key))
    if summary.quantized_ops:
        notes.append(
            Advice("info", "This model is already quantized: only its remaining float tensors can shrink, and "
                   "run-time activation quantization makes it sensitive to small weight changes.")
        )  # fmt: skip
    best = recommended(comparison, delivery)
    if best is not None and original_size:
        size = _size(best, delivery)
        speed = (
            "" if latency_ratio(comparison, best) is not None
            else " Speed was not checked (latency not measured): time it before shipping."
        )  # fmt: skip
        notes.insert(
            0,
            Advice(
                "good",
                f"Best trade-off: {best.key}. The {delivery} download drops from {format_bytes(original_size)} to "
                f"{format_bytes(size)} ({format_percent(1 - size / original_size)} smaller) and parity passes "
                f"(closest call: {best.parity.decided_by}).{speed}",
                best.key,
            ),
        )
    elif comparison.variants:
        notes.insert(0, Advice("warning", "No variant is both smaller and within the parity criteria: keep the "
                               "original, or loosen the criteria knowingly."))  # fmt: skip
    return notes


def _parity_hint(result: VariantResult) -> str:
    if result.culprits:
        top = [c.tensor for c in result.culprits[:3]]
        return f"The tensors that move the outputs most: {', '.join(top)}; leave them in float (exclude them)."
    return get_method(result.method).parity_hint if result.method else ""


__all__ = ["ORIGINAL", "Advice", "ParetoPoint", "advise", "is_slower", "latency_ratio", "pareto", "recommended"]

"""Palettization: snap each weight tensor to N distinct values, keep its float type.

The graph and the runtime are unchanged and the raw file keeps its size, but
a tensor with few distinct values compresses very well, so the gzip/brotli
download shrinks. Levels come from a deterministic 1-D k-means by default,
which follows the distribution; linear min/max levels are offered for
comparison and are stretched by outliers, which is why every tensor whose
error is large is reported as a warning rather than passing silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from shrinkray.arrays import run_starts
from shrinkray.graph.weights import WeightRef, find_weights, set_tensor_values
from shrinkray.methods.base import (
    MethodSpec,
    TensorChange,
    TensorSelection,
    Variant,
    map_tensors,
    option,
    register,
    warn_if_damaged,
)
from shrinkray.methods.quant import (
    ErrorStats,
    error_stats,
    kmeans_levels_sorted,
    linear_levels_between,
    snap_and_count,
    sorted_finite,
)


@dataclass
class PalettizeOptions(TensorSelection):
    levels: int = option(256, "Distinct values per tensor (2 to 65536)", min=2, max=65536)
    algorithm: str = option(
        "kmeans",
        "kmeans: levels follow the values (robust to outliers); linear: evenly spaced from min to max",
        choices=["kmeans", "linear"],
    )


def candidates(refs: list[WeightRef], options: PalettizeOptions) -> list[WeightRef]:
    return [r for r in refs if options.selects(r)]


def palette(values: np.ndarray, options: PalettizeOptions) -> np.ndarray | None:
    """The levels for one tensor, or None when it already has at most ``options.levels`` distinct finite values.

    One sorted float32 (float64 for float64 tensors) copy of the finite values serves the
    count and the levels, and is dropped before the tensor is snapped.
    """
    flat = sorted_finite(values)
    if run_starts(flat) <= options.levels:
        return None
    if options.algorithm == "kmeans":
        return kmeans_levels_sorted(flat, options.levels)
    return linear_levels_between(float(flat[0]), float(flat[-1]), options.levels)


def apply(model: onnx.ModelProto, options: PalettizeOptions) -> Variant:
    variant = Variant(method="palettize", options=options.as_dict(), model=model)
    already = 0

    def encode(ref: WeightRef) -> tuple[np.ndarray, ErrorStats, int] | None:
        values = ref.array()
        levels = palette(values, options)
        if levels is None:
            return None
        snapped, distinct = snap_and_count(values, levels)
        return snapped, error_stats(values, snapped), distinct

    refs = candidates(find_weights(model), options)
    for ref, encoded in zip(refs, map_tensors(encode, refs), strict=True):
        if encoded is None:
            already += 1
            continue
        snapped, stats, distinct = encoded
        set_tensor_values(ref.tensor, snapped)
        change = TensorChange.of(
            ref, bytes_after=ref.nbytes, stats=stats, encoding=f"{distinct} distinct values ({options.algorithm})"
        )
        variant.changes.append(change)
        warn_if_damaged(variant, change)
    if already:
        variant.notes.append(
            f"{already} tensors already had at most {options.levels} distinct values and were left as they were"
        )
    if not variant.changes and not already:
        variant.notes.append(
            f"No float tensor has at least {options.min_elements:,} values, so nothing was palettized"
        )
    else:
        variant.notes.append(
            "The raw file size is unchanged; the saving shows in the gzip and brotli sizes"
        )
    return variant


#: Palettization with this many levels or fewer is "few levels".
FEW_LEVELS = 16


def few_levels_advice(options: dict[str, Any]) -> str | None:
    levels = int(options.get("levels", PalettizeOptions.levels))
    if levels > FEW_LEVELS:
        return None
    return f"uses only {levels} levels: expect visible accuracy loss; 64-256 levels keep most of the gzip/brotli saving."


register(
    MethodSpec(
        name="palettize",
        title="N-value palettization",
        summary="Snaps each large weight tensor to N distinct values; same file size and speed, "
        "but gzip/brotli downloads shrink a lot.",
        options_type=PalettizeOptions,
        apply=apply,
        candidates=candidates,
        position=4,
        parity_hint="Try more levels.",
        parity_hint_done=("levels", 65536),
        alternatives=(),
        option_advice=few_levels_advice,
    )
)

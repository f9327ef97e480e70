"""Inputs for parity and latency runs: synthesized from the signature, or loaded from a file.

Real models declare symbolic (``batch``), unnamed (``?``) and ``-1``
dimensions, integer token ids, masks and scalars. Synthesis picks values a
model is likely to accept, lets the user override every guess (``--dim``,
``--range``), and records the guesses so that a rejection can name them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from shrinkray.errors import OptionError
from shrinkray.graph import find_weights

#: Fallbacks for dimensions the model does not fix.
DEFAULT_BATCH = 1
DEFAULT_SPATIAL = 64  # H, W of rank-4 inputs
DEFAULT_SEQUENCE = 16
DEFAULT_OTHER = 8
DEFAULT_INT_RANGE = (0, 10)


@dataclass
class InputOptions:
    """User overrides: dims by name (``batch=4``, or ``INPUT:AXIS=64`` for unnamed ones)
    and value ranges by input name (inclusive for integers)."""

    dims: dict[str, int] = field(default_factory=dict)
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    seed: int = 0


@dataclass
class InputSignature:
    name: str
    dtype: np.dtype
    shape: list[int | str | None]  # int, symbolic name, or None when unnamed / -1


@dataclass
class SynthesizedInputs:
    feeds: dict[str, np.ndarray]
    guesses: dict[str, int]  # dimension label -> value chosen without the user's say


def parse_assignments(items: list[str] | None, what: str) -> dict[str, str]:
    """Parse ``NAME=VALUE`` strings from the command line."""
    out: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise OptionError(f"{what} '{item}' is not NAME=VALUE", f"Write it like {what} batch=4")
        key, value = item.rsplit("=", 1)
        out[key.strip()] = value.strip()
    return out


def parse_dims(items: list[str] | None) -> dict[str, int]:
    dims = {}
    for key, value in parse_assignments(items, "--dim").items():
        if not re.fullmatch(r"\d+", value) or int(value) < 1:
            raise OptionError(f"--dim {key}={value}: the size must be a positive integer", "e.g. --dim batch=4")
        dims[key] = int(value)
    return dims


def parse_ranges(items: list[str] | None) -> dict[str, tuple[float, float]]:
    ranges = {}
    for key, value in parse_assignments(items, "--range").items():
        parts = value.split(":")
        try:
            if len(parts) != 2:
                raise ValueError(value)
            low, high = float(parts[0]), float(parts[1])
        except ValueError:
            raise OptionError(f"--range {key}={value} is not LOW:HIGH", "e.g. --range input_ids=0:30521") from None
        if high < low:
            raise OptionError(f"--range {key}={value}: HIGH must be at least LOW", "e.g. --range sr=16000:16000")
        ranges[key] = (low, high)
    return ranges


def signature(model: onnx.ModelProto) -> list[InputSignature]:
    """Graph inputs that need feeding (initializers listed as inputs are optional)."""
    inits = {t.name for t in model.graph.initializer}
    out = []
    for value in model.graph.input:
        if value.name in inits:
            continue
        tensor = value.type.tensor_type
        if not value.type.HasField("tensor_type"):
            raise OptionError(
                f"Input '{value.name}' is not a tensor ({value.type.WhichOneof('value')})",
                "Provide inputs with --inputs; sequences and maps cannot be synthesized",
            )
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        dims: list[int | str | None] = []
        for d in tensor.shape.dim:
            if d.HasField("dim_value") and d.dim_value > 0:
                dims.append(int(d.dim_value))
            elif d.HasField("dim_param") and d.dim_param and d.dim_param not in ("?", "-1"):
                dims.append(d.dim_param)
            else:
                dims.append(None)
        out.append(InputSignature(value.name, dtype, dims))
    return out


def _vocab_sizes(model: onnx.ModelProto) -> dict[str, int]:
    """Inputs used directly as Gather indices into a stored table: their valid upper bound."""
    tables = {r.name: r.shape for r in find_weights(model) if not r.scope}
    sizes: dict[str, int] = {}
    for node in model.graph.node:
        if node.op_type == "Gather" and len(node.input) == 2 and node.input[0] in tables:
            axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
            shape = tables[node.input[0]]
            if shape:
                sizes[node.input[1]] = min(sizes.get(node.input[1], 1 << 62), int(shape[axis]))
    return sizes


def _guess(sig: InputSignature, axis: int, rank: int) -> int:
    name = str(sig.shape[axis] or "").lower()
    if axis == 0 and rank >= 2:
        return DEFAULT_BATCH
    if rank == 4 and axis in (2, 3):
        return DEFAULT_SPATIAL
    if any(k in name for k in ("seq", "len", "time", "token", "step", "frame")) or rank == 2:
        return DEFAULT_SEQUENCE
    return DEFAULT_OTHER


def resolve_shape(sig: InputSignature, options: InputOptions, batch: int | None, guesses: dict[str, int]) -> list[int]:
    shape = []
    for axis, dim in enumerate(sig.shape):
        if isinstance(dim, int):
            shape.append(dim)
            continue
        label = dim if isinstance(dim, str) else f"{sig.name}:{axis}"
        if label in options.dims:
            shape.append(options.dims[label])
        elif f"{sig.name}:{axis}" in options.dims:
            shape.append(options.dims[f"{sig.name}:{axis}"])
        elif axis == 0 and batch is not None:
            shape.append(batch)
        else:
            value = guesses.get(label) or _guess(sig, axis, len(sig.shape))
            guesses[label] = value
            shape.append(value)
    return shape


def synthesize(
    model: onnx.ModelProto, options: InputOptions | None = None, *, batch: int | None = None
) -> SynthesizedInputs:
    """Random inputs matching the model's signature (deterministic for a seed).

    Floats are standard normal; integer inputs that index a stored table
    (token ids) stay below its size; inputs named like masks are all ones;
    other integers fall in [0, 10]; booleans are True. ``--range`` overrides.
    """
    options = options or InputOptions()
    rng = np.random.default_rng(options.seed)
    vocab = _vocab_sizes(model)
    guesses: dict[str, int] = {}
    feeds: dict[str, np.ndarray] = {}
    for sig in signature(model):
        shape = resolve_shape(sig, options, batch, guesses)
        low_high = options.ranges.get(sig.name)
        lname = sig.name.lower()
        if sig.dtype.kind == "f":
            if low_high:
                values = rng.uniform(low_high[0], low_high[1], size=shape)
            else:
                values = rng.standard_normal(size=shape)
        elif sig.dtype.kind in "iu":
            if low_high:
                low, high = int(np.ceil(low_high[0])), int(np.floor(low_high[1]))
                if high < low:
                    raise OptionError(f"--range {sig.name}: no integer lies in {low_high}", "Use integer bounds")
            elif "mask" in lname:
                low, high = 1, 1
            elif sig.name in vocab:
                low, high = 0, vocab[sig.name] - 1
            else:
                low, high = DEFAULT_INT_RANGE
            values = rng.integers(low, high, size=shape, endpoint=True)
        elif sig.dtype.kind == "b":
            values = np.ones(shape, dtype=bool) if not low_high else rng.integers(0, 2, size=shape).astype(bool)
        else:
            raise OptionError(
                f"Input '{sig.name}' has type {sig.dtype}, which cannot be synthesized",
                "Provide inputs with --inputs file.npz",
            )
        feeds[sig.name] = np.asarray(values).astype(sig.dtype)
    return SynthesizedInputs(feeds=feeds, guesses=guesses)


def load_inputs(path: str | os.PathLike, model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Inputs from ``.npz`` (keyed by input name) or ``.npy`` (models with one input)."""
    path = Path(path)
    sigs = {s.name: s for s in signature(model)}
    if not path.is_file():
        raise OptionError(f"Input file {path} does not exist", "Give the path of an .npz or .npy file")
    try:
        if path.suffix == ".npy":
            if len(sigs) != 1:
                raise OptionError(
                    f"{path} holds one array but the model has {len(sigs)} inputs ({', '.join(sigs)})",
                    "Use an .npz file with one array per input name",
                )
            feeds = {next(iter(sigs)): np.load(path, allow_pickle=False)}
        else:
            with np.load(path, allow_pickle=False) as data:
                feeds = {k: data[k] for k in data.files}
    except (ValueError, OSError) as exc:
        raise OptionError(f"Cannot read {path} as numpy data ({exc})", "Save it with numpy.savez") from None
    missing = sorted(set(sigs) - set(feeds))
    extra = sorted(set(feeds) - set(sigs))
    if missing or extra:
        raise OptionError(
            f"{path} does not match the model's inputs"
            + (f"; missing: {', '.join(missing)}" if missing else "")
            + (f"; unknown: {', '.join(extra)}" if extra else ""),
            "Name the arrays after the inputs: " + ", ".join(sigs),
        )
    for name, sig in sigs.items():
        if feeds[name].dtype != sig.dtype:
            if feeds[name].dtype.kind != sig.dtype.kind:
                raise OptionError(
                    f"Input '{name}' in {path} is {feeds[name].dtype}, the model wants {sig.dtype}",
                    "Save the array with the model's dtype",
                )
            feeds[name] = feeds[name].astype(sig.dtype)
    return feeds


_NOT_BATCH = ("seq", "len", "time", "step", "frame", "token")


def first_axis_dynamic(model: onnx.ModelProto) -> bool:
    """True when every input's first dimension is free and not named like a sequence axis
    (``[seq, batch, features]`` RNN inputs vary the sequence, not the batch, on axis 0)."""
    sigs = signature(model)
    return bool(sigs) and all(
        s.shape
        and not isinstance(s.shape[0], int)
        and not any(k in str(s.shape[0] or "").lower() for k in _NOT_BATCH)
        for s in sigs
    )

"""How big a model is, read from its files before loading it, and whether this server can take it.

Loading a model kept in external data costs its whole size in memory; comparing
it costs about :data:`shrinkray.io.limits.SHRINK_MEMORY_FACTOR` times that. A user
with a 2.5 GB model should hear "too big, do this instead" in a second, not
after the whole model was read. :func:`model_size` reads only the file sizes
(and the graph of a small ``.onnx``, to find its data files; a zip's directory
for an archive); :func:`check_fits` applies the same plan as
:func:`shrinkray.io.limits.check_memory` to that size.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import onnx

from shrinkray.errors import LimitExceededError
from shrinkray.io.limits import Limits, is_external, planned_memory
from shrinkray.units import format_bytes

#: A .onnx above this is not parsed for the early estimate (its size is the estimate): its tensors are inline.
GRAPH_READ_LIMIT = 64 << 20

#: ``ShrinkRayError.setting`` of a refusal a streaming conversion avoids (each front end words its hint),
#: and of one where the model must first be saved with external data.
STREAM_SETTING = "stream"
STREAM_COMPARE_SETTING = "stream_compare"
EXTERNAL_SETTING = "external_data"


@dataclass(frozen=True)
class ModelSize:
    """A model's bytes on disk (graph plus data files, unpacked for a zip) and whether it keeps external data."""

    bytes: int
    external: bool


def model_size(path: str | os.PathLike) -> ModelSize | None:
    """The model's size from its files alone; None when it cannot tell (the full loader then says why)."""
    path = Path(path)
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as zf:
                members = [i for i in zf.infolist() if not i.is_dir()]
                graphs = [i for i in members if i.filename.lower().endswith(".onnx")]
                # external data = what the graph refers to, not "other files in the zip" (a README beside an
                # inline model must not earn the streaming advice); a graph too big to read is inline
                small = [i for i in graphs if i.file_size <= GRAPH_READ_LIMIT]
                external = len(graphs) == len(small) == 1 and _refers_to_external(
                    onnx.load_model_from_string(zf.read(small[0])))
            return ModelSize(sum(i.file_size for i in members), external=external)
        size = path.stat().st_size
        if size > GRAPH_READ_LIMIT:
            return ModelSize(size, external=False)
        graph = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 - a damaged protobuf raises several types; the loader explains it later
        return None
    locations = {entry.value for t in _tensors(graph) if is_external(t) for entry in t.external_data
                 if entry.key == "location"}  # fmt: skip
    data = 0
    for location in locations:
        try:
            target = (path.parent / location).resolve()
            if target.is_relative_to(path.parent.resolve()) and target.is_file():
                data += target.stat().st_size
        except (OSError, ValueError):  # a NUL byte, a name too long...: the loader refuses it in its words
            continue
    return ModelSize(size + data, external=bool(locations))


def _refers_to_external(model: onnx.ModelProto) -> bool:
    return any(is_external(t) for t in _tensors(model))


def _tensors(model: onnx.ModelProto):
    yield from model.graph.initializer
    for node in model.graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                yield attr.t


def fits(size: ModelSize, variants: int = 1, limits: Limits | None = None, streamed: bool = False) -> bool:
    """True when loading and working on the whole model in memory (or, ``streamed``, measuring it in its own
    files with methods that stream) stays within this server's limits."""
    limits = limits if limits is not None else Limits.from_env()
    return planned_memory(size.bytes, variants, streamed) <= limits.max_memory_bytes  # check_memory's plan and limit


def check_fits(size: ModelSize | None, doing: str, variants: int = 1, limits: Limits | None = None, *,
               streamed: bool = False, comparing: bool = False) -> None:  # fmt: skip
    """Refuse before any loading when ``doing`` (``"comparing"``, ``"shrinking with palettize"``) would need
    more memory than this server allows. One sentence; the hint (by ``setting``) says what to do instead:
    the streaming conversion (or, ``comparing``, a comparison of the methods that stream) when the model keeps
    external data, else saving it that way first."""
    limits = limits if limits is not None else Limits.from_env()
    if size is None or fits(size, variants, limits, streamed):
        return
    planned = planned_memory(size.bytes, variants, streamed)
    if size.external and comparing and not streamed:
        hint, setting = ("Compare only methods that work tensor by tensor (weights-int8, float16), which measure "
                         "it in its own files", STREAM_COMPARE_SETTING)  # fmt: skip
    elif size.external:
        hint, setting = "Shrink it with weights-int8, which works tensor by tensor", STREAM_SETTING
    else:
        hint, setting = ("Save it with its weights in external data files, then shrink it with weights-int8, which "
                         "works tensor by tensor", EXTERNAL_SETTING)  # fmt: skip
    raise LimitExceededError(
        f"This model is {format_bytes(size.bytes)}; {doing} needs about {format_bytes(planned)} "
        "of memory, more than this server allows", hint, setting,
    )  # fmt: skip

"""Fold a model's constant decode chains ourselves, one weight at a time, before ONNX Runtime opens it.

ONNX Runtime's optimizer (ConstantFolding) evaluates every node whose inputs are all constants when
an optimized session opens, and keeps every intermediate it computes until folding ends: a
weights-int4 file of the 101 MB benchmark model (15.8 MB) peaked at +488 MB while opening, weights-int8
(25.9 MB) at +395 MB (issue 12, measured 2026-11-23). What it runs afterwards is the graph
with those chains replaced by their values. :func:`prefold` computes the same values, one folded
weight at a time, **with ONNX Runtime's own CPU kernels** (a small unoptimized session per weight:
the very kernels its constant folding calls, so the values are bitwise the same), writes them into
a copy of the model (external data, appended as each is computed), and the measuring session opens
that copy: the optimizer then finds nothing left to fold and does everything else as before (fusions,
MatMul prepacking, MatMulNBits), so parity and latency measure the graph users' ONNX Runtime runs.

Only a subset of what ConstantFolding folds is folded here (whatever is left, it still folds itself):
nodes of the standard domain from :data:`FOLDABLE_OPS` (deterministic, no subgraphs), all of whose
inputs are initializers, Constant nodes or outputs of folded nodes, not producing a graph output.
DequantizeLinear is never folded: ONNX Runtime keeps it to fuse it with what it feeds (QDQ, MatMulNBits).
Nor is a value over :data:`FOLD_LIMIT_BYTES`, which ONNX Runtime would not fold either (no copy then).

The copy keeps every tensor of 64 KiB or more in a data file beside it (aligned: ONNX Runtime maps it),
so opening never parses a second copy of the weights out of the protobuf either: peak while opening on
the 101 MB benchmark model, file -> copy: original +221 -> +136 MB, weights-int8 +390 -> +136,
weights-int4 +485 -> +106, float16 +206 -> +136 (issue 12, measured 2026-11-23). The copies are files in
the comparison's private folder (the decoded weights: ~0.6 GB for the benchmark's five models).

**Validation stays honest.** Every node of the variant's file is run by ONNX Runtime before the variant
is kept: the folded ones by its kernels in the chains' sessions (a missing kernel or a type it refuses
fails there), the others in the measuring session, which has the file's IR version, opsets, functions,
inputs and outputs. A copy that cannot be made, or does not open, is dropped and the file itself is
opened (then its own error is what the user reads), so a copy can never reject a variant the file would
pass. What the copy does not replay is ONNX Runtime parsing the file in one piece, which onnx.checker
has checked; a second, unoptimized session on the file (+35-41 MB) would add only that.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from shrinkray.errors import ShrinkRayError
from shrinkray.graph.sessions import open_file_session, open_session, runtime, session_options
from shrinkray.io import kept_files
from shrinkray.io.external_data import read_array, read_bytes
from shrinkray.io.files import external_place
from shrinkray.memory import release_free_memory

#: Ops folded here: deterministic, kernels in ONNX Runtime's CPU provider, what weight decodes are made of
#: (Cast/Sub/Mul of int8, BitShift/Reshape/Concat/ScatterND of int4, Cast of float16, Gather of palettes).
FOLDABLE_OPS = frozenset({
    "Abs", "Add", "And", "BitShift", "BitwiseAnd", "BitwiseOr", "Cast", "Concat", "Div", "Equal", "Flatten",
    "Gather", "GatherElements", "GatherND", "Greater", "Identity", "Less", "Mod", "Mul", "Neg", "Not", "Or",
    "Reshape", "ScatterElements", "ScatterND", "Slice", "Squeeze", "Sub", "Transpose", "Unsqueeze", "Where",
})  # fmt: skip  (not Expand or Tile: their outputs can outgrow every input, see FOLD_LIMIT_BYTES)

#: ONNX Runtime does not fold a node whose output is larger than this (its default
#: ``session.constant_folding_max_output_size_in_bytes``): a copy with a larger folded value is not made.
FOLD_LIMIT_BYTES = 1 << 30

#: Tensors are written at offsets aligned to this in the data file (ONNX Runtime can map aligned data).
ALIGN = 4096

#: Smallest initializer written to the data file; smaller ones stay inside the model file, values and all
#: (what input synthesis reads: normalization constants of up to 4096 elements, like compare's skeleton).
EXTERNAL_MIN_BYTES = 1 << 16

#: Element types stored several to a byte (their arrays hold one per byte).
PACKED_TYPES = frozenset(getattr(onnx.TensorProto, t) for t in ("INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2")
                         if hasattr(onnx.TensorProto, t))  # fmt: skip

#: Element types whose values a measuring copy can hold in memory (numpy has them; ONNX Runtime takes them as
#: initializers); other types stay in the copy's data file.
HELD_TYPES = {getattr(onnx.TensorProto, name): np.dtype(dtype) for name, dtype in (
    ("FLOAT", "float32"), ("FLOAT16", "float16"), ("DOUBLE", "float64"), ("INT8", "int8"), ("UINT8", "uint8"),
    ("INT16", "int16"), ("UINT16", "uint16"), ("INT32", "int32"), ("UINT32", "uint32"), ("INT64", "int64"),
    ("UINT64", "uint64"), ("BOOL", "bool"))}  # fmt: skip

#: Freed chain intermediates are returned to the system after about this many bytes (glibc keeps them).
TRIM_EVERY_BYTES = 64 << 20


@dataclass
class FoldPlan:
    """Which nodes of a graph fold, and which of their values the rest of the graph reads."""

    folded: list[int] = field(default_factory=list)  # indices of folded nodes (not Constant nodes)
    frontier: list[str] = field(default_factory=list)  # folded values read by what is not folded

    def __bool__(self) -> bool:
        return bool(self.frontier)


def _outer_reads(graph: onnx.GraphProto) -> set[str]:
    """Names read inside the subgraphs of ``graph``'s nodes (outer-scope values they use)."""
    names: set[str] = set()
    pending = [a.g for n in graph.node for a in n.attribute if a.type == onnx.AttributeProto.GRAPH]
    pending += [g for n in graph.node for a in n.attribute if a.type == onnx.AttributeProto.GRAPHS for g in a.graphs]
    while pending:
        sub = pending.pop()
        for node in sub.node:
            names.update(i for i in node.input if i)
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    pending.append(attr.g)
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    pending.extend(attr.graphs)
    return names


def _has_subgraph(node: onnx.NodeProto) -> bool:
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)


def plan(model: onnx.ModelProto, outputs: Sequence[str] = ()) -> FoldPlan:
    """The constant chains of the main graph that fold (see the module docstring); ``outputs``: values that
    will be graph outputs too."""
    graph = model.graph
    inputs = {i.name for i in graph.input}
    constant = {t.name for t in graph.initializer if t.name not in inputs}
    outputs = {o.name for o in graph.output} | set(outputs)
    folded_values: set[str] = set()
    out = FoldPlan()
    for index, node in enumerate(graph.node):
        if node.domain not in ("", "ai.onnx") or _has_subgraph(node):
            continue
        if node.op_type == "Constant":
            constant.update(node.output)
            continue
        ins = [i for i in node.input if i]
        if (node.op_type in FOLDABLE_OPS and ins and all(i in constant for i in ins)
                and not any(o in outputs for o in node.output)):  # fmt: skip
            constant.update(node.output)
            folded_values.update(node.output)
            out.folded.append(index)
    if not out.folded:
        return out
    folded_nodes = set(out.folded)
    read = _outer_reads(graph)
    for index, node in enumerate(graph.node):
        if index not in folded_nodes:
            read.update(i for i in node.input if i)
    seen: set[str] = set()
    for index in out.folded:  # in graph order
        for name in graph.node[index].output:
            if name in read and name in folded_values and name not in seen:
                seen.add(name)
                out.frontier.append(name)
    return out


def _ancestors(graph: onnx.GraphProto, name: str, producer: dict[str, int]) -> tuple[list[int], set[str]]:
    """Node indices (graph order) computing ``name`` from constants, and the initializers they read."""
    nodes: set[int] = set()
    inits: set[str] = set()
    pending = [name]
    while pending:
        value = pending.pop()
        index = producer.get(value)
        if index is None:
            inits.add(value)
            continue
        if index in nodes:
            continue
        nodes.add(index)
        pending.extend(i for i in graph.node[index].input if i)
    return sorted(nodes), inits


def _evaluate(model: onnx.ModelProto, name: str, nodes: list[int], inits: set[str],
              by_name: dict[str, onnx.TensorProto], base_dir: Path | None = None) -> np.ndarray:  # fmt: skip
    """One folded value, computed by ONNX Runtime's CPU kernels in an unoptimized session of its chain alone
    (its external inputs read from ``base_dir``'s data files)."""
    ort = runtime()
    graph = onnx.GraphProto(name="fold")
    graph.node.extend(model.graph.node[i] for i in nodes)
    for init in sorted(inits):
        tensor = by_name[init]
        if tensor.data_location == onnx.TensorProto.EXTERNAL and base_dir is not None:
            tensor = numpy_helper.from_array(read_array(tensor, base_dir), init)
        graph.initializer.append(tensor)
    graph.output.add().name = name
    chain = onnx.ModelProto(ir_version=model.ir_version, graph=graph)
    chain.opset_import.extend(model.opset_import)
    data = chain.SerializeToString()
    del chain, graph
    options = session_options(optimized=False, threads=1)
    options.enable_cpu_mem_arena = False  # its tensors go back to the heap (trimmed) as soon as it ends
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    del data
    (value,) = session.run([name], {})
    return value


def prefold(model: onnx.ModelProto, path: str | Path, fold: FoldPlan | None = None, *,
            outputs: Sequence[str] = (), base_dir: Path | None = None,
            arrays: dict[str, np.ndarray] | None = None, consume: bool = False) -> onnx.ModelProto:  # fmt: skip
    """Write ``model`` to ``path`` with its constant chains folded and its weights in ``path``.data; the
    model written (its large tensors by reference). ``outputs``: values to add to the graph's outputs.
    ``base_dir``: the folder of the data files ``model``'s external tensors point into (read piece by piece;
    without it an external tensor is refused).

    ``model`` is not changed. Each folded value is computed, appended to the data file and dropped
    before the next, so this holds the model and one chain's tensors at a time. Every initializer
    of :data:`EXTERNAL_MIN_BYTES` or more goes to the data file too: ONNX Runtime then never parses a
    copy of the weights inside the model's protobuf (the 101 MB original peaked at +221 MB while
    opening from one file, +136 MB from a model file and its data). With ``arrays`` (a dict) those tensors'
    values are put there instead, and the data file stays empty: no disk for the decoded weights (see
    :class:`MeasuringCopies`); with ``consume`` too (a model the caller loaded for this alone), each tensor's
    values are emptied from ``model`` once in ``arrays``, so the two are never held whole together.
    """
    fold = fold if fold is not None else plan(model, outputs)
    graph = model.graph
    path = Path(path)
    data_path = path.with_name(path.name + ".data")
    folded_nodes = set(fold.folded)
    producer = {o: i for i, n in enumerate(graph.node) for o in n.output if i in folded_nodes or n.op_type == "Constant"}
    by_name = {t.name: t for t in graph.initializer}
    read = _reads(graph, folded_nodes, outputs)
    writer = _DataWriter(data_path, base_dir, arrays)

    def keep() -> list[onnx.TensorProto]:
        placed = []
        for tensor in graph.initializer:
            if tensor.name in read:
                placed.append(writer.place(tensor))
                if consume and tensor.HasField("raw_data") and placed[-1] is not tensor:
                    tensor.ClearField("raw_data")  # its values are in the copy now: one of them held at a time
        return placed

    def folded() -> list[onnx.TensorProto]:
        placed = []
        since_trim = 0
        for name in fold.frontier:
            nodes, inits = _ancestors(graph, name, producer)
            array = np.ascontiguousarray(_evaluate(model, name, nodes, inits, by_name, base_dir))
            if array.nbytes > FOLD_LIMIT_BYTES:  # ONNX Runtime would keep this chain: the file opens as it is
                raise ValueError(f"{name}: {array.nbytes} bytes, more than ONNX Runtime folds")
            placed.append(writer.place_array(array, name))
            since_trim += array.nbytes * 4  # the chain's intermediates were about this large
            del array
            if since_trim > TRIM_EVERY_BYTES:  # what the chains freed, before it piles up (glibc keeps it)
                release_free_memory()
                since_trim = 0
        return placed

    try:
        if consume:  # the chains read the original tensors: they run before those are emptied
            values = folded()
            kept = keep()
        else:
            kept = keep()
            values = folded()
    finally:
        writer.close()
    release_free_memory()
    return _write_model(model, folded_nodes, read, set(fold.frontier), kept + values, path, outputs)


def _nbytes(tensor: onnx.TensorProto) -> int:
    """Bytes of a tensor's values, from its type and shape (no serialization)."""
    try:
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except (KeyError, TypeError, ValueError):
        return tensor.ByteSize()
    return int(np.prod(tensor.dims, dtype=np.int64)) * itemsize


class _DataWriter:
    """Appends tensors' bytes to one external data file, each at an :data:`ALIGN`-ed offset. With ``arrays``
    (a dict), the file is left empty (ONNX Runtime checks that it exists) and each tensor's values go into
    ``arrays`` instead, by name, for the session to be given as initializers (``open_file_session``)."""

    def __init__(self, path: Path, base_dir: Path | None = None, arrays: dict[str, np.ndarray] | None = None) -> None:
        self.path = path
        self.base_dir = base_dir  # where the source's external tensors are (None: refused)
        self.links: dict[Path, Path | None] = {}  # the source's data files -> their links beside the copy
        self.arrays = arrays
        self.file = open(path, "wb")  # noqa: SIM115 - closed by close(), after the last tensor
        self.offset = 0

    def place(self, tensor: onnx.TensorProto) -> onnx.TensorProto:
        """``tensor`` as stored in the copy: a reference into the data file, or itself when small. An
        external tensor's bytes are copied from its data file piece by piece (never held whole)."""
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            if self.base_dir is None:
                raise ValueError(f"{tensor.name} keeps its values in an external file")
            linked = self._linked(tensor)
            if linked is not None:
                return linked
            return self._reference(tensor.name, tensor.data_type, tensor.dims, read_bytes(tensor, self.base_dir),
                                   tensor.doc_string)  # fmt: skip
        if tensor.data_type == onnx.TensorProto.STRING or _nbytes(tensor) < EXTERNAL_MIN_BYTES:
            return tensor
        raw = tensor.raw_data if tensor.HasField("raw_data") else numpy_helper.to_array(tensor).tobytes()
        return self._reference(tensor.name, tensor.data_type, tensor.dims, [raw], tensor.doc_string)

    def _linked(self, tensor: onnx.TensorProto) -> onnx.TensorProto | None:
        """``tensor`` read where it is: its data file hard-linked beside the copy (ONNX Runtime opens data files
        inside the model's folder only), so an unchanged weight takes no disk; None when a link cannot be
        made (another file system), and its bytes are copied instead."""
        place = external_place(tensor, self.base_dir)
        if place.target not in self.links:
            link = self.path.with_name(f"{self.path.name}.src{len(self.links)}")
            try:
                os.link(place.target, link)
            except OSError:
                self.links[place.target] = None
            else:
                self.links[place.target] = link
        link = self.links[place.target]
        if link is None:
            return None
        ref = onnx.TensorProto()
        ref.CopyFrom(tensor)
        del ref.external_data[:]
        return _pointing(ref, link.name, place.offset, place.length)

    def place_array(self, array: np.ndarray, name: str) -> onnx.TensorProto:
        """A computed value as stored in the copy (written from the array's own buffer when large)."""
        if array.dtype.kind in "OSU" or array.nbytes < EXTERNAL_MIN_BYTES:
            return numpy_helper.from_array(array, name)
        data_type = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
        if data_type in PACKED_TYPES:  # stored two (or more) to a byte, unlike the array
            return numpy_helper.from_array(array, name)
        if self.arrays is not None and data_type in HELD_TYPES:  # the computed array itself, not a copy of it
            self.arrays[name] = array
            return _placeholder(name, data_type, array.shape, "", self.path.name, array.nbytes)
        return self._reference(name, data_type, array.shape, [memoryview(array).cast("B")], "")

    def _reference(self, name: str, data_type: int, dims, pieces: Iterable, doc: str) -> onnx.TensorProto:
        if self.arrays is not None and data_type in HELD_TYPES:
            held = np.frombuffer(b"".join(pieces), dtype=HELD_TYPES[data_type]).reshape(tuple(dims))
            self.arrays[name] = held
            return _placeholder(name, data_type, dims, doc, self.path.name, held.nbytes)
        aligned = -(-self.offset // ALIGN) * ALIGN
        self.file.write(b"\0" * (aligned - self.offset))
        length = 0
        for piece in pieces:
            self.file.write(piece)
            length += len(piece)
        self.offset = aligned + length
        ref = onnx.TensorProto(name=name, data_type=data_type, dims=list(dims), doc_string=doc,
                               data_location=onnx.TensorProto.EXTERNAL)  # fmt: skip
        return _pointing(ref, self.path.name, aligned, length)

    def close(self) -> None:
        self.file.close()


def _placeholder(name: str, data_type: int, dims, doc: str, location: str, length: int) -> onnx.TensorProto:
    """A tensor whose values a session is given as its own initializer (held in memory), named as external
    data in ``location`` so the model file stays small and ONNX Runtime never looks for the values there."""
    ref = onnx.TensorProto(name=name, data_type=data_type, dims=list(dims), doc_string=doc,
                           data_location=onnx.TensorProto.EXTERNAL)  # fmt: skip
    return _pointing(ref, location, 0, length)


def _pointing(ref: onnx.TensorProto, location: str, offset: int, length: int) -> onnx.TensorProto:
    """``ref`` with its external-data entries: where its bytes are in the data file ``location``."""
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        entry = ref.external_data.add()
        entry.key, entry.value = key, value
    return ref


def _reads(graph: onnx.GraphProto, folded_nodes: set[int], outputs: Sequence[str] = ()) -> set[str]:
    """Values read by what stays: the nodes not folded, subgraphs and the graph's outputs."""
    read = _outer_reads(graph) | {o.name for o in graph.output} | set(outputs)
    for index, node in enumerate(graph.node):
        if index not in folded_nodes:
            read.update(i for i in node.input if i)
    return read


def _write_model(model: onnx.ModelProto, folded_nodes: set[int], read: set[str], frontier: set[str],
                 initializers: list[onnx.TensorProto], path: Path, outputs: Sequence[str] = ()) -> onnx.ModelProto:  # fmt: skip
    """The model without its folded nodes (and Constant nodes nothing reads), with ``initializers``."""
    graph = model.graph
    kept = [n for i, n in enumerate(graph.node) if i not in folded_nodes and
            (n.op_type != "Constant" or n.domain not in ("", "ai.onnx") or any(o in read for o in n.output))]
    out = onnx.ModelProto(ir_version=model.ir_version, producer_name=model.producer_name,
                          producer_version=model.producer_version, domain=model.domain,
                          model_version=model.model_version, doc_string=model.doc_string)  # fmt: skip
    out.opset_import.extend(model.opset_import)
    out.functions.extend(model.functions)
    out.metadata_props.extend(model.metadata_props)
    light = out.graph
    light.name = graph.name
    light.doc_string = graph.doc_string
    light.input.extend(graph.input)
    light.output.extend(graph.output)
    present = {o.name for o in graph.output}
    light.output.extend(onnx.ValueInfoProto(name=name) for name in outputs if name not in present)
    light.value_info.extend(v for v in graph.value_info if v.name not in frontier)
    light.node.extend(kept)
    light.initializer.extend(initializers)
    light.sparse_initializer.extend(graph.sparse_initializer)
    light.quantization_annotation.extend(graph.quantization_annotation)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(out.SerializeToString())
    os.replace(tmp, path)
    return out


def prefold_file(source: str | Path, target: str | Path, arrays: dict[str, np.ndarray] | None = None) -> bool:
    """:func:`prefold` of the model in file ``source`` (its graph loaded once, its external tensors read from
    their data files one at a time) into ``target``. False, and nothing written, when the copy would gain
    nothing: no chain folds and the weights are already in data files ONNX Runtime maps (a 1 GB original
    copied for nothing was a gigabyte of scratch disk). ``arrays``: see :func:`prefold`."""
    source = Path(source)
    if kept_files.is_compressed(source):  # a variant a run keeps compressed: one file, its weights inside
        model = onnx.load_from_string(kept_files.model_bytes(source))
    else:
        model = onnx.load(str(source), load_external_data=False)
    fold = plan(model)
    if not fold and any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
        return False
    prefold(model, target, fold, base_dir=source.parent, arrays=arrays, consume=arrays is not None)
    return True


class MeasuringCopies:
    """The measuring copy of each model file a comparison opens (made once, kept in ``folder``).

    :meth:`session` opens the optimized CPU session parity and latency measure on. A file with nothing to
    fold whose weights are already in data files, or whose copy cannot be made, opens as it is: then
    ONNX Runtime's own folding decides, exactly as before. The copies go when ``folder`` is removed
    (or one by one, :meth:`drop`).

    ``in_memory``: a copy's weights are held in this process, not written: its folder holds the small model
    file and an empty data file, and each session takes the values as its initializers (``open_file_session``).
    A copy is a variant's decoded weights, about the model's float size: on disk, one of them beside a run's kept
    variants put a 100 MB upload's run over 3x its size (issue 27). ``keep_bytes`` then bounds the memory
    kept between uses instead, and a copy over a quarter of it is dropped as soon as its session is open
    (the session holds its values): a run opens each variant once per latency setting, after every other
    one, so keeping it would only add its size to the worker's memory. Models measured in their own files
    (1 GB and more) keep copies on disk.
    """

    def __init__(self, folder: str | Path, keep_bytes: int | None = None, in_memory: bool = False) -> None:
        self.folder = Path(folder)
        self.keep_bytes = keep_bytes
        self.in_memory = in_memory
        self._made: dict[Path, Path | None] = {}  # in order of last use, the most recent last
        self._bytes: dict[Path, int] = {}  # each copy's own bytes (not the source files it links)
        self._arrays: dict[Path, dict[str, np.ndarray]] = {}  # in memory: each copy's weights
        self._largest = 0  # the largest copy made so far, kept or not: room is made for one that size
        self._once: set[Path] = set()  # in memory: copies too large to keep, dropped once their session opens
        self._count = 0

    def copy_of(self, source: str | Path) -> Path | None:
        """The measuring copy of ``source`` (made on first use); None when the file opens as it is."""
        source = Path(source)
        if source in self._made:
            self._made[source] = self._made.pop(source)  # used now
        else:
            self._make_room()
            self._count += 1
            target = self.folder / f"measuring-{self._count}.onnx"
            arrays: dict[str, np.ndarray] | None = {} if self.in_memory else None
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                made = prefold_file(source, target, arrays)
            except Exception:  # noqa: BLE001 - any failure: ONNX Runtime opens the file itself, as before
                made = False
            if not made:
                _remove(target)
            self._made[source] = target if made else None
            if made:
                on_disk = sum(p.stat().st_size for p in (target, target.with_name(target.name + ".data"))
                              if p.exists())  # fmt: skip
                self._bytes[source] = on_disk + sum(a.nbytes for a in (arrays or {}).values())
                if arrays:
                    self._arrays[source] = arrays
                if self.in_memory and self.keep_bytes is not None and self._bytes[source] > self.keep_bytes / 4:
                    self._once.add(source)  # not kept: no room is made for it either
                else:
                    self._largest = max(self._largest, self._bytes[source])
        return self._made[source]

    def _make_room(self) -> None:
        """With ``keep_bytes``, remove the least recently used copies until the ones kept and one more the size
        of the largest made so far (kept or since removed) fit in it: each variant's copy holds its decoded
        weights, about the model's float size (five of them were 5x a 100 MB upload on the server's disk, issue
        27; sizing the room by the kept ones only let a 1.25x copy join 0.56x kept, 1.8x with a 1.3x budget). What
        is removed is made again when used again (about 1 s per 100 MB)."""
        if self.keep_bytes is None:
            return
        largest = self._largest
        for source in list(self._made):
            if sum(self._bytes.values()) + largest <= self.keep_bytes:
                return
            if source in self._bytes:
                self.drop(source)

    def drop(self, source: str | Path) -> None:
        """Remove the copy of ``source`` (its disk or memory back; made again on next use). A large model's
        copies are dropped between uses so that no more than one of them is on disk at a time."""
        copy = self._made.pop(Path(source), None)
        self._bytes.pop(Path(source), None)
        self._arrays.pop(Path(source), None)  # a session still open keeps its own reference to them
        self._once.discard(Path(source))
        if copy is not None:
            _remove(copy)

    def session(self, files: list[Path], threads: int):
        """An optimized CPU session measuring ``files`` (the model file and any data file beside it)."""
        copy = self.copy_of(files[0])
        if copy is not None:
            try:
                session = open_file_session(copy, optimized=True, threads=threads,
                                            initializers=self._arrays.get(Path(files[0])))  # fmt: skip
                if Path(files[0]) in self._once:
                    self.drop(files[0])
                return session
            except ShrinkRayError:  # the file itself decides, and its own error is what the user reads
                self.drop(files[0])
                self._made[Path(files[0])] = None
        return open_file_session(files[0], optimized=True, threads=threads)


def _remove(copy: Path) -> None:
    """A copy's files: its model, its data file and links to its source's data files."""
    for path in (copy, copy.with_name(copy.name + ".data"), *copy.parent.glob(f"{copy.name}.data.src*")):
        path.unlink(missing_ok=True)


def measuring_session(model: onnx.ModelProto, *, outputs: Sequence[str] = (), threads: int = 1,
                      base_dir: Path | None = None) -> tuple[Any, onnx.ModelProto]:  # fmt: skip
    """An optimized CPU session on an in-memory model (``outputs`` added to its outputs), opened from a
    measuring copy in a temporary folder, and the model it opened (large tensors by reference: for
    signatures and shapes, not values). Neither a second copy of the model nor its serialized bytes
    are made (a calibration probe of the 101 MB benchmark model held both while its session opened).
    A model whose tensors are already external, or whose copy cannot be made or opened, opens from a
    serialized copy, as before (so an error is the model's own); with ``base_dir`` (the folder of its data
    file) it opens from a header written there instead, its weights read from that file.
    """
    if base_dir is not None:
        probe = onnx.ModelProto()
        probe.CopyFrom(model)  # a header: the weights stay in the data file
        present = {o.name for o in probe.graph.output}
        probe.graph.output.extend(onnx.ValueInfoProto(name=n) for n in outputs if n not in present)
        with tempfile.NamedTemporaryFile(dir=base_dir, prefix="probe-", suffix=".onnx", delete=False) as fh:
            header = Path(fh.name)
        try:
            onnx.save(probe, str(header))
            return open_file_session(header, optimized=True, threads=threads), probe
        finally:
            header.unlink(missing_ok=True)  # read once opened; the data file stays mapped

    if not any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
        with tempfile.TemporaryDirectory(prefix="shrinkray-measuring-", ignore_cleanup_errors=True) as tmp:
            path = Path(tmp) / "model.onnx"
            try:
                light = prefold(model, path, outputs=outputs)
                return open_file_session(path, optimized=True, threads=threads), light  # its data stays mapped
            except Exception:  # noqa: BLE001 - any failure of the copy: the model opens itself (its own error)
                pass
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    present = {o.name for o in probe.graph.output}
    probe.graph.output.extend(onnx.ValueInfoProto(name=n) for n in outputs if n not in present)
    return open_session(probe, threads=threads), probe

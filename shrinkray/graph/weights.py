"""Finding weight tensors wherever a model keeps them, and rewiring them.

Weights live in graph initializers, in Constant nodes, and inside the
subgraphs of If/Loop/Scan nodes. Every method needs the same inventory and
the same safe way to replace a weight, so both live here:

* :func:`find_weights` lists every tensor with its consumers (including uses
  from nested subgraphs) and the axis that holds output channels.
* :class:`GraphEditor` replaces a weight by new stored tensors plus nodes that
  recompute a tensor of the *same name*, so consumers stay untouched and a
  weight shared by several nodes is rewritten exactly once.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from shrinkray.io.limits import tensor_nbytes

FLOAT_TYPES = {
    onnx.TensorProto.FLOAT: np.float32,
    onnx.TensorProto.FLOAT16: np.float16,
    onnx.TensorProto.DOUBLE: np.float64,
}


@dataclass
class Consumer:
    """One use of a tensor: which node and which input slot."""

    op_type: str
    node_name: str
    input_index: int
    node: onnx.NodeProto = field(repr=False)
    nested: bool = False  # the node sits in a subgraph below the tensor's own graph


@dataclass
class WeightRef:
    """A stored tensor (initializer or Constant output) and how it is used."""

    name: str
    kind: str  # "initializer" or "constant"
    scope: str  # "" for the main graph, else a path like "If_0/then_branch"
    dtype: int
    shape: tuple[int, ...]
    nbytes: int
    consumers: list[Consumer]
    is_graph_input: bool
    graph: onnx.GraphProto = field(repr=False)
    tensor: onnx.TensorProto = field(repr=False)
    node: onnx.NodeProto | None = field(default=None, repr=False)

    @property
    def elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def dtype_name(self) -> str:
        return onnx.TensorProto.DataType.Name(self.dtype).lower()

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_TYPES

    @property
    def where(self) -> str:
        place = "Constant node" if self.kind == "constant" else "initializer"
        return f"{place} in {self.scope}" if self.scope else place

    def array(self) -> np.ndarray:
        return numpy_helper.to_array(self.tensor)


def iter_graphs(graph: onnx.GraphProto, scope: str = "") -> Iterator[tuple[str, onnx.GraphProto]]:
    """Yield (scope, graph) for a graph and all its nested subgraphs.

    A scope reads like ``/decoder/If_0/then_branch``. Unnamed nodes are
    labelled ``If#k`` (the k-th unnamed If) and repeated names get ``#k``,
    so scopes are unique, and they stay the same when named nodes are added.
    """
    yield scope, graph
    seen: Counter[str] = Counter()
    labels: set[str] = set()
    for node in graph.node:
        if not any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
            if node.name:
                seen[node.name] += 1
            continue
        base = node.name or f"{node.op_type}#"
        seen[base] += 1
        label = node.name if node.name and seen[base] == 1 else f"{base.rstrip('#')}#{seen[base]}"
        while label in labels:  # a node literally named like a generated label
            label += "'"
        labels.add(label)
        prefix = f"{scope}/{label}" if scope else label
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from iter_graphs(attr.g, f"{prefix}/{attr.name}")
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for k, sub in enumerate(attr.graphs):
                    yield from iter_graphs(sub, f"{prefix}/{attr.name}[{k}]")


def _subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def _collect_uses(graph: onnx.GraphProto, uses: dict[str, list[Consumer]]) -> None:
    """Record every node input of this graph and of its nested subgraphs.

    Names defined inside a subgraph shadow outer names; exported models
    almost never reuse names, so shadowing is handled conservatively: a
    subgraph that redefines a name hides its inner uses.
    """
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name:
                uses[name].append(Consumer(node.op_type, node.name, index, node))
        for sub in _subgraphs(node):
            inner: dict[str, list[Consumer]] = defaultdict(list)
            _collect_uses(sub, inner)
            local = {t.name for t in sub.initializer} | {i.name for i in sub.input}
            local |= {o for n in sub.node for o in n.output}
            for name, found in inner.items():
                if name not in local:
                    uses[name].extend(dataclasses.replace(c, nested=True) for c in found)


def _constant_tensor(node: onnx.NodeProto) -> onnx.TensorProto | None:
    for attr in node.attribute:
        if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
            return attr.t
    return None


def find_weights(model: onnx.ModelProto) -> list[WeightRef]:
    """Every stored tensor in the model, with consumers, largest first."""
    refs: list[WeightRef] = []
    for scope, graph in iter_graphs(model.graph):
        uses: dict[str, list[Consumer]] = defaultdict(list)
        _collect_uses(graph, uses)
        inputs = {i.name for i in graph.input}
        for tensor in graph.initializer:
            refs.append(
                WeightRef(
                    name=tensor.name,
                    kind="initializer",
                    scope=scope,
                    dtype=tensor.data_type,
                    shape=tuple(int(d) for d in tensor.dims),
                    nbytes=tensor_nbytes(tensor),
                    consumers=list(uses.get(tensor.name, [])),
                    is_graph_input=tensor.name in inputs,
                    graph=graph,
                    tensor=tensor,
                )
            )
        for node in graph.node:
            if node.op_type != "Constant" or node.domain not in ("", "ai.onnx") or not node.output:
                continue
            tensor = _constant_tensor(node)
            if tensor is None:
                continue
            name = node.output[0]
            refs.append(
                WeightRef(
                    name=name,
                    kind="constant",
                    scope=scope,
                    dtype=tensor.data_type,
                    shape=tuple(int(d) for d in tensor.dims),
                    nbytes=tensor_nbytes(tensor),
                    consumers=list(uses.get(name, [])),
                    is_graph_input=False,
                    graph=graph,
                    tensor=tensor,
                    node=node,
                )
            )
    refs.sort(key=lambda r: (-r.nbytes, r.scope, r.name))
    return refs


def _attr(node: onnx.NodeProto, name: str, default: int) -> int:
    for attr in node.attribute:
        if attr.name == name:
            return int(attr.i)
    return default


def _channel_axis_for(consumer: Consumer, rank: int) -> int | None:
    """The axis holding output channels for this use, or None if unknown."""
    op, idx = consumer.op_type, consumer.input_index
    if rank < 2:
        return None
    if op in ("Conv", "QLinearConv") and idx == 1:
        return 0
    if op == "ConvTranspose" and idx == 1:
        return 1
    if op == "Gemm" and idx == 1:
        return 0 if _attr(consumer.node, "transB", 0) else 1
    if op == "Gemm" and idx == 0:
        return 1 if _attr(consumer.node, "transA", 0) else 0
    if op == "MatMul" and idx == 1:
        return rank - 1
    if op == "MatMul" and idx == 0:
        return rank - 2
    if op == "Gather" and idx == 0 and _attr(consumer.node, "axis", 0) == 0:
        return 0
    if op in ("LSTM", "GRU", "RNN") and idx in (1, 2) and rank == 3:
        return 1
    return None


def channel_axis(ref: WeightRef) -> int | None:
    """Output-channel axis agreed by all consumers, or None (use per-tensor)."""
    axes = {_channel_axis_for(c, len(ref.shape)) for c in ref.consumers}
    if len(axes) != 1:
        return None
    return axes.pop()


class NameAllocator:
    """Hands out tensor and node names not used anywhere in the model."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.used: set[str] = set()
        for _, graph in iter_graphs(model.graph):
            self.used.update(t.name for t in graph.initializer)
            self.used.update(t.values.name for t in graph.sparse_initializer)
            self.used.update(v.name for v in graph.input)
            self.used.update(v.name for v in graph.output)
            self.used.update(v.name for v in graph.value_info)
            for node in graph.node:
                self.used.update(node.output)
                self.used.update(node.input)
                if node.name:
                    self.used.add(node.name)

    def new(self, base: str) -> str:
        candidate = base
        for k in itertools.count(1):
            if candidate not in self.used:
                break
            candidate = f"{base}_{k}"
        self.used.add(candidate)
        return candidate


#: Builds the nodes that turn stored tensors back into the weight:
#: ``build(stored_names, output_name, names) -> nodes``.
DecodeBuilder = Callable[[list[str], str, NameAllocator], list[onnx.NodeProto]]


class GraphEditor:
    """Batches weight replacements and applies them in one pass per graph.

    A replacement removes the weight's definition and adds stored tensors plus
    decode nodes whose last output carries the weight's original name. In the
    owning graph the decode nodes go first (initializers) or exactly where the
    Constant node was, so the node order stays topological.
    """

    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        self.names = NameAllocator(model)
        # Keyed by scope path and tensor name: protobuf wrappers have no stable id().
        self._prepend: dict[str, list[onnx.NodeProto]] = defaultdict(list)
        # arrays, not TensorProtos: each is turned into its initializer only when apply() writes it into the
        # graph, and dropped then (a finished TensorProto held here was copied once more into the graph)
        # (a subclass may put a finished TensorProto in their place: SpillingEditor's external references)
        self._new_inits: dict[str, list[tuple[str, np.ndarray] | onnx.TensorProto]] = defaultdict(list)
        self._drop_inits: dict[str, set[str]] = defaultdict(set)
        self._replace_const: dict[tuple[str, str], list[onnx.NodeProto]] = {}

    def replace(self, ref: WeightRef, stored: dict[str, np.ndarray], build: DecodeBuilder) -> list[str]:
        """Replace ``ref`` by the ``stored`` arrays, decoded by the nodes ``build`` returns.

        ``stored`` maps a short tag ("q", "scale"...) to an array; each is
        stored as ``NAME__tag``. ``build(stored_names, output_name, names)``
        returns the decode nodes. Returns the names given to the stored tensors.
        """
        stored_names = [self.names.new(f"{ref.name}__{tag}") for tag in stored]
        nodes = build(stored_names, ref.name, self.names)
        gid = ref.scope
        arrays = [(n, np.asarray(a)) for a, n in zip(stored.values(), stored_names, strict=True)]
        if ref.kind == "initializer":
            self._drop_inits[gid].add(ref.name)
            self._new_inits[gid].extend(arrays)
            self._prepend[gid].extend(nodes)
        else:
            tensors = [numpy_helper.from_array(a, n) for n, a in arrays]
            constants = [
                helper.make_node("Constant", [], [t.name], name=self.names.new(f"{t.name}_const"), value=t)
                for t in tensors
            ]
            self._replace_const[(gid, ref.name)] = constants + nodes
        return stored_names

    def apply(self) -> None:
        """Write all batched replacements into the model."""
        # Innermost graphs first: rewriting a parent's node list copies its
        # nodes, so a subgraph must be finished before its parent is rewritten.
        for gid, graph in reversed(list(iter_graphs(self.model.graph))):
            new_nodes: list[onnx.NodeProto] = list(self._prepend.get(gid, []))
            changed = bool(new_nodes)
            for node in graph.node:
                replacement = None
                if node.op_type == "Constant" and len(node.output) == 1:
                    replacement = self._replace_const.get((gid, node.output[0]))
                if replacement is not None:
                    new_nodes.extend(replacement)
                    changed = True
                else:
                    new_nodes.append(node)
            if changed:
                graph.ClearField("node")
                graph.node.extend(new_nodes)
            drop = self._drop_inits.get(gid)
            if drop:
                kept = [t for t in graph.initializer if t.name not in drop]
                graph.ClearField("initializer")
                graph.initializer.extend(kept)
            pending = self._new_inits.get(gid, [])
            pending.reverse()
            while pending:  # in replacement order; each array goes as its initializer lands
                item = pending.pop()
                graph.initializer.append(item if isinstance(item, onnx.TensorProto) else
                                         numpy_helper.from_array(item[1], item[0]))  # fmt: skip
        self._prepend.clear()
        self._new_inits.clear()
        self._drop_inits.clear()
        self._replace_const.clear()


def set_tensor_values(tensor: onnx.TensorProto, values: np.ndarray) -> None:
    """Overwrite a tensor's values in place, keeping its name and data type."""
    dtype = FLOAT_TYPES.get(tensor.data_type, values.dtype)
    # copy=False: from_array copies the values into the tensor anyway; a second full copy only raises the peak
    replacement = numpy_helper.from_array(values.astype(dtype, copy=False), tensor.name)
    tensor.CopyFrom(replacement)


def constants_to_initializers(model: onnx.ModelProto, min_elements: int = 1) -> list[str]:
    """Move main-graph Constant-node tensors into initializers (same names).

    ONNX Runtime's quantizer only quantizes initializers, while older
    exporters store weights as Constant nodes; this makes both look alike.
    """
    graph = model.graph
    moved: list[str] = []
    kept_nodes = []
    for node in graph.node:
        tensor = _constant_tensor(node) if node.op_type == "Constant" and node.domain in ("", "ai.onnx") else None
        if tensor is not None and len(node.output) == 1 and tensor.data_type in FLOAT_TYPES:
            count = int(np.prod(tensor.dims, dtype=np.int64)) if len(tensor.dims) else 1
            if count >= min_elements:
                init = onnx.TensorProto()
                init.CopyFrom(tensor)
                init.name = node.output[0]
                graph.initializer.append(init)
                moved.append(init.name)
                continue
        kept_nodes.append(node)
    if moved:
        graph.ClearField("node")
        graph.node.extend(kept_nodes)
    return moved


QUANTIZED_OPS = {
    "MatMulInteger", "ConvInteger", "QLinearConv", "QLinearMatMul", "DynamicQuantizeLinear",
    "DynamicQuantizeLSTM", "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QAttention",
    "QuantizeLinear", "DequantizeLinear", "MatMulNBits", "QGemm", "QLinearAdd",
}  # fmt: skip


def quantized_ops(model: onnx.ModelProto) -> list[str]:
    """Op types showing that a model is already quantized (sorted, unique)."""
    return sorted({n.op_type for _, g in iter_graphs(model.graph) for n in g.node if n.op_type in QUANTIZED_OPS})

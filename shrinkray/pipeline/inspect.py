"""What is inside a model: signature, ops, weights, and what each method could touch."""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import onnx

from shrinkray.graph.checks import custom_ops
from shrinkray.graph.weights import find_weights, iter_graphs, quantized_ops
from shrinkray.io.files import LoadedModel
from shrinkray.methods import all_methods

Dim = int | str


@dataclass
class TensorSignature:
    """A graph input or output. Dims are ints, symbolic names, or '?' when unnamed."""

    name: str
    dtype: str
    shape: list[Dim] | None  # None when the rank itself is unknown

    @property
    def dynamic_axes(self) -> dict[int, str]:
        return {i: d for i, d in enumerate(self.shape or []) if isinstance(d, str)}

    def shape_text(self) -> str:
        if self.shape is None:
            return "unknown rank"
        return "[" + ", ".join(str(d) for d in self.shape) + "]"


@dataclass
class WeightInfo:
    name: str
    where: str
    dtype: str
    shape: list[int]
    elements: int
    bytes: int
    share_of_file: float


@dataclass
class MethodReach:
    """How much of the model a method would rewrite with its default options."""

    method: str
    tensors: int
    bytes: int
    share_of_file: float


@dataclass
class ModelSummary:
    name: str
    file_bytes: int
    ir_version: int
    opsets: dict[str, int]
    producer: str
    inputs: list[TensorSignature]
    outputs: list[TensorSignature]
    overridable_initializers: list[str]
    node_count: int
    subgraph_count: int
    op_histogram: list[tuple[str, int]]
    weights: list[WeightInfo]
    weight_bytes: int
    custom_ops: list[str]
    quantized_ops: list[str] = field(default_factory=list)
    methods: list[MethodReach] = field(default_factory=list)

    @property
    def weight_share(self) -> float:
        return self.weight_bytes / self.file_bytes if self.file_bytes else 0.0

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["op_histogram"] = dict(self.op_histogram)
        data["weight_share"] = self.weight_share
        for sig in data["inputs"] + data["outputs"]:
            sig["dynamic_axes"] = {str(i): d for i, d in enumerate(sig["shape"] or []) if isinstance(d, str)}
        return data


def _dims(value: onnx.ValueInfoProto) -> tuple[str, list[Dim] | None]:
    tensor_type = value.type.tensor_type if value.type.HasField("tensor_type") else None
    if tensor_type is None:
        kind = value.type.WhichOneof("value")
        return (kind or "unknown"), None
    dtype = onnx.TensorProto.DataType.Name(tensor_type.elem_type).lower() if tensor_type.elem_type else "unknown"
    if not tensor_type.HasField("shape"):
        return dtype, None
    dims: list[Dim] = []
    for d in tensor_type.shape.dim:
        if d.HasField("dim_value") and d.dim_value >= 0:
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            dims.append(d.dim_param)
        else:
            dims.append("?")
    return dtype, dims


def signature(values: list[onnx.ValueInfoProto]) -> list[TensorSignature]:
    out = []
    for v in values:
        dtype, dims = _dims(v)
        out.append(TensorSignature(name=v.name, dtype=dtype, shape=dims))
    return out


def inspect_model(source: LoadedModel | onnx.ModelProto, name: str = "model") -> ModelSummary:
    """Summarise a model; pure (reads the proto, runs nothing)."""
    if isinstance(source, LoadedModel):
        model, name, file_bytes = source.model, source.name, source.file_bytes
    else:
        model = source
        file_bytes = model.ByteSize()
    file_bytes = max(file_bytes, 1)
    graph = model.graph
    init_names = {t.name for t in graph.initializer}
    ops: Counter[str] = Counter()
    nodes = 0
    subgraphs = -1
    for _, g in iter_graphs(graph):
        subgraphs += 1
        for node in g.node:
            nodes += 1
            ops[node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"] += 1
    refs = find_weights(model)
    weights = [
        WeightInfo(
            name=r.name,
            where=r.where,
            dtype=r.dtype_name,
            shape=list(r.shape),
            elements=r.elements,
            bytes=r.nbytes,
            share_of_file=r.nbytes / file_bytes,
        )
        for r in refs
    ]
    reach = []
    for spec in all_methods():
        chosen = spec.candidates(refs, spec.make_options())
        total = sum(r.nbytes for r in chosen)
        reach.append(MethodReach(spec.name, len(chosen), total, total / file_bytes))
    return ModelSummary(
        name=name,
        file_bytes=file_bytes,
        ir_version=int(model.ir_version),
        opsets={(imp.domain or "ai.onnx"): int(imp.version) for imp in model.opset_import},
        producer=" ".join(p for p in (model.producer_name, model.producer_version) if p),
        inputs=signature([v for v in graph.input if v.name not in init_names]),
        outputs=signature(list(graph.output)),
        overridable_initializers=[v.name for v in graph.input if v.name in init_names],
        node_count=nodes,
        subgraph_count=subgraphs,
        op_histogram=sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])),
        weights=weights,
        weight_bytes=sum(w.bytes for w in weights),
        custom_ops=custom_ops(model),
        quantized_ops=quantized_ops(model),
        methods=reach,
    )

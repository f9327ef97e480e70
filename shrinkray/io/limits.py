"""What one model may cost, and a structural check that explains broken graphs.

A file from a stranger can be small and still expensive: a 1 KB protobuf can
declare a tensor of 10**12 values, nest If inside If until a recursive walk
overflows, or hold a million nodes. :class:`Limits` names every such limit;
each has a default, an environment variable that overrides it, and an error
message that names both::

    SHRINKRAY_MAX_FILE_BYTES         size of one file (model, archive, model + external data)
    SHRINKRAY_MAX_TENSOR_BYTES       bytes of all tensor payloads together (external data included)
    SHRINKRAY_MAX_NODES              nodes in all graphs, subgraphs and functions together
    SHRINKRAY_MAX_GRAPH_DEPTH        how deeply subgraphs (If/Loop/Scan bodies) may nest
    SHRINKRAY_MAX_DECLARED_ELEMENTS  values one declared shape may hold (tensors, inputs, outputs, value_info)
    SHRINKRAY_MAX_GRAPH_INPUTS       inputs of the main graph (ONNX Runtime checks them in quadratic time)
    SHRINKRAY_MAX_GRAPH_OUTPUTS      outputs of the main graph (quadratic at session start)
    SHRINKRAY_MAX_INITIALIZERS       initializers in all graphs (quadratic at session start when unused)
    SHRINKRAY_MAX_FUNCTION_CALLS     calls of model-local functions once nested calls are expanded
    SHRINKRAY_MAX_ZIP_FILES          members of an uploaded .zip
    SHRINKRAY_MAX_UNPACKED_BYTES     bytes a .zip may unpack to
    SHRINKRAY_MAX_COMPRESSION_RATIO  unpacked bytes per archive byte (stops zip bombs)
    SHRINKRAY_MAX_RUN_SECONDS        time budget for the latency and parity runs of one comparison
    SHRINKRAY_MAX_JOB_MEMORY_BYTES   hard memory cap of the worker process that runs a model (a quarter of RAM)
    SHRINKRAY_MAX_JOB_SECONDS        hard wall-clock deadline of that worker (600 s)

Sizes accept plain integers (``4294967296``, ``4_294_967_296``) or a unit
(``4GiB``, ``512MiB``, ``2GB``, ``100k``); counts accept integers or a unit
like ``200k``.

:func:`check_model` is cheap: it reads shapes and lengths, never decodes a
tensor, walks graphs iteratively (no recursion, whatever the nesting) and
multiplies dims as Python integers (no overflow). :func:`check_graph_structure`
finds cycles, names nothing produces and names produced twice, and says
which node and tensor, before onnx.checker gets a chance to say it cryptically.

Kept as one module (over 600 lines): every cap on what one model may cost is read here, in one place
(docs/security.md lists them), with the structural check that explains a broken graph.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import onnx

from shrinkray.errors import InvalidModelError, LimitExceededError, OptionError
from shrinkray.units import format_bytes

GiB = 2**30

#: Environment variable for each limit.
ENV_PREFIX = "SHRINKRAY_"

_BYTE_FIELDS = {"max_file_bytes", "max_tensor_bytes", "max_unpacked_bytes", "max_memory_bytes", "max_job_memory_bytes",
                "min_free_disk_bytes", "max_visitor_disk_bytes"}

_WHAT = {
    "min_free_disk_bytes": "the disk space every write leaves free",
    "max_file_bytes": "the size of one file",
    "max_tensor_bytes": "the bytes of all tensors together",
    "max_nodes": "the number of nodes",
    "max_graph_depth": "how deeply subgraphs nest",
    "max_declared_elements": "the values one declared shape may hold",
    "max_graph_inputs": "the number of graph inputs",
    "max_graph_outputs": "the number of graph outputs",
    "max_initializers": "the number of initializers",
    "max_function_calls": "the number of function calls once nested calls are expanded",
    "max_zip_files": "the number of files in an archive",
    "max_unpacked_bytes": "the bytes an archive may unpack to",
    "max_compression_ratio": "how much an archive may expand",
    "max_run_seconds": "the time budget for running models",
    "max_memory_bytes": "the memory one shrink or comparison may plan to use",
    "max_job_memory_bytes": "the memory a worker running a model may use",
    "max_job_seconds": "the time a worker running a model may take",
    "max_inference_seconds": "the time one inference may take",
    "max_live_runs": "the runs one visitor may have queued or running at once",
    "max_visitor_disk_bytes": "the disk space one visitor's runs may hold",
}


def _physical_memory() -> int:
    """This machine's physical memory (16 GiB where it cannot be read)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return 16 * GiB


def _default_memory() -> int:
    """Half of this machine's physical memory."""
    return _physical_memory() // 2


def _default_job_memory() -> int:
    """A quarter of this machine's physical memory (at least 2 GiB): several jobs fit beside the server."""
    return max(_physical_memory() // 4, 2 * GiB)


#: Peak memory of one shrink as a multiple of the model's tensor bytes (measured 2026-11-22: 4.1-4.7x on a
#: 101 MB model, rounded up), and what each further measured variant adds.
SHRINK_MEMORY_FACTOR = 5
VARIANT_MEMORY_FACTOR = 2
#: Peak memory of a comparison of a model kept in external data files whose methods all stream: one session
#: at a time, each about the model's size (measured 2026-11-29: 1.46x on the 0.94 GB bench model, rounded up).
STREAMED_MEMORY_FACTOR = 2


@dataclass(frozen=True)
class Limits:
    """Resource limits for one upload. Every field can be set by ``SHRINKRAY_<FIELD>``."""

    max_file_bytes: int = 4 * GiB
    max_tensor_bytes: int = 4 * GiB
    max_nodes: int = 200_000
    max_graph_depth: int = 16
    max_declared_elements: int = 2**31
    # ONNX Runtime's work at session start (and its input check on every run) grows quadratically
    # with these counts, and inlining nested functions with calls x nodes; measured with onnxruntime
    # 1.31: 300,000 unused inputs took compare past 300 s, 4,000 outputs 5 s per optimized session,
    # 80,000 unused initializers 70 s, 16,384 nested calls 8 s (65,536: minutes).
    max_graph_inputs: int = 4096
    max_graph_outputs: int = 1024
    max_initializers: int = 20_000
    max_function_calls: int = 4096
    # Some exporters write one external-data file per tensor, so an honest
    # archive of a large model can hold hundreds of files.
    max_zip_files: int = 4096
    max_unpacked_bytes: int = 8 * GiB
    max_compression_ratio: float = 100.0
    # Consumed by the code that runs models (latency and parity); the engine's
    # loader does not run anything.
    max_run_seconds: float = 120.0
    max_memory_bytes: int = dataclasses.field(default_factory=_default_memory)
    # Hard caps of the worker process that runs a user's model (address space, wall clock): when one
    # is hit the worker is killed and the user gets one sentence; the server and other users go on.
    max_job_memory_bytes: int = dataclasses.field(default_factory=_default_job_memory)
    max_job_seconds: float = 600.0
    # One inference (a never-ending Loop is stopped here, not at the job's limit: measure/deadline.py).
    max_inference_seconds: float = 60.0
    # Every write (an upload, a run's copy, variants, reports) leaves at least this much free on its disk, so
    # one visitor's files cannot fill the disk the server, its store and other visitors share (io/files.py).
    min_free_disk_bytes: int = GiB // 4
    # Runs one visitor of the app may have queued or running at once (runs/fairness.py): one visitor's runs
    # cannot fill the queue; the command line and the Python API are not capped.
    max_live_runs: int = 2
    # The run store's disk one visitor's runs may hold (their model copies and variants; a live run counted at
    # what it may need): the visitor's own oldest finished runs make room first, else a new run is refused.
    max_visitor_disk_bytes: int = 5 * GiB

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise OptionError(f"The limit {f.name} must be a positive number, not {value!r}", "Fix the setting")

    @staticmethod
    def env_name(name: str) -> str:
        return ENV_PREFIX + name.upper()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: float) -> Limits:
        """Defaults, overridden by ``SHRINKRAY_MAX_*`` variables, overridden by keyword arguments."""
        env = os.environ if environ is None else environ
        values: dict[str, float] = {}
        for f in dataclasses.fields(cls):
            raw = env.get(cls.env_name(f.name))
            if raw is not None and raw.strip():
                values[f.name] = _parse_setting(cls.env_name(f.name), raw, integer=f.type == "int")
        values.update(overrides)
        return cls(**values)

    def setting(self, name: str) -> str:
        """``max_nodes=200000 (set SHRINKRAY_MAX_NODES)``: the limit as error messages name it."""
        value = getattr(self, name)
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        if name in _BYTE_FIELDS:
            return f"{name}={shown} ({format_bytes(value)}; set {self.env_name(name)})"
        return f"{name}={shown} (set {self.env_name(name)})"

    def exceeded(self, name: str, problem: str, hint: str = "") -> LimitExceededError:
        """A LimitExceededError whose message names the limit and its setting."""
        return LimitExceededError(
            f"{problem}, which exceeds {self.setting(name)}",
            hint or f"The limit on {_WHAT[name]} protects this server; raise it only for files you trust",
        )


_UNITS = {
    "": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}  # fmt: skip


def _parse_setting(var: str, raw: str, *, integer: bool) -> float:
    text = raw.strip().replace("_", "").lower()
    match = re.fullmatch(r"([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-z]*)", text)
    if not match or match.group(2) not in _UNITS:
        raise OptionError(
            f"{var} must be a positive number (optionally with a unit like 4GiB or 200k), not {raw!r}",
            "Fix or unset the environment variable",
        )
    value = float(match.group(1)) * _UNITS[match.group(2)]
    if not value > 0 or not math.isfinite(value):
        raise OptionError(f"{var} must be above 0, not {raw!r}", "Fix or unset the environment variable")
    return int(value) if integer else value


# --------------------------------------------------------------------------- walking a model


def short(name: object, limit: int = 80) -> str:
    """A name quoted for a one-line message: control characters escaped, long names cut."""
    text = name.decode("utf-8", "backslashreplace") if isinstance(name, bytes) else str(name)
    text = text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return f"'{text}'"


def node_label(node: onnx.NodeProto, index: int) -> str:
    """``node 'fc1' (Gemm)``, or ``node #3 (Gemm)`` for an unnamed node."""
    op = short(node.op_type, 40).strip("'")
    return f"node {short(node.name)} ({op})" if node.name else f"node #{index} ({op})"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


@dataclass
class GraphInfo:
    """One graph of the model, found by :func:`walk_graphs`."""

    graph: onnx.GraphProto | onnx.FunctionProto
    scope: str  # "" for the main graph, else e.g. "node 'if1' (If)/then_branch"
    depth: int  # 1 for the main graph and for function bodies, 2 for their subgraphs...
    parent: int | None  # index of the enclosing graph in the walk, None at the top
    node_index: int = -1  # which node of the parent owns this subgraph
    children: list[tuple[int, int]] = field(default_factory=list)  # (node index, child graph index)

    @property
    def where(self) -> str:
        return f"in {self.scope}" if self.scope else "in the main graph"


def _subgraph_attrs(node: onnx.NodeProto) -> Iterator[tuple[str, onnx.GraphProto]]:
    for attr in node.attribute:
        if attr.HasField("g"):
            yield attr.name, attr.g
        for k, sub in enumerate(attr.graphs):
            yield f"{attr.name}[{k}]", sub


def walk_graphs(
    model: onnx.ModelProto,
    max_depth: int | None = None,
    limits: Limits | None = None,
    *,
    include_functions: bool = True,
) -> list[GraphInfo]:
    """Every graph (main, nested subgraphs, function bodies) in pre-order, without recursion.

    With ``max_depth`` the walk stops with a LimitExceededError at the first
    subgraph nested more than that many levels below the main graph.
    """
    found: list[GraphInfo] = []
    functions = reversed(model.functions) if include_functions else []
    pending = [GraphInfo(f, f"function {short(f'{f.domain}::{f.name}')}", 1, None) for f in functions]
    pending.append(GraphInfo(model.graph, "", 1, None))
    while pending:
        info = pending.pop()
        if max_depth is not None and info.depth - 1 > max_depth:
            limits = limits or Limits(max_graph_depth=max_depth)
            raise limits.exceeded(
                "max_graph_depth",
                f"Subgraphs are nested at least {info.depth - 1} levels deep (below {info.scope.split('/')[0]})",
                "Deeply nested If/Loop/Scan bodies make every tool that walks the model slow or crash; "
                "flatten the model, or raise the limit only for files you trust",
            )
        index = len(found)
        if info.parent is not None:
            found[info.parent].children.append((info.node_index, index))
        found.append(info)
        children = []
        for n, node in enumerate(info.graph.node):
            for attr_name, sub in _subgraph_attrs(node):
                label = node_label(node, n)
                scope = f"{info.scope}/{label}/{attr_name}" if info.scope else f"{label}/{attr_name}"
                children.append(GraphInfo(sub, scope, info.depth + 1, index, n))
        pending.extend(reversed(children))
    return found


# --------------------------------------------------------------------------- tensors

#: Bits per value for data types with a fixed width (sub-byte types are packed in raw_data).
_BITS = {
    onnx.TensorProto.FLOAT: 32, onnx.TensorProto.UINT8: 8, onnx.TensorProto.INT8: 8,
    onnx.TensorProto.UINT16: 16, onnx.TensorProto.INT16: 16, onnx.TensorProto.INT32: 32,
    onnx.TensorProto.INT64: 64, onnx.TensorProto.BOOL: 8, onnx.TensorProto.FLOAT16: 16,
    onnx.TensorProto.DOUBLE: 64, onnx.TensorProto.UINT32: 32, onnx.TensorProto.UINT64: 64,
    onnx.TensorProto.COMPLEX64: 64, onnx.TensorProto.COMPLEX128: 128, onnx.TensorProto.BFLOAT16: 16,
    onnx.TensorProto.FLOAT8E4M3FN: 8, onnx.TensorProto.FLOAT8E4M3FNUZ: 8, onnx.TensorProto.FLOAT8E5M2: 8,
    onnx.TensorProto.FLOAT8E5M2FNUZ: 8, onnx.TensorProto.UINT4: 4, onnx.TensorProto.INT4: 4,
}  # fmt: skip
for _name, _bits in (("FLOAT4E2M1", 4), ("FLOAT8E8M0", 8), ("UINT2", 2), ("INT2", 2)):
    if hasattr(onnx.TensorProto, _name):
        _BITS[getattr(onnx.TensorProto, _name)] = _bits

#: Which typed field holds the values of a data type, and how many entries per value.
_TYPED_FIELD = {
    onnx.TensorProto.FLOAT: ("float_data", 1), onnx.TensorProto.COMPLEX64: ("float_data", 2),
    onnx.TensorProto.DOUBLE: ("double_data", 1), onnx.TensorProto.COMPLEX128: ("double_data", 2),
    onnx.TensorProto.INT64: ("int64_data", 1), onnx.TensorProto.UINT32: ("uint64_data", 1),
    onnx.TensorProto.UINT64: ("uint64_data", 1), onnx.TensorProto.STRING: ("string_data", 1),
    **{t: ("int32_data", 1) for t in (
        onnx.TensorProto.INT32, onnx.TensorProto.INT16, onnx.TensorProto.INT8, onnx.TensorProto.UINT16,
        onnx.TensorProto.UINT8, onnx.TensorProto.BOOL, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
        onnx.TensorProto.FLOAT8E4M3FN, onnx.TensorProto.FLOAT8E4M3FNUZ, onnx.TensorProto.FLOAT8E5M2,
        onnx.TensorProto.FLOAT8E5M2FNUZ,
    )},
}  # fmt: skip
_TYPED_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")
_KNOWN_DTYPES = set(onnx.TensorProto.DataType.values())


def is_external(tensor: onnx.TensorProto) -> bool:
    return tensor.HasField("data_location") and tensor.data_location == onnx.TensorProto.EXTERNAL


def _product(dims) -> int:
    total = 1
    for d in dims:
        total *= int(d)
    return total


def declared_bytes(tensor: onnx.TensorProto) -> int | None:
    """Bytes the tensor's shape and data type call for (None for strings and unknown types).

    Reads only dims and data type: asking protobuf for ``raw_data`` copies the
    whole payload, which on a large model costs a full pass over its weights.
    """
    bits = _BITS.get(tensor.data_type)
    return None if bits is None else (_product(tensor.dims) * bits + 7) // 8


def inline_bytes(tensor: onnx.TensorProto) -> int:
    """Payload bytes held in the protobuf itself (0 for external data), without decoding values."""
    if is_external(tensor):
        return 0
    if tensor.HasField("raw_data"):
        return len(tensor.raw_data)
    if tensor.data_type == onnx.TensorProto.STRING:
        return sum(len(s) for s in tensor.string_data)
    width = {"float_data": 4, "int32_data": 4, "int64_data": 8, "double_data": 8, "uint64_data": 8}
    return sum(len(getattr(tensor, f)) * w for f, w in width.items())


def _text(value: object, what: str | Callable[[], str]) -> str:
    """Protobuf hands back bytes for a string field that is not valid UTF-8; refuse those.

    ``what`` may be a function, so hot loops only build the wording on failure.
    """
    if type(value) is bytes:
        what = what() if callable(what) else what
        raise InvalidModelError(
            f"The model is damaged: {what} is not valid UTF-8 text ({short(value)})",
            "Export the model again",
        )
    return value  # type: ignore[return-value]


def _tensor_label(tensor: onnx.TensorProto, role: str, where: str) -> str:
    return f"{role} {short(tensor.name)} {where}" if tensor.name else f"an unnamed {role} {where}"


def check_tensor(tensor: onnx.TensorProto, role: str, where: str, limits: Limits) -> int:
    """Check one stored tensor's names, type, declared size and payload; return its inline bytes.

    ``role`` ("initializer", "Constant tensor"...) and ``where`` ("in the main
    graph") only word the messages. External data is not checked until loaded.
    """
    _text(tensor.name, lambda: f"the name of a {role} {where}")
    label = _tensor_label(tensor, role, where)
    if tensor.data_type not in _KNOWN_DTYPES or tensor.data_type == onnx.TensorProto.UNDEFINED:
        raise InvalidModelError(
            f"The {label} has an unknown data type ({tensor.data_type})",
            "Export the model again with a standard ONNX data type",
        )
    if any(d < 0 for d in tensor.dims):
        raise InvalidModelError(
            f"The {label} declares a negative dimension {list(tensor.dims)}", "Export the model again"
        )
    count = _product(tensor.dims)
    if count > limits.max_declared_elements:
        raise limits.exceeded(
            "max_declared_elements", f"The {label} declares shape {list(tensor.dims)}, {count:,} values"
        )
    for entry in tensor.external_data:
        _text(entry.key, lambda: f"an external-data key of the {label}")
        _text(entry.value, lambda: f"an external-data entry of the {label}")
    if is_external(tensor) or tensor.HasField("segment"):
        return 0
    dtype_name = onnx.TensorProto.DataType.Name(tensor.data_type).lower()
    if tensor.HasField("raw_data"):
        bits = _BITS.get(tensor.data_type)
        held = len(tensor.raw_data)
        if bits is not None and held != (count * bits + 7) // 8:
            raise InvalidModelError(
                f"The {label} declares shape {list(tensor.dims)} ({count:,} {dtype_name} values, "
                f"{(count * bits + 7) // 8:,} bytes) but holds {held:,} bytes",
                "The file is damaged or was written by a broken exporter; export the model again",
            )
        return held
    typed = _TYPED_FIELD.get(tensor.data_type)
    if typed is not None:
        field_name, per_value = typed
        held = len(getattr(tensor, field_name))
        if held != count * per_value:
            raise InvalidModelError(
                f"The {label} declares shape {list(tensor.dims)} ({count:,} {dtype_name} values) "
                f"but holds {held // per_value:,} in {field_name}",
                "The file is damaged or was written by a broken exporter; export the model again",
            )
    return inline_bytes(tensor)


def _attribute_tensors(node: onnx.NodeProto) -> Iterator[tuple[onnx.TensorProto, str]]:
    for attr in node.attribute:
        if attr.HasField("t"):
            yield attr.t, "Constant tensor" if node.op_type == "Constant" else "attribute tensor"
        for t in attr.tensors:
            yield t, "attribute tensor"
        sparse = [attr.sparse_tensor] if attr.HasField("sparse_tensor") else []
        for s in [*sparse, *attr.sparse_tensors]:
            yield s.values, "sparse attribute tensor"
            yield s.indices, "sparse attribute tensor"


def _check_value_info(value: onnx.ValueInfoProto, role: str, where: str, limits: Limits) -> None:
    name = _text(value.name, lambda: f"the name of a graph {role} {where}")
    kind = value.type.WhichOneof("value")
    if kind not in ("tensor_type", "sparse_tensor_type"):
        return
    tensor_type = getattr(value.type, kind)
    if tensor_type.elem_type not in _KNOWN_DTYPES:
        raise InvalidModelError(
            f"The {role} {short(name)} {where} has an unknown data type ({tensor_type.elem_type})",
            "Export the model again with a standard ONNX data type",
        )
    if not tensor_type.HasField("shape"):
        return
    known = 1
    for d in tensor_type.shape.dim:
        if d.HasField("dim_value") and d.dim_value > 0:
            known *= int(d.dim_value)
        elif d.HasField("dim_param"):
            _text(d.dim_param, lambda: f"a dimension name of {role} {short(name)} {where}")
    if known > limits.max_declared_elements:
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tensor_type.shape.dim]
        raise limits.exceeded(
            "max_declared_elements",
            f"The {role} {short(name)} {where} declares shape {dims}, at least {known:,} values",
            "Running the model would need tensors that large; fix the declared shapes, "
            "or raise the limit only for files you trust",
        )


def _check_node_text(node: onnx.NodeProto, n: int, where: str) -> None:
    texts = (node.op_type, node.domain, node.name, *node.input, *node.output, *(a.name for a in node.attribute))
    if not any(type(t) is bytes for t in texts):
        return
    _text(node.op_type, f"the op type of node #{n} {where}")
    _text(node.domain, f"the domain of node #{n} {where}")
    _text(node.name, f"the name of node #{n} {where}")
    for name in [*node.input, *node.output]:
        _text(name, f"an input or output name of {node_label(node, n)} {where}")
    for attr in node.attribute:
        _text(attr.name, f"an attribute name of {node_label(node, n)} {where}")


@dataclass
class ModelStats:
    """What :func:`check_model` counted."""

    nodes: int = 0
    graphs: int = 0
    initializers: int = 0
    depth: int = 0  # levels of subgraphs below the main graph
    inline_tensor_bytes: int = 0
    #: (tensor, role, where) of every tensor whose data lives in an external file
    external_tensors: list[tuple[onnx.TensorProto, str, str]] = field(default_factory=list)


def check_model(model: onnx.ModelProto, limits: Limits | None = None) -> ModelStats:
    """Refuse a model that exceeds a limit, or whose tensors and names are damaged.

    Cheap: lengths and shapes only, no tensor is decoded. Raises
    LimitExceededError (naming the limit and its setting) or InvalidModelError.
    """
    limits = limits or Limits.from_env()
    for text, what in ((model.producer_name, "the producer name"), (model.producer_version, "the producer version"),
                       (model.domain, "the model domain")):  # fmt: skip
        _text(text, what)
    for imp in model.opset_import:
        _text(imp.domain, "an opset domain")
    for prop in model.metadata_props:
        _text(prop.key, "a metadata key")
        _text(prop.value, "a metadata value")
    stats = ModelStats()
    for field_name, count, what in (
        ("max_graph_inputs", len(model.graph.input), "inputs"),
        ("max_graph_outputs", len(model.graph.output), "outputs"),
    ):
        if count > getattr(limits, field_name):
            raise limits.exceeded(
                field_name,
                f"The main graph has {count:,} {what}",
                f"ONNX Runtime's work grows with the square of the number of graph {what}; "
                "raise the limit only for files you trust",
            )
    for info in walk_graphs(model, limits.max_graph_depth, limits):
        graph, where = info.graph, info.where
        stats.graphs += 1
        if isinstance(graph, onnx.GraphProto):
            stats.initializers += len(graph.initializer) + len(graph.sparse_initializer)
            if stats.initializers > limits.max_initializers:
                raise limits.exceeded(
                    "max_initializers",
                    f"The model has at least {stats.initializers:,} initializers",
                    "ONNX Runtime's session start grows with the square of the number of unused initializers; "
                    "raise the limit only for files you trust",
                )
        stats.depth = max(stats.depth, info.depth - 1)
        stats.nodes += len(graph.node)
        if stats.nodes > limits.max_nodes:
            raise limits.exceeded("max_nodes", f"The model has at least {stats.nodes:,} nodes")
        _text(graph.name, f"a graph name {where}")
        tensors: list[tuple[onnx.TensorProto, str]] = []
        if isinstance(graph, onnx.GraphProto):
            for role, values in (("input", graph.input), ("output", graph.output), ("value_info", graph.value_info)):
                for value in values:
                    _check_value_info(value, role, where, limits)
            tensors.extend((t, "initializer") for t in graph.initializer)
            for sparse in graph.sparse_initializer:
                if _product(sparse.dims) > limits.max_declared_elements:
                    raise limits.exceeded(
                        "max_declared_elements",
                        f"The sparse initializer {short(sparse.values.name)} {where} declares shape "
                        f"{list(sparse.dims)}, {_product(sparse.dims):,} values",
                    )
                tensors.extend(((sparse.values, "sparse initializer"), (sparse.indices, "sparse initializer")))
        else:
            for name in [*graph.input, *graph.output]:
                _text(name, f"an input or output name {where}")
        for n, node in enumerate(graph.node):
            _check_node_text(node, n, where)
            tensors.extend(_attribute_tensors(node))
        for tensor, role in tensors:
            stats.inline_tensor_bytes += check_tensor(tensor, role, where, limits)
            if is_external(tensor):
                stats.external_tensors.append((tensor, role, where))
        if stats.inline_tensor_bytes > limits.max_tensor_bytes:
            raise limits.exceeded(
                "max_tensor_bytes", f"The model's tensors hold more than {stats.inline_tensor_bytes:,} bytes"
            )
    if model.functions:
        _check_inlined(model, limits)
    return stats


# --------------------------------------------------------------------------- model-local functions

#: Counts saturate here: a chain of functions that each call the next twice doubles per level.
_SATURATE = 10**15


def _function_key(domain: str, name: str, overload: str = "") -> tuple[str, str, str]:
    return (domain, name, overload)


def _calls_in(nodes, functions: Mapping[tuple[str, str, str], onnx.FunctionProto]):
    """Every node of ``nodes`` and of their subgraphs, as (node, the local function it calls or None)."""
    pending = [nodes]
    while pending:
        for node in pending.pop():
            key = _function_key(node.domain, node.op_type, getattr(node, "overload", ""))
            yield node, (key if key in functions else None)
            for _, sub in _subgraph_attrs(node):
                pending.append(sub.node)


def inlined_size(model: onnx.ModelProto) -> tuple[int, int]:
    """(nodes, calls of model-local functions) of the main graph once every call is inlined, recursively.

    ONNX Runtime inlines every call of a model-local function when it opens the model, so a chain of
    functions that each call the next twice turns 2K stored nodes into 2**K. Counted without
    expanding anything (each function once, iteratively; counts saturate at 10**15). A function
    that calls itself, directly or not, is refused with InvalidModelError.
    """
    functions = {_function_key(f.domain, f.name, getattr(f, "overload", "")): f for f in model.functions}
    done: dict[tuple[str, str, str], tuple[int, int]] = {}
    visiting: set[tuple[str, str, str]] = set()

    def size_of(nodes) -> tuple[int, int, list[tuple[str, str, str]]]:
        """(nodes, calls, local functions not counted yet) of a body whose callees are done."""
        total_nodes = total_calls = 0
        missing = []
        for _, callee in _calls_in(nodes, functions):
            if callee is None:
                total_nodes += 1
            elif callee not in done:
                missing.append(callee)
            else:
                n, c = done[callee]
                total_nodes = min(total_nodes + n, _SATURATE)
                total_calls = min(total_calls + c + 1, _SATURATE)
        return total_nodes, total_calls, missing

    for root in functions:
        stack = [root]
        while stack:
            key = stack[-1]
            if key in done:
                stack.pop()
                continue
            visiting.add(key)
            nodes, calls, missing = size_of(functions[key].node)
            for callee in missing:
                if callee in visiting:
                    raise InvalidModelError(
                        f"The model's function {short('::'.join(callee[:2]))} calls itself"
                        + ("" if callee == key else f" (through {short('::'.join(key[:2]))})"),
                        "ONNX functions cannot be recursive; export the model again",
                    )
            if missing:
                stack.extend(dict.fromkeys(missing))  # each body is read at most twice
                continue
            done[key] = (nodes, calls)
            visiting.discard(key)
            stack.pop()
    nodes, calls, _ = size_of(model.graph.node)
    return nodes, calls


def _check_inlined(model: onnx.ModelProto, limits: Limits) -> None:
    nodes, calls = inlined_size(model)
    if calls > limits.max_function_calls:
        raise limits.exceeded(
            "max_function_calls",
            f"The model's {len(model.functions):,} local functions call each other {calls:,} times once inlined "
            f"({nodes:,} nodes)",
            "ONNX Runtime inlines every call when it opens a model, and nested calls make that slow; "
            "raise the limit only for files you trust",
        )
    if nodes > limits.max_nodes:
        raise limits.exceeded("max_nodes", f"The model has {nodes:,} nodes once its local functions are inlined")


# --------------------------------------------------------------------------- graph structure


@dataclass
class _Wiring:
    """One graph's names as plain Python lists (protobuf field access is slow; read each once)."""

    info: GraphInfo
    inputs: list[str]
    initializers: list[str]
    outputs: list[str]  # graph outputs
    node_inputs: list[list[str]]
    node_outputs: list[list[str]]

    @classmethod
    def of(cls, info: GraphInfo) -> _Wiring:
        graph = info.graph
        return cls(
            info,
            [v.name for v in graph.input],
            [t.name for t in graph.initializer] + [s.values.name for s in graph.sparse_initializer],
            [v.name for v in graph.output],
            [list(n.input) for n in graph.node],
            [list(n.output) for n in graph.node],
        )

    def label(self, n: int) -> str:
        return node_label(self.info.graph.node[n], n)


def _check_duplicates(w: _Wiring) -> None:
    where = w.info.where
    inputs = Counter(w.inputs)
    for name, count in inputs.items():
        if count > 1:
            raise InvalidModelError(
                f"Graph input {short(name)} {where} is declared {count} times",
                "Every tensor name must be defined once; export the model again",
            )
    initializers = Counter(w.initializers)
    for name, count in initializers.items():
        if count > 1:
            raise InvalidModelError(
                f"Initializer {short(name)} {where} is defined {count} times",
                "Every tensor name must be defined once; export the model again",
            )
    producers: dict[str, str | int] = {name: "a graph input" for name in inputs}
    producers.update({name: "an initializer" for name in initializers if name not in inputs})
    for n, outs in enumerate(w.node_outputs):
        for out in outs:
            if not out:
                continue
            first = producers.setdefault(out, n)
            if first != n or outs.count(out) > 1:
                first_label = w.label(first) if isinstance(first, int) else first
                raise InvalidModelError(
                    f"Tensor {short(out)} {where} is produced twice: by {first_label} and by {w.label(n)}",
                    "Every tensor name must be produced once (ONNX graphs are in SSA form); export the model again",
                )


def _find_cycle(w: _Wiring, deps: list[set[str]]) -> list[tuple[int, str]] | None:
    """A cycle among the nodes as [(node index, tensor it passes on)], or None."""
    producer = {out: n for n, outs in enumerate(w.node_outputs) for out in outs if out}
    # Most graphs are stored in topological order: then there is no cycle, and no need to look further.
    if all(producer.get(name, -1) < n for n, d in enumerate(deps) for name in d):
        return None
    preds: list[set[int]] = [{producer[name] for name in d if name in producer} for d in deps]
    succs: dict[int, list[int]] = defaultdict(list)
    indegree = [len(p) for p in preds]
    for n, p in enumerate(preds):
        for m in p:
            succs[m].append(n)
    ready = deque(n for n, d in enumerate(indegree) if d == 0)
    done = 0
    while ready:
        n = ready.popleft()
        done += 1
        for m in succs[n]:
            indegree[m] -= 1
            if indegree[m] == 0:
                ready.append(m)
    if done == len(deps):
        return None  # acyclic, only stored out of order (onnx.checker will say so)
    # Walk backwards through unfinished nodes until one repeats: that stretch is a cycle.
    stuck = {n for n, d in enumerate(indegree) if d > 0}
    seen: dict[int, int] = {}
    path: list[int] = []
    n = min(stuck)
    while n not in seen:
        seen[n] = len(path)
        path.append(n)
        n = min(m for m in preds[n] if m in stuck)
    cycle = list(reversed(path[seen[n] :]))  # producers before consumers
    first = cycle.index(min(cycle))
    cycle = cycle[first:] + cycle[:first]  # start at the earliest node, for a stable message
    result = []
    for k, m in enumerate(cycle):
        nxt = cycle[(k + 1) % len(cycle)]
        passed = sorted(o for o in w.node_outputs[m] if o and o in deps[nxt])
        result.append((m, passed[0] if passed else ""))
    return result


def check_graph_structure(model: onnx.ModelProto) -> None:
    """Refuse cycles, names nothing produces, and names produced twice, naming node and tensor.

    Subgraphs may read names of the graphs around them. Iterative, so any
    nesting depth is safe. Raises InvalidModelError.
    """
    infos = walk_graphs(model, include_functions=False)
    wirings = [_Wiring.of(info) for info in infos]
    for w in wirings:
        _check_duplicates(w)
    # Free names of each graph (read but not defined inside it or its subgraphs), innermost first.
    free: list[set[str]] = [set() for _ in infos]
    node_deps: list[list[set[str]]] = [[] for _ in infos]
    for k in range(len(infos) - 1, -1, -1):
        w = wirings[k]
        deps = [set(ins) for ins in w.node_inputs]
        for node_index, child in infos[k].children:
            deps[node_index] |= free[child]
        for d in deps:
            d.discard("")
        node_deps[k] = deps
        used = set().union(*deps) if deps else set()
        used.update(name for name in w.outputs if name)
        defined = set(w.inputs).union(w.initializers, *w.node_outputs)
        free[k] = used - defined
    if free and free[0]:
        missing = free[0]
        for w in wirings:
            for n, ins in enumerate(w.node_inputs):
                for name in ins:
                    if name in missing:
                        raise InvalidModelError(
                            f"{_capital(w.label(n))} {w.info.where} reads {short(name)}, "
                            "which no node, graph input or initializer provides",
                            "The graph is broken (a dangling name); export the model again",
                        )
            for name in w.outputs:
                if name in missing:
                    raise InvalidModelError(
                        f"Graph output {short(name)} {w.info.where} is not produced by any node, "
                        "graph input or initializer",
                        "The graph is broken (a dangling name); export the model again",
                    )
    for k, w in enumerate(wirings):
        cycle = _find_cycle(w, node_deps[k])
        if cycle:
            labels = [w.label(n) for n, _ in cycle]
            labels.append(labels[0])
            steps = [f"{labels[0]} feeds {short(cycle[0][1])} to {labels[1]}"]
            steps += [f"which feeds {short(t)} to {labels[j + 1]}" for j, (_, t) in enumerate(cycle) if j > 0]
            graph_name = f"The graph in {w.info.scope}" if w.info.scope else "The main graph"
            raise InvalidModelError(
                f"{graph_name} has a cycle: " + ", ".join(steps),
                "ONNX graphs must be acyclic (a node cannot depend on its own output); export the model again",
            )


def planned_memory(model_bytes: int, variants: int = 1, streamed: bool = False) -> int:
    """Peak memory of shrinking and measuring ``variants`` variants of a model in memory (measured factors), or
    (``streamed``) of a comparison that measures a model in its own external data files with methods that all
    convert it tensor by tensor (:data:`STREAMED_MEMORY_FACTOR`, whatever the number of variants)."""
    if streamed:
        return model_bytes * STREAMED_MEMORY_FACTOR
    return model_bytes * (SHRINK_MEMORY_FACTOR + VARIANT_MEMORY_FACTOR * max(variants - 1, 0))


def check_memory(tensor_bytes: int, variants: int, limits: Limits | None = None, streamed: bool = False) -> None:
    """Refuse work whose planned peak memory exceeds ``max_memory_bytes``, before any is done.

    The plan is an estimate from measurement (:data:`SHRINK_MEMORY_FACTOR` for the
    first variant, :data:`VARIANT_MEMORY_FACTOR` for each further one; :data:`STREAMED_MEMORY_FACTOR` when
    ``streamed``), so a model too large for this server gets a clear message instead of an out-of-memory kill.
    """
    limits = limits if limits is not None else Limits.from_env()
    planned = planned_memory(tensor_bytes, variants, streamed)
    if planned > limits.max_memory_bytes:
        raise limits.exceeded(
            "max_memory_bytes",
            f"Shrinking and measuring {variants} variant(s) of a model with {format_bytes(tensor_bytes)} of tensors "
            f"needs about {format_bytes(planned)} of memory",
            "Compare fewer methods at a time, use the command line on a larger machine, or raise the limit",
        )


def tensor_nbytes(tensor: onnx.TensorProto) -> int:
    """Bytes of the tensor's values (not of its protobuf framing).

    Fixed-width types count what the shape declares (loading checked that a
    raw tensor holds exactly that): reading ``raw_data`` would copy it.
    """
    if tensor.data_type == onnx.TensorProto.STRING:
        return sum(len(s) for s in tensor.string_data)
    declared = declared_bytes(tensor)
    if declared is not None:
        return declared
    return len(tensor.raw_data) if tensor.HasField("raw_data") else 4 * math.prod(tensor.dims)


#: Set to "1" in the environment of a capped worker process (runs/sandbox.py): its time cap is real there.
WORKER_ENV = "SHRINKRAY_WORKER"
#: ``time.monotonic()`` when that worker's clock started (runs/sandbox.py): its time cap counts from there, not
#: from when the engine inside it got going (measure/budget.py plans the work to fit what is left).
JOB_STARTED_ENV = "SHRINKRAY_JOB_STARTED"

"""Build the corpus of broken and hostile uploads, each with the error it must produce.

Everything is generated from code into a temporary folder, so no binary is
committed. :func:`build_corpus` returns a list of :class:`Case`; each names
the upload, its bytes or path, the exact ShrinkRayError subclass it must
raise and a fragment of the message. ``stage`` says where the error shows:

* ``load``: ``shrinkray.io.files.load`` (kind ``onnx``) or ``shrinkray.io.archive.load_zip`` (kind ``zip``);
* ``validate``: loading and inspecting work, ``shrinkray.graph.validate.validate`` refuses
  (ONNX Runtime or onnx.checker must judge these);
* ``ok``: loading and inspecting work and the summary says what is special
  (``expect`` holds what to check), shrinking gives a clear error or a note.

Run ``python tests/hostile/build_corpus.py OUT_DIR`` to write the files (with
a ``cases.txt`` index) for trying them in the app by hand.
"""

from __future__ import annotations

import bz2
import functools
import io
import lzma
import struct
import sys
import warnings
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from shrinkray.errors import (
    InvalidModelError,
    LimitExceededError,
    ModelLoadError,
    RuntimeUnsupportedError,
    SeveralModels,
    ShrinkRayError,
    UnsafeModelError,
)
from shrinkray.io.limits import Limits

F = TensorProto.FLOAT
#: What the secret file beside an upload holds; it must never show up anywhere.
SECRET = b"SECRET-7c1e-do-not-leak-" * 8


@dataclass
class Case:
    name: str
    source: bytes | Path
    error: type[ShrinkRayError] | None  # None for stage "ok"
    fragment: str
    stage: str = "load"  # "load", "validate" or "ok"
    kind: str = "onnx"  # "onnx" (io.load) or "zip" (archive.load_zip)
    limits: Limits | None = None  # None: the defaults
    expect: dict[str, Any] = field(default_factory=dict)  # for stage "ok"

    def __iter__(self):
        """Unpacks as (name, bytes-or-path, expected exception class, expected message fragment)."""
        return iter((self.name, self.source, self.error, self.fragment))


# --------------------------------------------------------------------------- models


def _model(nodes, inputs, outputs, initializers=(), *, opset: int = 17, extra_opsets=(), ir_version: int = 10):
    graph = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), list(initializers))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    return helper.make_model(graph, opset_imports=opsets, ir_version=ir_version, producer_name="hostile-corpus")


def small_mlp() -> onnx.ModelProto:
    """A valid two-layer MLP with weights large enough for every method (128x160 = 20480 values)."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array((rng.standard_normal((32, 128)) * 0.1).astype(np.float32), "w1")
    w2 = numpy_helper.from_array((rng.standard_normal((128, 160)) * 0.1).astype(np.float32), "w2")
    return _model(
        [
            helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
            helper.make_node("Relu", ["h"], ["r"], name="relu"),
            helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2"),
        ],
        [helper.make_tensor_value_info("x", F, ["batch", 32])],
        [helper.make_tensor_value_info("y", F, ["batch", 160])],
        [w1, w2],
    )


def relu(opset: int = 17) -> onnx.ModelProto:
    return _model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [helper.make_tensor_value_info("x", F, [2])],
        [helper.make_tensor_value_info("y", F, [2])],
        opset=opset,
    )


def quantized_model() -> onnx.ModelProto:
    """MatMulInteger on uint8 weights, then a float MatMul large enough to quantize."""
    rng = np.random.default_rng(1)
    wq = numpy_helper.from_array(rng.integers(0, 255, (16, 32)).astype(np.uint8), "wq")
    zp = numpy_helper.from_array(np.array(128, np.uint8), "wq_zero")
    scale = numpy_helper.from_array(np.array(0.01, np.float32), "scale")
    w2 = numpy_helper.from_array((rng.standard_normal((32, 640)) * 0.1).astype(np.float32), "w2")
    return _model(
        [
            helper.make_node("MatMulInteger", ["xq", "wq", "", "wq_zero"], ["acc"], name="mmi"),
            helper.make_node("Cast", ["acc"], ["accf"], name="cast", to=F),
            helper.make_node("Mul", ["accf", "scale"], ["h"], name="dequant"),
            helper.make_node("MatMul", ["h", "w2"], ["y"], name="mm2"),
        ],
        [helper.make_tensor_value_info("xq", TensorProto.UINT8, [1, 16])],
        [helper.make_tensor_value_info("y", F, [1, 640])],
        [wq, zp, scale, w2],
    )


def custom_op_model() -> onnx.ModelProto:
    w = numpy_helper.from_array(np.ones((128, 160), np.float32) * 0.5, "w")
    return _model(
        [
            helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
            helper.make_node("FancyActivation", ["h"], ["y"], name="fancy", domain="com.example.private"),
        ],
        [helper.make_tensor_value_info("x", F, [1, 128])],
        [helper.make_tensor_value_info("y", F, [1, 160])],
        [w],
        extra_opsets=(("com.example.private", 1),),
    )


def cycle_model() -> onnx.ModelProto:
    return _model(
        [
            helper.make_node("Add", ["x", "b"], ["a"], name="first"),
            helper.make_node("Relu", ["a"], ["b"], name="second"),
        ],
        [helper.make_tensor_value_info("x", F, [2])],
        [helper.make_tensor_value_info("b", F, [2])],
    )


def dangling_model() -> onnx.ModelProto:
    return _model(
        [helper.make_node("Add", ["x", "ghost"], ["y"], name="adder")],
        [helper.make_tensor_value_info("x", F, [2])],
        [helper.make_tensor_value_info("y", F, [2])],
    )


def wrong_dtype_model() -> onnx.ModelProto:
    return _model(
        [helper.make_node("Add", ["x", "n"], ["y"], name="mixed_add")],
        [helper.make_tensor_value_info("x", F, [2]), helper.make_tensor_value_info("n", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", F, [2])],
    )


def duplicate_output_model() -> onnx.ModelProto:
    return _model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu"), helper.make_node("Neg", ["x"], ["y"], name="neg")],
        [helper.make_tensor_value_info("x", F, [2])],
        [helper.make_tensor_value_info("y", F, [2])],
    )


def huge_declared_input() -> onnx.ModelProto:
    return _model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [helper.make_tensor_value_info("x", F, [10**6, 10**6])],
        [helper.make_tensor_value_info("y", F, [10**6, 10**6])],
    )


def huge_declared_initializer() -> onnx.ModelProto:
    model = relu()
    big = TensorProto(name="big", data_type=F, dims=[10**6, 10**6], raw_data=b"\0\0\0\0")
    model.graph.initializer.append(big)
    return model


def many_nodes(count: int = 50) -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", [f"t{k}"], [f"t{k + 1}"], name=f"r{k}") for k in range(count)]
    return _model(
        nodes,
        [helper.make_tensor_value_info("t0", F, [2])],
        [helper.make_tensor_value_info(f"t{count}", F, [2])],
    )


def mismatched_payload() -> onnx.ModelProto:
    model = relu()
    model.graph.initializer.append(TensorProto(name="w", data_type=F, dims=[4, 4], raw_data=b"\0" * 12))
    return model


def unknown_dtype() -> onnx.ModelProto:
    model = relu()
    model.graph.initializer.append(TensorProto(name="w", data_type=999, dims=[2], raw_data=b"\0" * 8))
    return model


# --------------------------------------------------------------------------- raw protobuf


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def nested_if_bytes(depth: int) -> bytes:
    """A model whose main graph holds If inside If ... ``depth`` levels of subgraphs below it.

    Built as raw protobuf bytes: the Python protobuf runtime itself refuses to
    build messages nested this deeply.
    """

    def leaf(k: int) -> bytes:
        return helper.make_graph(
            [helper.make_node("Identity", ["x"], [f"leaf{k}"])], f"leaf{k}", [],
            [helper.make_tensor_value_info(f"leaf{k}", F, [2])],
        ).SerializeToString()  # fmt: skip

    def if_node(k: int, then_graph: bytes) -> bytes:
        shell = helper.make_node("If", ["c"], [f"y{k}"], name=f"if{k}", else_branch=onnx.GraphProto())
        shell.attribute[0].CopyFrom(helper.make_attribute("else_branch", onnx.GraphProto.FromString(leaf(k))))
        then_attr = _field(1, b"then_branch") + _field(6, then_graph) + _varint(20 << 3) + _varint(5)
        return shell.SerializeToString() + _field(5, then_attr)

    graph = leaf(0)
    for k in range(1, depth):
        shell = helper.make_graph([], f"g{k}", [], [helper.make_tensor_value_info(f"y{k}", F, [2])])
        graph = shell.SerializeToString() + _field(1, if_node(k, graph))
    main = helper.make_graph(
        [], "main",
        [helper.make_tensor_value_info("x", F, [2]), helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info(f"y{depth}", F, [2])],
    )  # fmt: skip
    main_bytes = main.SerializeToString() + _field(1, if_node(depth, graph))
    shell = onnx.ModelProto(ir_version=10, producer_name="hostile-corpus")
    shell.opset_import.add().version = 17
    return shell.SerializeToString() + _field(7, main_bytes)


# --------------------------------------------------------------------------- files on disk


def with_external_data(model: onnx.ModelProto, folder: Path, location: str = "weights.bin") -> Path:
    """Save model.onnx + weights.bin in folder, then point every external tensor at ``location``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=1024)  # fmt: skip
    if location != "weights.bin":
        stored = onnx.load(str(path), load_external_data=False)
        for tensor in stored.graph.initializer:
            for entry in tensor.external_data:
                if entry.key == "location":
                    entry.value = location
        path.write_bytes(stored.SerializeToString())
    return path


def external_model_bytes(location: str = "weights.bin") -> tuple[bytes, bytes]:
    """(model.onnx bytes, weights.bin bytes) of small_mlp saved with external data at ``location``."""
    model = small_mlp()
    data = bytearray()
    for tensor in model.graph.initializer:
        raw = tensor.raw_data
        offset = len(data)
        data += raw
        tensor.ClearField("raw_data")
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", str(offset)), ("length", str(len(raw)))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
    return model.SerializeToString(), bytes(data)


def make_zip(members: list[tuple[str | zipfile.ZipInfo, bytes]], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w", compression) as zf:
        warnings.simplefilter("ignore")  # duplicate names are the point of one case
        for name, data in members:
            info = name if isinstance(name, zipfile.ZipInfo) else zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = compression
            zf.writestr(info, data)
    return buf.getvalue()


def symlink_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
    info.create_system = 3  # Unix
    info.external_attr = 0o120777 << 16  # S_IFLNK | 0777
    return info


def _patch_zip(data: bytes, local_offset: int, central_offset: int, fmt: str, value: int) -> bytes:
    """Overwrite one field in every local header and central-directory entry."""
    out = bytearray(data)
    for signature, offset in ((b"PK\x03\x04", local_offset), (b"PK\x01\x02", central_offset)):
        start = 0
        while (at := out.find(signature, start)) >= 0:
            struct.pack_into(fmt, out, at + offset, value)
            start = at + 4
    return bytes(out)


# --------------------------------------------------------------------------- bombs

#: Zero bytes in one bzip2 block (its run-length stage packs 255 zeros into 5 bytes; a 900k block
#: holds ~45.9 MB of zeros).
BZIP2_BLOCK_ZEROS = 45_000_000
_BZIP2_END = 0x177245385090


@functools.lru_cache(maxsize=4)
def bzip2_zeros(blocks: int) -> bytes:
    """One bzip2 stream of ``blocks`` identical blocks, each ``BZIP2_BLOCK_ZEROS`` zero bytes.

    Compressing 16 GiB of zeros takes minutes; instead one block is compressed
    and repeated at the bit level (bzip2 blocks are not byte-aligned), with the
    stream's combined CRC recomputed: 382 blocks = 16 GiB in ~12 KB, in 0.4 s.
    """
    one = bz2.compress(b"\0" * BZIP2_BLOCK_ZEROS, 9)
    value, total = int.from_bytes(one, "big"), len(one) * 8
    for pad in range(8):  # the stream ends with the end marker, the CRC and 0-7 bits of padding
        end = total - pad
        if (value >> (total - end + 32)) & ((1 << 48) - 1) == _BZIP2_END:
            break
    else:
        raise AssertionError("bzip2 end-of-stream marker not found")
    block_crc = (value >> (total - end)) & 0xFFFFFFFF
    block_bits = end - 80 - 32  # after the 'BZh9' header, before the end marker and CRC
    block = (value >> (total - 32 - block_bits)) & ((1 << block_bits) - 1)
    stream, bits, combined = int.from_bytes(b"BZh9", "big"), 32, 0
    for _ in range(blocks):
        stream = (stream << block_bits) | block
        bits += block_bits
        combined = (((combined << 1) | (combined >> 31)) & 0xFFFFFFFF) ^ block_crc
    stream = (((stream << 48) | _BZIP2_END) << 32) | combined
    bits += 80
    stream <<= -bits % 8
    return stream.to_bytes((bits + 7) // 8, "big")


@functools.lru_cache(maxsize=4)
def lzma_zeros(mib: int) -> bytes:
    """A zip LZMA member's data (version, properties, raw LZMA1 stream) that inflates to ``mib`` MiB of zeros."""
    filters = {"id": lzma.FILTER_LZMA1, "preset": 0, "mode": lzma.MODE_FAST, "mf": lzma.MF_HC3, "nice_len": 273,
               "dict_size": 1 << 26}  # fmt: skip
    compressor = lzma.LZMACompressor(lzma.FORMAT_RAW, filters=[filters])
    chunk = b"\0" * (1 << 20)
    body = b"".join(compressor.compress(chunk) for _ in range(mib)) + compressor.flush()
    props = lzma._encode_filter_properties(filters)
    return struct.pack("<BBH", 9, 4, len(props)) + props + body


def raw_zip(members: list[tuple[str, int, bytes, int]], *, declared_count: int | None = None,
            extra_entries: int = 0) -> bytes:  # fmt: skip
    """A zip written by hand: (name, compression method, compressed data, declared unpacked size) per member.

    The CRC-32 is that of the declared size's zeros. ``extra_entries`` more
    central-directory entries (all pointing at the first member) follow, and
    the end record declares ``declared_count`` entries (default: the truth).
    """
    out, central = bytearray(), bytearray()
    for name, method, data, size in members:
        raw_name = name.encode()
        crc = zlib.crc32(b"\0" * size) if size < (1 << 24) else 0
        version = {zipfile.ZIP_BZIP2: 46, zipfile.ZIP_LZMA: 63}.get(method, 20)
        offset = len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, version, 0, method, 0, 0x21, crc, len(data), size,
                           len(raw_name), 0) + raw_name + data  # fmt: skip
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, version, version, 0, method, 0, 0x21, crc,
                               len(data), size, len(raw_name), 0, 0, 0, 0, 0, offset) + raw_name  # fmt: skip
    entry = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0x21, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0) + b"x"
    central += entry * extra_entries
    count = len(members) + extra_entries if declared_count is None else declared_count
    start = len(out)
    out += central
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, min(count, 0xFFFF), min(count, 0xFFFF), len(central), start, 0)
    return bytes(out)


def function_bomb(levels: int = 16) -> onnx.ModelProto:
    """Model-local functions f0..fK, each calling the one below twice: 2K+1 nodes stored, 2**K once inlined."""
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("bomb", 1)]
    functions = [helper.make_function("bomb", "f0", ["x"], ["y"], [helper.make_node("Relu", ["x"], ["y"])], opsets)]
    for k in range(1, levels + 1):
        body = [helper.make_node(f"f{k - 1}", ["x"], ["t"], domain="bomb"),
                helper.make_node(f"f{k - 1}", ["t"], ["y"], domain="bomb")]  # fmt: skip
        functions.append(helper.make_function("bomb", f"f{k}", ["x"], ["y"], body, opsets))
    model = small_mlp()
    model.graph.node[-1].output[0] = "z"
    model.graph.node.append(helper.make_node(f"f{levels}", ["z"], ["y"], name="bomb", domain="bomb"))
    model.functions.extend(functions)
    model.opset_import.append(helper.make_opsetid("bomb", 1))
    return model


def recursive_function() -> onnx.ModelProto:
    """A model-local function that calls itself through another one."""
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("loop", 1)]
    ping = helper.make_function("loop", "ping", ["x"], ["y"], [helper.make_node("pong", ["x"], ["y"], domain="loop")],
                                opsets)  # fmt: skip
    pong = helper.make_function("loop", "pong", ["x"], ["y"], [helper.make_node("ping", ["x"], ["y"], domain="loop")],
                                opsets)  # fmt: skip
    model = relu()
    model.graph.node[0].CopyFrom(helper.make_node("ping", ["x"], ["y"], name="call", domain="loop"))
    model.functions.extend([ping, pong])
    model.opset_import.append(helper.make_opsetid("loop", 1))
    return model


@functools.lru_cache(maxsize=4)
def many_graph_values(inputs: int = 0, outputs: int = 0, initializers: int = 0) -> bytes:
    """small_mlp plus unused graph inputs, Identity-fed outputs or unused initializers, as protobuf bytes.

    The inputs are appended as raw protobuf fields (a repeated ``graph`` field
    merges into the first), so 300,000 of them take a fraction of a second.
    """
    model = small_mlp()
    extra = onnx.GraphProto()
    value_type = helper.make_tensor_value_info("u", F, [1])
    value_type.ClearField("name")
    rest = value_type.SerializeToString()
    unused = b"".join(_field(11, _field(1, f"u{k}".encode()) + rest) for k in range(inputs))
    for k in range(outputs):
        extra.node.add().CopyFrom(helper.make_node("Identity", ["y"], [f"o{k}"]))
        extra.output.add().CopyFrom(helper.make_tensor_value_info(f"o{k}", F, ["batch", 160]))
    for k in range(initializers):
        extra.initializer.add().CopyFrom(TensorProto(name=f"i{k}", data_type=F, dims=[1], raw_data=b"\0\0\0\0"))
    model.graph.MergeFrom(extra)
    return model.SerializeToString() + (_field(7, unused) if unused else b"")


# --------------------------------------------------------------------------- injection through names

#: Text an attacker puts in names and producer strings, one per renderer that could act on it.
INJECTIONS = {
    "markdown_image": "![beacon](https://evil.example/t.png)",
    "markdown_link": "[CLICK-TO-FIX](https://evil.example/fix)",
    "html": '<script>alert(1)</script><img src="https://evil.example/i.png">',
    "plotly": '<a href="https://evil.example">link</a><span style="font-size:60px;color:red">BIG</span>',
    "formula": '=HYPERLINK("https://evil.example","CLICK-TO-FIX")',
    "terminal": "\x1b]0;pwned\x07\x1b[2J\x1b]8;;https://evil.example\x1b\\here\x1b]8;;\x1b\\",
    "streamlit": ":red[**alarm**] :material/warning: $x^2$ www.evil.example",
}


def injection_model() -> onnx.ModelProto:
    """small_mlp whose input, output, weights, nodes and producer carry every :data:`INJECTIONS` string.

    Valid ONNX that ONNX Runtime runs and every method shrinks: names are data.
    """
    model = small_mlp()
    renames = {"x": INJECTIONS["html"], "y": INJECTIONS["markdown_image"], "w1": INJECTIONS["formula"],
               "w2": INJECTIONS["plotly"], "h": INJECTIONS["streamlit"], "r": INJECTIONS["markdown_link"]}  # fmt: skip
    graph = model.graph
    for value in [*graph.input, *graph.output, *graph.initializer]:
        value.name = renames.get(value.name, value.name)
    for node in graph.node:
        node.input[:] = [renames.get(n, n) for n in node.input]
        node.output[:] = [renames.get(n, n) for n in node.output]
        node.name = INJECTIONS["terminal"] + node.name
    model.producer_name = INJECTIONS["markdown_link"] + INJECTIONS["terminal"]
    model.producer_version = INJECTIONS["streamlit"]
    return model


def lying_size_zip() -> bytes:
    """A member whose headers declare 100 bytes but whose data inflates to 64 KiB."""
    data = make_zip([("model.onnx", b"\0" * 65536)])
    return _patch_zip(data, 22, 24, "<I", 100)


def encrypted_flag_zip() -> bytes:
    """A member flagged as encrypted (general-purpose flag bit 0)."""
    return _patch_zip(make_zip([("model.onnx", relu().SerializeToString())]), 6, 8, "<H", 0x1)


# --------------------------------------------------------------------------- the corpus


def build_corpus(tmp: Path) -> list[Case]:
    """Every broken or hostile case, built below ``tmp`` (which must exist)."""
    tmp = Path(tmp)
    mlp = small_mlp().SerializeToString()
    cases: list[Case] = []
    add = cases.append

    # Not a model at all.
    add(Case("empty", b"", ModelLoadError, "is empty (0 bytes)"))
    add(Case("random-bytes", np.random.default_rng(7).bytes(4096), ModelLoadError, "not a readable ONNX model"))
    for cut in (0.1, 0.5, 0.9):
        add(Case(f"truncated-{int(cut * 100)}%", mlp[: int(len(mlp) * cut)], ModelLoadError,
                 "The upload is not a readable ONNX model (the bytes are not a valid protobuf; it may be truncated"))  # fmt: skip
    add(Case("truncated-last-byte", mlp[:-1], ModelLoadError, "not a readable ONNX model"))
    tensor = numpy_helper.from_array(np.ones((3, 3), np.float32), "t").SerializeToString()
    add(Case("tensorproto-bytes", tensor, ModelLoadError, "The upload is not a readable ONNX model"))
    add(Case("graphproto-bytes", small_mlp().graph.SerializeToString(), ModelLoadError, "it has no graph"))
    no_graph = onnx.ModelProto(ir_version=10, producer_name="x")
    no_graph.opset_import.add().version = 17
    add(
        Case("model-without-graph", no_graph.SerializeToString(), ModelLoadError, "not an ONNX model (it has no graph)")
    )
    no_opset = small_mlp()
    del no_opset.opset_import[:]
    add(Case("model-without-opset", no_opset.SerializeToString(), ModelLoadError, "declares no opset"))

    # Broken graphs.
    add(Case("cycle", cycle_model().SerializeToString(), InvalidModelError,
             "The main graph has a cycle: node 'first' (Add) feeds 'a' to node 'second' (Relu), which feeds 'b' to node 'first'"))  # fmt: skip
    add(Case("dangling-input", dangling_model().SerializeToString(), InvalidModelError,
             "Node 'adder' (Add) in the main graph reads 'ghost', which no node, graph input or initializer provides"))  # fmt: skip
    add(Case("duplicate-output-names", duplicate_output_model().SerializeToString(), InvalidModelError,
             "Tensor 'y' in the main graph is produced twice: by node 'relu' (Relu) and by node 'neg' (Neg)"))  # fmt: skip
    add(Case("payload-shorter-than-shape", mismatched_payload().SerializeToString(), InvalidModelError,
             "declares shape [4, 4] (16 float values, 64 bytes) but holds 12 bytes"))  # fmt: skip
    add(Case("unknown-data-type", unknown_dtype().SerializeToString(), InvalidModelError, "unknown data type (999)"))
    bad_name = small_mlp()
    bad_name.graph.node[0].name = "mm1"
    raw = bad_name.SerializeToString().replace(b"\x1a\x03mm1", b"\x1a\x03m\xffm")
    add(Case("name-not-utf8", raw, InvalidModelError, "is not valid UTF-8 text"))

    # Judged by onnx.checker / ONNX Runtime: inspection still works.
    add(Case("wrong-dtype", wrong_dtype_model().SerializeToString(), RuntimeUnsupportedError,
             "bound to different types (tensor(float) and tensor(int64)", stage="validate"))  # fmt: skip
    newest = onnx.defs.onnx_opset_version()
    add(Case("opset-99", relu(99).SerializeToString(), InvalidModelError,
             f"ai.onnx opset 99, newer than the newest this tool knows ({newest})", stage="validate"))  # fmt: skip
    add(Case("opset-1", relu(1).SerializeToString(), RuntimeUnsupportedError,
             "from ai.onnx opset 1: the opset is older than ONNX Runtime supports (7)", stage="validate"))  # fmt: skip

    # Valid, but special: inspection says so.
    add(Case("already-quantized", quantized_model().SerializeToString(), None, "already quantized", stage="ok",
             expect={"quantized_ops": ["MatMulInteger"], "note": "already quantized (MatMulInteger)"}))  # fmt: skip
    add(Case("nothing-to-shrink", relu().SerializeToString(), None, "nothing was quantized", stage="ok",
             expect={"reach": 0, "note": "so nothing was quantized"}))  # fmt: skip
    add(Case("custom-domain-op", custom_op_model().SerializeToString(), None,
             "cannot run this model here: it uses custom ops com.example.private::FancyActivation", stage="ok",
             expect={"custom_ops": ["com.example.private::FancyActivation"],
                     "error": RuntimeUnsupportedError}))  # fmt: skip

    # Limits (low limits where a realistic case would cost real resources).
    add(Case("declared-dims-1e12-input", huge_declared_input().SerializeToString(), LimitExceededError,
             "declares shape [1000000, 1000000], at least 1,000,000,000,000 values, which exceeds "
             "max_declared_elements=2147483648 (set SHRINKRAY_MAX_DECLARED_ELEMENTS)"))  # fmt: skip
    add(Case("declared-dims-1e12-initializer", huge_declared_initializer().SerializeToString(), LimitExceededError,
             "The initializer 'big' in the main graph declares shape [1000000, 1000000], 1,000,000,000,000 values, "
             "which exceeds max_declared_elements"))  # fmt: skip
    add(Case("nesting-depth-50", nested_if_bytes(50), LimitExceededError,
             "more deeply than the protobuf parser allows"))  # fmt: skip
    add(Case("nesting-depth-20", nested_if_bytes(20), LimitExceededError,
             "Subgraphs are nested at least 17 levels deep (below node 'if20' (If)), which exceeds "
             "max_graph_depth=16 (set SHRINKRAY_MAX_GRAPH_DEPTH)"))  # fmt: skip
    add(Case("too-many-nodes", many_nodes(50).SerializeToString(), LimitExceededError,
             "The model has at least 50 nodes, which exceeds max_nodes=10 (set SHRINKRAY_MAX_NODES)",
             limits=Limits(max_nodes=10)))  # fmt: skip
    add(Case("too-many-tensor-bytes", mlp, LimitExceededError,
             "which exceeds max_tensor_bytes=10000", limits=Limits(max_tensor_bytes=10_000)))  # fmt: skip
    add(Case("file-too-large", mlp, LimitExceededError,
             "above the limit max_file_bytes=1000 (1000 B; set SHRINKRAY_MAX_FILE_BYTES)",
             limits=Limits(max_file_bytes=1000)))  # fmt: skip

    # External data: nothing outside the upload's own folder is read.
    secret = tmp / "secret.txt"
    secret.write_bytes(SECRET)
    add(Case("external-dotdot", with_external_data(small_mlp(), tmp / "dotdot", "../secret.txt"),
             UnsafeModelError, "stores its data in '../secret.txt', outside the model's own folder"))  # fmt: skip
    add(Case("external-absolute", with_external_data(small_mlp(), tmp / "absolute", str(secret)),
             UnsafeModelError, "outside the model's own folder"))  # fmt: skip
    link_dir = tmp / "symlink"
    path = with_external_data(small_mlp(), link_dir, "link.bin")
    (link_dir / "link.bin").symlink_to(secret)
    add(Case("external-symlink-escape", path, UnsafeModelError,
             "stores its data in 'link.bin', outside the model's own folder"))  # fmt: skip
    onnx_bytes, _ = external_model_bytes()
    add(Case("external-data-as-bytes", onnx_bytes, UnsafeModelError,
             "keeps its weights in separate external data files, which were not uploaded"))  # fmt: skip

    # Archives.
    good_onnx, good_data = external_model_bytes()
    add(Case("zip-not-a-zip", b"PK\x03\x04" + np.random.default_rng(3).bytes(2000), ModelLoadError,
             "is not a readable zip archive", kind="zip"))  # fmt: skip
    add(Case("zip-dotdot-member", make_zip([("model.onnx", good_onnx), ("../weights.bin", good_data)]),
             UnsafeModelError, "The archive member '../weights.bin' climbs out of the archive with '..'",
             kind="zip"))  # fmt: skip
    add(Case("zip-absolute-member", make_zip([("model.onnx", good_onnx), ("/tmp/weights.bin", good_data)]),
             UnsafeModelError, "The archive member '/tmp/weights.bin' is an absolute path", kind="zip"))  # fmt: skip
    add(Case("zip-drive-letter", make_zip([("model.onnx", good_onnx), ("C:/weights.bin", good_data)]),
             UnsafeModelError, "names a drive letter", kind="zip"))  # fmt: skip
    add(Case("zip-backslash", make_zip([("model.onnx", good_onnx), ("..\\weights.bin", good_data)]),
             UnsafeModelError, "uses backslashes in its name", kind="zip"))  # fmt: skip
    add(Case("zip-symlink-member", make_zip([("model.onnx", good_onnx), (symlink_info("weights.bin"), b"../secret.txt")]),
             UnsafeModelError, "The archive member 'weights.bin' is a symbolic link", kind="zip"))  # fmt: skip
    add(Case("zip-duplicate-names", make_zip([("model.onnx", good_onnx), ("weights.bin", good_data),
                                              ("weights.bin", b"other")]),
             UnsafeModelError, "'weights.bin' appears twice in the archive", kind="zip"))  # fmt: skip
    add(Case("zip-case-collision", make_zip([("model.onnx", good_onnx), ("weights.bin", good_data),
                                             ("WEIGHTS.bin", b"other")]),
             UnsafeModelError, "differs only in letter case", kind="zip"))  # fmt: skip
    add(Case("zip-file-used-as-folder", make_zip([("model.onnx", good_onnx), ("weights.bin", good_data),
                                                  ("weights.bin/x", b"other")]),
             UnsafeModelError, "is a file, but 'weights.bin/x' uses it as a folder", kind="zip"))  # fmt: skip
    add(Case("zip-encrypted", encrypted_flag_zip(), UnsafeModelError, "is encrypted", kind="zip"))
    add(Case("zip-bomb-ratio", make_zip([("model.onnx", good_onnx), ("weights.bin", b"\0" * (4 << 20))]),
             LimitExceededError, "exceeds max_compression_ratio=100 (set SHRINKRAY_MAX_COMPRESSION_RATIO)",
             kind="zip"))  # fmt: skip
    add(Case("zip-bomb-size", make_zip([("model.onnx", good_onnx), ("weights.bin", b"\0" * (2 << 20))]),
             LimitExceededError, "The archive unpacks to 2,", kind="zip",
             limits=Limits(max_unpacked_bytes=1 << 20, max_compression_ratio=10**6)))  # fmt: skip
    add(Case("zip-lying-size", lying_size_zip(), UnsafeModelError,
             "The archive member 'model.onnx' unpacks to more bytes than its header declares (100)",
             kind="zip"))  # fmt: skip
    add(Case("zip-too-many-files", make_zip([("model.onnx", good_onnx), ("weights.bin", good_data)]
                                            + [(f"junk/{k}.txt", b"x") for k in range(20)]),
             LimitExceededError, "members, which exceeds max_zip_files=10 (set SHRINKRAY_MAX_ZIP_FILES)",
             kind="zip", limits=Limits(max_zip_files=10)))  # fmt: skip
    add(Case("zip-two-models", make_zip([("a.onnx", mlp), ("b.onnx", mlp)]), SeveralModels,
             "The archive holds 2 .onnx files ('a.onnx', 'b.onnx'), so it is not clear which one to load",
             kind="zip"))  # fmt: skip
    add(Case("zip-no-model", make_zip([("weights.bin", good_data)]), ModelLoadError,
             "The archive holds no .onnx file", kind="zip"))  # fmt: skip
    dotdot_onnx, dotdot_data = external_model_bytes("../secret.txt")
    add(Case("zip-external-dotdot", make_zip([("model.onnx", dotdot_onnx), ("weights.bin", dotdot_data)]),
             UnsafeModelError, "stores its data in '../secret.txt', outside the model's own folder",
             kind="zip"))  # fmt: skip
    add(Case("zip-broken-model", make_zip([("model.onnx", mlp[: len(mlp) // 2])]), ModelLoadError,
             "model.onnx is not a readable ONNX model", kind="zip"))  # fmt: skip

    # Bombs: small files that cost memory or time far beyond their size (see BOMBS).
    lied = "The archive member 'model.onnx' unpacks to more bytes than its header declares (1,000). " \
           "The archive is damaged or forged; zip the files again."  # fmt: skip
    add(Case("zip-bomb-bzip2-16gib", raw_zip([("model.onnx", zipfile.ZIP_BZIP2, bzip2_zeros(382), 1000)]),
             UnsafeModelError, lied, kind="zip"))  # fmt: skip
    add(Case("zip-bomb-lzma-128mib", raw_zip([("model.onnx", zipfile.ZIP_LZMA, lzma_zeros(128), 1000)]),
             UnsafeModelError, lied, kind="zip"))  # fmt: skip
    add(Case("zip-bomb-deflate", raw_zip([("model.onnx", zipfile.ZIP_DEFLATED, _deflate_zeros(64), 1000)]),
             UnsafeModelError, lied, kind="zip"))  # fmt: skip
    add(Case("zip-end-record-lies-about-count",
             raw_zip([("model.onnx", zipfile.ZIP_STORED, mlp, len(mlp))], declared_count=1, extra_entries=300_000),
             UnsafeModelError, "The archive's central directory lists more members than its end record declares (1); "
             "nothing was extracted. The archive is damaged or forged; zip the files again.", kind="zip"))  # fmt: skip
    add(Case("function-bomb-16", function_bomb(16).SerializeToString(), LimitExceededError,
             "The model's 17 local functions call each other 131,071 times once inlined (65,539 nodes), which exceeds "
             "max_function_calls=4096 (set SHRINKRAY_MAX_FUNCTION_CALLS)"))  # fmt: skip
    add(Case("recursive-function", recursive_function().SerializeToString(), InvalidModelError,
             "The model's function 'loop::ping' calls itself (through 'loop::pong'). ONNX functions cannot be "
             "recursive; export the model again."))  # fmt: skip
    add(
        Case(
            "graph-inputs-300k",
            many_graph_values(inputs=300_000),
            LimitExceededError,
            "The main graph has 300,001 inputs, which exceeds max_graph_inputs=4096 (set SHRINKRAY_MAX_GRAPH_INPUTS)",
        )
    )
    add(
        Case(
            "graph-outputs-2000",
            many_graph_values(outputs=2000),
            LimitExceededError,
            "The main graph has 2,001 outputs, which exceeds max_graph_outputs=1024 (set SHRINKRAY_MAX_GRAPH_OUTPUTS)",
        )
    )
    add(Case("initializers-25000", many_graph_values(initializers=25_000), LimitExceededError,
             "The model has at least 25,002 initializers, which exceeds max_initializers=20000 "
             "(set SHRINKRAY_MAX_INITIALIZERS)"))  # fmt: skip
    return cases


#: The cases that cost far more than their size without the caps: the tests load each in a fresh
#: interpreter and bound its peak memory and time.
BOMBS = ("zip-bomb-bzip2-16gib", "zip-bomb-lzma-128mib", "zip-bomb-deflate", "zip-end-record-lies-about-count",
         "function-bomb-16", "graph-inputs-300k", "graph-outputs-2000", "initializers-25000")  # fmt: skip


@functools.lru_cache(maxsize=2)
def _deflate_zeros(mib: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    chunk = b"\0" * (1 << 20)
    return b"".join(compressor.compress(chunk) for _ in range(mib)) + compressor.flush()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python tests/hostile/build_corpus.py OUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    index = []
    for case in build_corpus(out):
        if isinstance(case.source, bytes):
            target = out / f"{case.name}.{'zip' if case.kind == 'zip' else 'onnx'}"
            target.write_bytes(case.source)
        else:
            target = case.source
        error = case.error.__name__ if case.error else "(loads)"
        index.append(f"{target.relative_to(out)}\t{case.stage}\t{error}\t{case.fragment}")
    (out / "cases.txt").write_text("\n".join(index) + "\n")
    print(f"wrote {len(index)} cases to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))

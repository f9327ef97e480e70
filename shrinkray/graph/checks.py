"""Checking that a model is valid ONNX, and words for what ONNX Runtime refuses.

ONNX Runtime's error texts are long; :func:`explain_runtime_error` turns the
common ones into one actionable sentence.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import onnx

from shrinkray.errors import InvalidModelError, RuntimeUnsupportedError
from shrinkray.io.files import needs_external_data, save

#: ONNX Runtime 1.31 reads models up to this IR version.
ORT_MAX_IR_VERSION = 13
STANDARD_DOMAINS = {"", "ai.onnx", "ai.onnx.ml", "com.microsoft", "ai.onnx.preview.training"}


def default_opset(model: onnx.ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 0


def check_opsets(model: onnx.ModelProto) -> None:
    """Refuse opsets this onnx build does not know; ONNX Runtime judges old ones when it opens the model."""
    newest = onnx.defs.onnx_opset_version()
    version = default_opset(model)
    if version > newest:
        raise InvalidModelError(
            f"The model uses ai.onnx opset {version}, newer than the newest this tool knows ({newest})",
            f"Export it with opset {newest} or lower",
        )
    if version == 0 and any(n.domain in ("", "ai.onnx") for n in model.graph.node):
        raise InvalidModelError(
            "The model uses standard ONNX ops but does not import the ai.onnx opset",
            "Export it again with a recent exporter",
        )


def check_structure(model: onnx.ModelProto, serialized: bytes | None = None) -> None:
    """Run onnx.checker (through a temporary file for models over 2 GB).

    ``serialized`` is the model's protobuf when the caller already has it, so
    a large model is not serialized once per check.
    """
    check_opsets(model)
    if needs_external_data(model):
        with tempfile.TemporaryDirectory() as tmp:
            check_file(save(model, Path(tmp) / "model.onnx"))
        return
    try:
        onnx.checker.check_model(serialized if serialized is not None else model)
    except onnx.checker.ValidationError as exc:
        raise checker_error(exc) from None


def check_file(path: str | Path) -> None:
    """onnx.checker on a written model file (its external data beside it). The checker parses the file
    itself, so a caller that wrote the file and dropped the model holds neither the model nor its bytes
    beside the checker's copy (compare's shrink steps, issue 12, measured 2026-11-27; docs/benchmarks.md "Speed and memory")."""
    try:
        onnx.checker.check_model(str(path))
    except onnx.checker.ValidationError as exc:
        raise checker_error(exc) from None


def checker_error(exc: onnx.checker.ValidationError) -> InvalidModelError:
    """onnx.checker's complaint as the user's problem: its first line, and what to do."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return InvalidModelError(
        f"The model is not valid ONNX: {first}",
        "Export it again, or fix the graph with onnx.checker's message as a guide",
    )


def custom_ops(model: onnx.ModelProto) -> list[str]:
    """Op types from domains ONNX Runtime does not implement out of the box.

    Looks in the main graph, every nested subgraph and model-local function
    bodies; calls to the model's own functions are not custom ops.
    """
    found: set[str] = set()
    pending = [list(model.graph.node)] + [list(f.node) for f in model.functions]
    while pending:
        for node in pending.pop():
            if node.domain not in STANDARD_DOMAINS:
                found.add(f"{node.domain}::{node.op_type}")
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    pending.append(list(attr.g.node))
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    pending.extend(list(g.node) for g in attr.graphs)
    local = {f"{f.domain}::{f.name}" for f in model.functions}
    return sorted(found - local)


def _first_sentences(line: str, limit: int = 300) -> str:
    """At most ``limit`` characters, cut at a sentence end (never mid-sentence)."""
    if len(line) <= limit:
        return line
    cut = max(line.rfind(". ", 0, limit), line.rfind("; ", 0, limit))
    if cut > 40:
        return line[: cut + 1]
    head = line[: limit - 1]
    words = head.rsplit(" ", 1)[0] if " " in head else head
    return words + " …" if words != head else head + "…"  # after the last whole word, else mid-word


def _node_status(line: str) -> str:
    """A failed node's own words: "Non-zero status code returned while running Reshape node. Name:'' Status
    Message: /onnxruntime_src/.../reshape_helper.h:47 ... was false. The input tensor cannot be reshaped..."
    becomes "Reshape node: The input tensor cannot be reshaped..." (the source path and the failed
    assertion say nothing to a user, and would push the reason past the length limit)."""
    found = re.match(r"Non-zero status code returned while running (\w+) node\..*?Status Message: (.*)", line)
    if not found:
        return line
    message = re.sub(r"^\S+\.(?:h|cc|cpp|cu):\d+ ", "", found.group(2).strip())
    if " was false. " in message:
        message = message.split(" was false. ", 1)[1]
    return f"{found.group(1)} node: {message.strip()}"


def explain_runtime_error(
    exc: Exception, model: onnx.ModelProto | None = None, *, running: bool = False
) -> RuntimeUnsupportedError:
    """Turn an ONNX Runtime exception into a one-line explanation with a hint.

    ``running``: the session opened and a run failed (inputs it does not
    accept, shapes that do not fit), which the message says instead of
    "cannot open".
    """
    text = str(exc)
    ir = re.search(r"Unsupported model IR version: (\d+), max supported IR version: (\d+)", text)
    if ir:
        return RuntimeUnsupportedError(
            f"ONNX Runtime cannot open this model: its IR version {ir.group(1)} is newer "
            f"than the newest it supports ({ir.group(2)})",
            f"Set model.ir_version = {ir.group(2)} (or lower) when exporting",
        )
    customs = custom_ops(model) if model is not None else []
    if customs:
        return RuntimeUnsupportedError(
            "ONNX Runtime cannot run this model here: it uses custom ops " + ", ".join(customs),
            "Inspection and the methods that do not need to run the model still work; "
            "custom-op libraries are never loaded",
        )
    kernel = re.search(r"Could not find an implementation for (\w+)\((\d+)\) node with name '([^']*)'", text)
    opset = default_opset(model) if model is not None else 0
    if kernel and 0 < opset < 7:
        return RuntimeUnsupportedError(
            f"ONNX Runtime cannot run {kernel.group(1)} from ai.onnx opset {opset}: the opset is older "
            "than ONNX Runtime supports (7)",
            "Convert the model with onnx.version_converter.convert_version(model, 13) or export it again",
        )
    if kernel:
        return RuntimeUnsupportedError(
            f"ONNX Runtime has no CPU kernel for {kernel.group(1)} (opset {kernel.group(2)}, "
            f"node '{kernel.group(3)}') with these input types",
            "Change the data types of that node's inputs, or exclude it from the method",
        )
    unknown = re.search(r"Unrecognized attribute|No Op registered for (\w+)", text)
    if unknown:
        return RuntimeUnsupportedError(
            f"ONNX Runtime does not know an op in this model ({unknown.group(0)})",
            "Use standard ONNX ops or a newer opset",
        )
    line = next((ln for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    line = _first_sentences(_node_status(re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", line).strip()))
    if running:
        return RuntimeUnsupportedError(
            f"ONNX Runtime opened the model but could not run it on these inputs: {line}",
            "Check the input sizes and values the model expects",
            setting="inputs",
        )
    return RuntimeUnsupportedError(
        f"ONNX Runtime cannot open this model: {line}",
        "Check that the model runs in ONNX Runtime before shrinking it",
    )

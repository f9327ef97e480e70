"""Applying a method: copy the model, run the method, validate the result."""

from __future__ import annotations

from typing import Any

import onnx

from shrinkray.errors import ShrinkRayError
from shrinkray.graph.validate import validate
from shrinkray.graph.weights import quantized_ops
from shrinkray.io.files import LoadedModel, tensor_payload_bytes
from shrinkray.io.limits import check_memory
from shrinkray.memory import release_free_memory
from shrinkray.methods import Variant, get_method
from shrinkray.methods.base import RunContext


def shrink(
    source: LoadedModel | onnx.ModelProto,
    method: str,
    *,
    in_place: bool = False,
    keep_session: bool = False,
    open_runtime: bool = True,
    check: bool = True,
    context: RunContext | None = None,
    **options: Any,
) -> Variant:
    """Return a validated Variant; the input model is not modified unless ``in_place``.

    ``in_place=True`` lets the method rewrite the given model itself, saving a
    full copy of the weights in memory; the CLI uses it for the model it loaded
    and does not use again. Raises a ShrinkRayError when the options are wrong,
    the method fails, or the result does not pass onnx.checker or open in
    ONNX Runtime. ``keep_session`` validates with the optimized session that
    measuring needs and leaves it in ``variant.session`` (opened once, used for
    parity and culprits); ``open_runtime=False`` runs onnx.checker only, for a caller that opens the
    session itself (compare, from the written file) and reports a failure to open as a failed validation.
    ``check=False`` (with ``open_runtime=False``) skips onnx.checker too: the caller checks the file it
    writes (:func:`shrinkray.graph.validate.check_file`), so the model, its serialized bytes and the checker's
    parsed copy are never held together.
    ``context``: the run's verdict and inputs, for a method that judges or calibrates on them (``MethodSpec.uses_context``; others ignore it); None: the defaults.
    """
    spec = get_method(method)
    opts = spec.make_options(**options)
    original = source.model if isinstance(source, LoadedModel) else source
    check_memory(tensor_payload_bytes(original), variants=1)
    quantized = quantized_ops(original)
    if in_place:
        model = original
    else:
        model = onnx.ModelProto()
        model.CopyFrom(original)
    variant = spec.run(model, opts, context)
    release_free_memory()  # the method's temporaries, before validation serializes the result
    settle(variant.model, variant, quantized)
    if not check and not open_runtime:
        return variant
    try:
        variant.session = validate(variant.model, keep_session=keep_session, open_runtime=open_runtime)
    except ShrinkRayError as exc:
        raise not_kept(spec.name, exc) from None
    return variant


def settle(model: onnx.ModelProto, variant: Variant, quantized: list[str]) -> None:
    """What every shrunk model gets before validation, in memory or streamed: an IR version that allows our
    initializers, and a note when the input was already quantized (``quantized``: its quantized op types)."""
    if 0 < model.ir_version < 4:
        model.ir_version = 4  # IR 3 requires every initializer (ours too) to be a graph input
    if quantized:
        variant.notes.append(
            "This model is already quantized (" + ", ".join(quantized) + "): only its remaining float tensors "
            "can change, and run-time activation quantization makes it sensitive to small weight changes, "
            "so check parity"
        )


def not_kept(method_name: str, exc: ShrinkRayError) -> ShrinkRayError:
    """A result that failed validation, said as such: nothing was written."""
    return type(exc)(
        f"The {method_name} result failed validation, so it was not kept: {exc.problem}",
        "Nothing was written. Try other options or another method, and report the model if it runs "
        "in ONNX Runtime before shrinking",
    )

"""One method over every file of a model set, written in the set's own layout: the one place a set is shrunk.

``compare`` judges what :func:`shrink_set` writes, and ``shrinkray shrink FOLDER`` writes it too, so the files a
user takes away are the ones the verdict is about: a calibrating method (weights-int4's activation-aware
scales) learns in both from the set's held-out text (:func:`set_calibration`), else both shrink data-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shrinkray.errors import ModelLoadError, ShrinkRayError
from shrinkray.io.files import save
from shrinkray.io.model_set import ModelSet
from shrinkray.measure.results import CompareSettings
from shrinkray.methods.base import RunContext, get_method
from shrinkray.pipeline.compare import variant_file_name
from shrinkray.pipeline.set_inputs import calibration_contexts
from shrinkray.pipeline.set_run import set_layout
from shrinkray.pipeline.shrink import shrink

#: Methods that work on one model file only (auto searches one graph's tensors).
NOT_FOR_SETS = {"auto"}

#: Options a calibrating method takes for a file of a set with nothing to learn from (no text of the set's own
#: beyond the judged lines, or a file the set's calibration does not reach): data-free, as the notes say.
SET_OPTIONS = {"weights-int4": {"activation_aware": False, "gptq": "off"}}

#: What a set's calibrating method learns from: per file, its inputs, and words for where they came from.
Calibration = tuple[dict[str, RunContext], str]


@dataclass
class SetVariant:
    """A set shrunk by one method: its files by role, each file's change record, and what to tell the user."""

    paths: dict[str, Path]
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def record(self, method: str, options: dict[str, Any]) -> dict[str, Any]:
        """One change record for the set: counts summed, every change named with its file."""
        total: dict[str, Any] = {"method": method, "options": dict(options), "tensors_changed": 0,
                                 "weight_bytes_before": 0, "weight_bytes_after": 0, "changes": [], "files": {}}  # fmt: skip
        for role, own in self.records.items():
            name = self.paths[role].name
            for key in ("tensors_changed", "weight_bytes_before", "weight_bytes_after"):
                total[key] += int(own.get(key) or 0)
            total["changes"].extend({**c, "name": f"{name}: {c.get('name', '')}"} for c in own.get("changes", []))
            total["files"][role] = str(self.paths[role])
        return total


def check_set_method(method: str) -> None:
    """Refuse a method that cannot shrink a set, in words for any front end."""
    if method in NOT_FOR_SETS:
        raise ModelLoadError(f"The method {method} works on one model file, not on a set",
                             "Choose another method, or one file of the set")  # fmt: skip
    get_method(method)


def calibrates(method: str, options: dict[str, Any]) -> bool:
    """Whether this method with these options learns from inputs (weights-int4 unless its options turn it off)."""
    spec = get_method(method)
    resolved = spec.make_options(**options)
    return bool(spec.uses_context and (getattr(resolved, "activation_aware", True)
                                       or getattr(resolved, "gptq", "") == "on"))  # fmt: skip


def set_calibration(model_set: ModelSet, settings: CompareSettings | None = None,
                    originals: dict | None = None) -> Calibration | None:  # fmt: skip
    """What a calibrating method learns from in this set (as ``compare`` makes it), or None without inputs of
    its own beyond those a comparison judges."""
    originals = originals or {role: model_set.load(role) for role in model_set.members}
    route, layout = set_layout(model_set, originals)
    return calibration_contexts(model_set, route, layout, settings or CompareSettings())


def shrink_set(model_set: ModelSet, method: str, options: dict[str, Any], folder: Path, *, key: str | None = None,
               naming: str = "transformers.js", calibration: Calibration | None = None, originals: dict | None = None,
               in_place: bool = False, validate: bool = False) -> SetVariant:  # fmt: skip
    """Every file of the set shrunk by ``method`` and written under ``folder`` at its place in the set, named
    as ``naming`` names a ``key`` variant (the method's name by default). ``calibration``: per file, what a
    calibrating method learns from; a file without it is shrunk data-free, and the notes say which.
    ``in_place``: each original is loaded here and rewritten (a shrink that keeps nothing else). Each file passes
    onnx.checker; ``validate``: it opens in ONNX Runtime too (``compare`` runs the set instead). A file that fails raises
    its error, named with the file."""
    check_set_method(method)
    contexts, told = calibration or ({}, "")
    learning = calibrates(method, options)
    made = SetVariant(paths={})
    if learning and contexts:
        uncalibrated = [Path(model_set.members[r]).name for r in model_set.members if r not in contexts]
        made.notes.append(f"Calibrated in the set on {told}: the encoder on them, the decoder (and its cached "
                          "form) on the encoder's states and the original's own outputs"
                          + (f"; {', '.join(uncalibrated)} data-free" if uncalibrated else ""))  # fmt: skip
    elif learning:
        made.notes.append("Uncalibrated in a set: activation-aware scales and GPTQ learn from a file's own inputs, "
                          "and this set has no inputs like its own beyond those judged (its tokenizer.json and a "
                          "prompts.txt of more lines, or clips)")  # fmt: skip
    protect = [model_set.path(role) for role in model_set.members]
    for role in model_set.members:
        relative = Path(*model_set.members[role].split("/"))
        context = contexts.get(role)
        data_free = SET_OPTIONS.get(method, {}) if learning and context is None else {}
        source = model_set.load(role) if originals is None else originals[role]
        try:
            variant = shrink(source, method, open_runtime=validate, context=context, in_place=in_place,
                             **{**data_free, **options})  # fmt: skip
        except ShrinkRayError as exc:
            exc.problem = f"{relative.name}: {exc.problem}"  # which file, in the error's own type and hint
            raise
        target = folder / relative.parent / variant_file_name(relative.name.removesuffix(".onnx"), key or method,
                                                                naming)  # fmt: skip
        target.parent.mkdir(parents=True, exist_ok=True)
        save(variant.model, target, protect=protect, overwrite=True)  # over 2 GB: with its data file beside it
        made.paths[role] = target
        made.records[role] = variant.summary()
        made.warnings.extend(f"{relative.name}: {w}" for w in variant.warnings)
        made.notes.extend(f"{relative.name}: {n}" for n in variant.notes)
        del variant, source
    return made

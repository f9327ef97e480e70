"""The ``shrinkray`` command: a thin shell over the engine.

Flags for method options are generated from the methods' option dataclasses,
so a new method needs no CLI change. Errors print one line (what is wrong and
what to do) and exit non-zero; ``--debug`` shows the traceback.

Kept as one module (over 600 lines): each command's parser sits beside its handler, so a flag and
the words that explain it stay together; the work itself is the engine's.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import shlex
import shutil
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

from shrinkray import pricing
from shrinkray.errors import MissingModelError, OptionError, SeveralModels, ShrinkRayError
from shrinkray.io.archive import is_zip, scratch_folder
from shrinkray.io.files import Terminated, check_output_path, model_in_folder, models_in_folder, raise_terminated
from shrinkray.io.model_set import is_model_set
from shrinkray.io.size_check import EXTERNAL_SETTING, STREAM_COMPARE_SETTING, STREAM_SETTING, check_fits, model_size
from shrinkray.measure.budget import BUDGET_SETTING
from shrinkray.measure.content import IMAGE_RANGES
from shrinkray.measure.inputs import InputOptions, parse_dims, parse_ranges
from shrinkray.measure.latency import DEFAULT_BUDGET_S, TARGET
from shrinkray.measure.parity import DEFAULT_PROFILE, MEASURES, PROFILES, USER_KINDS, build_verdict
from shrinkray.measure.results import CompareSettings
from shrinkray.measure.sample_files import is_sample_file
from shrinkray.measure.sizes import check_zstd_level
from shrinkray.methods import Variant, all_methods, get_method
from shrinkray.methods.base import RunContext
from shrinkray.pipeline.compare import NAMINGS
from shrinkray.pipeline.inspect import ModelSummary, inspect_model
from shrinkray.pipeline.streaming import all_stream, streams
from shrinkray.pricing.costs import PricingChoice
from shrinkray.pricing.numbers import DELIVERIES
from shrinkray.runs.jobs import compare_job, load_model_file, shrink_job, shrink_set_job
from shrinkray.runs.sandbox import run_capped
from shrinkray.text_safety import terminal
from shrinkray.units import format_bytes, format_percent, text_table

DEFAULT_MODEL = Path("artifacts/model.onnx")
DEFAULT_OUTPUT = Path("artifacts/model.int8.onnx")
DEFAULT_METHOD = "dynamic-int8"




def _status(args: argparse.Namespace, message: str) -> None:
    if not getattr(args, "quiet", False):
        print(terminal(message), file=sys.stderr, flush=True)


# ---------------------------------------------------------------- inspect


def format_summary(s: ModelSummary, top: int | None = 20) -> str:
    lines = [
        f"{s.name}: {format_bytes(s.file_bytes)} ({s.file_bytes:,} bytes), IR version {s.ir_version}"
        + (f", produced by {s.producer}" if s.producer else ""),
        "Opsets: " + ", ".join(f"{d} {v}" for d, v in s.opsets.items()),
        "",
        "Inputs:",
    ]
    def sig_rows(sigs):
        return [
            [t.name, t.dtype, t.shape_text(), ("dynamic: " + ", ".join(t.dynamic_axes.values())) if t.dynamic_axes else ""]
            for t in sigs
        ]

    lines += text_table(sig_rows(s.inputs), indent="  ") or ["  (none)"]
    if s.overridable_initializers:
        lines.append(f"  + {len(s.overridable_initializers)} initializers that are also inputs (overridable)")
    lines += ["Outputs:"] + (text_table(sig_rows(s.outputs), indent="  ") or ["  (none)"])
    lines += [
        "",
        f"Ops ({s.node_count:,} nodes, {s.subgraph_count} subgraphs): "
        + ", ".join(f"{op} {n}" for op, n in s.op_histogram),
    ]
    if s.custom_ops:
        lines.append("Custom ops (ONNX Runtime cannot run these here): " + ", ".join(s.custom_ops))
    shown = s.weights if top is None else s.weights[:top]
    lines += [
        "",
        f"Weights: {len(s.weights):,} tensors, {format_bytes(s.weight_bytes)} = "
        f"{format_percent(s.weight_share)} of the file, largest first"
        + (f" (top {len(shown)}; --all shows every one)" if len(shown) < len(s.weights) else ""),
    ]
    rows = [["name", "dtype", "shape", "bytes", "share", "where"]]
    rows += [
        [w.name, w.dtype, "[" + ", ".join(map(str, w.shape)) + "]", f"{w.bytes:,}", format_percent(w.share_of_file), w.where]
        for w in shown
    ]
    lines += text_table(rows, indent="  ")
    lines += ["", "What each method can rewrite (default options):"]
    lines += text_table(
        [[m.method, f"{m.tensors} tensors", format_bytes(m.bytes), f"{format_percent(m.share_of_file)} of the file"] for m in s.methods],
        indent="  ",
    )
    return "\n".join(lines)


def cmd_inspect(args: argparse.Namespace) -> int:
    if not args.member and is_model_set(args.model):  # an encoder and a decoder: one inspection of the set
        from shrinkray.io.model_set import open_set
        from shrinkray.pipeline.set_compare import set_summary

        with scratch_folder() as scratch:
            model_set = open_set(args.model, workdir=scratch)
            summary = set_summary(model_set)
        print(f"A set of models: {model_set.words()}, shrunk and compared as one (pick one with --member)",
              file=sys.stderr)  # fmt: skip
    else:
        summary = inspect_model(load_model_file(args.model, member=args.member))
    if args.json:
        print(json.dumps(summary.to_dict(), indent=2))
    else:
        print(terminal(format_summary(summary, top=None if args.all else args.top)))
    return 0


# ---------------------------------------------------------------- shrink


def _option_fields() -> dict[str, list[tuple[str, dataclasses.Field, str]]]:
    """Every option field across methods, grouped by name: (method, field, kind)."""
    fields: dict[str, list[tuple[str, dataclasses.Field, str]]] = {}
    for spec in all_methods():
        kinds = spec.options_type.field_kinds()
        for f in dataclasses.fields(spec.options_type):
            fields.setdefault(f.name, []).append((spec.name, f, kinds[f.name]))
    return fields


def _add_method_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("method options (each applies to the methods named in brackets)")
    for name, owners in _option_fields().items():
        flag = "--" + name.replace("_", "-")
        first = owners[0][1]
        methods = ", ".join(m for m, _, _ in owners)
        defaults = {repr(f.default) for _, f, _ in owners if f.default is not dataclasses.MISSING}
        default_text = f" (default {defaults.pop()})" if len(defaults) == 1 else ""
        helps = {m: f.metadata.get("help", "") for m, f, _ in owners}
        said = helps[owners[0][0]] if len(set(helps.values())) == 1 else "; ".join(f"{m}: {h}" for m, h in helps.items())
        help_text = f"[{methods}] {said}{default_text}".replace("%", "%%")
        kind = owners[0][2]
        if kind == "bool":
            group.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        else:
            metavar = "|".join(map(str, first.metadata["choices"])) if "choices" in first.metadata else name.upper()
            group.add_argument(flag, dest=name, default=None, metavar=metavar, help=help_text)


def _method_options(args: argparse.Namespace) -> dict[str, Any]:
    return {name: getattr(args, name) for name in _option_fields() if getattr(args, name, None) is not None}


def default_output(model_path: Path, method: str, folder: Path | None = None) -> Path:
    """NAME.METHOD.onnx beside the input (in ``folder``: a model chosen from a zip is written beside the zip)."""
    stem = model_path.name.removesuffix(".zip").removesuffix(".onnx")
    return (folder or model_path.parent) / f"{stem}.{method}.onnx"


def format_variant(variant: Variant, original_bytes: int, written: Path | None, written_bytes: int) -> str:
    measured = [c for c in variant.changes if c.relative_rms_error == c.relative_rms_error]  # skip NaN
    worst = max(measured, key=lambda c: c.relative_rms_error, default=None)
    lines = [
        (
            f"{variant.method}: rewrote {len(variant.changes)} tensors, "
            f"{format_bytes(variant.bytes_before)} of weights -> {format_bytes(variant.bytes_after)}"
        )
    ]
    if written is not None:
        lines.append(
            f"File: {format_bytes(original_bytes)} -> {format_bytes(written_bytes)} "
            f"({format_percent(written_bytes / max(original_bytes, 1))} of the original), written to {written}"
        )
    if worst is not None:
        lines.append(
            f"Largest weight error: '{worst.name}' RMS error {format_percent(worst.relative_rms_error)} of its RMS "
            f"(max abs {worst.max_abs_error:.3g})"
        )
    lines += [f"Note: {n}" for n in variant.notes]
    lines += [f"Warning: {w}" for w in variant.warnings]
    return "\n".join(lines)


def _add_judging_flags(parser: argparse.ArgumentParser, purpose: str = "parity and latency") -> None:
    """How outputs are judged and on which inputs: compare's parity, and the methods that judge or calibrate
    (``shrink -m auto``, weights-int4's activation-aware scales)."""
    p = parser
    p.add_argument("--verdict", choices=sorted(PROFILES), default=None,
                   help="parity profile: relative (default: each output judged in its own terms) or absolute "
                   "(max abs error 0.06, mean abs error 0.02, cosine 0.99 on every float output)")  # fmt: skip
    p.add_argument("--tolerance", action="append", metavar="[OUTPUT:]CRITERION=VALUE",
                   help="set a parity criterion for every output or one output (repeatable), e.g. "
                   "min_top1_agreement=0.995 or boxes:max_relative_error=0.02; criteria are min_ or max_ of: "
                   + ", ".join(MEASURES))  # fmt: skip
    p.add_argument("--output-kind", action="append", metavar="OUTPUT=KIND",
                   help="how to judge an output (repeatable): " + ", ".join(USER_KINDS))  # fmt: skip
    p.add_argument("--abs-tol", type=float, help="shorthand for --tolerance max_abs_error=VALUE")
    p.add_argument("--mean-tol", type=float, help="shorthand for --tolerance max_mean_abs_error=VALUE")
    p.add_argument("--min-cosine", type=float, help="shorthand for --tolerance min_cosine=VALUE")
    p.add_argument("--inputs", help=f"real inputs for {purpose}: an .npz keyed by input name or an .npy; "
                   "or images (PNG/JPEG) / WAV files, comma-separated, one sample each")  # fmt: skip
    p.add_argument("--image-range", default="auto", choices=["auto", *IMAGE_RANGES],
                   help="value range images are mapped to (default auto: read from the model's graph)")  # fmt: skip
    p.add_argument("--dim", action="append", metavar="NAME=VALUE", help="size of a free dimension (repeatable); "
                   "unnamed ones as INPUT:AXIS=VALUE")  # fmt: skip
    p.add_argument("--range", action="append", metavar="NAME=LOW:HIGH", help="value range of an input (repeatable)")
    p.add_argument("--seed", type=int, default=0, help="seed for synthesized inputs")
    p.add_argument("--tokenizer", metavar="PATH", help="a decoder LM's tokenizer.json: its prompts are real text "
                   "(found by itself beside the model or one folder up, as transformers.js lays models out)")  # fmt: skip
    p.add_argument("--text", metavar="PATH", help="a decoder LM's prompts are windows of this text file (its own "
                   "domain: code, chat...; default: a prompts.txt beside the tokenizer, else everyday English)")  # fmt: skip


#: Judging flags that say the user asked for something (the others have defaults).
_JUDGING_GIVEN = ("verdict", "tolerance", "output_kind", "abs_tol", "mean_tol", "min_cosine", "inputs", "dim", "range",
                  "tokenizer", "text")


def _given_file(given: str | None, flag: str, what: str) -> str:
    """A --tokenizer / --text file, checked now: a missing one would otherwise surface deep in a worker."""
    if not given:
        return ""
    path = Path(given)
    if not path.is_file():
        raise OptionError(f"{flag} {given}: no such file", f"Give {what}")
    return str(path.resolve())


def judging_settings(args: argparse.Namespace, **more: Any) -> CompareSettings:
    """The verdict and inputs the flags ask for (``more``: the rest of a compare's settings)."""
    given = [p.strip() for p in (args.inputs or "").split(",") if p.strip()]
    sample_files = given if given and all(is_sample_file(p) for p in given) else []
    if len(given) > 1 and not sample_files:
        raise OptionError("--inputs takes one .npz/.npy file, or image / WAV files", "e.g. --inputs a.png,b.png")
    return CompareSettings(
        verdict=build_verdict(
            args.verdict or DEFAULT_PROFILE, args.tolerance, args.output_kind,
            max_abs_error=args.abs_tol, max_mean_abs_error=args.mean_tol, min_cosine=args.min_cosine,
        ),
        inputs=InputOptions(dims=parse_dims(args.dim), ranges=parse_ranges(args.range), seed=args.seed,
                            tokenizer=_given_file(getattr(args, "tokenizer", None), "--tokenizer", "the model's tokenizer.json"),
                            text=_given_file(getattr(args, "text", None), "--text", "a text file of prompts")),
        inputs_path=None if sample_files else args.inputs,
        sample_files=sample_files,
        image_range=args.image_range,
        **more,
    )  # fmt: skip


def shrink_context(args: argparse.Namespace, method: str) -> RunContext | None:
    """The verdict and inputs for a method that judges or calibrates on them; None for the others (and an
    error when judging flags were given to a method that would ignore them)."""
    if get_method(method).uses_context:
        return RunContext(settings=judging_settings(args))
    given = [f"--{name.replace('_', '-')}" for name in _JUDGING_GIVEN if getattr(args, name, None) not in (None, [])]
    if given:
        users = ", ".join(spec.name for spec in all_methods() if spec.uses_context)
        raise OptionError(f"The {method} method does not judge outputs or read inputs, so {', '.join(given)} "
                          "would have no effect", f"Leave them out, or use a method that does: {users}")  # fmt: skip
    return None


def cmd_shrink(args: argparse.Namespace) -> int:
    model_path = Path(args.model) if args.model else DEFAULT_MODEL
    method = args.method or DEFAULT_METHOD
    if args.model and not args.member and is_model_set(model_path):
        return _shrink_set(args, model_path, method)
    context = shrink_context(args, method)  # checked before any work
    if args.model is None and not DEFAULT_MODEL.exists():
        raise MissingModelError(f"Missing {DEFAULT_MODEL}", "Run export first")
    if args.output:
        output = Path(args.output)
    elif args.model is None and method == DEFAULT_METHOD:
        output = DEFAULT_OUTPUT
    else:
        output = default_output(Path(args.member) if args.member else model_path, method, model_path.parent)
    if model_path.exists():
        check_output_path(output, protect=[model_path], overwrite=args.force)  # before any work
        size = model_size(model_path)
        if size is not None and not (size.external and streams(method, _method_options(args))):
            check_fits(size, f"shrinking it with {method}")  # in memory: refused before it is read
    _status(args, f"Loading {model_path} and applying {method} (in a worker capped in memory and time) ...")
    with scratch_folder() as scratch:
        variant, written, written_bytes, input_bytes = run_capped(
            shrink_job, model_path, output, method, _method_options(args), args.force, scratch, context,
            member=args.member, what=f"Shrinking with {method}",
        )  # fmt: skip
    _status(args, "Checked: onnx.checker passes and ONNX Runtime opens the result. Written.")
    if args.json:
        record = variant.summary() | {
            "input": str(model_path),
            "output": str(written),
            "input_bytes": input_bytes,
            "output_bytes": written_bytes,
        }
        print(json.dumps(record, indent=2))
    else:
        print(terminal(format_variant(variant, input_bytes, written, written_bytes)))
    return 0


def _shrink_set(args: argparse.Namespace, model_path: Path, method: str) -> int:
    """Every file of an encoder–decoder set shrunk by ``method``, into the set's own folder (a zip: the folder
    it unpacks to, beside it) or ``-o DIR``, under transformers.js's names."""
    context = shrink_context(args, method)  # before any work; a calibrating method learns from --text's lines
    out_dir = Path(args.output) if args.output else model_path if model_path.is_dir() else model_path.with_suffix("")
    if out_dir.exists() and not out_dir.is_dir():
        raise OptionError(f"-o {out_dir} is a file; a set is written into a folder", "Name a folder (created if missing)")
    _status(args, f"Loading the set {model_path} and applying {method} to each file (in a capped worker) ...")
    with scratch_folder() as scratch:
        records = run_capped(shrink_set_job, model_path, out_dir, method, _method_options(args), args.force, scratch,
                             context.settings if context is not None else None,
                             what=f"Shrinking the set with {method}")  # fmt: skip
    _status(args, "Checked: onnx.checker passes and ONNX Runtime opens every file. Written.")
    if args.json:
        print(json.dumps(records, indent=2))
        return 0
    for record in records:
        print(terminal(f"{record['member']}: {format_bytes(record['input_bytes'])} -> "
                       f"{format_bytes(record['output_bytes'])}, {record['tensors_changed']} tensors changed: "
                       f"{record['output']}"))  # fmt: skip
    for note in dict.fromkeys(n for r in records for n in r.get("notes", [])):  # the set's own notes once
        print(terminal(f"Note: {note}"))
    before, after = sum(r["input_bytes"] for r in records), sum(r["output_bytes"] for r in records)
    print(f"The set: {format_bytes(before)} -> {format_bytes(after)} ({format_percent(1 - after / before)} smaller). "
          f"Judge it with `shrinkray compare {shlex.quote(str(model_path))}` (it runs the set as it is used).")
    return 0


# ---------------------------------------------------------------- compare


def parse_method_list(text: str, shared: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``all`` or ``m1,m2:key=value:key=value``; shared flags go to every method that has them."""
    chosen: list[tuple[str, dict[str, Any]]] = []
    items = [t.strip() for t in text.split(",") if t.strip()] if text and text != "all" else []
    specs = [(spec.name, {}) for spec in all_methods() if spec.in_default_set] if not items else []
    for item in items:
        name, *pairs = item.split(":")
        options: dict[str, Any] = {}
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep:
                raise OptionError(f"--methods item '{item}': '{pair}' is not key=value", "e.g. palettize:levels=16")
            options[key.strip().replace("-", "_")] = value.strip()
        specs.append((get_method(name).name, options))
    for name, options in specs:
        fields = {f.name for f in dataclasses.fields(get_method(name).options_type)}
        merged = {k: v for k, v in shared.items() if k in fields} | options
        chosen.append((name, merged))
    unused = [k for k in shared if not any(k in {f.name for f in dataclasses.fields(get_method(n).options_type)}
                                           for n, _ in chosen)]  # fmt: skip
    if unused:
        raise OptionError(
            "No chosen method takes " + ", ".join("--" + u.replace("_", "-") for u in unused),
            "Check the option names with `shrinkray methods`",
        )
    return chosen


class ProgressBar:
    """A one-line progress bar on stderr, as wide as the terminal; one plain line per step when stderr is
    not a terminal (CI logs, pipes).

    Hand-written on purpose: tqdm and rich redraw a bar with carriage returns (tqdm) or print only the final
    state (rich) when stderr is a file, and a log needs one line per step.
    """

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.last = ""

    def __call__(self, step: str, fraction: float) -> None:
        if self.quiet:
            return
        width = 24
        filled = round(max(0.0, min(1.0, fraction)) * width)
        line = f"[{'#' * filled}{'.' * (width - filled)}] {fraction:4.0%} {step}"
        if self.tty:
            columns = max(20, shutil.get_terminal_size((100, 24)).columns - 1)
            sys.stderr.write("\r" + line[:columns].ljust(columns))
            if fraction >= 1.0:
                sys.stderr.write("\n")
        elif step != self.last:
            sys.stderr.write(line + "\n")
        self.last = step
        sys.stderr.flush()


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise OptionError(f"{flag} takes comma-separated integers, not {text!r}", f"e.g. {flag} 1,8,32") from None
    if not values or min(values) < 1:
        raise OptionError(f"{flag} values must be positive", f"e.g. {flag} 1,8,32")
    return values


def compare_settings(args: argparse.Namespace) -> CompareSettings:
    settings = judging_settings(
        args,
        methods=parse_method_list(args.methods, _method_options(args)),
        runs=args.runs,
        latency=not args.no_latency,
        latency_budget_s=args.latency_budget,
        latency_target=args.latency_target,
        brotli_quality=args.brotli_quality,
        zstd_level=check_zstd_level(args.zstd),
        culprits=args.culprits and not args.no_culprits,
        culprit_budget_s=args.culprit_budget,
        auto=args.auto,
    )
    if args.threads:
        settings.threads = _int_list(args.threads, "--threads")
    if args.batches:
        settings.batches = _int_list(args.batches, "--batches")
    if args.runs is not None and args.runs < 1:
        raise OptionError("--runs must be at least 1", "e.g. --runs 50, or leave it out for adaptive timing")
    if not 0 < args.latency_target < 1:
        raise OptionError(f"--latency-target must be between 0 and 1, not {args.latency_target}", "e.g. 0.03 for ±3%")
    return settings


def cmd_compare(args: argparse.Namespace) -> int:
    from shrinkray.report import formats as report  # start-up: plotly is only needed for reports

    settings = compare_settings(args)
    choice = pricing_choice(args)  # None without --downloads; checked before minutes of work
    report_paths = [args.json, args.markdown, args.csv, args.html, args.one_page, args.card_png]
    inputs = [args.model, args.inputs, *(settings.sample_files or [])]
    report.check_report_paths(report_paths, protect=inputs)  # before minutes of work
    save_dir = Path(args.save_dir) if args.save_dir else None
    if save_dir is not None and save_dir.exists() and not save_dir.is_dir():
        raise OptionError(f"--save-dir {save_dir} is a file, not a folder", "Name a folder (it is created if missing)")
    if not Path(args.model).exists():
        load_model_file(args.model, member=args.member)  # the usual message for a missing file, before a worker
    # a model too big is refused before it is read; one kept in external data files is measured in them when
    # every method streams (one session at a time)
    size = model_size(args.model)
    streamed = bool(size and size.external) and all_stream(settings.methods)
    check_fits(size, "comparing", streamed=streamed, comparing=True)
    with scratch_folder() as scratch:
        comparison = run_capped(
            functools.partial(compare_job, naming=args.naming, member=args.member), Path(args.model), settings,
            save_dir, args.force, scratch, what="Comparing", progress=ProgressBar(args.quiet),
        )  # fmt: skip
    for result in comparison.variants:
        if result.file:  # a set's variant: each of its files
            for written in (result.record.get("files") or {}).values() or [result.file]:
                _status(args, f"Wrote {written}")
    print(terminal(report.to_text(comparison, pricing=choice, hints=False)))  # the hints follow, as flags
    next_steps = advice_lines(comparison)
    if next_steps:
        print("\nWhat to try next:\n" + terminal("\n".join(next_steps)))
    if args.timings:
        print(report.timings_text(comparison))
    written = report.write_reports(
        comparison, json_path=args.json, markdown_path=args.markdown, csv_path=args.csv, html_path=args.html,
        one_page_path=args.one_page, card_png_path=args.card_png, pricing=choice,
        protect=inputs + list(getattr(comparison, "input_files", [])),
    )  # fmt: skip
    for path in written:
        _status(args, f"Wrote {path}")
    return 0


# ---------------------------------------------------------------- price (download cost)

SIZE_HELP = (
    "plain bytes (52428800 or 52_428_800) or a number with a unit: kB/MB/GB/TB are powers of 1000, "
    "KiB/MiB/GiB/TiB powers of 1024 (50MiB = 52428800 bytes, 1.5GB = 1500000000 bytes)"
)


def _add_pricing_flags(parser: argparse.ArgumentParser, delivery_help: str, purpose: str) -> None:
    """--downloads/--provider/--price-per-gb/--delivery/--growth, shared by `price` and `compare`."""
    group = parser.add_argument_group(f"download cost ({purpose}; egress is billed per GiB = 2^30 bytes)")
    group.add_argument("--downloads", metavar="N", help="downloads per month, e.g. 100000")
    group.add_argument("--provider", metavar="NAME", help="egress price list: gcs (default), s3, cloudfront, azure, "
                       "r2; `shrinkray price --list-providers` shows the tiers and sources")  # fmt: skip
    group.add_argument("--price-per-gb", "--price-per-gib", dest="price_per_gib", metavar="X",
                       help="a flat price per GiB (2^30 bytes) instead of a provider, e.g. 0.12")  # fmt: skip
    group.add_argument("--delivery", choices=DELIVERIES, help=delivery_help)
    group.add_argument("--growth", metavar="RATE", help="downloads grow by this many percent each month: 5 or 5%% (default 0; 0.05 is 0.05%%)")


def pricing_choice(args: argparse.Namespace) -> PricingChoice | None:
    """The cost settings of `compare`, or None when --downloads is not given (then no other cost flag may be)."""
    if args.downloads is None:
        given = [flag for flag, value in (("--provider", args.provider), ("--price-per-gb", args.price_per_gib),
                 ("--delivery", args.delivery), ("--growth", args.growth)) if value is not None]  # fmt: skip
        if given:
            raise OptionError(f"{', '.join(given)} need --downloads", "Say how many downloads a month, e.g. --downloads 100000")
        return None
    return PricingChoice(
        provider=pricing.resolve_provider(args.provider, args.price_per_gib),
        downloads_per_month=pricing.parse_downloads(args.downloads),
        delivery=args.delivery or "brotli",
        growth=pricing.parse_growth(args.growth or "0"),
    )


def _price_sizes(args: argparse.Namespace, delivery: str) -> list[tuple[str, int]]:
    """(label, bytes served) for each FILE (measured) and then each --size value."""
    items: list[tuple[str, int]] = []
    for name in args.files:
        path = Path(name)
        if not path.is_file():
            raise MissingModelError(f"Missing {path}" if not path.exists() else f"{path} is not a file",
                                    "Give an existing file, or sizes with --size")  # fmt: skip
        if path.stat().st_size == 0:
            raise OptionError(f"{path} is empty", "Give the file that is downloaded")
        if delivery == "raw":
            size = path.stat().st_size
        else:
            from shrinkray.measure.sizes import measure_sizes  # start-up: brotli and zstd load only when measured

            _status(args, f"Measuring the {delivery} size of {path} ...")
            size = measure_sizes(path.read_bytes()).get(delivery)
        items.append((f"{path.name} ({delivery} {format_bytes(size)})", size))
    if args.size is not None:
        items += [(pricing.format_size(size), size) for size in pricing.parse_sizes(args.size)]
    if not items:
        raise OptionError("Nothing to price", "Give --size BYTES[,BYTES...] or one or more files")
    return items


def cmd_price(args: argparse.Namespace) -> int:
    if args.list_providers:
        print(pricing.providers_text())
        return 0
    if args.downloads is None:
        raise OptionError("--downloads is required", "Say how many downloads a month, e.g. --downloads 100000")
    provider = pricing.resolve_provider(args.provider, args.price_per_gib, args.free_gib)
    downloads = pricing.parse_downloads(args.downloads)
    growth = pricing.parse_growth(args.growth or "0")
    target = pricing.parse_money(args.break_even) if args.break_even is not None else None
    delivery = args.delivery or "raw"
    result = pricing.quote(_price_sizes(args, delivery), downloads, provider, delivery, growth, target)
    print(json.dumps(result.as_dict(), indent=2, allow_nan=False) if args.json else terminal(result.to_text()))
    return 0


def cmd_methods(args: argparse.Namespace) -> int:
    for spec in all_methods():
        print(f"{spec.name:14s} {spec.title}: {spec.summary}")
        for f in dataclasses.fields(spec.options_type):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            shown = ",".join(default) if isinstance(default, list) else default
            print(f"    --{f.name.replace('_', '-'):16s} {f.metadata.get('help', '')} (default: {shown})")
    return 0


# ---------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shrinkray", description="Make ONNX models smaller, and measure the cost.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("inspect", help="show a model's signature, ops and weights")
    p.add_argument("model", help="path to an .onnx file, a .zip of a model with its data, or a folder")
    p.add_argument("--member", metavar="PATH", help="the model to use from a .zip or folder of several (an "
                   "encoder and a decoder, a transformers.js onnx/ folder): its path inside, e.g. onnx/decoder_model.onnx")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--top", type=int, default=20, help="weights to list (default 20)")
    p.add_argument("--all", action="store_true", help="list every weight")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser(
        "shrink",
        help="write a smaller copy of a model",
        description="Write a smaller, validated copy of a model. With no MODEL, reads "
        f"{DEFAULT_MODEL} and writes {DEFAULT_OUTPUT} ({DEFAULT_METHOD}).",
    )
    p.add_argument("model", nargs="?", help=f"path to an .onnx file, a .zip or a folder (default {DEFAULT_MODEL})")
    p.add_argument("--member", metavar="PATH", help="the model to use from a .zip or folder of several (an "
                   "encoder and a decoder, a transformers.js onnx/ folder): its path inside, e.g. onnx/decoder_model.onnx")
    p.add_argument(
        "--method", "-m", choices=[s.name for s in all_methods()], help=f"shrinking method (default {DEFAULT_METHOD})"
    )
    p.add_argument("-o", "--output", help="output path (default: next to the input as NAME.METHOD.onnx); a name ending in .zip gets the model "
                   "and its data file packed into one stored zip")
    p.add_argument("--force", action="store_true", help="replace the output file if it exists (never the input)")
    p.add_argument("--json", action="store_true", help="print the change record as JSON")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress messages")
    judging = p.add_argument_group("judging (methods that judge outputs or calibrate on inputs: "
                                   + ", ".join(s.name for s in all_methods() if s.uses_context) + ")")  # fmt: skip
    _add_judging_flags(judging, "judging and calibration")
    _add_method_flags(p)
    p.set_defaults(func=cmd_shrink)

    p = sub.add_parser(
        "compare",
        help="shrink with several methods and measure size, parity and latency side by side",
        description="Run the chosen methods, measure the original and every variant (raw/gzip/brotli size, "
        "output parity, CPU latency), print a table with advice, and write reports.",
    )
    p.add_argument("model", help="path to an .onnx file, a .zip of a model with its data, or a folder")
    p.add_argument("--member", metavar="PATH", help="the model to use from a .zip or folder of several (an "
                   "encoder and a decoder, a transformers.js onnx/ folder): its path inside, e.g. onnx/decoder_model.onnx")
    p.add_argument(
        "--methods", default="all",
        help="all (default) or a comma list; give a method its own options with colons, e.g. "
        "palettize:levels=16,palettize:levels=256,weights-int8",
    )  # fmt: skip
    _add_judging_flags(p)
    p.add_argument("--runs", type=int, help="a fixed number of timed rounds per setting (default: adaptive, until "
                   "every variant's latency ratio to the original is known within --latency-target, or the budget)")  # fmt: skip
    # (the second % after the target: argparse's escape of the first)
    p.add_argument("--latency-target", type=float, default=TARGET, help="adaptive timing stops when every ratio's "
                   f"95%% interval is within ±this share of it (default {TARGET:g} = ±{TARGET:.0%}%)")  # fmt: skip
    p.add_argument("--threads", help="thread counts to time, e.g. 1,2 (default: 1 and all cores)")
    p.add_argument("--batches", help="batch sizes to time, e.g. 1,8,32 for throughput (default 1, or the model's fixed batch)")
    p.add_argument("--latency-budget", type=float, default=DEFAULT_BUDGET_S, help="seconds per timing setting "
                   f"(default {DEFAULT_BUDGET_S:g}; "
                   "timing stops earlier once every ratio is known within --latency-target)")  # fmt: skip
    p.add_argument("--no-latency", action="store_true", help="skip latency measurement")
    p.add_argument("--brotli-quality", default="auto", help="0-11 or auto (the best of 11, 10, 9, 6 whose predicted "
                   "time fits 10 s on the usable cores; default auto); a server sends gzip -9 when that is smaller")  # fmt: skip
    p.add_argument("--zstd", metavar="LEVEL", help="also measure zstd at this level 1-22, or auto (needs zstandard)")
    p.add_argument("--timings", action="store_true", help="print how long each phase took (always in the JSON report)")
    p.add_argument("--auto", action="store_true", help="for a variant that fails parity, add one that leaves the "
                   "most damaging tensors in float")  # fmt: skip
    p.add_argument("--culprits", action="store_true", help="for a variant that fails parity, rewrite its tensors "
                   "one at a time to find the ones that hurt (within --culprit-budget; --auto does this too)")  # fmt: skip
    p.add_argument("--no-culprits", action="store_true", help="never search for the tensors that hurt parity "
                   "(the default unless --culprits or --auto)")  # fmt: skip
    p.add_argument("--culprit-budget", type=float, default=60.0, help="seconds for the culprit search per variant")
    p.add_argument("--save-dir", metavar="DIR", help="write every variant (checked) into DIR as MODEL.VARIANT.onnx; "
                   "the JSON report gives each one's file")  # fmt: skip
    p.add_argument("--force", action="store_true", help="with --save-dir: replace variant files that exist")
    p.add_argument("--naming", choices=NAMINGS, default="shrinkray",
                   help="with --save-dir: name variants MODEL.METHOD.onnx (default) or as transformers.js loads them "
                   "(model_quantized.onnx, model_int8.onnx, model_q4.onnx, model_fp16.onnx), to drop into its onnx/ folder")  # fmt: skip
    p.add_argument("--json", help="write the JSON report here")
    p.add_argument("--markdown", help="write the Markdown report here")
    p.add_argument("--csv", help="write the CSV table here")
    p.add_argument("--html", help="write the self-contained HTML report (charts, opens offline) here")
    p.add_argument("--one-page", metavar="PATH",
                   help="write the one page to send here: headline, size, wait and cost per file (HTML, prints to one page)")
    p.add_argument("--card-png", metavar="PATH",
                   help="write the headline card here as a PNG (1200x630, a link preview's size): size as served, "
                   "the 4G wait, money a year and the verdict sentence")  # fmt: skip
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    _add_pricing_flags(p, "which measured size is served: raw, gzip or brotli (default brotli)",
                       "adds cost columns to the table and the JSON/Markdown/CSV reports")  # fmt: skip
    _add_method_flags(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser(
        "price",
        help="what serving a file costs in egress a month and a year, and what a smaller one saves",
        description="Cost of internet egress for files of the given sizes, each downloaded --downloads times a "
        "month: tiered provider prices per GiB (2^30 bytes) after any free allowance, per month, per year "
        "and per million downloads, and the saving of each size against the first. Sizes are "
        f"{SIZE_HELP}; FILEs are measured as --delivery (gzip -9 or brotli) and listed first.",
        epilog="Example: shrinkray price --size 50MiB,13MiB --downloads 100000 --provider s3 --break-even 100",
    )  # fmt: skip
    p.add_argument("files", nargs="*", metavar="FILE", help="files to price, measured as --delivery")
    p.add_argument("--size", metavar="BYTES[,BYTES...]", help="sizes served per download, the first is the baseline")
    _add_pricing_flags(p, "how FILEs are served and so measured: raw (default), gzip -9 or brotli; --size values "
                       "are taken as the bytes served", "--downloads is required")  # fmt: skip
    p.add_argument("--free-gib", metavar="N", help="with --price-per-gb: GiB a month that are free")
    p.add_argument("--break-even", metavar="AMOUNT", help="also show the downloads a month at which each size "
                   "saves AMOUNT a month against the first")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--list-providers", action="store_true", help="list the provider presets, their tiers and sources")
    p.set_defaults(func=cmd_price)

    p = sub.add_parser("methods", help="list the methods and their options")
    p.set_defaults(func=cmd_methods)
    return parser


#: How the command line words the engine's hints that name a setting.
CLI_HINTS = {
    STREAM_SETTING: "Shrink it with `shrinkray shrink -m weights-int8 MODEL -o OUT.zip`, which works tensor by "
    "tensor, or use a machine with more memory and raise SHRINKRAY_MAX_MEMORY_BYTES",
    STREAM_COMPARE_SETTING: "Compare only the methods that work tensor by tensor (`--methods weights-int8,float16`), "
    "which measure it in its own files, or use a machine with more memory and raise SHRINKRAY_MAX_MEMORY_BYTES",
    EXTERNAL_SETTING: "Save it with its weights in external data files (onnx.save_model(..., "
    "save_as_external_data=True)), then `shrinkray shrink -m weights-int8` converts it tensor by tensor",
    "inputs": "Set free dimensions with --dim NAME=VALUE (unnamed ones as INPUT:AXIS=VALUE), value ranges with "
    "--range NAME=LOW:HIGH, or give real inputs with --inputs (an .npz file, or images / WAV files)",
    # measure/budget.py: the work ahead, from the original's first run, passes the job's time cap
    BUDGET_SETTING: "Compare fewer methods (e.g. --methods weights-int8), give smaller inputs (--dim NAME=VALUE for "
    "a free dimension) or fewer of your own (--inputs), or, on a machine of your own, raise "
    "SHRINKRAY_MAX_JOB_SECONDS",
}


def _quoted(names: Any) -> str:
    items = names if isinstance(names, (list, tuple)) else [names]
    return shlex.quote(",".join(str(n) for n in items))


#: How the command line words the engine's advice hints (``shrinkray.verdict.advice.Hint``): as flags.
CLI_ADVICE = {
    "exclude": lambda h: f"The tensors that move the outputs most are {', '.join(map(str, h.value))}: leave them "
    f"in float with --exclude {_quoted(h.value)}" + (f" (-m {h.method})" if h.method else ""),
    "auto": lambda h: "or try -m auto (compare --methods auto), which chooses a precision per tensor",
    "methods": lambda h: f"prefer --methods {','.join(h.value)} (float compute)",
    "verdict": lambda h: "if the criteria are stricter than needed, loosen them knowingly (--verdict, --tolerance, "
    "--abs-tol / --mean-tol)",
    "min_elements": lambda h: f"lower --min-elements (e.g. --min-elements {h.value}) if small tensors matter, or "
    "keep the original",
    "culprits": lambda h: "to find the tensors that hurt, rerun with --culprits (or --auto)",
    "own_inputs": lambda h: {
        "text": "for a firm verdict, give text like what the model reads with --text FILE (its prompts are windows of it)",
        "lines": "for a firm verdict, give text like what the set reads with --text FILE (one input per line)",
        "clips": "for a firm verdict, give recordings like what the set hears with --inputs a.wav,b.wav (one input "
                 "each)",
    }.get(h.value, "for a firm verdict, give more inputs of your own with --inputs (an .npz file, or images / WAV files)"),
}


def advice_lines(comparison: Any, delivery: str = "brotli") -> list[str]:
    """The advice that has hints, worded as flags: what to run next (a hint said for all variants is not said
    again for each)."""
    from shrinkray.verdict.advice import advise  # start-up: only commands that advise load the verdict layer

    lines, said = [], set()
    for advice in advise(comparison, delivery):
        worded = advice.hints_worded(CLI_ADVICE) if advice.hints else ""
        if worded and worded not in said:
            lines.append(f"- {advice.variant or 'all variants'}: {worded}")
            if not advice.variant:
                said.add(worded)
    return lines


def cli_message(exc: ShrinkRayError) -> str:
    """The error in the command line's words: a hint naming a setting becomes the flags for it."""
    hint = CLI_HINTS.get(exc.setting, exc.hint)
    if isinstance(exc, SeveralModels) and exc.choices:
        hint = f"Name the one to use with --member, e.g. --member {shlex.quote(exc.choices[0])}"
    return f"{exc.problem}. {hint}." if hint else f"{exc.problem}."


def _quiet_stdout() -> None:
    """After the reader of a pipe left (``| head``): send what is left of stdout nowhere, silently."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _resolve_member(args: argparse.Namespace) -> None:
    """A folder stands for its main model (transformers.js's), or the ``--member`` named; a zip keeps
    ``--member`` for the loader; a single .onnx file has nothing to choose from."""
    model, member = getattr(args, "model", None), getattr(args, "member", None)
    if not isinstance(model, str):
        if member:
            raise OptionError("--member names a model inside a .zip or folder", "Give the .zip or folder as MODEL")
        return
    if Path(model).is_dir():
        if not member and getattr(args, "command", "") in ("compare", "shrink", "inspect") and is_model_set(model):
            return  # an encoder and a decoder: inspected, shrunk or compared as one set
        args.model = str(model_in_folder(model) if not member else _inside(Path(model), member))
        args.member = None
    elif member and Path(model).is_file() and not (Path(model).suffix.lower() == ".zip" or is_zip(Path(model))):
        raise OptionError(f"--member names a model inside a .zip or folder, and {model} is one model",
                          "Leave out --member, or give the .zip or folder as MODEL")  # fmt: skip


def _inside(folder: Path, member: str) -> Path:
    """``member`` of ``folder``, refused when it leaves the folder or is not a file."""
    path = (folder / member).resolve()
    if folder.resolve() not in path.parents or not path.is_file():
        names = ", ".join(str(p.relative_to(folder)) for p in models_in_folder(folder)[:8])
        raise OptionError(f"{folder} has no model {member}", f"Its models are: {names}" if names else "It holds no .onnx file")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _resolve_member(args)
    except ShrinkRayError as exc:
        print(f"Error: {terminal(cli_message(exc))}", file=sys.stderr)
        return 1
    if threading.current_thread() is threading.main_thread():
        # SIGTERM unwinds like Ctrl-C: temporary files and staging folders are removed on the way out.
        signal.signal(signal.SIGTERM, raise_terminated)
    try:
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers below, not at exit
        return code
    except ShrinkRayError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"Error: {terminal(cli_message(exc))}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        _quiet_stdout()
        return 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader went away
    except KeyboardInterrupt as exc:
        print("Stopped" if isinstance(exc, Terminated) else "Interrupted", "; nothing was written.", sep="",
              file=sys.stderr)  # fmt: skip
        return 143 if isinstance(exc, Terminated) else 130
    except OSError as exc:
        if args.debug:
            traceback.print_exc()
        where = f" ({terminal(os.fsdecode(exc.filename))})" if exc.filename is not None else ""
        print(f"Error: {terminal(exc.strerror or type(exc).__name__)}{where}. Check the path, its permissions "
              "and the free disk space.", file=sys.stderr)  # fmt: skip
        return 1
    except Exception as exc:  # noqa: BLE001 - last line of defence: no traceback without --debug
        if args.debug:
            traceback.print_exc()
        print(
            f"Error: unexpected {type(exc).__name__}: {terminal(str(exc)[:300])}. This is a bug in shrinkray; "
            "rerun with --debug and report the traceback.",
            file=sys.stderr,
        )
        return 3


if __name__ == "__main__":
    sys.exit(main())

"""Reports of a comparison: JSON, Markdown, CSV, plain text and one self-contained HTML page.

Every format is built from the same :class:`~shrinkray.pipeline.compare.Comparison`
and the same advice, so they never disagree. JSON is strict (NaN and
infinity become ``null``); the HTML page embeds plotly.js once and opens
offline; :func:`write_reports` writes atomically and never into a model file.

Kept as one module (over 600 lines): every format is written from the same rows, one per variant, so
JSON, Markdown, CSV, text and HTML say the same thing.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import html
import io
import json
import math
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from shrinkray import __version__
from shrinkray import pricing as _pricing
from shrinkray.errors import OptionError
from shrinkray.io.files import same_file, write_outputs
from shrinkray.measure.browser import BrowserRun
from shrinkray.measure.confidence import FAIL, PASS, UNDECIDED
from shrinkray.measure.parity import PROFILES, Criterion, VerdictSettings
from shrinkray.measure.results import ORIGINAL, Comparison, VariantResult
from shrinkray.measure.sizes import estimated_note
from shrinkray.report import changes
from shrinkray.report.card_png import to_card_png
from shrinkray.report.one_page import to_one_page
from shrinkray.text_safety import csv_cell, markdown_code, markdown_text
from shrinkray.units import format_bytes, text_table
from shrinkray.verdict import ERROR, UNMEASURED, browser, verdict_of
from shrinkray.verdict.advice import Advice, advise, latency_ratio, pareto, recommended
from shrinkray.verdict.headline import Headline, default_pricing, headline_of
from shrinkray.verdict.speed import NOISY, speed_of, stats_call

SCHEMA_VERSION = 1
#: The delivery mode savings and the recommendation are computed for.
DELIVERY = "brotli"
#: Report paths ending like this are model files (or their external data) and are never written.
MODEL_SUFFIXES = (".onnx", ".ort", ".onnx.data", ".onnx_data")
DASH = "—"


# ---------------------------------------------------------------- JSON


def plain(value: Any) -> Any:
    """A strict-JSON-ready copy: NaN/inf -> None, numpy -> Python, tuples -> lists, keys -> str."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


def _saving(result: VariantResult, base: VariantResult, kind: str) -> float | None:
    """Share of the original's bytes saved (0.25 = 25% smaller; negative = larger)."""
    if result.sizes is None or base.sizes is None:
        return None
    mine, ref = getattr(result.sizes, kind), getattr(base.sizes, kind)
    if mine is None or not ref:
        return None
    return 1.0 - mine / ref


def _variant_json(c: Comparison, result: VariantResult) -> dict[str, Any]:
    record = result.record
    return {
        "key": result.key,
        "is_original": result.key == ORIGINAL,
        "method": result.method,
        "options": result.options,
        "resolved_options": record.get("options"),
        "ok": result.ok,
        "error": result.error,
        "file": result.file,
        "sizes": result.sizes.as_dict() if result.sizes is not None else None,
        "saving_vs_original": {k: _saving(result, c.original, k) for k in ("raw", "gzip", "brotli", "zstd")},
        "parity": result.parity.as_dict(with_samples=False) if result.parity is not None else None,
        "verdict": verdict_of(result).as_dict() if result.key != ORIGINAL else None,
        "speed": _speed_json(c, result) if result.key != ORIGINAL else None,
        "latency": [s.as_dict() for s in result.latency],
        "latency_ratio": latency_ratio(c, result) if result.key != ORIGINAL else None,
        "changes": {
            "tensors_changed": record.get("tensors_changed", 0 if result.key == ORIGINAL else None),
            "weight_bytes_before": record.get("weight_bytes_before"),
            "weight_bytes_after": record.get("weight_bytes_after"),
            "tensors": record.get("changes", []),
        },
        "warnings": result.warnings,
        "notes": result.notes,
        "culprits": [dataclasses.asdict(x) for x in result.culprits],
        "what_changes": [_examples_json(oe) for oe in result.examples],
    }


def _examples_json(oe) -> dict[str, Any]:
    """An output's worst examples as data, without pictures (the input's, a mask's: the HTML pages show those)."""
    data = dataclasses.asdict(oe)
    for example in data["examples"]:
        for picture in ("image", "original_mask", "variant_mask"):
            example.pop(picture, None)
    return plain(data)


def _speed_json(c: Comparison, result: VariantResult) -> dict[str, Any]:
    call = speed_of(c, result)
    return dataclasses.asdict(call) | {"words": call.words}


def _model_json(c: Comparison) -> dict[str, Any]:
    s = c.summary
    return {
        "name": s.name,
        "file_bytes": s.file_bytes,
        "ir_version": s.ir_version,
        "opsets": s.opsets,
        "producer": s.producer,
        "inputs": [{"name": t.name, "dtype": t.dtype, "shape": t.shape} for t in s.inputs],
        "outputs": [{"name": t.name, "dtype": t.dtype, "shape": t.shape} for t in s.outputs],
        "node_count": s.node_count,
        "subgraph_count": s.subgraph_count,
        "weight_tensors": len(s.weights),
        "weight_bytes": s.weight_bytes,
        "weight_share": s.weight_share,
        "custom_ops": s.custom_ops,
        "quantized_ops": s.quantized_ops,
    }


def _headline(c: Comparison, delivery: str, pricing: _pricing.PricingChoice | None) -> Headline:
    """The run's headline, priced with the report's pricing (the defaults without one)."""
    return headline_of(c, pricing or default_pricing(delivery))


def to_json(c: Comparison, delivery: str = DELIVERY, pricing: _pricing.PricingChoice | None = None) -> dict[str, Any]:
    """Everything measured, as a strict-JSON-ready dict (no samples, no models).

    ``variants`` lists the original first (``is_original``), then every
    variant in the order they were requested. With ``pricing`` a ``cost``
    section is added (download cost and saving per variant); without it the
    output is unchanged.
    """

    best = recommended(c, delivery)
    data = {
        "schema_version": SCHEMA_VERSION,
        "generator": f"shrinkray {__version__}",
        "name": c.name,
        "model": _model_json(c),
        "settings": dataclasses.asdict(c.settings),
        "input_note": c.input_note,
        "latency_note": c.latency_note,
        "sizes_note": _sizes_note(c),
        "timings": getattr(c, "timings", {}),
        "delivery": delivery,
        "variants": [_variant_json(c, r) for r in c.all],
        "advice": [a.as_dict() for a in advise(c, delivery)],
        "pareto": [dataclasses.asdict(p) for p in pareto(c, delivery)],
        "recommended": best.key if best is not None else None,
        "headline": _headline(c, delivery, pricing).as_dict(),
    }
    if pricing is not None:
        data["cost"] = _pricing.cost_json(pricing, _pricing.comparison_costs(c, pricing))
    if getattr(c, "browser", None):
        runs = _browser_runs(c)
        data["browser"] = {"runs": [run.as_dict() | {"median_ratio_vs_original": browser.median_ratio(runs, run.key)}
                                    for run in c.browser], "notes": browser.report_notes(c, c.browser)}  # fmt: skip
    return plain(data)


def to_json_text(c: Comparison, delivery: str = DELIVERY, pricing: _pricing.PricingChoice | None = None) -> str:
    """:func:`to_json` as indented strict JSON text."""
    return json.dumps(to_json(c, delivery, pricing), indent=2, allow_nan=False, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------- the shared summary table


def _base_latency(c: Comparison) -> tuple[int, int] | None:
    """(threads, batch) of the first setting the original was timed at, which the table shows."""
    return (c.original.latency[0].threads, c.original.latency[0].batch) if c.original.latency else None


def _brotli_header(c: Comparison) -> str:
    qualities = sorted({r.sizes.brotli_quality for r in c.all if r.sizes is not None})
    if len(qualities) == 1:
        return f"brotli (q{qualities[0]})"
    return f"brotli (q{qualities[0]}-{qualities[-1]})" if qualities else "brotli"


#: A verdict's status in the tables (a failure in capitals, so it stands out in plain text).
_STATUS_CELLS = {PASS: "pass", FAIL: "FAIL", UNDECIDED: "undecided", ERROR: "error", UNMEASURED: DASH}


def _verdict(result: VariantResult) -> str:
    return _STATUS_CELLS[verdict_of(result).status]


def _num(value: float | None, spec: str) -> str:
    if value is None:
        return DASH
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, float) and math.isnan(value):
        return "n/a"
    return format(value, spec)


def verdict_text(verdict: VerdictSettings) -> str:
    """One paragraph: how parity was judged (profile, criteria per kind, the user's overrides)."""
    per_kind = "; ".join(
        f"{kind}: " + ", ".join(Criterion(n, v).text_limit() for n, v in criteria.items())
        for kind, criteria in PROFILES[verdict.profile].items()
    )
    text = f"Parity verdict: {verdict.profile} profile ({per_kind}; integer and bool outputs must match exactly)."
    if verdict.criteria:
        text += " Every output also: " + ", ".join(Criterion(n, v).text_limit() for n, v in verdict.criteria.items()) + "."
    for output, criteria in verdict.per_output.items():
        text += f" Output {output}: " + ", ".join(Criterion(n, v).text_limit() for n, v in criteria.items()) + "."
    if verdict.kinds:
        text += " Kinds set by you: " + ", ".join(f"{k}={v}" for k, v in verdict.kinds.items()) + "."
    return text


OUTPUT_HEADER = ["Output", "Kind", "Verdict", "Decided by", "Rel. RMS err", "Max abs err", "Cosine", "Top-1 kept"]


def output_table(r: VariantResult) -> tuple[list[str], list[list[str]]]:
    """Per output of one variant: its kind, verdict and the measure that decided, with the main numbers."""
    rows = []
    judged = {v.output: v for v in verdict_of(r).outputs}
    for o in r.parity.outputs if r.parity else []:
        m = o.measures
        rows.append(
            [
                o.name, o.kind, _STATUS_CELLS[o.status], judged[o.name].sentence,
                _num(m.get("relative_rms_error"), ".3g"), _num(m.get("abs_error"), ".3g"),
                _num(m.get("cosine"), ".6f"), _num(m.get("top1_agreement"), ".1%"),
            ]
        )  # fmt: skip
    return OUTPUT_HEADER, rows


PRECISION_HEADER = ["Tensor", "Shape", "Precision", "Bytes before", "Bytes after", "Served after (brotli, est.)",
                    "Severity at int8", "at int4"]  # fmt: skip


def precision_table(precision_map: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """auto's choice per tensor with its bytes and the measured severities (1.0 = the verdict's limit)."""
    rows = []
    for row in precision_map:
        sev = row.get("severity", {})
        rows.append(
            [
                row["tensor"], "x".join(map(str, row["shape"])), row["precision"], f"{row['bytes_before']:,}",
                f"{row['bytes_after']:,}", f"{row['served_after']:,}" if "served_after" in row else "-",
                _num(sev.get("int8"), ".3g"), _num(sev.get("int4"), ".3g"),
            ]
        )  # fmt: skip
    return PRECISION_HEADER, rows


def precision_rows(precision_map: list[dict[str, Any]]) -> list[dict[str, str]]:
    header, rows = precision_table(precision_map)
    return [dict(zip(header, row, strict=True)) for row in rows]


def summary_table(c: Comparison, delivery: str = DELIVERY) -> tuple[list[str], list[list[str]]]:
    """Header and one row of display strings per result (original first), shared by text, Markdown and HTML."""
    setting = _base_latency(c)
    latency_head = f"Latency median (ms, {setting[0]} thread, batch {setting[1]})" if setting else "Latency median (ms)"
    header = [
        "Variant", "Raw", "gzip -9", _brotli_header(c), f"Saving vs original ({delivery})", "Parity",
        "Worst cosine", "Max abs err", latency_head, "Latency vs original",
    ]  # fmt: skip
    qualities = {r.sizes.brotli_quality for r in c.all if r.sizes is not None}
    rows = []
    for r in c.all:
        s = r.sizes
        brotli = DASH
        if s is not None:
            brotli = format_bytes(s.brotli) + (f" (q{s.brotli_quality})" if len(qualities) > 1 else "")
            brotli += " as gzip" if s.brotli_encoding == "gzip" else ""  # gzip -9 was smaller: a server sends that
        saving = _saving(r, c.original, delivery)
        stats = r.latency_at(*setting) if setting else None
        ratio = latency_ratio(c, r) if r.key != ORIGINAL else None
        ratio = stats.ratio if ratio is not None and getattr(stats, "ratio", None) is not None else ratio
        parity = r.parity
        rows.append(
            [
                r.key,
                format_bytes(s.raw) if s else DASH,
                format_bytes(s.gzip) if s else DASH,
                brotli,
                DASH if r.key == ORIGINAL or saving is None else f"{saving:.1%}",
                _verdict(r),
                _num(parity.worst_cosine if parity else None, ".8g"),
                _num(parity.max_abs_error if parity else None, ".3g"),
                _num(stats.median_ms if stats else None, ".3f"),
                _num(ratio, ".2f") + ("x" if ratio is not None else "") + _interval(stats),
            ]
        )
    return header, rows


def _interval(stats) -> str:
    """' [0.97-1.03]' (95% interval of the ratio), or ' (too noisy to tell)'; empty for the original."""
    if stats is None or getattr(stats, "ratio_low", None) is None:
        return ""
    return " (too noisy to tell)" if stats_call(stats) == NOISY else f" [{stats.ratio_low:.2f}-{stats.ratio_high:.2f}]"


def timings_text(c: Comparison) -> str:
    """'Phase timings: shrink 1.2 s, sizes 0.8 s, ... (total 9.9 s)' for `compare --timings`."""
    timings = getattr(c, "timings", {}) or {}
    if not timings:
        return "Phase timings: not recorded"
    parts = ", ".join(f"{phase} {seconds:.1f} s" for phase, seconds in timings.items())
    return f"Phase timings: {parts} (total {sum(timings.values()):.1f} s)"


# ---------------------------------------------------------------- Markdown


def _md(text: object) -> str:
    """Prose or a table cell, shown literally: one line; HTML, links, images, emphasis, pipes, ``$`` escaped."""
    return markdown_text(text)


def _md_code(text: object) -> str:
    """A name as inline code that survives backticks and pipes inside it."""
    return markdown_code(text)


_md_dollars = _md  # ``$`` is escaped by _md too, so two amounts never read as a math span


def _md_table(header: list[str], rows: list[list[str]], escape: bool = True) -> list[str]:
    cell = _md if escape else (lambda v: v)
    lines = ["| " + " | ".join(_md(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return lines


_LEVEL_WORDS = {"good": "Good", "info": "Note", "warning": "Warning", "bad": "Problem"}


def _tolerances(c: Comparison) -> str:
    return verdict_text(c.settings.verdict)


def to_markdown(c: Comparison, delivery: str = DELIVERY, pricing: _pricing.PricingChoice | None = None) -> str:
    """A readable report: summary table, advice, then per-variant details (warnings, parity per output, culprits).

    With ``pricing`` a "Download cost" section follows the summary table.
    """
    s = c.summary
    header, rows = summary_table(c, delivery)
    sizes_note = _sizes_note(c)
    lines = [
        f"# Shrink Ray report: {_md(c.name)}",
        "",
        f"**{_md(_headline(c, delivery, pricing).text())}**",
        "",
        (
            f"Model: {format_bytes(s.file_bytes)} ({s.file_bytes:,} bytes), {s.node_count:,} nodes, "
            f"weights {format_bytes(s.weight_bytes)} ({s.weight_share:.1%} of the file)."
        ),
        "",
        f"Inputs: {_md(c.input_note) or DASH}",
        "",
        f"Latency: {_md(c.latency_note) or 'not measured'}",
        "",
        *([_md(sizes_note), ""] if sizes_note else []),
        _tolerances(c),
        "",
        "## Summary",
        "",
        *_md_table(header, [[_md_code(row[0]), *row[1:]] for row in rows], escape=False),
        "",
    ]
    if pricing is not None:
        cost_header, cost_rows = _pricing.cost_table(pricing, _pricing.comparison_costs(c, pricing))
        assumptions, source = (_md_dollars(n) for n in _pricing.cost_notes(pricing))
        cost_rows = [[_md_code(r[0]), *(_md_dollars(v) for v in r[1:])] for r in cost_rows]
        lines += ["## Download cost", "", assumptions, "", *_md_table(cost_header, cost_rows, escape=False), ""]
        lines += [source, ""]
    lines += ["## Advice", ""]
    advice = advise(c, delivery)
    lines += [f"- **{_LEVEL_WORDS.get(a.level, a.level)}**: {_md(a.text)}" for a in advice] or ["- (none)"]
    if getattr(c, "browser", None):  # runs in the user's browser (the app's Compare page)
        header, rows = browser.report_table(c, c.browser)
        lines += ["", "## In your browser", "", *_md_table(header, rows), ""]
        lines += [f"- {_md(note)}" for note in browser.report_notes(c, c.browser)]
    lines += ["", "## Variants", ""]
    for r in c.variants:
        lines += _md_variant(c, r)
    return "\n".join(lines).rstrip() + "\n"


def _md_variant(c: Comparison, r: VariantResult) -> list[str]:
    lines = [f"### {_md_code(r.key)}", ""]
    options = ", ".join(f"{k}={v}" for k, v in r.options.items()) or "defaults"
    lines.append(f"Method: {_md(r.method)}; options: {_md(options)}.")
    lines.append("")
    if not r.ok:
        return [*lines, f"**Could not be used**: {_md(r.error)}", ""]
    if r.key != ORIGINAL:
        lines += [f"**Verdict**: {_md(verdict_of(r).sentence)}", ""]
    rec = r.record
    if rec:
        lines += [
            (
                f"Rewrote {rec.get('tensors_changed', 0)} tensors: {format_bytes(rec.get('weight_bytes_before', 0))} of "
                f"weights became {format_bytes(rec.get('weight_bytes_after', 0))}."
            ),
            "",
        ]
    if r.parity is not None:
        header, out_rows = output_table(r)
        lines += _md_table(header, [[_md_code(row[0]), *(_md(v) for v in row[1:])] for row in out_rows], escape=False)
        lines.append("")
    if r.examples:
        lines += ["What changes (the inputs where it differs most from the original, worst first):", ""]
        for oe in r.examples:
            lines += changes.examples_markdown(oe, r.key)
    if r.warnings:
        lines += ["Warnings:", "", *[f"- {_md(w)}" for w in r.warnings], ""]
    if r.notes:
        lines += ["Notes:", "", *[f"- {_md(n)}" for n in r.notes], ""]
    precision = r.record.get("details", {}).get("precision_map")
    if precision:
        header, rows = precision_table(precision)
        lines += ["Precision per tensor (chosen by auto):", ""]
        lines += _md_table(header, [[_md_code(row[0]), *(_md(v) for v in row[1:])] for row in rows], escape=False)
        lines.append("")
    if r.culprits:
        lines += ["Tensors that move the outputs most when rewritten alone:", ""]
        lines += _md_table(
            ["Tensor", "Max abs err", "Mean abs err", "Worst cosine", "Passes alone"],
            [
                [
                    _md_code(x.tensor),
                    _num(x.max_abs_error, ".3g"),
                    _num(x.mean_abs_error, ".3g"),
                    _num(x.worst_cosine, ".8g"),
                    "yes" if x.passes_alone else "no",
                ]
                for x in r.culprits
            ],
            escape=False,
        )
        lines.append("")
    return lines


# ---------------------------------------------------------------- plain text (CLI)


def verdict_lines(c: Comparison) -> list[str]:
    """'Verdicts:' then one line per variant: its verdict sentence and, when timed, the call on its speed."""
    lines = ["Verdicts:"]
    for r in c.variants:
        speed = speed_of(c, r).words
        lines.append(f"- {r.key}: {verdict_of(r).sentence}" + (f" Speed: {speed}." if speed else ""))
    return lines if c.variants else []


def change_lines(c: Comparison) -> list[str]:
    """'What changes (the worst input per output):' then, per variant and output, its worst example in one line."""
    lines = ["What changes (the worst input per output; differing characters in [brackets]):"]
    for r in c.variants:
        lines += [f"- {r.key} · {changes.worst_line(oe)}" for oe in r.examples if oe.worst is not None]
    return lines


def _sizes_note(c: Comparison) -> str:
    """How the sizes were measured, when some were estimated (files over 128 MiB), else ""."""
    return estimated_note(r.sizes for r in c.all)


def to_text(c: Comparison, delivery: str = DELIVERY, pricing: _pricing.PricingChoice | None = None,
            hints: bool = True) -> str:  # fmt: skip
    """The summary table and advice for a terminal (with ``pricing``, a download cost table after the summary).
    ``hints=False``: each advice without what to try (a front end that words the hints its own way after it)."""
    header, rows = summary_table(c, delivery)
    setting = _base_latency(c)
    header = [*header[:4], "Saving", "Parity", "Cosine", "Max err",
              f"ms (t{setting[0]}, b{setting[1]})" if setting else "ms", "vs orig"]  # fmt: skip
    lines = [_headline(c, delivery, pricing).text(), "", f"{c.name}: {c.input_note}"]
    if c.latency_note:
        lines.append(f"Latency: {c.latency_note}")
    if sizes_note := _sizes_note(c):
        lines.append(f"Sizes: {sizes_note}")
    lines += [_tolerances(c), "", *text_table([header, *rows]), "", *verdict_lines(c), ""]
    lines += [*change_lines(c), ""] if any(r.examples for r in c.variants) else []
    if pricing is not None:
        cost_header, cost_rows = _pricing.cost_table(pricing, _pricing.comparison_costs(c, pricing))
        notes = _pricing.cost_notes(pricing)
        lines += [notes[0], "", *text_table([cost_header, *cost_rows], right_from=1), "", notes[1], ""]
    tags = {"good": "[good]", "info": "[info]", "warning": "[warn]", "bad": "[bad] "}
    lines += [f"{tags.get(a.level, a.level)} {a.text if hints else a.problem or a.text}" for a in advise(c, delivery)]
    return "\n".join(lines).rstrip()


# ---------------------------------------------------------------- CSV


FIXED_COLUMNS = [
    "key", "method", "options_json", "ok", "error",
    "raw_bytes", "gzip_bytes", "gzip_level", "brotli_bytes", "brotli_quality", "zstd_bytes", "zstd_level",
    "brotli_encoding", "brotli_encoded_bytes", "brotli_window", "zstd_encoding",
    "raw_saving_percent", "gzip_saving_percent", "brotli_saving_percent",
    "parity_passed", "verdict", "verdict_sentence", "parity_decided_by", "parity_severity", "max_abs_error", "mean_abs_error", "worst_cosine",
    "tensors_changed", "weight_bytes_before", "weight_bytes_after",
    "warnings_count", "top_culprits", "latency_ratio_vs_original",
]  # fmt: skip


def _latency_settings(c: Comparison) -> list[tuple[int, int]]:
    return sorted({(s.threads, s.batch) for r in c.all for s in r.latency})


#: Per result, when the comparison carries runs in the user's browser (the app's "In your browser" panel).
BROWSER_COLUMNS = ["browser_backend", "browser_median_ms", "browser_latency_ratio_vs_original", "browser_parity_passed"]


def csv_columns(c: Comparison) -> list[str]:
    """Column names: the fixed ones, then median, p90, throughput and the ratio to the original with its 95%
    interval and whether it settled within the target, for every (threads, batch) timed; then the browser's
    backend, median, ratio and verdict when the comparison carries runs in the user's browser."""
    columns = list(FIXED_COLUMNS)
    for t, b in _latency_settings(c):
        columns += [f"latency_median_ms_t{t}_b{b}", f"latency_p90_ms_t{t}_b{b}", f"throughput_per_s_t{t}_b{b}"]
        columns += [f"latency_ratio_t{t}_b{b}", f"latency_ratio_low_t{t}_b{b}", f"latency_ratio_high_t{t}_b{b}",
                    f"latency_settled_t{t}_b{b}"]  # fmt: skip
    if _browser_runs(c):
        columns += BROWSER_COLUMNS
    return columns


def _browser_runs(c: Comparison) -> dict[str, BrowserRun]:
    return {run.key: run for run in (getattr(c, "browser", None) or [])}


def _browser_cells(runs: dict[str, BrowserRun], key: str) -> dict[str, Any]:
    run = runs.get(key)
    return dict(zip(BROWSER_COLUMNS, (run.backend if run else None, run.median_ms if run else None,
                                      browser.median_ratio(runs, key), run.passed if run else None), strict=True))  # fmt: skip


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    if isinstance(value, (int, np.integer)):
        return str(value)
    return csv_cell(" ".join(str(value).split()))  # names from the model: never a spreadsheet formula


def _percent(share: float | None) -> float | None:
    return None if share is None else share * 100.0


def to_csv(c: Comparison, pricing: _pricing.PricingChoice | None = None) -> str:
    """One row per result (original first); numbers unrounded, units in the column names, empty = not measured.

    With ``pricing`` the download cost columns (``cost_*``, ``saving_*``) are appended.
    """
    columns = csv_columns(c) + (_pricing.cost_csv_columns(pricing) if pricing is not None else [])
    costs = {vc.key: vc for vc in _pricing.comparison_costs(c, pricing)} if pricing is not None else {}
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    in_browser = _browser_runs(c)
    for r in c.all:
        s, p, rec = r.sizes, r.parity, r.record
        row: dict[str, Any] = {
            "key": r.key,
            "method": r.method or "",
            "options_json": json.dumps(plain(r.options), sort_keys=True),
            "ok": r.ok,
            "error": r.error,
            "raw_bytes": s.raw if s else None,
            "gzip_bytes": s.gzip if s else None,
            "gzip_level": s.gzip_level if s else None,
            "brotli_bytes": s.brotli if s else None,
            "brotli_quality": s.brotli_quality if s else None,
            "zstd_bytes": s.zstd if s else None,
            "zstd_level": s.zstd_level if s else None,
            "brotli_encoding": s.brotli_encoding if s else None,
            "brotli_encoded_bytes": s.brotli_encoded if s else None,
            "brotli_window": s.brotli_window if s else None,
            "zstd_encoding": s.zstd_encoding if s else None,
            "raw_saving_percent": _percent(_saving(r, c.original, "raw")),
            "gzip_saving_percent": _percent(_saving(r, c.original, "gzip")),
            "brotli_saving_percent": _percent(_saving(r, c.original, "brotli")),
            "parity_passed": p.passed if p else None,
            "verdict": verdict_of(r).status if r.key != ORIGINAL else None,
            "verdict_sentence": verdict_of(r).sentence if r.key != ORIGINAL else None,
            "parity_decided_by": p.decided_by if p else None,
            "parity_severity": p.severity if p else None,
            "max_abs_error": p.max_abs_error if p else None,
            "mean_abs_error": p.mean_abs_error if p else None,
            "worst_cosine": p.worst_cosine if p else None,
            "tensors_changed": rec.get("tensors_changed", 0 if r.key == ORIGINAL else None),
            "weight_bytes_before": rec.get("weight_bytes_before"),
            "weight_bytes_after": rec.get("weight_bytes_after"),
            "warnings_count": len(r.warnings),
            "top_culprits": ";".join(x.tensor for x in r.culprits[:3]),
            "latency_ratio_vs_original": latency_ratio(c, r) if r.key != ORIGINAL else None,
        }
        for t, b in _latency_settings(c):
            stats = r.latency_at(t, b)
            row[f"latency_median_ms_t{t}_b{b}"] = stats.median_ms if stats else None
            row[f"latency_p90_ms_t{t}_b{b}"] = stats.p90_ms if stats else None
            row[f"throughput_per_s_t{t}_b{b}"] = stats.throughput if stats else None
            for name in ("ratio", "ratio_low", "ratio_high", "settled"):
                row[f"latency_{name}_t{t}_b{b}"] = getattr(stats, name, None) if r.key != ORIGINAL else None
        if in_browser:
            row |= _browser_cells(in_browser, r.key)
        if pricing is not None:
            row |= _pricing.cost_csv_values(pricing, costs[r.key])
        writer.writerow({k: _cell(v) for k, v in row.items()})
    return buffer.getvalue()


# ---------------------------------------------------------------- HTML

_CSS = """
.headline { font-size: 1.15rem; font-weight: 600; padding: .8rem 1rem; border: 1px solid var(--line); border-radius: 8px; }
:root { --fg:#1f2328; --muted:#57606a; --line:#d0d7de; --good:#1a7f37; --info:#0969da; --warn:#9a6700;
        --bad:#cf222e; }
* { box-sizing: border-box; }
body { font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       max-width: 1200px; margin: 0 auto; padding: 24px; }
h1 { font-size: 28px; margin: 0 0 4px; } h2 { font-size: 22px; margin-top: 36px;
     border-bottom: 1px solid var(--line); padding-bottom: 4px; } h3 { font-size: 18px; margin: 0; }
.meta { color: var(--muted); margin: 2px 0; }
table { border-collapse: collapse; width: 100%; margin: 12px 0; font-size: 15px; }
th, td { border: 1px solid var(--line); padding: 6px 8px; text-align: right; vertical-align: top; }
th { background: #f6f8fa; } td:first-child, th:first-child { text-align: left; }
td { white-space: nowrap; } td.text { text-align: left; white-space: normal; min-width: 16em; }
.table-wrap { overflow-x: auto; }
code { font: 14px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: #f6f8fa;
       padding: 1px 4px; border-radius: 4px; overflow-wrap: anywhere; }
.pass { color: var(--good); font-weight: 600; } .FAIL, .error { color: var(--bad); font-weight: 600; }
ul.advice { list-style: none; padding: 0; } ul.advice li { border-left: 5px solid var(--line); margin: 8px 0;
            padding: 6px 12px; background: #f6f8fa; }
li.good { border-color: var(--good) !important; } li.info { border-color: var(--info) !important; }
li.warning { border-color: var(--warn) !important; } li.bad { border-color: var(--bad) !important; }
.level { font-weight: 600; margin-right: 6px; }
.chart { margin: 18px 0 28px; }
details { border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; margin: 10px 0; }
summary { cursor: pointer; } summary h3 { display: inline; }
footer { color: var(--muted); font-size: 13px; margin-top: 40px; }
"""


def _h(text: object) -> str:
    return html.escape(str(text), quote=True)


def _html_table(header: list[str], rows: list[list[str]], code_first: bool = True, wrap_last: bool = False) -> str:
    """A table of escaped cells; the first column as code (names), the last one wrapping when it is prose."""
    head = "".join(f"<th>{_h(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for i, value in enumerate(row):
            if i == 0:
                inner = f"<code>{_h(value)}</code>" if code_first else _h(value)
                cells.append(f'<td class="name">{inner}</td>')
                continue
            classes = [value] if value in ("pass", "FAIL", "error") else []
            if wrap_last and i == len(row) - 1:
                classes.append("text")
            attr = f' class="{" ".join(classes)}"' if classes else ""
            cells.append(f"<td{attr}>{_h(value)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _html_advice(items: list[Advice]) -> str:
    if not items:
        return "<p>No advice.</p>"
    lis = [
        f'<li class="{_h(a.level)}"><span class="level">{_h(_LEVEL_WORDS.get(a.level, a.level))}</span>{_h(a.text)}</li>'
        for a in items
    ]
    return '<ul class="advice">' + "".join(lis) + "</ul>"


def _html_variant(r: VariantResult) -> str:
    parts = [f"<details{' open' if not r.ok else ''}><summary><h3><code>{_h(r.key)}</code></h3>"]
    if not r.ok:
        parts.append(' <span class="error">could not be used</span>')
    elif r.parity is not None:
        verdict = _verdict(r)
        parts.append(f' <span class="{verdict}">parity {verdict}</span>')
    parts.append("</summary>")
    options = ", ".join(f"{k}={v}" for k, v in r.options.items()) or "defaults"
    parts.append(f"<p>Method <code>{_h(r.method)}</code>; options: {_h(options)}.</p>")
    if not r.ok:
        parts.append(f'<p class="error">{_h(r.error)}</p></details>')
        return "".join(parts)
    if r.key != ORIGINAL:
        parts.append(f"<p><strong>Verdict</strong>: {_h(verdict_of(r).sentence)}</p>")
    rec = r.record
    if rec:
        parts.append(
            f"<p>Rewrote {_h(rec.get('tensors_changed', 0))} tensors: "
            f"{_h(format_bytes(rec.get('weight_bytes_before', 0)))} of weights became "
            f"{_h(format_bytes(rec.get('weight_bytes_after', 0)))}.</p>"
        )
    if r.parity is not None:
        header, rows = output_table(r)
        parts.append(_html_table(header, rows))
    if r.examples:
        parts.append("<p><strong>What changes</strong> (the inputs where it differs most from the original, worst "
                     "first)</p>" + changes.variant_html(r))  # fmt: skip
    if r.warnings:
        parts.append(
            "<p><strong>Warnings</strong></p><ul>" + "".join(f"<li>{_h(w)}</li>" for w in r.warnings) + "</ul>"
        )
    if r.notes:
        parts.append("<p><strong>Notes</strong></p><ul>" + "".join(f"<li>{_h(n)}</li>" for n in r.notes) + "</ul>")
    precision = r.record.get("details", {}).get("precision_map")
    if precision:
        parts.append("<p><strong>Precision per tensor (chosen by auto)</strong></p>")
        parts.append(_html_table(*precision_table(precision)))
    if r.culprits:
        rows = [
            [x.tensor, _num(x.max_abs_error, ".3g"), _num(x.mean_abs_error, ".3g"),
             _num(x.worst_cosine, ".8g"), "yes" if x.passes_alone else "no"]
            for x in r.culprits
        ]  # fmt: skip
        parts.append("<p><strong>Tensors that move the outputs most when rewritten alone</strong></p>")
        parts.append(_html_table(["Tensor", "Max abs err", "Mean abs err", "Worst cosine", "Passes alone"], rows))
    parts.append("</details>")
    return "".join(parts)


def _script_json(data: Any) -> str:
    """JSON that cannot end a <script> element or open a comment."""
    text = json.dumps(data, allow_nan=False, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _html_browser(c: Comparison) -> list[str]:
    """The runs in the user's browser, when the app measured them."""
    if not getattr(c, "browser", None):
        return []
    header, rows = browser.report_table(c, c.browser)
    notes = "".join(f"<li>{_h(note)}</li>" for note in browser.report_notes(c, c.browser))
    return ["<h2>In your browser</h2>", _html_table(header, rows, wrap_last=True), f"<ul>{notes}</ul>"]


def to_html(c: Comparison, delivery: str = DELIVERY, pricing: _pricing.PricingChoice | None = None) -> str:
    """One self-contained page (plotly.js inlined once, no network access) with the table, advice and charts."""
    from plotly.offline import get_plotlyjs

    from shrinkray.report import charts  # start-up: plotly loads only for the HTML page

    s = c.summary
    sizes_note = _sizes_note(c)
    header, rows = summary_table(c, delivery)
    figures = []
    for name, fig in charts.all_figures(c).items():
        height = fig.layout.height or charts.HEIGHT
        div = fig.to_html(
            full_html=False,
            include_plotlyjs=False,
            config={"displaylogo": False, "responsive": True},
            default_width="100%",
            default_height=f"{height}px",
        )
        figures.append(f'<section class="chart" data-chart="{_h(name)}">{div}</section>')
    page = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Shrink Ray report: {_h(c.name)}</title>",
        f"<style>{_CSS}{changes.CSS}</style>",
        f'<script type="text/javascript">{get_plotlyjs()}</script>',
        "</head><body>",
        f"<h1>Shrink Ray report: {_h(c.name)}</h1>",
        f'<p class="headline">{_h(_headline(c, delivery, pricing).text())}</p>',
        (
            f'<p class="meta">Model: {_h(format_bytes(s.file_bytes))} ({s.file_bytes:,} bytes), {s.node_count:,} nodes, '
            f"weights {_h(format_bytes(s.weight_bytes))} ({s.weight_share:.1%} of the file).</p>"
        ),
        f'<p class="meta">Inputs: {_h(c.input_note or DASH)}</p>',
        f'<p class="meta">Latency: {_h(c.latency_note or "not measured")}</p>',
        f'<p class="meta">Sizes: {_h(sizes_note)}</p>' if sizes_note else "",
        f'<p class="meta">{_h(_tolerances(c))}</p>',
        "<h2>Summary</h2>",
        _html_table(header, rows),
        "<h2>Advice</h2>",
        _html_advice(advise(c, delivery)),
        *_html_browser(c),
        "<h2>Charts</h2>",
        *figures,
        "<h2>Variants</h2>",
        *[_html_variant(r) for r in c.variants],
        f'<script type="application/json" id="shrinkray-report">{_script_json(to_json(c, delivery))}</script>',
        (
            f"<footer>Written by shrinkray {_h(__version__)} (report schema {SCHEMA_VERSION}). This page works offline;"
            " the data above is also embedded as JSON (#shrinkray-report).</footer>"
        ),
        "</body></html>",
    ]
    return "\n".join(page) + "\n"


# ---------------------------------------------------------------- writing


def _is_model_path(path: Path) -> bool:
    names = [path.name.lower()]
    with contextlib.suppress(OSError):
        names.append(path.resolve().name.lower())
    return any(name.endswith(MODEL_SUFFIXES) for name in names)


def _check_report_path(path: Path) -> None:
    if _is_model_path(path):
        raise OptionError(f"Refusing to write a report to {path}", "Report paths must not be .onnx (model) files")
    if path.is_dir():
        raise OptionError(f"{path} is a folder", "Give a file name for the report")
    if path.exists() and not path.is_file():
        raise OptionError(f"{path} is not a regular file", "Give a file name for the report")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise OptionError(f"The folder {parent} does not exist", "Create it first")


def write_reports(
    c: Comparison,
    json_path: str | os.PathLike | None = None,
    markdown_path: str | os.PathLike | None = None,
    csv_path: str | os.PathLike | None = None,
    html_path: str | os.PathLike | None = None,
    pricing: _pricing.PricingChoice | None = None,
    protect: list[str | os.PathLike] | None = None,
    one_page_path: str | os.PathLike | None = None,
    card_png_path: str | os.PathLike | None = None,
) -> list[Path]:
    """Write the reports that have a path and return the paths written: all of them, or none.

    ``pricing`` adds the download cost to the JSON, Markdown and CSV reports and prices the headline of
    every report; ``one_page_path``: the one page to send (:mod:`shrinkray.report.one_page`);
    ``card_png_path``: the headline card as a 1200x630 PNG (:mod:`shrinkray.report.card_png`).

    Existing report files are replaced (the user named them); a path that is
    a model file (``.onnx``, also through a symlink, or its external data), one
    of the ``protect`` files (the inputs: model, archive, data files, ``.npz``;
    whatever their names), a folder, or named twice is refused before anything
    is written. A failed write (full disk, read-only folder) leaves every
    target as it was and raises WriteError.
    """
    builders: list[tuple[str | os.PathLike | None, Callable[[Comparison], str | bytes]]] = [
        (json_path, partial(to_json_text, pricing=pricing)),
        (markdown_path, partial(to_markdown, pricing=pricing)),
        (csv_path, partial(to_csv, pricing=pricing)),
        (html_path, partial(to_html, pricing=pricing)),
        (one_page_path, partial(to_one_page, pricing=pricing)),
        (card_png_path, partial(to_card_png, pricing=pricing)),
    ]
    chosen = [(Path(p), build) for p, build in builders if p is not None and str(p) != ""]
    check_report_paths([path for path, _ in chosen], protect=protect)
    contents = {path: _encoded(build(c)) for path, build in chosen}  # build all before writing any
    return write_outputs(contents)


def _encoded(content: str | bytes) -> bytes:
    return content if isinstance(content, bytes) else content.encode("utf-8")


def check_report_paths(
    paths: list[str | os.PathLike | None], protect: list[str | os.PathLike | None] | None = None
) -> None:
    """Refuse model files, the ``protect`` files (inputs), folders, missing folders and duplicates;
    call it before long work."""
    seen: set[Path] = set()
    for raw in paths:
        if raw is None or str(raw) == "":
            continue
        path = Path(raw)
        for other in protect or []:
            if other is not None and str(other) != "" and same_file(path, Path(other)):
                raise OptionError(
                    f"Refusing to write a report to {path}: it is one of the input files",
                    "Give the report another file name",
                )
        _check_report_path(path)
        resolved = path.resolve()
        if resolved in seen:
            raise OptionError(f"{path} is named for two reports", "Give each report its own file")
        seen.add(resolved)


__all__ = [
    "SCHEMA_VERSION",
    "check_report_paths",
    "csv_columns",
    "plain",
    "summary_table",
    "to_csv",
    "to_html",
    "to_json",
    "to_json_text",
    "to_markdown",
    "to_text",
    "write_reports",
]

"""Does the parity verdict agree with the truth on real models? (issue 11)

For every real model of ``bench/common/real_models.py`` and every method, four answers to "is this variant
still good?":

* **task**: the truth. The package's own post-processing on REALISTIC inputs, original vs variant
  (same decoded text, same boxes, same top-1 class, same speech frames, same sentence embedding).

The report also lists the kind each profile gave every output (``scores``, ``continuous``, ``embedding``,
``map``, ``detections``, ``exact``: shrinkray/measure/output_kinds.py) and why, since the kind decides
how an output is judged.
* **old**: ``compare`` with the absolute verdict (max abs 0.06, mean abs 0.02, cosine >= 0.99) on
  the product's own synthesized inputs.
* **new**: ``compare`` with the default ``CompareSettings()`` on synthesized inputs.
* **new/real**: the default verdict on the realistic inputs (``CompareSettings(inputs_path=NPZ)``,
  the feeds saved as .npz keyed by input name).

A verdict agrees when it passes exactly the variants whose task check passes. A verdict that could
not be computed ("error: ...") counts as a disagreement.

    python -m bench verdicts                                   # all models, all methods (~10 min, 2 cores)
    python -m bench verdicts --models ppocr-rec,magika --methods weights-int8,palettize:levels=16
    python -m bench verdicts --out /tmp/v.md                   # default: bench/out/verdicts.md

Models are cached outside the repository (``$SHRINKRAY_BENCH_CACHE``, default
``~/.cache/shrinkray-bench``); the realistic inputs go to ``bench/out/inputs/KEY.npz`` and the raw
results to ``bench/out/verdicts.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from common import real_models as rm  # noqa: E402
from common import results  # noqa: E402

import shrinkray  # noqa: E402
from shrinkray.pipeline.compare import CompareSettings, compare  # noqa: E402

DEFAULT_METHODS = "dynamic-int8,weights-int8,palettize:levels=16,palettize:levels=256,float16"
PROFILES = ("old", "new", "new/real")
#: The run budget (SHRINKRAY_MAX_RUN_SECONDS) of each comparison here, unless the environment sets one.
RUN_SECONDS = 900
#: Box task checks are also judged at this IoU (the default bar is real_models.IOU_MATCH = 0.9).
LOOSE_IOU = 0.8


def parse_method(text: str) -> tuple[str, dict[str, Any]]:
    """'palettize:levels=16' -> ('palettize', {'levels': 16})."""
    name, _, rest = text.partition(":")
    opts: dict[str, Any] = {}
    for part in filter(None, rest.split(",")):
        k, _, v = part.partition("=")
        try:
            opts[k] = int(v)
        except ValueError:
            try:
                opts[k] = float(v)
            except ValueError:
                opts[k] = v
    return name.strip(), opts


def method_label(name: str, opts: dict[str, Any]) -> str:
    return name + "".join(f" {k}={v}" for k, v in opts.items())


def verdict_settings(
    profile: str, methods: list[tuple[str, dict[str, Any]]], inputs_path: str | None = None
) -> CompareSettings:
    """The CompareSettings of one verdict profile: the ONE place that says what "old" and "new" are.

    ``old`` is the absolute verdict (0.06 / 0.02 / cosine 0.99); when the engine has a named
    profile (``CompareSettings(verdict="absolute")``) it is used instead of the three numbers.
    ``new`` is whatever ``CompareSettings()`` does by default. ``new/real`` is ``new`` on the
    realistic inputs. Latency and the culprit search are off, brotli at quality 0 (sizes are not
    what this bench measures).
    """
    speed = {"methods": list(methods), "latency": False, "culprits": False, "brotli_quality": 0}
    names = {f.name for f in dataclasses.fields(CompareSettings)}
    if profile == "old":
        if "verdict" in names:  # the engine's named profile (shrinkray.measure.parity.ABSOLUTE_PROFILE)
            from shrinkray.measure.parity import VerdictSettings

            return CompareSettings(verdict=VerdictSettings(profile="absolute"), **speed)
        return CompareSettings(abs_tol=0.06, mean_tol=0.02, min_cosine=0.99, **speed)
    if profile == "new":
        return CompareSettings(**speed)
    if profile == "new/real":
        if not inputs_path:
            raise ValueError("new/real needs the realistic inputs (.npz)")
        return CompareSettings(inputs_path=inputs_path, **speed)
    raise ValueError(f"unknown verdict profile {profile!r}: one of {', '.join(PROFILES)}")


#: The engine before the verdict rewrite (absolute verdict on noise inputs): the product as issue 11 found it.
BASELINE_COMMIT = "7fbf8a3"  # no longer imports with today's dependencies: the column is off unless asked for
BEFORE = "before"

_BASELINE_CODE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import shrinkray
from shrinkray.pipeline.compare import CompareSettings, compare
methods = json.loads(sys.argv[3])
out = {"verdicts": [], "note": ""}
try:
    c = compare(shrinkray.load(sys.argv[2]), CompareSettings(methods=[tuple(m) for m in methods], abs_tol=0.06,
                mean_tol=0.02, min_cosine=0.99, latency=False, culprits=False, brotli_quality=0))
    out["note"] = c.input_note
    for v in c.variants[: len(methods)]:
        if v.error:
            out["verdicts"].append(["error: " + " ".join(v.error.split())[:120], None])
        elif v.parity is None:
            out["verdicts"].append(["not measured", None])
        else:
            out["verdicts"].append(["pass" if v.parity.passed else "fail", v.parity.worst_cosine])
except Exception as exc:
    msg = "error: " + type(exc).__name__ + ": " + " ".join(str(exc).split())[:140]
    out["note"] = msg
    out["verdicts"] = [[msg, None] for _ in methods]
print("@@" + json.dumps(out))
"""


def baseline_engine(commit: str) -> Path:
    """The engine's source at ``commit``, unpacked into the cache with ``git archive`` (the work tree is
    not touched)."""
    import io
    import tarfile

    folder = rm.cache_dir() / f"engine-{commit}"
    if not (folder / "shrinkray" / "__init__.py").exists():
        blob = subprocess.run(
            ["git", "-C", str(HERE.parent), "archive", "--format=tar", commit, "shrinkray"],
            capture_output=True,
            check=True,
        ).stdout
        folder.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
            tar.extractall(folder, filter="data")
    return folder


def baseline_verdicts(model_path: Path, methods: list[tuple[str, dict[str, Any]]], commit: str) -> dict[str, Any]:
    """The pre-rewrite product's verdicts, in a child process that imports the old engine; cached in
    bench/out/before_cache.json by model hash, methods and commit (they cannot change)."""
    import hashlib

    cache = HERE / "out" / "before_cache.json"
    digest = hashlib.sha256(model_path.read_bytes()).hexdigest()[:16]
    key = f"{digest}|{commit}|{json.dumps(methods, sort_keys=True)}"
    stored = json.loads(cache.read_text()) if cache.exists() else {}
    if key in stored:
        return stored[key]
    result = _baseline_run(model_path, methods, commit)
    if not result["note"].startswith("error: baseline engine crashed"):
        stored[key] = result
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(stored, indent=1))
    return result


def _baseline_run(model_path: Path, methods: list[tuple[str, dict[str, Any]]], commit: str) -> dict[str, Any]:
    engine = baseline_engine(commit)
    proc = subprocess.run(
        [sys.executable, "-c", _BASELINE_CODE, str(engine), str(model_path), json.dumps(methods)],
        capture_output=True,
        text=True,
        check=False,
        cwd=str(rm.cache_dir()),
    )
    for line in proc.stdout.splitlines():
        if line.startswith("@@"):
            return json.loads(line[2:])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    msg = f"error: baseline engine crashed: {_one_line(tail[0], 120)}"
    return {"verdicts": [[msg, None] for _ in methods], "note": msg}


def _one_line(text: str, limit: int = 160) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _verdict(result) -> tuple[str, dict[str, Any]]:
    """'pass' / 'fail' / 'undecided' / 'error: ...' / 'not measured' and the numbers behind it."""
    if result.error:
        return f"error: {_one_line(result.error, 120)}", {}
    parity = result.parity
    if parity is None:
        return "not measured", {"notes": [_one_line(n) for n in result.notes]}
    info = {
        "worst_cosine": parity.worst_cosine,
        "max_abs_error": parity.max_abs_error,
        "failing": [
            f"{o.name}: {_one_line(o.reason, 200)}" if o.reason else o.name for o in parity.outputs if not o.passed
        ],
    }
    return parity.status, info  # pass / fail / undecided (too few decisions: an abstention, never an agreement)


def run_model(key: str, methods: list[tuple[str, dict[str, Any]]], say, baseline: str = "") -> dict[str, Any]:
    """Task check and the three verdicts for every method on one model."""
    started = time.perf_counter()
    record: dict[str, Any] = {"model": key, "rows": [], "notes": []}
    try:
        case = rm.Case(key)
    except Exception as exc:  # noqa: BLE001 - a model that cannot be fetched or run is reported
        record["error"] = f"{type(exc).__name__}: {_one_line(exc)}"
        say(f"{key}: cannot prepare ({record['error']})")
        return record
    record["describe"] = rm.describe(key)
    record["original_accuracy"] = case.accuracy()
    npz = case.save_inputs(HERE / "out" / "inputs" / f"{key}.npz")
    loaded = shrinkray.load(str(case.path))

    comparisons: dict[str, Any] = {}
    for profile in PROFILES:
        t0 = time.perf_counter()
        try:
            settings = verdict_settings(profile, methods, str(npz) if profile == "new/real" else None)
            comparisons[profile] = compare(loaded, settings)
            note = comparisons[profile].input_note
            record["notes"].append(f"{profile}: {_one_line(note, 300)}")
        except Exception as exc:  # noqa: BLE001 - the whole profile failed: every method gets the error
            comparisons[profile] = f"error: {type(exc).__name__}: {_one_line(exc, 140)}"
            record["notes"].append(f"{profile}: {comparisons[profile]}")
        say(f"{key}: {profile} verdicts in {time.perf_counter() - t0:.0f} s")

    before = None
    if baseline:
        t0 = time.perf_counter()
        before = baseline_verdicts(case.path, methods, baseline)
        record["notes"].append(f"{BEFORE} ({baseline}): {_one_line(before['note'], 300)}")
        say(f"{key}: {BEFORE} verdicts (engine {baseline}) in {time.perf_counter() - t0:.0f} s")

    record["kinds"] = {}
    for profile, comp in comparisons.items():
        judged = next((v.parity for v in ([] if isinstance(comp, str) else comp.variants) if v.parity), None)
        if judged is not None:
            record["kinds"][profile] = {o.name: [o.kind, _one_line(o.kind_reason, 160)] for o in judged.outputs}
    for index, (name, opts) in enumerate(methods):
        row: dict[str, Any] = {"method": method_label(name, opts)}
        if before is not None:
            verdict, cos = before["verdicts"][index]
            row[BEFORE], row[BEFORE + " info"] = verdict, {"worst_cosine": cos}
        variant_model = None
        for profile in PROFILES:
            comp = comparisons[profile]
            if isinstance(comp, str):
                row[profile], row[profile + " info"] = comp, {}
                continue
            result = comp.variants[index]
            row[profile], row[profile + " info"] = _verdict(result)
            if variant_model is None and result.model is not None:
                variant_model = result.model
        t0 = time.perf_counter()
        if variant_model is None:  # no comparison ran: shrink it here for the task check
            try:
                variant_model = shrinkray.shrink(loaded, name, **opts).model
            except Exception as exc:  # noqa: BLE001
                row["task"], row["task detail"] = f"error: {_one_line(exc, 120)}", ""
        if variant_model is not None:
            try:
                task = case.check(variant_model)
                row["task"] = "pass" if task.passed else "fail"
                row["task detail"] = f"{task.agree}/{task.total}" + (f"; {task.detail}" if task.detail else "")
                if case.boxes:  # the same decisions judged with a looser IoU bar
                    loose = case.check(None, iou_match=LOOSE_IOU, decisions=case.last)
                    row["task loose"] = "pass" if loose.passed else "fail"
            except Exception as exc:  # noqa: BLE001
                row["task"], row["task detail"] = f"error: {_one_line(exc, 120)}", ""
        for profile in (*PROFILES, BEFORE):
            if profile in row:
                row[profile + " agrees"] = row["task"] in ("pass", "fail") and row[profile] == row["task"]
        say(
            f"{key:18s} {row['method']:20s} task {row['task']:5s} ({row['task detail']}) | old {row['old'][:40]} | "
            f"new {row['new'][:40]} | new/real {row['new/real'][:40]}"
            + (f" | {BEFORE} {row[BEFORE][:40]}" if BEFORE in row else "")
            + f"  [{time.perf_counter() - t0:.1f} s]"
        )
        record["rows"].append(row)
    record["seconds"] = round(time.perf_counter() - started, 1)
    return record


def _cosv(info: dict[str, Any] | None) -> float | None:
    return info.get("worst_cosine") if info else None


def _criteria(reason: str) -> list[str]:
    """'out: relative error 0.17 (needs <= 0.1); cosine 0.9 (needs >= 0.99)' -> ['max_relative_error', 'min_cosine']."""
    found = []
    for part in reason.split(";"):
        m = re.search(r"([a-z][a-z0-9 ]*?) (?:[-+0-9.eE]+|inf|nan) \(needs ([<>])=", part)
        if m:
            found.append(("min_" if m.group(2) == ">" else "max_") + m.group(1).strip().replace(" ", "_"))
    return found


def _cos(info: dict[str, Any]) -> str:
    c = info.get("worst_cosine") if info else None
    return "-" if c is None else f"{c:.4f}"


def _cell(verdict: str, agrees: bool, task: str) -> str:
    if task not in ("pass", "fail"):
        return verdict if not verdict.startswith("error") else "error"
    mark = "ok" if agrees else "WRONG"
    short = "error" if verdict.startswith("error") else verdict
    return f"{short} ({mark})"


def machine() -> str:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cpu}, {cores} usable cores, {platform.system()} {platform.release()}"


def engine_state() -> str:
    try:
        head = subprocess.run(
            ["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(HERE.parent), "status", "--porcelain", "--", "shrinkray"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        return "unknown"
    n = len(dirty.splitlines()) if dirty else 0
    return f"commit {head}" + (f" with {n} uncommitted change(s) under shrinkray/" if n else " (clean shrinkray/)")


COLUMN_TEXT = {
    BEFORE: "the product before the verdict rewrite (engine {baseline}: absolute verdict on its noise inputs)",
    "old": "absolute profile (0.06 / 0.02 / cosine 0.99) on today's synthesized inputs",
    "new": "default `CompareSettings()` on today's synthesized inputs",
    "new/real": "default verdict on the realistic inputs (`inputs_path=` the .npz)",
}


def agreement_rows(records: list[dict[str, Any]], baseline: str) -> list[list]:
    """Per verdict column: how many judged variants it agrees with the task check on (header: AGREEMENT_HEADER)."""
    rows = [row for r in records for row in r["rows"]]
    cols = [c for c in (BEFORE, *PROFILES) if any(c in row for row in rows)]
    judged = [row for row in rows if row["task"] in ("pass", "fail")]
    return [[f"**{c}**: " + COLUMN_TEXT[c].format(baseline=baseline),
             f"{sum(row.get(c + ' agrees', False) for row in judged)}/{len(judged)}",
             sum(row.get(c, "").startswith("error") for row in rows)] for c in cols]  # fmt: skip


AGREEMENT_HEADER = ["verdict", "agrees with the task check", "errors"]


def write_markdown(
    records: list[dict[str, Any]], path: Path, command: str, elapsed: float, baseline: str, loadavg=None
) -> str:
    load = (
        f"; 1-minute load average {loadavg[0]:.1f} at the start, {loadavg[1]:.1f} at the end: other work shared the cores"
        if loadavg
        else ""
    )
    rows = [(r["model"], row) for r in records for row in r["rows"]]
    cols = [c for c in (BEFORE, *PROFILES) if any(c in row for _, row in rows)]
    judged = [row for _, row in rows if row["task"] in ("pass", "fail")]
    counts = {c: sum(row.get(c + " agrees", False) for row in judged) for c in cols}
    errors = {c: sum(row.get(c, "").startswith("error") for _, row in rows) for c in cols}
    explain = "; ".join(f"**{c}** = {COLUMN_TEXT[c].format(baseline=baseline)}" for c in cols)
    lines = [
        "# Parity verdicts vs task checks on real models (issue 11)",
        "",
        f"- Date: {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {machine()}",
        (
            f"- Versions: Python {platform.python_version()}, onnx {onnx.__version__}, onnxruntime {ort.__version__}, "
            f"numpy {np.__version__}; engine {engine_state()}"
        ),
        f"- Command: `{command}` ({elapsed / 60:.1f} min{load})",
        (
            "- Models: PyPI wheels pinned in `bench/common/real_models.py` (what each input/output is: "
            "`docs/benchmarks.md`)."
        ),
        "",
        (
            "**task** is the truth: the package's own post-processing on realistic inputs, original vs variant "
            "(OCR: same decoded text on every line; detectors: same boxes, IoU >= 0.9; classifiers: same top-1; "
            "VAD: same speech decision on every 32 ms frame; text encoder: sentence-embedding cosine >= 0.999). "
            + explain
            + ". `ok` / `WRONG`: the verdict agrees / disagrees with the task check; an error counts as WRONG. "
            "cos: the worst output cosine the verdict saw."
        ),
        "",
        f"**Agreement with the task check ({len(judged)} variants):** "
        + ", ".join(f"{c} {counts[c]}/{len(judged)}" for c in cols)
        + (" (errors: " + ", ".join(f"{c} {errors[c]}" for c in cols) + ")" if any(errors.values()) else "")
        + ".",
        "",
        "| model | method | task | "
        + " | ".join(cols)
        + " | "
        + " | ".join(f"cos {c}" for c in cols)
        + " | task detail |",
        "| --- | --- | --- | " + " | ".join("---" for _ in cols) * 2 + " | --- |",
    ]
    lines[-1] = "|" + " --- |" * (4 + 2 * len(cols))
    for model, row in rows:
        lines.append(
            f"| `{model}` | {row['method']} | {row['task']} | "
            + " | ".join(_cell(row[c], row.get(c + " agrees", False), row["task"]) for c in cols)
            + " | "
            + " | ".join(_cos(row.get(c + " info") or {}) for c in cols)
            + f" | {row['task detail'].replace('|', '/')} |"
        )
    failed = [r for r in records if r.get("error")]
    if failed:
        lines += ["", "## Models that could not run", ""]
        lines += [f"- `{r['model']}`: {r['error']}" for r in failed]
    lines += ["", "## Per family", ""]
    fam: dict[str, list] = {}
    for r in records:
        if "describe" in r:
            fam.setdefault(r["describe"]["family"], []).extend(x for x in r["rows"] if x["task"] in ("pass", "fail"))
    lines += [
        "| family | variants | task pass | " + " | ".join(f"{c} agrees" for c in cols) + " |",
        "|" + " --- |" * (3 + len(cols)),
    ]
    for family, xs in fam.items():
        lines.append(
            f"| {family} | {len(xs)} | {sum(x['task'] == 'pass' for x in xs)} | "
            + " | ".join(str(sum(x.get(c + " agrees", False) for x in xs)) for c in cols)
            + " |"
        )
    lines += ["", "## Where the verdicts go wrong", ""]
    for c in cols:
        false_fail = [(m, row) for m, row in rows if row["task"] == "pass" and row[c] == "fail"]
        missed = [(m, row) for m, row in rows if row["task"] == "fail" and row[c] == "pass"]
        crit: dict[str, int] = {}
        for _, row in false_fail:
            for name in {k for reason in (row.get(c + " info") or {}).get("failing", []) for k in _criteria(reason)}:
                crit[name] = crit.get(name, 0) + 1
        by = ", ".join(f"{k} {v}" for k, v in sorted(crit.items(), key=lambda kv: -kv[1]))
        lines.append(
            f"- **{c}**: {len(false_fail)} false alarms (task passes, verdict fails)"
            + (f", failing on: {by}" if by else "")
            + f"; {len(missed)} missed damage (task fails, verdict passes)"
            + (": " + ", ".join(f"`{m}` {row['method']}" for m, row in missed) if missed else "")
            + "."
        )
    high = [
        (m, row)
        for m, row in rows
        if row["task"] == "fail" and any((_cosv(row.get(c + " info")) or 0) >= 0.99 for c in cols)
    ]
    if high:
        lines += ["", "Task check fails although a verdict saw a worst output cosine >= 0.99:", ""]
        for m, row in high:
            coss = ", ".join(f"{c} {_cos(row.get(c + ' info') or {})}" for c in cols)
            lines.append(f"- `{m}` {row['method']}: {row['task detail']} (cosine {coss})")
    flips = [(m, row) for m, row in rows if "task loose" in row and row["task loose"] != row["task"]]
    lines += ["", f"## Box task checks at IoU {LOOSE_IOU} instead of {rm.IOU_MATCH}", ""]
    if flips:
        lines.append(
            f"These rows' truth changes when boxes only need IoU >= {LOOSE_IOU} (the other box rows keep theirs); "
            "their agreement flips with it:"
        )
        lines.append("")
        for model, row in flips:
            verdicts = ", ".join(f"{c} {row[c]}" for c in cols)
            lines.append(f"- `{model}` {row['method']}: task {row['task']} -> {row['task loose']} ({verdicts})")
    else:
        lines.append(f"No box task check changes its answer at IoU {LOOSE_IOU}.")
    lines += ["", "## Why the verdicts failed (failing outputs as the engine words them)", ""]
    for model, row in rows:
        for c in cols:
            info = row.get(c + " info") or {}
            if row[c] == "fail" and info.get("failing"):
                lines.append(f"- `{model}` {row['method']} ({c}): " + "; ".join(info["failing"][:3]))
            elif row[c].startswith("error") or row[c] == "not measured":
                lines.append(f"- `{model}` {row['method']} ({c}): {row[c]}")
    lines += ["", "## Output kinds (what each profile judged every output as, and why)", ""]
    for r in records:
        kinds = r.get("kinds") or {}
        names = list(dict.fromkeys(n for by in kinds.values() for n in by))
        for name in names:
            seen = {p: kinds[p][name] for p in kinds if name in kinds[p]}
            text = "; ".join(f"{p}: {k} ({why})" for p, (k, why) in seen.items())
            lines.append(f"- `{r['model']}` `{name}`: {text}")
    lines += ["", "## Inputs each verdict used", ""]
    for r in records:
        for note in r.get("notes", []):
            lines.append(f"- `{r['model']}` {note}")
    return rm.write_report(path, lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    rm.add_models_argument(ap)
    ap.add_argument("--methods", default=DEFAULT_METHODS, help=f"comma-separated; default {DEFAULT_METHODS}")
    ap.add_argument("--out", default=str(HERE / "out" / "verdicts.md"), help="Markdown report (default bench/out/verdicts.md; copy the figures into bench/RESULTS.md)")
    ap.add_argument(
        "--baseline",
        default="",
        help=f"engine commit for the '{BEFORE}' column (e.g. {BASELINE_COMMIT}, before the rewrite); default: none",
    )
    ap.add_argument("--from-json", help="rewrite the report from a saved bench/out/verdicts.json, run nothing")
    args = ap.parse_args(argv)
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        meta = saved.get("meta", {}) if isinstance(saved, dict) else {}
        records = saved["records"] if isinstance(saved, dict) else saved
        text = write_markdown(
            records,
            Path(args.out),
            meta.get("command", "(from json)"),
            meta.get("elapsed", 0.0),
            args.baseline,
            meta.get("loadavg"),
        )
        print(text)
        return 0
    # the realistic sets are TASK_SAMPLES inputs each at the pipeline's own sizes (160 text lines 762 wide into
    # an 18,000-class reader): the 120 s default run budget, sized for synthesized inputs, left variants unmeasured
    os.environ.setdefault("SHRINKRAY_MAX_RUN_SECONDS", str(RUN_SECONDS))
    keys = [k.strip() for k in args.models.split(",") if k.strip()]
    unknown = [k for k in keys if k not in rm.SPECS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(rm.SPECS)}")
    # 'palettize:levels=16,palettize:levels=256' -> split on commas that start a method name
    methods, parts = [], [p for p in args.methods.split(",") if p.strip()]
    for part in parts:
        if "=" in part and ":" not in part and methods:
            methods[-1] = methods[-1] + "," + part  # an extra option of the previous method
        else:
            methods.append(part)
    methods = [parse_method(m) for m in methods]

    result = results.begin("verdicts", argv)
    started = time.perf_counter()
    load_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else None

    def say(msg: str) -> None:
        print(msg, flush=True)

    records = []
    for key in keys:
        try:
            records.append(run_model(key, methods, say, args.baseline))
        except Exception as exc:  # noqa: BLE001 - one broken model must not stop the bench
            traceback.print_exc()
            records.append({"model": key, "rows": [], "error": f"{type(exc).__name__}: {_one_line(exc)}"})
    elapsed = time.perf_counter() - started
    command = "python -m bench verdicts" + "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:]))
    loadavg = (load_start, os.getloadavg()[0]) if load_start is not None else None
    text = write_markdown(records, Path(args.out), command, elapsed, args.baseline, loadavg)
    out_json = HERE / "out" / "verdicts.json"
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(
        json.dumps(
            {"meta": {"command": command, "elapsed": elapsed, "loadavg": loadavg}, "records": records},
            indent=1,
            default=str,
        )
    )
    print()
    print(text)
    print(f"wrote {args.out} and {out_json} in {elapsed / 60:.1f} min")
    failed = [r["model"] for r in records if r.get("error")]
    variants = sum(len(r["rows"]) for r in records)
    results.finish(
        result, AGREEMENT_HEADER, agreement_rows(records, args.baseline),
        notes=[f"{len(records)} models, {variants} variants; truth = the package's own post-processing on realistic "
               f"inputs. Every variant: `{Path(args.out).name}` and `verdicts.json` in bench/out/."]
        + ([f"Models that could not run: {', '.join(failed)}."] if failed else []),
        complete=not failed,
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

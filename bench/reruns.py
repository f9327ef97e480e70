"""Do reruns of ``shrinkray compare`` give the same recommendation, and does it keep the task? (issue 25)

For every real model of ``bench/common/real_models.py``, ``compare`` runs ``--reruns`` times (default 5) with
exactly the settings ``shrinkray compare MODEL`` builds from its default flags (``cli.compare_settings`` on
the parsed default command line: the CLI's method list, latency ON, adaptive timing, brotli quality auto,
synthesized inputs), so timing noise is in the run as a user meets it. Each rerun writes its variants into
a scratch folder, as the CLI's worker does (``CompareSettings.variants_dir``). Per rerun the bench keeps:

* the recommendation (``verdict.advice.recommended``: a variant key, or "keep the original"), its verdict
  sentence (``verdict_of``) and the headline line (``headline_of(...).text()``);
* every variant's parity status (pass / fail / undecided / error / unmeasured), its speed call
  (``verdict.speed.speed_of``: slower / faster / same / too noisy, with its words) and whether the
  recommendation passed it over as surely slower, its brotli size and the SHA-256 of its file;
* the wall time and the load average.

The recommended variant of each rerun then gets the task check (``Case.check``: the package's own
post-processing on realistic inputs, original vs variant), once per distinct file: a variant of the same
method is expected to be byte-identical across reruns, and the bench says where it is not.

    python -m bench --no-results recommend-reruns --models magika,ppocr-cls --reruns 2   # a trial
    python -m bench recommend-reruns                           # all models, 5 reruns (about an hour, 2 cores)

Writes ``--out`` (default bench/out/reruns.md) and the raw records beside it (``reruns.json``).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from common import real_models as rm  # noqa: E402
from common import results  # noqa: E402

import shrinkray  # noqa: E402
from shrinkray.cli import build_parser, compare_settings  # noqa: E402
from shrinkray.measure.results import CompareSettings  # noqa: E402
from shrinkray.pipeline.compare import compare  # noqa: E402
from shrinkray.verdict.advice import recommended  # noqa: E402
from shrinkray.verdict.headline import headline_of  # noqa: E402
from shrinkray.verdict.parity_verdict import verdict_of  # noqa: E402
from shrinkray.verdict.speed import speed_of  # noqa: E402

KEEP = "keep the original"
DELIVERY = "brotli"  # the delivery `recommended` and the headline use by default


def _one_line(text: Any, limit: int = 200) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def cli_settings(model_path: Path) -> CompareSettings:
    """What ``shrinkray compare MODEL`` (no other flag) compares with: the CLI's own parser and settings."""
    return compare_settings(build_parser().parse_args(["compare", str(model_path)]))


def _sha(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def _variant(comparison, result) -> dict[str, Any]:
    verdict = verdict_of(result)
    speed = speed_of(comparison, result)
    return {
        "key": result.key,
        "status": verdict.status,
        "sentence": verdict.sentence,
        "speed": speed.status,
        "speed_words": speed.words,
        "surely_slower": speed.surely_slower,
        "brotli": result.sizes.get(DELIVERY) if result.sizes else None,
        "sha": _sha(result.file) if result.file and Path(result.file).is_file() else None,
    }


def one_rerun(model_path: Path, settings: CompareSettings, scratch: Path) -> tuple[dict[str, Any], Path | None]:
    """One ``compare`` as the CLI runs it; the record and the recommended variant's file (None: the original)."""
    folder = Path(tempfile.mkdtemp(prefix="rerun-", dir=scratch))
    settings.variants_dir = str(folder)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    t0 = time.perf_counter()
    comparison = compare(shrinkray.load(str(model_path)), settings)
    seconds = time.perf_counter() - t0
    best = recommended(comparison, DELIVERY)
    head = headline_of(comparison)
    record = {
        "seconds": round(seconds, 1),
        "load": None if load is None else round(load, 2),
        "recommended": best.key if best is not None else KEEP,
        "sentence": verdict_of(best).sentence if best is not None else head.reason,
        "headline": head.text(),
        "original_brotli": comparison.original.sizes.get(DELIVERY) if comparison.original.sizes else None,
        "variants": [_variant(comparison, r) for r in comparison.variants],
        "input_note": _one_line(comparison.input_note, 300),
        "latency_note": _one_line(comparison.latency_note, 300),
        "timings": {k: round(v, 1) for k, v in (comparison.timings or {}).items()},
    }
    best_file = Path(best.file) if best is not None and best.file else None
    del comparison
    gc.collect()
    return record, best_file


def _differs(values: list[Any]) -> bool:
    return len({json.dumps(v, sort_keys=True, default=str) for v in values}) > 1


def _by_key(runs: list[dict[str, Any]], field: str) -> dict[str, list[Any]]:
    """Per variant key, the value of ``field`` in each rerun."""
    out: dict[str, list[Any]] = {}
    for run in runs:
        for v in run["variants"]:
            out.setdefault(v["key"], []).append(v[field])
    return out


def _check(case: rm.Case, run: dict[str, Any], best_file: Path | None, checked: dict[str, dict[str, Any]]) -> None:
    """The task check of the rerun's recommended variant, once per distinct file (``checked``: sha -> check)."""
    best = next((v for v in run["variants"] if v["key"] == run["recommended"]), None)
    if best is None or best_file is None:
        run["task"] = "original"  # the original keeps its own task
        return
    sha = best["sha"]
    if sha not in checked:
        t0 = time.perf_counter()
        try:
            task = case.check(str(best_file))
            checked[sha] = {"key": best["key"], "task": "pass" if task.passed else "fail",
                            "agree": task.agree, "total": task.total, "detail": _one_line(task.detail, 200),
                            "seconds": round(time.perf_counter() - t0, 1)}  # fmt: skip
        except Exception as exc:  # noqa: BLE001
            checked[sha] = {"key": best["key"], "task": f"error: {_one_line(exc, 120)}", "agree": None,
                            "total": None, "detail": "", "seconds": round(time.perf_counter() - t0, 1)}  # fmt: skip
    run["task"] = checked[sha]["task"]
    run["task_sha"] = sha


def run_model(key: str, reruns: int, scratch: Path, say) -> dict[str, Any]:
    """``reruns`` comparisons of one model and the task check of each recommended variant."""
    started = time.perf_counter()
    record: dict[str, Any] = {"model": key, "runs": [], "checks": {}, "errors": []}
    try:
        case = rm.Case(key)
    except Exception as exc:  # noqa: BLE001 - a model that cannot be fetched or prepared is reported
        record["error"] = f"cannot prepare: {type(exc).__name__}: {_one_line(exc)}"
        say(f"{key}: {record['error']}")
        return record
    settings = cli_settings(case.path)
    record["methods"] = [m for m, _ in settings.methods]
    checked: dict[str, dict[str, Any]] = {}  # sha -> task check of that file
    for index in range(reruns):
        try:
            run, best_file = one_rerun(case.path, cli_settings(case.path), scratch)
            _check(case, run, best_file, checked)
        except Exception as exc:  # noqa: BLE001 - one failed rerun is recorded, the others go on
            traceback.print_exc()
            msg = f"rerun {index + 1}: {type(exc).__name__}: {_one_line(exc)}"
            record["errors"].append(msg)
            record["runs"].append({"error": msg, "recommended": "error", "variants": []})
            say(f"{key}: {msg}")
            continue
        finally:
            for folder in scratch.glob("rerun-*"):  # this rerun's variant files
                shutil.rmtree(folder, ignore_errors=True)
        statuses = ", ".join(f"{v['key']} {v['status']}" + (f"/{v['speed']}" if v["speed"] != "unmeasured" else "")
                             for v in run["variants"])  # fmt: skip
        say(f"{key:18s} rerun {index + 1}/{reruns}: {run['recommended']:16s} task {run['task']:8s} "
            f"[{run['seconds']:.0f} s, load {run['load']}] {statuses}")  # fmt: skip
        record["runs"].append(run)
    record["checks"] = checked
    record["seconds"] = round(time.perf_counter() - started, 1)
    summarize(record)
    return record


def summarize(record: dict[str, Any]) -> None:
    """What agrees across the reruns, and why not where it does not."""
    runs = [r for r in record["runs"] if not r.get("error")]
    record["summary"] = s = {}
    if not runs:
        return
    recs = [r["recommended"] for r in runs]
    s["recommendations"] = dict(Counter(recs))
    s["same_recommendation"] = not _differs(recs) and len(runs) == len(record["runs"])
    s["same_sentence"] = not _differs([r["sentence"] for r in runs])
    s["same_headline"] = not _differs([r["headline"] for r in runs])
    statuses = _by_key(runs, "status")
    s["same_statuses"] = not any(_differs(v) for v in statuses.values())
    s["status_changes"] = {k: dict(Counter(v)) for k, v in statuses.items() if _differs(v)}
    speeds = _by_key(runs, "speed")
    s["speed_changes"] = {k: dict(Counter(v)) for k, v in speeds.items() if _differs(v)}
    slower = _by_key(runs, "surely_slower")
    s["slower_changes"] = {k: dict(Counter(map(str, v))) for k, v in slower.items() if _differs(v)}
    sentences = _by_key(runs, "sentence")
    s["sentence_changes"] = sorted(k for k, v in sentences.items() if _differs(v))
    sizes = _by_key(runs, "brotli")
    s["size_changes"] = {k: sorted(set(map(str, v))) for k, v in sizes.items() if _differs(v)}
    shas = _by_key(runs, "sha")
    s["file_changes"] = {k: sorted(set(map(str, v))) for k, v in shas.items() if _differs(v)}
    tasks = [r["task"] for r in runs]
    s["tasks"] = dict(Counter(tasks))
    s["keeps_task"] = all(t in ("pass", "original") for t in tasks)
    s["why"] = _why(s, runs)


def _why(s: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    """The reason a recommendation or a sentence moved, from what changed between the reruns."""
    parts = []
    if s["status_changes"]:
        parts.append("parity status flips: " + "; ".join(f"{k} {v}" for k, v in s["status_changes"].items()))
    if s["slower_changes"]:
        parts.append("surely-slower flips: " + "; ".join(f"{k} {v}" for k, v in s["slower_changes"].items()))
    if s["speed_changes"]:
        parts.append("speed call flips: " + "; ".join(f"{k} {v}" for k, v in s["speed_changes"].items()))
    if s["size_changes"]:
        parts.append("brotli size changes: " + ", ".join(s["size_changes"]))
    if s["file_changes"]:
        parts.append("variant file differs: " + ", ".join(s["file_changes"]))
    if s["sentence_changes"]:
        parts.append("verdict sentence changes: " + ", ".join(s["sentence_changes"]))
    if not s["same_headline"] and not parts:
        parts.append("headline text changes")
    return "; ".join(parts)


HEADER = ["model", "recommendation (each rerun)", "same", "task check of the recommended", "verdict sentence same",
          "headline same", "per-variant statuses same", "speed calls same", "what moved", "s / rerun"]  # fmt: skip


def _rec_cell(record: dict[str, Any]) -> str:
    return ", ".join(r["recommended"] for r in record["runs"]) or "-"


def _task_cell(record: dict[str, Any]) -> str:
    checks = record.get("checks", {})
    parts = [f"{c['key']} {c['task']} {c['agree']}/{c['total']}" + (f" ({c['detail']})" if c["task"] == "fail" and c["detail"] else "")
             for c in checks.values()]  # fmt: skip
    if any(r.get("task") == "original" for r in record["runs"]):
        parts.append("original kept")
    return "; ".join(parts) or "-"


def _yes(flag: bool | None) -> str:
    return "-" if flag is None else ("yes" if flag else "**no**")


def table_rows(records: list[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for rec in records:
        if rec.get("error"):
            rows.append([rec["model"], f"error: {rec['error']}", "-", "-", "-", "-", "-", "-", "-", "-"])
            continue
        s = rec.get("summary") or {}
        runs = [r for r in rec["runs"] if not r.get("error")]
        mean = sum(r["seconds"] for r in runs) / len(runs) if runs else 0
        rows.append([
            rec["model"], _rec_cell(rec), "same" if s.get("same_recommendation") else "**differs**", _task_cell(rec),
            _yes(s.get("same_sentence")), _yes(s.get("same_headline")), _yes(s.get("same_statuses")),
            _yes(not s.get("speed_changes")) if s else "-",
            "; ".join(filter(None, [s.get("why", ""), *rec.get("errors", [])])) or "-", f"{mean:.0f}",
        ])  # fmt: skip
    return rows


def totals(records: list[dict[str, Any]]) -> dict[str, Any]:
    ran = [r for r in records if r.get("summary")]
    return {
        "models": len(records),
        "ran": len(ran),
        "agree": sum(bool(r["summary"]["same_recommendation"]) for r in ran),
        "keeps_task": sum(bool(r["summary"]["keeps_task"]) for r in ran),
        "keep_original": sum(all(x["recommended"] == KEEP for x in r["runs"]) for r in ran),
        "same_sentence": sum(bool(r["summary"]["same_sentence"]) for r in ran),
        "same_statuses": sum(bool(r["summary"]["same_statuses"]) for r in ran),
        "file_changes": [r["model"] for r in ran if r["summary"]["file_changes"]],
        "failed": [r["model"] for r in records if r.get("error") or r.get("errors")],
    }


def totals_lines(t: dict[str, Any], reruns: int) -> list[str]:
    lines = [
        f"Models whose {reruns} reruns give the same recommendation: **{t['agree']} of {t['ran']}**.",
        f"Models whose recommendation keeps the task in every rerun: **{t['keeps_task']} of {t['ran']}** "
        f"({t['keep_original']} of them keep the original, which keeps it by definition).",
        f"Same verdict sentence of the recommendation in every rerun: {t['same_sentence']} of {t['ran']}; "
        f"same parity status of every variant: {t['same_statuses']} of {t['ran']}.",
    ]
    if t["file_changes"]:
        lines.append(
            "A variant's file differed between reruns (not byte-identical): " + ", ".join(t["file_changes"]) + "."
        )
    else:
        lines.append("Every variant's file was byte-identical across the reruns (SHA-256 of the written file).")
    if t["failed"]:
        lines.append("Models with an error (recorded, the bench went on): " + ", ".join(t["failed"]) + ".")
    return lines


def write_markdown(records: list[dict[str, Any]], path: Path, command: str, elapsed: float, reruns: int,
                   methods: list[str]) -> str:  # fmt: skip
    t = totals(records)
    lines = [
        "# Recommendation over reruns of compare (issue 25)",
        "",
        f"`{command}`, {elapsed / 60:.1f} min, {results.machine_line(results.machine_facts())}, engine "
        f"{results.engine_commit()}.",
        "",
        f"Each model: {reruns} runs of `compare` with the settings of `shrinkray compare MODEL` (methods "
        f"{', '.join(methods)}; latency on, adaptive; brotli auto; synthesized inputs). The recommended variant's "
        "task check: the package's own post-processing on realistic inputs (bench/common/real_models.py), once "
        "per distinct variant file.",
        "",
        results.markdown_table(HEADER, table_rows(records)),
        "",
        *[line + "\n" for line in totals_lines(t, reruns)],
        "## Per rerun",
        "",
    ]
    for rec in records:
        lines.append(f"### {rec['model']}")
        lines.append("")
        if rec.get("error"):
            lines += [rec["error"], ""]
            continue
        for i, run in enumerate(rec["runs"], 1):
            if run.get("error"):
                lines.append(f"{i}. {run['error']}")
                continue
            variants = "; ".join(
                f"{v['key']} {v['status']}" + (f", {v['speed_words']}" if v["speed_words"] else "")
                + (" [passed over: surely slower]" if v["surely_slower"] else "")
                for v in run["variants"]
            )  # fmt: skip
            lines.append(f"{i}. **{run['recommended']}** (task {run['task']}), {run['seconds']:.0f} s, load "
                         f"{run['load']}. Headline: {run['headline']} Variants: {variants}")  # fmt: skip
        lines.append("")
    return rm.write_report(path, lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    rm.add_models_argument(ap)
    ap.add_argument("--reruns", type=int, default=5, help="comparisons per model (default 5)")
    ap.add_argument(
        "--out", default=str(HERE / "out" / "reruns.md"), help="Markdown report (default bench/out/reruns.md)"
    )
    args = ap.parse_args(argv)
    if args.reruns < 1:
        ap.error("--reruns must be at least 1")
    keys = [k.strip() for k in args.models.split(",") if k.strip()]
    unknown = [k for k in keys if k not in rm.SPECS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(rm.SPECS)}")

    result = results.begin("recommend-reruns", argv)
    started = time.perf_counter()

    def say(msg: str) -> None:
        print(msg, flush=True)

    out = Path(args.out)
    out_json = out.with_suffix(".json")
    command = results.command_line("recommend-reruns", argv)
    records: list[dict[str, Any]] = []
    methods: list[str] = []
    with tempfile.TemporaryDirectory(prefix="shrinkray-reruns-") as scratch:
        for key in keys:
            try:
                rec = run_model(key, args.reruns, Path(scratch), say)
            except Exception as exc:  # noqa: BLE001 - one broken model must not stop the bench
                traceback.print_exc()
                rec = {"model": key, "runs": [], "error": f"{type(exc).__name__}: {_one_line(exc)}"}
            records.append(rec)
            methods = methods or rec.get("methods", [])
            out_json.parent.mkdir(parents=True, exist_ok=True)  # saved after every model: a stopped run keeps its part
            out_json.write_text(json.dumps({"meta": {"command": command, "reruns": args.reruns}, "records": records},
                                           indent=1, default=str))  # fmt: skip
    elapsed = time.perf_counter() - started
    text = write_markdown(records, out, command, elapsed, args.reruns, methods)
    out_json.write_text(json.dumps({"meta": {"command": command, "reruns": args.reruns, "elapsed": elapsed},
                                    "totals": totals(records), "records": records}, indent=1, default=str))  # fmt: skip
    print()
    print(text)
    print(f"wrote {out} and {out_json} in {elapsed / 60:.1f} min")
    t = totals(records)
    results.finish(
        result, HEADER, table_rows(records),
        targets=[
            results.Target(f"{args.reruns} reruns give the same recommendation", t["agree"] == t["models"],
                           f"{t['agree']} of {t['models']} models"),
            results.Target("the recommended variant keeps the task on every model", t["keeps_task"] == t["models"],
                           f"{t['keeps_task']} of {t['models']} models"),
        ],
        notes=totals_lines(t, args.reruns)[2:] + [f"Every rerun: `{out.name}` and `{out_json.name}` in bench/out/."],
        complete=not t["failed"], show=False,
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

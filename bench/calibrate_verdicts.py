"""Choose the relative verdict's thresholds by measuring real models against their task checks.

For every real model (bench/real_models.py) and method, this records every parity measure of every
output, on the product's own synthesized inputs and on realistic inputs, beside the task check's
answer (bench/out/calibration.json). Then it scores each candidate set of thresholds by how often
the verdict agrees with the task check, and prints the table for the engine's current defaults.

    python bench/calibrate_verdicts.py                  # measure (about 15 min on 2 cores) and score
    python bench/calibrate_verdicts.py --score-only     # score the saved measurements again
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import real_models as rm  # noqa: E402

import shrinkray  # noqa: E402
from shrinkray.measure.parity import PROFILES, compare_outputs  # noqa: E402
from shrinkray.pipeline.compare import CompareSettings, ParityInputs, _run, parity_inputs  # noqa: E402

OUT = HERE / "out" / "calibration.json"
METHODS = [
    ("dynamic-int8", {}), ("weights-int8", {}), ("palettize", {"levels": 16}), ("palettize", {"levels": 256}),
    ("float16", {}), ("weights-int4", {}),
]  # fmt: skip


def _outputs(inputs: ParityInputs, variant) -> list[dict]:
    parity = compare_outputs(inputs.reference, _run(variant, inputs.samples), inputs.kinds, samples=inputs.count)
    return [{"name": o.name, "kind": o.kind, "measures": o.measures, "broken": o.reason if not o.checks and not o.passed
             else ""} for o in parity.outputs]  # fmt: skip


def measure(keys: list[str]) -> list[dict]:
    rows = []
    for key in keys:
        case = rm.Case(key)
        loaded = shrinkray.load(case.path)
        synthetic = parity_inputs(loaded.model, CompareSettings())
        npz = case.save_inputs(HERE / "out" / "inputs" / f"{key}.npz")
        real = parity_inputs(loaded.model, CompareSettings(inputs_path=str(npz)))
        for method, options in METHODS:
            started = time.perf_counter()
            label = method + "".join(f" {k}={v}" for k, v in options.items())
            try:
                variant = shrinkray.shrink(loaded, method, **options).model
            except shrinkray.ShrinkRayError as exc:
                print(f"{key:18} {label:22} cannot shrink: {exc}", flush=True)
                continue
            task = case.check(variant)
            row = {"model": key, "method": label, "task": task.passed, "task_detail": task.detail,
                   "synthetic": _outputs(synthetic, variant), "real": _outputs(real, variant)}  # fmt: skip
            rows.append(row)
            print(f"{key:18} {label:22} task {'pass' if task.passed else 'FAIL'} [{time.perf_counter() - started:.1f} s]",
                  flush=True)  # fmt: skip
    return rows


def verdict(outputs: list[dict], profile: dict[str, dict[str, float]]) -> bool:
    for out in outputs:
        if out["broken"]:
            return False
        if out["kind"] == "exact":
            if out["measures"].get("mismatch_fraction"):
                return False
            continue
        for name, limit in profile.get(out["kind"], {}).items():
            value = out["measures"].get(name[4:])
            if value is None:
                continue
            if (value < limit) if name.startswith("min_") else (value > limit):
                return False
    return True


def score(rows: list[dict], profile: dict) -> tuple[int, int]:
    synthetic = sum(verdict(r["synthetic"], profile) == r["task"] for r in rows)
    real = sum(verdict(r["real"], profile) == r["task"] for r in rows)
    return synthetic, real


def candidates():
    for top1, rms, cos, row in itertools.product(
        (0.95, 0.97, 0.98, 0.99), (0.01, 0.015, 0.02, 0.025, 0.03, 0.04), (0.98, 0.99, 0.995), (0.98, 0.99, 0.995)
    ):
        yield {
            "scores": {"min_top1_agreement": top1},
            "continuous": {"max_relative_rms_error": rms, "min_cosine": cos},
            "embedding": {"min_row_cosine": row},
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--score-only", action="store_true")
    ap.add_argument("--models", default=",".join(rm.default_keys()))
    args = ap.parse_args()
    if args.score_only:
        rows = json.loads(OUT.read_text())
    else:
        rows = measure(args.models.split(","))
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(rows, indent=1, default=float))
    ranked = sorted(candidates(), key=lambda p: score(rows, p), reverse=True)
    print(f"\n{len(rows)} variants. Best candidates (synthetic agreements, real agreements):")
    for profile in ranked[:8]:
        print(score(rows, profile), json.dumps(profile))
    current = PROFILES["relative"]
    print("engine default:", score(rows, current), json.dumps(current))
    print("absolute profile:", score(rows, PROFILES["absolute"]))
    print("\n| model | method | task | relative (synthetic) | relative (real) | absolute (synthetic) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        cells = [verdict(r["synthetic"], current), verdict(r["real"], current), verdict(r["synthetic"], PROFILES["absolute"])]
        shown = [("pass" if v else "fail") + ("" if v == r["task"] else " (WRONG)") for v in cells]
        print(f"| `{r['model']}` | {r['method']} | {'pass' if r['task'] else 'fail'} | " + " | ".join(shown) + " |")


if __name__ == "__main__":
    main()

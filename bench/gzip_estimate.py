"""Is the sampled gzip -9 estimate of large files honest, and what does it save? (issue 28)

Builds the scaling bench's 1 GB transformer with external data (``scaling.py --build-one 1gb-ext``) into a
scratch folder, streams its weights-int8, float16 and palettize variants beside it (``shrinkray shrink``),
then measures each data file's gzip -9 twice: exactly (the whole stream, as before) and as compare now does
(``shrinkray.measure.sizes.gzip_estimate``: 1 MiB blocks sampled across the file, with a 95% interval). Each
row says whether the exact number lies inside the interval, the error, and both CPU times.

    python -m bench gzip-estimate                     # ~3 min on 2 cores; needs ~3.5 GB in /tmp
    python -m bench gzip-estimate --size 2.5gb        # the 2.5 GB model (~9 GB of disk)
    python -m bench gzip-estimate --scratch /tmp/big  # keep (and reuse) the models there
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scaling  # noqa: E402  (the generated models)
from common import results  # noqa: E402

VARIANTS = ("weights-int8", "float16", "palettize")
HEADER = ["file", "MB", "exact gzip -9 bytes", "estimate", "±95%", "error", "inside", "deflated",
          "exact CPU s", "estimate CPU s"]  # fmt: skip


def _variants(model: Path) -> list[Path]:
    from shrinkray.cli import main as cli

    out = []
    for method in VARIANTS:
        target = model.parent / "variants" / f"{method}.onnx"
        if not target.exists():
            target.parent.mkdir(exist_ok=True)
            cli(["shrink", str(model), "-m", method, "-o", str(target), "--force"])
        out.append(target.with_name(target.name + ".data"))
    return out


def _cpu(fn):
    start = time.process_time()
    value = fn()
    return value, time.process_time() - start


def measure(files: list[Path]) -> tuple[list[list], bool]:
    from shrinkray.measure.sizes import gzip_estimate, gzip_stream_size

    rows, honest = [], True
    for f in files:
        exact, exact_s = _cpu(lambda f=f: gzip_stream_size(f))
        est, est_s = _cpu(lambda f=f: gzip_estimate(f))
        inside = abs(est.bytes - exact) <= est.margin
        honest &= inside
        rows.append([f.name, round(f.stat().st_size / 1e6, 1), exact, est.bytes, f"{est.margin / exact:.3%}",
                     f"{(est.bytes - exact) / exact:+.3%}", "yes" if inside else "**no**", f"{est.share:.1%}",
                     round(exact_s, 1), round(est_s, 1)])  # fmt: skip
        print(rows[-1], flush=True)
    return rows, honest


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="1gb-ext", choices=["1gb-ext", "2.5gb", "100mb-ext"])
    ap.add_argument("--scratch", help="folder for the models (default: a temporary one, removed)")
    args = ap.parse_args(argv)
    record = results.begin("gzip-estimate", argv)
    scratch = Path(args.scratch) if args.scratch else Path(tempfile.mkdtemp(prefix="shrinkray-gzip-estimate-"))
    try:
        stem = f"scaling_{args.size.replace('.', '_').replace('-', '_')}"
        model = scratch / stem / "model.onnx"
        if not model.exists():
            model = scaling.build(args.size, scratch)
        files = [model.with_name("model.onnx.data"), *_variants(model)]
        rows, honest = measure(files)
    finally:
        if not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    exact_s, est_s = sum(r[8] for r in rows), sum(r[9] for r in rows)
    results.finish(record, HEADER, rows, targets=[
        results.Target("every exact size inside its 95% interval", honest, f"{sum(r[6] == 'yes' for r in rows)} "
                       f"of {len(rows)}"),
        results.Target("estimate at most a fifth of the exact CPU", est_s <= exact_s / 5,
                       f"{est_s:.1f} s vs {exact_s:.1f} s"),
    ])  # fmt: skip


if __name__ == "__main__":
    main()

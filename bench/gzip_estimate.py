"""Is the sampled gzip -9 estimate of large files honest, and what does it save? (issue 28)

Builds the scaling bench's 1 GB transformer with external data (``scaling.py --build-one 1gb-ext``) into a
scratch folder, makes its weights-int8, float16 and palettize variants beside it (``shrinkray shrink``; or
takes ``--model``, any .onnx file, with dynamic-int8 and weights-int4 too),
then measures each data file's gzip -9 twice: exactly (the whole stream, as before) and as compare now does
(``shrinkray.measure.sizes.gzip_estimate``: 256 KiB blocks sampled across the file, with a 95% interval). Each
row says whether the exact number lies inside the interval, the error, and both CPU times.

    python -m bench gzip-estimate                     # ~3 min on 2 cores; needs ~3.5 GB in /tmp
    python -m bench gzip-estimate --size 2.5gb        # the 2.5 GB model (~9 GB of disk)
    python -m bench gzip-estimate --scratch /tmp/big  # keep (and reuse) the models there
    python -m bench gzip-estimate --model bench/out/synthetic_transformer_fd113197.onnx --scratch /tmp/t
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

#: The generated model's variants (the methods that stream a 1 GB model); a --model gets every default method's.
VARIANTS = ("weights-int8", "float16", "palettize")
ALL_VARIANTS = (*VARIANTS, "dynamic-int8", "weights-int4")
HEADER = ["file", "MB", "exact gzip -9 bytes", "estimate", "±95%", "error", "inside", "deflated",
          "exact CPU s", "estimate CPU s"]  # fmt: skip


def _variants(model: Path, folder: Path, methods: tuple[str, ...] = VARIANTS) -> list[Path]:
    """Each variant's biggest file (its data file when it has one), made once into ``folder``."""
    from shrinkray.cli import main as cli

    out = []
    for method in methods:
        target = folder / f"{method}.onnx"
        if not target.exists():
            folder.mkdir(parents=True, exist_ok=True)
            cli(["shrink", str(model), "-m", method, "-o", str(target), "--force"])
        data = target.with_name(target.name + ".data")
        out.append(data if data.exists() else target)
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
    ap.add_argument("--model", help="an .onnx file of your own instead of a generated one (variants go to --scratch)")
    args = ap.parse_args(argv)
    record = results.begin("gzip-estimate", argv)
    scratch = Path(args.scratch) if args.scratch else Path(tempfile.mkdtemp(prefix="shrinkray-gzip-estimate-"))
    try:
        if args.model:
            model = Path(args.model)
            files = [model, *_variants(model, scratch / f"{model.stem}-variants", ALL_VARIANTS)]
        else:
            stem = f"scaling_{args.size.replace('.', '_').replace('-', '_')}"
            model = scratch / stem / "model.onnx"
            if not model.exists():
                model = scaling.build(args.size, scratch)
            files = [model.with_name("model.onnx.data"), *_variants(model, model.parent / "variants")]
        rows, honest = measure(files)
    finally:
        if not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    exact_s, est_s = sum(r[8] for r in rows), sum(r[9] for r in rows)
    targets = [results.Target("every exact size inside its 95% interval", honest,
                              f"{sum(r[6] == 'yes' for r in rows)} of {len(rows)}")]  # fmt: skip
    if not args.model:  # files of 0.2-1 GB: where the estimate is for
        targets.append(results.Target("estimate at most a fifth of the exact CPU", est_s <= exact_s / 5,
                                      f"{est_s:.1f} s vs {exact_s:.1f} s"))  # fmt: skip
    results.finish(record, HEADER, rows, targets=targets,
                   notes=[f"CPU: {est_s:.1f} s estimated, {exact_s:.1f} s exact"])  # fmt: skip


if __name__ == "__main__":
    main()

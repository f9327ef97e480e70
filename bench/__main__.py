"""One bench tool: ``python -m bench --list`` and ``python -m bench [--no-results] NAME [ARGS...]``.

The arguments after NAME go to the benchmark's own ``main(argv)`` (``python -m bench NAME --help``
shows them). Every benchmark ends by saving its result (bench/common/results.py): JSON in
``bench/out/NAME.result.json`` and its own section of bench/RESULTS.md, rewritten; ``--no-results``
(before or after NAME) leaves RESULTS.md as it is. See bench/README.md and docs/benchmarks.md.
"""

from __future__ import annotations

import importlib
import os
import sys

from bench.common.results import NO_RESULTS_ENV
from bench.registry import BENCH, BENCHMARKS, BY_NAME

USAGE = "usage: python -m bench --list | python -m bench [--no-results] NAME [ARGS...]"


def listing() -> str:
    width = max(len(b.name) for b in BENCHMARKS)
    return "\n".join(f"{b.name:<{width}}  {b.description}" for b in BENCHMARKS)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--no-results" in argv:  # no benchmark has an option of that name: taken out wherever it stands
        argv = [a for a in argv if a != "--no-results"]
        os.environ[NO_RESULTS_ENV] = "1"  # read by results.finish(), also in a benchmark's child processes
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE + "\n  --no-results  do not rewrite the benchmark's section of bench/RESULTS.md\n")
        print(listing())
        return 0
    if argv[0] == "--list":
        print(listing())
        return 0
    name, rest = argv[0], argv[1:]
    bench = BY_NAME.get(name)
    if bench is None:
        print(f"unknown benchmark {name!r}; python -m bench --list shows the names", file=sys.stderr)
        return 2
    # the scripts import each other by plain name (`import run as bench_run`), as when run directly
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    if str(BENCH.parent) not in sys.path:
        sys.path.insert(1, str(BENCH.parent))
    module = importlib.import_module(bench.module)
    sys.argv = [str(bench.path), *rest]  # argparse's prog name, and scripts that re-run themselves
    result = module.main(rest)
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    raise SystemExit(main())

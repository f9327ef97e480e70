"""One bench tool: ``python -m bench --list`` and ``python -m bench NAME [ARGS...]``.

The arguments after NAME go to the benchmark's own ``main(argv)`` (``python -m bench NAME --help``
shows them). See bench/README.md, bench/RESULTS.md and docs/benchmarks.md.
"""

from __future__ import annotations

import importlib
import sys

from bench.registry import BENCH, BENCHMARKS, BY_NAME


def listing() -> str:
    width = max(len(b.name) for b in BENCHMARKS)
    return "\n".join(f"{b.name:<{width}}  {b.description}" for b in BENCHMARKS)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m bench --list | python -m bench NAME [ARGS...]\n")
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

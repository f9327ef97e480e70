"""`python -m bench --list` lists every registered benchmark, and every registered module file exists."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _registry():
    """bench/registry.py, loaded from its file (bench/ is not an installed package)."""
    spec = importlib.util.spec_from_file_location("bench_registry", ROOT / "bench" / "registry.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while the class is built
    spec.loader.exec_module(module)
    return module


BENCHMARKS = _registry().BENCHMARKS


def test_list_names_every_registered_benchmark():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "bench", "--list"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60, check=True)  # fmt: skip
    listed = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
    assert listed == {b.name for b in BENCHMARKS}


def test_every_registered_module_exists_and_names_are_unique():
    assert len({b.name for b in BENCHMARKS}) == len(BENCHMARKS)
    for bench in BENCHMARKS:
        assert bench.path.is_file(), f"{bench.name}: {bench.path} is missing"
        assert "def main(argv" in bench.path.read_text(), f"{bench.name}: no main(argv) in {bench.path}"

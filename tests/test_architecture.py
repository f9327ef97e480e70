"""The import contract (pyproject.toml [tool.importlinter]): layers import only downwards, no circles.

``lint-imports`` runs here, so the README's test command and CI keep the layers; the throw-away
copies prove that an import pointing up, or a circle, turns it red.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"]


def _lint(where: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(where)}
    return subprocess.run([*LINT, "--no-cache"], cwd=where, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The engine, the app's glue and the contract, copied where a test may break them."""
    for name in ("shrinkray", "app_ui"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_contract_holds():
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "3 kept, 0 broken" in done.stdout


def test_an_import_pointing_up_breaks_the_contract(copy: Path):
    (copy / "shrinkray" / "io" / "upward.py").write_text("from shrinkray.pipeline import compare  # noqa: F401\n")
    done = _lint(copy)
    assert done.returncode != 0
    assert "shrinkray.io is not allowed to import shrinkray.pipeline" in done.stdout


def test_a_circle_between_siblings_breaks_the_contract(copy: Path):
    measure = copy / "shrinkray" / "measure"
    (measure / "ring_a.py").write_text("from shrinkray.measure import ring_b  # noqa: F401\n")
    (measure / "ring_b.py").write_text("from shrinkray.measure import ring_a  # noqa: F401\n")
    done = _lint(copy)
    assert done.returncode != 0
    assert "No cycles are allowed in shrinkray.measure" in done.stdout


def test_the_engine_never_imports_the_app(copy: Path):
    (copy / "shrinkray" / "units_app.py").write_text("import app_ui.state  # noqa: F401\n")
    done = _lint(copy)
    assert done.returncode != 0
    assert "shrinkray.units_app -> app_ui.state" in done.stdout

"""The package metadata: one version, written in one place."""

from __future__ import annotations

import re
from importlib import metadata

from helpers import ROOT

import shrinkray

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the tomli backport (a dependency there)
    import tomli as tomllib


def test_the_version_is_written_once_in_shrinkray_init():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "shrinkray.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", shrinkray.__version__)


def test_the_installed_metadata_carries_that_version():
    assert metadata.version("shrinkray-studio") == shrinkray.__version__

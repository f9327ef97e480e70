"""App tests keep their runs in a temporary store (never the user's cache)."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("SHRINKRAY_RUNS_DIR", tempfile.mkdtemp(prefix="shrinkray-apptest-runs-"))


def finish_runs(at, timeout: float = 600):
    """Wait for the runs this process queued to end, then redraw the page (runs are jobs, off the script)."""
    from app_ui.runs import wait_until_idle

    assert wait_until_idle(timeout), "a run did not finish"
    return at.run()

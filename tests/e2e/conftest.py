"""Browser tests: the app servers they start keep runs in a temporary store (never the user's cache)."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("SHRINKRAY_RUNS_DIR", tempfile.mkdtemp(prefix="shrinkray-e2e-runs-"))

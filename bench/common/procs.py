"""Process measurements several benchmarks share: this process's peak memory and waiting for a quiet machine."""

from __future__ import annotations

import os
import time
from pathlib import Path


def proc_status(field_name: str) -> int:
    """A size field of /proc/self/status (``VmHWM``, ``VmRSS``...) in bytes; 0 when absent."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) * 1024
    return 0


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False if not allowed."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def wait_load(limit: float = 2.5, patience: float = 300.0) -> float:
    """Wait (at most ``patience`` s) until the 1-minute load average is below ``limit``; return it, rounded."""
    start = time.time()
    while os.getloadavg()[0] >= limit and time.time() - start < patience:
        time.sleep(5)
    return round(os.getloadavg()[0], 2)

"""How many CPU cores this process may use (its affinity mask, not the host's count).

Containers and `taskset` restrict a process to fewer cores than
``os.cpu_count()`` reports; sizing thread pools by the host count would
oversubscribe them.
"""

from __future__ import annotations

import os


def usable_cores() -> int:
    """Cores in this process's CPU affinity mask where the OS tells (Linux), else ``os.cpu_count()``."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1

"""A private redis-server and RQ worker processes for tests (Debian's redis-server; no persistence, loopback only)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REDIS_SERVER = shutil.which("redis-server")
MISSING = "redis-server is not installed (apt-get install redis-server; .ci/run does)"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_redis(folder: Path) -> tuple[subprocess.Popen, str]:
    """A redis-server on a free port with its files in ``folder``; returns it and its URL once it answers."""
    import redis

    port = free_port()
    server = subprocess.Popen(
        [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder), "--save", "",
         "--appendonly", "no", "--logfile", str(folder / "redis.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 20
    while True:
        try:
            client.ping()
            return server, url
        except redis.ConnectionError:
            if server.poll() is not None or time.monotonic() > deadline:
                stop(server)
                log = folder / "redis.log"
                raise RuntimeError(f"redis-server did not start: {log.read_text() if log.exists() else ''}") from None
            time.sleep(0.1)


def start_worker(url: str, queue: str, log: Path, **env: str) -> subprocess.Popen:
    """``python -m shrinkray.runs.queue_rq`` on ``queue``; the tests folder is importable (job functions)."""
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]), **env}
    environ.pop("SHRINKRAY_WORKER", None)
    with open(log, "ab") as out:  # the worker keeps its own copy of the handle
        return subprocess.Popen(
            [sys.executable, "-m", "shrinkray.runs.queue_rq", "--url", url, "--queue", queue],
            env=environ, stdout=out, stderr=subprocess.STDOUT, cwd=TESTS.parent,
        )  # fmt: skip


def stop(process: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """Stop a process we started (SIGINT gives an RQ worker a warm shutdown), killing it if it lingers."""
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

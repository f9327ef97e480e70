"""Two app replicas on one Redis queue and one run store (docs/deployment.md "Several replicas"): a run started in a
browser on one replica opens by its address on the other with the same cards, and is followed there while
it runs; the work happens in an RQ worker process."""

from __future__ import annotations

import os
import re
import signal

import pytest
from rqserver import MISSING, REDIS_SERVER, start_redis, start_worker, stop

from tests.e2e.test_browser import SHOTS, _no_traceback, start_app
from tests.e2e.test_runs import _cards, _wait_results, start_small_run

pytestmark = pytest.mark.skipif(REDIS_SERVER is None, reason=MISSING)


@pytest.fixture(scope="module")
def replicas(chromium, tmp_path_factory):
    """Redis, one worker and two app replicas sharing SHRINKRAY_QUEUE and SHRINKRAY_RUNS_DIR (after ``chromium``:
    without a browser nothing is started)."""
    folder = tmp_path_factory.mktemp("replicas")
    redis_server, redis_url = start_redis(folder)
    env = {**os.environ, "SHRINKRAY_QUEUE": redis_url, "SHRINKRAY_QUEUE_NAME": "e2e",
           "SHRINKRAY_RUNS_DIR": str(folder / "runs")}  # fmt: skip
    started = []
    try:
        started.append(start_worker(redis_url, "e2e", folder / "worker.log", SHRINKRAY_RUNS_DIR=str(folder / "runs")))
        urls = []
        with open(folder / "apps.log", "ab") as log:
            for _ in range(2):
                process, url = start_app(env, log)
                started.append(process)
                urls.append(url)
        yield urls
    finally:
        for process in reversed(started):
            stop(process, signal.SIGINT)
        stop(redis_server)


def test_a_run_started_on_one_replica_opens_on_the_other(replicas, pages):
    first_url, second_url = replicas
    SHOTS.mkdir(exist_ok=True)
    page = pages.open()
    start_small_run(page, first_url)
    page.wait_for_function("new URLSearchParams(location.search).get('run')", timeout=30_000)
    run_id = re.search(r"[?&]run=([A-Za-z0-9_-]+)", page.url).group(1)

    # the other replica, a fresh browser: it follows the run (maybe still running) and shows its results
    other = pages.open(f"{second_url}/shrink?run={run_id}", ready=None)
    _wait_results(other)
    _wait_results(page)
    metrics = page.locator("[data-testid='stMetricValue']").count()
    _wait_results(other, metrics)
    first = _cards(page)
    assert "weights-int8" in first and "float16" in first, first
    assert _cards(other) == first
    assert "cnn" in other.locator("[data-testid='stSidebar']").inner_text()
    page.screenshot(path=str(SHOTS / "replicas_1_started_here.png"))
    other.screenshot(path=str(SHOTS / "replicas_2_opened_there.png"))
    _no_traceback(page)
    _no_traceback(other)
    assert not pages.errors, pages.errors

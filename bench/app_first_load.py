"""Issue 29: the app's own first load on named connections, in Chromium with the network throttled.

Starts ``streamlit run app.py`` (a temporary run store, nothing outside its own server), then for each
connection profile of ``shrinkray/measure/connections.toml`` opens the app in a fresh browser context (an
empty cache: a first visit) with Chrome DevTools' network conditions set to the profile's bandwidth and
round trip, and times until the Model page has drawn ("Load an ONNX model"). It also counts what the
visit transferred (bytes on the wire, as encoded, and requests) and what the profile's own wait formula
(bytes x 8 / bandwidth + one round trip) predicts for those bytes: the difference is the round trips and
the script's own work. The app must call nothing outside its server: any other host is counted and fails
the benchmark's target.

    python -m bench app-first-load                    # every profile, 3 visits each (median)
    python -m bench app-first-load --profiles 3g,4g --visits 1
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from common import results  # noqa: E402

from shrinkray.measure.waits import connections, download_seconds  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]  # fmt: skip
READY = "text=Load an ONNX model"
#: A first visit on the default connection (4G) should show the app within this (the Model page drawn).
TARGET_S = 10.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(port: int) -> subprocess.Popen:
    env = {**os.environ, "SHRINKRAY_RUNS_DIR": tempfile.mkdtemp(prefix="shrinkray-first-load-")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.headless", "true",
         "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("the app did not start within 60 s")


def visit(browser, url: str, down_bps: int, rtt_ms: int) -> dict:
    """One first visit under the given network: seconds until the Model page drew, bytes and requests."""
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
    cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": rtt_ms,
                                                  "downloadThroughput": down_bps / 8, "uploadThroughput": down_bps / 8})  # fmt: skip
    wire = {"bytes": 0}
    cdp.on("Network.loadingFinished", lambda event: wire.__setitem__("bytes", wire["bytes"] + event["encodedDataLength"]))
    hosts: list[str] = []
    page.on("request", lambda request: hosts.append(urlparse(request.url).hostname or ""))
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_selector(READY, timeout=300_000)
    seconds = time.perf_counter() - start
    page.wait_for_timeout(500)  # the last frames' sizes arrive
    context.close()
    return {"seconds": seconds, "bytes": wire["bytes"], "requests": len(hosts),
            "outside": sorted({h for h in hosts if h not in ("127.0.0.1", "localhost")})}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default="", help="connection ids, comma-separated (default: all)")
    parser.add_argument("--visits", type=int, default=3, help="first visits per profile (the median is reported)")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    result = results.begin("app-first-load", argv)
    wanted = [p for p in args.profiles.split(",") if p]
    profiles = [c for c in connections() if not wanted or c.id in wanted]
    port = _free_port()
    app = start_app(port)
    rows, outside, default_s = [], set(), None
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            visit(browser, f"http://127.0.0.1:{port}/", 10**9, 0)  # the server's own first render, not timed
            for connection in profiles:
                runs = [visit(browser, f"http://127.0.0.1:{port}/", connection.down_bps, connection.rtt_ms)
                        for _ in range(args.visits)]  # fmt: skip
                seconds = statistics.median(r["seconds"] for r in runs)
                nbytes = int(statistics.median(r["bytes"] for r in runs))
                outside.update(h for r in runs for h in r["outside"])
                predicted = download_seconds(nbytes, connection)
                if connection.id == "4g":
                    default_s = seconds
                rows.append([connection.name, f"{connection.down_bps / 1e6:g} Mbps, {connection.rtt_ms:g} ms",
                             f"{seconds:.1f} s", f"{nbytes / 2**20:.2f} MiB", str(runs[0]["requests"]),
                             f"{predicted:.1f} s"])  # fmt: skip
                print(rows[-1], flush=True)
            browser.close()
    finally:
        app.terminate()
        app.wait(timeout=30)
    targets = [results.Target("nothing requested outside the app's own server", not outside, ", ".join(sorted(outside)))]
    if default_s is not None:
        targets.append(results.Target(f"first visit on 4G <= {TARGET_S:g} s", default_s <= TARGET_S, f"{default_s:.1f} s"))
    results.finish(
        result, ["connection", "throttled to", "first load (median)", "transferred", "requests",
                 "bytes alone would take"], rows, targets=targets,
        notes=[f"Median of {args.visits} first visits per profile (fresh context, cache disabled), Chromium's "
               "network emulation; timed from navigation until the Model page shows 'Load an ONNX model'. "
               "'bytes alone would take' is the profile's wait formula (bytes x 8 / bandwidth + one round trip) "
               "for what the visit transferred: the rest is round trips and the page's own work."],
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

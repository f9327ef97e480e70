"""Load check for runs as jobs: N browser sessions press "Shrink and measure" at once on one app server.

Starts `streamlit run app.py` (its own temporary run store), opens N Chromium contexts (separate
sessions), loads a sample in each, presses the button in all of them within a second, then polls every
page: the queue position each shows, when its first card appears, when its results are complete. A thread
samples the resident memory of the server and all its worker processes (summed over the process tree).
Checks: every session finishes, each sees only its own run (distinct ids, its own sample's name), queue
positions were shown, peak memory stays under the bound given.

    python -m bench runs-load --sessions 4 --sample cnn          # on this 2-core machine: 2 slots
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from common import results

from shrinkray.cores import usable_cores

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]  # fmt: skip


def _tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ppid, pages = int(fields[1]), int(fields[21])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
        rss[int(entry)] = pages * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo.extend(children.get(p, []))
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--sample", default="cnn")
    parser.add_argument("--max-peak-gib", type=float, default=4.0)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--shots", type=Path, default=None, help="save screenshots of each session here")
    args = parser.parse_args(argv)
    result = results.begin("runs-load", argv)
    from playwright.sync_api import sync_playwright

    env = {**os.environ, "SHRINKRAY_RUNS_DIR": tempfile.mkdtemp(prefix="shrinkray-load-runs-")}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.headless", "true",
         "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    peak = [0]
    stop = threading.Event()

    def sample_memory() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _tree_rss(server.pid))
            stop.wait(0.25)

    idle_rss = _tree_rss(server.pid)
    sampler = threading.Thread(target=sample_memory, daemon=True)
    sampler.start()
    sample = ROOT / "sample_models" / f"{args.sample}.onnx"
    ok = True
    table: list[list] = []
    notes: list[str] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            pages = []
            for _ in range(args.sessions):
                page = browser.new_context(viewport={"width": 1280, "height": 1600}).new_page()
                page.goto(url)
                page.wait_for_selector("text=Load an ONNX model", timeout=120_000)
                page.locator("input[type=file]").set_input_files(str(sample))
                page.wait_for_selector("text=Weight tensors", timeout=120_000)
                page.get_by_role("link", name="Shrink").click()
                page.wait_for_selector("text=Shrink and measure", timeout=120_000)
                pages.append(page)
            print(f"load avg before: {Path('/proc/loadavg').read_text().strip()}; server+idle RSS {idle_rss / 2**20:.0f} MiB")
            started = time.monotonic()
            for page in pages:
                page.get_by_role("button", name="Shrink and measure").click()
            clicked = time.monotonic() - started
            state = [{"positions": set(), "first_card": None, "done": None, "run": None} for _ in pages]
            while time.monotonic() - started < args.timeout and any(s["done"] is None for s in state):
                for page, s in zip(pages, state, strict=True):
                    if s["done"] is not None:
                        continue
                    now = time.monotonic() - started
                    body = page.inner_text("body")
                    for found in re.findall(r"Queued\*?\*?, position (\d+) of (\d+)", body):
                        if not s["positions"] and args.shots:
                            page.screenshot(path=str(args.shots / f"load_{pages.index(page)}_queued.png"))
                        s["positions"].add(found)
                    if s["run"] is None and (m := re.search(r"[?&]run=([A-Za-z0-9_-]{22})", page.url)):
                        s["run"] = m.group(1)
                    sized = [t for t in page.locator("[data-testid='stMetricValue']").all_inner_texts() if "iB" in t]
                    if s["first_card"] is None and sized:  # a variant's card with its sizes (not just "Shrinking…")
                        s["first_card"] = now
                        if args.shots and "Reports" not in body:
                            page.screenshot(path=str(args.shots / f"load_{pages.index(page)}_first_card.png"))
                    if "Reports" in body and "HTML with charts" in body:
                        s["done"] = now
                time.sleep(0.3)
            for i, (page, s) in enumerate(zip(pages, state, strict=True)):
                cards = page.locator("h3").all_inner_texts()
                print(f"session {i}: run {s['run']}, cards {cards}")
                positions = ", ".join(f"{a} of {b}" for a, b in sorted(s["positions"])) or "started at once"
                table.append([i, positions, "never" if s["first_card"] is None else f"{s['first_card']:.1f} s",
                              "never" if s["done"] is None else f"{s['done']:.1f} s", s["run"] or "none"])  # fmt: skip
                ok &= s["done"] is not None and s["run"] is not None
            runs = [s["run"] for s in state]
            ok &= len(set(runs)) == len(runs)
            shown = sum(bool(s["positions"]) for s in state)
            notes.append(f"Clicks took {clicked:.1f} s; sessions that showed a queue position: {shown} of {len(state)}; "
                         f"{usable_cores()} worker slots; server + idle RSS {idle_rss / 2**20:.0f} MiB.")  # fmt: skip
            if args.sessions > usable_cores():  # more sessions than worker slots: some must have waited
                ok &= shown >= 1
            browser.close()
    finally:
        stop.set()
        sampler.join()
        server.terminate()
        server.wait(20)
    print(f"load avg after: {Path('/proc/loadavg').read_text().strip()}")
    ok &= peak[0] < args.max_peak_gib * 2**30
    finished = len(table) == args.sessions and all(row[3] != "never" for row in table)
    results.finish(
        result,
        ["session", "queue position shown", "first card", "done", "run id"],
        table,
        targets=[results.Target("every session finishes with its own run", ok and finished),
                 results.Target(f"peak RSS of server + workers < {args.max_peak_gib:g} GiB",
                                peak[0] < args.max_peak_gib * 2**30, f"{peak[0] / 2**30:.2f} GiB")],
        notes=notes,
        complete=finished,
    )  # fmt: skip
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

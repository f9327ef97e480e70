"""What every benchmark leaves behind: a machine-readable result and its section of ``bench/RESULTS.md``.

A benchmark's ``main`` calls :func:`begin` first (date, engine commit, command line, machine facts, load
average at the start) and :func:`finish` last with its table (a header and rows), its targets (met or not)
and free notes. :func:`finish` prints the table (the same Markdown :func:`markdown_table` writes into
RESULTS.md: one function for both), saves the :class:`Result` as JSON to ``bench/out/<name>.result.json``
(gitignored, for machines) and rewrites only that benchmark's section of ``bench/RESULTS.md``, between
``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->``; every other byte of the file stays as it was.
``python -m bench --no-results NAME ...`` (or ``SHRINKRAY_BENCH_NO_RESULTS=1``) keeps RESULTS.md as it is
(for trial runs); the JSON is still written.

No import of shrinkray here: tests load this file on its own.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent.parent
ROOT = BENCH.parent
OUT = BENCH / "out"
RESULTS_MD = BENCH / "RESULTS.md"
#: set (to anything but "" or "0") by ``python -m bench --no-results``: RESULTS.md is not rewritten
NO_RESULTS_ENV = "SHRINKRAY_BENCH_NO_RESULTS"


@dataclass
class Target:
    """One target of a benchmark and whether this run met it (None: not decided by this run)."""

    what: str
    met: bool | None
    detail: str = ""

    def markdown(self) -> str:
        verdict = "not decided" if self.met is None else ("met" if self.met else "not met")
        return f"- {self.what}: **{verdict}**" + (f" ({self.detail})" if self.detail else "")


@dataclass
class Result:
    """One run of one benchmark: when, on what, by which command, and its figures as one table."""

    name: str
    title: str = ""
    date: str = ""  # UTC, "YYYY-MM-DD HH:MM UTC" at the start
    commit: str = ""  # short hash of this checkout's HEAD (+ "-dirty" when shrinkray/ has uncommitted changes)
    command: str = ""  # the exact command line, as `python -m bench NAME ARGS...`
    machine: dict[str, Any] = field(default_factory=dict)
    load_start: float | None = None
    load_end: float | None = None
    seconds: float | None = None
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    complete: bool = True  # False: the run stopped early or failed; the figures are partial
    started: float = field(default=0.0, repr=False)  # perf_counter at begin(); not saved

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data.pop("started")
        return json.dumps(data, indent=1, default=str) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Result:
        data = json.loads(text)
        data["targets"] = [Target(**t) for t in data.get("targets", [])]
        return cls(**data)

    def markdown(self) -> str:
        """The section of RESULTS.md, markers included (ends with a newline)."""
        when = [self.date, f"engine {self.commit}" if self.commit else ""]
        if self.load_start is not None:
            end = "" if self.load_end is None else f"-{self.load_end:.1f}"
            when.append(f"load {self.load_start:.1f}{end}")
        if self.seconds is not None:
            when.append(_duration(self.seconds))
        if not self.complete:
            when.append("**incomplete run**")
        lines = [f"<!-- bench:{self.name} -->", f"## {self.name}: {self.title}" if self.title else f"## {self.name}", ""]
        lines += [", ".join(w for w in when if w) + f",\n`{self.command}`.", ""]
        if self.header:
            lines += [markdown_table(self.header, self.rows), ""]
        if self.targets:
            lines += [t.markdown() for t in self.targets] + [""]
        for note in self.notes:
            lines += [note, ""]
        if self.machine:
            lines += [f"Machine: {machine_line(self.machine)}.", ""]
        return "\n".join(lines[:-1]) + f"\n<!-- /bench:{self.name} -->\n"


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _cell(value: Any) -> str:
    text = "" if value is None else (f"{value:g}" if isinstance(value, float) else str(value))
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table (no trailing newline): what a benchmark prints and what RESULTS.md holds."""
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def machine_facts() -> dict[str, Any]:
    """Cores, RAM and the versions that move the figures."""
    facts: dict[str, Any] = {"cpu_count": os.cpu_count(), "machine": platform.machine(), "system": platform.system()}
    if hasattr(os, "sched_getaffinity"):
        facts["usable_cores"] = len(os.sched_getaffinity(0))
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                facts["ram_gib"] = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    facts["python"] = platform.python_version()
    for module in ("onnx", "onnxruntime", "numpy"):
        try:
            facts[module] = __import__(module).__version__
        except ImportError:
            facts[module] = None
    return facts


def machine_line(facts: dict[str, Any]) -> str:
    cores = facts.get("usable_cores") or facts.get("cpu_count")
    parts = [f"{cores} cores ({facts.get('machine', '?')}, {facts.get('system', '?')})"]
    if facts.get("ram_gib"):
        parts.append(f"{facts['ram_gib']:g} GiB RAM")
    parts.append(f"Python {facts.get('python')}")
    parts += [f"{m} {facts[m]}" for m in ("onnx", "onnxruntime", "numpy") if facts.get(m)]
    return ", ".join(parts)


def engine_commit(root: Path = ROOT) -> str:
    """Short hash of ``root``'s HEAD, "-dirty" when shrinkray/ has uncommitted changes; "" outside git."""

    def git(*args: str) -> str:
        proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD")
    return head + ("-dirty" if head and git("status", "--porcelain", "--", "shrinkray") else "")


def load_average() -> float | None:
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def command_line(name: str, argv: list[str] | None) -> str:
    return shlex.join(["python", "-m", "bench", name, *(sys.argv[1:] if argv is None else argv)])


def begin(name: str, argv: list[str] | None, title: str = "") -> Result:
    """Start a benchmark's result: call first thing in its ``main(argv)``."""
    if not title:
        try:
            from registry import BY_NAME  # bench/ is on sys.path when a benchmark runs
        except ImportError:
            BY_NAME = {}
        title = BY_NAME[name].description if name in BY_NAME else ""
    return Result(
        name=name, title=title, date=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        commit=engine_commit(), command=command_line(name, argv), machine=machine_facts(),
        load_start=load_average(), started=time.perf_counter(),
    )  # fmt: skip


def finish(
    result: Result,
    header: list[str],
    rows: list[list[Any]],
    targets: list[Target] | tuple = (),
    notes: list[str] | tuple = (),
    complete: bool = True,
    results_md: Path | None = None,
    out: Path | None = None,
    show: bool = True,
) -> Path:
    """End a benchmark's result: print its table and targets (unless ``show`` is False: the benchmark printed
    them already, with :func:`markdown_table`), save the JSON, rewrite its RESULTS.md section.

    Returns the JSON file. RESULTS.md is left alone under ``--no-results``.
    """
    result.header = [str(h) for h in header]
    result.rows = [[_cell(c) for c in row] for row in rows]
    result.targets, result.notes, result.complete = list(targets), list(notes), complete
    result.load_end = load_average()
    if result.started:
        result.seconds = round(time.perf_counter() - result.started, 1)
    if show:
        print("\n" + markdown_table(result.header, result.rows))
        for target in result.targets:
            print(target.markdown())
    path = save(result, out or OUT)
    md = results_md or RESULTS_MD
    if os.environ.get(NO_RESULTS_ENV, "") not in ("", "0"):
        print(f"result: {path} (--no-results: {md.name} left as it is)")
    else:
        write_section(md, result)
        print(f"result: {path}; section '{result.name}' of {md} rewritten")
    return path


def save(result: Result, folder: Path = OUT) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{result.name}.result.json"
    path.write_text(result.to_json())
    return path


def markers(name: str) -> tuple[str, str]:
    return f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"


def replace_section(text: str, name: str, section: str) -> str:
    """``text`` with the section of ``name`` (markers included) replaced by ``section``, or appended at the end
    when it has none. Everything outside the markers is kept byte for byte."""
    start_mark, end_mark = markers(name)
    if not section.endswith("\n"):
        section += "\n"
    found = re.search(rf"^{re.escape(start_mark)}[ \t]*$", text, re.M)  # a marker on a line of its own
    if found:
        end = re.compile(rf"^{re.escape(end_mark)}[ \t]*(\n|\Z)", re.M).search(text, found.end())
        if end is None:
            raise ValueError(f"{start_mark} has no {end_mark}")
        return text[: found.start()] + section + text[end.end() :]
    if not text:
        return section
    return text + ("\n" if text.endswith("\n") else "\n\n") + section


def write_section(path: Path, result: Result) -> bool:
    """Rewrite ``result``'s section of ``path``; True when the file changed."""
    old = path.read_text() if path.exists() else ""
    new = replace_section(old, result.name, result.markdown())
    if new != old:
        path.write_text(new)
    return new != old

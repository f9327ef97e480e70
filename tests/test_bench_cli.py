"""`python -m bench --list` lists every registered benchmark, every registered module file exists, and the
results module (bench/common/results.py) rewrites one section of bench/RESULTS.md and nothing else.

Unit tier: no benchmark runs here; the check that every benchmark writes its result is static."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _registry():
    """bench/registry.py, loaded from its file (bench/ is not an installed package)."""
    spec = importlib.util.spec_from_file_location("bench_registry", ROOT / "bench" / "registry.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while the class is built
    spec.loader.exec_module(module)
    return module


BENCHMARKS = _registry().BENCHMARKS


def test_list_names_every_registered_benchmark():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "bench", "--list"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60, check=True)  # fmt: skip
    listed = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
    assert listed == {b.name for b in BENCHMARKS}


def test_every_registered_module_exists_and_names_are_unique():
    assert len({b.name for b in BENCHMARKS}) == len(BENCHMARKS)
    for bench in BENCHMARKS:
        assert bench.path.is_file(), f"{bench.name}: {bench.path} is missing"
        assert "def main(argv" in bench.path.read_text(), f"{bench.name}: no main(argv) in {bench.path}"


def _results():
    """bench/common/results.py, loaded from its file (it imports nothing of bench/ or shrinkray at import)."""
    spec = importlib.util.spec_from_file_location("bench_results", ROOT / "bench" / "common" / "results.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


results = _results()

DOC = """# Current figures

Intro, hand-written; it may name `<!-- bench:NAME -->` in a sentence.

<!-- bench:alpha -->
## alpha: old figures

| a | b |
| --- | --- |
| 1 | 2 |
<!-- /bench:alpha -->

Text between sections stays.

<!-- bench:beta -->
## beta

kept as it is
<!-- /bench:beta -->
"""


def _result(name: str = "alpha", **kwargs) -> object:
    base = dict(name=name, title="a test", date="2026-11-28 12:00 UTC", commit="abc1234",
                command=f"python -m bench {name} --small", machine={"cpu_count": 2, "python": "3.11.7"},
                load_start=1.25, load_end=2.5, seconds=12.0, header=["model", "wall s"], rows=[["mlp", "1.5"]],
                targets=[results.Target("wall <= 2 s", True, "1.5 s")], notes=["A note."])  # fmt: skip
    return results.Result(**{**base, **kwargs})


def test_section_rewrite_keeps_every_other_byte():
    new = results.replace_section(DOC, "alpha", _result().markdown())
    start, end = "<!-- bench:alpha -->\n", "<!-- /bench:alpha -->\n"
    before, after = DOC.split(start)[0], DOC.split(end)[1]
    assert new.startswith(before) and new.endswith(after)  # intro, the text between and beta: byte-identical
    section = new[len(before) : len(new) - len(after)]
    assert section == _result().markdown()
    assert "| mlp | 1.5 |" in section and "old figures" not in section
    assert "`python -m bench alpha --small`" in section and "engine abc1234" in section and "load 1.2-2.5" in section
    assert "- wall <= 2 s: **met** (1.5 s)" in section
    assert results.replace_section(new, "beta", "<!-- bench:beta -->\n## beta\n\nkept as it is\n<!-- /bench:beta -->\n") == new


def test_missing_section_is_appended_at_the_end():
    new = results.replace_section(DOC, "gamma", _result("gamma").markdown())
    assert new.startswith(DOC)
    assert new == DOC + "\n" + _result("gamma").markdown()
    assert results.replace_section("", "gamma", "x") == "x\n"


def test_section_rewrite_is_idempotent(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text(DOC)
    assert results.write_section(path, _result())
    once = path.read_text()
    assert not results.write_section(path, _result())  # the same result again: the file does not change
    assert path.read_text() == once
    assert results.replace_section(once, "alpha", _result().markdown()) == once


def test_marker_inside_a_sentence_is_not_a_section():
    assert results.replace_section(DOC, "NAME", "<!-- bench:NAME -->\nx\n<!-- /bench:NAME -->\n").startswith(DOC)


def test_result_json_round_trips(tmp_path):
    result = _result(complete=False)
    path = results.save(result, tmp_path)
    assert path == tmp_path / "alpha.result.json"
    back = results.Result.from_json(path.read_text())
    assert back == result
    assert back.targets[0] == results.Target("wall <= 2 s", True, "1.5 s")
    assert "**incomplete run**" in back.markdown()


def test_finish_writes_json_and_section_and_obeys_no_results(tmp_path, monkeypatch, capsys):
    md = tmp_path / "RESULTS.md"
    md.write_text(DOC)
    monkeypatch.setenv(results.NO_RESULTS_ENV, "1")
    started = results.begin("alpha", ["--small"], title="a test")
    assert started.command == "python -m bench alpha --small" and started.machine["python"]
    results.finish(started, ["model", "wall s"], [["mlp", 1.5]], results_md=md, out=tmp_path)
    assert md.read_text() == DOC  # --no-results: untouched
    assert results.Result.from_json((tmp_path / "alpha.result.json").read_text()).rows == [["mlp", "1.5"]]
    assert "| mlp | 1.5 |" in capsys.readouterr().out  # the printed table is the written one
    monkeypatch.delenv(results.NO_RESULTS_ENV)
    results.finish(started, ["model", "wall s"], [["mlp", 1.5]], results_md=md, out=tmp_path)
    assert "| mlp | 1.5 |" in md.read_text().split("<!-- bench:alpha -->")[1]
    assert md.read_text().endswith(DOC.split("<!-- /bench:alpha -->\n")[1])


def test_markdown_table_escapes_pipes():
    assert results.markdown_table(["a", "b"], [["x|y", None]]) == "| a | b |\n| --- | --- |\n| x\\|y |  |"


def test_every_registered_benchmark_writes_its_result():
    """Static: each module's main begins a Result under its registered name and finishes it (no benchmark runs)."""
    for bench in BENCHMARKS:
        source = bench.path.read_text()
        assert f'results.begin("{bench.name}", argv' in source, f"{bench.name}: no results.begin in {bench.path}"
        assert "results.finish(" in source, f"{bench.name}: no results.finish in {bench.path}"


def test_results_md_has_one_section_per_benchmark():
    text = (ROOT / "bench" / "RESULTS.md").read_text()
    for bench in BENCHMARKS:
        assert text.count(f"\n<!-- bench:{bench.name} -->\n") == 1, bench.name
        assert text.count(f"\n<!-- /bench:{bench.name} -->\n") == 1, bench.name


def test_no_results_flag_is_taken_out_before_the_benchmark_runs():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "bench", "--no-results", "--list"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    assert {line.split()[0] for line in proc.stdout.splitlines() if line.strip()} == {b.name for b in BENCHMARKS}

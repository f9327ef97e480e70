"""The README is the front door and docs/ the manual (issue 26): the README stays short, shows the two
commands CI runs and one verdict sentence; every relative link in README.md and docs/*.md reaches a file
(and a heading, when it names one); every setting the engine reads from the environment is documented
in docs/, and every limit in the limits table."""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]

INSTALL_AND_START = "pip install -r requirements.txt -e . && streamlit run app.py"
TEST_SUITE = "pip install -r requirements-dev.txt && python -m pytest"

#: Markdown links and images, [text](target) / ![alt](target), outside code.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code (links there are examples, not links)."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[*`]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#+\s+(.*)$", FENCE.sub("", page.read_text(encoding="utf-8")), re.M)}


def _bash_lines(text: str) -> list[str]:
    blocks = re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_the_readme_is_a_front_door():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def test_the_readme_shows_the_two_commands_and_ci_runs_the_second():
    commands = _bash_lines(README.read_text(encoding="utf-8"))
    assert INSTALL_AND_START in commands
    assert TEST_SUITE in commands
    ci = [re.sub(r"\s-q\b", "", line).strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    for part in TEST_SUITE.split("&&"):
        assert part.strip() in ci, f".ci/run does not run {part.strip()!r}, the README's test command"


def test_the_readme_shows_one_verdict_sentence():
    sentences = re.findall(
        r"^> (Passes|Fails|Undecided): .+\(needs [^)]+\)\.$", README.read_text(encoding="utf-8"), re.M
    )
    assert len(sentences) == 1


def test_the_slug_is_githubs():
    assert _slug("Several replicas (Redis + RQ)") == "several-replicas-redis--rq"
    assert _slug("compare: measure every variant") == "compare-measure-every-variant"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_its_file_and_heading(page):
    broken = []
    for target in LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file.relative_to(ROOT) if file.is_relative_to(ROOT) else file}")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not broken, broken


def test_every_docs_page_is_reachable_from_the_readme_or_the_docs_index():
    linked = set()
    for page in (README, DOCS / "README.md"):
        for target in LINK.findall(_prose(page.read_text(encoding="utf-8"))):
            linked.add((page.parent / target.partition("#")[0]).resolve())
    orphans = [p.name for p in DOCS.glob("*.md") if p.resolve() not in linked and p.name != "README.md"]
    assert not orphans


def _engine_sources() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "shrinkray").rglob("*.py"))


#: Set by the sandbox for its own child processes, never by a user.
INTERNAL = {"SHRINKRAY_WORKER"}


def test_every_environment_variable_the_engine_reads_is_documented():
    names = set(re.findall(r"\bSHRINKRAY_[A-Z][A-Z_]*[A-Z]\b", _engine_sources())) - INTERNAL
    assert len(names) > 10  # the search itself works
    docs = "\n".join(p.read_text(encoding="utf-8") for p in DOCS.glob("*.md"))
    assert not sorted(n for n in names if n not in docs)


def _limits_class():
    for module in ("shrinkray.io.limits", "shrinkray.limits"):  # after and before the house move (issue 26)
        try:
            return importlib.import_module(module).Limits
        except ModuleNotFoundError:
            continue
    raise AssertionError("no Limits class")


def test_every_limit_is_in_the_limits_table():
    text = (DOCS / "security.md").read_text(encoding="utf-8")
    table = text[text.index("## Limits") :].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    fields = [f.name for f in dataclasses.fields(_limits_class())]
    assert len(fields) > 10
    missing = [name for name in fields if not any(f"`SHRINKRAY_{name.upper()}`" in row for row in rows)]
    assert not missing

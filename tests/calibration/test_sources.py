"""The sources stay inside the repository: code and help texts cite docs/sources.md by section, the sections and the
subsection titles they cite exist there, and nothing points at a file outside the repository or at tracker history.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import re
from pathlib import Path

import pytest

from tests.support import ROOT

SOURCES = ROOT / "docs" / "sources.md"
SKIP_DIRS = {".git", "tests", "__pycache__", ".venv", "venv", "build", "dist", ".hypothesis", "node_modules", "site"}
FORBIDDEN = re.compile(r"domain\.md|interfaces\.md|house-style\.md|\bissue #?\d", re.IGNORECASE)
CITATION = re.compile(r"docs/sources\.md\s+((?:§\d+(?:\s*[-–]\s*\d+)?(?:,\s*)?)+)")
# a title starts right after its quote: ``§1 "`` closing a string literal that a next one continues is no title
TITLED = re.compile(r"docs/sources\.md\s+§(\d+)(?:,\s*|\s+)\"([^\"\s][^\"]*)\"")
# the commands whose --help a user reads
COMMANDS = (
    "experiments.run",
    "experiments.sweep",
    "experiments.whatif",
    "experiments.report",
    "experiments.compare",
    "experiments.faults",
    "experiments.bench",
    "calibration.fit",
    "calibration.run",
    "calibration.recovery",
)


def _code_files() -> list[Path]:
    files = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if SKIP_DIRS.isdisjoint(rel.parts[:-1]) and not rel.parts[0].endswith(".egg-info"):
            files.append(rel)
    return sorted(files)


def _cited_files() -> list[Path]:
    """Every .py file that may cite the page: the code and the tests."""
    return _code_files() + sorted(p.relative_to(ROOT) for p in (ROOT / "tests").glob("*.py"))


def _sections() -> dict[int, str]:
    """docs/sources.md's numbered sections: number → the section's text (its headings and bold labels included)."""
    text = SOURCES.read_text()
    parts = re.split(r"^## (\d+)\. ", text, flags=re.M)
    return {int(parts[i]): parts[i + 1] for i in range(1, len(parts), 2)}


def _titles(section: str) -> set[str]:
    """The names a citation may quote: the section's own title, its subsection headings and its bold labels."""
    first = section.splitlines()[0]
    heads = re.findall(r"^#{3,6} (.+?)\s*$", section, flags=re.M)
    bold = re.findall(r"\*\*([^*]+)\*\*", section)
    return {_norm(t) for t in [first, *heads, *bold]}


def _norm(s: str) -> str:
    return " ".join(s.split()).strip(" .:")


def test_the_page_has_the_seven_sections_the_code_cites_by_number():
    assert SOURCES.is_file()
    assert sorted(_sections()) == [1, 2, 3, 4, 5, 6, 7]


def test_scanner_sees_the_code_and_skips_only_the_pending_file():
    files = _code_files()
    assert Path("sim/scenario.py") in files and Path("models/inputs/platform/function.py") in files
    assert not any(p.parts[0] == "tests" for p in files) and Path("experiments/run.py") in files


def test_no_code_cites_a_file_outside_the_repository_or_an_issue_number():
    bad = []
    for rel in _code_files():
        for n, line in enumerate((ROOT / rel).read_text().splitlines(), 1):
            if FORBIDDEN.search(line):
                bad.append(f"{rel}:{n}: {line.strip()}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("module", COMMANDS)
def test_no_help_text_cites_a_file_outside_the_repository_or_an_issue_number(module):
    main = importlib.import_module(module).main
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0 and "usage:" in out.getvalue()
    assert not FORBIDDEN.search(out.getvalue()), FORBIDDEN.search(out.getvalue())[0]


def test_every_cited_section_exists():
    sections = set(_sections())
    cited, bad = 0, []
    for rel in _cited_files():
        for m in CITATION.finditer((ROOT / rel).read_text()):
            for first, last in re.findall(r"§(\d+)(?:\s*[-–]\s*(\d+))?", m[1]):
                numbers = range(int(first), int(last or first) + 1)
                cited += 1
                bad += [f"{rel}: §{k}" for k in numbers if k not in sections]
    assert cited > 100  # the scan finds the citations (about 200 today)
    assert not bad, "\n".join(bad)


def test_every_quoted_subsection_title_is_on_the_page_in_its_section():
    sections = _sections()
    quoted, bad = 0, []
    for rel in _cited_files():
        for m in TITLED.finditer((ROOT / rel).read_text()):
            quoted += 1
            number, title = int(m[1]), _norm(m[2])
            if number not in sections or title not in _titles(sections[number]):
                bad.append(f'{rel}: §{number}, "{title}"')
    assert quoted >= 10  # e.g. §2, "Modal v2"; §1, "Four ways past the limits"
    assert not bad, "\n".join(bad)

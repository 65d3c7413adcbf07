"""Every code block in the docs and the README runs against its recorded output, so the pages cannot drift from the
code (as SimPy's docs/conftest.py and Ciw's doctests do). One test per page; a page's blocks run in order in one
scratch directory, which holds the repository's packages (so ``calibration/params/...`` resolves as in a checkout).

The kinds of block a page may hold:

- ```` ```console ````: ``$ command`` lines (a line ending in ``\\`` continues on the next), each followed by its
  recorded output (stdout and stderr as a terminal shows them; a nonzero exit adds a line ``[exit N]``). ``...``
  matches any text, across lines too (doctest's ELLIPSIS); runs of whitespace compare equal. ``pip install`` of the
  project itself is not run but checked: ``.`` or an extra that pyproject.toml declares.
- ```` ```pycon ````: a doctest (``>>>`` and recorded output), the page's blocks sharing one namespace.
- a block with ``title="path"`` (any language): a file the page's later blocks use, written into the scratch dir.

A comment on the line before a fence changes how it is checked: ``<!-- docs: ci -->`` (a console block whose commands
are the test command in .ci/run, which CI runs, so here they are only compared with it) and ``<!-- docs:
modal-standin -->`` (the commands run against the stand-in Modal server, calibration/standin, as MODAL_SERVER_URL).
Any other block fails: a page may show no code that is not run."""

from __future__ import annotations

import doctest
import os
import re
import shlex
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from experiments.docs import HELP_COLUMNS
from tests.support import ROOT

PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
PACKAGES = ("sim", "models", "calibration", "experiments")
CI_COMMAND = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
TIMEOUT_S = 120
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
FENCE = re.compile(r"^(`{3,})\s*([\w+-]*)\s*(.*)$")
DIRECTIVE = re.compile(r"^<!--\s*docs:\s*([\w-]+)\s*-->$")


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    title: str | None
    directive: str | None
    body: str

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a markdown page, with the title attribute and the directive comment of each."""
    found, lines, i = [], page.read_text().splitlines(), 0
    while i < len(lines):
        fence = FENCE.match(lines[i].strip())
        if not fence:
            i += 1
            continue
        ticks, lang, attrs = fence.groups()
        title = re.search(r'title="([^"]+)"', attrs)
        before = next((s.strip() for s in reversed(lines[:i]) if s.strip()), "")
        directive = DIRECTIVE.match(before)
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == ticks), None)
        assert end is not None, f"{page.relative_to(ROOT)}:{i + 1}: unclosed code block"
        body = "\n".join(lines[i + 1 : end])
        found.append(Block(page, i + 1, lang, title and title.group(1), directive and directive.group(1), body + "\n"))
        i = end + 1
    return found


def commands(body: str) -> list[tuple[str, str]]:
    """A console block's ``$ command`` lines (continuations joined) and the recorded output after each."""
    parsed: list[tuple[str, list[str]]] = []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            cmd = line[2:]
            while cmd.endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd[:-1].rstrip() + " " + lines[i].strip()
            parsed.append((cmd, []))
        else:
            assert parsed, f"output before the first $ command: {line!r}"
            parsed[-1][1].append(line)
        i += 1
    return [(cmd, "\n".join(out).strip("\n") + "\n" if any(out) else "") for cmd, out in parsed]


def matches(want: str, got: str) -> bool:
    strip = "\n".join(s.rstrip() for s in got.strip("\n").splitlines()) + "\n"
    return doctest.OutputChecker().check_output(want, strip, FLAGS)


def check_pip(cmd: str, where: str) -> None:
    """``pip install -e .`` or ``pip install -e '.[extra,...]'`` with extras pyproject.toml declares."""
    args = shlex.split(cmd)
    assert args[:3] == ["pip", "install", "-e"] and len(args) == 4, f"{where}: not an install of the project: {cmd}"
    extras = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", args[3])
    assert extras, f"{where}: installs {args[3]!r}, not this project"
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get("optional-dependencies", {})
    for extra in (extras.group(1) or "").split(","):
        assert not extra or extra in declared, f"{where}: pyproject.toml declares no extra {extra!r}"


def run_console(block: Block, cwd: Path, env: dict[str, str]) -> list[str]:
    failures = []
    for cmd, want in commands(block.body):
        if block.directive == "ci":
            if cmd not in CI_COMMAND:
                failures.append(f"{block.where()}: {cmd!r} is not .ci/run's test command: {CI_COMMAND!r}")
            continue
        parts = cmd.split(" && ")
        while parts and parts[0].startswith("pip install"):
            check_pip(parts.pop(0), block.where())
        if not parts:
            continue
        try:
            done = subprocess.run(
                ["bash", "-c", " && ".join(parts)],
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            failures.append(f"{block.where()}: $ {cmd}: still running after {TIMEOUT_S} s")
            continue
        got = done.stdout + (f"[exit {done.returncode}]\n" if done.returncode else "")
        if not matches(want, got):
            failures.append(f"{block.where()}: $ {cmd}\n--- recorded\n{want}--- got\n{got}")
    return failures


def run_pycon(block: Block, globs: dict, cwd: Path) -> list[str]:
    test = doctest.DocTestParser().get_doctest(block.body, globs, block.where(), str(block.page), block.line)
    out: list[str] = []
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    old = Path.cwd()
    os.chdir(cwd)
    try:
        runner.run(test, out=out.append, clear_globs=False)
    finally:
        os.chdir(old)
    globs.update(test.globs)  # the DocTest ran on a copy: later blocks of the page see its names
    return ["".join(out)] if runner.failures else []


def scratch(tmp_path: Path) -> Path:
    for name in PACKAGES:
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


def test_every_page_is_collected():
    assert ROOT / "README.md" in PAGES and ROOT / "docs" / "index.md" in PAGES


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_examples_run_as_recorded(page, tmp_path):
    cwd = scratch(tmp_path)
    env = {**os.environ, "COLUMNS": HELP_COLUMNS, "NO_COLOR": "1", "PYTHONHASHSEED": "0"}
    globs: dict = {"__name__": "__docs__"}
    failures: list[str] = []
    standin = None
    try:
        for block in blocks(page):
            if block.title:
                target = cwd / block.title
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.body)
            elif block.lang == "console":
                if block.directive == "modal-standin" and standin is None:
                    from calibration.standin.server import StandIn

                    standin = StandIn(log=tmp_path / "standin.log").__enter__()
                run_env = {**env, **standin.env} if block.directive == "modal-standin" else env
                failures += run_console(block, cwd, run_env)
            elif block.lang == "pycon":
                failures += run_pycon(block, globs, cwd)
            else:
                failures.append(f"{block.where()}: an untested ```{block.lang} block (console, pycon or a title)")
    finally:
        if standin is not None:
            standin.__exit__(None, None, None)
    assert not failures, "\n\n".join(failures)


def test_matching_rules():
    assert matches("a\n...\nz\n", "a\nb\nc\nz\n")
    assert matches("rows ... in 3.0 s\n", "rows 30 in 3.0 s   \n")
    assert not matches("a\nz\n", "a\nb\nz\n")
    assert commands("$ echo a \\\n  b\na b\n$ true\n") == [("echo a b", "a b\n"), ("true", "")]


def test_pycon_blocks_of_a_page_share_their_names(tmp_path):
    page = ROOT / "docs" / "index.md"
    globs: dict = {"__name__": "__docs__"}
    first = Block(page, 1, "pycon", None, None, ">>> x = 6 * 7\n")
    second = Block(page, 5, "pycon", None, None, ">>> x\n42\n")
    assert run_pycon(first, globs, tmp_path) == [] and run_pycon(second, globs, tmp_path) == []
    assert run_pycon(Block(page, 9, "pycon", None, None, ">>> x\n41\n"), globs, tmp_path) != []

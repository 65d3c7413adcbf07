"""The docs site: its generated reference pages match the code they are generated from and cover every scenario key
and every declared metric, and the site builds offline with MkDocs in strict mode with no dead internal link."""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

import models
from experiments import docs
from experiments.whatif import QUESTIONS
from models.presets import PRESETS
from models.registry import MODELS
from models.runs import load_scenario
from sim.metrics import Metrics
from sim.scenario import schema_keys
from tests.support import ROOT

REFERENCE = ROOT / "docs" / "reference"


def sections(page: str) -> dict[str, str]:
    """A page's text under each ``## heading``."""
    parts = re.split(r"^## (.+)$", page, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def first_column(text: str) -> set[str]:
    """The code spans of a markdown table's first column."""
    return set(re.findall(r"^\| `([^`]+)` \|", text, flags=re.M))


def test_generated_pages_match_the_code(tmp_path):
    written = docs.write(tmp_path)
    assert sorted(p.name for p in written) == ["commands.md", "keys.md", "metrics.md", "modules.md"]
    for path in written:
        committed = REFERENCE / path.name
        assert committed.exists(), f"{committed} missing: run python -m experiments.docs"
        assert path.read_text() == committed.read_text(), (
            f"docs/reference/{path.name} is out of date with the code: run python -m experiments.docs"
        )


def test_keys_page_lists_every_schema_key_of_every_model():
    page = sections((REFERENCE / "keys.md").read_text())
    assert list(page) == list(MODELS)
    for name, model in MODELS.items():
        listed = first_column(page[name])
        assert listed == schema_keys(model.schema), name


def declared_in_models() -> set[str]:
    """Every metric declared anywhere in the models package (a module-level ``Metrics``)."""
    names: set[str] = set()
    for info in pkgutil.walk_packages(models.__path__, "models."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, Metrics):
                names |= set(value.names())
    return names


def test_metrics_page_lists_every_declared_metric():
    page = sections((REFERENCE / "metrics.md").read_text())
    assert list(page)[: len(MODELS)] == list(MODELS)
    listed = {name: first_column(text) for name, text in page.items()}
    for path in sorted(PRESETS.glob("*.toml")):
        sc = load_scenario(path.stem)
        declared = MODELS[sc.model].metrics(sc)
        assert set(declared.names()) <= listed[sc.model], path.stem
        rows = {line.split(" | ")[0].strip("| `"): line for line in page[sc.model].splitlines() if line.startswith("|")}
        for m in declared:  # every key of a counts metric is named on its row
            assert all(f"`{k}`" in rows[m.name] for k in m.keys), (path.stem, m.name)
    everywhere = set().union(*listed.values())
    assert declared_in_models() - everywhere == set()


def test_metrics_page_says_when_a_metric_is_not_always_reported():
    rows = sections((REFERENCE / "metrics.md").read_text())["sandboxes"]
    (etcd,) = [line for line in rows.splitlines() if line.startswith("| `etcd_writes` |")]
    assert etcd.endswith("control plane kubernetes (sandboxes-k8s); `control_plane = kubernetes` |")
    (lost,) = [line for line in rows.splitlines() if line.startswith("| `sandboxes_lost` |")]
    assert "`faults.worker_death_workers` > 0" in lost and "always" not in lost


def test_commands_page_has_every_command_help():
    page = sections((REFERENCE / "commands.md").read_text())
    assert list(page) == list(docs.COMMANDS)
    assert "--uncertainty-seeds N" in page["experiments.run"]
    assert "{" + ",".join(QUESTIONS) + "}" in page["experiments.whatif"]
    for module, text in page.items():
        (usage,) = re.findall(r"^usage: (.+)$", text, flags=re.M)
        assert module in usage, module


@pytest.mark.slow
def test_command_line_writes_the_pages(tmp_path):
    out = tmp_path / "ref"
    r = subprocess.run(
        [sys.executable, "-m", "experiments.docs", "--out", str(out)], capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["commands.md", "keys.md", "metrics.md", "modules.md"]
    assert (out / "keys.md").read_text() == (REFERENCE / "keys.md").read_text()


def test_command_line_refuses_a_file_for_the_folder(tmp_path):
    (tmp_path / "f").write_text("")
    r = subprocess.run(
        [sys.executable, "-m", "experiments.docs", "--out", str(tmp_path / "f")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "--out" in r.stderr and "Traceback" not in r.stderr


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("docs")
    out = tmp / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "--site-dir", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return out


@pytest.mark.slow
def test_site_builds_strict_offline(site):
    for page in ("index.html", "reference/keys/index.html", "reference/metrics/index.html", "sources/index.html"):
        assert (site / page).exists(), page
    html = (site / "index.html").read_text()
    assert "fonts.googleapis.com" not in html and "fonts.gstatic.com" not in html
    for path in site.rglob("*.html"):  # nothing the browser must fetch from elsewhere
        text = path.read_text()
        assert not re.search(r'<(script|link|img)[^>]+(src|href)="(https?:)?//', text), path


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        for key in ("href", "src"):
            if a.get(key):
                self.hrefs.append(a[key])


def dead_links(site: Path) -> tuple[int, list[str]]:
    """(links checked, dead ones) of a built site: every local href or src of every page must be a file of the
    site (a folder: its index.html), and its #anchor an id of that page."""
    pages: dict[Path, Links] = {}
    for path in site.rglob("*.html"):
        parser = Links()
        parser.feed(path.read_text())
        pages[path.resolve()] = parser
    dead = []
    checked = 0
    for path, parser in pages.items():
        for href in parser.hrefs:
            url = urlsplit(href)
            if url.scheme or url.netloc or href.startswith(("mailto:", "data:")):
                continue
            if url.path.startswith("/"):  # the 404 page's links are from the site's root
                target = (site / unquote(url.path).lstrip("/")).resolve()
            else:
                target = (path.parent / unquote(url.path)).resolve() if url.path else path
            if target.is_dir():
                target = target / "index.html"
            checked += 1
            if not target.exists():
                dead.append(f"{path.relative_to(site)}: {href}")
            elif url.fragment and target.suffix == ".html" and unquote(url.fragment) not in pages[target].ids:
                dead.append(f"{path.relative_to(site)}: {href} (no such anchor)")
    return checked, dead


def test_link_checker_finds_dead_links(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "index.html").write_text('<a href="a/">a</a> <a href="a/#x">x</a> <a href="#top" id="top">t</a>')
    (tmp_path / "a" / "index.html").write_text(
        '<h2 id="x">x</h2> <a href="../b/">b</a> <a href="../#nope">n</a> <img src="../i.png"> <a href="https://e.org">e</a>'
    )
    checked, dead = dead_links(tmp_path)
    assert checked == 6
    assert dead == ["a/index.html: ../b/", "a/index.html: ../#nope (no such anchor)", "a/index.html: ../i.png"]


def test_no_dead_internal_link(site):
    checked, dead = dead_links(site)
    assert checked > 100
    assert dead == []

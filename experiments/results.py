"""The results table of a sweep: one row per (point, seed) with every parameter, the seed, the metrics, ``wall_s``
and ``error``. This module owns its format (columns, reading, resuming; a run's metrics become columns as their
declaration says: sim/metrics.py); experiments/sweep.py writes it and experiments/report.py reads it.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from experiments.cli import build_scenario
from models.registry import MODELS
from sim import files
from sim.scenario import ScenarioError, flatten, to_dict

KEYS = ["point", "variant", "seed"]


def columns(trees: Iterable[tuple[dict, Path | None]]) -> list[str]:
    """The table's columns, fixed so that rows can be appended as they come: every parameter of each point's
    scenario (a raw tree and the folder its files are found from) and every metric its model declares for it, in
    order of first appearance; nothing is run. A point that does not build adds none (its row holds its error)."""
    params: dict[str, None] = {}
    metrics: dict[str, None] = {}
    for tree, base in trees:
        try:
            sc = build_scenario(tree, base)
        except ScenarioError:
            continue
        params.update(dict.fromkeys(flatten(to_dict(sc))))
        metrics.update(dict.fromkeys(MODELS[sc.model].metrics(sc).columns()))
    return [*KEYS, *params, *metrics, "wall_s", "error"]


def done_rows(path: Path) -> set[tuple[int, int]]:
    """(point, seed) of the rows already written; a torn last line (a killed write) is cut off."""
    if not path.exists():
        return set()
    try:
        text = files.read_bytes(path, "a results table", files.TABLE_CAP).decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError(f"{path}: not a UTF-8 results table; remove it or use --fresh") from None
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
        path.write_text(text)
    done = set()
    for line, r in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        try:
            done.add((int(r["point"]), int(r["seed"])))
        except (KeyError, TypeError, ValueError):
            raise ScenarioError(f"{path}, line {line}: a malformed row; fix or remove it, or use --fresh") from None
    return done


class Appender:
    """Appends rows to a results CSV as runs finish, each flushed at once: a killed sweep loses nothing finished.
    A row with a column outside the header keeps its known columns and says so in its ``error``. A table written
    with other columns (by a model that declared other metrics) is not appended to: its rows would not line up."""

    def __init__(self, path: Path, header: list[str]) -> None:
        self.header = header
        new_file = not path.exists() or path.stat().st_size == 0
        if not new_file:
            with open(path, newline="") as f:
                old = next(csv.reader(f), [])
            if old != header:
                new = [c for c in header if c not in old] or [c for c in old if c not in header] or ["their order"]
                raise ScenarioError(
                    f"{path}: written with other columns ({len(old)}, this sweep's {len(header)}: "
                    f"{', '.join(new[:3])}{' ...' if len(new) > 3 else ''} differ); use --fresh or another --out"
                )
        self._file = open(path, "a", newline="")  # noqa: SIM115 (closed by close(), the context manager's exit)
        self._writer = csv.DictWriter(self._file, fieldnames=header, restval="")
        if new_file:
            self._writer.writeheader()

    def write(self, row: dict) -> None:
        unknown = set(row) - set(self.header)
        if unknown:
            row = {k: v for k, v in row.items() if k in self.header}
            row["error"] = (row.get("error") or "") + f" (unexpected columns {sorted(unknown)})"
        self._writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Appender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_results(path: Path) -> pd.DataFrame:
    """The results table (CSV or Parquet), sorted by point and seed."""
    path = Path(path)
    data = io.BytesIO(files.read_bytes(path, "a results table", files.TABLE_CAP))  # regular, within its cap
    try:
        table = (
            pd.read_parquet(data)
            if path.suffix == ".parquet"
            else pd.read_csv(data, keep_default_na=False, na_values=[""])
        )
    except (OSError, ValueError) as e:
        raise ScenarioError(f"{path}: cannot read a results table: {e}") from None
    if not set(KEYS) <= set(table.columns):
        raise ScenarioError(f"{path}: not a results table (no point, seed and variant columns)")
    if "error" not in table.columns:  # a table written by hand or another tool: no run recorded an error
        table["error"] = ""
    table["error"] = table["error"].astype(object).where(table["error"].notna(), "").astype(str)
    return table.sort_values(["point", "seed"], kind="stable").reset_index(drop=True)

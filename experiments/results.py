"""The results table of a sweep: one row per (point, seed) with every parameter, the seed, the metrics, ``wall_s``
and ``error``. This module owns its format (columns, reading, resuming; a run's metrics become columns as their
declaration says: sim/metrics.py) and who writes it (``lock``); experiments/sweep.py writes it and
experiments/report.py reads it.

Resuming (``resume``) reads an existing table row by row against the sweep's points. A row is kept when its
(point, seed) is one of the sweep's and not already kept, its parameters are its point's, and its numeric metrics are
numbers; the others are dropped (those of the sweep's runs are done again), each kind of drop said in one line on
stderr, and the table is rewritten without them.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import math
import os
import shlex
import stat
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.rows import row_keys
from experiments.spec import Point
from sim import files
from sim.cli import one_line
from sim.scenario import ScenarioError, flatten, to_dict

if TYPE_CHECKING:
    import pandas as pd

KEYS = ["point", "variant", "seed"]
LOCK_FILE = ".sweep.lock"  # in --out: locked (flock) by the one sweep that writes there
NUMERIC = ("number", "counts")  # metric kinds whose columns hold numbers (sim/metrics.py)


class WriteFailed(Exception):
    """The results table could not be written (a full disk, a file system gone read-only); every row before the
    one that failed is in the table, whole."""


# --- columns ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PointRows:
    """What each row of one point holds whatever its run did: how many seeds it has, its keys and parameters as the
    table's text (``params``), and which of its metric columns hold numbers (``numeric``)."""

    seeds: int
    params: dict[str, str]
    numeric: frozenset[str]


Described = tuple[dict[str, Any], list[str], list[str], bool]


def _describe(tree: dict, base: Path | None) -> Described:
    """A point's parameters as its rows hold them (its scenario's, then any raw key the scenario does not hold; the
    raw tree's alone if it does not build), its metric columns, the numeric ones among them, and whether it built."""
    from models.registry import MODELS  # (the models here and below, not at the top: a sweep's --help loads none)
    from models.runs import build_scenario

    raw = flatten(tree)
    try:
        sc = build_scenario(tree, base)
    except ScenarioError:
        return raw, [], [], False
    params = flatten(to_dict(sc))
    params.update((k, v) for k, v in raw.items() if k not in params)
    declared = MODELS[sc.model].metrics(sc)
    numeric = [c for m in declared if m.kind in NUMERIC for c in m.columns()]
    return params, declared.columns(), numeric, True


def _header(described: Iterable[Described]) -> list[str]:
    """Keys, the parameters of the points that build, the raw keys of those that do not, metrics, wall_s, error."""
    built: dict[str, None] = {}
    raw: dict[str, None] = {}
    metrics: dict[str, None] = {}
    for params, metric_columns, _, ok in described:
        (built if ok else raw).update(dict.fromkeys(params))
        metrics.update(dict.fromkeys(metric_columns))
    params = [k for k in [*built, *(k for k in raw if k not in built)] if k not in KEYS and k not in metrics]
    return [*KEYS, *params, *metrics, "wall_s", "error"]


def columns(trees: Iterable[tuple[dict, Path | None]]) -> list[str]:
    """The table's columns, fixed so that rows can be appended as they come: every parameter of each point's
    scenario (a raw tree and the folder its files are found from; a point that does not build: its raw keys) and
    every metric its model declares for it, in order of first appearance; nothing is run."""
    return _header(_describe(tree, base) for tree, base in trees)


def plan(points: Iterable[Point], spec_seeds: int) -> tuple[list[str], dict[int, PointRows]]:
    """The table's columns (``columns``, and under --uncertainty ``plausible`` and ``kept_point``) and what each
    point's rows hold, by point index: what ``resume`` checks a table's rows against."""
    described: list[Described] = []
    rows: dict[int, PointRows] = {}
    ranged = False
    for p in points:
        d = _describe(*p.tree())
        described.append(d)
        keys = {k: v for k, v in row_keys(p, 0).items() if k not in ("point", "seed")}
        rows[p.index] = PointRows(p.seeds(spec_seeds), _as_text({**keys, **d[0]}), frozenset(d[2]))
        ranged |= p.kept is not None
    header = _header(described)
    if ranged:  # --uncertainty: which plausible model a row ran
        header[len(KEYS) : len(KEYS)] = ["plausible", "kept_point"]
    return header, rows


def _line(values: Iterable[Any]) -> str:
    """One CSV record as the table holds it (None as empty)."""
    buf = io.StringIO()
    csv.writer(buf).writerow(["" if v is None else v for v in values])
    return buf.getvalue()


def _as_text(values: dict[str, Any]) -> dict[str, str]:
    """Values as a table row read back holds them: each written as CSV and read again."""
    return dict(zip(values, next(csv.reader(io.StringIO(_line(values.values())))), strict=True))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# --- resuming --------------------------------------------------------------------------------------------------

DROPS = {  # why a row is dropped on resume: what is said of it; whether its run, if the sweep's, is done again
    "header": "repeated header lines",
    "malformed": "malformed rows",
    "unknown": "rows for a point or seed this sweep does not have",
    "duplicate": "rows of a (point, seed) already kept",
    "params": "rows whose parameters are not their point's in this sweep",
    "metrics": "rows with a metric that is not a number",
}


def _read_table_text(path: Path) -> str:
    try:
        return files.read_bytes(path, "a results table", files.TABLE_CAP).decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError(f"{path}: not a UTF-8 results table; remove it or use --fresh") from None


def resume(path: Path, header: list[str], points: dict[int, PointRows]) -> tuple[list[str], set[tuple[int, int]]]:
    """Check an existing table (if any) against the sweep's ``points`` (``plan``) and return the header to append
    with (this sweep's columns, then any column an earlier widening added) and the (point, seed) of the rows kept.
    A torn last row (a write that never finished) is cut, bad rows are dropped (one line on stderr per kind, with
    counts and an example), and the table is rewritten clean if anything changed. A table without one of this
    sweep's columns, with a column twice, or that cannot be parsed as CSV is refused (bad input)."""
    if not path.exists():
        return header, set()
    text = _read_table_text(path)
    notes: list[str] = []
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
        notes.append("cut a torn last row (a write that never finished)")
    reader = csv.reader(io.StringIO(text), strict=True)
    try:
        old = next(reader, [])
        if not old:
            _rewrite(path, "")
            return header, set()
        twice = next((c for i, c in enumerate(old) if c in old[:i]), None)
        if twice is not None:
            raise ScenarioError(f"{path}: column {twice} appears twice in the header; use --fresh or another --out")
        missing = [c for c in header if c not in old]
        if missing:
            raise ScenarioError(
                f"{path}: written with other columns ({len(old)}, this sweep's {len(header)}: "
                f"{', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} differ); use --fresh or another --out"
            )
        out_header = [*header, *(c for c in old if c not in header)]
        params = [c for c in out_header if any(c in p.params for p in points.values())]
        kept: dict[tuple[int, int], list[str]] = {}
        dropped: dict[str, list[tuple[tuple[int, int] | None, str]]] = {k: [] for k in DROPS}
        for fields in reader:
            key, why, detail = _check_row(fields, old, points, params, kept)
            if why is None:
                row = dict(zip(old, fields, strict=True))
                kept[key] = [row.get(c, "") for c in out_header]
            else:
                dropped[why].append((key, f"line {reader.line_num}: {detail}"))
    except csv.Error as e:
        raise ScenarioError(
            f"{path}, line {reader.line_num}: a row that cannot be read ({e}); fix or remove it, or use --fresh"
        ) from None
    if kept or notes or any(dropped.values()):
        total = sum(p.seeds for p in points.values())
        print(
            f"resuming: {len(kept):,} of {total:,} runs kept from {path}; {total - len(kept):,} to run", file=sys.stderr
        )
    for why, rows in dropped.items():
        if rows:
            again = sum(1 for key, _ in rows if key is not None and key not in kept and _in(points, key))
            redo = f"; {again:,} of their runs done again" if again else ""
            print(f"resuming: dropped {DROPS[why]}: {len(rows):,} (e.g. {rows[0][1]}){redo}", file=sys.stderr)
    for note in notes:
        print(f"resuming: {note}", file=sys.stderr)
    if notes or out_header != old or any(dropped.values()):
        _rewrite(path, _line(out_header) + "".join(_line(r) for r in kept.values()))
    return out_header, set(kept)


def _in(points: dict[int, PointRows], key: tuple[int, int]) -> bool:
    return key[0] in points and 0 <= key[1] < points[key[0]].seeds


def _check_row(
    fields: list[str],
    old: list[str],
    points: dict[int, PointRows],
    params: list[str],
    kept: dict[tuple[int, int], list[str]],
) -> tuple[tuple[int, int] | None, str | None, str]:
    """A row's (point, seed), and why it is dropped (a key of DROPS, None to keep it) with what shows it."""
    if fields == old:
        return None, "header", "the header again"
    if len(fields) != len(old):
        return None, "malformed", f"{len(fields)} fields, the header has {len(old)}"
    row = dict(zip(old, fields, strict=True))
    try:
        key = (int(row["point"]), int(row["seed"]))
    except ValueError:
        return None, "malformed", f"point {row['point']!r}, seed {row['seed']!r}: not whole numbers"
    where = f"point {key[0]}, seed {key[1]}"
    if not _in(points, key):
        return key, "unknown", where
    if key in kept:
        return key, "duplicate", where
    expected = points[key[0]]
    for k in params:
        want = expected.params.get(k, "")
        if row.get(k, "") != want:
            return key, "params", f"{where}, {k} = {row.get(k, '')!r}, its point's {want!r}"
    for c in expected.numeric:  # (a row with an error holds none: empty)
        if c in row and row[c] != "" and not _is_number(row[c]):
            return key, "metrics", f"{where}, {c} = {row[c]!r}"
    return key, None, ""


def _rewrite(path: Path, text: str) -> None:
    write_whole(path, text)


def write_whole(path: Path, text: str) -> None:
    """Replace a file's text at once (a new file beside it, renamed over it): a failure (a full disk) leaves the old
    file whole, and raises WriteFailed."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise WriteFailed(f"{path}: cannot write: {e.strerror}") from None


# --- writing ---------------------------------------------------------------------------------------------------


class Appender:
    """Appends rows to a results CSV as runs finish, each written through at once (no buffer: a killed sweep loses
    nothing finished). A row that cannot be written whole (a full disk) is cut off again and WriteFailed raised. A
    row with a column outside the header widens the table: it is rewritten with the new columns at the end (empty in
    the rows before) and the new column said on stderr. A table written with other columns (by a model that
    declared other metrics) is not appended to: its rows would not line up."""

    def __init__(self, path: Path, header: list[str]) -> None:
        self.path, self.header = path, list(header)
        new_file = not path.exists() or path.stat().st_size == 0
        if not new_file:
            with open(path, newline="", encoding="utf-8") as f:
                old = next(csv.reader(f), [])
            if old != self.header:
                new = [c for c in header if c not in old] or [c for c in old if c not in header] or ["their order"]
                raise ScenarioError(
                    f"{path}: written with other columns ({len(old)}, this sweep's {len(header)}: "
                    f"{', '.join(new[:3])}{' ...' if len(new) > 3 else ''} differ); use --fresh or another --out"
                )
        self._fd = self._open()
        if new_file:
            self._append(_line(self.header))

    def _open(self) -> int:
        try:
            return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as e:
            raise WriteFailed(f"{self.path}: cannot write: {e.strerror}") from None

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def _append(self, text: str) -> None:
        end = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            self._write_all(text.encode("utf-8"))
        except OSError as e:
            with contextlib.suppress(OSError):  # the part written: cut, so the table ends with a whole row
                os.ftruncate(self._fd, end)
            raise WriteFailed(f"{self.path}: cannot write a row: {e.strerror}") from None

    def write(self, row: dict) -> None:
        unknown = [k for k in row if k not in self.header]
        if unknown:
            self._widen(unknown, row)
        self._append(_line(row.get(c) for c in self.header))

    def _widen(self, new: list[str], row: dict) -> None:
        """Rewrite the table with ``new`` columns at the end, empty in the rows already there."""
        os.close(self._fd)
        with open(self.path, newline="", encoding="utf-8") as f:
            records = list(csv.reader(f))
        fill = [""] * len(new)
        self.header += new
        _rewrite(self.path, _line(self.header) + "".join(_line(r + fill) for r in records[1:]))
        self._fd = self._open()
        where = f"point {row.get('point')}, seed {row.get('seed')}"
        print(f"{self.path}: widened by the columns {', '.join(new)} ({where} has them)", file=sys.stderr)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)

    def __enter__(self) -> Appender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- one writer ------------------------------------------------------------------------------------------------

_HELD: dict[str, int] = {}  # folders this process holds the lock of, and how many times it took it


@contextlib.contextmanager
def lock(out: Path) -> Iterator[None]:
    """Hold ``out``'s lock for as long as this lasts: an exclusive ``flock`` on OUT/.sweep.lock, which says who
    holds it (pid and command). Another sweep on the same folder is refused, naming the holder (bad input); the
    kernel releases the lock when its holder exits, however it dies. Taken again by its holder, it is the same lock."""
    key = os.path.realpath(out)
    if key in _HELD:
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    path = out / LOCK_FILE
    try:  # (not through a link: the lock is this folder's own file)
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0), 0o644)
    except OSError as e:
        raise ScenarioError(f"--out {out}: cannot create its lock file {LOCK_FILE}: {e.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a named pipe, a device: no lock to hold, nothing to write
        os.close(fd)
        raise ScenarioError(f"--out {out}: its lock file {LOCK_FILE} is not a regular file; remove it")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 1000, 0).decode("utf-8", "replace").strip()
        os.close(fd)
        raise ScenarioError(
            f"--out {out}: another sweep is writing there ({one_line(holder) or 'a process starting up'}); "
            "wait for it to end, or use another --out"
        ) from None
    except OSError as e:
        os.close(fd)
        raise ScenarioError(f"--out {out}: cannot lock {LOCK_FILE}: {e.strerror}") from None
    command = shlex.join(getattr(sys, "orig_argv", sys.argv))
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()}: {command[:300]}".encode(), 0)
    _HELD[key] = 1
    try:
        yield
    finally:
        if _HELD[key] == 1:
            del _HELD[key]
            os.close(fd)  # (the lock goes with the last descriptor of it)


# --- reading ---------------------------------------------------------------------------------------------------


def _float(v: Any) -> float:
    """A text or number cell as a float (empty as NaN); ValueError for anything else (a name, a flag)."""
    import pandas as pd  # (here and below, not at the top: a sweep's --help need not load pandas)

    if isinstance(v, str) or (isinstance(v, (int, float)) and not isinstance(v, bool)):
        return float(v)
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return math.nan
    raise ValueError(v)


def _numbers(column: pd.Series) -> pd.Series | None:
    """A column of texts that all read as numbers ("nan" and "inf" too), as floats; None if one does not."""
    try:
        return column.map(_float).astype(float)
    except (TypeError, ValueError):
        return None


def _numeric_columns(model: str, table_columns: Iterable[str]) -> list[str]:
    """The table's columns that the model's declared metrics (for its default scenario) say hold numbers: a number
    metric's column, and every column of a counts metric's prefix."""
    from models.registry import MODELS

    declared = MODELS[model].metrics(MODELS[model].schema())
    exact = {c for m in declared if m.kind == "number" for c in m.columns()}
    prefixes = tuple(f"{m.prefix}." for m in declared if m.kind == "counts")
    return [c for c in table_columns if c in exact or c.startswith(prefixes)]


def _check_table(path: Path, table: pd.DataFrame) -> pd.DataFrame:
    """The table with its keys whole numbers, its variant a text, its number columns numbers: bad input naming the
    file, the column and the row otherwise."""
    import pandas as pd

    from models.registry import MODELS

    for key in ("point", "seed"):
        col = table[key]
        if pd.api.types.is_integer_dtype(col):
            continue
        nums = pd.to_numeric(col, errors="coerce")
        bad = ~(nums.notna() & (nums == nums.round()) & nums.abs().lt(2**63))
        if bad.any():
            i = int(bad.to_numpy().argmax())
            raise ScenarioError(f"{path}: column {key}, row {i + 1}: {col.iloc[i]!r} is not a whole number")
        table[key] = nums.astype("int64")
    table["variant"] = table["variant"].astype(object).where(table["variant"].notna(), "").astype(str)
    if "model" in table:
        names = table["model"].astype(object).where(table["model"].notna(), "")
        unknown = ~names.isin(["", *MODELS])
        if unknown.any():
            i = int(unknown.to_numpy().argmax())
            raise ScenarioError(
                f"{path}: column model, row {i + 1}: {names.iloc[i]!r} is not a model ({', '.join(MODELS)})"
            )
    numeric = set(_numeric_columns(model_name(table), table.columns))
    for c in table.columns:  # a number column with a "nan" or "inf" in it reads as text
        if c in KEYS or c == "error" or pd.api.types.is_numeric_dtype(table[c]):
            continue
        nums = _numbers(table[c])
        if nums is not None and (c in numeric or table[c].notna().any()):
            table[c] = nums
        elif c in numeric and not pd.api.types.is_bool_dtype(table[c]):
            bad = table[c].map(lambda v: not (isinstance(v, str) and _is_number(v)) and not pd.isna(v))
            i = int(bad.to_numpy().argmax())
            raise ScenarioError(f"{path}: column {c}, row {i + 1}: {table[c].iloc[i]!r} is not a number")
    return table


def model_name(table: pd.DataFrame) -> str:
    """The model whose runs the table holds: its first row's that names one (a row whose scenario did not build
    names none), else ``function``."""
    from models.registry import MODELS

    if "model" in table:
        names = [str(m) for m in table["model"] if isinstance(m, str) and m in MODELS]
        if names:
            return names[0]
    return "function"


def read_results(path: Path) -> pd.DataFrame:
    """The results table (CSV or Parquet), sorted by point and seed: every column once, point and seed whole
    numbers, the model's number columns numbers (bad input naming the file and the column otherwise)."""
    import pandas as pd

    path = Path(path)
    raw = files.read_bytes(path, "a results table", files.TABLE_CAP)  # regular, within its cap
    data = io.BytesIO(raw)
    try:
        if path.suffix == ".parquet":
            table = pd.read_parquet(data)
            names = list(table.columns)
        else:
            names = next(csv.reader(io.StringIO(raw.decode("utf-8", "replace").split("\n", 1)[0])), [])
            table = pd.read_csv(data, keep_default_na=False, na_values=[""])
    except (OSError, ValueError) as e:
        raise ScenarioError(f"{path}: cannot read a results table: {one_line(str(e))}") from None
    twice = next((c for i, c in enumerate(names) if c in names[:i]), None)
    if twice is not None:
        raise ScenarioError(f"{path}: column {twice} appears twice; a results table has each column once")
    if not set(KEYS) <= set(table.columns):
        raise ScenarioError(f"{path}: not a results table (no point, seed and variant columns)")
    if "error" not in table.columns:  # a table written by hand or another tool: no run recorded an error
        table["error"] = ""
    table["error"] = table["error"].astype(object).where(table["error"].notna(), "").astype(str)
    table = _check_table(path, table)
    return table.sort_values(["point", "seed"], kind="stable").reset_index(drop=True)

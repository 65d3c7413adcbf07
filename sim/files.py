"""Every file a command reads, read through one checked path: a regular file, within a size cap of its kind; and
every file it writes, its path checked before any work starts (``check_out``) and written whole or not at all.

``check`` looks at a path with ``os.stat`` (which never opens it: opening a named pipe for reading blocks until a
writer comes) and refuses what is not a regular file (a folder, a named pipe, a device such as /dev/zero, a socket)
and a file over its kind's cap. ``read_bytes`` then opens it without blocking, checks again what it opened (the name
may have been replaced in between) and reads at most cap + 1 bytes, so a file that grows while it is read is still
bounded. ``read_toml`` and ``loads_toml`` cap the nesting depth of a TOML text before it is parsed (tomllib recurses:
a few thousand nested arrays or inline tables exhaust the stack) and of the tree it parses to (dotted keys nest
without brackets); ``read_json`` likewise. Every refusal is a ScenarioError naming the file and what is wrong:
bad input, one line, exit 2.

The caps, by kind (docs/explanation/robustness.md): TOML files (scenarios, parameter files, sweep specs, reference
tables) and JSON side files 10 MB; ``empirical(...)`` value files 50 MB; results tables and a scenario's
``trace.path`` CSV 100 MB; a calibration trace's Parquet table 200 MB.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

from sim.errors import ScenarioError

MB = 1_000_000
TOML_CAP = 10 * MB  # a scenario, a --params file, a sweep spec, a reference table
JSON_CAP = 10 * MB  # a trace's manifest, a sweep's sweep.json and spec.json, a plausible-models file
EMPIRICAL_CAP = 50 * MB  # an empirical(...) distribution's values, one a line
TABLE_CAP = 100 * MB  # a sweep's results table (CSV or Parquet)
CSV_CAP = 100 * MB  # a scenario's trace.path (an Azure Functions per-minute CSV)
TRACE_CAP = 200 * MB  # a calibration trace's Parquet table
MAX_DEPTH = 50  # nesting of a TOML or JSON document: a scenario or a spec is a handful of levels deep

_SHOWN = 200  # characters of a path shown in an error


def _fail(message: str) -> NoReturn:

    raise ScenarioError(message)


def shown(path: str | os.PathLike) -> str:
    """A path as an error shows it: at most 200 characters."""
    text = str(path)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def size_text(n: int) -> str:
    """A cap for people: 10 MB, 512 kB, 300 bytes."""
    for unit, name in ((MB, "MB"), (1000, "kB")):
        if n >= unit:
            return f"{n / unit:g} {name}"
    return f"{n} bytes"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check(path: str | os.PathLike, what: str, cap: int) -> os.stat_result:
    """``path``'s status if it is a regular file of at most ``cap`` bytes (``what``: what it should be, e.g. "a
    scenario file"), else ScenarioError naming it; the file is never opened."""
    if "\x00" in str(path):
        _fail(f"{shown(repr(str(path)))}: a path cannot hold a NUL character")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        _fail(f"{shown(path)}: no such file")
    except OSError as e:
        _fail(f"{shown(path)}: cannot read: {e.strerror}")
    if not stat.S_ISREG(st.st_mode):
        kind = _kind(st.st_mode)
        _fail(f"{shown(path)}: {kind}, not {what}" if kind.startswith("a ") else f"{shown(path)}: {kind}")
    if st.st_size > cap:
        _fail(f"{shown(path)}: over {size_text(cap)}, too large for {what}")
    return st


def exists(path: str | os.PathLike) -> bool:
    """Whether ``path`` names anything, False for a name the system cannot even look up (too long, NUL bytes)."""
    try:
        os.stat(path)
    except (OSError, ValueError):
        return False
    return True


def is_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder, False for a name the system cannot even look up (too long, NUL bytes)."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def read_bytes(path: str | os.PathLike, what: str, cap: int) -> bytes:
    """The bytes of a regular file of at most ``cap`` bytes (``check``), read without ever blocking on it."""
    check(path, what, cap)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        _fail(f"{shown(path)}: cannot read: {e.strerror}")
    try:
        with os.fdopen(fd, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            if not stat.S_ISREG(mode):  # replaced between the stat and the open
                _fail(f"{shown(path)}: {_kind(mode)}, not {what}")
            data = f.read(cap + 1)
    except OSError as e:
        _fail(f"{shown(path)}: cannot read: {e.strerror}")
    if len(data) > cap:
        _fail(f"{shown(path)}: over {size_text(cap)}, too large for {what}")
    return data


def read_text(path: str | os.PathLike, what: str, cap: int) -> str:
    """A regular UTF-8 text file of at most ``cap`` bytes (``read_bytes``)."""
    try:
        return read_bytes(path, what, cap).decode("utf-8")
    except UnicodeDecodeError:
        _fail(f"{shown(path)}: not a UTF-8 text file, not {what}")


# strings and comments (whose brackets do not nest) or one bracket
_TOML_TOKENS = re.compile(
    r'"""(?:[^\\]|\\.)*?"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*|[\[\]{}]', re.S
)


def toml_depth(text: str) -> int:
    """The deepest nesting of brackets and braces in a TOML text, outside its strings and comments: a cheap scan."""
    depth = deepest = 0
    for m in _TOML_TOKENS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth = max(0, depth - 1)
    return deepest


def tree_depth(tree: Any) -> int:
    """The nesting depth of a parsed document (tables and arrays), walked without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, d)
        if d <= MAX_DEPTH:
            stack += [(c, d + 1) for c in children]
    return deepest


def loads_toml(text: str, where: str) -> dict:
    """A TOML text parsed, its depth capped at MAX_DEPTH before and after (``where`` names it in the error);
    tomllib.TOMLDecodeError as tomllib raises it."""
    if toml_depth(text) > MAX_DEPTH:
        _fail(f"{where}: nested more than {MAX_DEPTH} levels deep")
    try:
        tree = tomllib.loads(text)
    except RecursionError:
        _fail(f"{where}: nested too deep to parse")
    if tree_depth(tree) > MAX_DEPTH:
        _fail(f"{where}: nested more than {MAX_DEPTH} levels deep")
    return tree


def read_toml(path: str | os.PathLike, what: str = "a TOML file", cap: int = TOML_CAP) -> dict:
    """A regular TOML file of at most ``cap`` bytes, its depth capped; malformed TOML is a ScenarioError."""
    text = read_text(path, what, cap)
    try:
        return loads_toml(text, shown(path))
    except tomllib.TOMLDecodeError as e:
        _fail(f"{shown(path)}: malformed TOML: {e}")


def read_json(path: str | os.PathLike, what: str = "a JSON file", cap: int = JSON_CAP) -> Any:
    """A regular JSON file of at most ``cap`` bytes, its depth capped; malformed JSON is a ScenarioError."""
    try:
        doc = json.loads(read_bytes(path, what, cap).decode("utf-8"))
    except UnicodeDecodeError:
        _fail(f"{shown(path)}: not JSON (not UTF-8 text)")
    except RecursionError:
        _fail(f"{shown(path)}: nested too deep to parse")
    except json.JSONDecodeError as e:
        _fail(f"{shown(path)}: not JSON ({e})")
    if tree_depth(doc) > MAX_DEPTH:
        _fail(f"{shown(path)}: nested more than {MAX_DEPTH} levels deep")
    return doc


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all: into a file beside it, then renamed over it (a full disk
    leaves the old file, or none, never half a file). The OSError names ``path`` (the command's guard: one line,
    exit 1)."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, target)
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(target)) from None
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: str | os.PathLike, text: str) -> None:
    """``write_bytes`` of ``text`` in UTF-8."""
    write_bytes(path, text.encode("utf-8"))


def write_figure(fig: Any, path: str | os.PathLike, **savefig: Any) -> bytes:
    """A matplotlib figure as PNG at ``path`` (``write_bytes``: whole or not at all); the bytes written."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", **savefig)
    write_bytes(path, buf.getvalue())
    return buf.getvalue()


def check_out(path: Path, folder: bool = False, inside: Iterable[str] = ()) -> Path:
    """An output path checked before any work starts, the one check every command's writes go through: a path of
    legal length (each name within the file system's limit), its folder created if missing and writable (a file is
    created and removed there to be sure: /proc passes os.access), and the target a regular file or absent for a file
    output (not a folder, a device or a named pipe, which would block the writer), a folder for a folder output, and
    each of ``inside`` (the files a folder output will hold, or glob patterns of them: ``*.png``) a regular file or
    absent. Bad input (exit 2) otherwise."""
    where = path if folder else path.parent
    text = str(path)
    if len(text) > 1000:
        raise ScenarioError(f"--out: a path of {len(text):,} characters is too long")
    if "\x00" in text:
        raise ScenarioError(f"--out {text!r}: a path cannot hold a NUL character")
    for name in path.parts:
        if len(os.fsencode(name)) > NAME_MAX:
            raise ScenarioError(
                f"--out {shown(path)}: a name of {len(name):,} characters, longer than a file name can be ({NAME_MAX})"
            )
    mode = _mode(path)
    if folder and mode is not None and not stat.S_ISDIR(mode):
        raise ScenarioError(f"--out {path}: is a file, not a folder")
    if not folder and mode is not None and stat.S_ISDIR(mode):
        raise ScenarioError(f"--out {path}: is a folder, not a file")
    targets = [path] if not folder else [t for name in inside for t in _inside(path, name)]
    for target in targets:
        mode = _mode(target)
        if mode is not None and not stat.S_ISREG(mode):
            raise ScenarioError(f"--out {target}: {_kind(mode)}, not a regular file to write")
        if mode is not None and not os.access(target, os.W_OK):
            raise ScenarioError(f"--out {target}: is not writable")
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ScenarioError(f"--out {path}: cannot create {where}: {e.strerror}") from None
    if not os.access(where, os.W_OK):
        raise ScenarioError(f"--out {path}: {where} is not writable")
    try:  # os.access says yes to root for /proc and a read-only file system: a file written and removed says
        fd, probe = tempfile.mkstemp(dir=where, prefix=".scalesim-out-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ScenarioError(f"--out {path}: cannot write in {where}: {e.strerror}") from None
    return path


NAME_MAX = 255  # bytes in one file name (Linux, macOS)


def _mode(path: Path) -> int | None:
    """``path``'s file type and mode (following links), None if absent; bad input if it cannot be looked up."""
    try:
        return os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:  # a name too long, a loop of links, a folder that cannot be searched
        raise ScenarioError(f"--out {shown(path)}: {e.strerror}") from None


def _inside(folder: Path, name: str) -> list[Path]:
    """The files of ``folder`` a folder output's ``name`` (a file's name or a glob pattern) means; none if absent."""
    if not any(c in name for c in "*?["):
        return [folder / name]
    try:
        return list(folder.glob(name)) if _mode(folder) is not None else []
    except OSError as e:
        raise ScenarioError(f"--out {shown(folder)}: {e.strerror}") from None

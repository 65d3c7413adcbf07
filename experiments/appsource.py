"""A Modal app's source read without running or importing it (Python's ``ast``): its Functions and what their
decorators state, each argument with its line and, where it names constants, how it was resolved.

A Function is a def or class given to ``@app.function``, ``@app.cls`` or ``@app.server`` (modal 1.6.4
modal/app.py), as a decorator or applied as a call (``app.function(**size)(modal.concurrent(max_inputs=X)(work))``,
as calibration/apps/loadtest.py's ``make_app`` does), with modal's own decorators on it or on its methods
(``@modal.concurrent``, ``@modal.batched``, ``@modal.enter``, the web endpoints: modal/_partial_function.py).
Imports of modal under another name (``import modal as m``, ``from modal import concurrent``) are followed.

Values are resolved as far as the source fixes them: literals, the file's module-level constants (a name assigned
once at the top level), arithmetic on them, tuples, dicts and ``**dict``, a builder's parameter defaults and its
local assignments before the call (the value the app gets when built with its defaults), and
``modal.Retries(...)``. Anything else (a call, an environment variable, a name assigned twice, a ``**kwargs`` it
cannot resolve) is an ``Unknown`` saying what it is: reported by the caller, never guessed.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass, field
from typing import Any

from sim.errors import ScenarioError
from sim.files import read_text, shown

SOURCE_CAP = 5_000_000  # bytes of an app's source: a Modal app is a few hundred lines
TEXT_CAP = 120  # characters of a decorator as a comment quotes it
APP_SERVER = "server"  # App.server (modal 1.6): a web server behind Modal's proxy (not the approach of that name)
APP_KINDS = ("function", "cls", APP_SERVER)  # App.function, App.cls, App.server (modal/app.py)
MODAL_KINDS = {  # modal's own decorators and constructors this reads, by their name in modal
    "concurrent": "concurrent",
    "batched": "batched",
    "enter": "enter",
    "exit": "exit",
    "method": "method",
    "fastapi_endpoint": "web",
    "web_endpoint": "web",  # the name of fastapi_endpoint before modal 0.73.82
    "asgi_app": "web",
    "wsgi_app": "web",
    "web_server": "web",
    "Retries": "retries",
    "App": "app",
}
_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


@dataclass(frozen=True)
class Unknown:
    """A value the source does not fix: ``why`` says what it is (a call, an environment variable, ...)."""

    why: str


@dataclass(frozen=True)
class Arg:
    """One argument as written (``text``), its value (or ``Unknown``), and the names it was resolved through."""

    value: Any
    text: str
    via: tuple[str, ...] = ()


@dataclass(frozen=True)
class Factory:
    """A modal decorator or constructor: ``kind`` (``function``, ``concurrent``, ``web``...), its name as modal
    spells it, its arguments, where it is and how it reads; ``unresolved``: ``**`` arguments it could not read."""

    kind: str
    name: str
    args: dict[str, Arg]
    line: int
    text: str
    unresolved: tuple[str, ...] = ()


class Resolved(dict):
    """A dict of the source, resolved, with the names each of its values was resolved through (``vias``)."""

    def __init__(self) -> None:
        super().__init__()
        self.vias: dict[str, tuple[str, ...]] = {}


@dataclass(frozen=True)
class Def:
    """A def or class of the source, by its node."""

    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


@dataclass(frozen=True)
class Applied:
    """A def or class with the decorators applied to it, outermost first."""

    target: Def
    factories: tuple[Factory, ...]


@dataclass(frozen=True)
class ModalRef:
    """The ``modal`` module or one of its names (``modal.concurrent``)."""

    path: str


@dataclass
class AppFunction:
    """A Modal Function of the app: its name, line and kind (``function``, ``cls`` or ``server``), its decorators
    (the App's and modal's, outermost first; a class's methods' too), and decorators it does not know."""

    name: str
    line: int
    kind: str
    factories: list[Factory]
    ignored: list[str] = field(default_factory=list)

    def of(self, kind: str) -> list[Factory]:
        return [f for f in self.factories if f.kind == kind]


class Reader:
    """One app's source: ``functions`` are its Modal Functions, in source order."""

    def __init__(self, text: str, where: str) -> None:
        self.text, self.where = text, where
        try:
            tree = ast.parse(text, filename=where)
        except SyntaxError as e:
            raise ScenarioError(f"{where}:{e.lineno}: not Python: {e.msg}") from None
        except (ValueError, RecursionError, MemoryError) as e:  # NUL bytes; nesting too deep to parse
            raise ScenarioError(f"{where}: not Python source: {e}") from None
        self.functions: list[AppFunction] = []
        self._seen: set[int] = set()
        self.module = self._module_scope(tree.body)
        self._walk(tree.body, self.module)

    # -- scopes -------------------------------------------------------------------------------------------------

    def _module_scope(self, body: list[ast.stmt]) -> dict[str, tuple[Any, tuple[str, ...]]]:
        """The top level's names: imports of modal, defs and classes, and constants assigned once (a name assigned
        twice is Unknown: which value a decorator sees depends on the order of execution)."""
        scope: dict[str, tuple[Any, tuple[str, ...]]] = {}
        counts: dict[str, list[int]] = {}
        for stmt in body:
            for name, _ in self._targets(stmt):
                counts.setdefault(name, []).append(stmt.lineno)
        for stmt in body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self._import(stmt, scope)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                scope[stmt.name] = (Def(stmt), ())
            for name, node in self._targets(stmt):
                if len(counts[name]) > 1:
                    lines = ", ".join(map(str, counts[name]))
                    scope[name] = (Unknown(f"{name} is assigned more than once (lines {lines})"), ())
                else:
                    value, via = self.value(node, scope)
                    shown_value = value if not isinstance(value, (Factory, Applied, Def, ModalRef)) else "..."
                    scope[name] = (value, (*via, f"{name} = {shown_value!r} (line {stmt.lineno})"))
        return scope

    @staticmethod
    def _targets(stmt: ast.stmt) -> list[tuple[str, ast.expr]]:
        if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
            return [(t.id, stmt.value) for t in stmt.targets]
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            return [(stmt.target.id, stmt.value)]
        return []

    @staticmethod
    def _import(stmt: ast.Import | ast.ImportFrom, scope: dict) -> None:
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.name == "modal":
                    scope[a.asname or "modal"] = (ModalRef(""), ())
        elif stmt.module == "modal" and not stmt.level:
            for a in stmt.names:
                scope[a.asname or a.name] = (ModalRef(a.name), ())

    def _walk(self, body: list[ast.stmt], scope: dict) -> None:
        """Statements in order: decorated defs and classes, applications as calls (recorded where they make a
        Function), local assignments and imports; a def's body is walked in a scope of its parameters' defaults
        (a builder such as ``make_app``)."""
        for stmt in body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self._import(stmt, scope)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                scope[stmt.name] = (Def(stmt), ())
                if stmt.decorator_list:
                    self._record(self._decorated(stmt, scope))
                if not isinstance(stmt, ast.ClassDef):
                    self._walk(stmt.body, self._params(stmt, scope))
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr)) and stmt.value is not None:
                value, via = self.value(stmt.value, scope)
                self._record(value)
                if scope is not self.module:
                    for name, _ in self._targets(stmt):
                        scope[name] = (value, via)
            else:
                for block in ("body", "orelse", "finalbody"):
                    self._walk(getattr(stmt, block, []) or [], scope)
                for handler in getattr(stmt, "handlers", []):
                    self._walk(handler.body, scope)

    def _params(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, scope: dict) -> dict:
        """``scope`` with ``fn``'s parameters as their defaults (Unknown without one)."""
        inner = dict(scope)
        a = fn.args
        positional = a.posonlyargs + a.args
        defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
        for arg, default in [*zip(positional, defaults, strict=True), *zip(a.kwonlyargs, a.kw_defaults, strict=True)]:
            if default is None:
                inner[arg.arg] = (Unknown(f"{arg.arg}: a parameter of {fn.name} without a default"), ())
            else:
                value, via = self.value(default, scope)
                note = f"{arg.arg} = {self.segment(default)} ({fn.name}'s default, line {default.lineno})"
                inner[arg.arg] = (value, (*via, note))
        for extra in (a.vararg, a.kwarg):
            if extra is not None:
                inner[extra.arg] = (Unknown(f"{extra.arg}: {fn.name}'s variable arguments"), ())
        return inner

    def _decorated(self, node: ast.AST, scope: dict) -> Applied:
        factories = []
        for dec in node.decorator_list:
            value, _ = self.value(dec, scope)
            if isinstance(value, ModalRef) and value.path in MODAL_KINDS:  # used bare: @modal.method
                value = Factory(MODAL_KINDS[value.path], value.path, {}, dec.lineno, "@" + self.segment(dec))
            if isinstance(value, Factory):
                factories.append(value)
            else:
                factories.append(Factory("other", self.segment(dec), {}, dec.lineno, "@" + self.segment(dec)))
        return Applied(Def(node), tuple(factories))

    def _record(self, value: Any) -> None:
        """A Modal Function if ``value`` applies an App's decorator (each def or class once)."""
        if not isinstance(value, Applied) or id(value.target.node) in self._seen:
            return
        app = [f for f in value.factories if f.kind in APP_KINDS]
        if not app:
            return
        node = value.target.node
        self._seen.add(id(node))
        factories = [f for f in value.factories if f.kind != "other"]
        ignored = [f.text for f in value.factories if f.kind == "other"]
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.decorator_list:
                    for f in self._decorated(item, self.module).factories:
                        if f.kind == "other":
                            ignored.append(f"{item.name}: {f.text}")
                        else:
                            factories.append(f)
        self.functions.append(AppFunction(node.name, node.lineno, app[0].kind, factories, ignored))

    # -- values -------------------------------------------------------------------------------------------------

    def segment(self, node: ast.AST) -> str:
        """``node`` as written, on one line, at most TEXT_CAP characters."""
        text = " ".join((ast.get_source_segment(self.text, node) or ast.unparse(node)).split())
        text = text.replace("( ", "(").replace(", )", ")").replace(",)", ")")
        return text if len(text) <= TEXT_CAP else text[: TEXT_CAP - 3] + "..."

    def value(self, node: ast.expr, scope: dict) -> tuple[Any, tuple[str, ...]]:
        """``node``'s value and the notes of the names it was resolved through; Unknown where the source does not
        fix it."""
        try:
            return self._value(node, scope)
        except (ArithmeticError, TypeError, ValueError, RecursionError):
            return Unknown(f"an expression it cannot compute: {self.segment(node)}"), ()

    def _value(self, node: ast.expr, scope: dict) -> tuple[Any, tuple[str, ...]]:
        if isinstance(node, ast.Constant):
            return node.value, ()
        if isinstance(node, ast.Name):
            if node.id in scope:
                return scope[node.id]
            return Unknown(f"{node.id}: not a constant of the file"), ()
        if isinstance(node, ast.Attribute):
            base, via = self._value(node.value, scope)
            if isinstance(base, ModalRef):
                return ModalRef(f"{base.path}.{node.attr}".lstrip(".")), via
            if node.attr in APP_KINDS:  # app.function used bare: @app.function
                return Factory(node.attr, node.attr, {}, node.lineno, "@" + self.segment(node)), via
            return Unknown(f"an attribute: {self.segment(node)}"), ()
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
            v, via = self._value(node.operand, scope)
            if isinstance(v, Unknown):
                return v, via
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}[type(node.op)](v), via
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            (a, va), (b, vb) = self._value(node.left, scope), self._value(node.right, scope)
            for v in (a, b):
                if isinstance(v, Unknown):
                    return v, ()
            numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
            if not numbers and not (isinstance(node.op, ast.Add) and isinstance(a, str) and isinstance(b, str)):
                return Unknown(f"an expression on values that are not numbers: {self.segment(node)}"), ()
            if isinstance(node.op, ast.Pow) and abs(b) > 64:
                return Unknown(f"a power too large to compute: {self.segment(node)}"), ()
            return _OPS[type(node.op)](a, b), (*va, *vb)
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [self._value(e, scope) for e in node.elts]
            return tuple(v for v, _ in items), tuple(n for _, via in items for n in via)
        if isinstance(node, ast.Dict):
            return self._dict(node, scope)
        if isinstance(node, ast.Call):
            return self._call(node, scope)
        if isinstance(node, ast.Subscript) and "environ" in self.segment(node.value):
            return Unknown(f"an environment variable: {self.segment(node)}"), ()
        return Unknown(f"an expression: {self.segment(node)}"), ()

    def _dict(self, node: ast.Dict, scope: dict) -> tuple[Any, tuple[str, ...]]:
        out = Resolved()
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:  # **other
                inner, _ = self._value(v, scope)
                if not isinstance(inner, dict):
                    return Unknown(f"**{self.segment(v)}: not a dict of the file"), ()
                out.update(inner)
                out.vias.update(getattr(inner, "vias", {}))
            else:
                key, _ = self._value(k, scope)
                if not isinstance(key, str):
                    return Unknown(f"a dict with a key that is not text: {self.segment(node)}"), ()
                out[key], out.vias[key] = self._value(v, scope)
        return out, ()

    def _call(self, node: ast.Call, scope: dict) -> tuple[Any, tuple[str, ...]]:
        if isinstance(node.func, ast.Name) and node.func.id == "dict" and "dict" not in scope and not node.args:
            keys = [None if k.arg is None else ast.Constant(k.arg) for k in node.keywords]
            return self._dict(ast.Dict(keys, [k.value for k in node.keywords]), scope)
        func, via = self._value(node.func, scope)
        if isinstance(func, ModalRef) and func.path in MODAL_KINDS:
            kind = MODAL_KINDS[func.path]
            if kind == "app":
                return Factory("app", func.path, {}, node.lineno, self.segment(node)), via
            positional = ("port",) if func.path == "web_server" else ()  # web_server(port, ...)
            return self._factory(kind, func.path, node, scope, positional), via
        if isinstance(func, Factory) and func.kind in APP_KINDS and not func.args and not node.args:
            return self._factory(func.kind, func.name, node, scope), via  # app.function(...): its arguments
        if isinstance(func, Factory) and len(node.args) == 1 and not node.keywords:  # a decorator applied: d(target)
            target, more = self._value(node.args[0], scope)
            if isinstance(target, Def):
                return Applied(target, (func,)), (*via, *more)
            if isinstance(target, Applied):
                return Applied(target.target, (func, *target.factories)), (*via, *more)
        text = self.segment(node)
        what = "an environment variable" if "environ" in text or "getenv" in text else "a call"
        return Unknown(f"{what}: {text}"), ()

    def _factory(self, kind: str, name: str, node: ast.Call, scope: dict, positional: tuple[str, ...] = ()) -> Factory:
        args: dict[str, Arg] = {}
        unresolved = []
        for pname, a in zip(positional, node.args, strict=False):
            v, via = self.value(a, scope)
            args[pname] = Arg(v, f"{pname}={self.segment(a)}", via)
        for k in node.keywords:
            v, via = self.value(k.value, scope)
            if k.arg is not None:
                args[k.arg] = Arg(v, f"{k.arg}={self.segment(k.value)}", via)
            elif isinstance(v, dict):
                for key, item in v.items():
                    args[key] = Arg(
                        item, f"**{self.segment(k.value)}: {key}={item!r}", getattr(v, "vias", {}).get(key, ())
                    )
            else:
                unresolved.append(f"**{self.segment(k.value)} ({v.why if isinstance(v, Unknown) else 'not a dict'})")
        text = self.segment(node)
        return Factory(kind, name, args, node.lineno, text if kind == "retries" else "@" + text, tuple(unresolved))


def read_app(path: str) -> list[AppFunction]:
    """The Modal Functions of the app at ``path``, read from its source (never imported); ScenarioError (bad input)
    for a file that is missing, not UTF-8 text or not Python."""
    text = read_text(path, "a Python file", SOURCE_CAP)
    if "\x00" in text:
        raise ScenarioError(f"{shown(path)}: a binary file (NUL bytes), not Python source")
    return Reader(text, shown(path)).functions

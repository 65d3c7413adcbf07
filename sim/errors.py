"""The error every layer raises for bad input (sim.scenario re-exports it): one line naming the key or file."""


class ScenarioError(ValueError):
    """Bad scenario input; the message is one line naming the key or file."""


def missing_extra(module: str, what: str, extra: str) -> ScenarioError:
    """The bad-input error (one line) when ``what`` needs ``module``, of an optional extra of the project that is not
    installed (pyproject.toml's ``[project.optional-dependencies]``): raise it from the failed import."""
    return ScenarioError(
        f"{what} needs {module!r}, which is not installed: pip install -e '.[{extra}]' (or 'scalesim[{extra}]')"
    )


class SimPyInternalsChanged(RuntimeError):
    """The installed SimPy no longer has the internals that ``Sim`` drives (sim/engine.py)."""

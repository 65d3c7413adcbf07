"""The error every layer raises for bad input (sim.scenario re-exports it): one line naming the key or file."""


class ScenarioError(ValueError):
    """Bad scenario input; the message is one line naming the key or file."""


def require(module: str, what: str, extra: str) -> None:
    """Bad input (one line) unless ``module`` imports: ``what`` needs an optional extra of the project that is not
    installed (``pip install -e '.[EXTRA]'``; pyproject.toml's ``[project.optional-dependencies]``)."""
    import importlib

    try:
        importlib.import_module(module)
    except ImportError:
        raise ScenarioError(
            f"{what} needs {module!r}, which is not installed: pip install -e '.[{extra}]' (or 'scalesim[{extra}]')"
        ) from None

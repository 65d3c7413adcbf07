"""The error every layer raises for bad input (sim.scenario re-exports it): one line naming the key or file."""


class ScenarioError(ValueError):
    """Bad scenario input; the message is one line naming the key or file."""

"""Capacity-planning what-ifs, answered by search over simulations: ``python -m experiments.whatif QUESTION ...``.

The questions, one module each (its docstring says what it asks and how it searches), looked up by name in
``QUESTIONS``; what a question is and the command that asks one are experiments/whatif/base.py, the search harness
experiments/whatif/search.py, what their pages and words share experiments/whatif/pages.py.

Each search's answer gives the configuration, its metrics as means with 95% CIs over ``--seeds`` replications (t),
its cost in container-seconds and in money (billed to each container's removal, at the scenario's ``billing`` size
and docs/sources.md §6's prices: ``--set billing.cpu=2``; per run and per hour at steady state), the runner-up
options, and how many simulations the search ran: in words and a table, or ``--json``. ``--params`` overlays a
calibrated parameter file (calibration.fit ``--out``), ``--set`` any scenario key. Adding a question: a module here
(a subclass of ``Question`` or ``Search``, experiments/whatif/base.py) and its line below.
"""

from __future__ import annotations

from experiments.whatif.autoscaler import Autoscaler
from experiments.whatif.base import Question, command
from experiments.whatif.capacity import Capacity
from experiments.whatif.drain import Drain
from experiments.whatif.plan import Plan
from experiments.whatif.recovery import Recovery

QUESTIONS: dict[str, Question] = {q.name: q for q in (Plan(), Capacity(), Autoscaler(), Drain(), Recovery())}


def main(argv: list[str] | None = None) -> int:
    """The command: ``python -m experiments.whatif QUESTION ...`` over ``QUESTIONS``."""
    return command(QUESTIONS, __doc__.splitlines()[0], argv)

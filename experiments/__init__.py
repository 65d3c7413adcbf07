"""Experiments: run, sweep, bench, and the scenario presets (experiments/scenarios/)."""

import sys

if sys.argv[:1] == ["-m"]:  # python -m experiments.NAME, being located
    from sim.processes import exit_on_interrupt

    exit_on_interrupt()  # a Ctrl-C while its modules load is one line (sim/processes.py)

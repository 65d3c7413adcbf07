"""Calibration: fitting model parameters to real Modal runs and reference measurements."""

import sys

if sys.argv[:1] == ["-m"]:  # python -m calibration.NAME, being located (an app's image may hold this package alone)
    from sim.processes import exit_on_interrupt

    exit_on_interrupt()  # a Ctrl-C while its modules load is one line (sim/processes.py)

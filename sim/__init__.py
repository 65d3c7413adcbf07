"""Engine layer over SimPy: random streams, distributions, limiters, records, scenarios."""

"""Engine layer over SimPy: the clock, random streams, distributions, limiters, scenarios, statistics, and the
Model descriptor every simulated system declares."""

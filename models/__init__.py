"""The simulated systems. Each module opens with the scenario it models, what it leaves out, and its sources."""

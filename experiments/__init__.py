"""Experiments: run, sweep, bench, and the scenario presets (experiments/scenarios/)."""

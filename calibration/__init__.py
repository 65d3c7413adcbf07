"""Calibration: fitting model parameters to real Modal runs and reference measurements."""

"""What a load test's numbers are checked against: the invariants every run keeps, the size estimated before it starts,
the calibrated envelope, and recovery after a trigger."""

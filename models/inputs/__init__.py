"""A Modal Function's input plane (docs/sources.md §1): callers, Functions with their limits and containers, the
autoscaler, the load-test approaches, and the load-test scenario (``loadtest``)."""

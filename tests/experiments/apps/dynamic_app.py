"""A fixture for tests/experiments/test_from_app.py (read by from-app, never run or collected): values the source
does not fix, which from-app reports instead of guessing."""

import os

import modal

app = modal.App("dynamic")
SIZES = {"small": {"cpu": 1.0, "memory": 1024}}
LIMIT = 10
LIMIT = 20  # assigned twice: which value a decorator sees depends on the order of execution


def tier() -> dict:
    return SIZES[os.environ.get("TIER", "small")]


@app.function(max_containers=int(os.environ.get("MAX_CONTAINERS", "50")), **tier(), scaledown_window=120)
@modal.concurrent(max_inputs=LIMIT)
def work(x: int) -> int:
    return x * 2

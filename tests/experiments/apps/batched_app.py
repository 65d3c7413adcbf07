"""A fixture for tests/experiments/test_from_app.py, written as Modal's docs write apps (read by from-app, never run
or collected): dynamic batching, modal imported by its names, retries as ``modal.Retries``."""

from modal import App, Retries, batched

app = App("batch-scorer")


@app.function(
    buffer_containers=2,
    retries=Retries(max_retries=4, backoff_coefficient=1.5, initial_delay=0.5),
)
@batched(max_batch_size=64, wait_ms=250)
async def score(texts: list[str]) -> list[float]:
    return [float(len(t)) for t in texts]

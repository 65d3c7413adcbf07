"""A fixture for tests/experiments/test_from_app.py, written as Modal's docs write apps (read by from-app, never run
or collected): an LLM tool-call Function, many calls in flight per container."""

import modal

app = modal.App("llm-tools")
image = modal.Image.debian_slim().pip_install("httpx")

MAX_CONTAINERS = 200
PER_CONTAINER = 20


@app.function(image=image, max_containers=MAX_CONTAINERS, timeout=600, cpu=2.0, memory=4096, retries=3)
@modal.concurrent(max_inputs=PER_CONTAINER, target_inputs=PER_CONTAINER - 4)
async def call_tools(prompt: str) -> str:
    import httpx

    async with httpx.AsyncClient() as client:
        r = await client.post("https://example.com/v1/tools", json={"prompt": prompt})
    return r.text


@app.local_entrypoint()
def main() -> None:
    print(call_tools.remote("What is the weather in Paris?"))

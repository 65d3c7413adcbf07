"""A fixture for tests/experiments/test_from_app.py, written as Modal's docs write apps (read by from-app, never run
or collected): a FastAPI app on a Function, and an HTTP server behind Modal's proxy (``@app.server``, modal 1.6)."""

import subprocess

import modal

app = modal.App("web")
image = modal.Image.debian_slim().pip_install("fastapi[standard]")


@app.function(image=image, max_containers=10)
@modal.concurrent(max_inputs=100)
@modal.asgi_app()
def api():
    from fastapi import FastAPI

    web_app = FastAPI()

    @web_app.get("/")
    def root() -> dict:
        return {"hello": "world"}

    return web_app


@app.server(port=8000, target_concurrency=50, max_concurrency=80, scaleup_window=30, min_containers=1, cpu=0.5)
class Server:
    @modal.enter()
    def start(self) -> None:
        self.proc = subprocess.Popen(["python", "-m", "http.server", "8000"])

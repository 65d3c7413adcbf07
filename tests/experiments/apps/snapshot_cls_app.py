"""A fixture for tests/experiments/test_from_app.py, written as Modal's docs write apps (read by from-app, never run
or collected): a class that loads a model before a memory snapshot and moves it to the GPU after each restore."""

import modal

app = modal.App("embedder")
image = modal.Image.debian_slim().pip_install("torch", "sentence-transformers")


@app.cls(image=image, gpu="A10G", enable_memory_snapshot=True, min_containers=1, scaledown_window=5 * 60)
@modal.concurrent(max_inputs=4)
class Embedder:
    @modal.enter(snap=True)
    def load(self) -> None:
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer("all-MiniLM-L6-v2", device="cpu")

    @modal.enter(snap=False)
    def to_gpu(self) -> None:
        self.model = self.model.to("cuda")

    @modal.method()
    def embed(self, texts: list[str]) -> list[list[float]]:
        return self.model.encode(texts).tolist()

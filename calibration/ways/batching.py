"""Way 3: batching (docs/sources.md §1). Each client sends rounds of ``--round`` items as chunks of ``--chunk`` (one
call a chunk, ``--chunk-max-inputs`` chunks per container), or, with ``--batched``, single-item calls that Modal batches
(``@modal.batched(max_batch_size=chunk, wait_ms=...)``, one batch per container)."""

from __future__ import annotations

import argparse
import math
from typing import Any

from calibration.plan import AppPlan
from calibration.ways.base import Option, capped
from calibration.ways.loadtest import CLIENTS, LoadTest


class Batching(LoadTest):
    name = "batching"
    preset = "loadtest-batching"
    options = (
        Option("--round", int, 1000, "batching: items per round per client (default 1000)", (1, 100_000)),
        # modal/_partial_function.py MAX_MAX_BATCH_SIZE = 1000
        Option("--chunk", int, 32, "batching: items per chunk (default 32)", (1, 1000)),
        Option("--chunk-max-inputs", int, 50, "batching: chunks per container (default 50)", (1, 1000)),
        Option("--batched", bool, False, "batching with @modal.batched (single-item calls) instead of chunks"),
        # MAX_BATCH_WAIT_MS: 10 minutes
        Option("--batch-wait-ms", int, 1000, "@modal.batched wait_ms (default 1000)", (0, 600_000)),
        *CLIENTS,
    )
    reference = True
    slowness = 1

    def deploy(self, args: argparse.Namespace, name: str, common: dict[str, Any]) -> tuple[list[AppPlan], int, str]:
        from calibration.apps import loadtest

        if args.batched:
            # one batch per container at a time: items in flight ÷ batch size containers
            n = capped(args, math.ceil(args.clients * args.round / args.chunk))
            opts = {**common, "ways": ("batched",), "batch_size": args.chunk, "batch_wait_ms": args.batch_wait_ms}
            fn = "work_batched"
        else:
            chunks = args.clients * math.ceil(args.round / args.chunk)
            n = capped(args, math.ceil(chunks / args.chunk_max_inputs))
            opts = {**common, "ways": ("chunk",), "chunk_max_inputs": args.chunk_max_inputs}
            fn = "work_chunk"
        opts["max_containers"] = n
        how = "single-item calls batched by Modal" if args.batched else "chunks"
        calls = (
            f"{args.clients} clients × rounds of {args.round} items in {how} of {args.chunk} for "
            f"{args.duration:g} s, up to {args.drain:g} s drain; work uniform({args.work_min:g}, "
            f"{args.work_max:g}) s"
        )
        return [AppPlan(name, [fn], lambda: loadtest.make_app(name, **opts))], n, calls

    def own_sets(self, args: argparse.Namespace) -> dict[str, Any]:
        return {
            "batching.round_items": args.round,
            "batching.chunk_items": args.chunk,
            "function.max_inputs": 1 if args.batched else args.chunk_max_inputs,
        }

    async def job(self, args: argparse.Namespace, names: list[str], load: Any) -> Any:
        from calibration.clients import Job

        target = ((names[0], "work_batched" if args.batched else "work_chunk"),)
        chunk_items = 1 if args.batched else args.chunk
        return Job("rounds", load, tuple(range(load.clients)), target, chunk=not args.batched,
                   round_items=args.round, chunk_items=chunk_items)  # fmt: skip

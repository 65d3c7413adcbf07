"""Pools of worker processes for a command's runs (``process_pool``): detached workers (sim/processes.py) that are
stopped, not waited for, when the command ends early. Apart from sim/processes.py, which a command imports first,
while a Ctrl-C is still one line: concurrent.futures takes a while to load."""

from __future__ import annotations

import contextlib
import os
import weakref
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import ClassVar

from sim.processes import WorkerDied, detach_worker, sigint_held

WORKER_DIED = (WorkerDied, BrokenProcessPool)  # a run's worker process ended without answering: exit 1, one line


class WorkerPool(ProcessPoolExecutor):
    """A ProcessPoolExecutor of detached workers (sim/processes.py: they die with this process, SIGKILL included,
    ignore Ctrl-C and hold none of its pipes) whose shutdown does not wait for work still queued or running (after
    an error or a Ctrl-C here): the workers are stopped (SIGTERM) instead."""

    _live: ClassVar[weakref.WeakSet[WorkerPool]] = weakref.WeakSet()

    def __init__(self, jobs: int) -> None:
        super().__init__(max_workers=jobs, initializer=detach_worker, initargs=(os.getpid(),))
        WorkerPool._live.add(self)

    def _spawn_process(self) -> None:  # (concurrent.futures: each worker is started here)
        with sigint_held():
            super()._spawn_process()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if getattr(self, "_pending_work_items", None):
            self.stop()
        super().shutdown(wait=wait, cancel_futures=cancel_futures)

    def stop(self) -> None:
        """Cancel what is queued and end the workers now, not once their runs are done."""
        processes = list((getattr(self, "_processes", None) or {}).values())
        super().shutdown(wait=False, cancel_futures=True)
        for proc in processes:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                proc.terminate()
        for proc in processes:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                proc.join(5)

    @classmethod
    def stop_all(cls) -> None:
        """Stop every pool still open (a Ctrl-C or a dead worker ends the command: no pool may keep it waiting)."""
        for pool in list(cls._live):
            pool.stop()


def process_pool(jobs: int) -> WorkerPool:
    """A pool of ``jobs`` worker processes that end when this process dies, SIGKILL included (``WorkerPool``)."""
    return WorkerPool(jobs)

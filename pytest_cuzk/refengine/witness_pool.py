"""Partition witnesses in worker processes, because Python's GIL keeps threads from sharing the work.

cuzk synthesises a job's partitions side by side on its rayon pool (``synthesis.threads``, 0 =
all CPUs). The reference engine's witness generation is Python, so the same parallelism takes
processes: a spawn-started pool, made at the first job that uses it, whose workers get the
partition's witness (a frozen dataclass) and send back the assignment z. Only circuits of at
least ``MIN_CONSTRAINTS`` go there: a partition of the ``xlarge`` preset takes over a second
in Python, while one of ``default`` takes milliseconds, less than the hand-off costs. Workers
end with the engine: on ``close``, and by themselves when their parent is gone (SIGKILL).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from .circuits import Preset
from .circuits.registry import circuit_for
from .r1cs import WitnessCS

__all__ = ["MIN_CONSTRAINTS", "WitnessPool", "partition_witness", "usable_cpus"]

MIN_CONSTRAINTS = 50_000
"""The smallest circuit whose partition witnesses go to the worker processes (``large`` is 63k)."""
_PARENT_POLL_S = 0.5


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(_PARENT_POLL_S)
    os._exit(0)  # the engine is gone: nobody is left to take the result


def _start_worker(parent: int) -> None:
    """Worker initializer: a daemon thread ends the worker once its parent (the engine) is gone."""
    threading.Thread(target=_watch_parent, args=(parent,), name="ref-witness-watch", daemon=True).start()


def partition_witness(circuit_id: str, preset: Preset, witness: Any) -> tuple[int, list[int]]:
    """(number of inputs, the full assignment z) of one partition: what a worker computes."""
    w = WitnessCS()
    circuit_for(circuit_id).synthesize(w, preset, witness)
    return len(w.inputs), w.assignment()


class WitnessPool:
    """A lazily started pool of ``workers`` processes computing partition witnesses; thread-safe."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._closed = False

    def submit(self, circuit_id: str, preset: Preset, witness: Any) -> Future[tuple[int, list[int]]]:
        """Start one partition's witness; the future gives (number of inputs, z) or the circuit's error.

        A pool that lost a worker (the OOM killer, a signal) fails the witnesses it had, and is
        replaced here, so that the jobs after them are served.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError("the witness pool is closed")
            if self._pool is not None:
                try:
                    return self._pool.submit(partition_witness, circuit_id, preset, witness)
                except BrokenProcessPool:
                    self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_worker,
                initargs=(os.getpid(),),
            )
            return self._pool.submit(partition_witness, circuit_id, preset, witness)

    def close(self) -> None:
        """Stop the workers; pending witnesses are cancelled."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, which containers and taskset narrow)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1

"""Partition synthesis in worker processes, because Python's GIL keeps threads from sharing the work.

cuzk synthesises a job's partitions side by side on its rayon pool (``synthesis.threads``, 0 =
all CPUs). The reference engine's synthesis is Python, so the same parallelism takes processes:
a spawn-started pool, made at the first job that uses it, whose workers get the partition's
witness (a frozen dataclass) and send back the assignment z (the PCE path,
``partition_witness``) or z with A·z, B·z, C·z (the constraint-system path,
``partition_constraints``, which cuzk takes for every proof). Only circuits of at least
``MIN_CONSTRAINTS`` go there: a partition of the ``xlarge`` preset takes seconds in Python,
while one of ``default`` takes milliseconds, less than the hand-off costs. Workers end with the
engine: on ``close``, and by themselves when their parent is gone (SIGKILL).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from pytest_cuzk.refengine.circuits import Preset
from pytest_cuzk.refengine.circuits.registry import circuit_for
from pytest_cuzk.refengine.r1cs import ConstraintSystem, Evaluations, WitnessCS

__all__ = ["MIN_CONSTRAINTS", "WitnessPool", "partition_constraints", "partition_witness", "usable_cpus"]

T = TypeVar("T")

MIN_CONSTRAINTS = 50_000
"""The smallest circuit whose partitions go to the worker processes (``large`` is 63k)."""
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


def partition_constraints(circuit_id: str, preset: Preset, witness: Any) -> Evaluations:
    """One partition through the constraint system, as cuzk synthesises: what a worker sends back."""
    t0 = time.perf_counter()
    cs = ConstraintSystem()
    circuit_for(circuit_id).synthesize(cs, preset, witness)
    return cs.evaluations(time.perf_counter() - t0)


class WitnessPool:
    """A lazily started pool of ``workers`` processes synthesising partitions; thread-safe."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._closed = False

    def submit(
        self, work: Callable[[str, Preset, Any], T], circuit_id: str, preset: Preset, witness: Any
    ) -> Future[T]:
        """Start ``work`` on one partition's witness; the future gives its result or the circuit's error.

        ``work`` is ``partition_witness`` (the PCE path) or ``partition_constraints``.

        A pool that lost a worker (the OOM killer, a signal) fails the partitions it had, and is
        replaced here, so that the jobs after them are served.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError("the witness pool is closed")
            if self._pool is not None:
                try:
                    return self._pool.submit(work, circuit_id, preset, witness)
                except BrokenProcessPool:
                    self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_worker,
                initargs=(os.getpid(),),
            )
            return self._pool.submit(work, circuit_id, preset, witness)

    def close(self) -> None:
        """Stop the workers; pending partitions are cancelled."""
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

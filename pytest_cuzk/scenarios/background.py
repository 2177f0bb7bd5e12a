"""Background load: a fixed number of proofs of one kind in flight, each replaced as it finishes.

This is how a sealing pipeline behind Curio keeps a proving daemon busy: ``depth`` clients, each
submitting its next proof as soon as its last one is answered (Curio's ``[Cuzk] MaxPending``
bounds how many it has in flight). Each proof goes through the runner's own submit and await, so
it is bounded by ``--cuzk-proof-timeout`` like any other. ``stop`` sends no more, asks the daemon
to cancel what is in flight (a daemon that can drops its queued proofs; cuzk cannot, and goes on)
and waits for every answer, so nothing is left running behind the test. A proof cancelled so is
not a result; the others' answers are checked after.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import cast

from pytest_cuzk.core.errors import CuzkError
from pytest_cuzk.daemon.client import ProofResult
from pytest_cuzk.proto import pb
from pytest_cuzk.run.waves import ProofOutcome, Runner, await_one
from pytest_cuzk.vocab.kinds import ProofKindInfo

__all__ = ["Background"]

_Answered = tuple[pb.SubmitProofRequest, ProofOutcome, ProofResult | None]


class Background:
    """``depth`` proofs of ``kind`` kept in flight from worker threads until ``stop``."""

    def __init__(self, runner: Runner, kind: ProofKindInfo, depth: int, priority: int) -> None:
        self.runner = runner
        self.kind = kind
        self.depth = depth
        self.priority = priority
        self.answered: list[_Answered] = []
        self.error: CuzkError | None = None  # what stopped a worker (the daemon gone, a hang)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._in_flight: set[str] = set()
        self._threads = [
            threading.Thread(target=self._work, name=f"cuzk-background-{i}", daemon=True)
            for i in range(depth)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def _work(self) -> None:
        while not self._stopping.is_set():
            req = self.runner.make_request()
            req.priority = cast("pb.Priority", self.priority)
            try:
                due = time.monotonic()
                with self._lock:
                    self._in_flight.add(req.request_id)
                self.runner.client.submit(req)
                record, answer = await_one(self.runner, self.kind, req, due)
            except CuzkError as exc:  # the main thread's watch says what happened to the daemon
                self.error = self.error or exc
                return
            with self._lock:
                self._in_flight.discard(req.request_id)
                if self._stopping.is_set() and record.error.startswith("CANCELLED"):
                    return  # cancelled by ``stop``: not a result
                self.answered.append((req, record, answer))
            if not record.ok:
                return  # the test fails on it; more load would only spend time

    def completed_between(self, start: float, end: float) -> int:
        """Background proofs answered (completed) in that span of monotonic time."""
        with self._lock:
            return sum(1 for _, r, _ in self.answered if r.ok and start <= r.answered_at <= end)

    def first_answer(self, watch: Callable[[], None], timeout_s: float) -> None:
        """Wait until a background proof is answered: the daemon is then in its steady loaded state."""
        deadline = time.monotonic() + timeout_s
        while not self.answered and self.error is None and time.monotonic() < deadline:
            time.sleep(0.05)
            watch()

    def stop(self, timeout_s: float) -> list[_Answered]:
        """Send no more, cancel what is in flight, and wait for every answer (each bounded by the timeout)."""
        self._stopping.set()
        with self._lock:
            in_flight = list(self._in_flight)
        for job in in_flight:
            with contextlib.suppress(CuzkError):
                self.runner.client.cancel(job, timeout=self.runner.probe_timeout_s)
        for thread in self._threads:
            thread.join(timeout_s)
        with self._lock:
            return list(self.answered)

"""The reference engine's queue: priorities, FIFO within a priority, and cross-sector batching.

Jobs wait in a heap (higher priority first, FIFO within a priority) until the dispatcher
takes the next work: one job, or for PoRep and SnapDeals with ``max_batch_size > 1`` a batch
of same-kind jobs, which waits up to ``max_batch_wait_ms`` for company and is flushed early
when another kind arrives (as cuzk's batch collector does). With the ``fifo`` fault,
priorities are ignored and jobs leave in the order they came. ``halt`` (cuzk's SIGINT)
lets no job leave any more but keeps taking new ones; ``stop`` refuses new ones too.
Shares the engine's lock.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
import uuid

from pytest_cuzk.proto import pb
from pytest_cuzk.refengine.config import RefConfig
from pytest_cuzk.refengine.jobs import QUEUED, RUNNING, Job, JobStore, Work
from pytest_cuzk.vocab.kinds import ProofKindInfo

__all__ = ["SHUTDOWN_MESSAGE", "JobQueue"]

log = logging.getLogger("cuzk_ref.engine")
SHUTDOWN_MESSAGE = "daemon shutting down"
_HONOURED_PRIORITIES = (pb.LOW, pb.HIGH, pb.CRITICAL)


class JobQueue:
    """Queued jobs in priority order, and the batches the dispatcher takes from them."""

    def __init__(self, config: RefConfig, store: JobStore) -> None:
        self.config = config
        self.store = store
        self.lock: threading.Condition = store.lock
        self._heap: list[tuple[int, int, Job]] = []
        self._seq = 0
        self._proofs_started = 0
        self._fifo = config.faults.fifo
        self.stopping = False  # no new jobs are taken
        self.halted = False  # no job leaves the queue

    def push(self, req: pb.SubmitProofRequest, kind: ProofKindInfo) -> tuple[Job, int]:
        """Queue a proof (or join the queued or running job with its id); returns it and its position."""
        with self.lock:
            existing = self.store.active.get(req.request_id)
            if existing is not None:
                return existing, 0
            if self.stopping:
                raise RuntimeError(SHUTDOWN_MESSAGE)
            self._seq += 1
            job_id = req.request_id or str(uuid.uuid4())
            job = Job(job_id, kind, req, _priority(kind, req.priority), self._seq)
            position = sum(1 for _, _, j in self._heap if j.state == QUEUED)
            heapq.heappush(self._heap, (0 if self._fifo else -job.priority, job.seq, job))
            self.store.active[job.job_id] = job
            self.lock.notify_all()
        what = (job.job_id, kind.status_name, job.priority, position)
        log.info("job %s queued (%s, priority %d, position %d)", *what)
        return job, position

    def stop(self) -> None:
        """Take no new jobs and hand out no more work."""
        with self.lock:
            self.stopping = self.halted = True
            self.lock.notify_all()

    def halt(self) -> None:
        """Hand out no more work, but keep accepting jobs (which then wait for ever)."""
        with self.lock:
            self.halted = True
            self.lock.notify_all()

    def next_work(self) -> Work | None:
        """The next job or batch, waiting for one; None once the engine stops."""
        with self.lock:
            while True:
                if self.halted:
                    return None
                first = self._head()
                if first is None:
                    self.lock.wait()
                    continue
                heapq.heappop(self._heap)
                batching = first.kind.batchable and self.config.max_batch_size > 1
                batch = [j for j in (self._collect(first) if batching else [first]) if j.state == QUEUED]
                if batch and not self.halted:
                    return self._begin(batch)

    def _head(self) -> Job | None:
        """The highest-priority queued job, dropping cancelled entries. Lock held."""
        while self._heap and self._heap[0][2].state != QUEUED:
            heapq.heappop(self._heap)
        return self._heap[0][2] if self._heap else None

    def _collect(self, first: Job) -> list[Job]:
        """Gather same-kind jobs until the batch is full, the wait is over, or another kind waits."""
        batch = [first]
        deadline = time.monotonic() + self.config.max_batch_wait_ms / 1000
        while len(batch) < self.config.max_batch_size and not self.halted:
            head = self._head()
            if head is not None and head.kind != first.kind:
                break
            if head is not None:
                batch.append(heapq.heappop(self._heap)[2])
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.lock.wait(left)
        return batch

    def _begin(self, batch: list[Job]) -> Work:
        now = time.monotonic()
        for job in batch:
            self._proofs_started += 1
            job.state, job.started, job.proof_no = RUNNING, now, self._proofs_started
        if len(batch) > 1:
            ids = ", ".join(j.job_id for j in batch)
            log.info("batch of %d %s jobs: %s", len(batch), batch[0].kind.status_name, ids)
        return Work(batch)


def _priority(kind: ProofKindInfo, requested: int) -> int:
    """Cuzk's rule: 0 is the kind's default; LOW, HIGH and CRITICAL are honoured; anything else NORMAL."""
    if requested == pb.PRIORITY_UNSPECIFIED:
        return kind.default_priority
    return requested if requested in _HONOURED_PRIORITIES else pb.NORMAL

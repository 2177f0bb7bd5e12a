"""The reference engine's jobs and what it remembers of them.

``JobStore`` holds the jobs queued or running and finished jobs' results, keyed by job id
like cuzk: AwaitProof on an id whose earlier run finished returns that stored result at
once, even while a resubmission with the same id runs again; a second Submit with an id
that is still queued or running joins that job. cuzk keeps every result for ever; the
store keeps the last ``keep`` when given one. It also keeps the counters GetStatus and
GetMetrics report. It shares the engine's lock.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from pytest_cuzk.proto import pb
from pytest_cuzk.refengine.stages import ParsedJob, Synthesized
from pytest_cuzk.vocab.kinds import ProofKindInfo

__all__ = ["DONE", "QUEUED", "RUNNING", "Job", "JobStore", "Work"]

QUEUED, RUNNING, DONE = "queued", "running", "done"
KEEP_FINISHED_S = 30.0  # finished jobs stay listed for /status this long, like cuzk's tracker
Status = pb.AwaitProofResponse


@dataclass(eq=False)
class Job:
    """One submitted proof, from the queue to its stored result."""

    job_id: str
    kind: ProofKindInfo
    request: pb.SubmitProofRequest
    priority: int
    seq: int
    submitted: float = field(default_factory=time.monotonic)
    state: str = QUEUED
    started: float = 0.0
    finished: float = 0.0
    proof_no: int = 0
    synth_s: float = 0.0  # summed over the job's partitions
    gpu_draws: list[float] = field(default_factory=list)  # real speed: each partition's GPU seconds
    parsed: ParsedJob | None = None
    parts: list[dict[str, Any]] = field(default_factory=list)  # per-partition progress for /status
    result: pb.AwaitProofResponse | None = None
    done: threading.Event = field(default_factory=threading.Event)


@dataclass(eq=False)
class Work:
    """One pass through synthesis and prove: a single job, or a batch of same-kind jobs."""

    jobs: list[Job]
    size: int = 0  # jobs it started with (failed ones leave ``jobs``)
    srs_s: float = 0.0
    registered: float = 0.0  # when parsing and loading the parameters were done
    synth_s: float = 0.0
    parts: list[Synthesized] = field(default_factory=list)
    owners: list[Job] = field(default_factory=list)  # the job each entry of ``parts`` belongs to

    def __post_init__(self) -> None:
        self.size = self.size or len(self.jobs)


class JobStore:
    """Active jobs, stored results and the counters, under the engine's lock."""

    def __init__(self, lock: threading.Condition, keep: int | None = None) -> None:
        self.lock = lock
        self.keep = keep
        self.active: dict[str, Job] = {}
        self.results: dict[str, pb.AwaitProofResponse] = {}  # oldest first
        self._recent: deque[Job] = deque(maxlen=keep)  # listed for /status (30 s, and ``keep`` at most)
        self.completed: dict[str, int] = {}
        self.failed: dict[str, int] = {}
        self.durations: deque[tuple[str, float]] = deque(maxlen=1000)

    def lookup(self, job_id: str) -> pb.AwaitProofResponse | Job:
        """The stored result for ``job_id`` (checked first, like cuzk), else its queued or running job."""
        with self.lock:
            found: pb.AwaitProofResponse | Job | None = self.results.get(job_id) or self.active.get(job_id)
        if found is None:
            raise KeyError(f"job not found: {job_id}")
        return found

    def finish(self, job: Job, result: pb.AwaitProofResponse) -> None:
        """Store a job's result, count it, and wake whoever waits for it."""
        with self.lock:
            job.result, job.state, job.finished = result, DONE, time.monotonic()
            job.parsed = None  # the decoded inputs are not needed any more
            job.request = _without_payload(job.request)  # a finished job stays listed 30 s
            self.results.pop(job.job_id, None)
            self.results[job.job_id] = result
            while self.keep is not None and len(self.results) > self.keep:
                del self.results[next(iter(self.results))]
            if self.active.get(job.job_id) is job:
                del self.active[job.job_id]
            self._recent.append(job)
            self._forget_old()
            name = job.kind.name
            if result.status == Status.COMPLETED:
                self.completed[name] = self.completed.get(name, 0) + 1
                self.durations.append((name, result.total_ms / 1000))
            elif result.status == Status.FAILED:
                self.failed[name] = self.failed.get(name, 0) + 1
            self.lock.notify_all()
        job.done.set()

    def jobs(self) -> list[Job]:
        """Queued and running jobs, plus jobs that finished in the last 30 s (like cuzk's tracker)."""
        with self.lock:
            self._forget_old()
            return [*self.active.values(), *self._recent]

    def _forget_old(self) -> None:
        now = time.monotonic()
        while self._recent and now - self._recent[0].finished > KEEP_FINISHED_S:
            self._recent.popleft()

    def counts(self) -> tuple[dict[str, int], dict[str, int], list[tuple[str, float]]]:
        """Copies of completed and failed counts per kind and the last 1000 (kind, seconds)."""
        with self.lock:
            return dict(self.completed), dict(self.failed), list(self.durations)

    def queued(self) -> list[Job]:
        with self.lock:
            return [j for j in self.active.values() if j.state == QUEUED]


def _without_payload(request: pb.SubmitProofRequest) -> pb.SubmitProofRequest:
    """The request less its vanilla proofs, in a message of its own: clearing a field frees nothing."""
    request.ClearField("vanilla_proof")
    request.ClearField("vanilla_proofs")
    light = pb.SubmitProofRequest()
    light.CopyFrom(request)
    return light

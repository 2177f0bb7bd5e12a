"""Run one suite case: proofs in waves, every proof checked and timed.

A case is (daemon, kind, batch size b, concurrency j). It keeps ``b × j`` proofs
in flight — so batches really form — in waves of that size until ``--cuzk-proofs``
proofs (at least one wave) are done. Each wave is one pytest-benchmark pedantic
round; ``CaseResult.figures`` turns every proof's record and the memory sampler's
report into the case's one ``Figures`` record.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import re
import statistics
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from .backends.protocol import DaemonBackend
from .cases import Case
from .client import ProofResult, ProvingClient
from .errors import (
    Cancelled,
    CuzkError,
    DaemonExited,
    DaemonHung,
    DaemonUnavailable,
    DeadlineExceeded,
    ProofTimeout,
)
from .figures import Figures, ProofTimings, percentile
from .memory import MemoryReport
from .progress import StatusLine
from .proofcheck import check_proof
from .proto import pb
from .wire.kinds import ProofKindInfo

__all__ = ["CaseResult", "ProofRecord", "Runner", "run_case", "run_wave"]

_DEATH_POLL_S = 0.2
_REASON_NUMBERS = re.compile(r"\d+\.\d+(?=s\b)")  # the seconds waited differ per proof


@dataclass
class ProofRecord:
    """One proof as the client saw it and as the daemon timed it."""

    job_id: str
    ok: bool
    wall_s: float
    error: str = ""
    queue_wait_ms: int = 0
    synthesis_ms: int = 0
    gpu_compute_ms: int = 0
    total_ms: int = 0
    proof_len: int = 0
    timed_out: bool = False


@dataclass
class CaseResult:
    """All proofs of a case with the statistics the report and gates use."""

    case: Case
    proofs: list[ProofRecord] = field(default_factory=list)
    wall_s: float = 0.0
    memory: MemoryReport | None = None
    known_issue: str | None = None  # the engine's known bug that explains every failure

    @property
    def ok(self) -> list[ProofRecord]:
        return [p for p in self.proofs if p.ok]

    @property
    def failed(self) -> list[ProofRecord]:
        return [p for p in self.proofs if not p.ok]

    def why(self) -> str:
        """Why proofs failed: each distinct reason once, as its first proof said it, with how many proofs."""
        if not self.failed:
            return "every proof succeeded"
        groups: dict[str, list[ProofRecord]] = {}
        for p in self.failed:  # the same reason for other jobs and other seconds waited is one reason
            groups.setdefault(_REASON_NUMBERS.sub("…", p.error.replace(p.job_id, "<job>")), []).append(p)
        ranked = sorted(groups.values(), key=len, reverse=True)
        head = f"{len(self.failed)} of {len(self.proofs)} {self.case.kind.name} proofs failed: "
        return head + "; ".join(f"{len(g)}x {g[0].error}" for g in ranked)

    def latency(self, q: float) -> float | None:
        return percentile([p.wall_s for p in self.ok], q)

    @property
    def proofs_per_hour(self) -> float:
        return len(self.ok) / self.wall_s * 3600 if self.wall_s > 0 else 0.0

    def figures(self, test: str) -> Figures:
        """The case's one figures record (built once, after the case ran)."""
        ok, case, memory = self.ok, self.case, self.memory
        timings = {
            name: round(statistics.fmean(getattr(p, name) for p in ok), 1) if ok else None
            for name in ("queue_wait_ms", "synthesis_ms", "gpu_compute_ms", "total_ms")
        }
        return Figures(
            test=test,
            label=case.label,
            kind=case.kind.name,
            batch_size=case.batch_size,
            concurrency=case.concurrency,
            proofs_ok=len(ok),
            proofs_failed=len(self.failed),
            wall_s=round(self.wall_s, 4),
            throughput_proofs_per_hour=round(self.proofs_per_hour, 3),
            latency_p50_s=_round(self.latency(50)),
            latency_p90_s=_round(self.latency(90)),
            latency_max_s=_round(max((p.wall_s for p in ok), default=None)),
            timings=ProofTimings(**timings),
            rss_peak_bytes=memory.rss_effective_peak_bytes if memory is not None else None,
            vram_peak_bytes=memory.vram_peak_bytes if memory is not None else None,
            memory=memory,
            failures=tuple(f"{p.job_id}: {p.error}" for p in self.failed[:20]),
        )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


@dataclass
class Runner:
    """What ``run_case`` needs: a client, the daemon's backend, fresh requests and how to check proofs."""

    client: ProvingClient
    backend: DaemonBackend
    make_request: Callable[[], pb.SubmitProofRequest]
    proof_timeout_s: float
    probe_timeout_s: float
    verify: Callable[[pb.SubmitProofRequest, bytes], bool] | None = None
    mark: Callable[[str], None] | None = None
    rss_peak: Callable[[], int | None] = lambda: None
    status: StatusLine | None = None
    tick: Callable[[], None] = lambda: None  # run_case points it at the case's line while it runs

    def death(self, what: str) -> DaemonExited:
        return DaemonExited(f"daemon died during {what}: {self.backend.death_message(self.rss_peak())}")

    def hung_if_silent(self, what: str, cause: BaseException | None = None) -> None:
        """After a call or a proof timed out: raise DaemonHung when the daemon answers nothing at all."""
        seen = self.backend.health(self.probe_timeout_s)
        if seen is not None:
            raise DaemonHung(f"daemon hung: {seen} during {what}") from cause


def _one_proof(runner: Runner, kind: ProofKindInfo, req: pb.SubmitProofRequest, t0: float) -> ProofRecord:
    """Await one submitted proof; cancel it on timeout; check (and verify) what comes back."""
    job = req.request_id
    try:
        res: ProofResult = runner.client.await_proof(job, timeout_s=runner.proof_timeout_s)
    except ProofTimeout:
        elapsed = time.monotonic() - t0
        cancelled = "CancelProof sent"
        try:
            if not runner.client.cancel(job, timeout=min(2.0, runner.probe_timeout_s)):
                cancelled += "; the daemon could not cancel it (cuzk cannot): it may still be running"
        except CuzkError as exc:
            cancelled = f"CancelProof failed: {exc}"
        error = f"{kind.name} proof {job} timed out after {elapsed:.1f}s ({cancelled})"
        return ProofRecord(job, False, elapsed, error, timed_out=True)
    wall = time.monotonic() - t0
    if not res.completed:
        return ProofRecord(
            job, False, wall, f"{res.status_name}: {res.error_message or '(no error message)'}"
        )
    timings = (res.queue_wait_ms, res.synthesis_ms, res.gpu_compute_ms, res.total_ms)
    rec = ProofRecord(job, True, wall, "", *timings, len(res.proof))
    problem = _check(runner, kind, req, res)
    if problem:
        rec.ok, rec.error = False, problem
    return rec


def _check(runner: Runner, kind: ProofKindInfo, req: pb.SubmitProofRequest, res: ProofResult) -> str:
    """What is wrong with a completed answer: another job's, a repeat, malformed, or not verifying."""
    if res.job_id and res.job_id != req.request_id:
        return f"the answer is for job {res.job_id!r}, not for {req.request_id!r}"
    digest = hashlib.sha256(res.proof).digest()
    earlier = runner.backend.state.proofs.setdefault(digest, req.request_id)
    if earlier != req.request_id:
        return (
            f"the proof is byte-identical to job {earlier}'s: Groth16 proofs are randomised, "
            "so this is a replay or a cache"
        )
    try:
        check_proof(res.proof, kind)
    except CuzkError as exc:
        return f"invalid proof structure: {exc}"
    if runner.verify is not None and not runner.verify(req, res.proof):
        return "proof does not verify against the reference verifying key"
    return ""


def _wave_name(kind: ProofKindInfo, requests: list[pb.SubmitProofRequest]) -> str:
    ids = [r.request_id for r in requests]
    if len(ids) == 1:
        return f"{kind.name} proof job {ids[0]}"
    return f"a wave of {len(ids)} {kind.name} proofs (jobs {ids[0]} to {ids[-1]})"


def run_wave(runner: Runner, kind: ProofKindInfo, size: int) -> list[ProofRecord]:
    """Submit ``size`` proofs at once and wait for all; fail within a poll interval of a death or a hang.

    If the wait is interrupted (pytest-timeout, Ctrl-C, the daemon's death), the
    outstanding jobs are cancelled and the channel closed, so no thread is left
    blocked on an AwaitProof. A proof that times out on a daemon that answers nothing
    at all (not even GetStatus) is a hang, not a slow proof.
    """
    requests = [runner.make_request() for _ in range(size)]
    pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="cuzk-await")
    futures: list[Future[ProofRecord]] = []
    what = _wave_name(kind, requests)
    try:
        for req in requests:
            t0 = time.monotonic()
            try:
                runner.client.submit(req)
            except DeadlineExceeded as exc:
                runner.hung_if_silent(f"SubmitProof of {what}", exc)
                raise
            futures.append(pool.submit(_one_proof, runner, kind, req, t0))
        pending = set(futures)
        while pending:
            _, pending = wait(pending, timeout=_DEATH_POLL_S, return_when=FIRST_COMPLETED)
            runner.tick()
            if not runner.backend.alive():
                raise runner.death(what)
            if stuck := runner.backend.stuck():
                raise DaemonHung(f"daemon hung: {stuck} during {what}")
        records = [f.result() for f in futures]
        timed_out = [r for r in records if r.timed_out]
        if timed_out:
            runner.hung_if_silent(f"{kind.name} proof job {timed_out[0].job_id} ({timed_out[0].error})")
        return records
    except BaseException as exc:
        # The socket closes a moment before the process can be reaped: say it died, if it did.
        death = isinstance(exc, (DaemonUnavailable, Cancelled)) and runner.backend.gone()
        if not death and not isinstance(exc, DaemonHung) and runner.backend.alive():
            for req, fut in zip(requests, futures, strict=False):
                if not fut.done():
                    with contextlib.suppress(CuzkError):
                        runner.client.cancel(req.request_id, timeout=0.5)
        runner.client.close()
        if death:
            raise runner.death(what) from exc
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def run_case(case: Case, runner: Runner, proofs: int, benchmark: Any | None) -> CaseResult:
    """Run the case's waves (through ``benchmark.pedantic`` when given) and return every record."""
    result = CaseResult(case)
    waves = max(1, math.ceil(proofs / case.in_flight))
    start = time.monotonic()

    def wave() -> None:
        if runner.mark is not None:
            runner.mark(f"wave {len(result.proofs) // case.in_flight + 1}")
        result.proofs.extend(run_wave(runner, case.kind, case.in_flight))

    planned = waves * case.in_flight
    status = runner.status or StatusLine(tty=False)
    with status.stage(f"{case.id}: proving"):
        runner.tick = lambda: status.tick(f"{len(result.proofs)} of {planned} proofs done")
        if benchmark is not None:
            benchmark.pedantic(wave, rounds=waves, iterations=1, warmup_rounds=0)
        # A disabled benchmark (e.g. under xdist) runs the target once: run the rest ourselves.
        while len(result.proofs) < planned:
            wave()
    result.wall_s = time.monotonic() - start
    return result

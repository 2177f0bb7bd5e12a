"""Run one suite case: proofs in waves, every proof checked and timed.

A case is (daemon, kind, batch size b, concurrency j). It keeps ``b × j`` proofs
in flight — so batches really form — in waves of that size until ``--cuzk-proofs``
proofs (at least one wave) are done. Each wave is one pytest-benchmark pedantic
round; ``CaseResult.figures`` turns every proof's record and the memory sampler's
report into the case's one ``Figures`` record.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from .cases import Case
from .client import ProofResult, ProvingClient
from .errors import Cancelled, CuzkError, DaemonExited, DaemonUnavailable, ProofTimeout
from .figures import Figures, ProofTimings, percentile
from .memory import MemoryReport
from .proofcheck import check_proof
from .proto import pb
from .wire.kinds import ProofKindInfo

__all__ = ["CaseResult", "ProofRecord", "Runner", "run_case", "run_wave"]

_DEATH_POLL_S = 0.2


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

    @property
    def ok(self) -> list[ProofRecord]:
        return [p for p in self.proofs if p.ok]

    @property
    def failed(self) -> list[ProofRecord]:
        return [p for p in self.proofs if not p.ok]

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
    """What ``run_case`` needs from the session, passed in as callables."""

    client: ProvingClient
    make_request: Callable[[], pb.SubmitProofRequest]
    proof_timeout_s: float
    alive: Callable[[], bool]
    gone: Callable[[], bool]
    death_message: Callable[[], str]
    verify: Callable[[pb.SubmitProofRequest, bytes], bool] | None = None
    mark: Callable[[str], None] | None = None


def _one_proof(runner: Runner, kind: ProofKindInfo, req: pb.SubmitProofRequest, t0: float) -> ProofRecord:
    """Await one submitted proof; cancel it on timeout; check (and verify) what comes back."""
    job = req.request_id
    try:
        res: ProofResult = runner.client.await_proof(job, timeout_s=runner.proof_timeout_s)
    except ProofTimeout:
        elapsed = time.monotonic() - t0
        cancelled = "CancelProof sent"
        try:
            if not runner.client.cancel(job, timeout=2.0):
                cancelled += "; the daemon could not cancel it (cuzk cannot): it may still be running"
        except CuzkError as exc:
            cancelled = f"CancelProof failed: {exc}"
        error = f"{kind.name} proof {job} timed out after {elapsed:.1f}s ({cancelled})"
        return ProofRecord(job, False, elapsed, error, timed_out=True)
    wall = time.monotonic() - t0
    if res.status != pb.AwaitProofResponse.COMPLETED:
        status = pb.AwaitProofResponse.Status.Name(res.status)
        return ProofRecord(job, False, wall, f"{status}: {res.error_message}")
    rec = ProofRecord(
        job,
        True,
        wall,
        "",
        res.queue_wait_ms,
        res.synthesis_ms,
        res.gpu_compute_ms,
        res.total_ms,
        len(res.proof),
    )
    try:
        check_proof(res.proof, kind)
    except CuzkError as exc:
        rec.ok, rec.error = False, f"invalid proof structure: {exc}"
        return rec
    if runner.verify is not None and not runner.verify(req, res.proof):
        rec.ok, rec.error = False, "proof does not verify against the reference verifying key"
    return rec


def run_wave(runner: Runner, kind: ProofKindInfo, size: int) -> list[ProofRecord]:
    """Submit ``size`` proofs at once and wait for all; fail within a poll interval of the daemon's death.

    If the wait is interrupted (pytest-timeout, Ctrl-C, the daemon's death), the
    outstanding jobs are cancelled and the channel closed, so no thread is left
    blocked on an AwaitProof.
    """
    requests = [runner.make_request() for _ in range(size)]
    pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="cuzk-await")
    futures: list[Future[ProofRecord]] = []
    died = f"daemon died during a {kind.name} proof"
    try:
        for req in requests:
            t0 = time.monotonic()
            runner.client.submit(req)
            futures.append(pool.submit(_one_proof, runner, kind, req, t0))
        pending = set(futures)
        while pending:
            _, pending = wait(pending, timeout=_DEATH_POLL_S, return_when=FIRST_COMPLETED)
            if not runner.alive():
                raise DaemonExited(f"{died}: {runner.death_message()}")
        return [f.result() for f in futures]
    except BaseException as exc:
        # The socket closes a moment before the process can be reaped: say it died, if it did.
        death = isinstance(exc, (DaemonUnavailable, Cancelled)) and runner.gone()
        if not death and runner.alive():
            for req, fut in zip(requests, futures, strict=False):
                if not fut.done():
                    with contextlib.suppress(CuzkError):
                        runner.client.cancel(req.request_id, timeout=0.5)
        runner.client.close()
        if death:
            raise DaemonExited(f"{died}: {runner.death_message()}") from exc
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

    if benchmark is not None:
        benchmark.pedantic(wave, rounds=waves, iterations=1, warmup_rounds=0)
    # A disabled benchmark (e.g. under xdist) runs the target once: run the rest ourselves.
    while len(result.proofs) < waves * case.in_flight:
        wave()
    result.wall_s = time.monotonic() - start
    return result

"""A case's proofs in waves: submitted and awaited inside the timed window, checked outside it.

A case is (daemon, kind, batch size b, concurrency j). A wave keeps ``b × j`` proofs in flight
at once, so batches really form. ``run_wave`` is the timed part: submit every request (built
beforehand), await every answer, watch the daemon for a death or a hang. ``check_wave``, after
it, checks and verifies each answer, so the plugin's own work never counts as the daemon's.
``CaseResult`` holds every proof and wave of a case; ``measure`` decides how many waves run.

An open-loop wave (the load scenarios) gives each request the time it is due instead: it is
sent then, and its latency counts from then, not from when it was sent, so a late send (a busy
client) never hides a slow daemon (no coordinated omission).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from pytest_cuzk.backends import fate
from pytest_cuzk.backends.protocol import DaemonBackend
from pytest_cuzk.core.errors import (
    Cancelled,
    CuzkError,
    DaemonExited,
    DaemonHung,
    DaemonUnavailable,
    DeadlineExceeded,
    ProofTimeout,
)
from pytest_cuzk.core.progress import ProgressLine
from pytest_cuzk.daemon.client import WATCH_POLL_S, ProofResult, ProvingClient
from pytest_cuzk.daemon.proofcheck import check_proof
from pytest_cuzk.daemon.statuspoll import StatusMemory
from pytest_cuzk.host.limits import available_memory
from pytest_cuzk.measure.memory import MemoryReport
from pytest_cuzk.proto import pb
from pytest_cuzk.run.cases import Case
from pytest_cuzk.vocab.kinds import ProofKindInfo
from pytest_cuzk.vocab.units import format_bytes, plural

__all__ = ["CaseResult", "ProofOutcome", "Runner", "Wave", "await_one", "check_wave", "run_wave"]

_REASON_NUMBERS = re.compile(r"\d+\.\d+(?=s\b)")  # the seconds waited differ per proof


@dataclass
class ProofOutcome:
    """One proof as the client saw it and as the daemon timed it.

    ``latency_s`` runs on the case's clock: from when the proof was due (its wave's start, or its
    open-loop offset) to its answer, so a queue in the client counts too.
    """

    job_id: str
    ok: bool
    latency_s: float
    error: str = ""
    queue_wait_ms: int = 0
    synthesis_ms: int = 0
    gpu_compute_ms: int = 0
    total_ms: int = 0
    proof_len: int = 0
    timed_out: bool = False
    answered_at: float = 0.0  # monotonic time the answer arrived
    send_lag_s: float = 0.0  # how late it was sent after it was due (open-loop waves)


@dataclass
class Wave:
    """One wave: its requests, what came back for each, and its wall time once checked."""

    requests: list[pb.SubmitProofRequest]
    records: list[ProofOutcome] = field(default_factory=list)
    answers: list[ProofResult | None] = field(default_factory=list)
    seconds: float = 0.0  # first submit to last answer
    window: int = 0
    offsets: list[float] | None = None  # open loop: each request is due this long after the wave starts
    late_s: float | None = None  # open loop: an answer later than this after its due time is late
    late_allowed: int = 0  # once more are late (or failed), the rest of the schedule is not sent

    def late(self) -> int:
        """Answers so far that failed or came more than ``late_s`` after they were due."""
        bound = self.late_s if self.late_s is not None else float("inf")
        return sum(1 for r in self.records if not r.ok or r.latency_s > bound)


@dataclass
class CaseResult:
    """All proofs and waves of a case, and how its measurement ended."""

    case: Case
    proofs: list[ProofOutcome] = field(default_factory=list)
    waves: list[Wave] = field(default_factory=list)
    wall_s: float = 0.0
    memory: MemoryReport | None = None
    reported_memory: StatusMemory | None = None  # what the daemon's /status said
    stabilised: bool = False
    stability: str = ""  # what the stability rule found: stable, too few proofs, drifting
    windows: int = 0
    stop_reason: str = ""
    known_issue: str | None = None  # the engine's known bug that explains every failure

    @property
    def ok(self) -> list[ProofOutcome]:
        return [p for p in self.proofs if p.ok]

    @property
    def failed(self) -> list[ProofOutcome]:
        return [p for p in self.proofs if not p.ok]

    def why(self) -> str:
        """Why proofs failed: each distinct reason once, as its first proof said it, with how many proofs."""
        if not self.failed:
            return "every proof succeeded"
        groups: dict[str, list[ProofOutcome]] = {}
        for p in self.failed:  # the same reason for other jobs and other seconds waited is one reason
            groups.setdefault(_REASON_NUMBERS.sub("…", p.error.replace(p.job_id, "<job>")), []).append(p)
        ranked = sorted(groups.values(), key=len, reverse=True)
        head = f"{len(self.failed)} of {plural(len(self.proofs), f'{self.case.kind.name} proof')} failed: "
        return head + "; ".join(f"{len(g)}x {g[0].error}" for g in ranked)


@dataclass
class Runner:
    """What a case's waves need: a client, the daemon's backend, fresh requests and how to check proofs."""

    client: ProvingClient
    backend: DaemonBackend
    make_request: Callable[[], pb.SubmitProofRequest]
    proof_timeout_s: float
    probe_timeout_s: float
    verify: Callable[[pb.SubmitProofRequest, bytes], bool] | None = None
    mark: Callable[[str], None] | None = None
    rss_peak: Callable[[], int | None] = lambda: None
    progress: ProgressLine | None = None
    tick: Callable[[], None] = lambda: None  # run_case points it at the case's line while it runs

    def requests(self, count: int, what: str) -> list[pb.SubmitProofRequest]:
        """``count`` fresh requests, refused before they are built when this host cannot hold them all.

        ``what`` says what asked for that many (the options to lower), as the error names it.
        """
        first = self.make_request()
        each = max(1, first.ByteSize())
        free = available_memory()
        if free.refuses(count * each):
            raise CuzkError(
                f"{what}: {count} requests of {each:,} bytes need {format_bytes(count * each)}; at most "
                f"{free.most // each:.0f} fit, as {free.why}"
            )
        return [first, *(self.make_request() for _ in range(count - 1))]

    def death(self, what: str) -> DaemonExited:
        return DaemonExited(f"daemon died during {what}: {self.backend.death_message(self.rss_peak())}")

    def watch(self, what: str) -> None:
        """Between polls: show progress, and raise at once if the daemon died or its process is stopped."""
        self.tick()
        fate.check(self.backend, what, self.rss_peak())

    def hung_if_silent(self, what: str, cause: BaseException | None = None) -> None:
        """After a call or a proof timed out: raise DaemonHung when the daemon answers nothing at all."""
        if hung := fate.silent(self.backend, what, self.probe_timeout_s):
            raise hung from cause


def await_one(
    runner: Runner, kind: ProofKindInfo, req: pb.SubmitProofRequest, t0: float
) -> tuple[ProofOutcome, ProofResult | None]:
    """Await one submitted proof, its latency counted from ``t0``; cancel it on timeout.

    Checking the answer comes after the wave.
    """
    job = req.request_id
    lag = max(0.0, time.monotonic() - t0)  # it is awaited once it is sent
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
        answered = time.monotonic()
        late = ProofOutcome(job, False, elapsed, error, timed_out=True, answered_at=answered, send_lag_s=lag)
        return late, None
    done = time.monotonic()
    if not res.completed:
        error = f"{res.status_name}: {res.error_message or '(no error message)'}"
        return ProofOutcome(job, False, done - t0, error, answered_at=done, send_lag_s=lag), None
    timings = (res.queue_wait_ms, res.synthesis_ms, res.gpu_compute_ms, res.total_ms)
    return ProofOutcome(
        job, True, done - t0, "", *timings, len(res.proof), answered_at=done, send_lag_s=lag
    ), res


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


def check_wave(runner: Runner, kind: ProofKindInfo, wave: Wave) -> list[ProofOutcome]:
    """Check (and verify) every answer of a timed wave; a proof that fails a check is not ok."""
    for req, rec, res in zip(wave.requests, wave.records, wave.answers, strict=True):
        problem = _check(runner, kind, req, res) if res is not None else ""
        if problem:
            rec.ok, rec.error = False, problem
    return wave.records


def _wave_name(kind: ProofKindInfo, requests: list[pb.SubmitProofRequest]) -> str:
    ids = [r.request_id for r in requests]
    if len(ids) == 1:
        return f"{kind.name} proof job {ids[0]}"
    return f"a wave of {plural(len(ids), f'{kind.name} proof')} (jobs {ids[0]} to {ids[-1]})"


_Answer = Future[tuple[ProofOutcome, ProofResult | None]]


def _late_so_far(wave: Wave, sent: list[tuple[float, _Answer]]) -> int:
    """Proofs of an open-loop wave already known late: answered late or failed, or unanswered past it."""
    if wave.late_s is None:
        return 0
    now, late = time.monotonic(), 0
    for due, fut in sent:
        if not fut.done():
            late += now - due > wave.late_s
            continue
        rec = fut.result()[0]
        late += not rec.ok or rec.latency_s > wave.late_s
    return late


def _send(
    runner: Runner, wave: Wave, pool: ThreadPoolExecutor, what: str, kind: ProofKindInfo
) -> list[_Answer]:
    """Submit the wave's requests, at once or each when it is due; return the awaits in flight.

    An open-loop wave stops sending once more than ``late_allowed`` proofs are known late: its
    outcome is decided, and the requests not sent are dropped from the wave.
    """
    start = time.monotonic()
    sent: list[tuple[float, _Answer]] = []
    for i, req in enumerate(wave.requests):
        due = start + wave.offsets[i] if wave.offsets is not None else time.monotonic()
        while (left := due - time.monotonic()) > 0:
            time.sleep(min(left, WATCH_POLL_S))
            runner.watch(what)
        if _late_so_far(wave, sent) > wave.late_allowed:
            del wave.requests[i:]
            break
        try:
            runner.client.submit(req)
        except DeadlineExceeded as exc:
            runner.hung_if_silent(f"SubmitProof of {what}", exc)
            raise
        sent.append((due, pool.submit(await_one, runner, kind, req, due)))
    return [fut for _, fut in sent]


def run_wave(runner: Runner, kind: ProofKindInfo, wave: Wave) -> Wave:
    """Submit the wave's requests (at once, or each when due) and await all.

    Fails within a poll interval of a death or a hang. If the wait is interrupted
    (pytest-timeout, Ctrl-C, the daemon's death), the outstanding jobs are cancelled and
    the channel closed, so no thread is left blocked on an AwaitProof. A proof that times
    out on a daemon that answers nothing at all (not even GetStatus) is a hang, not a slow proof.
    """
    requests = wave.requests
    pool = ThreadPoolExecutor(max_workers=len(requests), thread_name_prefix="cuzk-await")
    futures: list[_Answer] = []
    what = _wave_name(kind, requests)
    start = time.monotonic()
    try:
        futures = _send(runner, wave, pool, what, kind)
        pending = set(futures)
        while pending:
            _, pending = wait(pending, timeout=WATCH_POLL_S, return_when=FIRST_COMPLETED)
            runner.watch(what)
        answered = [f.result() for f in futures]
        wave.records = [rec for rec, _ in answered]
        wave.answers = [res for _, res in answered]
        wave.seconds = max(rec.answered_at for rec in wave.records) - start
        timed_out = [r for r in wave.records if r.timed_out]
        if timed_out:
            runner.hung_if_silent(f"{kind.name} proof job {timed_out[0].job_id} ({timed_out[0].error})")
        return wave
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

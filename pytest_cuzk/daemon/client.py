"""A gRPC client for ``cuzk.v1.ProvingEngine`` that survives real payloads and real daemons.

What it does that a bare stub does not: accepts every address form cuzk's tools
print, lifts grpcio's 4 MiB receive limit (a PoRep C1 input is ~51 MB), puts a
deadline on every call, bounds AwaitProof on the client (cuzk ignores
``timeout_ms``), turns gRPC errors into exceptions naming address, RPC and code,
and polls GetStatus for readiness (cuzk logs "ready" before it binds TCP).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import TypeVar

import grpc
from prometheus_client.parser import text_string_to_metric_families

from pytest_cuzk.core.errors import (
    DaemonUnavailable,
    DeadlineExceeded,
    NotCuzkServer,
    ProofFailed,
    ProofTimeout,
    RpcError,
    Unimplemented,
)
from pytest_cuzk.daemon.errormap import map_grpc_errors
from pytest_cuzk.proto import pb, pb_grpc
from pytest_cuzk.vocab.addresses import parse_address

__all__ = [
    "AWAIT_MARGIN_S",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "WATCH_POLL_S",
    "EvictResult",
    "MetricSample",
    "MetricSet",
    "PreloadResult",
    "ProofResult",
    "ProvingClient",
    "SubmitResult",
    "keep_large_buffers",
    "parse_metrics",
]

DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
AWAIT_MARGIN_S = 0.5  # extra gRPC deadline so a daemon that honours timeout_ms answers TIMEOUT itself
WATCH_POLL_S = 0.2  # how often a watched call looks at its daemon while it waits
_STATUS = pb.AwaitProofResponse.Status
_Answer = TypeVar("_Answer")
# What grpcio says when the peer is not an HTTP/2 (gRPC) server at all.
_NOT_GRPC = ("Failed parsing HTTP/2", "Trying to connect an http1.x server", "Expected SETTINGS frame")


@dataclass(frozen=True)
class SubmitResult:
    """SubmitProof's answer."""

    job_id: str
    queue_position: int
    assigned_gpu: str
    raw: pb.SubmitProofResponse = field(repr=False, compare=False)


@dataclass(frozen=True)
class ProofResult:
    """A job as AwaitProof/Prove report it, and ``rpc_s``: that call's seconds (not from the submit)."""

    job_id: str
    status: int
    proof: bytes = field(repr=False)
    error_message: str
    queue_wait_ms: int
    srs_load_ms: int
    synthesis_ms: int
    gpu_compute_ms: int
    total_ms: int
    rpc_s: float
    address: str = ""
    raw: pb.AwaitProofResponse | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_pb(cls, msg: pb.AwaitProofResponse, rpc_s: float, address: str = "") -> ProofResult:
        return cls(
            job_id=msg.job_id,
            status=msg.status,
            proof=msg.proof,
            error_message=msg.error_message,
            queue_wait_ms=msg.queue_wait_ms,
            srs_load_ms=msg.srs_load_ms,
            synthesis_ms=msg.synthesis_ms,
            gpu_compute_ms=msg.gpu_compute_ms,
            total_ms=msg.total_ms,
            rpc_s=rpc_s,
            address=address,
            raw=msg,
        )

    @property
    def status_name(self) -> str:
        """COMPLETED, FAILED, CANCELLED, TIMEOUT or UNKNOWN."""
        return _STATUS.Name(self.status) if self.status in _STATUS.values() else f"status {self.status}"

    @property
    def completed(self) -> bool:
        return self.status == _STATUS.COMPLETED

    def raise_for_status(self) -> ProofResult:
        """Return self if COMPLETED, else raise ProofFailed with the daemon's error message."""
        if not self.completed:
            raise ProofFailed(self.job_id, self.error_message, self.status_name, self.address)
        return self


@dataclass(frozen=True)
class PreloadResult:
    """PreloadSRS's answer plus ``rpc_s``: the call's seconds on the client's clock."""

    already_loaded: bool
    load_time_ms: int
    rpc_s: float


@dataclass(frozen=True)
class EvictResult:
    """EvictSRS's answer."""

    was_loaded: bool
    freed_bytes: int


@dataclass(frozen=True)
class MetricSample:
    """One Prometheus sample; ``labels`` sorted so records compare and hash."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float
    family: str
    type: str


@dataclass(frozen=True)
class MetricSet:
    """Parsed GetMetrics text: all samples, and lookup by (name, labels)."""

    samples: tuple[MetricSample, ...]

    @property
    def by_key(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], MetricSample]:
        return {(s.name, s.labels): s for s in self.samples}

    def value(self, name: str, **labels: str) -> float | None:
        """Return a sample's value, or None when absent.

        prometheus-client's parser names every counter sample ``<family>_total``, also
        cuzk's suffix-less ``cuzk_proofs_completed{proof_kind=...}``; both names work here.
        """
        key = tuple(sorted(labels.items()))
        index = self.by_key
        sample = index.get((name, key)) or index.get((f"{name}_total", key))
        return None if sample is None else sample.value


def parse_metrics(text: str) -> MetricSet:
    """Parse Prometheus text exposition (what GetMetrics returns) into samples."""
    return MetricSet(
        tuple(
            MetricSample(s.name, tuple(sorted(s.labels.items())), float(s.value), fam.name, fam.type)
            for fam in text_string_to_metric_families(text)
            for s in fam.samples
        )
    )


@functools.cache
def keep_large_buffers() -> bool:
    """Have glibc keep freed large buffers instead of unmapping them (returns whether it could).

    A PoRep submission is ~51 MB, copied by protobuf and grpcio on the way out; by
    default glibc maps and unmaps every such buffer, and the page faults then cost
    more than the transfer (about 200 ms per submission instead of under 100 ms on a
    2-core VM). This tunes the allocator of the calling process only (the pytest
    process), never the daemon under test, once, when its first client is made: a
    pytest run that talks to no daemon keeps its allocator as it was.
    """
    with contextlib.suppress(OSError, AttributeError, TypeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, 1 << 30)) and bool(
            libc.mallopt(_M_TRIM_THRESHOLD, 2 << 30)
        )
    return False


class ProvingClient:
    """Client for one daemon address; use as a context manager or call close()."""

    def __init__(
        self,
        address: str,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        default_timeout: float = 60.0,
        watch: Callable[[str], None] | None = None,
    ) -> None:
        """``watch(what)`` runs every WATCH_POLL_S while any call waits; what it raises ends the call.

        A daemon that dies or is stopped in the middle of a call is then found within a poll
        instead of at the call's deadline (half an hour for a warm-up proof).
        """
        keep_large_buffers()
        self.watch = watch
        parsed = parse_address(address)
        self.target, self.address = parsed.target, parsed.display
        self.default_timeout = default_timeout
        options = [
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
            # Reconnect quickly so wait_ready notices a daemon that binds late.
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
        ]
        if parsed.is_local:
            options.append(("grpc.enable_http_proxy", 0))
        self.channel = grpc.insecure_channel(self.target, options=options)
        self.stub = pb_grpc.ProvingEngineStub(self.channel)  # type: ignore[no-untyped-call]

    def __enter__(self) -> ProvingClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()

    def __repr__(self) -> str:
        return f"ProvingClient({self.address!r})"

    def _call(self, rpc: str, request: object, answer: type[_Answer], timeout: float | None) -> _Answer:
        """One unary call through the one error-mapping boundary; ``answer`` is the response type."""
        method = getattr(self.stub, rpc)
        deadline = self.default_timeout if timeout is None else timeout
        with map_grpc_errors(self.address, rpc):
            if self.watch is None:
                response = method(request, timeout=deadline)
            else:
                response = self._watched(f"{rpc}{_of_job(request)}", method.future(request, timeout=deadline))
        assert isinstance(response, answer), f"{rpc} answered {type(response).__name__}"
        return response

    def _watched(self, what: str, call: grpc.Future[object]) -> object:
        """The call's answer, the daemon watched while it comes; a watch that raises cancels the call."""
        assert self.watch is not None
        while True:
            try:
                return call.result(timeout=WATCH_POLL_S)
            except grpc.FutureTimeoutError:
                try:
                    self.watch(what)
                except BaseException:
                    call.cancel()
                    raise

    def submit(self, request: pb.SubmitProofRequest, *, timeout: float | None = None) -> SubmitResult:
        """Enqueue a proof; returns at once with the job id (= request_id, or a fresh UUID)."""
        resp = self._call("SubmitProof", request, pb.SubmitProofResponse, timeout)
        return SubmitResult(resp.job_id, resp.queue_position, resp.assigned_gpu, resp)

    def await_proof(self, job_id: str, timeout_s: float | None = None) -> ProofResult:
        """Wait for a job at most ``timeout_s`` (+ AWAIT_MARGIN_S), whatever the daemon does with it.

        Without ``timeout_s``, the client's default (``cuzk_client``'s: --cuzk-proof-timeout).
        """
        timeout_s = self.default_timeout if timeout_s is None else timeout_s
        request = pb.AwaitProofRequest(job_id=job_id, timeout_ms=max(1, round(timeout_s * 1000)))
        bound = timeout_s + AWAIT_MARGIN_S
        resp, wall = self._bounded("AwaitProof", request, pb.AwaitProofResponse, job_id, timeout_s, bound)
        if resp.status == _STATUS.TIMEOUT:
            raise ProofTimeout(job_id, wall, timeout_s, self.address)
        return ProofResult.from_pb(resp, wall, self.address)

    def prove(self, request: pb.SubmitProofRequest, timeout_s: float | None = None) -> ProofResult:
        """Submit and wait in one call (cuzk reports job_id "" here when request_id was empty)."""
        timeout_s = self.default_timeout if timeout_s is None else timeout_s
        prove = pb.ProveRequest(submit=request)
        resp, wall = self._bounded("Prove", prove, pb.ProveResponse, request.request_id, timeout_s, timeout_s)
        return ProofResult.from_pb(resp.result, wall, self.address)

    def _bounded(
        self,
        rpc: str,
        request: object,
        answer: type[_Answer],
        job_id: str,
        timeout_s: float,
        deadline_s: float,
    ) -> tuple[_Answer, float]:
        """Call with a deadline; a passed deadline becomes ProofTimeout naming the job and the time waited."""
        start = time.perf_counter()
        try:
            resp = self._call(rpc, request, answer, deadline_s)
        except DeadlineExceeded as exc:
            raise ProofTimeout(job_id, time.perf_counter() - start, timeout_s, self.address) from exc
        return resp, time.perf_counter() - start

    def cancel(self, job_id: str, *, timeout: float | None = None) -> bool:
        """Ask to cancel a job; returns was_running (cuzk: always False, the job keeps running)."""
        resp = self._call(
            "CancelProof", pb.CancelProofRequest(job_id=job_id), pb.CancelProofResponse, timeout
        )
        return bool(resp.was_running)

    def status(self, *, timeout: float | None = None) -> pb.GetStatusResponse:
        return self._call("GetStatus", pb.GetStatusRequest(), pb.GetStatusResponse, timeout)

    def metrics(self, *, timeout: float | None = None) -> str:
        """Return the daemon's Prometheus text verbatim."""
        return str(
            self._call("GetMetrics", pb.GetMetricsRequest(), pb.GetMetricsResponse, timeout).prometheus_text
        )

    def metric_samples(self, *, timeout: float | None = None) -> MetricSet:
        return parse_metrics(self.metrics(timeout=timeout))

    def preload_srs(self, circuit_id: str, timeout_s: float = 900.0) -> PreloadResult:
        """Load a circuit's SRS (blocking; a 32 GiB PoRep SRS takes minutes from a cold disk)."""
        start = time.perf_counter()
        req = pb.PreloadSrsRequest(circuit_id=circuit_id)
        resp = self._call("PreloadSRS", req, pb.PreloadSrsResponse, timeout_s)
        return PreloadResult(resp.already_loaded, resp.load_time_ms, time.perf_counter() - start)

    def evict_srs(self, circuit_id: str, *, timeout: float | None = None) -> EvictResult:
        resp = self._call("EvictSRS", pb.EvictSrsRequest(circuit_id=circuit_id), pb.EvictSrsResponse, timeout)
        return EvictResult(resp.was_loaded, resp.freed_bytes)

    def wait_ready(
        self,
        timeout_s: float,
        *,
        poll_s: float = 0.05,
        max_poll_s: float = 1.0,
        between: Callable[[], None] | None = None,
    ) -> pb.GetStatusResponse:
        """Poll GetStatus with exponential backoff until it answers; DaemonUnavailable after ``timeout_s``.

        Only "nothing there yet" errors are retried. Something that answers, but not as a
        cuzk.v1 gRPC server (not HTTP/2, or no such service), is NotCuzkServer at once; any
        other error answer is raised at once too. ``between`` runs before each attempt (a live
        line; a check that raises, say when the daemon's process exited): the one poller of
        every wait for a daemon to answer.
        """
        deadline = time.monotonic() + timeout_s
        attempts, last = 0, None
        while True:
            if between is not None:
                between()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _not_ready(self.address, timeout_s, attempts, last)
            attempts += 1
            try:
                return self.status(timeout=min(remaining, 5.0))
            except Unimplemented as exc:
                raise NotCuzkServer(self.address, exc.details) from exc
            except (DaemonUnavailable, DeadlineExceeded) as exc:  # any other answer means it is up but unwell
                if any(sign in exc.details for sign in _NOT_GRPC):
                    raise NotCuzkServer(self.address, exc.details) from exc
                last = exc
            time.sleep(max(0.0, min(poll_s, deadline - time.monotonic())))
            poll_s = min(poll_s * 2, max_poll_s)


def _of_job(request: object) -> str:
    """`` of job X`` for a call about one job, so a watch's message names it."""
    if isinstance(request, pb.ProveRequest):
        request = request.submit
    job = getattr(request, "request_id", "") or getattr(request, "job_id", "")
    return f" of job {job}" if job else ""


def _not_ready(address: str, timeout_s: float, attempts: int, last: RpcError | None) -> DaemonUnavailable:
    why = f"last error {last.code.name}: {last.details}" if last else "no attempt made"
    code = last.code if last else grpc.StatusCode.UNAVAILABLE
    details = f"no answer within {timeout_s:g} s ({attempts} attempts; {why})"
    err = DaemonUnavailable(address, "GetStatus (wait_ready)", code, details)
    err.__cause__ = last
    return err

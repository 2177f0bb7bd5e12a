"""The ``cuzk.v1.ProvingEngine`` gRPC service of the reference engine.

gRPC codes and messages are cuzk's (INVALID_ARGUMENT "invalid proof_kind: N" and
"missing submit field", NOT_FOUND "job not found: <id>", INTERNAL "unknown circuit ID: X");
ids echoed into an error are clipped, so that a huge one cannot push the answer's metadata
past a client's limit. Where cuzk falls short of the proto (AwaitProof timeouts,
CancelProof, EvictSRS, GetStatus, the message-size error) the engine's behaviour
answers. Message limits are cuzk's 128 MiB.
"""

from __future__ import annotations

import logging
import os
from concurrent import futures
from typing import Any

import grpc

from pytest_cuzk.proto import pb, pb_grpc
from pytest_cuzk.refengine import faults, metrics
from pytest_cuzk.refengine.behave import MAX_MESSAGE_BYTES
from pytest_cuzk.refengine.engine import Engine
from pytest_cuzk.refengine.jobs import Job
from pytest_cuzk.vocab.addresses import UNIX_PREFIX, ListenTarget, parse_listen

__all__ = ["MAX_MESSAGE_BYTES", "ProvingEngineServicer", "bind_target", "clip", "serve"]

log = logging.getLogger("cuzk_ref.server")
_WAIT_SLICE_S = 1.0  # how often a blocked Await/Prove checks whether its client went away
_CLIP = 80


def clip(text: str, limit: int = _CLIP) -> str:
    """``text`` as an error may echo it: at most ``limit`` characters, the length said when cut."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


class ProvingEngineServicer(pb_grpc.ProvingEngineServicer):
    """Maps the 8 RPCs onto the :class:`Engine`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def _accept(self, request: Any, context: grpc.ServicerContext) -> None:
        """Refuse an oversized request as the behaviour's server does (cuzk: tonic's OUT_OF_RANGE)."""
        message = self.engine.behave.oversize(request.ByteSize())
        if message is not None:
            context.abort(grpc.StatusCode.OUT_OF_RANGE, message)

    def _submit(self, request: pb.SubmitProofRequest, context: grpc.ServicerContext) -> tuple[Job, int]:
        try:
            return self.engine.submit(request)
        except ValueError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except RuntimeError as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        raise AssertionError("unreachable: context.abort raises")

    def _wait(
        self, job: Job, timeout_s: float | None, context: grpc.ServicerContext
    ) -> pb.AwaitProofResponse:
        """Wait in slices so that a handler whose client went away frees its thread."""
        left = timeout_s
        while context.is_active():
            step = _WAIT_SLICE_S if left is None else min(_WAIT_SLICE_S, left)
            result = self.engine.wait(job, step)
            if result.status != pb.AwaitProofResponse.TIMEOUT or (left is not None and left <= step):
                return result
            left = None if left is None else left - step
        return pb.AwaitProofResponse(job_id=job.job_id, status=pb.AwaitProofResponse.TIMEOUT)

    def SubmitProof(
        self, request: pb.SubmitProofRequest, context: grpc.ServicerContext
    ) -> pb.SubmitProofResponse:
        self._accept(request, context)
        job, position = self._submit(request, context)
        return pb.SubmitProofResponse(job_id=job.job_id, queue_position=position)

    def AwaitProof(
        self, request: pb.AwaitProofRequest, context: grpc.ServicerContext
    ) -> pb.AwaitProofResponse:
        self._accept(request, context)
        try:
            found = self.engine.lookup(request.job_id)
        except KeyError:
            context.abort(grpc.StatusCode.NOT_FOUND, f"job not found: {clip(request.job_id)}")
        if isinstance(found, Job):
            return self._wait(found, self.engine.behave.await_timeout_s(request.timeout_ms), context)
        return found

    def Prove(self, request: pb.ProveRequest, context: grpc.ServicerContext) -> pb.ProveResponse:
        self._accept(request, context)
        if not request.HasField("submit"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "missing submit field")
        job, _ = self._submit(request.submit, context)
        result = pb.AwaitProofResponse()
        result.CopyFrom(self._wait(job, None, context))
        result.job_id = self.engine.behave.prove_job_id(request.submit.request_id, job)
        return pb.ProveResponse(result=result)

    def CancelProof(
        self, request: pb.CancelProofRequest, context: grpc.ServicerContext
    ) -> pb.CancelProofResponse:
        self._accept(request, context)
        return pb.CancelProofResponse(was_running=self.engine.behave.cancel(self.engine, request.job_id))

    def GetStatus(self, request: pb.GetStatusRequest, context: grpc.ServicerContext) -> pb.GetStatusResponse:
        return self.engine.behave.status(self.engine)

    def GetMetrics(
        self, request: pb.GetMetricsRequest, context: grpc.ServicerContext
    ) -> pb.GetMetricsResponse:
        return pb.GetMetricsResponse(prometheus_text=metrics.render(self.engine))

    def PreloadSRS(
        self, request: pb.PreloadSrsRequest, context: grpc.ServicerContext
    ) -> pb.PreloadSrsResponse:
        self._accept(request, context)
        circuit = clip(request.circuit_id)
        try:
            already, seconds = self.engine.preload(request.circuit_id)
        except KeyError:
            context.abort(grpc.StatusCode.INTERNAL, f"unknown circuit ID: {circuit}")
        except Exception as exc:
            log.exception("PreloadSRS %s failed", circuit)
            context.abort(grpc.StatusCode.INTERNAL, f"failed to load SRS for {circuit}: {exc}")
        return pb.PreloadSrsResponse(
            already_loaded=already, load_time_ms=0 if already else round(seconds * 1000)
        )

    def EvictSRS(self, request: pb.EvictSrsRequest, context: grpc.ServicerContext) -> pb.EvictSrsResponse:
        self._accept(request, context)
        try:
            was_loaded, freed = self.engine.behave.evict(self.engine, request.circuit_id)
        except KeyError:
            was_loaded, freed = False, 0  # cuzk's EvictSRS never errors
        return pb.EvictSrsResponse(was_loaded=was_loaded, freed_bytes=freed)


def bind_target(listen: str) -> ListenTarget:
    """Check a cuzk listen address and prepare its socket: stale socket removed, parent made.

    Like cuzk-daemon: ``unix://<path>`` or a literal ``IP:port``; hostnames are rejected.
    """
    bind = parse_listen(listen)
    if bind.socket_path is not None:
        bind.socket_path.parent.mkdir(parents=True, exist_ok=True)
        if bind.socket_path.is_socket():
            bind.socket_path.unlink()
    return bind


def serve(engine: Engine, listen: str, max_workers: int = 64) -> tuple[grpc.Server, str]:
    """Bind and start the gRPC server; returns it and the address it really serves on."""
    bind = bind_target(listen)
    target, socket_path = bind.target, bind.socket_path
    limit = engine.behave.transport_limit
    options: list[tuple[str, Any]] = [
        ("grpc.max_receive_message_length", limit),
        ("grpc.max_send_message_length", limit),
        ("grpc.so_reuseport", 0),
    ]
    stop = engine.config.faults.stop_on_rpc
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers, thread_name_prefix="ref-grpc"),
        options=options,
        interceptors=[faults.StopOnRpc(stop)] if stop else None,
    )
    pb_grpc.add_ProvingEngineServicer_to_server(ProvingEngineServicer(engine), server)  # type: ignore[no-untyped-call]
    try:
        port = server.add_insecure_port(target)
    except RuntimeError as exc:
        raise OSError(f"cannot listen on {listen}: {exc} (is the address in use?)") from exc
    server.start()
    if socket_path is not None:
        os.chmod(socket_path, 0o600)
        return server, f"{UNIX_PREFIX}{socket_path}"
    return server, f"{target.rpartition(':')[0]}:{port}"

"""The ``cuzk.v1.ProvingEngine`` gRPC service of the reference engine.

gRPC codes and messages are cuzk's (INVALID_ARGUMENT "invalid proof_kind: N" and
"missing submit field", NOT_FOUND "job not found: <id>", INTERNAL "unknown circuit ID: X");
where cuzk falls short of the proto (AwaitProof timeouts, CancelProof, EvictSRS, SRS sizes)
the proto's documented intent is implemented instead. Message limits are cuzk's 128 MiB.
"""

from __future__ import annotations

import logging
import os
from concurrent import futures
from typing import Any

import grpc
import pynvml

from ..proto import pb, pb_grpc
from ..wire.addresses import UNIX_PREFIX, ListenTarget, parse_listen
from ..wire.kinds import KINDS
from ..wire.nvml import nvml_query, nvml_session
from . import metrics
from .engine import Engine
from .jobs import RUNNING, Job

__all__ = ["MAX_MESSAGE_BYTES", "ProvingEngineServicer", "bind_target", "gpu_statuses", "serve"]

log = logging.getLogger("cuzk_ref.server")
MAX_MESSAGE_BYTES = 128 * 1024 * 1024
_WAIT_SLICE_S = 1.0  # how often a blocked Await/Prove checks whether its client went away


def gpu_statuses(devices: tuple[int, ...], current: Job | None) -> list[pb.GPUStatus]:
    """GPUs as NVML sees them (none without NVML, never an error).

    The reference engine proves on CPU threads; its one prove worker is shown on the first
    listed GPU so that current_job_id behaves like cuzk's.
    """
    with nvml_session() as why:
        if why:
            return []
        ordinals = devices or tuple(range(nvml_query(pynvml.nvmlDeviceGetCount) or 0))
        out = []
        for i, ordinal in enumerate(ordinals):
            handle = nvml_query(pynvml.nvmlDeviceGetHandleByIndex, ordinal)
            mem = nvml_query(pynvml.nvmlDeviceGetMemoryInfo, handle) if handle is not None else None
            if handle is None or mem is None:
                continue
            name = nvml_query(pynvml.nvmlDeviceGetName, handle) or f"GPU {ordinal}"
            busy = current if i == 0 else None
            out.append(
                pb.GPUStatus(
                    ordinal=ordinal,
                    name=name.decode() if isinstance(name, bytes) else name,
                    vram_total_bytes=mem.total,
                    vram_free_bytes=mem.free,
                    current_job_id=busy.job_id if busy else "",
                    current_proof_kind=busy.kind.status_name if busy else "",
                )
            )
        return out


class ProvingEngineServicer(pb_grpc.ProvingEngineServicer):
    """Maps the 8 RPCs onto the :class:`Engine`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

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
        job, position = self._submit(request, context)
        return pb.SubmitProofResponse(job_id=job.job_id, queue_position=position)

    def AwaitProof(
        self, request: pb.AwaitProofRequest, context: grpc.ServicerContext
    ) -> pb.AwaitProofResponse:
        try:
            found = self.engine.lookup(request.job_id)
        except KeyError as exc:
            context.abort(grpc.StatusCode.NOT_FOUND, exc.args[0])
        if isinstance(found, Job):
            return self._wait(found, request.timeout_ms / 1000 if request.timeout_ms else None, context)
        return found

    def Prove(self, request: pb.ProveRequest, context: grpc.ServicerContext) -> pb.ProveResponse:
        if not request.HasField("submit"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "missing submit field")
        job, _ = self._submit(request.submit, context)
        return pb.ProveResponse(result=self._wait(job, None, context))

    def CancelProof(
        self, request: pb.CancelProofRequest, context: grpc.ServicerContext
    ) -> pb.CancelProofResponse:
        return pb.CancelProofResponse(was_running=self.engine.cancel(request.job_id))

    def GetStatus(self, request: pb.GetStatusRequest, context: grpc.ServicerContext) -> pb.GetStatusResponse:
        engine = self.engine
        jobs = engine.jobs()
        completed, failed, _ = engine.counts()
        running = [j for j in jobs if j.state == RUNNING]
        queued = [j for j in jobs if j.state == "queued"]
        return pb.GetStatusResponse(
            gpus=gpu_statuses(engine.config.gpu_devices, engine.proving),
            loaded_srs=[
                pb.SRSStatus(
                    circuit_id=cid,
                    tier=pb.SRSStatus.HOT,
                    size_bytes=size,
                    ref_count=sum(1 for j in running if j.kind.circuit_id == cid),
                )
                for cid, size in engine.prover.loaded()
            ],
            queues=[
                pb.QueueStatus(
                    proof_kind=kind.status_name,
                    pending=sum(1 for j in queued if j.kind is kind),
                    in_progress=sum(1 for j in running if j.kind is kind),
                )
                for kind in KINDS.values()
            ],
            total_proofs_completed=sum(completed.values()),
            total_proofs_failed=sum(failed.values()),
            uptime_seconds=int(engine.uptime_s()),
        )

    def GetMetrics(
        self, request: pb.GetMetricsRequest, context: grpc.ServicerContext
    ) -> pb.GetMetricsResponse:
        return pb.GetMetricsResponse(prometheus_text=metrics.render(self.engine))

    def PreloadSRS(
        self, request: pb.PreloadSrsRequest, context: grpc.ServicerContext
    ) -> pb.PreloadSrsResponse:
        try:
            already, seconds = self.engine.preload(request.circuit_id)
        except KeyError as exc:
            context.abort(grpc.StatusCode.INTERNAL, exc.args[0])
        except Exception as exc:
            log.exception("PreloadSRS %s failed", request.circuit_id)
            context.abort(grpc.StatusCode.INTERNAL, f"failed to load SRS for {request.circuit_id}: {exc}")
        return pb.PreloadSrsResponse(
            already_loaded=already, load_time_ms=0 if already else round(seconds * 1000)
        )

    def EvictSRS(self, request: pb.EvictSrsRequest, context: grpc.ServicerContext) -> pb.EvictSrsResponse:
        try:
            was_loaded, freed = self.engine.evict(request.circuit_id)
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
    options: list[tuple[str, Any]] = [
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.so_reuseport", 0),
    ]
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers, thread_name_prefix="ref-grpc"), options=options
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

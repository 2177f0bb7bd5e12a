"""The reference engine's behaviours (``[ref] behave``): cuzk as a client sees it, or the proto's intent.

``CuzkBehaviour`` (the default) reproduces what a client can observe of cuzk where cuzk
falls short of its proto, so the plugin's handling of cuzk meets it in tests: AwaitProof
ignores ``timeout_ms``, CancelProof and EvictSRS do nothing, Prove answers ``job_id = ""``
for an empty request id, results are kept by id for ever, GetStatus undercounts, timings
of partitioned proofs are sums over partitions, the PCE is extracted after every start and
never read back, oversized requests get tonic's OUT_OF_RANGE, a SnapDeals batch of two or
more fails, a SIGINT stops the workers but not the server. ``Behaviour`` itself is the
protocol behaviour: timeouts, cancel and evict work, and the result store is bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pynvml

from pytest_cuzk.host.nvml import nvml_query, nvml_session
from pytest_cuzk.proto import pb
from pytest_cuzk.vocab.kinds import GROTH16_PROOF_LEN, KINDS, ProofKindInfo
from pytest_cuzk.vocab.units import MAX_MESSAGE_BYTES

if TYPE_CHECKING:
    from pytest_cuzk.refengine.engine import Engine
    from pytest_cuzk.refengine.jobs import Job, Work

__all__ = ["MAX_MESSAGE_BYTES", "Behaviour", "CuzkBehaviour", "behaviour"]

_KIND_TITLES = {"porep": "PoRep", "snap": "SnapDeals", "wpost": "WindowPoSt", "winning": "WinningPoSt"}


@dataclass(frozen=True)
class Gpu:
    """One GPU as NVML reports it (or cuzk's fallback when there is none)."""

    ordinal: int
    name: str
    vram_total: int = 0
    vram_free: int = 0


def nvml_gpus(devices: tuple[int, ...]) -> list[Gpu]:
    """The configured (else all) GPUs NVML sees; empty without NVML, never an error."""
    with nvml_session() as why:
        if why:
            return []
        out = []
        for ordinal in devices or tuple(range(nvml_query(pynvml.nvmlDeviceGetCount) or 0)):
            handle = nvml_query(pynvml.nvmlDeviceGetHandleByIndex, ordinal)
            mem = nvml_query(pynvml.nvmlDeviceGetMemoryInfo, handle) if handle is not None else None
            if handle is None or mem is None:
                continue
            name = nvml_query(pynvml.nvmlDeviceGetName, handle) or f"GPU {ordinal}"
            name = name.decode() if isinstance(name, bytes) else name
            out.append(Gpu(ordinal, name, mem.total, mem.free))
        return out


def _gpu_status(gpu: Gpu, busy: Job | None) -> pb.GPUStatus:
    return pb.GPUStatus(
        ordinal=gpu.ordinal,
        name=gpu.name,
        vram_total_bytes=gpu.vram_total,
        vram_free_bytes=gpu.vram_free,
        current_job_id=busy.job_id if busy else "",
        current_proof_kind=busy.kind.status_name if busy else "",
    )


class Behaviour:
    """The protocol behaviour (the proto's intent), and the base of cuzk's. One prove worker."""

    name = "protocol"
    reuse_pce = True  # synthesis reads the PCE file back, also after a restart
    keep_results: int | None = 1000  # finished results kept for AwaitProof (oldest dropped first)
    ready_before_bind = False
    signals_stop_cleanly = True  # SIGTERM and SIGINT cancel queued jobs, stop the server, exit 0
    hang_blocks_worker = False  # a hung proof holds the prove worker (a hung GPU)
    transport_limit = MAX_MESSAGE_BYTES  # grpcio's own limit refuses larger messages

    def await_timeout_s(self, timeout_ms: int) -> float | None:
        """How long AwaitProof waits: ``timeout_ms`` (0 = for ever)."""
        return timeout_ms / 1000 if timeout_ms else None

    def prove_job_id(self, request_id: str, job: Job) -> str:
        """The job id a Prove answer carries: the job's own."""
        return job.job_id

    def cancel(self, engine: Engine, job_id: str) -> bool:
        """Cancel a queued job; returns was_running."""
        return engine.cancel_queued(job_id)

    def evict(self, engine: Engine, circuit_id: str) -> tuple[bool, int]:
        """Free a circuit's proving key: (was_loaded, freed_bytes)."""
        return engine.prover.evict(circuit_id)

    def oversize(self, size: int) -> str | None:
        """The OUT_OF_RANGE message for a request of ``size`` bytes, None when accepted."""
        return None

    def synthesized(self, work: Work) -> list[Job]:
        """The jobs of a work item whose circuits are synthesised: all of them."""
        return list(work.jobs)

    def split(self, work: Work, proofs: dict[Job, bytes]) -> dict[Job, bytes] | str:
        """Each job's proof out of one prove pass, or the message every job of it fails with."""
        return proofs

    def self_check_message(self, job: Job, index: int, batched: bool, partition: int) -> str:
        """The FAILED message of a proof that did not verify before it was answered."""
        req = job.request
        if job.kind.name == "porep":
            which = f"batched proof {index}" if batched else "assembled proof"
            where = f"sector={req.sector_number}, miner={req.miner_id}"
            return f"PoRep proof self-check failed: {which} did not verify ({where})"
        return f"{_KIND_TITLES[job.kind.name]} proof self-check failed: partition {partition} did not verify"

    def timings(self, work: Work, job: Job, gpu_s: float, now: float) -> dict[str, float]:
        """Seconds per AwaitProofResponse timing field: measured wall times of this job's pass."""
        return {
            "queue_wait_ms": job.started - job.submitted,
            "srs_load_ms": work.srs_s,
            "synthesis_ms": work.synth_s,
            "gpu_compute_ms": gpu_s,
            "total_ms": now - job.submitted,
        }

    def gpus(self, engine: Engine) -> list[pb.GPUStatus]:
        """GPUs as NVML sees them; the one prove worker shows on the first."""
        found = nvml_gpus(engine.config.gpu_devices)
        return [_gpu_status(g, engine.proving if i == 0 else None) for i, g in enumerate(found)]

    def gpu_workers(self, engine: Engine) -> int:
        return 1

    def running_jobs(self, engine: Engine) -> int:
        """Jobs being synthesised or proved."""
        return sum(1 for j in engine.jobs() if j.state == "running")

    def loaded_srs(self, engine: Engine) -> list[pb.SRSStatus]:
        """Every resident proving key with its size and how many running jobs use it."""
        running = [j for j in engine.jobs() if j.state == "running"]
        return [
            pb.SRSStatus(
                circuit_id=cid,
                tier=pb.SRSStatus.HOT,
                size_bytes=size,
                ref_count=sum(1 for j in running if j.kind.circuit_id == cid),
            )
            for cid, size in engine.prover.loaded()
        ]

    def queues(self, engine: Engine) -> list[pb.QueueStatus]:
        """Every kind, with its queued and running jobs."""
        jobs = engine.jobs()
        return [
            pb.QueueStatus(
                proof_kind=kind.status_name,
                pending=sum(1 for j in jobs if j.kind is kind and j.state == "queued"),
                in_progress=sum(1 for j in jobs if j.kind is kind and j.state == "running"),
            )
            for kind in KINDS.values()
        ]

    def status(self, engine: Engine) -> pb.GetStatusResponse:
        """The GetStatus answer."""
        completed, failed, _ = engine.counts()
        return pb.GetStatusResponse(
            gpus=self.gpus(engine),
            loaded_srs=self.loaded_srs(engine),
            queues=self.queues(engine),
            total_proofs_completed=sum(completed.values()),
            total_proofs_failed=sum(failed.values()),
            uptime_seconds=int(engine.uptime_s()),
        )


class CuzkBehaviour(Behaviour):
    """What a client can observe of cuzk (facts: cuzk-daemon at curio e0294b0f)."""

    name = "cuzk"
    reuse_pce = False  # extracted and written after every start, never loaded back
    keep_results = None  # kept by job id for ever
    ready_before_bind = True
    signals_stop_cleanly = False  # SIGINT stops the workers only (once); SIGTERM kills
    hang_blocks_worker = True
    transport_limit = 4 * MAX_MESSAGE_BYTES  # larger requests reach the handler, which answers as tonic

    def await_timeout_s(self, timeout_ms: int) -> float | None:
        return None  # timeout_ms is ignored: AwaitProof blocks until the job ends

    def prove_job_id(self, request_id: str, job: Job) -> str:
        return request_id  # copied before the engine makes up a UUID: "" for an empty request id

    def cancel(self, engine: Engine, job_id: str) -> bool:
        return False  # "CancelProof (not yet implemented)": the job keeps running

    def evict(self, engine: Engine, circuit_id: str) -> tuple[bool, int]:
        return False, 0

    def oversize(self, size: int) -> str | None:
        if size <= MAX_MESSAGE_BYTES:
            return None
        limit = f"the limit is: {MAX_MESSAGE_BYTES} bytes"
        return f"Error, decoded message length too large: found {size} bytes, {limit}"

    def synthesized(self, work: Work) -> list[Job]:
        if work.jobs[0].kind.name == "snap" and len(work.jobs) > 1:
            return work.jobs[:1]  # cuzk synthesises a SnapDeals batch's first request only
        return list(work.jobs)

    def split(self, work: Work, proofs: dict[Job, bytes]) -> dict[Job, bytes] | str:
        if work.jobs[0].kind.name == "snap" and len(work.jobs) > 1:
            got = sum(len(p) for p in proofs.values())
            return (
                f"proof split failed: proof bytes length mismatch: got {got}, expected 0 "
                f"(0 partitions × {GROTH16_PROOF_LEN} bytes)"
            )
        return proofs

    def timings(self, work: Work, job: Job, gpu_s: float, now: float) -> dict[str, float]:
        """cuzk's: partitioned jobs sum per-partition times, the rest share the pass; SRS load is 0."""
        total = now - job.submitted
        kind: ProofKindInfo = job.kind
        if kind.partitions > 1 and len(work.jobs) == 1:
            # Every partition is proved through the whole pass, so each one's GPU time is the pass.
            synth, gpu, queue = job.synth_s, gpu_s * kind.partitions, work.registered - job.submitted
        else:
            synth, gpu = work.synth_s, gpu_s
            queue = total - synth - gpu
        return {
            "queue_wait_ms": queue,
            "srs_load_ms": 0.0,
            "synthesis_ms": synth,
            "gpu_compute_ms": gpu,
            "total_ms": total,
        }

    def gpus(self, engine: Engine) -> list[pb.GPUStatus]:
        """Each GPU once per worker; ordinal 0 named "GPU 0" when none is found."""
        found = nvml_gpus(engine.config.gpu_devices) or [Gpu(0, "GPU 0")]
        workers = engine.config.gpu_workers_per_device
        return [
            _gpu_status(g, engine.proving if (i, w) == (0, 0) else None)
            for i, g in enumerate(found)
            for w in range(workers)
        ]

    def gpu_workers(self, engine: Engine) -> int:
        return len(self.gpus(engine))

    def running_jobs(self, engine: Engine) -> int:
        return 1 if engine.proving is not None else 0  # workers with a current job

    def loaded_srs(self, engine: Engine) -> list[pb.SRSStatus]:
        """Only what PreloadSRS loaded, never removed; size and ref count 0."""
        return [pb.SRSStatus(circuit_id=cid, tier=pb.SRSStatus.HOT) for cid in engine.preloaded]

    def queues(self, engine: Engine) -> list[pb.QueueStatus]:
        """Only kinds with jobs waiting; in_progress counts the prove worker's job."""
        out = []
        for q in super().queues(engine):
            if q.pending:
                busy = engine.proving is not None and engine.proving.kind.status_name == q.proof_kind
                out.append(pb.QueueStatus(proof_kind=q.proof_kind, pending=q.pending, in_progress=int(busy)))
        return out


def behaviour(name: str) -> Behaviour:
    """The behaviour ``[ref] behave`` names."""
    return CuzkBehaviour() if name == "cuzk" else Behaviour()

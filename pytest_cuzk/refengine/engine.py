"""The reference engine: a dispatcher, synthesis workers and the prove worker around one prover.

Jobs wait in the ``JobQueue`` (``scheduler``). The dispatcher hands them, one job or one batch at
a time, to synthesis workers as soon as one is free; a synthesised job goes to the prove worker,
so that the Python (GIL-bound) synthesis of the next proof overlaps the MSMs (which release the
GIL) of the current one. With ``pipeline.enabled = false`` each job is synthesised and proved
before the next starts. At real speed (``realspeed``) each stage is paced as real cuzk's. Every
proof is verified before it is answered (as cuzk does for PoRep): one that does not verify is
FAILED. What a client observes that differs between cuzk and the proto (timings, SnapDeals
batches, cancel, a hung proof) is asked of the behaviour (``behave``). Jobs and their results
live in a ``JobStore`` (``jobs``), which shares the engine's lock.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import CancelledError
from typing import Any

from pytest_cuzk.proto import pb
from pytest_cuzk.refengine import faults
from pytest_cuzk.refengine.behave import Behaviour, behaviour
from pytest_cuzk.refengine.config import RefConfig
from pytest_cuzk.refengine.gpu import open_gpu
from pytest_cuzk.refengine.jobs import QUEUED, Job, JobStore, Work
from pytest_cuzk.refengine.prover import JobInputError, RefProver
from pytest_cuzk.refengine.realspeed import Pace
from pytest_cuzk.refengine.scheduler import SHUTDOWN_MESSAGE, JobQueue
from pytest_cuzk.vocab.kinds import by_enum

__all__ = ["SHUTDOWN_MESSAGE", "Engine"]

log = logging.getLogger("cuzk_ref.engine")
Status = pb.AwaitProofResponse


class Engine:
    """Queue, dispatcher, synthesis workers and the prove worker around one prover."""

    def __init__(self, config: RefConfig, prover: RefProver) -> None:
        self.config = config
        self.prover = prover
        self.behave: Behaviour = behaviour(config.behave)
        self.started_at = time.monotonic()
        self._lock = threading.Condition()
        self._closed = threading.Event()
        self.store = JobStore(self._lock, self.behave.keep_results)
        self.queue = JobQueue(config, self.store)
        self.preloaded: list[str] = []  # circuit ids PreloadSRS loaded, in order (cuzk lists only these)
        self.pce_resident: set[str] = set()
        self.srs_last_used: dict[str, float] = {}
        self.proving: Job | None = None
        self.pace = Pace.of(config, prover)
        self.synth_active = 0
        concurrency = config.synthesis_concurrency if config.pipeline_enabled else 1
        self._slots = threading.Semaphore(concurrency)
        self._synth_q: queue.SimpleQueue[Work | None] = queue.SimpleQueue()
        self._prove_q: list[Work] = []  # the synthesised work being handed to the prove worker
        self._threads = [threading.Thread(target=self._dispatch_loop, name="ref-dispatcher", daemon=True)]
        self._threads += [
            threading.Thread(target=self._synth_loop, name=f"ref-synth-{i}", daemon=True)
            for i in range(concurrency)
        ]
        if config.pipeline_enabled:
            self._threads.append(threading.Thread(target=self._prove_loop, name="ref-prove-0", daemon=True))

    @classmethod
    def from_config(cls, config: RefConfig) -> Engine:
        """Build the engine around a :class:`RefProver` set up from ``config``, on a GPU where one serves."""
        gpu, why_not = open_gpu(config.gpu_devices, config.gpus_off)
        if gpu is None:
            log.info("proving on the CPU: %s", why_not)
        prover = RefProver(
            config.param_cache,
            preset=config.preset,
            seed=config.seed,
            threads=config.synthesis_threads,
            reuse_pce=behaviour(config.behave).reuse_pce,
            gpu=gpu,
        )
        if gpu is not None:
            log.info("proving on GPU %d: %s", gpu.ordinal, gpu.name)
        return cls(config, prover)

    def start(self) -> None:
        """Start the dispatcher and the workers."""
        for thread in self._threads:
            thread.start()
        mode = "pipelined" if self.config.pipeline_enabled else "sequential"
        workers = sum(1 for t in self._threads if t.name.startswith("ref-synth"))
        what = (mode, workers, self.behave.name)
        log.info("cuzk-ref engine started (%s, %d synthesis worker(s), behaving as %s)", *what)

    # ---- client-facing operations -------------------------------------------------------------

    def submit(self, req: pb.SubmitProofRequest) -> tuple[Job, int]:
        """Queue a proof; returns the job and its queue position. ValueError for a bad proof_kind."""
        try:
            kind = by_enum(req.proof_kind)
        except KeyError:
            raise ValueError(f"invalid proof_kind: {req.proof_kind}") from None
        return self.queue.push(req, kind)

    def lookup(self, job_id: str) -> pb.AwaitProofResponse | Job:
        """The stored result for ``job_id``, else its queued or running job (KeyError: unknown)."""
        return self.store.lookup(job_id)

    def wait(self, job: Job, timeout_s: float | None) -> pb.AwaitProofResponse:
        """Wait for this very job (Prove uses it, so a re-used id gets its own new result)."""
        if not job.done.wait(timeout_s) or job.result is None:
            return pb.AwaitProofResponse(job_id=job.job_id, status=Status.TIMEOUT)
        return job.result

    def cancel_queued(self, job_id: str) -> bool:
        """Cancel a queued job; returns was_running (a running job is left to finish)."""
        with self._lock:
            job = self.store.active.get(job_id)
            if job is None or job.state != QUEUED:
                return job is not None
            self._finish(job, pb.AwaitProofResponse(job_id=job_id, status=Status.CANCELLED))
        log.info("job %s cancelled while queued", job_id)
        return False

    def preload(self, circuit_id: str) -> tuple[bool, float]:
        """Load a circuit's parameters now (trusted setup first if they do not exist yet)."""
        self.srs_last_used[circuit_id] = time.monotonic()
        answer = self.prover.preload(circuit_id)
        self.pace.srs_load(circuit_id)
        with self._lock:
            if circuit_id not in self.preloaded:
                self.preloaded.append(circuit_id)
        return answer

    def halt(self) -> None:
        """Cuzk's SIGINT: no job is started any more; the server keeps taking jobs, which then wait."""
        self.queue.halt()
        log.info("engine workers stopped; new jobs will wait for ever (send SIGTERM to stop the daemon)")

    def shutdown(self) -> None:
        """Stop taking work and cancel queued jobs; a proof being proved is not waited for."""
        self.queue.stop()
        with self._lock:
            queued = self.store.queued()
            log.info("cancelling %d queued job(s) at shutdown", len(queued))
            for job in queued:
                self._finish(
                    job,
                    pb.AwaitProofResponse(
                        job_id=job.job_id, status=Status.CANCELLED, error_message=SHUTDOWN_MESSAGE
                    ),
                )
            self._lock.notify_all()
        self._closed.set()
        for _ in self._threads:
            self._synth_q.put(None)
            self._slots.release()
        self.prover.witness_pool.close()  # a witness under way is cancelled: its job is being cancelled too

    # ---- views for GetStatus, metrics and /status ----------------------------------------------

    def jobs(self) -> list[Job]:
        """Queued and running jobs, plus jobs that finished in the last 30 s (like cuzk's tracker)."""
        return self.store.jobs()

    def counts(self) -> tuple[dict[str, int], dict[str, int], list[tuple[str, float]]]:
        """Copies of completed and failed counts per kind and the last 1000 (kind, seconds)."""
        return self.store.counts()

    def queue_depth(self) -> int:
        """Jobs waiting for a synthesis worker (cuzk's scheduler heap length)."""
        return len(self.store.queued())

    def uptime_s(self) -> float:
        """Seconds since the engine was created."""
        return time.monotonic() - self.started_at

    # ---- dispatcher ---------------------------------------------------------------------------

    def _dispatch_loop(self) -> None:
        while True:
            self._slots.acquire()  # wait for a free synthesis worker: jobs stay in the heap until then
            work = self.queue.next_work()
            if work is None:
                return
            self._synth_q.put(work)

    # ---- synthesis ----------------------------------------------------------------------------

    def _synth_loop(self) -> None:
        while (work := self._synth_q.get()) is not None:
            self._synthesize(work)
            if work.jobs and self.config.pipeline_enabled:
                self._enqueue_prove(work)
            elif work.jobs:
                self._prove(work)
            self._slots.release()

    def _synthesize(self, work: Work) -> None:
        with self._lock:
            self.synth_active += 1
        try:
            todo = self.behave.synthesized(work)
            for job in todo:
                self._guard(work, job, lambda j=job: self._parse(j))
            if work.jobs:
                self._load_params(work)
            work.registered = time.monotonic()
            for job in todo:
                if job in work.jobs:
                    self._guard(work, job, lambda j=job: self._synthesize_job(work, j))
            self.pace.synthesis(work.jobs, work.registered)
            work.synth_s = time.monotonic() - work.registered
            work.synth_s += faults.slow_down(self.config.faults, work.synth_s)
        finally:
            with self._lock:
                self.synth_active -= 1

    def _load_params(self, work: Work) -> None:
        circuit = work.jobs[0].kind.circuit_id
        try:
            self.prover.ensure_params(circuit)
            work.srs_s = self.prover.ensure_loaded(circuit)
        except Exception as exc:
            log.exception("loading parameters for %s failed", circuit)
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            for job in list(work.jobs):
                self._fail(work, job, f"synthesis failed: cannot load parameters for {circuit}: {why}")
        self.srs_last_used[circuit] = time.monotonic()

    def _parse(self, job: Job) -> None:
        job.parsed = self.prover.parse(job.kind, job.request)
        job.parts = [
            {"index": i, "state": "pending", "synth_ms": None, "gpu_ms": None}
            for i in range(job.parsed.partitions)
        ]

    def _synthesize_job(self, work: Work, job: Job) -> None:
        assert job.parsed is not None, "parsed before synthesis"
        self.prover.prefetch(job.parsed)  # a large circuit's partitions side by side, as cuzk's rayon pool
        parts = []
        try:
            for part in job.parts:
                part["state"] = "synthesizing"
                synthesized = self.prover.synthesize(job.parsed, part["index"])
                part["state"], part["synth_ms"] = "synth_done", round(synthesized.synth_s * 1000)
                job.synth_s += synthesized.synth_s
                parts.append(synthesized)
        finally:  # a failed partition: the workers need not finish the job's others
            for pending in job.parsed.witnesses.values():
                pending.cancel()
        self.pce_resident.add(job.kind.name)  # used, or extracted by this synthesis: in memory either way
        used = (
            "yes" if all(p.used_pce for p in parts) else "partly" if any(p.used_pce for p in parts) else "no"
        )
        log.info("job %s synthesized (%d partition(s), PCE used: %s)", job.job_id, len(parts), used)
        work.parts += parts
        work.owners += [job] * len(parts)

    def _guard(self, work: Work, job: Job, step: Any) -> None:
        """Run one job's step; a failure fails that job only (its batch mates carry on)."""
        try:
            step()
        except JobInputError as exc:
            self._fail(work, job, str(exc))
        except CancelledError:  # the engine closed the worker pool under it
            self._fail(work, job, SHUTDOWN_MESSAGE)
        except OSError as exc:  # the param cache: a full disk, a vanished directory
            log.exception("job %s: synthesis could not write or read a file", job.job_id)
            self._fail(work, job, f"synthesis failed: {exc.strerror or exc}")
        except Exception as exc:
            log.exception("job %s: synthesis raised", job.job_id)
            part = next((p["index"] for p in job.parts if p["state"] == "synthesizing"), None)
            where = f"partition {part} " if job.kind.partitions > 1 and part is not None else ""
            self._fail(work, job, f"{where}synthesis panicked: {exc}")

    # ---- prove --------------------------------------------------------------------------------

    def _enqueue_prove(self, work: Work) -> None:
        """Hand over to the prove worker and wait until it takes the work.

        Holding the synthesis slot until then keeps the look-ahead to one synthesised job,
        so everything behind it stays in the heap where priorities still order it.
        """
        with self._lock:
            while self._prove_q and not self.queue.stopping:
                self._lock.wait()
            self._prove_q.append(work)
            self._lock.notify_all()
            while work in self._prove_q and not self.queue.stopping:
                self._lock.wait()

    def _prove_loop(self) -> None:
        while True:
            with self._lock:
                while not self._prove_q and not self.queue.stopping:
                    self._lock.wait()
                if self.queue.stopping:
                    return
                work = self._prove_q.pop(0)
                self._lock.notify_all()
            self._prove(work)

    def _prove(self, work: Work) -> None:
        hang = self.config.faults.hang_at_proof
        for job in work.jobs:
            faults.maybe_die(self.config.faults, job.proof_no, job.job_id)
            for part in job.parts:
                part["state"] = "gpu"
        if not work.jobs:
            return
        self.proving = work.jobs[0]
        if self.behave.hang_blocks_worker and any(j.proof_no == hang for j in work.jobs):
            log.warning("fault: proof %d hangs the prove worker (as a hung GPU would)", hang)
            self._closed.wait()
            return
        t0 = time.monotonic()
        try:
            proofs = self.prover.prove(work.parts) if work.parts else []
            self.pace.gpu(work.jobs, t0)
            faults.slow_down(self.config.faults, time.monotonic() - t0)
        except Exception as exc:
            log.exception("prove stage raised")
            for job in list(work.jobs):
                self._fail(work, job, f"GPU task panicked: {exc}")
            return
        finally:
            self.proving = None
        gpu_s = time.monotonic() - t0
        pieces: dict[Job, bytes] = {}
        for owner, proof in zip(work.owners, proofs, strict=True):
            pieces[owner] = pieces.get(owner, b"") + proof
        self._deliver(work, pieces, gpu_s)

    def _deliver(self, work: Work, pieces: dict[Job, bytes], gpu_s: float) -> None:
        """Split the pass's proofs per job, verify each, apply the proof faults, answer."""
        split = self.behave.split(work, pieces)
        if isinstance(split, str):
            for job in list(work.jobs):
                self._fail(work, job, split)
            return
        checked = []
        for index, job in enumerate(list(work.jobs)):
            bad = self._self_check(job, split[job])
            if bad is not None:
                self._fail(work, job, self.behave.self_check_message(job, index, work.size > 1, bad))
            else:
                checked.append((job, faults.after_self_check(self.config.faults, job.proof_no, split[job])))
        now = time.monotonic()
        for job, proof in faults.swap_batch(self.config.faults, checked):
            for part in job.parts:
                part["state"], part["gpu_ms"] = "done", round(gpu_s * 1000)
            if job.proof_no == self.config.faults.hang_at_proof:
                log.warning("fault: proof %d (job %s) will never finish", job.proof_no, job.job_id)
                continue
            result = pb.AwaitProofResponse(job_id=job.job_id, status=Status.COMPLETED, proof=proof)
            for name, seconds in self.behave.timings(work, job, gpu_s, now).items():
                setattr(result, name, _ms(seconds))
            self.pace.delivered(job, result)
            self._finish(job, result)
            log.info("job %s completed (%s) in %d ms", job.job_id, job.kind.status_name, result.total_ms)

    def _self_check(self, job: Job, proof: bytes) -> int | None:
        """The first partition whose proof does not verify, None when all do.

        ``slow_factor`` stretches it as the other stages: a planted 10% is 10% of a proof's time.
        """
        t0 = time.monotonic()
        try:
            assert job.parsed is not None, "parsed before proving"
            return self.prover.first_bad_partition(job.parsed, proof)
        except Exception:
            log.exception("job %s: self-check raised", job.job_id)
            return 0
        finally:
            faults.slow_down(self.config.faults, time.monotonic() - t0)

    # ---- results ------------------------------------------------------------------------------

    def _fail(self, work: Work, job: Job, message: str) -> None:
        if job in work.jobs:
            work.jobs.remove(job)
        kept = [(p, o) for p, o in zip(work.parts, work.owners, strict=True) if o is not job]
        work.parts, work.owners = [p for p, _ in kept], [o for _, o in kept]
        for part in job.parts:
            if part["state"] != "done":
                part["state"] = "failed"
        log.warning("job %s failed: %s", job.job_id, message)
        self._finish(
            job, pb.AwaitProofResponse(job_id=job.job_id, status=Status.FAILED, error_message=message)
        )

    def _finish(self, job: Job, result: pb.AwaitProofResponse) -> None:
        self.store.finish(job, result)


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))

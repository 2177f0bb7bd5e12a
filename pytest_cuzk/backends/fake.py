"""An in-process stand-in daemon, for tests of the plugin (and of your own sinks and hooks).

``FakeDaemon`` serves ``cuzk.v1`` over real gRPC on a unix socket from threads of the test
process, so whole pytest runs (``pytester.runpytest``) take a second instead of spawning
engines. Its proofs are well-formed (valid compressed points) and tied to their request,
so ``FakeProfile``'s verifier tells a proof for this request from any other. What it does
is scripted per kind with ``FakeBehaviour``: delay, fail, hang, answer malformed or wrong
proofs, or die after N proofs.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from collections.abc import Sequence
from concurrent import futures
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import grpc
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from pytest_cuzk.backends.protocol import (
    BackendState,
    ColdStart,
    DaemonLog,
    EngineProfile,
    Mode,
    PceRule,
    Prepare,
    Verifier,
    no_lock,
)
from pytest_cuzk.config.slo import Slo
from pytest_cuzk.core.errors import DaemonExited
from pytest_cuzk.proto import pb, pb_grpc
from pytest_cuzk.results.rows import HostRecord
from pytest_cuzk.vocab.daemonconfig import DaemonConfig
from pytest_cuzk.vocab.kinds import GROTH16_PROOF_LEN, KINDS, ProofKindInfo, UnknownKind, by_circuit, by_enum
from pytest_cuzk.vocab.vanilla import write_vanilla_proofs

__all__ = ["FakeBehaviour", "FakeDaemon", "FakeProfile", "fake_proof"]

Status = pb.AwaitProofResponse
STOP_WAIT_S = 5.0  # how long a restart waits for the stopped server to let go of the socket path


@dataclass
class FakeBehaviour:
    """What the fake does with a proof of one kind."""

    delay_s: float = 0.0
    fail: str = ""  # answer FAILED with this message
    hang: bool = False  # never finish
    freeze: bool = False  # the whole daemon stops answering, like a SIGSTOPped process
    malformed: bool = False  # one byte short
    wrong_proof: bool = False  # well-formed, but the proof of another request
    replay_of: str = ""  # answer with the very proof given for that earlier job
    answer_as: str = ""  # answer with this job id instead of the request's


def fake_proof(request_id: str, kind: ProofKindInfo) -> bytes:
    """The fake's proof of ``request_id``: per partition A = h(id)·G1, B = G2, C = G1."""
    h = int.from_bytes(hashlib.sha256(request_id.encode()).digest(), "big") >> 8
    a = (G1Point() * Scalar(h + 1)).to_compressed_bytes()
    one = a + G2Point().to_compressed_bytes() + G1Point().to_compressed_bytes()
    assert len(one) == GROTH16_PROOF_LEN
    return one * kind.partitions


class _Engine(pb_grpc.ProvingEngineServicer):
    """The fake's service: jobs finish on timer threads, counters move like cuzk's."""

    def __init__(self, daemon: FakeDaemon) -> None:
        self.daemon = daemon
        self.lock = threading.Condition()
        self.results: dict[str, pb.AwaitProofResponse] = {}
        self.completed: dict[str, int] = {}
        self.failed: dict[str, int] = {}
        self.started = time.monotonic()

    def _finish(self, req: pb.SubmitProofRequest, kind: ProofKindInfo, t0: float) -> None:
        rule = self.daemon.behaviour.get(kind.name, FakeBehaviour())
        if rule.freeze:
            self.daemon.frozen = True
        if rule.hang or rule.freeze:
            return
        time.sleep(rule.delay_s)
        total = round((time.monotonic() - t0) * 1000)
        if rule.fail:
            result = pb.AwaitProofResponse(
                job_id=req.request_id, status=Status.FAILED, error_message=rule.fail
            )
        else:
            proved = rule.replay_of or req.request_id + ("-other" if rule.wrong_proof else "")
            proof = fake_proof(proved, kind)
            proof = proof[:-1] if rule.malformed else proof
            result = pb.AwaitProofResponse(
                job_id=rule.answer_as or req.request_id, status=Status.COMPLETED, proof=proof,
                synthesis_ms=total // 2, gpu_compute_ms=total // 2, total_ms=total,
            )  # fmt: skip
        with self.lock:
            self.results[req.request_id] = result
            counts = self.completed if result.status == Status.COMPLETED else self.failed
            counts[kind.metric_label] = counts.get(kind.metric_label, 0) + 1
            self.lock.notify_all()
        self.daemon.proof_done()

    def _thaw(self, context: grpc.ServicerContext) -> None:
        """A frozen fake answers nothing, as a stopped process would."""
        while self.daemon.frozen and context.is_active():
            time.sleep(0.05)

    def SubmitProof(
        self, request: pb.SubmitProofRequest, context: grpc.ServicerContext
    ) -> pb.SubmitProofResponse:
        self._thaw(context)
        try:
            kind = by_enum(request.proof_kind)
        except UnknownKind as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        threading.Thread(target=self._finish, args=(request, kind, time.monotonic()), daemon=True).start()
        return pb.SubmitProofResponse(job_id=request.request_id)

    def AwaitProof(
        self, request: pb.AwaitProofRequest, context: grpc.ServicerContext
    ) -> pb.AwaitProofResponse:
        self._thaw(context)
        with self.lock:  # like cuzk, timeout_ms is ignored: only the client's deadline ends the wait
            while request.job_id not in self.results and context.is_active():
                self.lock.wait(0.2)
            return self.results.get(request.job_id, pb.AwaitProofResponse(job_id=request.job_id))

    def Prove(self, request: pb.ProveRequest, context: grpc.ServicerContext) -> pb.ProveResponse:
        self.SubmitProof(request.submit, context)
        await_req = pb.AwaitProofRequest(job_id=request.submit.request_id)
        return pb.ProveResponse(result=self.AwaitProof(await_req, context))

    def CancelProof(
        self, request: pb.CancelProofRequest, context: grpc.ServicerContext
    ) -> pb.CancelProofResponse:
        return pb.CancelProofResponse(was_running=False)

    def GetStatus(self, request: pb.GetStatusRequest, context: grpc.ServicerContext) -> pb.GetStatusResponse:
        self._thaw(context)
        with self.lock:
            return pb.GetStatusResponse(
                total_proofs_completed=sum(self.completed.values()),
                total_proofs_failed=sum(self.failed.values()),
                uptime_seconds=int(time.monotonic() - self.started),
            )

    def GetMetrics(
        self, request: pb.GetMetricsRequest, context: grpc.ServicerContext
    ) -> pb.GetMetricsResponse:
        with self.lock:
            lines = [f"cuzk_proofs_completed_total {sum(self.completed.values())}"]
            lines += [
                f'cuzk_proofs_completed{{proof_kind="{k}"}} {v}' for k, v in sorted(self.completed.items())
            ]
            lines += [f"cuzk_proofs_failed_total {sum(self.failed.values())}"]
            lines += [f'cuzk_proofs_failed{{proof_kind="{k}"}} {v}' for k, v in sorted(self.failed.items())]
        return pb.GetMetricsResponse(prometheus_text="\n".join(lines) + "\n")

    def PreloadSRS(
        self, request: pb.PreloadSrsRequest, context: grpc.ServicerContext
    ) -> pb.PreloadSrsResponse:
        try:
            by_circuit(request.circuit_id)
        except UnknownKind as exc:
            context.abort(grpc.StatusCode.INTERNAL, str(exc))
        return pb.PreloadSrsResponse(already_loaded=False, load_time_ms=1)


# The real C1 wrapper's shape, with nothing inside worth proving: the fake daemon proves nothing.
_PHASE1 = {"registered_proof": "StackedDrg32GiBV1_1", "vanilla_proofs": {"StackedDrg32GiBV1": [[{}]]},
           **{k: [1] * 32 for k in ("comm_r", "comm_d", "replica_id", "seed", "ticket")}}  # fmt: skip
FAKE_C1 = {"SectorNum": 1, "Phase1Out": base64.b64encode(json.dumps(_PHASE1).encode()).decode(),
           "SectorSize": 34359738368}  # fmt: skip


class FakeProfile:
    """Tiny data files for every kind, and a verifier that knows which request a proof is for."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    def manifest(self) -> Path:
        path = self.data_dir / "manifest.toml"
        if not path.exists():
            self.data_dir.mkdir(parents=True, exist_ok=True)
            (self.data_dir / "c1.json").write_text(json.dumps(FAKE_C1))
            for name in ("snap", "wpost", "winning"):
                write_vanilla_proofs(self.data_dir / f"{name}.json", [b"fake vanilla proof " * 3])
            tables = [f'[kinds.{k}]\nfile = "{"c1" if k == "porep" else k}.json"\n' for k in KINDS]
            path.write_text("\n".join(tables))
        return path

    def verifier(self, kind: ProofKindInfo) -> Verifier | None:
        def verify(request: pb.SubmitProofRequest, proof: bytes) -> bool:
            return proof == fake_proof(request.request_id, kind)

        return verify

    def identity(self) -> str:
        return "fake daemon"

    def build(self) -> str:
        return self.identity()

    def config(self) -> DaemonConfig | None:
        return None

    def preset(self) -> str | None:
        return None

    def default_param_cache(self) -> Path | None:
        return None

    def known_issue(self, kind: str, batch_size: int, errors: Sequence[str]) -> str | None:
        return None

    def slo(self, kind: ProofKindInfo, under: ProofKindInfo | None) -> Slo:
        """Its proofs take the delay they are given, and nothing queues: a fixed bound."""
        return Slo(seconds=5.0, source="the fake daemon's default")


class FakeDaemon:
    """An in-process daemon; ``die_after`` stops its server after that many proofs, as a crash would."""

    mode: Mode = "fake"
    owned = True

    def __init__(
        self,
        label: str,
        workdir: Path,
        behaviour: dict[str, FakeBehaviour] | None = None,
        die_after: int | None = None,
    ) -> None:
        self.label = label
        self.workdir = workdir
        self.behaviour = behaviour or {}
        self.die_after = die_after
        self.state = BackendState()
        self.proofs = 0
        self.frozen = False  # like a SIGSTOPped daemon: nothing answers, nothing dies
        self.starts: list[int] = []  # batch size of each start
        self._server: grpc.Server | None = None
        self._stopped: threading.Event | None = None  # set once a stopped server has let go of its socket
        self._batch: int | None = None
        self._counting = threading.Lock()  # proofs finish on the server's threads

    @property
    def address(self) -> str:
        return f"unix://{self.workdir / 'fake.sock'}" if self._server is not None else ""

    @property
    def pid(self) -> int | None:
        return None

    def unsampled(self) -> str | None:
        return "in-process fake daemon"

    @property
    def status_page(self) -> str | None:
        return None

    @property
    def local(self) -> bool:
        return True

    @property
    def log(self) -> DaemonLog | None:
        return None

    def profile(self) -> EngineProfile:
        return FakeProfile(self.workdir / "data")

    def pce_rule(self) -> PceRule | None:
        return None

    def bring_up(self, batch_size: int, kinds: Sequence[ProofKindInfo], prepare: Prepare) -> None:
        if self.state.out_of_service:
            raise DaemonExited(f"daemon {self.label}: {self.state.out_of_service}")
        if self._server is not None and self._batch == batch_size:
            return
        self.stop()
        if self._stopped is not None:  # else the old server's shutdown may unlink the new one's socket
            self._stopped.wait(STOP_WAIT_S)
        server = grpc.server(futures.ThreadPoolExecutor(32, thread_name_prefix="fake-daemon"))
        pb_grpc.add_ProvingEngineServicer_to_server(_Engine(self), server)  # type: ignore[no-untyped-call]
        self.workdir.mkdir(parents=True, exist_ok=True)
        server.add_insecure_port(f"unix:{self.workdir / 'fake.sock'}")
        server.start()
        self._server, self._batch = server, batch_size
        self.starts.append(batch_size)
        self.state.ready_kinds = set()
        self.state.cold.append(ColdStart(self.label, batch_size, start_s=0.001))

    def proof_done(self) -> None:
        """Count a finished proof; the ``die_after``-th stops the server, and none counts after it."""
        with self._counting:
            if self._server is None:
                return  # finished as the server died: a crashed daemon proves no more
            self.proofs += 1
            if self.die_after is not None and self.proofs >= self.die_after:
                self.stop()

    def alive(self) -> bool:
        return self._server is not None

    def gone(self, grace_s: float = 1.0) -> bool:
        return self._server is None

    def death_message(self, rss_peak: int | None = None) -> str:
        return f"fake daemon stopped after {self.proofs} proofs (die_after={self.die_after})"

    def take_out(self, reason: str) -> None:
        self.stop()
        self.state.restarts.append(f"restarted: {reason}")

    def lost(self, reason: str) -> None:
        """A restart on the next bring_up, as for a spawned daemon."""

    def stuck(self) -> str | None:
        return "the fake is frozen" if self.frozen else None

    def health(self, timeout_s: float) -> str | None:
        return f"no answer to GetStatus for {timeout_s:g} s (frozen fake)" if self.frozen else None

    def hung(self, reason: str) -> None:
        self.frozen = False
        self.stop()
        self.state.restarts.append(f"restarted: {reason}")

    def cache_lock(self, kind: ProofKindInfo) -> AbstractContextManager[object]:
        return no_lock()

    def host_record(self) -> HostRecord:
        return HostRecord.of(
            gpu_models=[], gpu_count=0, vram_total_bytes=0, cpu_model="fake", cpu_cores=1, ram_bytes=0,
            hostname=self.label,
        )  # fmt: skip

    def stop(self) -> None:
        server, self._server = self._server, None  # gone from the moment its socket may close
        if server is not None:
            self._stopped = server.stop(0)  # not waited for here: a proof's own handler may be stopping it

"""Malformed requests against a ``cuzk-ref`` process, for the fuzz smoke test and the fuzz benchmark.

Each request has one thing wrong with a valid one: wrong enums, wrong lengths, random or
truncated vanilla data, fields that are not field elements. Only mutations a kind really
reads are made (a PoRep ignores ``randomness``; a proof it would complete costs a second),
so a run is thousands of requests a minute. Every reply must be a clean gRPC error or a
FAILED job with a message; a reply that is neither, or a dead daemon, counts as a crash.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import grpc
import psutil

from pytest_cuzk.daemon.proofcheck import check_proof
from pytest_cuzk.proto import pb, pb_grpc
from pytest_cuzk.vocab.kinds import KINDS

CLEAN_CODES = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.OUT_OF_RANGE,
}
# cuzk's own message for an empty PoSt vanilla list (a Rust panic it catches), reproduced on purpose.
EMPTY_VANILLA = "synthesis panicked: index out of bounds: the len is 0 but the index is 0"
# What each kind reads (cuzk ignores the rest): mutations of other fields would just prove.
_READS = {
    "porep": ("kind", "c1"),
    "snap": ("kind", "registered", "vanilla", "comm"),
    "wpost": ("kind", "registered", "randomness", "vanilla"),
    "winning": ("kind", "registered", "randomness", "vanilla"),
}


def mutations(
    rng: random.Random, kind: str, valid: pb.SubmitProofRequest
) -> Iterator[tuple[str, pb.SubmitProofRequest]]:
    """(label, request) pairs, each with one thing wrong with ``valid``, for ever."""
    while True:
        req = pb.SubmitProofRequest()
        req.CopyFrom(valid)
        req.request_id = f"fuzz-{rng.getrandbits(64):x}"
        what = rng.choice(_READS[kind])
        if what == "kind":
            req.proof_kind = rng.choice([0, 5, 99, 2**31 - 1])
            yield "bad proof_kind", req
        elif what == "registered":
            req.registered_proof = rng.choice([1, 7, 15, 99, 2**64 - 1])
            yield "bad registered_proof", req
        elif what == "randomness":
            req.randomness = rng.choice([rng.randbytes(rng.choice([0, 1, 31, 33, 64])), b"\xff" * 32])
            yield "bad randomness", req
        elif what == "c1":
            req.vanilla_proof = valid.vanilla_proof[: rng.randrange(len(valid.vanilla_proof))]
            yield "truncated C1", req
        elif what == "vanilla":
            del req.vanilla_proofs[:]
            if rng.random() < 0.5:
                req.vanilla_proofs.extend(
                    rng.randbytes(rng.randint(0, 600)) for _ in range(rng.randint(0, 20))
                )
                yield "random vanilla proofs", req
            else:
                req.vanilla_proofs.extend(p[: rng.randrange(len(p))] for p in valid.vanilla_proofs)
                yield "truncated vanilla proofs", req
        else:
            name = rng.choice(["comm_r_old", "comm_r_new", "comm_d_new"])
            setattr(req, name, rng.choice([rng.randbytes(rng.choice([0, 31, 33, 4096])), b"\xff" * 32]))
            yield f"bad {name}", req


@dataclass
class FuzzReport:
    """What a fuzz run sent and got."""

    requests: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    crashes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    rss_start: int = 0
    rss_end: int = 0

    def line(self) -> str:
        mib = 2**20
        rate = self.requests / self.seconds if self.seconds else 0.0
        rss = f"RSS {self.rss_start / mib:.1f} -> {self.rss_end / mib:.1f} MiB"
        return (
            f"{self.requests} requests in {self.seconds:.1f} s ({rate:.0f}/s); "
            f"statuses {dict(self.outcomes)}; crashes {len(self.crashes)}; {rss}"
        )


def _one(stub: pb_grpc.ProvingEngineStub, kind: str, label: str, req: pb.SubmitProofRequest) -> str:
    """The outcome's name; AssertionError with the label for a crash."""
    try:
        result = stub.Prove(pb.ProveRequest(submit=req), timeout=120).result
    except grpc.RpcError as exc:
        assert exc.code() in CLEAN_CODES and exc.details(), f"{label}: {exc.code()} {exc.details()!r}"
        return f"rpc {exc.code().name}"
    if result.status == pb.AwaitProofResponse.COMPLETED:
        check_proof(result.proof, KINDS[kind])  # a harmless mutation still proves correctly
        return "COMPLETED"
    assert result.status == pb.AwaitProofResponse.FAILED, f"{label}: status {result.status}"
    assert result.error_message, f"{label}: FAILED without a message"
    panic = "panicked" in result.error_message and result.error_message != EMPTY_VANILLA
    assert not panic, f"{label}: {result.error_message}"
    return "FAILED"


def fuzz(
    address: str,
    pid: int,
    valid: dict[str, pb.SubmitProofRequest],
    *,
    count: int,
    seconds: float,
    seed: int = 20261129,
    clients: int = 4,
) -> FuzzReport:
    """Send up to ``count`` malformed requests from ``clients`` threads, for at most ``seconds``."""
    rng = random.Random(seed)
    sources = {k: mutations(rng, k, v) for k, v in valid.items()}
    process = psutil.Process(pid)
    report = FuzzReport(rss_start=process.memory_info().rss)
    options = [("grpc.max_send_message_length", 256 << 20), ("grpc.max_receive_message_length", 256 << 20)]
    start = time.monotonic()
    with grpc.insecure_channel(address, options=options) as channel, ThreadPoolExecutor(clients) as pool:
        stub = pb_grpc.ProvingEngineStub(channel)
        while report.requests < count and time.monotonic() - start < seconds and not report.crashes:
            batch = []
            for _ in range(min(clients * 8, count - report.requests)):
                kind = rng.choice(list(valid))
                label, req = next(sources[kind])
                batch.append((label, pool.submit(_one, stub, kind, label, req)))
            for _label, future in batch:
                report.requests += 1
                try:
                    report.outcomes[future.result()] += 1
                except AssertionError as exc:
                    report.crashes.append(str(exc))
            if not process.is_running() or process.status() == psutil.STATUS_ZOMBIE:
                report.crashes.append(f"the daemon died after {report.requests} requests")
    report.seconds = time.monotonic() - start
    if process.is_running():
        report.rss_end = process.memory_info().rss
    return report

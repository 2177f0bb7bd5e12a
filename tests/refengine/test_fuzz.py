"""A bounded fuzz run of malformed requests against a cuzk-ref subprocess.

Random and truncated vanilla data, wrong lengths, wrong enums and huge fields:
every reply must be a clean gRPC error or a FAILED job with a message, the daemon
must never crash, and a valid proof must still succeed afterwards. The run is
bounded by count and time, and prints its counts.
"""

from __future__ import annotations

import random
import time
from collections import Counter

import grpc
from engine_support import connect, write_config

from pytest_cuzk.proofcheck import check_proof
from pytest_cuzk.proto import pb
from pytest_cuzk.wire.kinds import KINDS

MAX_CASES = 60
MAX_SECONDS = 25.0
CLEAN_CODES = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}


def _mutations(rng: random.Random, valid: pb.SubmitProofRequest):
    """Yield (label, request) pairs, each one thing wrong with a valid request."""

    def copy() -> pb.SubmitProofRequest:
        req = pb.SubmitProofRequest()
        req.CopyFrom(valid)
        req.request_id = f"fuzz-{rng.getrandbits(64):x}"
        return req

    while True:
        req = copy()
        choice = rng.randrange(9)
        if choice == 0:
            req.proof_kind = rng.choice([0, 5, 99, 2**31 - 1])
            yield "bad proof_kind", req
        elif choice == 1:
            req.registered_proof = rng.choice([0, 1, 7, 15, 99, 2**64 - 1])
            yield "bad registered_proof", req
        elif choice == 2:
            req.randomness = rng.randbytes(rng.choice([0, 1, 31, 33, 64]))
            yield "bad randomness length", req
        elif choice == 3:
            req.randomness = b"\xff" * 32
            yield "randomness not a field element", req
        elif choice == 4 and valid.vanilla_proof:
            blob = bytearray(valid.vanilla_proof)
            cut = rng.randrange(len(blob))
            req.vanilla_proof = bytes(blob[:cut])
            yield "truncated C1", req
        elif choice == 5 and valid.vanilla_proof:
            blob = bytearray(valid.vanilla_proof)
            for _ in range(rng.randint(1, 20)):
                blob[rng.randrange(len(blob))] = rng.randrange(256)
            req.vanilla_proof = bytes(blob)
            yield "corrupted C1", req
        elif choice == 6 and valid.vanilla_proofs:
            del req.vanilla_proofs[:]
            req.vanilla_proofs.extend(rng.randbytes(rng.randint(0, 600)) for _ in range(rng.randint(0, 20)))
            yield "random vanilla proofs", req
        elif choice == 7 and valid.vanilla_proofs:
            del req.vanilla_proofs[:]
            req.vanilla_proofs.extend(p[: rng.randrange(len(p) + 1)] for p in valid.vanilla_proofs)
            yield "truncated vanilla proofs", req
        elif choice == 8:
            field = rng.choice(["comm_r_old", "comm_r_new", "comm_d_new"])
            setattr(req, field, rng.randbytes(rng.choice([0, 31, 33, 4096])))
            yield f"bad {field}", req


def test_fuzzed_requests_get_clean_errors_and_the_daemon_keeps_proving(spawn, ref_data, ref_params, tmp_path):
    config = write_config(tmp_path / "ref.toml", f'[srs]\nparam_cache = "{ref_params}"\n')
    daemon = spawn("-c", str(config), "-l", "127.0.0.1:0")
    channel, stub = connect(daemon.wait_ready())
    rng = random.Random(20261129)
    outcomes: Counter[str] = Counter()
    start = time.monotonic()
    sources = {k: _mutations(rng, ref_data.request(k)) for k in KINDS}
    cases = 0
    try:
        # A huge field: past the server's 128 MiB limit, refused at the transport.
        huge = ref_data.request("winning", request_id="fuzz-huge", randomness=b"\0" * (129 * 2**20))
        try:
            stub.SubmitProof(huge, timeout=60)
            outcomes["huge accepted"] += 1
        except grpc.RpcError as exc:
            assert exc.code() in CLEAN_CODES, (exc.code(), exc.details())
            outcomes[f"rpc {exc.code().name}"] += 1
        while cases < MAX_CASES and time.monotonic() - start < MAX_SECONDS:
            kind = rng.choice(list(KINDS))
            label, req = next(sources[kind])
            cases += 1
            try:
                result = stub.Prove(pb.ProveRequest(submit=req), timeout=60).result
            except grpc.RpcError as exc:
                assert exc.code() in CLEAN_CODES, f"{label}: {exc.code()} {exc.details()}"
                assert exc.details(), f"{label}: an error without a message"
                outcomes[f"rpc {exc.code().name}"] += 1
                continue
            if result.status == pb.AwaitProofResponse.COMPLETED:
                check_proof(result.proof, KINDS[kind])  # a harmless mutation still proves correctly
                outcomes["completed"] += 1
            else:
                assert result.status == pb.AwaitProofResponse.FAILED, f"{label}: status {result.status}"
                assert result.error_message, f"{label}: FAILED without a message"
                assert "panicked" not in result.error_message, f"{label}: {result.error_message}"
                outcomes["failed cleanly"] += 1
            assert daemon.proc.poll() is None, f"daemon died on {label}:\n{daemon.output[-3000:]}"
        good = stub.Prove(
            pb.ProveRequest(submit=ref_data.request("porep", request_id="after-fuzz")), timeout=120
        )
        assert good.result.status == pb.AwaitProofResponse.COMPLETED, good.result.error_message
        check_proof(good.result.proof, KINDS["porep"])
    finally:
        channel.close()
    print(f"fuzz: {cases} cases in {time.monotonic() - start:.1f}s: {dict(outcomes)}")
    assert daemon.proc.poll() is None
    assert daemon.stop() == 0

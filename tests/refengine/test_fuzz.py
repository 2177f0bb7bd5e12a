"""A short fuzz of malformed requests against a cuzk-ref process (the long one is a benchmark)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers.engine_support import Daemon, RefData, connect, write_config
from helpers.fuzzing import fuzz

from pytest_cuzk.daemon.proofcheck import check_proof
from pytest_cuzk.proto import pb
from pytest_cuzk.vocab.kinds import KINDS


def test_fuzzed_requests_get_clean_errors_and_the_daemon_keeps_proving(
    spawn: Callable[..., Daemon], ref_data: RefData, ref_params: Path, tmp_path: Path, socket_dir: Path
) -> None:
    config = write_config(tmp_path / "ref.toml", f'[srs]\nparam_cache = "{ref_params}"\n')
    address = f"unix://{socket_dir / 'cuzk.sock'}"
    daemon = spawn("-c", str(config), "-l", address)
    daemon.wait_ready()
    report = fuzz(address, daemon.proc.pid, {k: ref_data.request(k) for k in KINDS}, count=150, seconds=15)
    print(f"fuzz: {report.line()}")
    assert not report.crashes, report.crashes
    assert report.outcomes["FAILED"] > 0 and report.outcomes["rpc INVALID_ARGUMENT"] > 0
    channel, stub = connect(address)
    with channel:
        good = stub.Prove(pb.ProveRequest(submit=ref_data.request("porep", request_id="after")), timeout=120)
    assert good.result.status == pb.AwaitProofResponse.COMPLETED, good.result.error_message
    check_proof(good.result.proof, KINDS["porep"])
    assert daemon.proc.poll() is None
    daemon.stop()

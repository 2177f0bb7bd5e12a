"""The param cache: PCE files by behaviour, tied to their circuit; a full, file or read-only cache."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from helpers.engine_support import RefData, copy_params, fill, tmpfs

from pytest_cuzk.proto import pb
from pytest_cuzk.refengine import keyfile
from pytest_cuzk.refengine.circuits import PRESETS
from pytest_cuzk.refengine.circuits.registry import circuit_for
from pytest_cuzk.refengine.config import RefConfig
from pytest_cuzk.refengine.engine import Engine
from pytest_cuzk.refengine.param_cache import ParamCacheError
from pytest_cuzk.refengine.pce import load_pce, write_pce
from pytest_cuzk.refengine.prover import RefProver
from pytest_cuzk.refengine.r1cs import ConstraintSystem
from pytest_cuzk.vocab.kinds import KINDS

WINNING = KINDS["winning"]


def _prove(prover: RefProver, req: pb.SubmitProofRequest) -> tuple[bool, int | None]:
    """(used the PCE, first bad partition) for one WinningPoSt proof."""
    job = prover.parse(WINNING, req)
    part = prover.synthesize(job, 0)
    return part.used_pce, prover.first_bad_partition(job, b"".join(prover.prove([part])))


def _wait_for(path: Path, newer_than: int = -1) -> int:
    deadline = time.monotonic() + 10
    while not (path.exists() and path.stat().st_mtime_ns > newer_than):
        assert time.monotonic() < deadline, f"{path} was not written"
        time.sleep(0.02)
    return path.stat().st_mtime_ns


def test_behaving_as_cuzk_the_pce_is_extracted_after_every_start_and_never_read(
    tmp_path: Path, ref_params: Path, ref_data: RefData
) -> None:
    copy_params(ref_params, tmp_path, WINNING.circuit_id)
    pce = tmp_path / WINNING.pce_file
    written = -1
    for _start in range(2):
        prover = RefProver(tmp_path, threads=1, reuse_pce=False)
        try:
            assert _prove(prover, ref_data.request("winning")) == (False, None)
            written = _wait_for(pce, written)  # a new file after each start, written in the background
            assert _prove(prover, ref_data.request("winning")) == (False, None)  # and never used
        finally:
            prover.close()


def test_a_pce_of_another_circuit_is_rejected_and_extracted_again(
    tmp_path: Path, ref_params: Path, ref_data: RefData
) -> None:
    copy_params(ref_params, tmp_path, WINNING.circuit_id)
    wpost = circuit_for(KINDS["wpost"].circuit_id)
    cs = ConstraintSystem()
    wpost.synthesize(cs, PRESETS["default"], wpost.blank(PRESETS["default"]))
    write_pce(tmp_path, WINNING.pce_name, cs.matrices())  # intact, but of another circuit
    prover = RefProver(tmp_path, threads=1)
    try:
        assert _prove(prover, ref_data.request("winning")) == (False, None)
    finally:
        prover.close()
    digest = keyfile.read_meta(tmp_path / f"cuzk-ref-default-{WINNING.circuit_id}.params")[
        "constraint_digest"
    ]
    assert load_pce(tmp_path / WINNING.pce_file, digest).num_inputs > 0  # replaced by its own circuit's


def _engine_result(cache: Path, req: pb.SubmitProofRequest) -> pb.AwaitProofResponse:
    engine = Engine.from_config(replace(RefConfig(), param_cache=cache, behave="protocol"))
    engine.start()
    try:
        job, _ = engine.submit(req)
        return engine.wait(job, 60)
    finally:
        engine.shutdown()


def test_a_full_param_cache_names_the_file_and_leaves_no_temporary_file(
    tmp_path: Path, ref_params: Path, ref_data: RefData
) -> None:
    with tmpfs(tmp_path / "full") as cache:
        fill(cache)
        result = _engine_result(cache, ref_data.request("winning"))
        params = cache / f"cuzk-ref-default-{WINNING.circuit_id}.params"
        assert result.status == pb.AwaitProofResponse.FAILED
        assert result.error_message == (
            f"synthesis failed: cannot load parameters for winning-32g: cannot write {params}: "
            "No space left on device"
        )
        assert not list(cache.glob("*.tmp"))
    with tmpfs(tmp_path / "keys-fit") as cache:  # the keys fit, the PCE does not: the proof still succeeds
        copy_params(ref_params, cache, WINNING.circuit_id)
        fill(cache)
        result = _engine_result(cache, ref_data.request("winning"))
        assert result.status == pb.AwaitProofResponse.COMPLETED, result.error_message
        assert not list(cache.glob("*.tmp")) and not (cache / WINNING.pce_file).exists()


def test_a_param_cache_that_is_a_file_or_read_only_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ParamCacheError, match=f"param cache {tmp_path / 'file'} is not a directory"):
        RefProver(tmp_path / "file")
    with tmpfs(tmp_path / "ro", read_only=True) as cache, pytest.raises(ParamCacheError, match="read-only"):
        RefProver(cache)

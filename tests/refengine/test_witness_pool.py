"""Partition witnesses in worker processes: the same z as in the engine's process, and no worker left behind.

The pool starts only for circuits of ``MIN_CONSTRAINTS`` or more; here ``parallel_from=0`` sends
the default preset's partitions there, so that a real spawn-started pool runs in seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace

import psutil
import pytest

from pytest_cuzk.proto import pb
from pytest_cuzk.refengine.circuits import PRESETS
from pytest_cuzk.refengine.circuits.registry import circuit_for
from pytest_cuzk.refengine.config import RefConfig
from pytest_cuzk.refengine.engine import SHUTDOWN_MESSAGE, Engine
from pytest_cuzk.refengine.pce import pce_path
from pytest_cuzk.refengine.prover import RefProver
from pytest_cuzk.refengine.witness_pool import MIN_CONSTRAINTS, WitnessPool, partition_witness
from pytest_cuzk.vocab.kinds import KINDS


def _children() -> set[int]:
    """Child processes but multiprocessing's resource tracker, which lives as long as this process."""
    procs = psutil.Process().children(recursive=True)
    return {p.pid for p in procs if "resource_tracker" not in " ".join(p.cmdline())}


@pytest.mark.parametrize("name", ["porep", "snap"])
def test_workers_give_the_witness_the_engine_process_gives(ref_data, ref_params, name):
    before = _children()
    prover = RefProver(ref_params, threads=2, parallel_from=0)
    try:
        job = prover.parse(KINDS[name], ref_data.request(name))
        here = [prover.synthesize(job, k) for k in range(job.partitions)]  # writes or loads the PCE
        assert all(p.used_pce for p in here[1:])
        job = prover.parse(KINDS[name], ref_data.request(name))
        prover.prefetch(job)
        assert sorted(job.witnesses) == list(range(job.partitions)), "every partition went to the workers"
        assert _children() - before, "the workers are processes of their own"
        there = [prover.synthesize(job, k) for k in range(job.partitions)]
        assert job.witnesses == {}
        assert [p.z for p in there] == [p.z for p in here]
        assert [p.h for p in there] == [p.h for p in here]
    finally:
        prover.close()
    assert not (_children() - before), "close() leaves no worker behind"


@pytest.mark.parametrize("name", ["porep", "snap"])
def test_cuzks_constraint_system_path_runs_in_the_workers_too(ref_data, ref_params, name):
    """Behaving as cuzk (no PCE read back), partitions go through the constraint system in the workers.

    Until this process has extracted the PCE, the first partition stays here to feed that extraction.
    """
    prover = RefProver(ref_params, threads=2, reuse_pce=False, parallel_from=0)
    try:
        prover.ensure_loaded(KINDS[name].circuit_id)
        job = prover.parse(KINDS[name], ref_data.request(name))
        here = [prover.synthesize(job, k) for k in range(job.partitions)]
        assert not any(p.used_pce for p in here)
        _wait_for(lambda: prover.timings().get("pce: extract + write"), "the background PCE extraction")
        job = prover.parse(KINDS[name], ref_data.request(name))
        prover.prefetch(job)
        assert sorted(job.witnesses) == list(range(job.partitions)), "every partition went to the workers"
        there = [prover.synthesize(job, k) for k in range(job.partitions)]
        assert job.witnesses == {}, "synthesis took the workers' partitions"
        assert not any(p.used_pce for p in there)
        assert [p.z for p in there] == [p.z for p in here]
        assert [p.h for p in there] == [p.h for p in here]
        assert prover.first_bad_partition(job, b"".join(prover.prove(there))) is None
    finally:
        prover.close()


def test_the_partition_feeding_the_pce_extraction_stays_in_the_engine_process(ref_data, ref_params):
    prover = RefProver(ref_params, threads=2, reuse_pce=False, parallel_from=0)
    try:
        prover.ensure_loaded(KINDS["porep"].circuit_id)
        job = prover.parse(KINDS["porep"], ref_data.request("porep"))
        prover.prefetch(job)
        assert sorted(job.witnesses) == list(range(1, job.partitions))
        parts = [prover.synthesize(job, k) for k in range(job.partitions)]
        assert job.witnesses == {}
        assert prover.first_bad_partition(job, b"".join(prover.prove(parts))) is None
        _wait_for(lambda: prover.timings().get("pce: extract + write"), "the extraction partition 0 feeds")
        assert pce_path(ref_params, KINDS["porep"].pce_name).exists()
    finally:
        prover.close()


def test_a_job_whose_workers_stop_at_shutdown_fails_as_the_daemon_shutting_down(ref_data, ref_params):
    """SIGTERM while a job's partitions wait for the workers: the job ends with cuzk's shutdown message.

    The pool's one worker is still starting (a spawn start takes a second) when the engine shuts
    down, so its queued partitions are cancelled under the job, which must not read as a panic.
    """
    prover = RefProver(ref_params, threads=1, reuse_pce=False, parallel_from=0)
    engine = Engine(replace(RefConfig(), param_cache=ref_params, behave="cuzk"), prover)
    engine.start()
    try:
        job, _ = engine.submit(ref_data.request("porep"))
        _wait_for(lambda: job.parsed is not None and job.parsed.witnesses, "the partitions to reach the pool")
        assert job.parsed is not None
        pending = list(job.parsed.witnesses.values())
        assert not all(f.done() for f in pending)
        engine.shutdown()
        result = engine.wait(job, 60)
        assert (result.status, result.error_message) == (pb.AwaitProofResponse.FAILED, SHUTDOWN_MESSAGE)
        assert any(f.cancelled() for f in pending), "the queued partitions were cancelled, not computed"
    finally:
        engine.shutdown()
        prover.close()


def _wait_for(done: Callable[[], object], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"waited {timeout_s:.0f} s for {what}"
        time.sleep(0.05)


def test_a_small_circuit_stays_in_the_engine_process(ref_data, ref_params):
    prover = RefProver(ref_params, threads=2)
    try:
        job = prover.parse(KINDS["porep"], ref_data.request("porep"))
        prover.synthesize(job, 0)  # the PCE is resident from here on
        assert prover.preset.name == "default" and MIN_CONSTRAINTS > 10_000
        prover.prefetch(job)
        assert job.witnesses == {}
    finally:
        prover.close()


def test_a_circuit_error_in_a_worker_reaches_the_caller():
    pool = WitnessPool(1)
    try:
        future = pool.submit(partition_witness, "no-such-circuit", PRESETS["default"], None)
        with pytest.raises(KeyError, match="no-such-circuit"):
            future.result(timeout=60)
        with pytest.raises(KeyError):
            partition_witness("no-such-circuit", PRESETS["default"], None)
    finally:
        pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(partition_witness, "porep", PRESETS["default"], None)


def test_a_pool_that_lost_a_worker_is_replaced_for_the_next_witness():
    pool = WitnessPool(1)
    before = _children()
    porep = KINDS["porep"].circuit_id
    try:
        with pytest.raises(KeyError):
            # starts the worker
            pool.submit(partition_witness, "no-such-circuit", PRESETS["default"], None).result(timeout=60)
        (worker,) = [psutil.Process(pid) for pid in _children() - before]
        # a witness of about a second: the worker dies under it
        xlarge = PRESETS["xlarge"]
        lost = pool.submit(partition_witness, porep, xlarge, circuit_for(porep).blank(xlarge))
        worker.kill()
        with pytest.raises(BrokenProcessPool):
            lost.result(timeout=60)
        num_inputs, z = pool.submit(
            partition_witness, porep, PRESETS["default"], circuit_for(porep).blank(PRESETS["default"])
        ).result(timeout=60)
        assert num_inputs > 1 and len(z) > num_inputs
    finally:
        pool.close()


OWNER = textwrap.dedent(
    """
    import os, sys, psutil
    from pytest_cuzk.refengine.circuits import PRESETS
    from pytest_cuzk.refengine.witness_pool import WitnessPool, partition_witness
    pool = WitnessPool(2)
    try:
        pool.submit(partition_witness, "no-such-circuit", PRESETS["default"], None).result(timeout=60)
    except KeyError:
        pass
    print(" ".join(str(p.pid) for p in psutil.Process().children()), flush=True)
    sys.stdin.read()
    """
)


def test_workers_end_when_the_engine_is_killed():
    args = [sys.executable, "-c", OWNER]
    with subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as owner:
        try:
            assert owner.stdout is not None
            workers = [psutil.Process(int(pid)) for pid in owner.stdout.readline().split()]
            assert len(workers) >= 2, "the pool's workers (and its resource tracker) started"
            os.kill(owner.pid, signal.SIGKILL)
            owner.wait(timeout=10)
            _, alive = psutil.wait_procs(workers, timeout=15)
            assert not alive, f"workers outlived a SIGKILLed engine: {[p.cmdline() for p in alive]}"
        finally:
            if owner.poll() is None:
                owner.kill()

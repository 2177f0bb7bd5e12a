"""Reference prover figures per proof kind: cold and warm proof time and where the time goes.

Cold = a fresh param cache: trusted setup, the first synthesis through the
constraint system with PCE extraction, and proving. Warm = a proof with the key
resident and the PCE in use. Also: synthesis vs prove split (synthesis is all the
GIL-bound CPU work: witness, witness map, scalar conversion; prove should be nearly
all native MSMs), the share of prove time spent in MSMs, what one partition's
synthesis spends on the witness map, and the PCE path's speedup over the
constraint-system path for the assignment (witness and A·z, B·z, C·z) alone; and for the
partitioned kinds, a proof's witnesses one after another against the worker processes.
Figures go to ``benchmark.extra_info`` and are printed.
Preset via ``CUZK_REF_BENCH_PRESET`` (default "default").
"""

from __future__ import annotations

import os
import sys
import time

import pytest

from pytest_cuzk.data.inputs import build_request
from pytest_cuzk.refengine import gendata
from pytest_cuzk.refengine.circuits import PRESETS
from pytest_cuzk.refengine.circuits.registry import circuit_for
from pytest_cuzk.refengine.keyfile import read_meta
from pytest_cuzk.refengine.pce import load_pce, pce_path
from pytest_cuzk.refengine.prover import RefProver
from pytest_cuzk.refengine.r1cs import ConstraintSystem, WitnessCS
from pytest_cuzk.refengine.witness_pool import WitnessPool, partition_witness, usable_cpus
from pytest_cuzk.vocab.kinds import KINDS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PRESET = os.environ.get("CUZK_REF_BENCH_PRESET", "default")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    return out, tomllib.loads(gendata.generate(out, preset=PRESET).read_text())


def _request(data, name):
    out, manifest = data
    entry = manifest["kinds"][name][0]
    return build_request(KINDS[name], out / entry["file"], entry["request"])


def _prove(prover: RefProver, req, name: str) -> tuple[float, float, bytes]:
    """(synthesis seconds, prove seconds, proof) for one whole proof, stages run back to back."""
    job = prover.parse(KINDS[name], req)
    t0 = time.perf_counter()
    prover.prefetch(job)  # as the engine does: a large circuit's witnesses in worker processes
    parts = [prover.synthesize(job, k) for k in range(job.partitions)]
    t1 = time.perf_counter()
    proof = b"".join(prover.prove(parts))
    return t1 - t0, time.perf_counter() - t1, proof


def _best(fn, rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


@pytest.mark.parametrize("name", list(KINDS))
def test_prover_figures(benchmark, name, data, tmp_path):
    kind, req = KINDS[name], _request(data, name)
    prover = RefProver(tmp_path / "params", preset=PRESET)
    try:
        t0 = time.perf_counter()
        job = prover.parse(kind, req)
        prover.ensure_loaded(kind.circuit_id)
        setup_s = time.perf_counter() - t0
        _prove(prover, req, name)
        cold_s = time.perf_counter() - t0

        before = dict(prover.timings())
        splits: list[tuple[float, float]] = []

        def warm() -> bytes:
            synth, prove, proof = _prove(prover, req, name)
            splits.append((synth, prove))
            return proof

        proof = benchmark.pedantic(warm, rounds=3, iterations=1, warmup_rounds=0)
        assert prover.self_check(job, proof)
        after = prover.timings()
        prove_total = sum(p for _, p in splits)
        msm_s = after["prove: MSM"] - before.get("prove: MSM", 0.0)
        fft_key = "synthesis: witness map (FFT)"
        fft_s = (after[fft_key] - before.get(fft_key, 0.0)) / (len(splits) * job.partitions)

        circuit, witness = circuit_for(kind.circuit_id), job.inputs.witness(0)

        def cs_path() -> None:
            cs = ConstraintSystem()
            circuit.synthesize(cs, prover.preset, witness)

        m = load_pce(pce_path(prover.param_cache, kind.pce_name))

        def pce_assignment() -> None:
            w = WitnessCS()
            circuit.synthesize(w, prover.preset, witness)
            z = w.assignment()
            for mat in (m.a, m.b, m.c):
                mat.matvec(z)

        cs_s = _best(cs_path)
        pce_s = _best(pce_assignment)
        partition_s = _best(lambda: prover.synthesize(job, 0))
        synth_mean = sum(s for s, _ in splits) / len(splits)
        info = {
            "preset": PRESET,
            "threads": prover.threads,
            "partitions": job.partitions,
            "constraints_per_partition": read_meta(prover.params_path(kind.circuit_id))["num_constraints"],
            "cold_s (setup + first proof + PCE)": round(cold_s, 3),
            "setup_s": round(setup_s, 3),
            "warm_synthesis_s": round(synth_mean, 4),
            "warm_prove_s": round(prove_total / len(splits), 4),
            "msm_share_of_prove": round(msm_s / prove_total, 3),
            "partition_synthesis_s": round(partition_s, 5),
            "partition_witness_map_s": round(fft_s, 5),
            "partition_assignment_cs_path_s": round(cs_s, 5),
            "partition_assignment_pce_path_s": round(pce_s, 5),
            "pce_speedup": round(cs_s / pce_s, 2),
        }
        benchmark.extra_info.update(info)
        print(f"\n{name}: " + ", ".join(f"{k}={v}" for k, v in info.items()))
        assert info["msm_share_of_prove"] > 0.8, "the prove stage should be nearly all native MSMs"
        assert info["pce_speedup"] > 1.2, "the PCE path should build the assignment faster"
    finally:
        prover.close()


@pytest.mark.parametrize("name", ["porep", "snap"])
def test_witness_workers_figures(name, data):
    """One proof's partition witnesses: one by one in this process, then side by side in the workers."""
    cid, preset = KINDS[name].circuit_id, PRESETS[PRESET]
    inputs = circuit_for(cid).parse(_request(data, name), preset)
    witnesses = [inputs.witness(k) for k in range(inputs.partitions)]
    want = [partition_witness(cid, preset, w) for w in witnesses]
    alone = _best(lambda: [partition_witness(cid, preset, w) for w in witnesses], 3)
    pool = WitnessPool(usable_cpus())

    def in_workers() -> list[tuple[int, list[int]]]:
        return [f.result() for f in [pool.submit(partition_witness, cid, preset, w) for w in witnesses]]

    try:
        assert in_workers() == want  # starts the workers
        side_by_side = _best(in_workers, 3)
    finally:
        pool.close()
    print(
        f"\n{name} ({PRESET}, {len(witnesses)} partitions): witnesses one by one {alone:.3f} s, "
        f"on {usable_cpus()} worker processes {side_by_side:.3f} s ({alone / side_by_side:.1f}x)"
    )

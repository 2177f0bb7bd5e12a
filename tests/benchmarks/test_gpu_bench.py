"""GPU prover figures (CUDA and CuPy only): MSM milliseconds against py-arkworks, proofs/hour GPU vs CPU.

MSM: 2^16, 2^18 and 2^20 distinct bases in G1 (2^16 and 2^18 in G2, B's group) with random scalars;
the GPU's median of 10 runs with the bases resident and the scalars on the device (each result
checked against py-arkworks once), py-arkworks' median of 3 with the MSM sliced over every core as
the CPU prover slices it. Proofs/hour: one PoRep proof's stages back to back (synthesis, then the
prove stage) on each prover, for the presets in ``CUZK_REF_GPU_BENCH_PRESETS`` (default
"default,medium"; "xlarge" is the GPU's preset), the median of ``CUZK_REF_GPU_BENCH_ROUNDS`` (3)
after a warm-up; the engine overlaps the two stages, so its rate lies between the sequential figure
and 1 / the longer stage, both printed, with where the GPU prover's time went.
``CUZK_REF_GPU_BENCH_CPU_PARTITIONS=1`` has the CPU prover prove one partition, once, and scales it
to the proof: at xlarge its whole proof takes minutes.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

import numpy as np
import pytest
from py_arkworks_bls12381 import Scalar

from pytest_cuzk.data.inputs import build_request
from pytest_cuzk.refengine import gendata
from pytest_cuzk.refengine.gpu import open_gpu
from pytest_cuzk.refengine.prover import RefProver
from pytest_cuzk.vocab.kinds import KINDS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.gpu
GPU, WHY = open_gpu((), off=False)
if GPU is None:
    pytest.skip(f"needs a CUDA GPU and CuPy: {WHY}", allow_module_level=True)

import cupy  # noqa: E402 - only where open_gpu found CuPy and a device

from pytest_cuzk.refengine.gpu.points import G1, G2, Group  # noqa: E402

PRESETS = os.environ.get("CUZK_REF_GPU_BENCH_PRESETS", "default,medium").split(",")
ROUNDS = int(os.environ.get("CUZK_REF_GPU_BENCH_ROUNDS", "3"))
CPU_PARTITIONS = int(os.environ.get("CUZK_REF_GPU_BENCH_CPU_PARTITIONS", "0"))  # 0: the whole proof
THREADS = len(os.sched_getaffinity(0))


def _bases(n: int, group: Group) -> list:
    g = group.point()
    p, out = g * Scalar(0x5EED), []
    for _ in range(n):
        out.append(p)
        p = p + g
    return out


def _cpu_msm(pool: ThreadPoolExecutor, group: Group, pts: list, sc: list[Scalar]):
    cuts = [len(pts) * k // THREADS for k in range(THREADS + 1)]
    pieces = [(pts[a:b], sc[a:b]) for a, b in pairwise(cuts)]
    parts = pool.map(lambda piece: group.point.multiexp_unchecked(*piece), pieces)
    total = group.point.identity()
    for part in parts:
        total = total + part
    return total


def _median_s(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


@pytest.mark.parametrize(("group", "sizes"), [(G1, (16, 18, 20)), (G2, (16, 18))], ids=["G1", "G2"])
def test_gpu_msm_figures(group, sizes):
    rng = np.random.default_rng()
    pts_all = _bases(1 << max(sizes), group)
    rows = []
    with ThreadPoolExecutor(THREADS) as pool:
        for log_n in sizes:
            n = 1 << log_n
            pts = pts_all[:n]
            limbs = rng.integers(0, 1 << 32, size=(n, 8), dtype=np.uint64).astype(np.uint32)
            limbs[:, 7] &= 0x3FFFFFFF  # below 2^254 < r
            sc = [Scalar.from_le_bytes(row.tobytes()) for row in limbs]
            bases, dev = GPU.upload(pts, group), cupy.asarray(limbs)
            got = GPU.msm(bases, dev)
            want = _cpu_msm(pool, group, pts, sc)
            assert got == want, f"GPU MSM of 2^{log_n} points differs from py-arkworks"
            gpu_s = _median_s(lambda b=bases, d=dev: GPU.msm(b, d), 10)
            cpu_s = _median_s(lambda p=pts, s=sc: _cpu_msm(pool, group, p, s), 3)
            rows.append((log_n, gpu_s * 1e3, cpu_s * 1e3))
            del bases, dev
    print(f"\n{group.suffix.upper()} MSM on {GPU.name} vs py-arkworks on {THREADS} threads")
    print(f"{'points':>8} {'GPU ms':>9} {'CPU ms':>9} {'speed-up':>9}")
    for log_n, g, c in rows:
        print(f"{'2^' + str(log_n):>8} {g:9.2f} {c:9.1f} {c / g:9.1f}")


WITNESS = "synthesis: witness (PCE path)"


def _stages(prover: RefProver, req, rounds: int, partitions: int) -> tuple[float, float]:
    """Median (synthesis seconds, prove seconds) of a PoRep proof, from its first ``partitions`` partitions.

    Each proof (or part of one) is checked by the engine's own verifier; the first round warms
    caches: it synthesises through the constraint system and writes the PCE that later rounds use.
    A part of a proof is scaled to the whole but for its witness: on a large circuit the engine
    computes every partition's witness side by side (``prefetch``), so one partition's witness
    time stands for all of them where there are as many cores as partitions.
    """
    job = prover.parse(KINDS["porep"], req)
    prover.ensure_loaded(job.kind.circuit_id)
    synth, prove = [], []
    for _ in range(rounds + 1):
        witness0 = prover.timings().get(WITNESS, 0.0)
        t0 = time.perf_counter()
        if partitions == job.partitions:
            prover.prefetch(job)
        parts = [prover.synthesize(job, k) for k in range(partitions)]
        t1 = time.perf_counter()
        proofs = prover.prove(parts)
        scale = job.partitions / partitions
        witness = prover.timings().get(WITNESS, 0.0) - witness0 if partitions < job.partitions else 0.0
        synth.append(witness + (t1 - t0 - witness) * scale)
        prove.append((time.perf_counter() - t1) * scale)
        if partitions == job.partitions:
            assert prover.first_bad_partition(job, b"".join(proofs)) is None
    return statistics.median(synth[1:]), statistics.median(prove[1:])


@pytest.mark.parametrize("preset", PRESETS)
def test_gpu_proofs_per_hour(tmp_path, preset):
    out = tmp_path / "data"
    manifest = tomllib.loads(gendata.generate(out, preset=preset, sectors=1).read_text())
    entry = manifest["kinds"]["porep"][0]
    req = build_request(KINDS["porep"], out / entry["file"], entry["request"])
    whole = KINDS["porep"].partitions
    rows = []
    for label, gpu, parts in (("cpu", None, CPU_PARTITIONS or whole), ("gpu", GPU, whole)):
        prover = RefProver(tmp_path / "params", preset=preset, gpu=gpu)
        try:
            t0 = time.perf_counter()
            prover.ensure_loaded(KINDS["porep"].circuit_id)
            if label == "cpu":
                print(f"\n{preset}: trusted setup and key load {time.perf_counter() - t0:.1f} s")
            synth, prove = _stages(prover, req, ROUNDS if parts == whole else 1, parts)
            rows.append((label, synth, prove, parts))
            if gpu is not None:
                print(_where(prover))
        finally:
            prover.close()
    print(f"PoRep ({whole} partitions), preset {preset}: proofs/h back to back and (bound) 1 / longer stage")
    for label, synth, prove, parts in rows:
        sequential, bound = 3600 / (synth + prove), 3600 / max(synth, prove)
        scaled = f" (from {parts} partition{'s' * (parts > 1)}, scaled)" if parts < whole else ""
        print(f"{label:>4}: synthesis {synth:8.3f} s, prove {prove:8.3f} s, "
              f"{sequential:9.1f} /h sequential, {bound:9.1f} /h bound{scaled}")  # fmt: skip
    (_, cpu_synth, cpu_prove, _), (_, gpu_synth, gpu_prove, _) = rows
    print(f"prove stage: GPU {cpu_prove / gpu_prove:.1f}x the CPU; "
          f"whole proof: GPU {(cpu_synth + cpu_prove) / (gpu_synth + gpu_prove):.1f}x the CPU")  # fmt: skip


def _where(prover: RefProver) -> str:
    """Where the GPU prover's time went, per phase, since it started (warm-up round included)."""
    phases = sorted(prover.timings().items(), key=lambda kv: -kv[1])
    return "gpu phases: " + ", ".join(f"{name} {s:.2f} s" for name, s in phases if s >= 0.005)

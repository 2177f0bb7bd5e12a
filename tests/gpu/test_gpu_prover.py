"""On a CUDA GPU with CuPy: GPU MSMs and witness maps against the CPU's, GPU against CPU proofs, VRAM, faults.

Skips, with the reason, where ``open_gpu`` finds no usable GPU. Every MSM check draws fresh
random inputs (the seed is in the failure message). Run: ``python -m pytest tests/gpu -m gpu``.
"""

from __future__ import annotations

import random
import secrets
from array import array

import numpy as np
import pytest
from helpers.engine_support import distinct_points
from py_arkworks_bls12381 import Scalar

from pytest_cuzk.proto import pb
from pytest_cuzk.refengine import groth16, keyfile
from pytest_cuzk.refengine.config import Faults
from pytest_cuzk.refengine.field import R, get_domain
from pytest_cuzk.refengine.gpu import open_gpu
from pytest_cuzk.refengine.groth16 import ProofInput
from pytest_cuzk.refengine.prover import RefProver
from pytest_cuzk.refengine.qap import h_coefficients
from pytest_cuzk.refengine.r1cs import CSR, Matrices
from pytest_cuzk.vocab.kinds import KINDS

pytestmark = pytest.mark.gpu
GPU, WHY = open_gpu((), off=False)
if GPU is None:
    pytest.skip(f"needs a CUDA GPU and CuPy: {WHY}", allow_module_level=True)

import cupy  # noqa: E402 - only where open_gpu found CuPy and a device

from pytest_cuzk.refengine.gpu.keys import GpuKeys  # noqa: E402
from pytest_cuzk.refengine.gpu.msm import scalars_to_limbs  # noqa: E402
from pytest_cuzk.refengine.gpu.ntt import GpuNtt, fr_limbs  # noqa: E402
from pytest_cuzk.refengine.gpu.points import G1, G2, Group  # noqa: E402

SIZES = {"one": 1, "two": 2, "small": 33, "random": 3000, "wide": 20_000, "max window": 1 << 17}


def _case(name: str, rnd: random.Random, group: Group) -> tuple[list, list[int]]:
    n = SIZES.get(name, 400)
    pts, ks = distinct_points(rnd, n, group), [rnd.randrange(R) for _ in range(n)]
    if name == "zero scalars":
        ks = [0 if i % 3 else k for i, k in enumerate(ks)]
    elif name == "all zero":
        ks = [0] * n
    elif name == "identity bases":
        pts = [group.point.identity() if i % 4 == 0 else p for i, p in enumerate(pts)]
    elif name == "repeated base":
        pts = [pts[0]] * n
    elif name == "near r":
        ks = [R - 1 - (i % 9) for i in range(n)]
    elif name == "cancelling":
        pts, ks = [pts[0], -pts[0]] * (n // 2), [rnd.randrange(R)] * n
    elif name == "equal terms":
        ks = [ks[0]] * n
    return pts, ks


CASES = ["one", "two", "small", "random", "wide", "max window", "zero scalars", "all zero",
         "identity bases", "repeated base", "near r", "cancelling", "equal terms"]  # fmt: skip


G2_CASES = ["one", "two", "small", "random", "wide", "zero scalars", "all zero", "identity bases",
            "repeated base", "near r", "cancelling", "equal terms"]  # fmt: skip
"""G2's cases: all of G1's but the largest size, whose window G1's case covers (the same kernels)."""


@pytest.mark.parametrize(
    ("group", "name"),
    [*((G1, n) for n in CASES), *((G2, n) for n in G2_CASES)],
    ids=[*(f"G1-{n}" for n in CASES), *(f"G2-{n}" for n in G2_CASES)],
)
def test_gpu_msm_matches_arkworks(group, name):
    seed = secrets.randbits(32)
    pts, ks = _case(name, random.Random(seed), group)
    scalars = [Scalar(k) for k in ks]
    got = GPU.msm(GPU.upload(pts, group), scalars_to_limbs(scalars))
    assert got == group.point.multiexp_unchecked(pts, scalars), f"seed {seed}"


@pytest.mark.parametrize("group", [G1, G2], ids=["G1", "G2"])
@pytest.mark.parametrize("batch", [1, 3, 10])
def test_gpu_msm_batch_matches_arkworks_row_by_row(group, batch):
    """A batch of MSMs over one set of bases: each row its own sum, a zero row the identity."""
    seed = secrets.randbits(32)
    rnd = random.Random(seed)
    pts = distinct_points(rnd, 700, group)
    rows = [[rnd.randrange(R) for _ in pts] for _ in range(batch)]
    rows[-1] = [0] * len(pts) if batch > 1 else rows[-1]
    limbs = np.stack([scalars_to_limbs([Scalar(k) for k in row]) for row in rows])
    got = GPU.msm_batch(GPU.upload(pts, group), limbs)
    want = [group.point.multiexp_unchecked(pts, [Scalar(k) for k in row]) for row in rows]
    assert got == want, f"seed {seed}"


NTT = GpuNtt(GPU.ordinal)


@pytest.mark.parametrize("m", [1, 2, 3, 700, 1024, 1025, 1 << 14])
@pytest.mark.parametrize("values", ["random", "edges"])
def test_gpu_witness_map_matches_the_cpu(m, values):
    seed = secrets.randbits(32)
    rnd = random.Random(seed)
    if values == "random":
        a, b, c = ([rnd.randrange(R) for _ in range(m)] for _ in range(3))
    else:
        edge = [0, 1, R - 1, R - 2, 1 << 254]
        a, b, c = ([rnd.choice(edge) for _ in range(m)] for _ in range(3))
    domain = get_domain(m)
    got = cupy.asnumpy(NTT.witness_map(a, b, c, domain))
    assert (got == fr_limbs(h_coefficients(a, b, c, domain))).all(), f"seed {seed}"


def _csr(rnd: random.Random, rows: int, width: int, values: list[int] | None) -> CSR:
    """Rows of 0 to 6 entries, one row of every column (a bit packing's), every tenth row empty."""
    row_ptr, cols, vals = array("I", [0]), array("I"), []
    for i in range(rows):
        count = 0 if i % 10 == 0 else rnd.randint(1, 6)
        picked = range(width) if i == rows // 2 else rnd.sample(range(width), count)
        cols.extend(picked)
        vals.extend(rnd.choice(values) if values else rnd.randrange(1, R) for _ in picked)
        row_ptr.append(len(cols))
    return CSR(row_ptr, cols, vals)


@pytest.mark.parametrize("rows", [1, 700, 1024, 5000])
@pytest.mark.parametrize("values", ["random", "edges"])
def test_gpu_sparse_products_and_witness_map_match_the_cpu(rows, values):
    seed = secrets.randbits(32)
    rnd = random.Random(seed)
    edge = [1, 2, R - 1, R - 2, 1 << 254] if values == "edges" else None
    width = 300
    m = Matrices(3, width - 3, *(_csr(rnd, rows, width, edge) for _ in range(3)))
    z = [1] + [rnd.choice(edge) if edge else rnd.randrange(R) for _ in range(width - 1)]
    domain = get_domain(rows)
    h, z_dev = NTT.witness_map_pce(m, z, domain)
    want = h_coefficients(m.a.matvec(z), m.b.matvec(z), m.c.matvec(z), domain)
    assert (cupy.asnumpy(h) == fr_limbs(want)).all(), f"seed {seed}"
    assert (cupy.asnumpy(z_dev) == fr_limbs(z)).all()


@pytest.mark.parametrize("name", list(KINDS))
def test_gpu_synthesis_gives_the_cpu_h(ref_data, ref_params, name):
    """The GPU prover's synthesis leaves h and z on the device: the same values as the CPU's."""
    _, _, cpu_parts = _parts(ref_data, ref_params, name)
    _, _, gpu_parts = _parts(ref_data, ref_params, name, gpu=GPU)
    for cpu, gpu in zip(cpu_parts, gpu_parts, strict=True):
        assert gpu.h == [] and gpu.z == [] and cpu.h_limbs is None
        assert (cupy.asnumpy(gpu.h_limbs) == scalars_to_limbs(cpu.h)).all()
        # The CPU prover wrote the PCE, so the GPU's sparse products ran, from z uploaded there.
        assert gpu.used_pce
        assert (cupy.asnumpy(gpu.z_limbs) == scalars_to_limbs(cpu.z)).all()


def _parts(ref_data, ref_params, name: str, gpu=None):
    prover = RefProver(ref_params, gpu=gpu)
    try:
        job = prover.parse(KINDS[name], ref_data.request(name))
        return prover, job, [prover.synthesize(job, k) for k in range(job.partitions)]
    finally:
        prover.close()


@pytest.mark.parametrize("name", list(KINDS))
def test_gpu_proof_is_byte_identical_to_the_cpu_proof(ref_data, ref_params, name):
    """With the same (r, s) the two provers must compute the same group elements, so the same bytes."""
    prover, job, parts = _parts(ref_data, ref_params, name)
    prover.ensure_loaded(job.kind.circuit_id)
    pk = keyfile.read_params(prover.params_path(job.kind.circuit_id))
    inputs = [ProofInput(pk, p.z, p.h) for p in parts]
    blinding = [(secrets.randbelow(R), secrets.randbelow(R)) for _ in inputs]
    cpu = b"".join(p.to_bytes() for p in groth16.create_proofs(inputs, blinding))
    gpu = b"".join(p.to_bytes() for p in groth16.create_proofs(inputs, blinding, device=GpuKeys(GPU)))
    assert gpu == cpu
    assert prover.first_bad_partition(job, gpu) is None


def _pool_bytes() -> int:
    return int(cupy.get_default_memory_pool().used_bytes())


def test_gpu_engine_keeps_the_srs_on_the_device_until_evicted(start_engine, ref_data):
    running = start_engine(behave="protocol")
    engine, stub = running.engine, running.stub
    assert engine.prover.prover_label == GPU.label
    info = next(
        line
        for line in stub.GetMetrics(pb.GetMetricsRequest(), timeout=10).prometheus_text.splitlines()
        if line.startswith("cuzk_ref_info{")
    )
    assert f'prover="{GPU.label}"' in info
    cid = KINDS["porep"].circuit_id
    engine.prover.evict(cid)
    before = _pool_bytes()
    stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id=cid), timeout=300)
    pk = keyfile.read_params(engine.prover.params_path(cid))
    g1_bases = len(pk.a_query) + len(pk.b_g1_query) + len(pk.h_query) + len(pk.l_query)
    assert _pool_bytes() - before >= 96 * g1_bases + 192 * len(pk.b_g2_query)
    result = stub.Prove(pb.ProveRequest(submit=ref_data.request("porep", "gpu-1")), timeout=300).result
    assert result.status == pb.AwaitProofResponse.COMPLETED, result.error_message
    assert stub.EvictSRS(pb.EvictSrsRequest(circuit_id=cid), timeout=10).was_loaded
    assert _pool_bytes() <= before


def test_slow_factor_slows_the_gpu_stage(start_engine, ref_data):
    running = start_engine(faults=Faults(slow_factor=3.0))
    before = running.engine.prover.timings().get("prove: MSMs (GPU)", 0.0)
    req = pb.ProveRequest(submit=ref_data.request("winning", "slow-1"))
    result = running.stub.Prove(req, timeout=300).result
    assert result.status == pb.AwaitProofResponse.COMPLETED, result.error_message
    gpu_s = running.engine.prover.timings()["prove: MSMs (GPU)"] - before
    assert gpu_s > 0
    assert result.gpu_compute_ms >= 3.0 * gpu_s * 1000 - 1

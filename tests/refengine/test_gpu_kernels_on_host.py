"""The GPU prover's CUDA kernels without a GPU: their source built by g++, driven by the package's host code.

``tests/gpu`` skips where there is no GPU, CI included. Here ``hostcuda`` stands in for CuPy (with
``cuda_host.h`` for CUDA's device-side names), and ``GpuMsm``, ``GpuNtt`` and ``GpuKeys`` run
unchanged against it: their MSMs must equal py-arkworks', their witness maps the CPU's, and their
proofs the CPU prover's, byte for byte. Inputs are fixed (seeded by case), so a failure repeats.
"""

from __future__ import annotations

import importlib.util
import random
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import hostcuda
import numpy as np
import pytest
from helpers.engine_support import FP, distinct_points
from py_arkworks_bls12381 import Scalar
from test_groth16 import TOXIC, preimage_circuit, proof_input

from pytest_cuzk.refengine import groth16, qap
from pytest_cuzk.refengine.field import R, get_domain
from pytest_cuzk.refengine.gpu import open_gpu
from pytest_cuzk.refengine.gpu.ntt import GpuNtt, fr_limbs
from pytest_cuzk.refengine.gpu.points import G1, G2, Group
from pytest_cuzk.refengine.groth16 import ProofInput
from pytest_cuzk.refengine.hashing import hash_n
from pytest_cuzk.refengine.r1cs import ConstraintSystem

if shutil.which("g++") is None:
    pytest.skip("needs g++ to compile the CUDA kernels for the host", allow_module_level=True)

CUPY_AT_IMPORT = ("pytest_cuzk.refengine.gpu.msm", "pytest_cuzk.refengine.gpu.keys")
"""The modules that import CuPy at their top (``msm`` first, ``keys`` imports it); ``ntt`` does when used."""


@pytest.fixture(scope="module")
def gpu(shared_cache: Path) -> Iterator[SimpleNamespace]:
    """The CuPy modules imported anew against the stand-in, and one ``GpuMsm``; as they were afterwards."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(hostcuda, "build_dir", shared_cache / "hostcuda")
        mp.setitem(sys.modules, "cupy", hostcuda)
        for name in CUPY_AT_IMPORT:
            spec = importlib.util.find_spec(name)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            mp.setitem(sys.modules, name, module)
            spec.loader.exec_module(module)
            # device_used asks NVML for a real device's memory: there is none here, as without NVML.
            mp.setattr(module, "device_used", lambda ordinal: None)
        msm, keys = (sys.modules[name] for name in CUPY_AT_IMPORT)
        yield SimpleNamespace(msm=msm, keys=keys, device=msm.GpuMsm(0))


@pytest.fixture(scope="module")
def ntt(gpu: SimpleNamespace) -> GpuNtt:
    """One witness map for the module: its domains' tables are made once, as on a device."""
    return GpuNtt(gpu.device.ordinal)


def _case(name: str, group: Group[Any]) -> tuple[list[Any], list[int]]:
    rnd = random.Random(f"{group.suffix}-{name}")
    n = {"one": 1, "wide": 2048, "equal scalars": 2048}.get(name, 128)
    pts, ks = distinct_points(rnd, n, group), [rnd.randrange(R) for _ in range(n)]
    if name == "edges":
        pts[1], pts[2], pts[3], pts[9] = group.point.identity(), pts[0], -pts[0], pts[8]
        ks[4:9] = [0, 1, R - 1, R - 2, 1 << 254]
    elif name == "crowded bucket":
        # One scalar for all: in each window with a digit, the 128 points share one bucket, four chunks
        # of 32 added in order (launches run their threads in index order here). In chunk A, q then -q
        # cancel and s then s double; chunks A and -A (reversed: no special case, so that an error in
        # A shows) cancel, and B, B double, when their sums are added.
        a = [pts[0], -pts[0], pts[1], pts[1], *pts[2:30]]
        pts, ks = [*a, *(-p for p in reversed(a)), *pts[64:96], *pts[64:96]], [ks[0]] * n
    elif name == "cancelling":
        pts, ks = [pts[0], -pts[0]] * (n // 2), [ks[0]] * n
    elif name == "equal scalars":
        ks = [ks[0]] * n  # a bucket of 2048 points a window: 64 chunks, summed to 2, then to 1
    elif name == "all zero":
        ks = [0] * n
    elif name == "near r":
        ks = [R - 1 - (i % 9) for i in range(n)]
    return pts, ks


CASES = ["one", "edges", "crowded bucket", "cancelling", "all zero", "near r", "wide", "equal scalars"]
"""128 points make 5-bit windows of 16 buckets (one segment); 2048, 9-bit ones of 16 segments, a tree."""


@pytest.mark.parametrize("group", [G1, G2], ids=["G1", "G2"])
@pytest.mark.parametrize("name", CASES)
def test_msm_equals_arkworks(gpu: SimpleNamespace, group: Group[Any], name: str) -> None:
    pts, ks = _case(name, group)
    scalars = [Scalar(k) for k in ks]
    got = gpu.device.msm(gpu.device.upload(pts, group), gpu.msm.scalars_to_limbs(scalars))
    assert got == group.point.multiexp_unchecked(pts, scalars)


@pytest.mark.parametrize("group", [G1, G2], ids=["G1", "G2"])
def test_msm_batch_gives_each_row_its_own_sum(gpu: SimpleNamespace, group: Group[Any]) -> None:
    """One bucketed MSM over the rows' windows: a row's buckets must not take another row's points."""
    pts, first = _case("edges", group)
    rnd = random.Random(group.suffix)
    rows = [first, [0] * len(pts), [rnd.randrange(R) for _ in pts]]
    limbs = np.stack([gpu.msm.scalars_to_limbs([Scalar(k) for k in row]) for row in rows])
    got = gpu.device.msm_batch(gpu.device.upload(pts, group), limbs)
    assert got == [group.point.multiexp_unchecked(pts, [Scalar(k) for k in row]) for row in rows]


def _fp_mul(a: list[int], b: list[int]) -> list[int]:
    """Product in Fp (one component) or Fp2 (two, u^2 = -1)."""
    if len(a) == 1:
        return [a[0] * b[0] % FP]
    return [(a[0] * b[0] - a[1] * b[1]) % FP, (a[0] * b[1] + a[1] * b[0]) % FP]


@pytest.mark.parametrize("group", [G1, G2], ids=["G1", "G2"])
def test_window_sums_leave_the_device_as_affine_points(gpu: SimpleNamespace, group: Group[Any]) -> None:
    """``window_affine``: Montgomery XYZZ sums (x z^2, y z^3, z^2, z^3), any z but 0, come back as (x, y)."""
    rnd, width = random.Random(group.suffix), group.field_limbs // 12
    gen = group.point()
    points = [gen * Scalar(rnd.randrange(1, R)) for _ in range(5)] + [gen, -gen]
    rows = []
    for p in points:
        raw = p.to_xy_bytes_le()
        comps = [int.from_bytes(raw[k : k + 48], "little") for k in range(0, len(raw), 48)]
        x, y = comps[:width], comps[width:]
        z = [rnd.randrange(1, FP) for _ in range(width)]
        zz = _fp_mul(z, z)
        rows.append([_fp_mul(x, zz), _fp_mul(y, _fp_mul(zz, z)), zz, _fp_mul(zz, z)])
    rows.insert(3, [[0] * width, [1] + [0] * (width - 1), [0] * width, [0] * width])  # the identity
    mont = b"".join(((v << 384) % FP).to_bytes(48, "little") for row in rows for coord in row for v in coord)
    sums = hostcuda.asarray(np.frombuffer(mont, dtype="<u4").reshape(len(rows), -1))
    out = hostcuda.empty((len(rows), 2 * group.field_limbs), dtype=np.uint32)
    gpu.device._launch(f"window_affine_{group.suffix}", len(rows), sums, np.int32(len(rows)), out)
    want = [p.to_xy_bytes_le() for p in points]
    want.insert(3, bytes(96 * width))
    assert [r.tobytes() for r in hostcuda.asnumpy(out)] == want


def test_the_opening_check_passes(gpu: SimpleNamespace) -> None:
    """What the engine runs before it trusts a device: ``selfcheck.disagreement`` in ``open_gpu``."""
    device, why = open_gpu((), off=False)
    assert why == ""
    assert device is not None and device.label == f"gpu:{hostcuda.NAME.decode()}"


EDGES = [0, 1, R - 1, R - 2, 1 << 254]


@pytest.mark.parametrize("m", [1, 2, 64, 65])
@pytest.mark.parametrize("values", ["random", "edges"])
def test_witness_map_equals_the_cpu(ntt: GpuNtt, m: int, values: str) -> None:
    rnd = random.Random(f"{m}-{values}")
    pick = (lambda: rnd.randrange(R)) if values == "random" else (lambda: rnd.choice(EDGES))
    a, b, c = ([pick() for _ in range(m)] for _ in range(3))
    domain = get_domain(m)
    got = hostcuda.asnumpy(ntt.witness_map(a, b, c, domain))
    assert (got == fr_limbs(qap.h_coefficients(a, b, c, domain))).all()


@pytest.fixture(scope="module")
def circuit() -> tuple[Any, Any]:
    """The preimage circuit of ``test_groth16`` (52 constraints, a domain of 64) and its proving key."""
    cs = ConstraintSystem()
    preimage_circuit(cs, 3, 5)
    m = cs.matrices()
    return m, groth16.generate_parameters(m, TOXIC)


def _synthesized(x: int, y: int) -> ConstraintSystem:
    cs = ConstraintSystem()
    preimage_circuit(cs, x, y)
    return cs


def test_circuit_witness_maps_equal_the_cpu(ntt: GpuNtt, circuit: tuple[Any, Any]) -> None:
    """The constraint system's A·z, B·z, C·z, and the PCE's sparse products of z (rows past 52: padding)."""
    m, _ = circuit
    cs = _synthesized(7, 11)
    z, domain = cs.assignment(), qap.domain_for(m)
    want = fr_limbs(qap.h_coefficients(cs.a, cs.b, cs.c, domain))
    assert (hostcuda.asnumpy(ntt.witness_map(cs.a, cs.b, cs.c, domain)) == want).all()
    h, z_dev = ntt.witness_map_pce(m, z, domain)
    assert (hostcuda.asnumpy(h) == want).all()
    assert (hostcuda.asnumpy(z_dev) == fr_limbs(z)).all()


def test_gpu_proofs_are_the_cpu_proofs(gpu: SimpleNamespace, circuit: tuple[Any, Any]) -> None:
    """``GpuKeys`` proves a batch (h, z from either witness map or the host) as the CPU does: they verify."""
    m, pk = circuit
    keys, domain = gpu.keys.GpuKeys(gpu.device), qap.domain_for(m)
    witnesses = [(3, 5), (7, 11), (13, 17)]
    one, two = (_synthesized(x, y) for x, y in witnesses[:2])
    on_device = [
        keys.witness_map(one.a, one.b, one.c, one.assignment(), domain),
        keys.witness_map_pce(m, two.assignment(), domain),
    ]
    inputs = [ProofInput(pk, [], [], h, z) for h, z in on_device] + [proof_input(pk, m, *witnesses[2])]
    cpu_inputs = [proof_input(pk, m, x, y) for x, y in witnesses]
    rnd = random.Random(0)
    blinding = [(rnd.randrange(R), rnd.randrange(R)) for _ in witnesses]
    proofs = groth16.create_proofs(inputs, blinding, device=keys)
    cpu = groth16.create_proofs(cpu_inputs, blinding)
    assert [p.to_bytes() for p in proofs] == [p.to_bytes() for p in cpu]
    for (x, y), proof in zip(witnesses, proofs, strict=True):
        assert groth16.verify(pk.vk, [x, hash_n([x, y])], proof)

"""Groth16 over BLS12-381: setup, prove, verify (Groth, EUROCRYPT 2016).

Laid out as arkworks' groth16: the random wrappers (``generate_random_parameters``,
``create_random_proofs``) sample the toxic waste / the blinding pair (r, s) and
call deterministic cores that take them as arguments. Names follow the paper:
``alpha_g1`` is [alpha]_1, ``gamma_abc_g1`` the input part of the verifying key
([(beta u_j + alpha v_j + w_j) / gamma]_1, "IC" in older code), ``l_query`` the
auxiliary part over delta, ``h_query`` [tau^i Z(tau) / delta]_1.

Curve work goes through py-arkworks-bls12381; its MSMs release the GIL, so the
prover splits them over a thread pool. A ``DeviceProver`` (the GPU prover) may take a proof's
five MSMs instead (four in G1, B's in G2). A ``ProofInput`` already holds native
``Scalar``s: converting Python ints is GIL-bound work that belongs with synthesis,
not in the stage that should only run MSMs. Key files are read and written by ``keyfile``.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from py_arkworks_bls12381 import GT, G1Point, G2Point, Scalar

from pytest_cuzk.refengine.field import R, inv
from pytest_cuzk.refengine.fixed_base import FixedBase
from pytest_cuzk.refengine.msm_pool import Msm, start_msms
from pytest_cuzk.refengine.qap import domain_for, query_scalars
from pytest_cuzk.refengine.r1cs import Matrices

__all__ = [
    "PROOF_LEN",
    "DeviceProver",
    "PhaseTimer",
    "Proof",
    "ProofInput",
    "ProvingKey",
    "ToxicWaste",
    "VerifyingKey",
    "create_proofs",
    "create_random_proofs",
    "generate_parameters",
    "generate_random_parameters",
    "to_scalars",
    "verify",
    "verify_all",
]

PROOF_LEN = 192


class PhaseTimer:
    """Named phase timers (arkworks' start_timer!/end_timer!), summed across threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.totals: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Add the time spent in the ``with`` body to ``totals[name]``."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0)

    def add(self, name: str, seconds: float) -> None:
        """Add seconds to a phase."""
        with self._lock:
            self.totals[name] = self.totals.get(name, 0.0) + seconds


@dataclass
class VerifyingKey:
    """What a verifier needs: [alpha]_1, [beta]_2, [gamma]_2, [delta]_2 and the input bases."""

    alpha_g1: G1Point
    beta_g2: G2Point
    gamma_g2: G2Point
    delta_g2: G2Point
    gamma_abc_g1: list[G1Point]


@dataclass
class ProvingKey:
    """The prover's parameters; ``a_density``/``b_density`` list the variables with non-zero u_j / v_j."""

    vk: VerifyingKey
    beta_g1: G1Point
    delta_g1: G1Point
    a_query: list[G1Point]
    b_g1_query: list[G1Point]
    b_g2_query: list[G2Point]
    h_query: list[G1Point]
    l_query: list[G1Point]
    a_density: list[int]
    b_density: list[int]
    meta: dict = field(default_factory=dict)

    @property
    def num_inputs(self) -> int:
        """Public inputs including the constant ONE."""
        return len(self.vk.gamma_abc_g1)


@dataclass(frozen=True)
class ToxicWaste:
    """The setup's secrets. Whoever knows them can forge proofs: the random wrapper discards them."""

    tau: int
    alpha: int
    beta: int
    gamma: int
    delta: int


@dataclass
class Proof:
    """A Groth16 proof: A in G1, B in G2, C in G1."""

    a: G1Point
    b: G2Point
    c: G1Point

    def to_bytes(self) -> bytes:
        """192 bytes A|B|C, compressed (zcash/blstrs encoding, as cuzk writes proofs)."""
        return self.a.to_compressed_bytes() + self.b.to_compressed_bytes() + self.c.to_compressed_bytes()

    @classmethod
    def from_bytes(cls, raw: bytes) -> Proof:
        """Decode and subgroup-check; raises ValueError for a wrong length or an invalid point."""
        if len(raw) != PROOF_LEN:
            raise ValueError(f"a Groth16 proof is {PROOF_LEN} bytes, got {len(raw)}")
        try:
            return cls(
                G1Point.from_compressed_bytes(raw[:48]),
                G2Point.from_compressed_bytes(raw[48:144]),
                G1Point.from_compressed_bytes(raw[144:]),
            )
        except Exception as exc:  # the binding raises its own exception types for bad encodings
            raise ValueError(f"invalid point encoding in proof: {exc}") from exc


def _rand_nonzero() -> int:
    return secrets.randbelow(R - 1) + 1


def generate_random_parameters(m: Matrices, timer: PhaseTimer | None = None) -> ProvingKey:
    """Trusted setup with fresh random toxic waste, which is dropped afterwards."""
    t = ToxicWaste(*(_rand_nonzero() for _ in range(5)))
    return generate_parameters(m, t, timer)


def generate_parameters(m: Matrices, t: ToxicWaste, timer: PhaseTimer | None = None) -> ProvingKey:
    """Deterministic trusted setup for the R1CS ``m`` from the given toxic waste."""
    timer = timer or PhaseTimer()
    domain = domain_for(m)
    with timer.phase("setup: QAP at tau"):
        u, v, w = query_scalars(m, t.tau)
        gamma_inv, delta_inv = inv(t.gamma), inv(t.delta)
        k = [(t.beta * ui + t.alpha * vi + wi) % R for ui, vi, wi in zip(u, v, w, strict=True)]
        zt_delta = (pow(t.tau, domain.size, R) - 1) * delta_inv % R
        h_scalars = [pow(t.tau, i, R) * zt_delta % R for i in range(domain.size - 1)]
    g1, g2 = FixedBase(G1Point(), G1Point.identity()), FixedBase(G2Point(), G2Point.identity())
    with timer.phase("setup: G1 bases"):
        a_density = [j for j, x in enumerate(u) if x]
        b_density = [j for j, x in enumerate(v) if x]
        ni = m.num_inputs
        pk = ProvingKey(
            vk=VerifyingKey(
                alpha_g1=g1.mul(t.alpha),
                beta_g2=g2.mul(t.beta),
                gamma_g2=g2.mul(t.gamma),
                delta_g2=g2.mul(t.delta),
                gamma_abc_g1=g1.muls([x * gamma_inv % R for x in k[:ni]]),
            ),
            beta_g1=g1.mul(t.beta),
            delta_g1=g1.mul(t.delta),
            a_query=g1.muls([u[j] for j in a_density]),
            b_g1_query=g1.muls([v[j] for j in b_density]),
            b_g2_query=[],
            h_query=g1.muls(h_scalars),
            l_query=g1.muls([x * delta_inv % R for x in k[ni:]]),
            a_density=a_density,
            b_density=b_density,
        )
    with timer.phase("setup: G2 bases"):
        pk.b_g2_query = g2.muls([v[j] for j in b_density])
    pk.meta.update(
        num_inputs=ni, num_aux=m.num_aux, num_constraints=m.num_constraints, domain_size=domain.size
    )
    return pk


def to_scalars(values: Sequence[int]) -> list[Scalar]:
    """Field elements (Python ints) as native scalars, the form MSMs take.

    Through 32 canonical little-endian bytes: about 25 times faster than ``Scalar(int)``, which
    matters because every proof converts its whole assignment and h(x).
    """
    from_le = Scalar.from_le_bytes
    return [from_le((x % R).to_bytes(32, "little")) for x in values]


@dataclass
class ProofInput:
    """One proof to make: the key, the full assignment z and h's coefficients (from the witness map).

    ``h_limbs``: h already on the GPU (the GPU witness map's output, an (n - 1, 8) limb array),
    which only a ``DeviceProver`` reads; ``h`` is then empty. ``z_limbs``: z on the GPU too (the
    sparse products' input), and ``z`` empty, for the same reason.
    """

    pk: ProvingKey
    z: list[Scalar]
    h: list[Scalar]
    h_limbs: Any = field(default=None, repr=False)
    z_limbs: Any = field(default=None, repr=False)

    @classmethod
    def from_ints(cls, pk: ProvingKey, z: Sequence[int], h: Sequence[int]) -> ProofInput:
        """Convert z and h from Python ints."""
        return cls(pk, to_scalars(z), to_scalars(h))


def _msm_jobs(inp: ProofInput) -> list[Msm]:
    """The five MSMs of one proof, in the order ``_assemble`` expects."""
    pk, zs = inp.pk, inp.z
    a_sc = [zs[j] for j in pk.a_density]
    b_sc = [zs[j] for j in pk.b_density]
    return [
        (G1Point, pk.a_query, a_sc),
        (G1Point, pk.b_g1_query, b_sc),
        (G2Point, pk.b_g2_query, b_sc),
        (G1Point, pk.l_query, zs[pk.num_inputs :]),
        (G1Point, pk.h_query, inp.h),
    ]


class DeviceProver(Protocol):
    """Runs a proof's MSMs somewhere other than the CPU pool (``gpu.keys.GpuKeys``)."""

    def sums(self, inputs: Sequence[ProofInput]) -> list[tuple[G1Point, G1Point, G2Point, G1Point, G1Point]]:
        """The A, B (G1), B (G2), L and H query sums of each proof, in order."""
        ...


def _all_sums(
    inputs: Sequence[ProofInput],
    pool: Executor | None,
    threads: int,
    timer: PhaseTimer,
    device: DeviceProver | None,
) -> list:
    """Five sums per proof in ``_msm_jobs`` order: on the pool, or all on ``device``."""
    if device is not None:
        with timer.phase("prove: MSMs (GPU)"):
            return [x for five in device.sums(inputs) for x in five]
    with timer.phase("prove: MSM inputs"):
        jobs = [job for inp in inputs for job in _msm_jobs(inp)]
    with timer.phase("prove: MSM"):
        return start_msms(jobs, pool, threads)()


def create_proofs(
    inputs: Sequence[ProofInput],
    blinding: Sequence[tuple[int, int]],
    pool: Executor | None = None,
    threads: int = 1,
    timer: PhaseTimer | None = None,
    device: DeviceProver | None = None,
) -> list[Proof]:
    """Deterministic core: prove each input with its own (r, s), all MSMs in one pass over ``pool``.

    With ``device`` the MSMs run there instead; the proofs are the same bytes either way.
    """
    timer = timer or PhaseTimer()
    sums = _all_sums(inputs, pool, threads, timer, device)
    with timer.phase("prove: assemble"):
        return [
            _assemble(inp.pk, sums[5 * i : 5 * i + 5], r, s)
            for i, (inp, (r, s)) in enumerate(zip(inputs, blinding, strict=True))
        ]


def _assemble(pk: ProvingKey, sums: list, r: int, s: int) -> Proof:
    a_sum, b1_sum, b2_sum, l_sum, h_sum = sums
    rs, ss = Scalar(r), Scalar(s)
    a = pk.vk.alpha_g1 + a_sum + pk.delta_g1 * rs
    b = pk.vk.beta_g2 + b2_sum + pk.vk.delta_g2 * ss
    b1 = pk.beta_g1 + b1_sum + pk.delta_g1 * ss
    c = l_sum + h_sum + a * ss + b1 * rs - pk.delta_g1 * Scalar(r * s % R)
    return Proof(a, b, c)


def create_random_proofs(
    inputs: Sequence[ProofInput],
    pool: Executor | None = None,
    threads: int = 1,
    timer: PhaseTimer | None = None,
    device: DeviceProver | None = None,
) -> list[Proof]:
    """Zero-knowledge proofs: fresh random (r, s) for each."""
    blinding = [(secrets.randbelow(R), secrets.randbelow(R)) for _ in inputs]
    return create_proofs(inputs, blinding, pool, threads, timer, device)


def _check_arity(vk: VerifyingKey, public_inputs: Sequence[int]) -> None:
    if len(public_inputs) + 1 != len(vk.gamma_abc_g1):
        raise ValueError(
            f"verifying key takes {len(vk.gamma_abc_g1) - 1} public inputs, got {len(public_inputs)}"
        )


def verify(vk: VerifyingKey, public_inputs: Sequence[int], proof: Proof) -> bool:
    """e(A, B) = e(alpha, beta) e(IC(x), gamma) e(C, delta).

    False for a proof that does not verify; ValueError when the number of public
    inputs does not match the key (a malformed call, not a bad proof).
    """
    _check_arity(vk, public_inputs)
    ic = vk.gamma_abc_g1[0]
    if public_inputs:
        ic = ic + G1Point.multiexp_unchecked(vk.gamma_abc_g1[1:], [Scalar(x % R) for x in public_inputs])
    return GT.pairing_check(
        [proof.a, -vk.alpha_g1, -ic, -proof.c], [proof.b, vk.beta_g2, vk.gamma_g2, vk.delta_g2]
    )


def verify_all(vk: VerifyingKey, public_inputs: Sequence[Sequence[int]], proofs: Sequence[Proof]) -> bool:
    """Whether every proof verifies, by one pairing check of a random linear combination of them.

    With random 128-bit weights rho_k: prod e(rho_k A_k, B_k) = e(sum rho_k alpha, beta)
    e(sum rho_k IC(x_k), gamma) e(sum rho_k C_k, delta). A bad proof passes with probability
    about 2^-128, and the P partitions of a proof cost P + 3 Miller loops and one final
    exponentiation instead of 4P and P. False says only that some proof fails: ``verify`` each
    to find which. ValueError as ``verify`` for a wrong number of public inputs.
    """
    if len(proofs) != len(public_inputs):
        raise ValueError(f"{len(proofs)} proofs but {len(public_inputs)} sets of public inputs")
    if len(proofs) <= 1:
        return all(verify(vk, x, p) for x, p in zip(public_inputs, proofs, strict=True))
    for x in public_inputs:
        _check_arity(vk, x)
    rho = [secrets.randbits(128) | 1 for _ in proofs]
    weights = [Scalar(r) for r in rho]
    total = sum(rho) % R
    ic_coeffs = [total] + [sum(r * x[j] for r, x in zip(rho, public_inputs, strict=True)) % R
                           for j in range(len(vk.gamma_abc_g1) - 1)]  # fmt: skip
    ic = G1Point.multiexp_unchecked(vk.gamma_abc_g1, [Scalar(c) for c in ic_coeffs])
    c_sum = G1Point.multiexp_unchecked([p.c for p in proofs], weights)
    lhs = [p.a * w for p, w in zip(proofs, weights, strict=True)]
    return GT.pairing_check(
        [*lhs, -(vk.alpha_g1 * Scalar(total)), -ic, -c_sum],
        [*(p.b for p in proofs), vk.beta_g2, vk.gamma_g2, vk.delta_g2],
    )

"""Groth16 on a tiny circuit: completeness, soundness checks, rerandomisation, key files; plus Fr and hash."""

from __future__ import annotations

import random

import pytest

from pytest_cuzk.refengine import groth16, keyfile, qap
from pytest_cuzk.refengine.field import R, get_domain
from pytest_cuzk.refengine.groth16 import Proof, ProofInput, ToxicWaste
from pytest_cuzk.refengine.hashing import FULL_ROUNDS, PARTIAL_ROUNDS, WIDTH, hash_n, hash_n_gadget
from pytest_cuzk.refengine.r1cs import ConstraintSystem, WitnessCS, enforce_equal

TOXIC = ToxicWaste(tau=11, alpha=22, beta=33, gamma=44, delta=55)


def preimage_circuit(cs: WitnessCS, x: int, y: int) -> None:
    """Public x and H(x, y); private y."""
    xn = cs.alloc_input(x)
    out = cs.alloc_input(hash_n([x, y]))
    enforce_equal(cs, hash_n_gadget(cs, [xn, cs.alloc(y)]), out)
    cs.finish()


@pytest.fixture(scope="module")
def setup():
    cs = ConstraintSystem()
    preimage_circuit(cs, 3, 5)
    m = cs.matrices()
    return m, groth16.generate_parameters(m, TOXIC), cs


def proof_input(pk, m, x: int, y: int) -> ProofInput:
    w = WitnessCS()
    preimage_circuit(w, x, y)
    z = w.assignment()
    h = qap.h_coefficients(m.a.matvec(z), m.b.matvec(z), m.c.matvec(z), qap.domain_for(m))
    return ProofInput.from_ints(pk, z, h)


def test_prove_and_verify(setup):
    m, pk, _ = setup
    proof = groth16.create_random_proofs([proof_input(pk, m, 3, 5)])[0]
    assert groth16.verify(pk.vk, [3, hash_n([3, 5])], proof)
    assert not groth16.verify(pk.vk, [4, hash_n([3, 5])], proof)


def test_tampered_proof_does_not_verify(setup):
    m, pk, _ = setup
    raw = bytearray(groth16.create_random_proofs([proof_input(pk, m, 3, 5)])[0].to_bytes())
    good = Proof.from_bytes(bytes(raw))
    swapped = Proof(good.a, good.b, good.a)
    assert not groth16.verify(pk.vk, [3, hash_n([3, 5])], swapped)
    raw[10] ^= 0x01
    try:
        bad = Proof.from_bytes(bytes(raw))
    except ValueError:
        return  # not even a curve point: rejected at decoding
    assert not groth16.verify(pk.vk, [3, hash_n([3, 5])], bad)


def test_wrong_input_count_raises(setup):
    m, pk, _ = setup
    proof = groth16.create_random_proofs([proof_input(pk, m, 3, 5)])[0]
    with pytest.raises(ValueError, match="takes 2 public inputs, got 1"):
        groth16.verify(pk.vk, [3], proof)


def test_rerandomised_proofs_differ_and_verify(setup):
    m, pk, _ = setup
    inp = proof_input(pk, m, 3, 5)
    p1, p2 = groth16.create_random_proofs([inp, inp])
    assert p1.to_bytes() != p2.to_bytes()
    assert all(groth16.verify(pk.vk, [3, hash_n([3, 5])], p) for p in (p1, p2))


def test_deterministic_core_is_reproducible(setup):
    m, pk, _ = setup
    inp = proof_input(pk, m, 3, 5)
    (a,) = groth16.create_proofs([inp], [(7, 9)])
    (b,) = groth16.create_proofs([inp], [(7, 9)])
    (nozk,) = groth16.create_proofs([inp], [(0, 0)])
    assert a.to_bytes() == b.to_bytes() != nozk.to_bytes()
    assert groth16.verify(pk.vk, [3, hash_n([3, 5])], nozk)


def test_unsatisfied_witness_gives_invalid_proof(setup):
    m, pk, _ = setup
    w = WitnessCS()
    preimage_circuit(w, 3, 5)
    w.inputs[2] = (w.inputs[2] + 1) % R  # claim a wrong hash output
    z = w.assignment()
    h = qap.h_coefficients(m.a.matvec(z), m.b.matvec(z), m.c.matvec(z), qap.domain_for(m))
    (proof,) = groth16.create_random_proofs([ProofInput.from_ints(pk, z, h)])
    assert not groth16.verify(pk.vk, z[1:3], proof)


def test_key_files_round_trip(setup, tmp_path):
    m, pk, _ = setup
    pk.meta.update(num_constraints=m.num_constraints, shape={"x": 1})
    keyfile.write_params(tmp_path / "k.params", pk)
    keyfile.write_vk(tmp_path / "k.vk", pk.vk, pk.meta)
    assert not list(tmp_path.glob("*.tmp"))
    pk2 = keyfile.read_params(tmp_path / "k.params")
    vk2, meta = keyfile.read_vk(tmp_path / "k.vk")
    assert meta["shape"] == {"x": 1} == keyfile.read_meta(tmp_path / "k.params")["shape"]
    proof = groth16.create_random_proofs([proof_input(pk2, m, 3, 5)])[0]
    assert groth16.verify(vk2, [3, hash_n([3, 5])], proof)
    (tmp_path / "short.vk").write_bytes((tmp_path / "k.vk").read_bytes()[:-10])
    with pytest.raises(ValueError, match=r"short\.vk"):
        keyfile.read_vk(tmp_path / "short.vk")
    (tmp_path / "bad.params").write_bytes(b"NOTAKEY!" + bytes(20))
    with pytest.raises(ValueError, match="bad magic"):
        keyfile.read_params(tmp_path / "bad.params")


def test_fft_round_trips():
    rng = random.Random(1)
    d = get_domain(16)
    coeffs = [rng.randrange(R) for _ in range(16)]
    assert d.ifft(d.fft(coeffs)) == coeffs
    assert d.coset_ifft(d.coset_fft(coeffs)) == coeffs
    x = 5
    evals = d.fft(coeffs)
    assert (
        sum(lv * e for lv, e in zip(d.lagrange_at(x), evals, strict=True)) % R
        == sum(c * pow(x, i, R) for i, c in enumerate(coeffs)) % R
    )


def test_hash_gadget_matches_native_and_costs_three_constraints_per_sbox():
    cs = ConstraintSystem()
    out = hash_n_gadget(cs, [cs.alloc(1), cs.alloc(2), cs.alloc(3)])
    assert out.value == hash_n([1, 2, 3]) != hash_n([1, 2, 4])
    assert cs.first_unsatisfied() is None
    assert len(cs.rows) == 2 * 3 * (FULL_ROUNDS * WIDTH + PARTIAL_ROUNDS)
    assert hash_n([1, 2]) != hash_n([1, 2, 0])

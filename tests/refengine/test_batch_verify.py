"""The self-check every proof passes before COMPLETED: all partitions in one pairing check.

``groth16.verify_all`` weighs the partitions by random 128-bit factors and checks them in one
pairing product; it must agree with ``verify`` of each partition, whichever partition is bad.
The check runs on the CPU for either prover.
"""

from __future__ import annotations

import pytest

from pytest_cuzk.refengine import keyfile
from pytest_cuzk.refengine.field import R
from pytest_cuzk.refengine.groth16 import Proof, verify, verify_all
from pytest_cuzk.refengine.prover import RefProver
from pytest_cuzk.refengine.verify import first_bad_partition
from pytest_cuzk.vocab.kinds import KINDS


@pytest.fixture(scope="module")
def porep(ref_data, ref_params):
    prover = RefProver(ref_params)
    try:
        job = prover.parse(KINDS["porep"], ref_data.request("porep"))
        proof = b"".join(prover.prove([prover.synthesize(job, k) for k in range(job.partitions)]))
        vk = keyfile.read_params(prover.params_path(job.kind.circuit_id)).vk
        return vk, job.inputs, proof
    finally:
        prover.close()


def _pieces(proof: bytes) -> list[Proof]:
    return [Proof.from_bytes(proof[k : k + 192]) for k in range(0, len(proof), 192)]


def test_all_partitions_of_a_good_proof_pass_at_once(porep):
    vk, inputs, proof = porep
    publics = [inputs.public_inputs(k) for k in range(inputs.partitions)]
    assert verify_all(vk, publics, _pieces(proof))
    assert first_bad_partition(vk, inputs, proof) is None


@pytest.mark.parametrize("bad", [0, 4, 9])
def test_one_bad_partition_fails_the_batch_and_is_named(porep, bad):
    vk, inputs, proof = porep
    pieces = _pieces(proof)
    publics = [inputs.public_inputs(k) for k in range(inputs.partitions)]
    pieces[bad] = Proof(pieces[bad].a, pieces[bad].b, pieces[bad].c + pieces[bad].c)  # valid points
    assert not verify(vk, publics[bad], pieces[bad])
    assert not verify_all(vk, publics, pieces)
    tampered = b"".join(p.to_bytes() for p in pieces)
    assert first_bad_partition(vk, inputs, tampered) == bad


def test_swapped_public_inputs_fail_the_batch(porep):
    vk, inputs, proof = porep
    publics = [inputs.public_inputs(k) for k in range(inputs.partitions)]
    publics[1], publics[2] = publics[2], publics[1]
    assert not verify_all(vk, publics, _pieces(proof))
    bumped = [list(x) for x in publics]
    bumped[1], bumped[2] = bumped[2], bumped[1]
    bumped[3][0] = (bumped[3][0] + 1) % R
    assert not verify_all(vk, bumped, _pieces(proof))


def test_a_wrong_number_of_public_inputs_is_a_value_error(porep):
    vk, inputs, proof = porep
    publics = [inputs.public_inputs(k) for k in range(inputs.partitions)]
    with pytest.raises(ValueError, match="public inputs"):
        verify_all(vk, [*publics[:-1], [*publics[-1], 1]], _pieces(proof))

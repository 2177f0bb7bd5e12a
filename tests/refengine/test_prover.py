"""RefProver end to end for every kind: setup, PCE, proofs that verify, self-check, bad inputs."""

from __future__ import annotations

import base64
import json
import sys

import pytest
from helpers.engine_support import copy_params, set_fields

from pytest_cuzk.data.inputs import build_request
from pytest_cuzk.refengine import gendata
from pytest_cuzk.refengine.prover import JobInputError, RefProver
from pytest_cuzk.refengine.verify import verify_proof
from pytest_cuzk.vocab.kinds import KINDS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    return out, tomllib.loads(gendata.generate(out).read_text())


@pytest.fixture(scope="module")
def cache(tmp_path_factory, ref_params):
    """A cache of its own, for the PCE files this module watches appear, with the session's keys.

    The trusted setups are the session's (once per test run), not this module's own.
    """
    out = tmp_path_factory.mktemp("params")
    for kind in KINDS.values():
        copy_params(ref_params, out, kind.circuit_id)
    return out


@pytest.fixture(scope="module")
def prover(cache):
    p = RefProver(cache, threads=2)
    yield p
    p.close()


def request_for(data, name, **changes):
    out, manifest = data
    entry = manifest["kinds"][name][0]
    req = build_request(KINDS[name], out / entry["file"], {**entry["request"], **changes})
    return req


def prove(prover, req, name):
    job = prover.parse(KINDS[name], req)
    parts = [prover.synthesize(job, k) for k in range(job.partitions)]
    return job, parts, b"".join(prover.prove(parts))


@pytest.fixture(scope="module")
def proofs(prover, data):
    """One proof per kind (the first: PCE extraction) then a second one (PCE path)."""
    out = {}
    for name in KINDS:
        req = request_for(data, name)
        first = prove(prover, req, name)
        out[name] = (req, first, prove(prover, req, name))
    return out


@pytest.mark.parametrize("name", list(KINDS))
def test_proof_verifies_and_a_flipped_byte_does_not(name, proofs, prover, cache):
    kind = KINDS[name]
    req, (job, parts, proof), _ = proofs[name]
    assert len(proof) == kind.proof_len
    assert [p.partition for p in parts] == list(range(kind.partitions))
    assert prover.first_bad_partition(job, proof) is None
    assert verify_proof(cache, kind, req, proof)
    assert verify_proof(cache, kind, req, proof, preset="default")
    flipped = bytearray(proof)
    flipped[len(proof) - 100] ^= 0x01
    assert not verify_proof(cache, kind, req, bytes(flipped))
    assert prover.first_bad_partition(job, bytes(flipped)) is not None
    assert not verify_proof(cache, kind, req, proof[:-1])


@pytest.mark.parametrize("name", list(KINDS))
def test_first_synthesis_extracts_the_pce_and_later_ones_use_it(name, proofs, cache):
    kind = KINDS[name]
    req, (_, first, _), (_, second, proof) = proofs[name]
    assert not first[0].used_pce and all(p.used_pce for p in first[1:])
    assert all(p.used_pce for p in second)
    assert (cache / kind.pce_file).exists() and not list(cache.glob("*.tmp"))
    assert verify_proof(cache, kind, req, proof)


def test_restart_reuses_params_and_pce(proofs, cache, data):
    params = sorted(cache.glob("*.params"))
    mtimes = [p.stat().st_mtime_ns for p in params]
    assert len(params) == 4
    fresh = RefProver(cache, threads=1)
    try:
        req = request_for(data, "winning")
        job, parts, proof = prove(fresh, req, "winning")
        assert parts[0].used_pce
        assert fresh.first_bad_partition(job, proof) is None
        assert "setup" not in fresh.timings()
        assert [p.stat().st_mtime_ns for p in params] == mtimes
    finally:
        fresh.close()


def test_porep_with_the_wrong_miner_fails_the_self_check(proofs, prover, data, cache):
    _, (_, _, proof), _ = proofs["porep"]
    for change in ({"miner_id": 1001}, {"sector_number": 2}):
        req = request_for(data, "porep", **change)
        job = prover.parse(KINDS["porep"], req)
        assert prover.first_bad_partition(job, proof) == 0
        assert not verify_proof(cache, KINDS["porep"], req, proof)
    assert verify_proof(cache, KINDS["porep"], request_for(data, "porep"), proof)


def test_srs_bookkeeping(proofs, prover):
    loaded = dict(prover.loaded())
    assert set(loaded) == {k.circuit_id for k in KINDS.values()} and all(v > 0 for v in loaded.values())
    assert prover.preload("wpost-32g") == (True, 0.0)
    assert prover.evict("wpost-32g") == (True, loaded["wpost-32g"])
    assert prover.evict("wpost-32g") == (False, 0)
    already, seconds = prover.preload("wpost-32g")
    assert not already and seconds > 0
    with pytest.raises(KeyError, match="unknown circuit ID: nope"):
        prover.preload("nope")
    with pytest.raises(ValueError, match="porep-64g is not supported"):
        prover.preload("porep-64g")


def test_verify_proof_needs_the_vk(tmp_path, proofs):
    req, (_, _, proof), _ = proofs["wpost"]
    with pytest.raises(ValueError, match="no reference-engine verifying key for wpost-32g"):
        verify_proof(tmp_path, KINDS["wpost"], req, proof)


def _c1(wrapper=None, inner_changes=None, raw_inner=None):
    def build(req):
        w = json.loads(req.vanilla_proof)
        inner = json.loads(base64.b64decode(w["Phase1Out"]))
        inner.update(inner_changes or {})
        w["Phase1Out"] = base64.b64encode(raw_inner or json.dumps(inner).encode()).decode()
        w.update(wrapper or {})
        req.vanilla_proof = json.dumps(w).encode()

    return build


def _set(**fields):
    return lambda req: set_fields(req, **fields)


BAD = [
    ("porep", _set(vanilla_proof=b""), "C1 parse failed: failed to parse C1 output wrapper JSON"),
    ("porep", _set(vanilla_proof=b'{"SectorNum": 1}'),
     "C1 parse failed: failed to parse C1 output wrapper JSON"),
    ("porep", _c1(wrapper={"Phase1Out": "!!"}), "C1 parse failed: failed to decode base64 Phase1Output"),
    ("porep", _c1(raw_inner=b"{"), "C1 parse failed: failed to deserialize SealCommitPhase1Output from JSON"),
    ("porep", _c1(wrapper={"SectorSize": 2048}),
     "C1 parse failed: pipelined synthesis currently supports only 32 GiB sectors, got 2048 bytes"),
    ("porep", _c1(inner_changes={"comm_d": [0] * 32}), "C1 parse failed: invalid comm_d: all zeros"),
    ("porep", _c1(inner_changes={"seed": [0] * 32}), "C1 parse failed: invalid seed: all zeros"),
    ("snap", _set(registered_proof=9), "SnapDeals parse failed: invalid registered proof for SnapDeals"),
    ("snap", _set(comm_r_old=b""), "SnapDeals parse failed: comm_r_old must be exactly 32 bytes, got 0"),
    ("snap", _set(comm_d_new=b"\xff" * 32),
     "SnapDeals parse failed: comm_d_new is not a valid field element"),
    ("snap", _set(vanilla_proofs=[b"RSN1junk"]),
     "SnapDeals parse failed: failed to deserialize SnapDeals partition proof: partition 0: unexpected end"),
    ("wpost", _set(registered_proof=3), "synthesis failed: invalid registered proof for WindowPoSt"),
    ("wpost", _set(registered_proof=15), "synthesis failed: unknown RegisteredPoStProof value: 15"),
    ("winning", _set(registered_proof=13), "synthesis failed: invalid registered proof for WinningPoSt"),
    ("winning", _set(randomness=b"abc"), "synthesis failed: randomness must be exactly 32 bytes, got 3"),
    ("wpost", _set(randomness=b"\xff" * 32), "synthesis failed: randomness is not a valid BLS12-381"),
    ("wpost", _set(vanilla_proofs=[b"nope"]),
     "synthesis failed: failed to deserialize WindowPoSt vanilla proof: sector 0: bad tag"),
    ("winning", _set(vanilla_proofs=[b"RPS1"]),
     "synthesis failed: failed to deserialize WinningPoSt vanilla proof: sector 0: unexpected end"),
    ("wpost", _set(vanilla_proofs=[]), "synthesis panicked: index out of bounds"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "mutate", "message"), BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_bad_input_gives_cuzks_message(name, mutate, message, prover, data):
    req = request_for(data, name)
    mutate(req)
    with pytest.raises(JobInputError) as info:
        prover.parse(KINDS[name], req)
    assert str(info.value).startswith(message)


def test_snap_with_too_few_partitions_fails_at_that_partition(prover, data):
    req = request_for(data, "snap")
    del req.vanilla_proofs[12:]
    job = prover.parse(KINDS["snap"], req)
    with pytest.raises(
        JobInputError, match=r"^partition 12 synthesis failed: partition 12 >= vanilla_proofs.len\(\) 12$"
    ):
        prover.synthesize(job, 12)


def test_unknown_preset_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown reference preset 'tiny'"):
        RefProver(tmp_path, preset="tiny")

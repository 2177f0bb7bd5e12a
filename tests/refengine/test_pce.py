"""PCE files: round trip, cuzk's header, rejection of damaged files, and equality with the CS path."""

from __future__ import annotations

import struct
import sys

import pytest

from pytest_cuzk.data.inputs import build_request
from pytest_cuzk.refengine import gendata, groth16, qap
from pytest_cuzk.refengine.circuits import PRESETS
from pytest_cuzk.refengine.circuits.registry import circuit_for
from pytest_cuzk.refengine.groth16 import ProofInput, ToxicWaste
from pytest_cuzk.refengine.pce import HEADER, PceError, constraint_digest, load_pce, pce_path, write_pce
from pytest_cuzk.refengine.r1cs import ConstraintSystem, WitnessCS
from pytest_cuzk.vocab.kinds import KINDS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PRESET = PRESETS["default"]


@pytest.fixture(scope="module")
def winning_cs():
    circuit = circuit_for("winning-32g")
    cs = ConstraintSystem()
    circuit.synthesize(cs, PRESET, circuit.blank(PRESET))
    return cs


def test_round_trip_and_header(winning_cs, tmp_path):
    m = winning_cs.matrices()
    path = write_pce(tmp_path, "winning-post", m)
    assert path == pce_path(tmp_path, "winning-post") == tmp_path / "pce-winning-post.bin"
    assert not (tmp_path / "pce-winning-post.tmp").exists()
    raw = path.read_bytes()
    magic, version, ni, na, nc, nnz, reserved = struct.unpack("<4sIIIIQI", raw[:32])
    assert (magic, version, reserved) == (b"PCE\x02", 2, 0)
    assert (ni, na, nc, nnz) == (m.num_inputs, m.num_aux, m.num_constraints, m.nnz)
    back = load_pce(path)
    assert (back.num_inputs, back.num_aux, back.num_constraints, back.nnz) == (ni, na, nc, nnz)
    for x, y in ((back.a, m.a), (back.b, m.b), (back.c, m.c)):
        assert (list(x.row_ptr), list(x.cols), x.vals) == (list(y.row_ptr), list(y.cols), y.vals)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda raw: b"XCE\x02" + raw[4:], "not a PCE file"),
        (lambda raw: raw[:4] + struct.pack("<I", 3) + raw[8:], "version 3 is not supported"),
        (lambda raw: raw[:-41], "truncated PCE file while reading C vals"),
        (lambda raw: raw[:-7], "truncated PCE file while reading constraint digest"),
        (lambda raw: raw[:20], "truncated PCE file"),
        (lambda raw: raw + b"\0", "1 unexpected trailing bytes"),
    ],
)
def test_damaged_files_are_rejected(winning_cs, tmp_path, damage, message):
    path = write_pce(tmp_path, "winning-post", winning_cs.matrices())
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(PceError, match=message) as info:
        load_pce(path)
    assert str(path) in str(info.value)


def test_a_changed_coefficient_or_another_circuits_file_is_rejected(winning_cs, tmp_path):
    m = winning_cs.matrices()
    path = write_pce(tmp_path, "winning-post", m)
    raw = bytearray(path.read_bytes())
    last_val = len(raw) - 40 - 32  # the C matrix's last value, just before the digest section
    raw[last_val] ^= 1  # still a field element, another coefficient
    path.write_bytes(bytes(raw))
    with pytest.raises(PceError, match="do not match its constraint digest"):
        load_pce(path)
    circuit = circuit_for("wpost-32g")
    other = ConstraintSystem()
    circuit.synthesize(other, PRESET, circuit.blank(PRESET))
    wrong = write_pce(tmp_path, "winning-post", other.matrices())  # intact, but of WindowPoSt
    assert load_pce(wrong).num_constraints == other.matrices().num_constraints
    with pytest.raises(PceError, match="holds another circuit"):
        load_pce(wrong, constraint_digest(m))
    assert load_pce(write_pce(tmp_path, "winning-post", m), constraint_digest(m)).nnz == m.nnz


def test_nnz_mismatch_is_rejected(winning_cs, tmp_path):
    path = write_pce(tmp_path, "winning-post", winning_cs.matrices())
    raw = path.read_bytes()
    nnz = HEADER.unpack_from(raw)[5]
    path.write_bytes(raw[:20] + struct.pack("<Q", nnz + 1) + raw[28:])
    with pytest.raises(PceError, match="non-zeros"):
        load_pce(path)


@pytest.mark.e2e  # real proofs
def test_pce_path_gives_the_same_witness_and_proof_as_the_cs_path(tmp_path):
    circuit = circuit_for("wpost-32g")
    blank = ConstraintSystem()
    circuit.synthesize(blank, PRESET, circuit.blank(PRESET))
    m = load_pce(write_pce(tmp_path, "window-post", blank.matrices()))
    manifest = gendata.generate(tmp_path / "data")
    fields = tomllib.loads(manifest.read_text())["kinds"]["wpost"][0]["request"]
    req = build_request(KINDS["wpost"], tmp_path / "data" / "wpost-vanilla.json", fields)
    witness = circuit.parse(req, PRESET).witness(0)
    cs, w = ConstraintSystem(), WitnessCS()
    circuit.synthesize(cs, PRESET, witness)
    circuit.synthesize(w, PRESET, witness)
    z = w.assignment()
    assert z == cs.assignment() and cs.first_unsatisfied() is None
    assert (m.a.matvec(z), m.b.matvec(z), m.c.matvec(z)) == (cs.a, cs.b, cs.c)
    pk = groth16.generate_parameters(m, ToxicWaste(3, 5, 7, 11, 13))
    domain = qap.domain_for(m)
    via_cs = ProofInput.from_ints(pk, cs.assignment(), qap.h_coefficients(cs.a, cs.b, cs.c, domain))
    via_pce = ProofInput.from_ints(
        pk, z, qap.h_coefficients(m.a.matvec(z), m.b.matvec(z), m.c.matvec(z), domain)
    )
    p1, p2 = groth16.create_proofs([via_cs, via_pce], [(1, 2), (1, 2)])
    assert p1.to_bytes() == p2.to_bytes()
    assert groth16.verify(pk.vk, z[1 : m.num_inputs], p1)

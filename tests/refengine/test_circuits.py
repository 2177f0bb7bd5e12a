"""Each reference circuit is satisfied by generated data and unsatisfied by a tweaked input."""

from __future__ import annotations

import dataclasses
import sys

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from pytest_cuzk.data.inputs import build_request
from pytest_cuzk.refengine import gendata
from pytest_cuzk.refengine.circuits import PRESETS
from pytest_cuzk.refengine.circuits.registry import circuit_for
from pytest_cuzk.refengine.field import R
from pytest_cuzk.refengine.r1cs import ConstraintSystem
from pytest_cuzk.vocab.kinds import KINDS

PRESET = PRESETS["default"]


@pytest.fixture(scope="module")
def requests_by_kind(tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    manifest = tomllib.loads(gendata.generate(out).read_text())
    return {
        name: build_request(
            kind, out / manifest["kinds"][name][0]["file"], manifest["kinds"][name][0]["request"]
        )
        for name, kind in KINDS.items()
    }


def run(circuit_id, witness) -> ConstraintSystem:
    cs = ConstraintSystem()
    circuit_for(circuit_id).synthesize(cs, PRESET, witness)
    return cs


def tweak(name: str, w):
    """Change one private vanilla value of partition/sector 0, challenge 0."""
    if name == "porep":
        node = dataclasses.replace(w.nodes[0], data=(w.nodes[0].data + 1) % R)
        return dataclasses.replace(w, nodes=(node, *w.nodes[1:]))
    if name == "snap":
        node = dataclasses.replace(w.part.nodes[0], old=(w.part.nodes[0].old + 1) % R)
        part = dataclasses.replace(w.part, nodes=(node, *w.part.nodes[1:]))
        return dataclasses.replace(w, part=part)
    sector = w.sectors[0]
    sector = dataclasses.replace(sector, leaves=((sector.leaves[0] + 1) % R, *sector.leaves[1:]))
    return dataclasses.replace(w, sectors=(sector, *w.sectors[1:]))


@pytest.mark.parametrize("name", list(KINDS))
def test_generated_data_satisfies_every_partition(name, requests_by_kind):
    kind = KINDS[name]
    inputs = circuit_for(kind.circuit_id).parse(requests_by_kind[name], PRESET)
    assert inputs.partitions == kind.partitions
    for k in range(inputs.partitions):
        cs = run(kind.circuit_id, inputs.witness(k))
        assert cs.first_unsatisfied() is None, f"partition {k}"
        assert cs.inputs[1:] == inputs.public_inputs(k)


@pytest.mark.parametrize("name", list(KINDS))
def test_tweaked_vanilla_value_is_unsatisfied(name, requests_by_kind):
    kind = KINDS[name]
    inputs = circuit_for(kind.circuit_id).parse(requests_by_kind[name], PRESET)
    assert run(kind.circuit_id, tweak(name, inputs.witness(0))).first_unsatisfied() is not None


@pytest.mark.parametrize("name", list(KINDS))
def test_circuit_shape_does_not_depend_on_the_witness(name, requests_by_kind):
    kind = KINDS[name]
    circuit = circuit_for(kind.circuit_id)
    real = run(kind.circuit_id, circuit.parse(requests_by_kind[name], PRESET).witness(0)).matrices()
    blank = run(kind.circuit_id, circuit.blank(PRESET)).matrices()
    assert (real.num_inputs, real.num_aux, real.num_constraints) == (
        blank.num_inputs,
        blank.num_aux,
        blank.num_constraints,
    )
    assert real.a.cols == blank.a.cols and real.c.vals == blank.c.vals
    assert real.num_constraints <= 1024  # the default preset stays within a 1024-point domain


def test_porep_public_inputs_follow_the_requests_miner(requests_by_kind):
    req = requests_by_kind["porep"]
    good = circuit_for("porep-32g").parse(req, PRESET)
    req.miner_id += 1
    wrong = circuit_for("porep-32g").parse(req, PRESET)
    assert run("porep-32g", wrong.witness(0)).inputs[1:] == good.public_inputs(0) != wrong.public_inputs(0)


def test_wpost_challenges_depend_on_randomness_and_partition(requests_by_kind):
    req = requests_by_kind["wpost"]
    base = circuit_for("wpost-32g").parse(req, PRESET).public_inputs(0)
    req.partition_index = 1
    assert circuit_for("wpost-32g").parse(req, PRESET).public_inputs(0) != base
    req.partition_index = 0
    req.randomness = bytes(32)
    assert circuit_for("wpost-32g").parse(req, PRESET).public_inputs(0) != base

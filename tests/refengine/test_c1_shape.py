"""cuzk-ref's C1 files have the real inner shape, and a real-shaped C1 is read, not misread.

filecoin-proofs-api's ``SealCommitPhase1Output`` serialises ``vanilla_proofs`` as serde writes
the ``VanillaSealProof`` enum: keyed by the shape (``StackedDrg32GiBV1`` for every 32 GiB
registered proof), a list per partition of ``stacked::Proof`` per challenge, each with
``comm_d_proofs``, ``comm_r_last_proof``, ``replica_column_proofs``, ``labeling_proofs`` and
``encoding_proof``. The real-seal sample below is built from that definition.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from pytest_cuzk.data.inputs import build_request
from pytest_cuzk.refengine import gendata
from pytest_cuzk.refengine.circuits import PRESETS
from pytest_cuzk.refengine.prover import JobInputError, RefProver
from pytest_cuzk.vocab.kinds import KINDS
from pytest_cuzk.vocab.vanilla import format_problem

SHAPE = "StackedDrg32GiBV1"
REAL_CHALLENGE = {  # one stacked::Proof as filecoin-proofs writes it, paths cut short
    "comm_d_proofs": {"data": {"Single": {"root": [1] * 32, "leaf": [2] * 32, "path": [[[[3] * 32], 0]]}}},
    "comm_r_last_proof": {"data": {"Top": {"base_proof": {}, "sub_proof": {}, "root": [4] * 32}}},
    "replica_column_proofs": {"c_x": {"column": {"index": 7, "rows": [[5] * 32] * 11}}, "drg_parents": [],
                              "exp_parents": []},
    "labeling_proofs": [{"parents": [[6] * 32] * 14, "layer_index": 1, "node": 7}],
    "encoding_proof": {"parents": [[6] * 32] * 14, "layer_index": 11, "node": 7},
}  # fmt: skip


@pytest.fixture(scope="module")
def c1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("data")
    gendata.generate(out, sectors=1)
    return out / "c1.json"


@pytest.fixture(scope="module")
def prover(tmp_path_factory: pytest.TempPathFactory):
    p = RefProver(tmp_path_factory.mktemp("params"), threads=1)
    yield p
    p.close()


def _inner(path: Path) -> dict:
    return json.loads(base64.b64decode(json.loads(path.read_bytes())["Phase1Out"]))


def _with_vanilla(path: Path, vanilla: object) -> bytes:
    wrapper = json.loads(path.read_bytes())
    inner = {**_inner(path), "vanilla_proofs": vanilla}
    wrapper["Phase1Out"] = base64.b64encode(json.dumps(inner).encode()).decode()
    return json.dumps(wrapper).encode()


def test_gen_data_writes_vanilla_proofs_keyed_by_the_proof_shape(c1: Path) -> None:
    inner = _inner(c1)
    assert inner["registered_proof"] == "StackedDrg32GiBV1_1"
    assert list(inner["vanilla_proofs"]) == [SHAPE]
    parts = inner["vanilla_proofs"][SHAPE]
    assert len(parts) == 10 and all(len(p) == PRESETS["default"].porep_challenges for p in parts)
    assert all(
        isinstance(c, dict) and {"comm_c", "comm_r_last", "data_path"} <= set(c) for p in parts for c in p
    )
    assert format_problem("porep", c1.read_bytes()) is None


def test_a_real_seals_c1_is_named_as_such(c1: Path, prover: RefProver) -> None:
    req = build_request(KINDS["porep"], c1, {"miner_id": 1000, "sector_number": 1})
    prover.parse(KINDS["porep"], req)  # its own data parses
    real = [[REAL_CHALLENGE] * 18] * 10
    req.vanilla_proof = _with_vanilla(c1, {SHAPE: real})
    assert format_problem("porep", req.vanilla_proof) is None, "the plugin's check takes a real C1"
    with pytest.raises(JobInputError) as info:
        prover.parse(KINDS["porep"], req)
    assert f"vanilla_proofs.{SHAPE}[0][0] is a real seal's challenge proof (comm_d_proofs," in str(info.value)
    assert "cuzk-ref proves only its own small circuits, on data from `cuzk-ref gen-data`" in str(info.value)


def test_the_old_plain_list_is_refused_saying_the_real_shape(c1: Path, prover: RefProver) -> None:
    req = build_request(KINDS["porep"], c1, {"miner_id": 1000, "sector_number": 1})
    req.vanilla_proof = _with_vanilla(c1, _inner(c1)["vanilla_proofs"][SHAPE])
    with pytest.raises(JobInputError) as info:
        prover.parse(KINDS["porep"], req)
    assert str(info.value).startswith(
        "C1 parse failed: failed to deserialize SealCommitPhase1Output from JSON: "
        f'vanilla_proofs must be keyed by the proof\'s shape, {{"{SHAPE}": [[...], ...]}}, '
        "as filecoin-proofs-api writes it; got list"
    )

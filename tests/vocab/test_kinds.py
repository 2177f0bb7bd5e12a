"""The proof kind table against what cuzk, cuzk-bench and the wire protocol use."""

from __future__ import annotations

import pytest

from pytest_cuzk.proto import pb
from pytest_cuzk.vocab.kinds import (
    GROTH16_PROOF_LEN,
    KINDS,
    SECTOR_SIZE_32G,
    UnknownKind,
    by_circuit,
    by_enum,
    by_name,
)

# name: (proof_kind, circuit_id, pce_file, registered_proof, partitions, proof_len, batchable, priority,
#        GetStatus string, metric label)
EXPECTED = {
    "porep": (
        pb.POREP_SEAL_COMMIT,
        "porep-32g",
        "pce-porep-32g.bin",
        8,
        10,
        1920,
        True,
        pb.NORMAL,
        "porep-c2",
        "porep_c2",
    ),
    "snap": (
        pb.SNAP_DEALS_UPDATE,
        "snap-32g",
        "pce-snap-deals-32g.bin",
        3,
        16,
        3072,
        True,
        pb.NORMAL,
        "snap-update",
        "snap_update",
    ),
    "wpost": (
        pb.WINDOW_POST_PARTITION,
        "wpost-32g",
        "pce-window-post.bin",
        13,
        1,
        192,
        False,
        pb.HIGH,
        "window-post",
        "window_post",
    ),
    "winning": (
        pb.WINNING_POST,
        "winning-32g",
        "pce-winning-post.bin",
        3,
        1,
        192,
        False,
        pb.CRITICAL,
        "winning-post",
        "winning_post",
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_kind_row(name: str) -> None:
    k = KINDS[name]
    got = (
        k.proof_kind,
        k.circuit_id,
        k.pce_file,
        k.registered_proof,
        k.partitions,
        k.proof_len,
        k.batchable,
        k.default_priority,
        k.status_name,
        k.metric_label,
    )
    assert k.name == name
    assert got == EXPECTED[name]


def test_table_has_exactly_the_four_kinds() -> None:
    assert set(KINDS) == set(EXPECTED)


def test_constants() -> None:
    assert GROTH16_PROOF_LEN == 192
    assert SECTOR_SIZE_32G == 32 * 2**30


def test_aliases_are_unique_lowercase_and_include_the_name() -> None:
    aliases = [a for k in KINDS.values() for a in k.aliases]
    assert len(aliases) == len(set(aliases))
    assert all(a == a.lower() for a in aliases)
    assert all(k.name in k.aliases for k in KINDS.values())


def test_enums_cover_every_non_zero_proof_kind() -> None:
    assert sorted(k.proof_kind for k in KINDS.values()) == [
        v for v in pb.ProofKind.values() if v != pb.PROOF_KIND_UNSPECIFIED
    ]


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("porep", "porep"),
        ("PoRep-C2", "porep"),
        (" snap-deals ", "snap"),
        ("window-post", "wpost"),
        ("winning-post", "winning"),
    ],
)
def test_by_name_accepts_aliases_case_insensitively(alias: str, name: str) -> None:
    assert by_name(alias) is KINDS[name]


def test_by_name_error_lists_every_alias() -> None:
    with pytest.raises(KeyError, match="unknown proof kind 'c2'; use one of: ") as info:
        by_name("c2")
    for kind in KINDS.values():
        for alias in kind.aliases:
            assert alias in str(info.value)


def test_by_enum_and_by_circuit_round_trip() -> None:
    for kind in KINDS.values():
        assert by_enum(kind.proof_kind) is kind
        assert by_circuit(kind.circuit_id) is kind


@pytest.mark.parametrize("value", [pb.PROOF_KIND_UNSPECIFIED, 5])
def test_by_enum_error_matches_cuzk(value: int) -> None:
    with pytest.raises(KeyError, match=f"invalid proof_kind: {value}"):
        by_enum(value)


def test_by_circuit_error_matches_cuzk() -> None:
    with pytest.raises(KeyError, match="unknown circuit ID: porep-2k"):
        by_circuit("porep-2k")


@pytest.mark.parametrize(
    ("look_up", "wanted", "said"),
    [
        (by_name, "prep", "unknown proof kind 'prep'; use one of: porep"),
        (by_enum, 99, "invalid proof_kind: 99"),
        (by_circuit, "porep-64g", "unknown circuit ID: porep-64g"),
    ],
)
def test_a_failed_kind_look_up_is_a_key_error_that_reads_as_its_sentence(look_up, wanted, said):
    with pytest.raises(UnknownKind) as info:
        look_up(wanted)
    assert isinstance(info.value, KeyError)
    assert str(info.value).startswith(said), "no quotes around it, unlike a plain KeyError"

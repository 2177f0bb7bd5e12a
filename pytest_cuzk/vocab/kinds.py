"""The four proof kinds cuzk proves, in one table.

Everything that differs by kind lives here: the names users type (the aliases
cuzk-bench accepts), the wire enum, the circuit id PreloadSRS takes, the PCE
file name, the 32 GiB registered_proof default, partitions and proof length,
whether cuzk batches it, its default priority and the strings cuzk uses for it
in GetStatus and in metric labels.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GROTH16_PROOF_LEN", "KINDS", "ProofKindInfo", "UnknownKind", "by_circuit", "by_enum", "by_name"]

GROTH16_PROOF_LEN = 192
# cuzk.v1 Priority values: the kinds' defaults, without importing the protobuf module for them
# (tests check them against the proto). The plugin stays light in runs that test no daemon.
NORMAL, HIGH, CRITICAL = 2, 3, 4
SECTOR_SIZE_32G = 34359738368


@dataclass(frozen=True)
class ProofKindInfo:
    """One proof kind as cuzk knows it."""

    name: str
    aliases: tuple[str, ...]
    proof_kind: int  # cuzk.v1.ProofKind
    circuit_id: str
    pce_name: str
    registered_proof: int
    partitions: int
    batchable: bool
    default_priority: int  # cuzk's for priority 0, and what Curio sends: test_priority sends it
    status_name: str
    metric_label: str

    @property
    def proof_len(self) -> int:
        """Bytes of a whole proof: one 192-byte Groth16 proof per partition."""
        return self.partitions * GROTH16_PROOF_LEN

    @property
    def pce_file(self) -> str:
        """File name of the kind's pre-compiled constraint evaluator in the param cache."""
        return f"pce-{self.pce_name}.bin"


KINDS: dict[str, ProofKindInfo] = {
    k.name: k
    for k in (
        ProofKindInfo(
            name="porep",
            aliases=("porep", "porep-c2", "seal-commit"),
            proof_kind=1,
            circuit_id="porep-32g",
            pce_name="porep-32g",
            registered_proof=8,
            partitions=10,
            batchable=True,
            default_priority=NORMAL,
            status_name="porep-c2",
            metric_label="porep_c2",
        ),
        ProofKindInfo(
            name="snap",
            aliases=("snap", "snap-deals", "update"),
            proof_kind=2,
            circuit_id="snap-32g",
            pce_name="snap-deals-32g",
            registered_proof=3,
            partitions=16,
            batchable=True,
            default_priority=NORMAL,
            status_name="snap-update",
            metric_label="snap_update",
        ),
        ProofKindInfo(
            name="wpost",
            aliases=("wpost", "window-post", "windowpost"),
            proof_kind=3,
            circuit_id="wpost-32g",
            pce_name="window-post",
            registered_proof=13,
            partitions=1,
            batchable=False,
            default_priority=HIGH,
            status_name="window-post",
            metric_label="window_post",
        ),
        ProofKindInfo(
            name="winning",
            aliases=("winning", "winning-post", "winningpost"),
            proof_kind=4,
            circuit_id="winning-32g",
            pce_name="winning-post",
            registered_proof=3,
            partitions=1,
            batchable=False,
            default_priority=CRITICAL,
            status_name="winning-post",
            metric_label="winning_post",
        ),
    )
}


class UnknownKind(KeyError):
    """A kind looked up by a name, wire value or circuit id that names none.

    A ``KeyError`` (a failed look-up), whose ``str()`` is the plain sentence saying what was
    asked for and what exists, so a caller can put it in a message as it is.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown proof kind"


def by_name(name: str) -> ProofKindInfo:
    """Look a kind up by any alias cuzk-bench accepts, case-insensitively."""
    wanted = name.strip().lower()
    for kind in KINDS.values():
        if wanted in kind.aliases:
            return kind
    known = ", ".join(a for k in KINDS.values() for a in k.aliases)
    raise UnknownKind(f"unknown proof kind {name!r}; use one of: {known}")


def by_enum(value: int) -> ProofKindInfo:
    """Look a kind up by its ``cuzk.v1.ProofKind`` wire value."""
    for kind in KINDS.values():
        if kind.proof_kind == value:
            return kind
    raise UnknownKind(f"invalid proof_kind: {value}")


def by_circuit(circuit_id: str) -> ProofKindInfo:
    """Look a kind up by the circuit id PreloadSRS takes (``porep-32g`` ...)."""
    for kind in KINDS.values():
        if kind.circuit_id == circuit_id:
            return kind
    raise UnknownKind(f"unknown circuit ID: {circuit_id}")

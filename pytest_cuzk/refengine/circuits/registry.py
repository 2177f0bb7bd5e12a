"""Which reference circuit proves which circuit id, and how its requests are parsed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from pytest_cuzk.proto import pb
from pytest_cuzk.refengine.circuits import Preset, c1, porep, post, snap
from pytest_cuzk.refengine.r1cs import WitnessCS
from pytest_cuzk.vocab.kinds import KINDS, ProofKindInfo

__all__ = ["CIRCUITS", "KNOWN_UNSUPPORTED", "CircuitDef", "Inputs", "circuit_for"]

KNOWN_UNSUPPORTED = ("porep-64g", "snap-64g")
"""Circuit ids cuzk accepts in PreloadSRS that have no reference circuit."""


class Inputs(Protocol):
    """A parsed request: per-partition witnesses for the prover, public inputs for verifiers."""

    @property
    def partitions(self) -> int: ...

    def witness(self, k: int) -> Any:
        """Partition k's circuit witness (may raise JobInputError)."""

    def public_inputs(self, k: int) -> list[int]:
        """Partition k's public inputs as a verifier derives them from the request."""


@dataclass(frozen=True)
class CircuitDef:
    """A reference circuit: its kind, the synthesis function, a blank witness and the request parser."""

    kind: ProofKindInfo
    synthesize: Callable[[WitnessCS, Preset, Any], None]
    blank: Callable[[Preset], Any]
    parse: Callable[[pb.SubmitProofRequest, Preset], Inputs]


CIRCUITS: dict[str, CircuitDef] = {
    d.kind.circuit_id: d
    for d in (
        CircuitDef(KINDS["porep"], porep.synthesize, porep.blank, c1.parse),
        CircuitDef(KINDS["snap"], snap.synthesize, snap.blank, snap.parse),
        CircuitDef(
            KINDS["wpost"], post.synthesize, partial(post.blank, pb.WINDOW_POST_PARTITION), post.parse
        ),
        CircuitDef(KINDS["winning"], post.synthesize, partial(post.blank, pb.WINNING_POST), post.parse),
    )
}


def circuit_for(circuit_id: str) -> CircuitDef:
    """The reference circuit of ``circuit_id``.

    KeyError('unknown circuit ID: X') as cuzk for ids it does not know; ValueError for
    the 64 GiB ids cuzk knows but the reference engine has no circuit for.
    """
    if circuit_id in CIRCUITS:
        return CIRCUITS[circuit_id]
    if circuit_id in KNOWN_UNSUPPORTED:
        raise ValueError(
            f"circuit {circuit_id} is not supported by the reference engine (it has 32 GiB circuits only: "
            f"{', '.join(CIRCUITS)})"
        )
    raise KeyError(f"unknown circuit ID: {circuit_id}")

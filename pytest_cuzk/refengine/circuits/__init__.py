"""The reference circuits, one per proof kind, and the size presets they share.

Each kind module (``porep``, ``snap``, ``post``) provides the same four things:
``parse(req, preset)`` turning a request into inputs (raising ``JobInputError``
with cuzk's message), ``synthesize(cs, preset, witness)`` (the circuit, run by
both constraint-system modes), ``blank(preset)`` (a witness of the right shape
for the trusted setup) and the native helpers ``gendata`` uses to make data.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_cuzk.refengine.errors import RefEngineError

__all__ = ["PRESETS", "JobInputError", "Preset"]


class JobInputError(RefEngineError):
    """Bad job input; ``str(exc)`` is the exact FAILED error_message cuzk gives for it."""


@dataclass(frozen=True)
class Preset:
    """Circuit sizes. A sector is a binary Merkle tree of ``2**tree_depth`` nodes."""

    name: str
    tree_depth: int
    porep_challenges: int
    snap_challenges: int
    wpost_sectors: int
    wpost_challenges: int
    winning_challenges: int

    def shape(self) -> dict[str, int | str]:
        """The preset as plain data (stored in key files so verifiers know the circuit shape)."""
        return dict(self.__dict__)


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        # ~600-700 constraints per partition circuit: every kind proves in a few seconds on 2 cores.
        Preset("default", tree_depth=3, porep_challenges=1, snap_challenges=1, wpost_sectors=2,
               wpost_challenges=2, winning_challenges=4),
        # ~4k constraints (a 4096-point domain): about 10x the default's work.
        Preset("medium", tree_depth=6, porep_challenges=4, snap_challenges=4, wpost_sectors=3,
               wpost_challenges=4, winning_challenges=12),
        # ~33k-65k constraints (a 65536-point domain), WinningPoSt with Filecoin's 66 challenges:
        # minutes per proof on a 16-core host.
        Preset("large", tree_depth=10, porep_challenges=40, snap_challenges=40, wpost_sectors=16,
               wpost_challenges=8, winning_challenges=66),
        # ~234k-241k constraints (a 2^18-point domain): the GPU prover's preset,
        # where MSMs and NTTs dominate a CPU proof. Its trusted setup takes about a minute a kind.
        Preset("xlarge", tree_depth=12, porep_challenges=128, snap_challenges=128, wpost_sectors=48,
               wpost_challenges=8, winning_challenges=400),
    )
}  # fmt: skip

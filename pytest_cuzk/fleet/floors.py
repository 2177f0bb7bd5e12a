"""What cuzk needs of a machine to prove a kind at all, from its own documentation.

Where no host like an offer measured a kind, these floors still tell an offer that cannot fit:
cuzk keeps the kind's SRS (its ``.params`` file) and PCE resident, reserves one partition's
working set from its memory budget before it proves (a reservation larger than the budget
blocks forever), and holds its device buffers and pool on every GPU. Figures: cuzk's memory
manager notes and its ``srs_manager``/``memory`` sources (SRS: PoRep ~44 GiB, WindowPoSt
~57 GiB, WinningPoSt ~184 MiB, SnapDeals ~33 GiB; PCE: 25.7, ~26, ~0.4, ~17 GiB; partition
reservations 14, 14, 0.5, 9 GiB; on the GPU ~4 GiB of ``d_a`` for a ~130M-constraint
partition and an ~8 GiB pool, not budgeted, besides the CUDA context: a GPU of no more than
that cannot prove).
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_cuzk.vocab.units import GIB, format_bytes

__all__ = ["FLOORS", "PCE_FILE_BYTES", "Floor"]

PCE_FILE_BYTES = 25 * GIB  # the PoRep PCE file its warm-up writes to the param cache
_POOL_GIB, _D_A_GIB, _D_A_CONSTRAINTS = 8.0, 4.0, 130e6  # the GPU pool; d_a for a ~130M partition


@dataclass(frozen=True)
class Floor:
    """The least memory cuzk proves one kind with: resident SRS and PCE, one partition, GPU buffers."""

    srs_gib: float
    pce_gib: float
    partition_gib: float
    constraints: float | None  # per partition; None: its GPU buffers are not documented

    @property
    def ram_bytes(self) -> int:
        return int((self.srs_gib + self.pce_gib + self.partition_gib) * GIB)

    @property
    def vram_bytes(self) -> int | None:
        """Per GPU: the pool and ``d_a`` (its size in proportion to the partition's constraints)."""
        if self.constraints is None:
            return None
        return int((_POOL_GIB + _D_A_GIB * self.constraints / _D_A_CONSTRAINTS) * GIB)

    def ram_short(self, kind: str) -> str:
        """Why an offer's RAM share (its ``ram`` column) is too small."""
        return f"does not fit: cuzk's {kind} floor is {format_bytes(self.ram_bytes)} of RAM"

    def vram_short(self, kind: str, has: int) -> str:
        """Why an offer's GPUs, of ``has`` bytes each, are too small."""
        need, held = format_bytes(self.vram_bytes), format_bytes(has)
        return f"does not fit: a GPU of {held} holds no more than cuzk's {kind} floor of {need}"

    def vram_misfit(self, has: int) -> bool:
        """Whether GPUs of ``has`` bytes cannot prove: at the floor, the CUDA context has no room left."""
        return self.vram_bytes is not None and has <= self.vram_bytes


FLOORS: dict[str, Floor] = {
    "porep": Floor(44, 25.7, 14, 130e6),
    "wpost": Floor(57, 26, 14, 125e6),
    "winning": Floor(0.18, 0.4, 0.5, None),  # ~3.5M constraints: its GPU needs are not documented
    "snap": Floor(33, 17, 9, 81e6),
}

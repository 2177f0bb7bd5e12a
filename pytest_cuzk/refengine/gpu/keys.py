"""Proving keys resident on the GPU, and the four G1 MSMs of a proof run against them.

A key's A, B (G1), H and L query bases go to the device when the key is loaded (PreloadSRS or
a first proof), so the device memory shows the SRS as cuzk's does, and leave it on EvictSRS
(``evict`` also returns CuPy's cached blocks to the driver). B in G2 stays on the CPU beside
the GPU, as supraseal's prover keeps it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import cupy
from py_arkworks_bls12381 import G1Point

from ..groth16 import ProofInput, ProvingKey
from .msm import DeviceBases, GpuMsm, scalars_to_limbs

__all__ = ["GpuKeys"]


@dataclass
class _DeviceKey:
    pk: ProvingKey  # held so that the id it is filed under stays this key's
    a: DeviceBases
    b1: DeviceBases
    h: DeviceBases
    l: DeviceBases  # noqa: E741 - the paper's L query
    a_idx: Any
    b_idx: Any

    @property
    def nbytes(self) -> int:
        bases = self.a.nbytes + self.b1.nbytes + self.h.nbytes + self.l.nbytes
        return int(bases + self.a_idx.nbytes + self.b_idx.nbytes)


class GpuKeys:
    """The G1 side of the proving keys on one device; implements ``groth16.G1Prover``."""

    def __init__(self, msm: GpuMsm) -> None:
        self.msm = msm
        self._lock = threading.Lock()
        self._keys: dict[int, _DeviceKey] = {}

    @property
    def label(self) -> str:
        """The prover's name for the engine's identity."""
        return self.msm.label

    def load(self, pk: ProvingKey) -> int:
        """Upload ``pk``'s G1 bases unless resident; the device bytes they take."""
        with self._lock:
            key = self._keys.get(id(pk))
            if key is None:
                key = self._upload(pk)
                self._keys[id(pk)] = key
            return key.nbytes

    def _upload(self, pk: ProvingKey) -> _DeviceKey:
        up = self.msm.upload
        with cupy.cuda.Device(self.msm.ordinal):
            a_idx = cupy.asarray(pk.a_density, dtype=cupy.int64)
            b_idx = cupy.asarray(pk.b_density, dtype=cupy.int64)
        return _DeviceKey(pk, up(pk.a_query), up(pk.b_g1_query), up(pk.h_query), up(pk.l_query), a_idx, b_idx)

    def evict(self, pk: ProvingKey) -> int:
        """Free ``pk``'s device bases; the bytes freed (0 when it was not resident)."""
        with self._lock:
            key = self._keys.pop(id(pk), None)
        if key is None:
            return 0
        freed = key.nbytes
        del key
        with cupy.cuda.Device(self.msm.ordinal):
            cupy.get_default_memory_pool().free_all_blocks()
        return freed

    def resident_bytes(self) -> int:
        """Device bytes all resident keys take."""
        with self._lock:
            return sum(k.nbytes for k in self._keys.values())

    def g1_sums(self, inp: ProofInput) -> tuple[G1Point, G1Point, G1Point, G1Point]:
        """The A, B (G1), L and H query sums of one proof."""
        self.load(inp.pk)
        with self._lock:
            key = self._keys[id(inp.pk)]
        msm = self.msm.msm
        with cupy.cuda.Device(self.msm.ordinal):
            z = cupy.asarray(scalars_to_limbs(inp.z))
            return (
                msm(key.a, z[key.a_idx]),
                msm(key.b1, z[key.b_idx]),
                msm(key.l, z[inp.pk.num_inputs :]),
                msm(key.h, scalars_to_limbs(inp.h)),
            )

"""Proving keys resident on the GPU, the five MSMs of a proof run against them, and the witness map.

A key's A, B (G1 and G2), H and L query bases go to the device when the key is loaded
(PreloadSRS or a first proof), so the device memory shows the SRS as cuzk's does, and leave
it on EvictSRS (``evict`` also drops the witness map's tables and returns CuPy's cached
blocks to the driver). B in G2 runs on the GPU too (supraseal keeps it on the CPU beside the
GPU; here that CPU MSM was a third of a large proof's time, and the noisiest part of it). The
partitions of one key in a prove pass share one batch of launches per query.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import cupy
from py_arkworks_bls12381 import G1Point, G2Point

from pytest_cuzk.refengine.field import Domain
from pytest_cuzk.refengine.gpu.msm import DeviceBases, GpuMsm, device_used, scalars_to_limbs
from pytest_cuzk.refengine.gpu.ntt import GpuNtt, fr_limbs
from pytest_cuzk.refengine.gpu.points import G1, G2
from pytest_cuzk.refengine.groth16 import ProofInput, ProvingKey
from pytest_cuzk.refengine.r1cs import Matrices

__all__ = ["GpuKeys"]


@dataclass
class _DeviceKey:
    pk: ProvingKey  # held so that the id it is filed under stays this key's
    a: DeviceBases[G1Point]
    b1: DeviceBases[G1Point]
    b2: DeviceBases[G2Point]
    h: DeviceBases[G1Point]
    l: DeviceBases[G1Point]  # noqa: E741 - the paper's L query
    a_idx: Any
    b_idx: Any

    @property
    def nbytes(self) -> int:
        bases = self.a.nbytes + self.b1.nbytes + self.b2.nbytes + self.h.nbytes + self.l.nbytes
        return int(bases + self.a_idx.nbytes + self.b_idx.nbytes)


class GpuKeys:
    """The proving keys on one device; implements ``groth16.DeviceProver``."""

    def __init__(self, msm: GpuMsm) -> None:
        self.msm = msm
        self.ntt = GpuNtt(msm.ordinal)
        self._lock = threading.Lock()
        self._keys: dict[int, _DeviceKey] = {}
        after, before = device_used(msm.ordinal), msm.used_before
        pooled = self._pooled()  # the opening check's MSMs
        self.context_bytes = after - before - pooled if after is not None and before is not None else None
        """The CUDA context and both modules' kernels: NVML's used memory since before the context,
        less what CuPy's pool already holds (``device_bytes`` counts that)."""

    def _pooled(self) -> int:
        """The bytes CuPy's memory pool holds on this device."""
        with cupy.cuda.Device(self.msm.ordinal):
            return int(cupy.get_default_memory_pool().total_bytes())

    def device_bytes(self) -> int | None:
        """The process's device memory by its own count: the context, and what CuPy's pool holds."""
        return None if self.context_bytes is None else self.context_bytes + self._pooled()

    @property
    def label(self) -> str:
        """The prover's name for the engine's identity."""
        return self.msm.label

    def load(self, pk: ProvingKey) -> int:
        """Upload ``pk``'s bases unless resident; the device bytes they take."""
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
        return _DeviceKey(
            pk,
            up(pk.a_query, G1),
            up(pk.b_g1_query, G1),
            up(pk.b_g2_query, G2),
            up(pk.h_query, G1),
            up(pk.l_query, G1),
            a_idx,
            b_idx,
        )

    def evict(self, pk: ProvingKey) -> int:
        """Free ``pk``'s device bases; the bytes freed (0 when it was not resident)."""
        with self._lock:
            key = self._keys.pop(id(pk), None)
        if key is None:
            return 0
        freed = key.nbytes
        del key
        self.ntt.forget()  # made again, in milliseconds, for the next proof
        with cupy.cuda.Device(self.msm.ordinal):
            cupy.get_default_memory_pool().free_all_blocks()
        return freed

    def resident_bytes(self) -> int:
        """Device bytes all resident keys take."""
        with self._lock:
            return sum(k.nbytes for k in self._keys.values())

    def witness_map(
        self, a: list[int], b: list[int], c: list[int], z: list[int], domain: Domain
    ) -> tuple[Any, Any]:
        """(h, z) on the device for the MSMs, h from the constraint system's A·z, B·z, C·z."""
        h = self.ntt.witness_map(a, b, c, domain)
        with cupy.cuda.Device(self.msm.ordinal):
            return h, cupy.asarray(fr_limbs(z))

    def witness_map_pce(self, m: Matrices, z: list[int], domain: Domain) -> tuple[Any, Any]:
        """(h, z) on the device, A·z, B·z, C·z made there from the PCE's matrices."""
        return self.ntt.witness_map_pce(m, z, domain)

    def sums(self, inputs: Sequence[ProofInput]) -> list[tuple[G1Point, G1Point, G2Point, G1Point, G1Point]]:
        """The A, B (G1), B (G2), L and H query sums of each proof; a key's proofs in one batch of MSMs."""
        out: list[tuple[G1Point, G1Point, G2Point, G1Point, G1Point] | None] = [None] * len(inputs)
        by_key: dict[int, list[int]] = {}
        for i, inp in enumerate(inputs):
            by_key.setdefault(id(inp.pk), []).append(i)
        msm = self.msm.msm_batch
        for members in by_key.values():
            pk = inputs[members[0]].pk
            self.load(pk)
            with self._lock:
                key = self._keys[id(pk)]
            with cupy.cuda.Device(self.msm.ordinal):
                z = cupy.stack([_z_limbs(inputs[i]) for i in members])
                h = cupy.stack([_h_limbs(inputs[i]) for i in members])
                zb = z[:, key.b_idx]
                sums = zip(
                    msm(key.a, z[:, key.a_idx]),
                    msm(key.b1, zb),
                    msm(key.b2, zb),
                    msm(key.l, z[:, pk.num_inputs :]),
                    msm(key.h, h),
                    strict=True,
                )
                for i, five in zip(members, sums, strict=True):
                    out[i] = five
        return [five for five in out if five is not None]


def _z_limbs(inp: ProofInput) -> Any:
    """The proof's z as a device limb array: the GPU's sparse products', or converted from ``z``."""
    return inp.z_limbs if inp.z_limbs is not None else cupy.asarray(scalars_to_limbs(inp.z))


def _h_limbs(inp: ProofInput) -> Any:
    """The proof's h as a device limb array: the GPU witness map's, or converted from ``h``."""
    if inp.h_limbs is not None:
        return inp.h_limbs
    if len(inp.h) != len(inp.pk.h_query):
        raise ValueError("a proof input without its h (the GPU witness map's h is freed when proved)")
    return cupy.asarray(scalars_to_limbs(inp.h))

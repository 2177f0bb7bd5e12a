"""G1 and G2 MSMs on a CUDA device: the kernels of ``msm.cu``.

Bases are uploaded once (``upload``: affine, converted to Montgomery form on the device) and
stay resident; every MSM then moves only its scalars (8 32-bit limbs each) to the device and
one sum per window back, made affine there (96 bytes in G1, 192 in G2; all the windows'
inversions run at once, which in Python took the engine's thread longer than the rest of the
MSM). The sums are folded here, sum_w 2^(c w) S_w, by Horner's rule on
py-arkworks points: a serial chain of about 250 doublings, which one GPU thread took 5 ms for
and the CPU does in a fraction of one. The point equals py-arkworks' result exactly.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic

import cupy
import numpy as np
import pynvml
from py_arkworks_bls12381 import Scalar

from pytest_cuzk.host.nvml import nvml_query, nvml_session
from pytest_cuzk.refengine.gpu.kernels import Kernels
from pytest_cuzk.refengine.gpu.plan import MsmPlan
from pytest_cuzk.refengine.gpu.points import G1, G2, Group, Pt, fold, from_rows

__all__ = ["DeviceBases", "GpuMsm", "device_used", "scalars_to_limbs"]

_STACK_BYTES = 3072
"""Stack a thread: G2's point code needs up to 2,496 bytes (``ptxas -v``), past CUDA's default 1 KB."""
_CHUNK = 32
"""Additions one thread does for a bucket before the partial sums are added in turn."""
_TREE = 8
"""Partial sums one thread adds in each step of the per-window reduction tree."""


@dataclass
class DeviceBases(Generic[Pt]):
    """Affine bases on the device: ``points`` (n, 2 x field limbs); ``valid``: 0 for the identity."""

    group: Group[Pt]
    points: Any
    valid: Any

    @property
    def n(self) -> int:
        """Number of bases."""
        return int(self.points.shape[0])

    @property
    def nbytes(self) -> int:
        """Device memory they take."""
        return int(self.points.nbytes + self.valid.nbytes)


def scalars_to_limbs(scalars: list[Scalar]) -> np.ndarray:
    """Scalars as an (n, 8) array of little-endian 32-bit limbs, the kernels' input."""
    raw = b"".join(s.to_le_bytes() for s in scalars)
    return np.frombuffer(raw, dtype="<u4").reshape(len(scalars), 8)


_POINT_KERNELS = (
    "accumulate_chunks", "sum_chunks", "gather_buckets", "weigh_segments", "sum_groups", "window_affine",
)  # fmt: skip


class GpuMsm:
    """One CUDA device's G1 and G2 MSMs; thread-safe (one MSM at a time)."""

    def __init__(self, ordinal: int) -> None:
        self.ordinal = ordinal
        self._lock = threading.Lock()
        self.used_before = device_used(ordinal)
        """The device's used memory before the CUDA context was made: ``GpuKeys`` counts from it."""
        with cupy.cuda.Device(ordinal):
            props = cupy.cuda.runtime.getDeviceProperties(ordinal)
            self.name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
            names = ["to_montgomery", "signed_digits", "scatter"]
            names += [f"{k}_{g.suffix}" for k in _POINT_KERNELS for g in (G1, G2)]
            self._launch = Kernels(cupy, "msm.cu", names)
            # Reserve the stack now, not at the first G2 launch, so that its memory is there from the start.
            stack = max(_STACK_BYTES, self._launch.local_bytes())
            cupy.cuda.runtime.deviceSetLimit(getattr(cupy.cuda.runtime, "cudaLimitStackSize", 0), stack)
            cupy.cuda.runtime.deviceSynchronize()

    @property
    def label(self) -> str:
        """How the engine names this prover (``prover="gpu:NVIDIA H200"``)."""
        return f"gpu:{self.name}"

    def upload(self, points: Sequence[Pt], group: Group[Pt]) -> DeviceBases[Pt]:
        """Copy affine bases of ``group`` to the device, in Montgomery form there."""
        raw = b"".join(p.to_xy_bytes_le() for p in points)
        host = np.frombuffer(raw, dtype="<u4").reshape(len(points), 2 * group.field_limbs)
        with self._lock, cupy.cuda.Device(self.ordinal):
            dev = cupy.asarray(host)
            valid = cupy.asarray(host.any(axis=1).astype(np.uint8))  # the identity's x, y are (0, 0)
            if len(points):
                count = dev.size // 12  # Fp elements
                self._launch("to_montgomery", count, dev, np.int32(count))
            cupy.cuda.runtime.deviceSynchronize()
        return DeviceBases(group, dev, valid)

    def msm(self, bases: DeviceBases[Pt], scalars: Any) -> Pt:
        """sum_i scalars[i] * bases[i]; ``scalars`` is an (n, 8) limb array, on the host or the device."""
        return self.msm_batch(bases, scalars[None])[0]

    def msm_batch(self, bases: DeviceBases[Pt], scalars: Any) -> list[Pt]:
        """One MSM per row of ``scalars``, a (batch, n, 8) limb array, all over the same bases at once.

        The batch is one bucketed MSM of batch x windows windows, so a proof's partitions cost
        one pass of launches, not one pass each.
        """
        batch, n, group = int(scalars.shape[0]), bases.n, bases.group
        if n == 0 or batch == 0:
            return [group.point.identity()] * batch
        plan = MsmPlan(n)
        with self._lock, cupy.cuda.Device(self.ordinal):
            limbs = cupy.ascontiguousarray(cupy.asarray(scalars, dtype=cupy.uint32))
            sums = from_rows(self._window_sums(bases, limbs, plan, batch), group)
        w = plan.windows
        return [fold(sums[k * w : (k + 1) * w], plan.c, group) for k in range(batch)]

    def _bucket_sums(self, bases: DeviceBases[Pt], entries: Any, starts: Any, counts: Any, total: int) -> Any:
        """Every bucket's sum, in chunks of at most ``_CHUNK`` additions a thread, level by level."""
        g, width = bases.group.suffix, bases.group.xyzz_limbs
        task_bucket, task0, tasks, n_tasks = _chunks(counts)
        partial = cupy.empty((n_tasks, width), dtype=cupy.uint32)
        chunk = np.int32(_CHUNK)
        level = (bases.points, entries, starts, counts, task_bucket, task0, chunk, np.int32(n_tasks))
        self._launch(f"accumulate_chunks_{g}", n_tasks, *level, partial)
        while n_tasks > 0 and int(tasks.max()) > 1:
            starts, counts = task0, tasks
            task_bucket, task0, tasks, n_tasks = _chunks(counts)
            summed = cupy.empty((n_tasks, width), dtype=cupy.uint32)
            again = (partial, starts, counts, task_bucket, task0, chunk, np.int32(n_tasks))
            self._launch(f"sum_chunks_{g}", n_tasks, *again, summed)
            partial = summed
        buckets = cupy.empty((total, width), dtype=cupy.uint32)
        self._launch(f"gather_buckets_{g}", total, partial, tasks, task0, np.int32(total), buckets)
        return buckets

    def _window_sums(self, bases: DeviceBases[Pt], scalars: Any, plan: MsmPlan, batch: int) -> np.ndarray:
        """The MSMs' window sums S_w as affine points, MSM by MSM: (batch x windows, 2 x field limbs)."""
        g, width = bases.group.suffix, bases.group.xyzz_limbs
        n, windows = plan.n, batch * plan.windows  # MSM k's window w is window k * plan.windows + w
        c, per_window = np.int32(plan.c), plan.buckets_per_window
        total, segments = batch * plan.total_buckets, batch * plan.segments
        digits = cupy.empty(windows * n, dtype=cupy.int32)
        counts = cupy.zeros(total, dtype=cupy.uint32)
        digit_args = (
            scalars,
            bases.valid,
            np.int32(n),
            c,
            np.int32(plan.windows),
            np.int32(batch),
            digits,
            counts,
        )
        self._launch("signed_digits", batch * n, *digit_args)
        starts = cupy.cumsum(counts, dtype=cupy.uint32) - counts
        cursor = starts.copy()
        entries = cupy.empty(windows * n, dtype=cupy.uint32)
        self._launch("scatter", windows * n, digits, np.int32(n), c, np.int32(windows), cursor, entries)
        del digits, cursor
        buckets = self._bucket_sums(bases, entries, starts, counts, total)
        del entries
        partial = cupy.empty((segments, width), dtype=cupy.uint32)
        weigh = (buckets, np.int32(per_window), np.int32(plan.segment), np.int32(segments), partial)
        self._launch(f"weigh_segments_{g}", segments, *weigh)
        per = plan.segments // plan.windows
        while per > 1:  # per and _TREE are powers of two
            group = min(_TREE, per)
            groups = partial.shape[0] // group
            summed = cupy.empty((groups, width), dtype=cupy.uint32)
            self._launch(f"sum_groups_{g}", groups, partial, np.int32(group), np.int32(groups), summed)
            partial, per = summed, per // group
        out = cupy.empty((windows, 2 * bases.group.field_limbs), dtype=cupy.uint32)
        self._launch(f"window_affine_{g}", windows, partial, np.int32(windows), out)
        return cupy.asnumpy(out)


def device_used(ordinal: int) -> int | None:
    """The CUDA device's used memory as NVML counts it; None without NVML."""
    bus_id = cupy.cuda.runtime.deviceGetPCIBusId(ordinal)
    with nvml_session() as why:
        handle = None if why else nvml_query(pynvml.nvmlDeviceGetHandleByPciBusId, bus_id)
        info = nvml_query(pynvml.nvmlDeviceGetMemoryInfo, handle) if handle is not None else None
        return int(info.used) if info is not None else None


def _chunks(counts: Any) -> tuple[Any, Any, Any, int]:
    """Chunks of runs of ``counts`` items: (each chunk's run, each run's first chunk, chunks a run, total)."""
    tasks = (counts + (_CHUNK - 1)) // _CHUNK
    ends = cupy.cumsum(tasks, dtype=cupy.uint32)
    n_tasks = int(ends[-1]) if ends.size else 0
    task_bucket = cupy.searchsorted(ends, cupy.arange(n_tasks, dtype=cupy.uint32), side="right")
    return task_bucket.astype(cupy.uint32), ends - tasks, tasks, n_tasks

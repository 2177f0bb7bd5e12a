"""cuzk-ref's GPU prover: the proof's MSMs, sparse products and NTTs as CUDA kernels, loaded through CuPy.

``open_gpu`` picks the device from cuzk's ``[gpus] devices`` (absent: every CUDA device, as cuzk;
cuzk-ref proves on the first one listed) and says why the CPU prover runs instead when there is no
CuPy, no CUDA device, an explicitly empty ``devices = []``, or the device's MSMs disagree with py-
arkworks (``selfcheck``). CuPy is imported only in this package, past ``open_gpu``, so the CPU
prover never needs it (the ``gpu`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_cuzk.refengine.gpu.msm import GpuMsm

__all__ = ["CPU_LABEL", "open_gpu"]

CPU_LABEL = "cpu"


def open_gpu(devices: tuple[int, ...], off: bool) -> tuple[GpuMsm | None, str]:
    """The GPU MSM engine for the first usable configured device, or None and the reason why not."""
    if off:
        return None, "[gpus] devices is empty"
    try:
        import cupy
    except ImportError:
        return None, "CuPy is not installed (pip install 'pytest-cuzk[gpu]')"
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # CuPy raises its CUDARuntimeError when there is no driver or device
        return None, f"no CUDA device ({exc})"
    wanted = devices or tuple(range(count))
    usable = [d for d in wanted if 0 <= d < count]
    if not usable:
        return None, f"no CUDA device among [gpus] devices {list(devices)} ({count} present)"
    from pytest_cuzk.refengine.gpu.msm import GpuMsm
    from pytest_cuzk.refengine.gpu.selfcheck import disagreement

    gpu = GpuMsm(usable[0])
    why = disagreement(gpu)
    return (None, f"{why} on {gpu.name}") if why else (gpu, "")

"""A stand-in for libnvidia-ml at pynvml's function boundary, shared by the sampler, plot and host tests."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

GIB = 1 << 30


class FakeNvml:
    """Stands in for libnvidia-ml at pynvml's function boundary, so GPU code paths run without a GPU.

    `processes` is what nvmlDeviceGetComputeRunningProcesses lists: (pid, used bytes or None) pairs.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, used: int = 2 * GIB, devices: int = 1) -> None:
        self.inits = 0
        self.shutdowns = 0
        self.used = used
        self.idle: set[int] = set()  # devices that report 0% utilisation
        self.processes: list[tuple[int, int | None]] = []
        api: dict[str, Any] = {
            "nvmlInit": self._init,
            "nvmlShutdown": self._shutdown,
            "nvmlDeviceGetCount": lambda: devices,
            "nvmlDeviceGetHandleByIndex": lambda i: f"dev{i}",
            "nvmlDeviceGetName": lambda h: "NVIDIA H200",
            "nvmlDeviceGetUUID": lambda h: "GPU-0000-fake",
            "nvmlDeviceGetMemoryInfo": lambda h: SimpleNamespace(total=141 * GIB, used=self.used),
            "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(
                gpu=0 if int(h[3:]) in self.idle else 87
            ),
            "nvmlDeviceGetClockInfo": lambda h, kind: 1980 if kind == pynvml.NVML_CLOCK_SM else 3201,
            "nvmlDeviceGetMaxClockInfo": lambda h, kind: 1980,
            "nvmlDeviceGetPerformanceState": lambda h: 0,
            "nvmlDeviceGetPersistenceMode": lambda h: pynvml.NVML_FEATURE_ENABLED,
            "nvmlDeviceGetComputeRunningProcesses": lambda h: [
                SimpleNamespace(pid=p, usedGpuMemory=b) for p, b in self.processes
            ],
            "nvmlDeviceGetGraphicsRunningProcesses": self._not_supported,
            "nvmlSystemGetDriverVersion": lambda: "580.159.03",
            "nvmlSystemGetCudaDriverVersion_v2": lambda: 13000,
        }
        for name, fn in api.items():
            monkeypatch.setattr(pynvml, name, fn)

    def _init(self) -> None:
        self.inits += 1

    def _shutdown(self) -> None:
        self.shutdowns += 1

    @staticmethod
    def _not_supported(handle: Any) -> list[Any]:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

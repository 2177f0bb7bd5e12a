"""What machine and which daemon build produced a result.

Benchmark figures are only comparable between runs on the same hardware and the same daemon build, so
`HostInfo.fingerprint()` hashes the hardware parts alone (not the hostname, not clocks that drift), and
`daemon_identity()` names the build by the sha256 of its binary.

NVML comes through the shared `nvml_session()`, so host info and the memory sampler never shut it
down under each other.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pynvml

from pytest_cuzk.host.nvml import nvml_handles, nvml_query, nvml_session
from pytest_cuzk.vocab.files import file_sha256

__all__ = [
    "GpuInfo",
    "HostInfo",
    "binary_sha256",
    "daemon_identity",
    "hardware_fingerprint",
    "host_info",
]

_GIB = 1 << 30


_CURRENT_CLOCKS = ("sm_clock_mhz", "mem_clock_mhz")


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as NVML sees it; clocks are the current ones, recorded because they swing timings."""

    index: int
    name: str
    uuid: str
    vram_total_bytes: int
    sm_clock_mhz: int | None
    sm_clock_max_mhz: int | None
    mem_clock_mhz: int | None
    persistence_mode: bool | None


@dataclass(frozen=True)
class HostInfo:
    """The machine a run happened on; `gpu_unavailable_reason` says why `gpus` is empty."""

    hostname: str
    cpu_model: str
    cpu_physical_cores: int | None
    cpu_logical_cores: int
    ram_total_bytes: int
    os: str
    kernel: str
    gpus: tuple[GpuInfo, ...]
    driver_version: str | None
    cuda_driver_version: str | None
    gpu_unavailable_reason: str | None

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (for pytest-benchmark's machine_info and the results database)."""
        return dataclasses.asdict(self) | {"fingerprint": self.fingerprint()}

    def machine_dict(self) -> dict[str, Any]:
        """``as_dict`` less the GPUs' current clocks, which swing with load between two runs on one host.

        pytest-benchmark compares machine info by equality; each case records its own clocks.
        """
        out = self.as_dict()
        out["gpus"] = [{k: v for k, v in g.items() if k not in _CURRENT_CLOCKS} for g in out["gpus"]]
        return out

    def fingerprint(self) -> str:
        """Stable 16-hex-digit hash of the hardware and driver only: equal machines compare equal."""
        hardware = {
            "cpu_model": self.cpu_model,
            "cpu_physical_cores": self.cpu_physical_cores,
            "cpu_logical_cores": self.cpu_logical_cores,
            "ram_total_gib": round(self.ram_total_bytes / _GIB),
            "gpus": [(g.name, g.vram_total_bytes) for g in self.gpus],
            "driver_version": self.driver_version,
            "cuda_driver_version": self.cuda_driver_version,
        }
        return hardware_fingerprint(hardware)


def hardware_fingerprint(facts: Mapping[str, Any]) -> str:
    """16 hex digits of sha256 over JSON-sorted hardware facts: the one way hosts are keyed."""
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]


def host_info() -> HostInfo:
    """Describe this machine; never raises for a missing GPU or NVML library."""
    with nvml_session() as why:
        gpus = () if why else tuple(_gpu_info(i, h) for i, h in enumerate(nvml_handles()))
        driver = None if why else nvml_query(pynvml.nvmlSystemGetDriverVersion)
        cuda = None if why else nvml_query(pynvml.nvmlSystemGetCudaDriverVersion_v2)
    if why is None and not gpus:
        why = "NVML sees no GPU"
    return HostInfo(
        hostname=socket.gethostname(),
        cpu_model=_cpu_model(),
        cpu_physical_cores=psutil.cpu_count(logical=False),
        cpu_logical_cores=psutil.cpu_count(logical=True) or 1,
        ram_total_bytes=psutil.virtual_memory().total,
        os=f"{platform.system()} {_os_release()}".strip(),
        kernel=platform.release(),
        gpus=gpus,
        driver_version=driver,
        cuda_driver_version=f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
        gpu_unavailable_reason=why,
    )


def _gpu_info(index: int, handle: Any) -> GpuInfo:
    mem = nvml_query(pynvml.nvmlDeviceGetMemoryInfo, handle)
    persistence = nvml_query(pynvml.nvmlDeviceGetPersistenceMode, handle)
    return GpuInfo(
        index=index,
        name=nvml_query(pynvml.nvmlDeviceGetName, handle) or "unknown",
        uuid=nvml_query(pynvml.nvmlDeviceGetUUID, handle) or "",
        vram_total_bytes=mem.total if mem else 0,
        sm_clock_mhz=nvml_query(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_SM),
        sm_clock_max_mhz=nvml_query(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_SM),
        mem_clock_mhz=nvml_query(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_MEM),
        persistence_mode=None if persistence is None else persistence == pynvml.NVML_FEATURE_ENABLED,
    )


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _os_release() -> str:
    try:
        return platform.freedesktop_os_release().get("PRETTY_NAME", "")
    except OSError:
        return platform.version()


_sha_cache: dict[tuple[str, int, int], str] = {}


def binary_sha256(path: Path) -> str:
    """sha256 of a file, cached by path, size and mtime so a multi-GB binary is hashed once per build."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _sha_cache:
        _sha_cache[key] = file_sha256(path)
    return _sha_cache[key]


def daemon_identity(binary: Path | None, **extra: Any) -> dict[str, Any]:
    """Which daemon build ran: its binary's path, size and sha256, plus `extra` (engine name, version...)."""
    if binary is None:
        return {"daemon_binary": None, "daemon_sha256": None, **extra}
    try:
        digest = binary_sha256(binary)
    except OSError as exc:
        raise FileNotFoundError(
            f"cannot hash the daemon binary {binary}: {exc.strerror}; pass the path of the cuzk executable"
        ) from exc
    return {
        "daemon_binary": os.fspath(binary),
        "daemon_size_bytes": binary.stat().st_size,
        "daemon_sha256": digest,
        **extra,
    }

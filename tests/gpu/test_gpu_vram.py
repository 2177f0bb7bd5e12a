"""On a CUDA GPU: NVML's VRAM peak for a cuzk-ref process matches the engine's own count within 5%.

A spawned cuzk-ref (its own process, so NVML's per-process figure is its alone) proves a
PoRep while the plugin's sampler watches it; GetMetrics' ``cuzk_ref_gpu_memory_bytes`` is the
engine's count (its CUDA context as NVML saw it appear, plus what CuPy's pool holds, which keeps
freed blocks, so it is the peak). Skips with the reason without a usable GPU.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.engine_support import Daemon, RefData, connect, write_config

from pytest_cuzk.measure.memory import DaemonSampler
from pytest_cuzk.proto import pb
from pytest_cuzk.refengine.gpu import open_gpu

pytestmark = pytest.mark.gpu
GPU, WHY = open_gpu((), off=False)
if GPU is None:
    pytest.skip(f"needs a CUDA GPU and CuPy: {WHY}", allow_module_level=True)

MIB = 1 << 20


def test_nvml_vram_peak_matches_the_engines_own_count(
    spawn: Callable[..., Daemon], tmp_path: Path, ref_params: Path, ref_data: RefData
) -> None:
    text = (
        f'[daemon]\nlisten = "127.0.0.1:0"\n[srs]\nparam_cache = "{ref_params}"\n[ref]\nbehave = "protocol"\n'
    )
    daemon = spawn("-c", str(write_config(tmp_path / "cuzk.toml", text)))
    address = daemon.wait_ready(timeout=120)
    sampler = DaemonSampler(daemon.proc.pid, interval_s=0.02)
    sampler.start()
    channel, stub = connect(address)
    with channel:
        for i in range(2):
            req = pb.ProveRequest(submit=ref_data.request("porep", f"vram-{i}"))
            result = stub.Prove(req, timeout=300).result
            assert result.status == pb.AwaitProofResponse.COMPLETED, result.error_message
        text = stub.GetMetrics(pb.GetMetricsRequest(), timeout=10).prometheus_text
    report = sampler.stop()
    own = re.search(r"^cuzk_ref_gpu_memory_bytes (\S+)$", text, re.M)
    assert own, text
    engine_bytes = float(own[1])
    assert report.vram_source == "pids" and report.vram_peak_bytes, report.to_dict()
    error = (report.vram_peak_bytes - engine_bytes) / engine_bytes
    figures = {
        "nvml_peak_mib": report.vram_peak_bytes / MIB,
        "engine_mib": engine_bytes / MIB,
        "error_pct": 100 * error,
    }
    print(f"\n[vram] {json.dumps(figures)}")
    assert abs(error) <= 0.05, figures
    assert daemon.stop() == 0

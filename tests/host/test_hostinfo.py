"""Host description, hardware fingerprint, NVML session sharing and daemon build identity."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from pathlib import Path

import pynvml
import pytest
from helpers.fakenvml import FakeNvml

from pytest_cuzk.host import nvml
from pytest_cuzk.host.info import GpuInfo, binary_sha256, daemon_identity, host_info
from pytest_cuzk.host.nvml import nvml_session

GIB = 1 << 30


def test_host_info_describes_this_machine() -> None:
    info = host_info()
    assert info.hostname
    assert info.cpu_model
    assert info.cpu_logical_cores >= 1
    assert info.ram_total_bytes > 256 << 20
    assert info.kernel
    if not info.gpus:
        assert info.gpu_unavailable_reason, "an empty GPU list must say why"
    d = info.as_dict()
    assert d["fingerprint"] == info.fingerprint()
    json.dumps(d)  # goes into pytest-benchmark's JSON as is


def test_fingerprint_is_stable_and_ignores_hostname_and_clocks() -> None:
    info = host_info()
    fp = info.fingerprint()
    assert fp == host_info().fingerprint()
    assert len(fp) == 16
    int(fp, 16)
    gpu = GpuInfo(0, "NVIDIA H200", "GPU-a", 141 * GIB, 345, 1980, 3201, True)
    with_gpu = dataclasses.replace(info, gpus=(gpu,))
    moved = dataclasses.replace(
        with_gpu,
        hostname="elsewhere",
        gpus=(dataclasses.replace(gpu, uuid="GPU-b", sm_clock_mhz=1980, persistence_mode=False),),
    )
    assert moved.fingerprint() == with_gpu.fingerprint()
    assert with_gpu.fingerprint() != fp
    two_gpus = dataclasses.replace(with_gpu, gpus=(gpu, dataclasses.replace(gpu, index=1)))
    assert two_gpus.fingerprint() != with_gpu.fingerprint()
    assert dataclasses.replace(info, driver_version="999.1").fingerprint() != fp
    more_ram = dataclasses.replace(info, ram_total_bytes=info.ram_total_bytes + 2 * GIB)
    assert more_ram.fingerprint() != fp


def test_host_info_reads_gpus_through_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml(monkeypatch)
    info = host_info()
    assert info.gpu_unavailable_reason is None
    assert info.driver_version == "580.159.03"
    assert info.cuda_driver_version == "13.0"
    (gpu,) = info.gpus
    assert (gpu.name, gpu.uuid, gpu.vram_total_bytes) == ("NVIDIA H200", "GPU-0000-fake", 141 * GIB)
    assert (gpu.sm_clock_mhz, gpu.mem_clock_mhz, gpu.persistence_mode) == (1980, 3201, True)
    assert (fake.inits, fake.shutdowns) == (1, 1)


def test_host_info_says_why_when_nvml_library_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", missing)
    info = host_info()
    assert info.gpus == ()
    assert info.driver_version is None
    assert "NVML unavailable" in (info.gpu_unavailable_reason or "")


def test_nvml_session_initialises_once_for_nested_and_concurrent_users(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeNvml(monkeypatch)
    with nvml_session() as why_outer:
        assert why_outer is None
        with nvml_session() as why_inner:
            assert why_inner is None
        assert (fake.inits, fake.shutdowns) == (1, 0), (
            "inner exit must not shut NVML down under the outer user"
        )
        results: list[str | None] = []

        def use() -> None:
            with nvml_session() as why:
                results.append(why)

        threads = [threading.Thread(target=use) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [None] * 8
        assert (fake.inits, fake.shutdowns) == (1, 0)
    assert (fake.inits, fake.shutdowns) == (1, 1)
    assert nvml._LIBRARY.users == 0


def test_binary_sha256_matches_hashlib_and_notices_a_rebuild(tmp_path: Path) -> None:
    binary = tmp_path / "cuzk-daemon"
    binary.write_bytes(b"build one" * 100_000)
    assert binary_sha256(binary) == hashlib.sha256(binary.read_bytes()).hexdigest()
    binary.write_bytes(b"build two" * 100_000)  # same size: the mtime tells the builds apart
    st = binary.stat()
    os.utime(binary, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert binary_sha256(binary) == hashlib.sha256(b"build two" * 100_000).hexdigest()


def test_machine_info_of_one_host_is_equal_whatever_the_gpus_clocks(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeNvml(monkeypatch)
    idle = host_info().machine_dict()
    monkeypatch.setattr(pynvml, "nvmlDeviceGetClockInfo", lambda h, kind: 345)  # an idle GPU's clocks
    busy = host_info().machine_dict()
    assert json.dumps(idle, sort_keys=True) == json.dumps(busy, sort_keys=True)
    (gpu,) = idle["gpus"]
    assert gpu["sm_clock_max_mhz"] == 1980 and "sm_clock_mhz" not in gpu and "mem_clock_mhz" not in gpu
    assert host_info().as_dict()["gpus"][0]["sm_clock_mhz"] == 345, "the full record keeps them"


def test_a_reference_engines_build_is_the_same_before_and_after_it_says_its_prover(tmp_path: Path) -> None:
    from pytest_cuzk.backends.reference import RefProfile
    from pytest_cuzk.vocab.daemonconfig import config_record

    before = RefProfile("default", None, tmp_path, behave="cuzk")
    after = RefProfile("default", None, tmp_path, behave="cuzk", prover="gpu:NVIDIA H200")
    assert before.build() == after.build() == "cuzk-ref 0.1.0 preset=default behave=cuzk"
    assert after.identity() == "cuzk-ref 0.1.0 preset=default behave=cuzk prover=gpu:NVIDIA H200"
    configured = RefProfile("default", None, tmp_path, behave="cuzk", prover="cpu", config=config_record({}))
    assert configured.identity() == "cuzk-ref 0.1.0 preset=default behave=cuzk config=default prover=cpu"


def test_daemon_identity(tmp_path: Path) -> None:
    binary = tmp_path / "cuzk"
    binary.write_bytes(b"\x7fELF fake")
    ident = daemon_identity(binary, engine="cuzk")
    assert ident == {
        "daemon_binary": str(binary),
        "daemon_size_bytes": 9,
        "daemon_sha256": hashlib.sha256(b"\x7fELF fake").hexdigest(),
        "engine": "cuzk",
    }
    ref = daemon_identity(None, engine="cuzk-ref", preset="default")
    assert ref == {"daemon_binary": None, "daemon_sha256": None, "engine": "cuzk-ref", "preset": "default"}
    with pytest.raises(FileNotFoundError, match=r"cannot hash the daemon binary .*missing"):
        daemon_identity(tmp_path / "missing")

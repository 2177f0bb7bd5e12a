"""The records a results database holds: a host, a run of one daemon, and one finished test.

Light on purpose (no SQLAlchemy): backends describe their host with them in every run,
and only a run that records imports the database itself.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field
from typing import Any

from pytest_cuzk.host.info import HostInfo, hardware_fingerprint, host_info

__all__ = ["SAVED_RUN_ID", "HostRecord", "RecordedTest", "ResultRow", "RunRecord", "TestRecord"]

SAVED_RUN_ID = "results_run_id"  # the extra_info key a saved case names its recorded run by


@dataclass(frozen=True)
class HostRecord:
    """What a host is; ``fingerprint`` groups runs of the same hardware and driver stack.

    ``hostname`` is the run's own (two machines built alike share a fingerprint, not a name).
    """

    fingerprint: str
    gpu_models: list[str]
    gpu_count: int
    vram_total_bytes: int
    cpu_model: str
    cpu_cores: int
    ram_bytes: int
    driver: str = ""
    cuda: str = ""
    hostname: str = ""

    @classmethod
    def of(cls, **facts: Any) -> HostRecord:
        """Build a record whose fingerprint is derived from the facts that shape performance.

        The hostname is left out on purpose: two identically built rented machines are the same
        kind of host, and the run's label tells the instances apart.
        """
        keys = ("gpu_models", "gpu_count", "vram_total_bytes", "cpu_model", "cpu_cores", "ram_bytes")
        stable = {k: facts.get(k) for k in (*keys, "driver", "cuda")}
        return cls(fingerprint=hardware_fingerprint(stable), **facts)

    @classmethod
    def this_host(cls) -> HostRecord:
        """The machine pytest runs on."""
        return cls.from_host(host_info())

    @classmethod
    def from_host(cls, host: HostInfo) -> HostRecord:
        """A described machine, keyed by the same fingerprint as its pytest-benchmark machine info."""
        return cls(
            fingerprint=host.fingerprint(),
            gpu_models=[g.name for g in host.gpus],
            gpu_count=len(host.gpus),
            vram_total_bytes=sum(g.vram_total_bytes for g in host.gpus),
            cpu_model=host.cpu_model,
            cpu_cores=host.cpu_logical_cores,
            ram_bytes=host.ram_total_bytes,
            driver=host.driver_version or "",
            cuda=host.cuda_driver_version or "",
            hostname=host.hostname,
        )


@dataclass(frozen=True)
class RunRecord:
    """One daemon measured in one pytest session (a run of several daemons makes one run per daemon).

    ``label``, ``host.hostname`` and ``host_id`` (the provider's machine id) are the identity
    the host is rented by: the next offer of the same machine is matched by ``host_id``.
    """

    host: HostRecord
    daemon_build: str
    label: str = ""
    host_id: str = ""
    batch_size: int | None = None
    concurrency: int | None = None
    preset: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # The build as pytest-benchmark's machine info names it, so a saved run finds its build's rows
    # (``daemon_build`` is what the daemon said once running: the reference engine adds its prover).
    machine_build: str | None = None
    daemons: int | None = None  # the daemons its session ran, this one among them; 1: measured alone
    run_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    started_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc))


@dataclass(frozen=True)
class TestRecord:
    """The figures of one finished test; written as one row in one transaction."""

    __test__ = False  # not a pytest test class despite the name

    run_id: str
    nodeid: str
    kind: str
    batch_size: int
    concurrency: int
    proofs_ok: int
    proofs_failed: int
    p50_s: float | None
    p90_s: float | None
    max_s: float | None
    proofs_per_hour: float | None
    rss_peak_bytes: int | None
    vram_peak_bytes: int | None = None
    cold_start: dict[str, float] = field(default_factory=dict)  # start/ready/srs_load/warmup/pce seconds
    sampler_interval_s: float | None = None
    warmup_rss_peak_bytes: int | None = None  # SRS load, warm-up proof and PCE extraction
    lowmem_warmup: bool | None = None  # whether that warm-up ran with the low-memory config
    p99_s: float | None = None
    samples: dict[str, list[Any]] | None = None  # every proof's and wave's timings (figures.Samples)
    ab: dict[str, Any] | None = None  # --cuzk-ab: the paired change against the control (measure.paired)
    label: str = ""
    gpu_p50_ms: float | None = None  # the median proof's phase times, as the daemon reported them
    synthesis_p50_ms: float | None = None
    queue_wait_p50_ms: float | None = None
    # The case's Figures.to_dict() less ``samples`` and ``ab`` (columns of their own): the figures
    # the saved-baseline gate reads, as they were, so a recorded run counts as a saved one does.
    figures: dict[str, Any] | None = None
    finished_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc))


@dataclass(frozen=True)
class ResultRow:
    """A test joined with its run and host: what the ``cuzk-perf`` reports work on."""

    test: TestRecord
    run: RunRecord


@dataclass(frozen=True)
class RecordedTest:
    """One test of a run whose daemon was measured alone: what the saved-baseline gate counts as a run.

    ``figures`` is the case's ``Figures.to_dict()`` whole again (its ``samples`` put back);
    ``build`` is the run's ``machine_build``, as a saved run's machine info names it.
    """

    __test__ = False  # not a pytest test class despite the name

    run_id: str
    nodeid: str
    build: str
    host: str  # the host's fingerprint
    figures: dict[str, Any]

"""What a run writes to the results database: one run per daemon, one row per finished test.

Each row is written in its own transaction when its test ends, so an interrupted
run keeps every finished test; its runs are left unfinished, as the database expects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .client import ProvingClient
from .hostinfo import host_info
from .results import HostRecord, ResultsDB, RunRecord, TestRecord
from .wire.addresses import is_local

if TYPE_CHECKING:
    from .bench import Case, CaseResult
    from .session import CuzkSession, Target

__all__ = ["Recorder"]


class Recorder:
    """Records a session's tests in the database at ``url`` (``default``: the SQLite file)."""

    def __init__(self, url: str) -> None:
        self.url = None if url == "default" else url
        self.db: ResultsDB | None = None
        self.runs: dict[str, str] = {}

    def record(
        self, session: CuzkSession, target: Target, case: Case, result: CaseResult, nodeid: str
    ) -> None:
        """Write one finished test, starting its daemon's run on first use."""
        if self.db is None:
            self.db = ResultsDB(self.url)
        if target.label not in self.runs:
            self.runs[target.label] = self.db.start_run(run_record(session, target))
        info = result.extra_info()
        cold = target.cold[-1].as_dict() if target.cold else {}
        kind = case.kind.name
        self.db.record_test(
            TestRecord(
                run_id=self.runs[target.label],
                nodeid=nodeid,
                kind=kind,
                batch_size=case.batch_size,
                concurrency=case.concurrency,
                proofs_ok=info["proofs_ok"],
                proofs_failed=info["proofs_failed"],
                p50_s=info["latency_p50_s"],
                p90_s=info["latency_p90_s"],
                max_s=info["latency_max_s"],
                proofs_per_hour=info["throughput_proofs_per_hour"],
                rss_peak_bytes=info.get("rss_peak_bytes"),
                vram_peak_bytes=info.get("vram_peak_bytes"),
                cold_start={
                    "start_s": cold.get("start_s", 0.0),
                    "srs_load_s": cold.get("srs_load_s", {}).get(kind, 0.0),
                    "warmup_s": cold.get("warmup_s", {}).get(kind, 0.0),
                    "pce_s": cold.get("pce_s", {}).get(kind, 0.0),
                },
                sampler_interval_s=info.get("sampler_interval_s"),
                label=case.label,
            )
        )

    def close(self, interrupted: bool) -> None:
        """Mark the runs finished (unless interrupted) and close the database."""
        if self.db is None:
            return
        try:
            if not interrupted:
                for run_id in self.runs.values():
                    self.db.finish_run(run_id)
        finally:
            self.db.close()
            self.db = None


def run_record(session: CuzkSession, target: Target) -> RunRecord:
    """A daemon's run: its host, its build, its configuration."""
    s = session.settings
    return RunRecord(
        host=host_record(target),
        daemon_build=session.engine_identity(),
        label=target.label,
        batch_size=s.batch_sizes[0] if len(s.batch_sizes) == 1 else None,
        concurrency=max(s.concurrency),
        preset=s.preset if target.mode == "ref" else None,
        extra={"worker": session.worker, "mode": target.mode},
    )


def host_record(target: Target) -> HostRecord:
    """The host: this machine for a local daemon, else what the daemon's GetStatus says of its GPUs."""
    if target.mode != "attach" or is_local(target.address):
        return HostRecord.from_host(host_info())
    with ProvingClient(target.address) as client:
        # cuzk lists each GPU once per worker (two per GPU by default).
        gpus: list[Any] = list({g.ordinal: g for g in client.status().gpus}.values())
    return HostRecord.of(
        gpu_models=[g.name for g in gpus],
        gpu_count=len(gpus),
        vram_total_bytes=sum(g.vram_total_bytes for g in gpus),
        cpu_model=f"unknown (remote host {target.label})",  # keeps unlike remote hosts apart
        cpu_cores=0,
        ram_bytes=0,
        hostname=target.label,
    )

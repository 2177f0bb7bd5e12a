"""GetMetrics text: cuzk's metric names, types and labels, rendered by prometheus-client.

cuzk emits, in this order: ``cuzk_proofs_completed_total``, ``cuzk_proofs_failed_total``,
``cuzk_uptime_seconds``, ``cuzk_queue_depth``, the per-kind ``cuzk_proofs_completed`` and
``cuzk_proofs_failed`` (counters without ``_total``), the summary
``cuzk_proof_duration_seconds`` over the last 1000 completions (only once a proof has
completed), ``cuzk_running_jobs`` and ``cuzk_gpu_workers``. Then one family real cuzk
does not have, through which the engine says what it is to any cuzk client:
``cuzk_ref_info{version, preset, behave, param_cache, prover} 1`` (``prover`` is ``cpu`` or
``gpu:<device name>``), and on the GPU prover ``cuzk_ref_gpu_memory_bytes``: its device memory
by its own count (the CUDA context as NVML saw it appear, plus what CuPy's pool holds), which
a client can hold against NVML's figure for the process. Last the counter
``cuzk_ref_phase_seconds_total{phase}``: seconds the prover spent in each named phase (witness,
sparse products, MSMs, self-check...), so that a run's summary says where its time went.

prometheus-client's text format always names a counter family ``<name>_total``, so it
cannot print cuzk's ``# TYPE cuzk_proofs_completed counter`` line. The two per-kind
families are therefore exposed untyped: their sample lines are exactly cuzk's, and the
exposition stays valid (no second TYPE line for ``cuzk_proofs_completed_total``).
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import metadata

from prometheus_client import generate_latest
from prometheus_client.core import CollectorRegistry, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from pytest_cuzk.refengine.engine import Engine
from pytest_cuzk.vocab.kinds import KINDS

__all__ = ["INFO_METRIC", "EngineCollector", "engine_version", "render"]

INFO_METRIC = "cuzk_ref"  # exposed as cuzk_ref_info


def engine_version() -> str:
    """The installed pytest-cuzk's version: cuzk-ref ships with it."""
    try:
        return metadata.version("pytest-cuzk")
    except metadata.PackageNotFoundError:
        return "unknown"


def _metric(name: str, doc: str, typ: str, value: float | None = None) -> Metric:
    metric = Metric(name, doc, typ)
    if value is not None:
        metric.add_sample(name + ("_total" if typ == "counter" else ""), {}, value)
    return metric


class EngineCollector(Collector):
    """Reads the engine's counters on every scrape; no state of its own."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        """Yield cuzk's families in cuzk's order."""
        engine = self.engine
        completed, failed, durations = engine.counts()
        yield _metric("cuzk_proofs_completed", "Total proofs completed", "counter", sum(completed.values()))
        yield _metric("cuzk_proofs_failed", "Total proofs failed", "counter", sum(failed.values()))
        yield _metric("cuzk_uptime_seconds", "Daemon uptime in seconds", "gauge", round(engine.uptime_s()))
        yield _metric(
            "cuzk_queue_depth", "Jobs waiting in the scheduler queue", "gauge", engine.queue_depth()
        )
        yield self._per_kind("cuzk_proofs_completed", "Proofs completed by kind", completed)
        yield self._per_kind("cuzk_proofs_failed", "Proofs failed by kind", failed)
        if durations:
            summary = Metric(
                "cuzk_proof_duration_seconds", "Proof duration (last 1000 completions)", "summary"
            )
            for name, kind in KINDS.items():
                seconds = [d for k, d in durations if k == name]
                if seconds:
                    labels = {"proof_kind": kind.metric_label}
                    summary.add_sample("cuzk_proof_duration_seconds_count", labels, len(seconds))
                    summary.add_sample("cuzk_proof_duration_seconds_sum", labels, round(sum(seconds), 3))
            yield summary
        behave = engine.behave
        yield _metric("cuzk_running_jobs", "Jobs being worked on", "gauge", behave.running_jobs(engine))
        yield _metric("cuzk_gpu_workers", "GPU workers", "gauge", behave.gpu_workers(engine))
        info = InfoMetricFamily(
            INFO_METRIC, "The cuzk-ref reference engine: what it is and where its keys are"
        )
        config = engine.config
        labels = {"version": engine_version(), "preset": config.preset, "behave": behave.name,
                  "param_cache": str(config.param_cache), "prover": engine.prover.prover_label}  # fmt: skip
        info.add_metric([], labels)
        yield info
        gpu_bytes = engine.prover.gpu_bytes()
        if gpu_bytes is not None:
            doc = "The GPU prover's device memory: CUDA context and kernels, plus CuPy's pool"
            yield _metric("cuzk_ref_gpu_memory_bytes", doc, "gauge", gpu_bytes)
        phases = Metric("cuzk_ref_phase_seconds", "Seconds the prover spent per phase", "counter")
        for phase, spent in sorted(engine.prover.timings().items()):
            phases.add_sample("cuzk_ref_phase_seconds_total", {"phase": phase}, round(spent, 6))
        yield phases

    @staticmethod
    def _per_kind(name: str, doc: str, counts: dict[str, int]) -> Metric:
        metric = Metric(name, doc, "unknown")
        for kind_name, count in counts.items():
            metric.add_sample(name, {"proof_kind": KINDS[kind_name].metric_label}, count)
        return metric


def render(engine: Engine) -> str:
    """The Prometheus text GetMetrics returns."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(EngineCollector(engine))
    return generate_latest(registry).decode()

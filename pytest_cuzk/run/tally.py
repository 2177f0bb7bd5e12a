"""A finished case's one ``Figures`` record, built from every proof and wave it measured.

Throughput counts the timed waves only (requests are built and proofs checked between them),
and comes with its 95% interval: Student's t over the windows' seconds per proof. Windows,
not proofs or waves, are the unit: a wave's proofs share the daemon (a batch finishes together),
and neighbouring waves share the host's speed of the moment, which drifts over seconds. A
percentile that needs more proofs than the case ran is None, with the reason in ``na_reasons``,
never the slowest proof passed off as a p99.
"""

from __future__ import annotations

import statistics

from pytest_cuzk.measure import stats
from pytest_cuzk.measure.figures import STAGES, Figures, ProofTimings, Samples
from pytest_cuzk.run.waves import CaseResult

__all__ = ["case_figures", "case_samples"]


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _partitions(result: CaseResult) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Every partition's synthesis and GPU milliseconds of the case's successful proofs, in proof order."""
    reported = result.reported_memory
    jobs = {job: (synth, gpu) for job, synth, gpu in (reported.partitions if reported is not None else ())}
    found = [jobs[p.job_id] for p in result.ok if p.job_id in jobs]
    return tuple(v for s, _ in found for v in s), tuple(v for _, g in found for v in g)


def case_samples(result: CaseResult) -> Samples:
    """Every successful proof's timings (per partition where /status gave them) and every wave's."""
    ok = result.ok
    synth, gpu = _partitions(result)
    return Samples(
        latency_s=tuple(round(p.latency_s, 4) for p in ok),
        queue_wait_ms=tuple(p.queue_wait_ms for p in ok),
        synthesis_ms=tuple(p.synthesis_ms for p in ok),
        gpu_compute_ms=tuple(p.gpu_compute_ms for p in ok),
        total_ms=tuple(p.total_ms for p in ok),
        wave_s=tuple(round(w.seconds, 4) for w in result.waves),
        wave_size=tuple(len(w.requests) for w in result.waves),
        wave_window=tuple(w.window for w in result.waves),
        partition_synth_ms=synth,
        partition_gpu_ms=gpu,
    )


def case_figures(result: CaseResult, test: str, unsampled: str | None = None) -> Figures:
    """The case's figures; ``unsampled`` says why the daemon's memory was not sampled, if it was not."""
    ok, case, memory = result.ok, result.case, result.memory
    samples = case_samples(result)
    reasons: dict[str, str] = {}
    latencies = list(samples.latency_s)
    quantiles: dict[int, float | None] = {}
    for q in (50, 90, 99):
        quantiles[q], why = stats.percentile(latencies, q)
        if why:
            reasons[f"latency_p{q}_s"] = why
    per_proof = samples.series("window_s_per_proof")
    measured = sum(samples.wave_s)
    interval = stats.Rate().interval(per_proof) if not result.failed else None
    if interval is None:
        reasons["throughput_proofs_per_hour_ci"] = (
            "not with failed proofs"
            if result.failed
            else f"a 95% interval needs {stats.MIN_INTERVAL_SAMPLES} windows, {len(per_proof)} measured"
            if len(per_proof) < stats.MIN_INTERVAL_SAMPLES
            else "the windows vary too much for a bounded 95% interval (it reaches 0 s per proof)"
        )
    daemon_s = sum(samples.total_ms) / 1000
    share = 100 * (sum(latencies) - daemon_s) / daemon_s if daemon_s > 0 else None
    if share is None:
        reasons["plugin_share_pct"] = "the daemon reported no total_ms"
    if memory is None:
        reasons["rss_peak_bytes"] = reasons["vram_peak_bytes"] = unsampled or "not sampled"
    elif memory.vram_unavailable_reason:
        reasons["vram_peak_bytes"] = memory.vram_unavailable_reason
    reported = result.reported_memory
    if reported is not None and reported.error:
        reasons["status_memory_peak_bytes"] = reported.error
    timings = {
        name: round(statistics.fmean(getattr(p, name) for p in ok), 1) if ok else None
        for name in ("queue_wait_ms", "synthesis_ms", "gpu_compute_ms", "total_ms")
    }
    stages = {
        name: round(statistics.median(samples.series(series)), 1) if ok else None
        for name, series, *_ in STAGES
    }
    if not ok:
        reasons.update({f"{name}_p50_ms": "no successful proof" for name in stages})
    return Figures(
        test=test,
        label=case.label,
        kind=case.kind.name,
        batch_size=case.batch_size,
        concurrency=case.concurrency,
        proofs_ok=len(ok),
        proofs_failed=len(result.failed),
        wall_s=round(result.wall_s, 4),
        throughput_proofs_per_hour=round(len(ok) / measured * 3600, 3) if measured else 0.0,
        latency_p50_s=_r(quantiles[50]),
        latency_p90_s=_r(quantiles[90]),
        latency_p99_s=_r(quantiles[99]),
        latency_max_s=_r(max(latencies, default=None)),
        timings=ProofTimings(**timings),
        rss_peak_bytes=memory.rss_effective_peak_bytes if memory is not None else None,
        vram_peak_bytes=memory.vram_peak_bytes if memory is not None else None,
        memory=memory,
        failures=tuple(f"{p.job_id}: {p.error}" for p in result.failed[:20]),
        throughput_proofs_per_hour_ci=(round(interval[0], 3), round(interval[1], 3)) if interval else None,
        throughput_cv=_r(stats.cv(per_proof)),
        latency_cv=_r(stats.cv(latencies)),
        stabilised=result.stabilised,
        stability=result.stability,
        windows=result.windows,
        waves=len(result.waves),
        stop_reason=result.stop_reason,
        measured_s=round(measured, 4),
        untimed_s=round(max(0.0, result.wall_s - measured), 4),
        plugin_share_pct=_r(share, 3),
        status_memory_peak_bytes=reported.used_peak_bytes if reported is not None else None,
        na_reasons=reasons,
        samples=samples,
        gpu_p50_ms=stages["gpu"],
        synthesis_p50_ms=stages["synthesis"],
        queue_wait_p50_ms=stages["queue_wait"],
    )

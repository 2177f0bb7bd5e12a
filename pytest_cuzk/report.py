"""What the terminal shows: the header lines, and the summary of every case, cold start and counter."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .figures import METRICS
from .tables import table
from .wire.units import format_bytes

if TYPE_CHECKING:
    from .ledger import MetricValues
    from .session import CuzkSession

__all__ = ["header_lines", "metric_deltas", "summary_lines"]

_SUMMARY_METRICS = ("p50", "max", "throughput", "rss_peak", "vram_peak")


def header_lines(session: CuzkSession) -> list[str]:
    """The daemon mode and why, and the matrix; under xdist what that means for the figures."""
    from .errors import CuzkError

    s = session.settings
    try:
        choice = session.choice
        lines = [f"cuzk: daemon mode {choice.mode} ({choice.reason})"]
    except CuzkError as exc:
        return [f"cuzk: no daemon: {exc}"]
    if session.config.args == ["pytest_cuzk.suite"]:
        lines.append(
            "cuzk: running the packaged suite (no test paths given: pass paths to run your own tests)"
        )
    lines.append(
        f"cuzk: batch sizes {','.join(map(str, s.batch_sizes))}, concurrency "
        f"{','.join(map(str, s.concurrency))}, {s.proofs} proofs per case, "
        f"sampling every {s.sample_interval}s"
    )
    config = session.config
    if config.pluginmanager.hasplugin("xdist") and getattr(config.option, "numprocesses", None):
        lines.append("cuzk: pytest-benchmark disables itself under xdist; pytest-cuzk's own figures are kept")
        if choice.mode != "attach":
            lines.append(
                "cuzk: each xdist worker spawns its own daemon, and they share this host's RAM and GPUs: "
                "measure with -n 0"
            )
    return lines


def metric_deltas(totals: MetricValues) -> list[str]:
    """Counters that moved over the run, as ``name{labels}: +N``."""
    from .ledger import series_name

    return [f"  {series_name(key)}: {delta:+g}" for key, delta in sorted(totals.items()) if delta]


def _cold_lines(colds: Iterable[dict[str, Any]]) -> list[str]:
    """Each daemon start with the time each readiness stage took; a restart's cost is its start's total."""
    from .backends.protocol import ColdStart

    lines: list[str] = []
    said: set[str] = set()
    for record in colds:
        cold = ColdStart.from_dict(record)
        where = cold.label + (f" batch {cold.batch_size}" if cold.batch_size else "")
        total = cold.start_s + sum(sum(d.values()) for d in (cold.srs_load_s, cold.warmup_s, cold.pce_s))
        lines.append(
            f"cold start [{where}] {total:.1f}s: start {cold.start_s}s, SRS load {cold.srs_load_s}, "
            f"warm-up {cold.warmup_s}, PCE {cold.pce_s}"
            + (" (low-memory warm-up)" if cold.lowmem_warmup else "")
        )
        lines += [f"  note: {n}" for n in cold.notes]
        restarts = [r for r in record.get("restarts", []) if r not in said]
        said.update(restarts)
        lines += [f"  {r}" for r in restarts]
    return lines


def _measured_lines(session: CuzkSession) -> list[str]:
    """What was measured, on what: each daemon's build and place, this host, and where the outputs went."""
    from .hostinfo import host_info

    lines = [
        f"daemon [{b.label}]: {b.profile().identity()} ({b.mode}, {'on this host' if b.local else 'remote'})"
        for b in session.choice.backends
    ]
    h = host_info()
    gpus = ", ".join(f"{g.name} {format_bytes(g.vram_total_bytes)}" for g in h.gpus) or (
        f"none ({h.gpu_unavailable_reason})"
    )
    driver = f", driver {h.driver_version}, CUDA {h.cuda_driver_version}" if h.driver_version else ""
    cpu = f"{h.cpu_model}, {h.cpu_logical_cores} cores, {format_bytes(h.ram_total_bytes)} RAM"
    lines.append(f"host {h.hostname}: {cpu}; GPUs: {gpus}{driver}")
    s, root = session.settings, session.workspace.root
    if s.plots:
        lines.append(f"memory plots: {s.plots}")
    if session.workspace.keep and root is not None:
        lines.append(f"daemon configs and logs kept in {root} (a test failed)")
    return lines


def _listed(head: str, tests: list[tuple[str, str]]) -> list[str]:
    """``head`` with how many tests, then each test and why."""
    if not tests:
        return []
    return [f"{head}: {len(tests)} cuzk test(s)", *(f"  {n.rpartition('::')[2]}: {why}" for n, why in tests)]


def summary_lines(session: CuzkSession) -> list[str]:
    """The lines of the ``cuzk proving summary`` section, from every worker's figures."""
    metrics = [METRICS[m] for m in _SUMMARY_METRICS]
    heads = ["test", "kind", ">batch", ">j", ">ok", ">failed", *(f">{m.label}" for m in metrics)]
    rows = [
        [f.test, f.kind, f.batch_size, f.concurrency, f.proofs_ok, f.proofs_failed]
        + [m.fmt(m.value(f)) for m in metrics]
        for f in session.rows
    ]
    # First what did not run or failed as a known bug: a reader must not take a short table for a full one
    lines = _listed("DID NOT RUN", session.not_run) + _listed("KNOWN ENGINE BUG (xfail)", session.known)
    lines += _measured_lines(session)
    lines += table(heads, rows, rule=False).splitlines() if rows else ["no suite case ran"]
    lines += _cold_lines(session.colds.values())
    lines += [f"data: {n}" for data in session.data_sets() for n in data.notes]
    lines += [f"note: {n}" for n in [*session.notes, *session.ledger.restarts_seen]]
    for label, totals in session.ledger.totals().items():
        deltas = metric_deltas(totals)
        if deltas:
            lines.append(f"daemon metrics over the run [{label}]:")
            lines += deltas
    return lines

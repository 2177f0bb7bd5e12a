"""The terminal summary: one row per case, then cold-start stages and metric deltas per daemon."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .bench import CaseResult
from .session import CuzkSession

__all__ = ["metric_deltas", "summary_lines"]

_COLUMNS = (
    "test",
    "kind",
    "batch",
    "j",
    "ok",
    "failed",
    "p50 s",
    "max s",
    "proofs/h",
    "RSS peak",
    "VRAM peak",
)


def _size(n: Any) -> str:
    return "n/a" if not n else f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def _num(v: float | None, fmt: str = "{:.2f}") -> str:
    return "n/a" if v is None else fmt.format(v)


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def metric_deltas(
    before: dict[tuple[str, tuple[tuple[str, str], ...]], float],
    after: dict[tuple[str, tuple[tuple[str, str], ...]], float],
) -> list[str]:
    """Counters and gauges that moved over the run, as ``name{labels}: +N``."""
    lines = []
    for key in sorted(after):
        delta = after[key] - before.get(key, 0.0)
        name, labels = key
        if delta and not name.endswith(("_seconds", "_sum")):
            label = "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}" if labels else ""
            lines.append(f"  {name}{label}: {delta:+g}")
    return lines


def summary_lines(results: Iterable[tuple[str, CaseResult]], session: CuzkSession) -> list[str]:
    """The lines pytest prints in its ``cuzk`` summary section."""
    rows = [_COLUMNS]
    for name, r in results:
        mem = r.memory.as_extra_info() if r.memory is not None else {}
        rows.append(
            (
                name,
                r.case.kind.name,
                str(r.case.batch_size),
                str(r.case.concurrency),
                str(len(r.ok)),
                str(len(r.failed)),
                _num(r.latency(50)),
                _num(max((p.wall_s for p in r.ok), default=None)),
                _num(r.proofs_per_hour, "{:.1f}"),
                _size(mem.get("rss_peak_bytes")),
                _size(mem.get("vram_peak_bytes")),
            )
        )
    lines = _table(rows) if len(rows) > 1 else ["no proofs were run"]
    for target in session.targets.values():
        for cold in target.cold:
            where = f"{target.label}" + (f" batch {cold.batch_size}" if cold.batch_size else "")
            stages = cold.as_dict()
            lines.append(
                f"cold start [{where}]: start {stages['start_s']}s, SRS load {stages['srs_load_s']}, "
                f"warm-up {stages['warmup_s']}, PCE {stages['pce_s']}"
                + (" (low-memory warm-up)" if cold.lowmem_warmup else "")
            )
            lines += [f"  note: {n}" for n in cold.notes]
        lines += [f"{target.label}: {r}" for r in target.restarts]
    for label, deltas in session.metric_changes.items():
        if deltas:
            lines.append(f"daemon metrics over the run [{label}]:")
            lines += deltas
    return lines

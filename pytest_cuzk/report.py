"""The terminal summary: one row per case, then cold-start stages and metric deltas per daemon."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

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
    return "n/a" if n is None else f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def _num(v: float | None, fmt: str = "{:.2f}") -> str:
    return "n/a" if v is None else fmt.format(v)


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    """Left-aligned columns, as wide as their widest cell."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def metric_deltas(totals: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> list[str]:
    """Counters that moved over the run, as ``name{labels}: +N`` (durations left out)."""
    lines = []
    for (name, labels), delta in sorted(totals.items()):
        if delta and not name.endswith(("_seconds", "_sum", "_uptime_seconds")) and "uptime" not in name:
            label = "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}" if labels else ""
            lines.append(f"  {name}{label}: {delta:+g}")
    return lines


def summary_lines(
    rows: Iterable[tuple[str, dict[str, Any]]], colds: Iterable[dict[str, Any]], session: Any
) -> list[str]:
    """The lines pytest prints in its ``cuzk`` summary section.

    ``rows`` are (test name, extra_info) and ``colds`` the cold-start records, both as
    the tests reported them, so results from every xdist worker reach one table.
    """
    table = [_COLUMNS]
    for name, info in rows:
        table.append(
            (
                name,
                str(info["kind"]),
                str(info["batch_size"]),
                str(info["concurrency"]),
                str(info["proofs_ok"]),
                str(info["proofs_failed"]),
                _num(info.get("latency_p50_s")),
                _num(info.get("latency_max_s")),
                _num(info.get("throughput_proofs_per_hour"), "{:.1f}"),
                _size(info.get("rss_peak_bytes")),
                _size(info.get("vram_peak_bytes")),
            )
        )
    lines = _table(table) if len(table) > 1 else ["no suite case ran"]
    for cold in colds:
        where = cold["label"] + (f" batch {cold['batch_size']}" if cold.get("batch_size") else "")
        lines.append(
            f"cold start [{where}]: start {cold['start_s']}s, SRS load {cold['srs_load_s']}, "
            f"warm-up {cold['warmup_s']}, PCE {cold['pce_s']}"
            + (" (low-memory warm-up)" if cold.get("lowmem_warmup") else "")
        )
        lines += [f"  note: {n}" for n in cold.get("notes", [])]
        lines += [f"  {r}" for r in cold.get("restarts", [])]
    lines += [f"data: {n}" for n in session.data_notes]
    for label, totals in session.metric_totals.items():
        deltas = metric_deltas(totals)
        if deltas:
            lines.append(f"daemon metrics over the run [{label}]:")
            lines += deltas
    return lines

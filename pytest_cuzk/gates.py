"""Gates that fail the offending test by name, with what was measured and the limit.

pytest-benchmark's ``--benchmark-compare-fail`` checks timings only and fails the
whole session at its end; these gates cover throughput and memory too, absolute
(``--cuzk-min-throughput``, ``--cuzk-max-rss``, ``--cuzk-max-vram``) and relative
to a saved run (``--cuzk-compare-fail``), and fail inside the test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .bench import CaseResult
from .settings import Settings

__all__ = ["baseline_mapping", "check_gates"]

# metric -> (extra_info key, True when a higher value is better)
_COMPARED = {
    "throughput": ("throughput_proofs_per_hour", True),
    "rss_peak": ("rss_peak_bytes", False),
    "vram_peak": ("vram_peak_bytes", False),
    "p50": ("latency_p50_s", False),
    "p90": ("latency_p90_s", False),
}


def _gib(n: float) -> str:
    return f"{n / 2**30:.3f} GiB"


def baseline_mapping(settings: Settings, benchmarksession: Any | None) -> dict[str, dict[str, Any]]:
    """Saved benchmarks by fullname: from ``--cuzk-baseline`` or pytest-benchmark's compared run."""
    if settings.baseline:
        try:
            data = json.loads(Path(settings.baseline).read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read --cuzk-baseline {settings.baseline}: {exc}") from exc
        return {b["fullname"]: b for b in data.get("benchmarks", [])}
    mapping: dict[str, dict[str, Any]] = {}
    for benches in (getattr(benchmarksession, "compared_mapping", None) or {}).values():
        mapping.update(benches)
    return mapping


def _rss_peak(info: dict[str, Any]) -> int | None:
    """The sampled peak, or the kernel's exact one (VmHWM) when it covers just this test."""
    peaks = [info.get("rss_peak_bytes")]
    if info.get("rss_hwm_scope") == "test":
        peaks.append(info.get("rss_hwm_peak_bytes"))
    known = [p for p in peaks if p is not None]
    return max(known) if known else None


def check_gates(
    result: CaseResult, settings: Settings, baseline: dict[str, Any] | None
) -> tuple[list[str], list[str]]:
    """The gates the case breaks, and the gates that could not be checked, as sentences.

    A broken gate names the measured value, the limit and the option; an unchecked
    one says why, so that a gate never passes silently for want of a figure.
    """
    kind = result.case.kind.name
    info = result.extra_info()
    failures: list[str] = []
    unchecked: list[str] = []
    floor = settings.min_throughput.get(kind)
    if floor is not None and result.proofs_per_hour < floor:
        failures.append(
            f"throughput {result.proofs_per_hour:.2f} proofs/h is below the minimum {floor:g}/h for {kind} "
            "(--cuzk-min-throughput)"
        )
    for name, value, limits, option in (
        ("rss_peak_bytes", _rss_peak(info), settings.max_rss, "--cuzk-max-rss"),
        ("vram_peak_bytes", info.get("vram_peak_bytes"), settings.max_vram, "--cuzk-max-vram"),
    ):
        limit = limits.get(kind)
        if limit is None:
            continue
        if value is None:
            why = info.get("vram_unavailable_reason") or "the daemon's process is not sampled (attached)"
            unchecked.append(f"{option} not checked for {kind}: no {name} ({why})")
        elif value > limit:
            failures.append(f"{name} {_gib(value)} exceeds {_gib(limit)} for {kind} ({option})")
    if settings.compare_fail and not baseline:
        unchecked.append(
            "--cuzk-compare-fail not checked: the compared run has no such test "
            "(pass --cuzk-baseline FILE or --benchmark-compare)"
        )
    if baseline and settings.compare_fail:
        old = baseline.get("extra_info", {})
        for metric, pct in settings.compare_fail.items():
            key, higher_better = _COMPARED[metric]
            a, b = old.get(key), info.get(key)
            if not a or b is None:
                unchecked.append(f"--cuzk-compare-fail {metric} not checked: no {key} in the baseline or now")
                continue
            change = (b - a) / a * 100
            regressed = -change if higher_better else change
            if regressed > pct:
                failures.append(
                    f"{metric} regressed {regressed:.1f}% (baseline {a:g}, now {b:g}; limit {pct:g}%) "
                    "(--cuzk-compare-fail)"
                )
    return failures, unchecked

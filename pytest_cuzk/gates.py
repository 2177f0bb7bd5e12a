"""Gates that fail the offending test by name, with what was measured and the limit.

pytest-benchmark's ``--benchmark-compare-fail`` checks timings only and fails the whole
session at its end; these gates cover throughput and memory too, absolute
(``--cuzk-min-throughput``, ``--cuzk-max-rss``, ``--cuzk-max-vram``) and relative to a saved
run (``--cuzk-compare-fail``), and fail inside the test. ``Gates`` is the last sink of
``pytest_cuzk_case_finished``, so every other sink has the case before it fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .errors import CuzkError, CuzkWarning
from .figures import METRICS, Figures, regression
from .settings import Settings
from .wire.units import format_bytes

if TYPE_CHECKING:
    from .cases import Case
    from .runner import CaseResult

__all__ = ["Gates", "check_gates", "load_baseline"]


def load_baseline(path: Path) -> dict[str, dict[str, Any]]:
    """Saved benchmarks by fullname from a pytest-benchmark JSON file."""
    try:
        data = json.loads(Path(path).read_text())
        return {b["fullname"]: b for b in data.get("benchmarks", [])}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CuzkError(
            f"cannot read --cuzk-baseline {path}: {exc}; pass a JSON file written by --benchmark-json "
            "or --benchmark-save"
        ) from exc


def check_gates(
    figures: Figures, settings: Settings, baseline: dict[str, Any] | None
) -> tuple[list[str], list[str]]:
    """The gates the case breaks, and the gates that could not be checked, as sentences.

    A broken gate names the measured value, the limit and the option; an unchecked
    one says why, so that a gate never passes silently for want of a figure.
    """
    kind = figures.kind
    failures: list[str] = []
    unchecked: list[str] = []
    floor = settings.min_throughput.get(kind)
    if floor is not None and figures.throughput_proofs_per_hour < floor:
        failures.append(
            f"throughput {figures.throughput_proofs_per_hour:.2f} proofs/h is below the minimum {floor:g}/h "
            f"for {kind} (--cuzk-min-throughput)"
        )
    for metric, limits, option in (
        (METRICS["rss_peak"], settings.max_rss, "--cuzk-max-rss"),
        (METRICS["vram_peak"], settings.max_vram, "--cuzk-max-vram"),
    ):
        limit = limits.get(kind)
        value = metric.value(figures)
        if limit is None:
            continue
        if value is None:
            memory = figures.memory
            why = (memory.vram_unavailable_reason if memory else None) or (
                "the daemon's process is not sampled (attached)"
            )
            unchecked.append(f"{option} not checked for {kind}: no {metric.attr} ({why})")
        elif value > limit:
            failures.append(
                f"{metric.attr} {format_bytes(value)} exceeds {format_bytes(limit)} for {kind} ({option})"
            )
    if settings.compare_fail:
        failures += _compare(figures, settings, baseline, unchecked)
    return failures, unchecked


def _compare(
    figures: Figures, settings: Settings, baseline: dict[str, Any] | None, unchecked: list[str]
) -> list[str]:
    if not baseline:
        unchecked.append(
            "--cuzk-compare-fail not checked: the compared run has no such test "
            "(pass --cuzk-baseline FILE or --benchmark-compare)"
        )
        return []
    old = baseline.get("extra_info", {})
    failures = []
    for name, pct in settings.compare_fail.items():
        metric = METRICS[name]
        before, after = old.get(metric.attr), metric.value(figures)
        worse = regression(metric, before, after)
        if worse is None:
            unchecked.append(
                f"--cuzk-compare-fail {name} not checked: no {metric.attr} in the baseline or now"
            )
        elif worse > pct:
            failures.append(
                f"{name} regressed {worse:.1f}% (baseline {before:g}, now {after:g}; limit {pct:g}%) "
                "(--cuzk-compare-fail)"
            )
    return failures


class Gates:
    """The gates sink: registered by the session when any gate is asked for."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        """Read ``--cuzk-baseline`` now, so a bad file stops the run before any daemon starts."""
        self.config = config
        self.settings = settings
        self._baseline = load_baseline(settings.baseline) if settings.baseline else None

    def baseline(self) -> dict[str, dict[str, Any]]:
        """``--cuzk-baseline``, else pytest-benchmark's compared run (known once it has loaded)."""
        if self._baseline is None:
            bs = getattr(self.config, "_benchmarksession", None)
            mapping: dict[str, dict[str, Any]] = {}
            for benches in (getattr(bs, "compared_mapping", None) or {}).values():
                mapping.update(benches)
            self._baseline = mapping
        return self._baseline

    @pytest.hookimpl(trylast=True)
    def pytest_cuzk_case_finished(
        self, item: pytest.Item, case: Case, figures: Figures, result: CaseResult
    ) -> None:
        baseline = self.baseline().get(item.nodeid) if self.settings.compare_fail else None
        failures, unchecked = check_gates(figures, self.settings, baseline)
        for note in unchecked:
            item.warn(CuzkWarning(note))
        if failures:
            pytest.fail(f"{item.name}: " + "; ".join(failures), pytrace=False)

"""Gates that fail the offending test by name, with what was measured and the limit.

pytest-benchmark's ``--benchmark-compare-fail`` checks timings only and fails the whole
session at its end; these gates cover throughput and memory too, absolute
(``--cuzk-min-throughput``, ``--cuzk-max-rss``, ``--cuzk-max-vram``) and relative to a saved
run (``--cuzk-compare-fail``), and fail inside the test. A relative gate fails only a change
beyond its limit that is significant (``comparison``); one that is not, and a run whose
spread is too wide to resolve the limit, get a warning. ``Gates`` is the last sink of
``pytest_cuzk_case_finished``, so every other sink has the case before it fails.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_cuzk.config.settings import Settings
from pytest_cuzk.core.errors import CuzkError, CuzkWarning
from pytest_cuzk.measure.figures import METRICS, Figures, Samples
from pytest_cuzk.verdicts.comparison import Side, compare, spread_warning
from pytest_cuzk.verdicts.runspread import RunSpread, saved_runs_beside, saved_spread
from pytest_cuzk.wire.units import format_bytes

if TYPE_CHECKING:
    from pytest_cuzk.run.cases import Case
    from pytest_cuzk.run.waves import CaseResult

__all__ = ["Gates", "check_gates", "load_baseline"]


def load_baseline(path: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A pytest-benchmark JSON file's run, and its benchmarks by fullname."""
    try:
        data = json.loads(Path(path).read_text())
        return data, {b["fullname"]: b for b in data.get("benchmarks", [])}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CuzkError(
            f"cannot read --cuzk-baseline {path}: {exc}; pass a JSON file written by --benchmark-json "
            "or --benchmark-save"
        ) from exc


def check_gates(
    figures: Figures,
    settings: Settings,
    baseline: dict[str, Any] | None,
    spreads: Mapping[str, RunSpread] | None = None,
) -> tuple[list[str], list[str]]:
    """The gates the case breaks, and the warnings about gates, as sentences.

    A broken gate names the measured value, the limit and the option. A warning says why a
    gate could not be checked (so that it never passes silently for want of a figure), that a
    change beyond a limit was not significant, or that the run's spread, or the spread of the
    baseline build's saved runs (``spreads``, by metric name), is too wide for a limit.
    """
    kind = figures.kind
    failures: list[str] = []
    warnings: list[str] = []
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
            why = figures.why_na(metric.attr) or "the daemon's process is not sampled (attached)"
            warnings.append(f"{option} not checked for {kind}: no {metric.attr} ({why})")
        elif value > limit:
            failures.append(
                f"{metric.attr} {format_bytes(value)} exceeds {format_bytes(limit)} for {kind} ({option})"
            )
    if settings.compare_fail and settings.ab is None:  # with --cuzk-ab, abgate judges the pair
        failures += _compare(figures, settings, baseline, warnings)
        for name, pct in settings.compare_fail.items():
            spread = (spreads or {}).get(name)
            if spread is not None and (warning := spread.warning(METRICS[name], pct)):
                warnings.append(f"{warning} (--cuzk-compare-fail {name}:{pct:g}%)")
    return failures, warnings


def _compare(
    figures: Figures, settings: Settings, baseline: dict[str, Any] | None, warnings: list[str]
) -> list[str]:
    if not baseline:
        warnings.append(
            "--cuzk-compare-fail not checked: the compared run has no such test "
            "(pass --cuzk-baseline FILE or --benchmark-compare)"
        )
        return []
    old = baseline.get("extra_info", {})
    saved = Samples.from_dict(old["samples"]) if old.get("samples") else None
    old_others = (old.get("memory") or {}).get("host_other_cpu_pct")
    now_others = figures.memory.host_other_cpu_pct if figures.memory is not None else None
    failures = []
    for name, pct in settings.compare_fail.items():
        metric = METRICS[name]
        now = Side(metric.value(figures), figures.samples, now_others)
        change = compare(metric, Side(old.get(metric.attr), saved, old_others), now, pct)
        if change.verdict == "not comparable":
            why = figures.why_na(metric.attr) or (old.get("na_reasons") or {}).get(metric.attr)
            warnings.append(
                f"--cuzk-compare-fail {name} not checked: no {metric.attr} in the baseline or now"
                + (f" ({why})" if why else "")
            )
        elif change.verdict == "regressed":
            failures.append(f"{change.sentence()} (--cuzk-compare-fail)")
        elif change.verdict in ("not significant", "confounded"):
            warnings.append(f"{change.sentence()} (--cuzk-compare-fail)")
        if warning := spread_warning(metric, now, pct):
            warnings.append(f"{warning} (--cuzk-compare-fail {name}:{pct:g}%)")
    return failures


class Gates:
    """The gates sink: registered by the session when any gate is asked for."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        """Read ``--cuzk-baseline`` now, so a bad file stops the run before any daemon starts."""
        self.config = config
        self.settings = settings
        self._baseline: dict[str, dict[str, Any]] | None = None
        self._baseline_run: dict[str, Any] | None = None
        self._saved: tuple[list[dict[str, Any]], dict[str, Any] | None] | None = None
        if settings.baseline:
            self._baseline_run, self._baseline = load_baseline(settings.baseline)

    def saved(self) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """Every saved run beside the compared one, and the compared run (for its build and host).

        Read when the first compared case finishes, not at start-up: a run with no relative gate
        never reads the storage.
        """
        if self._saved is None and self.settings.baseline:
            self._saved = list(saved_runs_beside(self.settings.baseline)), self._baseline_run
        elif self._saved is None:
            bs = getattr(self.config, "_benchmarksession", None)
            compared = {str(path) for path in (getattr(bs, "compared_mapping", None) or {})}
            storage = getattr(bs, "storage", None)
            loaded = list(storage.load()) if compared and storage is not None else []
            run = next((data for path, data in loaded if str(path) in compared), None)
            self._saved = [data for _, data in loaded], run
        return self._saved

    def spreads(self, test: str) -> dict[str, RunSpread]:
        """The spread of each gated figure over the saved runs of the compared run's build."""
        runs, compared = self.saved()
        if compared is None:
            return {}
        found = {
            name: saved_spread(runs, compared, test, METRICS[name]) for name in self.settings.compare_fail
        }
        return {name: spread for name, spread in found.items() if spread is not None}

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
        compared = bool(self.settings.compare_fail)
        baseline = self.baseline().get(item.nodeid) if compared else None
        spreads = self.spreads(item.nodeid) if compared else None
        failures, warnings = check_gates(figures, self.settings, baseline, spreads)
        for note in warnings:
            item.warn(CuzkWarning(note))
        if failures:
            pytest.fail(f"{item.name}: " + "; ".join(failures), pytrace=False)

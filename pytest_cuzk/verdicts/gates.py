"""Gates that fail the offending test by name, with what was measured and the limit.

pytest-benchmark's ``--benchmark-compare-fail`` checks timings only and fails the whole
session at its end; these gates cover throughput and memory too, absolute
(``--cuzk-min-throughput``, ``--cuzk-max-rss``, ``--cuzk-max-vram``) and relative to a saved
run (``--cuzk-compare-fail``), and fail inside the test. A relative gate fails only a change
beyond its limit that is significant (``comparison``); one that is not, and a run whose
spread is too wide to resolve the limit where the change is not decided all the same, are
undecided: a warning, or a failure with ``--cuzk-compare-unresolved=fail``. ``Gates`` is the last sink of
``pytest_cuzk_case_finished``, so every other sink has the case before it fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest

from pytest_cuzk.config.settings import Settings
from pytest_cuzk.core.compat import SavedRun
from pytest_cuzk.core.errors import CuzkWarning
from pytest_cuzk.measure.figures import METRICS, Figures, Samples
from pytest_cuzk.verdicts.baseline import Baseline, describe_run
from pytest_cuzk.verdicts.comparison import Side, Undecided, compare, spread_warning
from pytest_cuzk.verdicts.runspread import RunSpread, saved_spread
from pytest_cuzk.wire.units import format_bytes

if TYPE_CHECKING:
    from pytest_cuzk.run.cases import Case
    from pytest_cuzk.run.waves import CaseResult

__all__ = ["Gates", "check_gates"]


def check_gates(
    figures: Figures,
    settings: Settings,
    baseline: dict[str, Any] | None,
    spreads: Mapping[str, RunSpread] | None = None,
    compared: str = "the compared run",
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
        undecided = Undecided(settings.compare_unresolved == "fail")
        broken, notes, wide = _compare(figures, settings, baseline, undecided.outcome, compared)
        unresolved, notes = undecided.settle(notes)
        failures += broken + unresolved
        warnings += notes + wide
        for name, pct in settings.compare_fail.items():
            spread = (spreads or {}).get(name)
            if spread is not None and (warning := spread.warning(METRICS[name], pct)):
                warnings.append(f"{warning} (--cuzk-compare-fail {name}:{pct:g}%)")
    return failures, warnings


def _compare(
    figures: Figures, settings: Settings, baseline: dict[str, Any] | None, outcome: str, compared: str
) -> tuple[list[str], list[str], list[str]]:
    """The changes beyond their limit, the undecided ones, and the warnings that decide nothing.

    ``outcome`` ends an undecided change's sentence. A run's spread too wide for a limit is
    undecided only where its change was not decided all the same.
    """
    notes: list[str] = []  # undecided
    wide: list[str] = []
    if not baseline:
        return (
            [
                f"--cuzk-compare-fail: {compared} has no {figures.test}, so it cannot be compared: save a "
                "baseline that ran this test (the same -k and matrix), or compare with one that did"
            ],
            notes,
            wide,
        )
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
            notes.append(
                f"--cuzk-compare-fail {name} not checked: no {metric.attr} in the baseline or now"
                + (f" ({why})" if why else "")
            )
        elif change.verdict == "regressed":
            failures.append(f"{change.sentence()} (--cuzk-compare-fail)")
        elif change.verdict in ("not significant", "confounded", "undecided"):
            notes.append(f"{change.sentence(outcome)} (--cuzk-compare-fail)")
        if warning := spread_warning(metric, now, pct):
            decided = change.verdict == "regressed" or (change.verdict == "ok" and change.tested)
            (wide if decided else notes).append(f"{warning} (--cuzk-compare-fail {name}:{pct:g}%)")
    return failures, notes, wide


class Gates:
    """The gates sink: registered by the session when any gate is asked for."""

    def __init__(self, config: pytest.Config, settings: Settings, baseline: Baseline) -> None:
        self.config = config
        self.settings = settings
        self.compared = baseline
        self._runs: list[dict[str, Any]] | None = None

    def spreads(self, test: str, run: SavedRun) -> dict[str, RunSpread]:
        """The spread of each gated figure over the saved runs of the compared run's build.

        The saved runs are read when the first compared case finishes, not at start-up.
        """
        if self._runs is None:
            self._runs = self.compared.runs_beside()
        gated = self.settings.compare_fail
        found = {name: saved_spread(self._runs, run.data, test, METRICS[name]) for name in gated}
        return {name: spread for name, spread in found.items() if spread is not None}

    @pytest.hookimpl(trylast=True)
    def pytest_cuzk_case_finished(
        self, item: pytest.Item, case: Case, figures: Figures, result: CaseResult
    ) -> None:
        run = self.compared.run() if self.settings.compare_fail else None
        baseline = run.benchmarks().get(item.nodeid) if run is not None else None
        spreads = self.spreads(item.nodeid, run) if run is not None else None
        where = describe_run(run) if run is not None else "the compared run"
        failures, warnings = check_gates(figures, self.settings, baseline, spreads, where)
        for note in warnings:
            item.warn(CuzkWarning(note))
        if failures:
            pytest.fail(f"{item.name}: " + "; ".join(failures), pytrace=False)

"""Gates that fail the offending test by name, with what was measured and the limit.

pytest-benchmark's ``--benchmark-compare-fail`` checks timings only and fails the whole
session at its end; these gates cover throughput and memory too, absolute
(``--cuzk-min-throughput``, ``--cuzk-max-rss``, ``--cuzk-max-vram``) and relative to a saved
run (``--cuzk-compare-fail``), and fail inside the test. A relative gate compares with the
baseline build's runs on this host, saved and recorded in the results database, and fails only a
change whose whole interval, widened to the host's run-to-run spread, lies beyond its limit
(``comparison``); one whose interval straddles the limit is undecided: a warning, or a failure
with ``--cuzk-compare-unresolved=fail``. ``Gates`` is the last sink of
``pytest_cuzk_case_finished``, so every other sink has the case before it fails.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import pytest

from pytest_cuzk.config.settings import Settings
from pytest_cuzk.core.compat import SavedRun
from pytest_cuzk.core.errors import CuzkError, CuzkWarning
from pytest_cuzk.measure.figures import METRICS, Figures
from pytest_cuzk.verdicts.abgate import ab_changes
from pytest_cuzk.verdicts.baseline import Baseline, describe_run
from pytest_cuzk.verdicts.comparison import Change, Undecided, against_saved
from pytest_cuzk.verdicts.runspread import Recorded, SavedRuns, saved_runs
from pytest_cuzk.vocab.units import format_bytes

if TYPE_CHECKING:
    from pytest_cuzk.run.cases import Case
    from pytest_cuzk.run.waves import CaseResult

__all__ = ["PLUGIN", "Gates", "check_gates", "compared", "gates_of", "saved_changes"]

PLUGIN = "cuzk_gates"


def check_gates(
    figures: Figures, settings: Settings, saved: SavedRuns | None, compared: str = "the compared run"
) -> tuple[list[str], list[str]]:
    """The gates the case breaks, and the warnings about gates, as sentences.

    A broken gate names the measured value, the limit and the option. A warning says why a
    gate could not be checked (so that it never passes silently for want of a figure), or why a
    change is undecided: its interval, the host's run-to-run spread or the candidate's own,
    straddles the limit, or other processes loaded the host differently in the two runs.
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
        broken, notes = _compare(figures, settings.compare_fail, saved, undecided.outcome, compared)
        unresolved, notes = undecided.settle(notes)
        failures += broken + unresolved
        warnings += notes
    return failures, warnings


def saved_changes(figures: Figures, limits: Mapping[str, float], saved: SavedRuns) -> list[Change]:
    """Each gated figure's change from the baseline build's saved runs to this case."""
    return [against_saved(METRICS[name], saved, figures, pct) for name, pct in limits.items()]


def _compare(
    figures: Figures, limits: Mapping[str, float], saved: SavedRuns | None, outcome: str, compared: str
) -> tuple[list[str], list[str]]:
    """The changes beyond their limit, and the undecided ones (``outcome`` ends their sentences)."""
    if saved is None:
        return [
            f"--cuzk-compare-fail: {compared} has no {figures.test}, so it cannot be compared: save a "
            "baseline that ran this test (the same -k and matrix), or compare with one that did"
        ], []
    failures: list[str] = []
    notes: list[str] = []
    for change in saved_changes(figures, limits, saved):
        metric = change.metric
        if change.verdict == "not comparable" and change.before == 0:
            notes.append(
                f"--cuzk-compare-fail {metric.name} not checked: the baseline's is 0, so no change is "
                "relative to it"
            )
        elif change.verdict == "not comparable":
            why = figures.why_na(metric.attr) or saved.compared.why_na(metric.attr)
            notes.append(
                f"--cuzk-compare-fail {metric.name} not checked: no {metric.attr} in the baseline or now"
                + (f" ({why})" if why else "")
            )
        elif change.verdict == "regressed":
            failures.append(f"{change.sentence()} (--cuzk-compare-fail)")
        elif change.undecided:
            notes.append(f"{change.sentence(outcome)} (--cuzk-compare-fail)")
    return failures, notes


class Gates:
    """The gates sink: registered by the session when any gate is asked for."""

    def __init__(
        self, config: pytest.Config, settings: Settings, baseline: Baseline, recorded: Recorded | None = None
    ) -> None:
        """``recorded``: the results database's runs of a test on a host, where the run records to one."""
        self.config = config
        self.settings = settings
        self.compared = baseline
        self.recorded = recorded
        self._runs: list[SavedRun] | None = None
        self._saved: dict[str, SavedRuns | None] = {}
        self._nodeids: dict[str, str] = {}  # a case's name (Figures.test) to its node id, as it finished

    def saved(self, test: str) -> SavedRuns | None:
        """``test``'s saved (and recorded) runs beside the compared run; read when the case first asks."""
        run = self.compared.run()
        if run is None:
            return None
        if test not in self._saved:
            if self._runs is None:
                self._runs = self.compared.runs_beside()
            self._saved[test] = saved_runs(self._runs, run, test, self.recorded)
        return self._saved[test]

    def changes(self, figures: Figures) -> list[Change]:
        """The case's compared figures, each with its change in words (what the summary prints)."""
        limits = self.settings.compare_fail
        if figures.ab is not None:
            return ab_changes(figures, limits) if limits else []
        nodeid = self._nodeids.get(figures.test)
        saved = self.saved(nodeid) if limits and self.settings.ab is None and nodeid else None
        return saved_changes(figures, limits, saved) if saved is not None else []

    @pytest.hookimpl(trylast=True)
    def pytest_cuzk_case_finished(
        self, item: pytest.Item, case: Case, figures: Figures, result: CaseResult
    ) -> None:
        self._nodeids[figures.test] = item.nodeid
        run = self.compared.run() if self.settings.compare_fail else None
        where = describe_run(run) if run is not None else "the compared run"
        saved = self.saved(item.nodeid) if run is not None else None
        failures, warnings = check_gates(figures, self.settings, saved, where)
        for note in warnings:
            item.warn(CuzkWarning(note))
        if failures:
            pytest.fail(f"{item.name}: " + "; ".join(failures), pytrace=False)


def gates_of(config: pytest.Config) -> Gates | None:
    """The run's ``Gates`` plugin, where it asked for a gate."""
    plugin = config.pluginmanager.get_plugin(PLUGIN)
    return plugin if isinstance(plugin, Gates) else None


def compared(config: pytest.Config, rows: Iterable[Figures]) -> dict[str, list[str]]:
    """Each compared case's changes in words, passing or not, by test: what the summary and report show."""
    gates = gates_of(config)
    if gates is None or not gates.settings.compare_fail:
        return {}
    outcome = Undecided(gates.settings.compare_unresolved == "fail").outcome
    said: dict[str, list[str]] = {}
    for f in rows:
        try:
            lines = [change.sentence(outcome) for change in gates.changes(f)]
        except CuzkError as exc:  # the gate said so when the case finished
            lines = [f"not compared: {exc}"]
        if lines:
            said[f.test] = lines
    return said

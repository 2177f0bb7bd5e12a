"""The A/B gate: ``--cuzk-compare-fail`` applied to a case measured on two builds in pairs (``--cuzk-ab``).

As against a saved baseline, a change fails only when it is beyond its limit and significant:
p < 0.05 and the 95% interval wholly beyond the limit, or, once the pairs put the interval's
half-width within ``stats.PRECISE_SHARE`` of the limit, the point estimate beyond it (drift cancels in
pairs, so sampling noise alone is left, and that precision bounds it). Throughput is judged on the
pairs (the mean log-ratio of the windows measured through the same minutes, Student's t with the
first pairs' spread, ``stats.paired_rate``), so a drift of the
host that moved both builds cancels; latency percentiles on both builds' proofs, and RSS and
VRAM peaks as measured, each build's its own. A control build whose own proofs failed gives no ground
to judge on: a warning says so (a failure with ``--cuzk-compare-unresolved=fail``, as for what
the pairs leave undecided).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pytest

from pytest_cuzk.config.settings import Settings
from pytest_cuzk.core.errors import CuzkWarning
from pytest_cuzk.measure import stats
from pytest_cuzk.measure.figures import METRICS, Figures, regression, worse_interval
from pytest_cuzk.verdicts.comparison import Change, Side, Undecided, compare
from pytest_cuzk.vocab.units import plural

if TYPE_CHECKING:
    from pytest_cuzk.measure.paired import PairedAB
    from pytest_cuzk.run.cases import Case
    from pytest_cuzk.run.waves import CaseResult

__all__ = ["ABGate", "ab_changes", "check_ab"]


def _paired_throughput(figures: Figures, ab: PairedAB, limit: float) -> Change:
    metric, control = METRICS["throughput"], ab.control
    before, after = control.throughput_proofs_per_hour, figures.throughput_proofs_per_hour
    if ab.throughput_ratio is None:
        return Change(metric, before, after, limit, None)
    ci = worse_interval(metric, ab.throughput_ratio_ci) if ab.throughput_ratio_ci is not None else None
    worse = regression(metric, 1.0, ab.throughput_ratio)
    tested = ab.pairs >= stats.MIN_INTERVAL_SAMPLES
    precise = ci is not None and (ci[1] - ci[0]) / 2 <= stats.PRECISE_SHARE * limit
    return Change(metric, before, after, limit, worse, ci, ab.p_value, tested=tested, precise=precise)


def ab_changes(figures: Figures, limits: dict[str, float]) -> list[Change]:
    """Each gated figure's change from the control build to the candidate in one A/B case."""
    ab = figures.ab
    assert ab is not None, "an A/B case carries its pair's record"
    changes = []
    for name, pct in limits.items():
        metric, control = METRICS[name], ab.control
        if name == "throughput":
            change = _paired_throughput(figures, ab, pct)
        else:
            before = Side(metric.value(control), control.samples)
            change = compare(metric, before, Side(metric.value(figures), figures.samples), pct)
        changes.append(dataclasses.replace(change, before_name="control"))  # its sentences name the side
    return changes


def check_ab(figures: Figures, settings: Settings) -> tuple[list[str], list[str]]:
    """The A/B gates the case breaks, and the warnings, as sentences naming the pair's evidence.

    What the pairs cannot decide is a warning, or a failure with ``--cuzk-compare-unresolved=fail``.
    """
    ab = figures.ab
    if ab is None:
        return [], []
    undecided = Undecided(settings.compare_unresolved == "fail")
    failures, notes = _verdicts(figures, settings.compare_fail, ab, undecided.outcome)
    unresolved, warnings = undecided.settle(notes)
    return failures + unresolved, warnings


def _verdicts(
    figures: Figures, limits: dict[str, float], ab: PairedAB, outcome: str
) -> tuple[list[str], list[str]]:
    """The changes beyond their limit, and what the pairs leave undecided (``outcome`` ends its sentences)."""
    if ab.control.proofs_failed:
        why = f"{ab.control.proofs_failed} of the control build's proofs failed"
        return [], [f"--cuzk-compare-fail not checked against the A/B control build: {why}"]
    if ab.pairs < stats.MIN_INTERVAL_SAMPLES:
        why = f"{plural(ab.pairs, 'complete pair')}, an interval needs {stats.MIN_INTERVAL_SAMPLES}"
        return [], [f"--cuzk-compare-fail not checked on the A/B pairs: {why} (raise --cuzk-case-budget)"]
    layout = ab.layout.replace("-", " ")
    how = f"A/B over {plural(ab.pairs, 'pair')}, {layout}, seed {ab.seed} (--cuzk-compare-fail)"
    failures: list[str] = []
    notes: list[str] = []
    for change in ab_changes(figures, limits):
        if change.verdict == "regressed":
            failures.append(f"{change.sentence()}; {how}")
        elif change.verdict in ("not significant", "undecided"):
            notes.append(f"{change.sentence(outcome)}; {how}")
        elif change.verdict == "not comparable":
            notes.append(f"--cuzk-compare-fail {change.metric.name} not checked: no figure of a build")
    return failures, notes


class ABGate:
    """The A/B gate sink: registered by the session when ``--cuzk-ab`` and ``--cuzk-compare-fail`` are set."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @pytest.hookimpl(trylast=True)
    def pytest_cuzk_case_finished(
        self, item: pytest.Item, case: Case, figures: Figures, result: CaseResult
    ) -> None:
        failures, warnings = check_ab(figures, self.settings)
        for note in warnings:
            item.warn(CuzkWarning(f"{item.name}: {note}"))
        if failures:
            pytest.fail(f"{item.name}: " + "; ".join(failures), pytrace=False)

"""``cuzk-perf changes``: the builds after which a host's runs moved, found in its history.

Why not a limit per run: on a noisy host a per-run threshold fires on drift again and again
(Mozilla's t-test alerts were 12.5% false), and a comparison of two runs cannot tell a build
from the hour it ran in. A change point is a shift that the whole series before and after it
shows, so the build that moved a figure is named once, with the runs on each side as evidence.

A series is one test case on one machine, one figure, its runs in the order they started
(``series``). Changes are found on the figures' logarithms (``edivisive``): a change is a ratio,
and a figure's spread grows with it.

``--fail-worse`` makes it the history check of a branch's runs in CI: a series whose newest
change (the one its latest run is after) is worse than the figure's limit fails, as the compare
gate fails, when the change's 95% interval lies wholly beyond the limit. Only the newest: an
older slow-down already followed by a recovery is history, not the branch's state.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from scipy.stats import gmean

from pytest_cuzk.fleet.edivisive import Split, change_points
from pytest_cuzk.fleet.errors import PerfError
from pytest_cuzk.fleet.otava import write_series
from pytest_cuzk.fleet.queries import NO_DATA, group
from pytest_cuzk.fleet.series import Point, Series, series
from pytest_cuzk.measure.figures import regression, worse_interval
from pytest_cuzk.results.database import ResultsDB
from pytest_cuzk.vocab.units import plural

__all__ = ["Change", "check", "cmd_changes", "find"]


@dataclass(frozen=True)
class Change:
    """A change point: the last run before it, the first after, and how much the figure moved."""

    series: Series
    before: Point
    after: Point
    runs_before: int  # back to the previous change point
    runs_after: int  # up to the next one
    worse_pct: float  # the ratio of the two sides' geometric means, as percent worse
    ci_pct: tuple[float, float]  # its 95% interval, lower end first
    p: float

    @staticmethod
    def of(series: Series, split: Split) -> Change:
        metric, pts = series.metric, series.points
        worse = regression(metric, 1.0, math.exp(split.shift))
        assert worse is not None, "a ratio to 1 is always comparable"
        ci = worse_interval(metric, (math.exp(split.interval[0]), math.exp(split.interval[1])))
        return Change(
            series, pts[split.index - 1], pts[split.index], split.index - split.start,
            split.stop - split.index, worse, ci, split.p,
        )  # fmt: skip

    def means(self) -> tuple[float, float]:
        """The geometric means of the runs on each side (between the neighbouring change points)."""
        pts, i = self.series.points, self.series.points.index(self.after)
        before, after = pts[i - self.runs_before : i], pts[i : i + self.runs_after]
        return float(gmean([p.value for p in before])), float(gmean([p.value for p in after]))

    def words(self) -> str:
        """``throughput 10.2% worse (95% CI 8.9% worse to 11.5% worse, p=3.1e-15)``."""
        lo, hi = (_pct(b) for b in (self.ci_pct if self.worse_pct > 0 else self.ci_pct[::-1]))
        return f"{self.series.metric.name} {_pct(self.worse_pct)} (95% CI {lo} to {hi}, p={self.p:.2g})"


def _pct(worse: float) -> str:
    return f"{abs(worse):.1f}% {'worse' if worse > 0 else 'better'}"


def find(one: Series, max_p: float, min_runs: int) -> list[Change]:
    """The series' changes, oldest first."""
    logs = [math.log(p.value) for p in one.points]
    return [Change.of(one, split) for split in change_points(logs, max_p, min_runs)]


def _report(found: list[tuple[Series, list[Change]]]) -> None:
    """Per test case and machine: each change in words, then the figures in which none was found."""
    cases = group(found, lambda sc: sc[0].case)
    for figures in cases.values():
        first = figures[0][0]
        times = [p.started_at for s, _ in figures for p in s.points]
        span = f"{min(times):%Y-%m-%d %H:%M} to {max(times):%Y-%m-%d %H:%M} UTC" if times else "no runs"
        runs = plural(len({p.run_id for s, _ in figures for p in s.points}), "run")
        print(f"{first.where}, {runs}, {span}:")
        for one, changes in figures:
            for c in changes:
                was, now = (one.metric.show(v) for v in c.means())
                print(f"  {c.words()}: {was} over {c.runs_before} runs -> {now} over {c.runs_after} runs")
                for side, p in (("before", c.before), ("after ", c.after)):
                    print(f"    {side} {p.build} (run of {p.started_at:%Y-%m-%d %H:%M} UTC)")
        quiet = group((s for s, changes in figures if not changes), lambda s: len(s.points))
        for n, rest in sorted(quiet.items(), reverse=True):  # the figures no run recorded last
            names = ", ".join(s.metric.name for s in rest)
            print(f"  no change found in {plural(n, 'run')}: {names}" if n else f"  not recorded: {names}")


def check(found: list[tuple[Series, list[Change]]], limits: dict[str, float]) -> tuple[list[str], list[str]]:
    """Each series' newest change against its figure's limit: (regressions, beyond it but undecided)."""
    failures, undecided = [], []
    for one, changes in found:
        if (limit := limits.get(one.metric.name)) is None or not changes:
            continue
        newest = changes[-1]
        if newest.worse_pct <= limit:
            continue
        since = f"{newest.after.build} (its first run {newest.after.started_at:%Y-%m-%d %H:%M} UTC"
        line = (
            f"{one.where}: {newest.words()} since {since}; before it {newest.before.build}), limit {limit:g}%"
        )
        if newest.ci_pct[0] > limit:
            failures.append(f"REGRESSION {line}")
        else:
            undecided.append(f"beyond the limit, its interval reaching within it: not failed: {line}")
    return failures, undecided


def cmd_changes(db: ResultsDB, args: argparse.Namespace) -> int:
    """The builds after which a host's runs moved, per case, host and figure; exit 1 on --fail-worse."""
    if left := [name for name in args.fail_worse if name not in args.figures]:
        raise PerfError(f"--fail-worse {left[0]}: a figure --figures leaves out; add it to --figures")
    selected = series(db.rows(kind=args.kind, host=args.host), args.figures)
    if args.csv:
        write_series(args.csv, selected)
    found = [(s, find(s, args.max_p, args.min_runs)) for s in selected]
    if not found:
        print(NO_DATA)
        return 0
    _report(found)
    if not args.fail_worse:
        return 0
    failures, undecided = check(found, args.fail_worse)
    for line in undecided + failures:
        print(line)
    if not failures:
        print("no newest change worse than its limit (--fail-worse)")
    return 1 if failures else 0

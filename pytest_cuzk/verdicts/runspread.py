"""A saved baseline as the baseline build's runs on this host, and the run-to-run spread it is judged by.

A run's own interval sees only the seconds it measured. On a shared or virtual host the host's
speed also moves over minutes: on a 2-core VM, eleven runs of one build spread over 28,769 to
36,376 proofs/h (CV 6.8%) while each run's interval was ±2 to ±6%; on an H100 host an identical
build ran 20% slower than its baseline, its GPU phase too, with no other process busy. So a saved
baseline is every saved run of the compared run's build on its host (pytest-benchmark's storage
keeps them all), its figure their mean, and a new run is judged against the spread of those runs:
a prediction interval for one more run of that build (``RunSpread.half_width_pct``). With a
results database (``--cuzk-results-db``), its runs of the test on the host count too
(``recorded``): a run both saved and recorded counts once, by the run id its saved case names.

The spread comes from this host's repeated runs of any build of the same test (the within-build
variance of each run's relative deviation from its build's mean, pooled) where they hold more
degrees of freedom than the baseline build's own runs; else from the build's runs when there are
``MIN_RUNS`` of them; else from ``PRIOR_CV``, a stated conservative prior, as wide as the drift
seen on the H100 host.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from scipy import stats as sps

from pytest_cuzk.core.compat import SavedRun
from pytest_cuzk.core.errors import CuzkError
from pytest_cuzk.measure import stats
from pytest_cuzk.measure.figures import Figures, Metric
from pytest_cuzk.results.rows import SAVED_RUN_ID, RecordedTest
from pytest_cuzk.vocab.units import plural

__all__ = [
    "MIN_RUNS",
    "PRIOR_CV",
    "BuildRun",
    "Recorded",
    "RunSpread",
    "SavedRuns",
    "saved_runs",
    "saved_runs_beside",
]

MIN_RUNS = 3  # fewer runs of the baseline build say little of its spread
PRIOR_CV = 0.10  # run to run, where this host has shown none: an identical build 20% slower stays undecided
MIN_POOLED_DF = 2  # a host's pooled spread from fewer degrees of freedom is no better than the prior

Recorded = Callable[[str, str], Iterable[RecordedTest]]
"""Where a test's recorded runs on a host (node id, host fingerprint) come from: the results database."""


@dataclass(frozen=True)
class RunSpread:
    """How far one run of a build lies from another on this host, and what that was learnt from."""

    cv: float  # between runs, as a fraction of their mean
    df: float  # its degrees of freedom; math.inf for the prior
    source: Literal["build", "host", "prior"]
    runs: int = 0  # the runs it was estimated from
    builds: int = 1
    recorded: int = 0  # of those runs, the ones found in the results database only

    def quantile(self) -> float:
        """Student's t at 97.5% for its degrees of freedom (the normal's for the prior)."""
        return float(sps.t.ppf(1 - stats.ALPHA / 2, self.df))

    def half_width_pct(self, baseline_runs: int) -> float:
        """Half the 95% prediction interval of one more run against the mean of ``baseline_runs``, in %."""
        return self.quantile() * self.cv * math.sqrt(1 + 1 / max(1, baseline_runs)) * 100

    def describe(self) -> str:
        """Which spread, from how many runs found where: what a reader needs to trust an undecided verdict."""
        if self.source == "prior":
            return f"no repeated runs on this host: a prior run-to-run CV of {self.cv:.0%}"
        saved = self.runs - self.recorded
        found = f" ({saved} saved, {self.recorded} in the results database)" if self.recorded else ""
        if self.source == "build":
            where = f"over {self.runs} {'runs' if self.recorded else 'saved runs'} of this build"
        else:
            where = f"pooled over {self.runs} runs of {plural(self.builds, 'build')}"
        return f"run-to-run spread CV {self.cv:.1%} {where} on this host{found}"


def _build_and_host(run: Mapping[str, Any]) -> tuple[object, object]:
    """The daemon build and host fingerprint pytest-cuzk put in a saved run's machine info."""
    info = run.get("machine_info")
    cuzk = info.get("cuzk") if isinstance(info, Mapping) else None
    if not isinstance(cuzk, Mapping):
        return None, None
    return cuzk.get("daemon"), (cuzk.get("host") or {}).get("fingerprint")


def _run_id(bench: Mapping[str, Any]) -> object:
    """The results-database run a saved case names (``SAVED_RUN_ID``); None where it names none."""
    extra = bench.get("extra_info")
    return extra.get(SAVED_RUN_ID) if isinstance(extra, Mapping) else None


def _figures(extra: object) -> Figures:
    """A saved benchmark's (or a recorded test's) figures, as the candidate's are: a record, not a dict."""
    if not isinstance(extra, Mapping):
        raise ValueError("no extra_info")
    try:
        return Figures.from_dict(extra)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ValueError(f"its extra_info is not a pytest-cuzk record ({exc})") from exc


@dataclass(frozen=True)
class BuildRun:
    """One run of a build on this host, and where it was found."""

    figures: Figures
    recorded: bool = False  # in the results database, not in the benchmark storage


@dataclass(frozen=True)
class SavedRuns:
    """One test's runs on the compared run's host: the baseline build's, and each other build's."""

    compared: Figures
    mine: tuple[BuildRun, ...]  # the baseline build's runs, the compared one first
    others: tuple[tuple[BuildRun, ...], ...] = ()  # each other build's runs on this host

    def values(self, metric: Metric, runs: Iterable[BuildRun] | None = None) -> list[float]:
        found = (metric.value(run.figures) for run in (self.mine if runs is None else runs))
        return [v for v in found if v is not None]

    def recorded(self, metric: Metric, runs: Iterable[BuildRun] | None = None) -> int:
        """How many of the runs with ``metric`` were found in the results database only."""
        found = self.mine if runs is None else runs
        return sum(1 for run in found if run.recorded and metric.value(run.figures) is not None)

    def value(self, metric: Metric) -> float | None:
        """The baseline's figure: the mean over the build's runs that have it."""
        found = self.values(metric)
        return statistics.fmean(found) if found else None

    @property
    def others_pct(self) -> float | None:
        """The share of the host's CPUs other processes kept busy, averaged over the baseline's runs."""
        found = [run.figures.memory.host_other_cpu_pct for run in self.mine if run.figures.memory is not None]
        known = [pct for pct in found if pct is not None]
        return statistics.fmean(known) if known else None

    def spread(self, metric: Metric) -> RunSpread:
        """The run-to-run spread of ``metric``: the host's pooled or the build's runs, else the prior.

        The pool holds the build's own runs, so where other builds add degrees of freedom it is
        the better estimate of the host's spread (Student's t at 2 degrees of freedom is 4.3, at
        10 it is 2.2): the build's runs alone are used only where nothing else was run twice.
        """
        mine = self.values(metric)
        own = None
        if len(mine) >= MIN_RUNS and (cv := stats.cv(mine)) is not None:
            own = RunSpread(cv, len(mine) - 1, "build", len(mine), recorded=self.recorded(metric))
        squares, df, runs, builds, recorded = 0.0, 0, 0, 0, 0
        for group in (self.mine, *self.others):
            values = self.values(metric, group)
            mean = statistics.fmean(values) if len(values) >= 2 else 0.0
            if not mean:
                continue
            squares += sum(((v - mean) / mean) ** 2 for v in values)
            df, runs, builds = df + len(values) - 1, runs + len(values), builds + 1
            recorded += self.recorded(metric, group)
        if df >= MIN_POOLED_DF and (own is None or df > own.df):
            return RunSpread(math.sqrt(squares / df), df, "host", runs, builds, recorded)
        return own or RunSpread(PRIOR_CV, math.inf, "prior")


def saved_runs(
    runs: Iterable[SavedRun], compared: SavedRun, test: str, recorded: Recorded | None = None
) -> SavedRuns | None:
    """``test``'s saved runs beside ``compared``, and its ``recorded`` ones (None when it has no such test).

    A compared run whose test is no pytest-cuzk record is an error naming the file; another run
    that is not one adds nothing. A recorded run that was saved too (its saved case names it) is
    counted once, as saved.
    """
    bench = compared.benchmarks().get(test)
    if bench is None:
        return None
    try:
        figures = _figures(bench.get("extra_info"))
    except ValueError as exc:
        raise CuzkError(f"{compared.path}: {test}: {exc}; save a new baseline with --benchmark-save") from exc
    build, host = _build_and_host(compared.data)
    if not isinstance(build, str) or not isinstance(host, str):
        return SavedRuns(figures, (BuildRun(figures),))  # saved without pytest-cuzk's machine info
    by_build: dict[object, list[BuildRun]] = {}
    seen = {Path(compared.path).resolve()}
    saved_ids = {_run_id(bench)}
    for run in runs:
        built_here = _build_and_host(run.data)
        if built_here[1] != host or Path(run.path).resolve() in seen or test not in run.benchmarks():
            continue
        seen.add(Path(run.path).resolve())
        saved = run.benchmarks()[test]
        try:
            by_build.setdefault(built_here[0], []).append(BuildRun(_figures(saved.get("extra_info"))))
        except ValueError:
            continue
        saved_ids.add(_run_id(saved))
    for found in recorded(test, host) if recorded is not None else ():
        if found.run_id in saved_ids or found.host != host or found.nodeid != test:
            continue
        try:
            by_build.setdefault(found.build, []).append(BuildRun(_figures(found.figures), recorded=True))
        except ValueError:
            continue  # a row this cannot read adds nothing
    same = by_build.pop(build, [])
    return SavedRuns(figures, (BuildRun(figures), *same), tuple(tuple(group) for group in by_build.values()))


def saved_runs_beside(path: Path) -> Iterator[SavedRun]:
    """The pytest-benchmark runs saved in ``path``'s directory (``NNNN_name.json``), readable ones."""
    for file in sorted(path.parent.glob("[0-9][0-9][0-9][0-9]_*.json")):
        try:
            data = json.loads(file.read_text())
        except (OSError, ValueError):
            continue  # not a run this can read: it adds nothing to the spread
        if isinstance(data, dict):
            yield SavedRun(str(file), data)

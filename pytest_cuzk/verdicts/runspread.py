"""A saved baseline as the baseline build's runs on this host, and the run-to-run spread it is judged by.

A run's own interval sees only the seconds it measured. On a shared or virtual host the host's
speed also moves over minutes: on a 2-core VM, eleven runs of one build spread over 28,769 to
36,376 proofs/h (CV 6.8%) while each run's interval was ±2 to ±6%; on an H100 host an identical
build ran 20% slower than its baseline, its GPU phase too, with no other process busy. So a saved
baseline is every saved run of the compared run's build on its host (pytest-benchmark's storage
keeps them all), its figure their mean, and a new run is judged against the spread of those runs:
a prediction interval for one more run of that build (``RunSpread.half_width_pct``).

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
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from scipy import stats as sps

from pytest_cuzk.core.compat import SavedRun
from pytest_cuzk.core.errors import CuzkError
from pytest_cuzk.measure import stats
from pytest_cuzk.measure.figures import Figures, Metric
from pytest_cuzk.vocab.units import plural

__all__ = ["MIN_RUNS", "PRIOR_CV", "RunSpread", "SavedRuns", "saved_runs", "saved_runs_beside"]

MIN_RUNS = 3  # fewer runs of the baseline build say little of its spread
PRIOR_CV = 0.10  # run to run, where this host has shown none: an identical build 20% slower stays undecided
MIN_POOLED_DF = 2  # a host's pooled spread from fewer degrees of freedom is no better than the prior


@dataclass(frozen=True)
class RunSpread:
    """How far one run of a build lies from another on this host, and what that was learnt from."""

    cv: float  # between runs, as a fraction of their mean
    df: float  # its degrees of freedom; math.inf for the prior
    source: Literal["build", "host", "prior"]
    runs: int = 0  # the runs it was estimated from
    builds: int = 1

    def quantile(self) -> float:
        """Student's t at 97.5% for its degrees of freedom (the normal's for the prior)."""
        return float(sps.t.ppf(1 - stats.ALPHA / 2, self.df))

    def half_width_pct(self, baseline_runs: int) -> float:
        """Half the 95% prediction interval of one more run against the mean of ``baseline_runs``, in %."""
        return self.quantile() * self.cv * math.sqrt(1 + 1 / max(1, baseline_runs)) * 100

    def describe(self) -> str:
        """Which spread, from how many runs: what a reader needs to trust an undecided verdict."""
        if self.source == "build":
            return (
                f"run-to-run spread CV {self.cv:.1%} over {self.runs} saved runs of this build on this host"
            )
        if self.source == "host":
            builds = plural(self.builds, "build")
            return f"run-to-run spread CV {self.cv:.1%} pooled over {self.runs} runs of {builds} on this host"
        return f"no repeated runs on this host: a prior run-to-run CV of {self.cv:.0%}"


def _build_and_host(run: Mapping[str, Any]) -> tuple[object, object]:
    """The daemon build and host fingerprint pytest-cuzk put in a saved run's machine info."""
    info = run.get("machine_info")
    cuzk = info.get("cuzk") if isinstance(info, Mapping) else None
    if not isinstance(cuzk, Mapping):
        return None, None
    return cuzk.get("daemon"), (cuzk.get("host") or {}).get("fingerprint")


def _figures(bench: Mapping[str, Any]) -> Figures:
    """A saved benchmark's figures, as the candidate's are: a record, not a dict read by key."""
    extra = bench.get("extra_info")
    if not isinstance(extra, Mapping):
        raise ValueError("no extra_info")
    try:
        return Figures.from_dict(extra)
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"its extra_info is not a pytest-cuzk record ({exc})") from exc


@dataclass(frozen=True)
class SavedRuns:
    """One test's saved runs on the compared run's host: the baseline build's, and each other build's."""

    compared: Figures
    mine: tuple[Figures, ...]  # the baseline build's runs, the compared one among them
    others: tuple[tuple[Figures, ...], ...] = ()  # each other build's runs on this host

    def values(self, metric: Metric, runs: Iterable[Figures] | None = None) -> list[float]:
        found = (metric.value(f) for f in (self.mine if runs is None else runs))
        return [v for v in found if v is not None]

    def value(self, metric: Metric) -> float | None:
        """The baseline's figure: the mean over the build's runs that have it."""
        found = self.values(metric)
        return statistics.fmean(found) if found else None

    @property
    def others_pct(self) -> float | None:
        """The share of the host's CPUs other processes kept busy, averaged over the baseline's runs."""
        found = [f.memory.host_other_cpu_pct for f in self.mine if f.memory is not None]
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
            own = RunSpread(cv, len(mine) - 1, "build", len(mine))
        squares, df, runs, builds = 0.0, 0, 0, 0
        for group in (self.mine, *self.others):
            values = self.values(metric, group)
            mean = statistics.fmean(values) if len(values) >= 2 else 0.0
            if not mean:
                continue
            squares += sum(((v - mean) / mean) ** 2 for v in values)
            df, runs, builds = df + len(values) - 1, runs + len(values), builds + 1
        if df >= MIN_POOLED_DF and (own is None or df > own.df):
            return RunSpread(math.sqrt(squares / df), df, "host", runs, builds)
        return own or RunSpread(PRIOR_CV, math.inf, "prior")


def saved_runs(runs: Iterable[SavedRun], compared: SavedRun, test: str) -> SavedRuns | None:
    """``test``'s saved runs beside ``compared`` (None when it has no such test).

    A compared run whose test is no pytest-cuzk record is an error naming the file; another run
    that is not one adds nothing.
    """
    bench = compared.benchmarks().get(test)
    if bench is None:
        return None
    try:
        figures = _figures(bench)
    except ValueError as exc:
        raise CuzkError(f"{compared.path}: {test}: {exc}; save a new baseline with --benchmark-save") from exc
    build, host = mine = _build_and_host(compared.data)
    if not isinstance(build, str) or host is None:
        return SavedRuns(figures, (figures,))  # saved without pytest-cuzk's machine info: build unknown
    by_build: dict[object, list[Figures]] = {}
    seen = {Path(compared.path).resolve()}
    for run in runs:
        built_here = _build_and_host(run.data)
        if built_here[1] != host or Path(run.path).resolve() in seen or test not in run.benchmarks():
            continue
        seen.add(Path(run.path).resolve())
        try:
            by_build.setdefault(built_here[0], []).append(_figures(run.benchmarks()[test]))
        except ValueError:
            continue
    same = by_build.pop(mine[0], [])
    return SavedRuns(figures, (figures, *same), tuple(tuple(group) for group in by_build.values()))


def saved_runs_beside(path: Path) -> Iterator[SavedRun]:
    """The pytest-benchmark runs saved in ``path``'s directory (``NNNN_name.json``), readable ones."""
    for file in sorted(path.parent.glob("[0-9][0-9][0-9][0-9]_*.json")):
        try:
            data = json.loads(file.read_text())
        except (OSError, ValueError):
            continue  # not a run this can read: it adds nothing to the spread
        if isinstance(data, dict):
            yield SavedRun(str(file), data)

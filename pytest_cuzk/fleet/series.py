"""A host's history as series: one test case's runs on one machine, one figure each, in run order.

What ``cuzk-perf changes`` searches and ``--csv`` exports. A test case is a kind, batch size and
concurrency; a machine is what ``history`` tells apart (``queries.machine``: its fingerprint,
and its machine id, else label, else hostname). Each run's figure is the one every view shows
(``queries.figure``); a run without the figure, or with none above zero (nothing proved), is
left out of that figure's series.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_cuzk.fleet.queries import config, figure, group, machine
from pytest_cuzk.measure.figures import METRICS, Metric
from pytest_cuzk.results.rows import ResultRow

__all__ = ["Point", "Series", "series"]


@dataclass(frozen=True)
class Point:
    """One run's figure in a series."""

    run_id: str
    build: str
    started_at: dt.datetime
    value: float


@dataclass(frozen=True)
class Series:
    """One test case's runs on one machine, in the order they started, with one figure each."""

    kind: str
    config: str  # batchB-jJ
    fingerprint: str
    host: str  # the machine's id, label or hostname (``queries.machine``)
    metric: Metric
    points: tuple[Point, ...]

    @property
    def case(self) -> tuple[str, str, str, str]:
        """What the series of each figure of one test case on one machine share."""
        return self.kind, self.config, self.fingerprint, self.host

    @property
    def test(self) -> str:
        return f"{self.kind}-{self.config}"

    @property
    def where(self) -> str:
        return f"{self.kind} {self.config} on {self.host} (fingerprint {self.fingerprint[:12]})"


def series(rows: list[ResultRow], metrics: Iterable[str]) -> list[Series]:
    """Every test case's series on every machine in ``rows``, one per figure named in ``metrics``."""
    out = []
    cases = group(rows, lambda r: (r.test.kind, config(r), machine(r)))
    for (kind, conf, (fingerprint, host)), case_rows in sorted(cases.items()):
        runs = group(case_rows, lambda r: r.run.run_id)  # ``rows`` come oldest first
        for name in metrics:
            points = [
                Point(run_id, rs[0].run.daemon_build, rs[0].run.started_at, value)
                for run_id, rs in runs.items()
                if (value := figure(rs, name)) is not None and value > 0
            ]
            out.append(Series(kind, conf, fingerprint, host, METRICS[name], tuple(points)))
    return out

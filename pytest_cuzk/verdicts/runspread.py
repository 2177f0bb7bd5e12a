"""How far apart the saved runs of one build lie on this host: what one run against one can tell.

A run's own interval sees only the seconds it measured. On a shared or virtual host, the host's
speed also moves over minutes: on a 2-core VM, eleven runs of one build spread over 28,769 to
36,376 proofs/h (CV 6.8%) while each run's interval was ±2 to ±6%. A gate then fails an
identical build now and then, whatever its statistics. pytest-benchmark's storage keeps every
saved run, so the spread of the baseline's build on this host is known once it was saved a few
times: a limit that spread exceeds gets a warning naming the spread and the limit it allows,
as pyperf warns of a spread too wide for its comparison.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scipy import stats as sps

from pytest_cuzk.measure import stats
from pytest_cuzk.measure.figures import Metric

__all__ = ["MIN_RUNS", "RunSpread", "saved_runs_beside", "saved_spread"]

MIN_RUNS = 3  # fewer saved runs say nothing of a spread


@dataclass(frozen=True)
class RunSpread:
    """One figure over the saved runs of one build on one host."""

    build: str
    runs: int
    cv: float  # between the runs, as a fraction of their mean

    @property
    def apart_pct(self) -> float:
        """Two runs of the build differ by less than this, 95 times in 100 (normal, CV × √2)."""
        return float(sps.norm.ppf(1 - stats.ALPHA / 2)) * self.cv * math.sqrt(2) * 100

    def warning(self, metric: Metric, limit: float) -> str | None:
        """Why ``limit`` is tighter than this host lets one run against one be judged, if it is."""
        if self.apart_pct <= limit:
            return None
        return (
            f"{metric.name}: {self.runs} saved runs of this build ({self.build}) on this host spread "
            f"CV {self.cv:.1%}, so two runs of it differ by up to {self.apart_pct:.0f}% (95%): a "
            f"{limit:g}% limit can fail an identical build; compare on a quieter host, gate at "
            f"{math.ceil(self.apart_pct)}% or more, or measure both builds in one run with --cuzk-ab"
        )


def _build_and_host(run: Mapping[str, Any]) -> tuple[object, object]:
    """The daemon build and host fingerprint pytest-cuzk put in a saved run's machine info."""
    info = run.get("machine_info")
    cuzk = info.get("cuzk") if isinstance(info, Mapping) else None
    if not isinstance(cuzk, Mapping):
        return None, None
    return cuzk.get("daemon"), (cuzk.get("host") or {}).get("fingerprint")


def saved_spread(
    runs: Iterable[Mapping[str, Any]], baseline: Mapping[str, Any], test: str, metric: Metric
) -> RunSpread | None:
    """The spread of ``metric`` for ``test`` over the saved runs of ``baseline``'s build and host."""
    build, host = mine = _build_and_host(baseline)
    if not isinstance(build, str) or host is None:
        return None  # saved without pytest-cuzk's machine info: the build is unknown
    values = [
        float(bench["extra_info"][metric.attr])
        for run in runs
        if _build_and_host(run) == mine
        for bench in run.get("benchmarks", [])
        if bench.get("fullname") == test and (bench.get("extra_info") or {}).get(metric.attr) is not None
    ]
    spread = stats.cv(values) if len(values) >= MIN_RUNS else None
    return RunSpread(build, len(values), spread) if spread is not None else None


def saved_runs_beside(path: Path) -> Iterator[dict[str, Any]]:
    """The pytest-benchmark runs saved in ``path``'s directory (``NNNN_name.json``), readable ones."""
    for file in sorted(path.parent.glob("[0-9][0-9][0-9][0-9]_*.json")):
        try:
            data = json.loads(file.read_text())
        except (OSError, ValueError):
            continue  # not a run this can read: it adds nothing to the spread
        if isinstance(data, dict):
            yield data

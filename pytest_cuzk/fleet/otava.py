"""``cuzk-perf changes --csv``: the series in the CSV that Apache Otava's ``csv`` tests read as is.

Otava reads one test's series from one CSV file: a time column, a column per metric and, as
attributes, any other columns it is told of. So each test case on each machine goes in a file
of its own: ``FILE`` itself when the selection holds one, else ``FILE``'s name with the case and
the machine added (``cuzk-porep-batch1-j1-rig7.csv``). Columns: ``time`` (the run's start, ISO
8601 UTC), one per figure in its stored unit (proofs per hour, seconds, bytes), then ``build``,
``run_id``, ``host`` and ``fingerprint``. A figure some run lacks is left out of its file (Otava
reads every row of a metric's column as a number). An Otava test reads it with::

    tests:
      porep:
        type: csv
        file: cuzk-porep-batch1-j1-rig7.csv
        time_column: time
        metrics: {throughput: {direction: 1}, p50: {direction: -1}}
        attributes: [build, run_id]

and ``otava analyze --config-file otava.yaml porep`` searches the same series (it reads the last
year's rows unless given ``--since``). It marks the same changes where runs vary independently,
and may mark more where they drift together: its t-test takes the runs as independent, the one
here counts them as the fewer they are worth (``edivisive``).
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

from pytest_cuzk.fleet.errors import NOTHING, PerfError
from pytest_cuzk.fleet.queries import group
from pytest_cuzk.fleet.series import Series
from pytest_cuzk.vocab.units import plural

__all__ = ["ATTRIBUTES", "write_series"]

ATTRIBUTES = ("build", "run_id", "host", "fingerprint")


def _path(path: Path, one: Series, several: bool) -> Path:
    if not several:
        return path
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{one.test}-{one.host}")
    return path.with_name(f"{path.stem}-{name}{path.suffix or '.csv'}")


def write_series(file: str, found: list[Series]) -> list[Path]:
    """Write each test case's series on each machine in ``found`` as one Otava CSV; the files written."""
    cases = group(found, lambda s: s.case)
    if not any(s.points for s in found):
        raise PerfError(f"--csv {file}: no runs selected, nothing to write", NOTHING)
    written = []
    for figures in cases.values():
        runs = {p.run_id: p for s in figures for p in s.points}
        if not runs:
            continue
        full = [s for s in figures if len(s.points) == len(runs)]
        if left := [s.metric.name for s in figures if s not in full]:
            print(f"{figures[0].where}: left out of the CSV, not in every run: {', '.join(left)}",
                  file=sys.stderr)  # fmt: skip
        path = _path(Path(file), figures[0], len(cases) > 1)
        values = [{p.run_id: p.value for p in s.points} for s in full]
        with path.open("w", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(["time", *(s.metric.name for s in full), *ATTRIBUTES])
            for p in sorted(runs.values(), key=lambda p: p.started_at):
                one = figures[0]
                row = [p.started_at.isoformat(), *(v[p.run_id] for v in values)]
                writer.writerow([*row, p.build, p.run_id, one.host, one.fingerprint])
        print(f"wrote {plural(len(runs), 'run')} of {figures[0].where} to {path}")
        written.append(path)
    return written

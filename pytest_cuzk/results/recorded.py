"""The recorded runs of one test on one host, for the saved-baseline gate.

A results database often holds many more runs of a build than the benchmark storage (every CI
run on the main branch, where few are saved): counted with the saved ones they give the baseline a
better mean and the host's run-to-run spread more degrees of freedom. Only a run whose daemon was
measured alone counts (an A/B run's two daemons, or several of one session, ran beside each
other), and only a test recorded with its figures whole (schema v7): an older row adds nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import sqlalchemy as sa

from pytest_cuzk.results.database import ResultsDB, build_metadata
from pytest_cuzk.results.rows import RecordedTest

__all__ = ["recorded_tests"]


def recorded_tests(
    db: ResultsDB, nodeid: str, host: str, exclude: Collection[str] = ()
) -> list[RecordedTest]:
    """``nodeid``'s tests on the host of fingerprint ``host``, oldest first, less the runs in ``exclude``."""
    md = build_metadata()
    t, r = md.tables["tests"], md.tables["runs"]
    q = (
        sa.select(t.c.run_id, t.c.figures, t.c.samples, t.c.ab, r.c.machine_build)
        .join_from(t, r, t.c.run_id == r.c.run_id)
        .where(
            t.c.nodeid == nodeid,
            r.c.host_fingerprint == host,
            r.c.daemons == 1,
            r.c.machine_build.is_not(None),
            t.c.run_id.not_in(list(exclude)),
        )
        .order_by(r.c.started_at, t.c.finished_at, t.c.id)
    )
    with db.engine.connect() as conn:
        rows = conn.execute(q).all()
    return [
        RecordedTest(run_id, nodeid, build, host, {**figures, "samples": samples or {}})
        for run_id, figures, samples, ab, build in rows
        if isinstance(figures, Mapping) and ab is None
    ]

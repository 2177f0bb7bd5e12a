"""Scheduling a run of several daemons: one xdist worker per daemon, so several hosts prove at the same time.

pytest-xdist's ``loadgroup`` tags node ids on the workers, which pytest 9 no longer
lets it do; scheduling by scope works on the controller alone. The scope of a
suite case is its daemon's label, read from the test id (``[rtx4090-porep-...]``),
so all of one daemon's tests go to one worker and each worker takes a daemon.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdist.scheduler import LoadScopeScheduling

__all__ = ["DaemonScheduling"]


class DaemonScheduling(LoadScopeScheduling):  # type: ignore[misc]  # xdist publishes no types
    """Schedule each daemon's tests as one unit of work; other tests keep their own scope.

    With a single daemon every test is one unit: workers must not share it.
    """

    def __init__(self, config: Any, log: Any, labels: Sequence[str]) -> None:
        super().__init__(config, log)
        self.labels = sorted(labels, key=len, reverse=True)

    def _split_scope(self, nodeid: str) -> str:
        if len(self.labels) == 1:
            return "cuzk-daemon"
        params = nodeid.partition("[")[2]
        for label in self.labels:
            if params.startswith(f"{label}-"):
                return f"cuzk-daemon:{label}"
        return nodeid

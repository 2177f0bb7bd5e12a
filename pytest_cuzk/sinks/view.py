"""What the report sinks read of a finished run: the session, seen through the one Protocol they need.

The terminal report and the HTML page describe the whole run; ``CuzkSession`` (at the top of the
package) is what satisfies this, so the sinks need not import the session itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pytest

    from pytest_cuzk.backends.choice import DaemonChoice
    from pytest_cuzk.backends.workspace import Workspace
    from pytest_cuzk.config.settings import Settings
    from pytest_cuzk.data.testdata import TestData
    from pytest_cuzk.measure.figures import Figures
    from pytest_cuzk.measure.ledger import MetricLedger
    from pytest_cuzk.scenarios.records import ScenarioFigures

__all__ = ["RunView", "config_info"]


class RunView(Protocol):
    """The run as the sinks report it: its settings and daemons, and what its tests sent."""

    config: pytest.Config
    workspace: Workspace
    rows: list[Figures]
    scenarios: list[ScenarioFigures]
    colds: dict[str, dict[str, Any]]
    notes: list[str]
    not_run: list[tuple[str, str]]
    known: list[tuple[str, str]]

    @property
    def settings(self) -> Settings: ...

    @property
    def choice(self) -> DaemonChoice: ...

    @property
    def ledger(self) -> MetricLedger: ...

    def data_sets(self) -> list[TestData]: ...


def config_info(session: RunView) -> dict[str, dict[str, str]]:
    """The run's builds and their config keys, for the "compared with" line; none without a daemon."""
    from pytest_cuzk.core.errors import CuzkError

    try:
        return session.choice.config_info()
    except CuzkError:
        return {}

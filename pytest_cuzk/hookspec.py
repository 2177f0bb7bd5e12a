"""pytest-cuzk's own hooks: choose the daemons, shape ``extra_info``, and consume finished cases.

Implement them in a ``conftest.py`` or a plugin. The built-in implementations are ``trylast``,
so yours run first; for ``firstresult`` hooks the first non-None answer wins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_cuzk.backends.choice import DaemonChoice
    from pytest_cuzk.backends.workspace import Workspace
    from pytest_cuzk.config.settings import Settings
    from pytest_cuzk.measure.figures import Figures
    from pytest_cuzk.run.cases import Case
    from pytest_cuzk.run.waves import CaseResult
    from pytest_cuzk.scenarios.records import ScenarioFigures

hookspec = pytest.hookspec  # keep pluggy's marker under one name


@hookspec(firstresult=True)
def pytest_cuzk_make_backends(
    config: pytest.Config, settings: Settings, workspace: Workspace
) -> DaemonChoice | None:
    """Return the daemons under test; the built-in one resolves ``--cuzk-daemon``.

    Answer with your own ``DaemonChoice`` to test daemons the plugin cannot start itself
    (a container, a remote pool). Each backend satisfies ``pytest_cuzk.backends.DaemonBackend``::

        def pytest_cuzk_make_backends(config, settings, workspace):
            if config.getoption("--my-pool"):
                return DaemonChoice("attach", "from --my-pool", (MyPoolDaemon(...),))
    """


@hookspec(firstresult=True)
def pytest_cuzk_generate_extra_info(item: pytest.Item, figures: Figures) -> dict[str, Any] | None:
    """Build the ``extra_info`` pytest-benchmark stores for a case (built-in: ``figures.to_dict()``)."""


@hookspec
def pytest_cuzk_update_extra_info(item: pytest.Item, figures: Figures, extra_info: dict[str, Any]) -> None:
    """Add to (or change) a case's ``extra_info`` before it is stored.

    For example::

        def pytest_cuzk_update_extra_info(item, figures, extra_info):
            extra_info["rack"] = os.environ.get("RACK", "")
    """


@hookspec
def pytest_cuzk_case_finished(item: pytest.Item, case: Case, figures: Figures, result: CaseResult) -> None:
    """A suite case finished on this worker; ``figures`` are its numbers, ``result`` every proof.

    The built-in sinks record the case in the results database, draw its memory plot and,
    last, apply the gates, which fail the test. A sink of your own::

        def pytest_cuzk_case_finished(item, case, figures, result):
            requests.post(DASHBOARD, json=figures.to_dict())
    """


@hookspec
def pytest_cuzk_scenario_finished(item: pytest.Item, case: Case, figures: ScenarioFigures) -> None:
    """A load scenario (``test_server``, ``test_priority``, ``test_sweep``) finished on this worker.

    ``figures`` is its record (``ServerFigures``, ``PriorityFigures`` or ``SweepFigures``); the
    built-in plots sink draws a sweep's curve. A sink of your own::

        def pytest_cuzk_scenario_finished(item, case, figures):
            if figures.scenario == "server":
                print(item.name, figures.max_sustainable_rate_per_hour)
    """

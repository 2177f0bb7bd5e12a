"""Load scenarios: a Poisson server with a latency bound, PoSt under sealing load, a concurrency sweep.

Ids select with ``-k``: ``test_server[porep-batch1]``, ``test_priority[winning-under-porep]``,
``test_sweep[porep-batch1]``. Each is bounded by ``--cuzk-scenario-budget`` and
``--cuzk-max-proofs``; its figures are in ``extra_info`` and its headline in the summary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # collecting the suite loads nothing of the measurement
    from pytest_cuzk.run.cases import Case
    from pytest_cuzk.scenarios.execution import ScenarioExecution
    from pytest_cuzk.scenarios.records import ScenarioFigures


def _no_failed_proof(record: ScenarioFigures) -> None:
    if record.known_issue:  # a bug of the engine, failing with exactly its known error
        pytest.xfail(f"{record.known_issue} ({record.why_failed})")
    assert not record.proofs_failed, record.why_failed


def test_server(cuzk_server_case: Case, cuzk_scenario: ScenarioExecution) -> None:
    """The highest Poisson arrival rate whose p99 latency stays within the kind's bound."""
    record = cuzk_scenario.server(cuzk_server_case)
    _no_failed_proof(record)
    assert record.max_sustainable_rate_per_hour, record.headline()


def test_priority(cuzk_priority_case: Case, cuzk_scenario: ScenarioExecution) -> None:
    """A PoSt proof sent with Curio's priority meets its bound while sealing proofs saturate the daemon."""
    record = cuzk_scenario.priority(cuzk_priority_case)
    _no_failed_proof(record)
    assert record.slo_met, record.verdict()


def test_sweep(cuzk_sweep_case: Case, cuzk_scenario: ScenarioExecution) -> None:
    """Throughput at growing concurrency until it stops growing; the knee is the concurrency to run."""
    record = cuzk_scenario.sweep(cuzk_sweep_case)
    _no_failed_proof(record)
    assert record.knee_in_flight, record.headline()

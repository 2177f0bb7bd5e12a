"""What a worker sends the controller, in one place: the keys, how a value is sent and how read.

Under pytest-xdist a test runs on a worker and is reported on the controller, so whatever the
summary, the HTML report and the database need of a test travels in its report's
``user_properties`` (carried by xdist as it is), and a worker's counter totals in its
``workeroutput``. Values are plain JSON-able data; each reader rebuilds its record from them.
Every key starts with ``cuzk_``, so a report that carries one is a cuzk test's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

__all__ = [
    "CASE",
    "COLD",
    "FIGURES",
    "KEYS",
    "METRIC_TOTALS",
    "NOT_RUN",
    "PROOFS",
    "SCENARIO",
    "USAGE_ERROR",
    "UsageErrorRelay",
    "carries_cuzk",
    "received",
    "send",
    "sent_totals",
    "stop_collection",
]

NOT_RUN = "cuzk_not_run"  # on a setup report: why a cuzk test did not run (one line)
CASE = "cuzk_case"  # on a setup report: which suite case a test is (also one that never ran)
COLD = "cuzk_cold"  # on a call report: each cold start of the test's daemon, with its restarts
FIGURES = "cuzk_figures"  # on a call report: the case's figures record
SCENARIO = "cuzk_scenario"  # on a call report: the load scenario's figures record
PROOFS = "cuzk_proofs"  # on a call report: (seconds, ok) of the case's proofs, for the latency chart
KEYS = (NOT_RUN, CASE, COLD, FIGURES, SCENARIO, PROOFS)
METRIC_TOTALS = "cuzk_metric_totals"  # in a worker's workeroutput: the metric ledger's totals
USAGE_ERROR = "cuzk_usage_error"  # in a worker's workeroutput: the usage error its collection found

_WHEN = {NOT_RUN: "setup", CASE: "setup", COLD: "call", FIGURES: "call", SCENARIO: "call", PROOFS: "call"}


def send(report: pytest.TestReport, key: str, value: Any) -> None:
    """Attach ``value`` under ``key`` to the report of the phase that key belongs to."""
    assert key in _WHEN, f"unknown transport key {key!r}"
    if report.when == _WHEN[key]:
        report.user_properties.append((key, value))


def received(report: pytest.TestReport) -> Iterator[tuple[str, Any]]:
    """The (key, value) pairs a report carries, each on the phase it is sent on and of the sent shape."""
    for key, value in report.user_properties:
        if key in _WHEN and report.when == _WHEN[key] and isinstance(value, (dict, list, str)):
            yield key, value


def carries_cuzk(report: pytest.TestReport) -> bool:
    """Whether a report (from any worker) carries anything of cuzk's."""
    return any(key in _WHEN for key, _ in report.user_properties)


def sent_totals(workeroutput: Mapping[str, Any]) -> Any:
    """A finished worker's metric totals, or None where it sent none."""
    return workeroutput.get(METRIC_TOTALS)


def stop_collection(config: pytest.Config, items: list[pytest.Item], message: str) -> None:
    """End the run on a usage error found at collection: exit 4 with ``message``, never an INTERNALERROR.

    Raised in an xdist worker, a ``UsageError`` (or ``pytest.exit``) crashes the worker, and the
    controller ends in an INTERNALERROR; so a worker hands the message to the controller's
    ``UsageErrorRelay`` in its workeroutput and keeps no test.
    """
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is None:
        raise pytest.UsageError(message)
    workeroutput.setdefault(USAGE_ERROR, message)  # the first one found, as in a run without xdist
    config.hook.pytest_deselected(items=list(items))
    items.clear()


class UsageErrorRelay:
    """On the xdist controller: says the usage error a worker handed over and ends the run with exit 4."""

    def __init__(self) -> None:
        self.error: str | None = None

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        self.error = self.error or getattr(node, "workeroutput", {}).get(USAGE_ERROR)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.error:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.error:
            terminalreporter.write_line(f"ERROR: {self.error}", red=True)

"""The metric ledger: a daemon's counters over the run, across its restarts and across xdist workers."""

from __future__ import annotations

import json

from pytest_cuzk.backends.fake import FakeDaemon
from pytest_cuzk.config.settings import resolve_settings
from pytest_cuzk.daemon.client import ProvingClient
from pytest_cuzk.data.testdata import TestData
from pytest_cuzk.measure.ledger import MetricLedger
from pytest_cuzk.vocab.kinds import KINDS

TOTAL = ("cuzk_proofs_completed_total", ())


def _prove(daemon: FakeDaemon, data: TestData, n: int) -> None:
    with ProvingClient(daemon.address) as client:
        for _ in range(n):
            assert client.prove(data.request(KINDS["winning"]), timeout_s=5).completed


def test_counters_add_up_across_a_restart_and_a_worker(tmp_path, pytester):
    daemon = FakeDaemon("local", tmp_path / "fake")
    data = TestData(resolve_settings(pytester.parseconfig()), daemon.profile().manifest(), None)
    ledger = MetricLedger()
    try:
        daemon.bring_up(1, [], lambda *_: None)
        ledger.observe(daemon)
        _prove(daemon, data, 2)
        ledger.observe(daemon)
        daemon.bring_up(2, [], lambda *_: None)  # a restart for another batch size: a new process
        ledger.observe(daemon)
        _prove(daemon, data, 3)
        ledger.observe(daemon)
    finally:
        daemon.stop()
    assert ledger.totals()["local"][TOTAL] == 5
    controller = MetricLedger()
    controller.merge_wire(json.loads(json.dumps(ledger.to_wire())))
    controller.merge_wire(json.loads(json.dumps(ledger.to_wire())))
    assert controller.totals()["local"][TOTAL] == 10


def test_a_daemon_that_does_not_answer_is_left_for_next_time(tmp_path):
    ledger = MetricLedger()
    ledger.observe(FakeDaemon("local", tmp_path))  # never started: no address
    assert ledger.totals() == {}


def test_planned_failures_travel_with_the_counters_and_are_said_in_the_summary():
    from pytest_cuzk.sinks.terminal import metric_deltas

    worker = MetricLedger()
    worker.planned_failure("local")
    controller = MetricLedger()
    controller.merge_wire(json.loads(json.dumps(worker.to_wire())))
    totals = controller.totals()["local"] | {("cuzk_proofs_failed_total", ()): 1.0}
    assert metric_deltas(totals) == [
        "  cuzk_proofs_failed_total: +1 (1 on purpose: the malformed-input test's truncated requests)"
    ]

"""The case matrix: ids, what -k selects, the order a spawned daemon needs, labels of fleets."""

from __future__ import annotations

import pytest
from support import PROVE_SOURCE, SCENARIOS_SOURCE

from pytest_cuzk.config.settings import resolve_settings
from pytest_cuzk.run.cases import Case, case_params
from pytest_cuzk.wire.kinds import KINDS

COLLECT = ("--collect-only", "-q")


def _ids(result: pytest.RunResult) -> list[str]:
    return [line.split("::")[1] for line in result.outlines if "::test_prove[" in line]


def test_default_matrix_is_every_kind_at_batch_1_and_the_batchable_at_2(fake_run):
    result, _ = fake_run({"test_prove": PROVE_SOURCE}, *COLLECT)
    assert _ids(result) == [
        "test_prove[porep-batch1-j1]",
        "test_prove[snap-batch1-j1]",
        "test_prove[wpost-batch1-j1]",
        "test_prove[winning-batch1-j1]",
        "test_prove[porep-batch2-j1]",
        "test_prove[snap-batch2-j1]",
    ], "grouped by batch size: a spawned daemon restarts once per size"


def test_k_selects_by_kind_batch_and_concurrency(fake_run):
    args = (*COLLECT, "--cuzk-batch-sizes=1,2", "--cuzk-concurrency=1,2", "-k", "porep and batch2")
    result, _ = fake_run({"test_prove": PROVE_SOURCE}, *args)
    assert _ids(result) == ["test_prove[porep-batch2-j1]", "test_prove[porep-batch2-j2]"]


def test_several_daemons_put_their_label_first_and_group_by_daemon(fake_run):
    args = (*COLLECT, "--cuzk-batch-sizes=2,1", "-k", "porep")
    result, _ = fake_run({"test_prove": PROVE_SOURCE}, *args, labels=("rtx4090", "a40"))
    assert _ids(result) == [
        "test_prove[rtx4090-porep-batch1-j1]",
        "test_prove[rtx4090-porep-batch2-j1]",
        "test_prove[a40-porep-batch1-j1]",
        "test_prove[a40-porep-batch2-j1]",
    ]


def test_attached_cases_say_so_in_their_id(pytester):
    settings = resolve_settings(pytester.parseconfig("--cuzk-batch-sizes=1"))
    ids = [p.id for p in case_params(["local"], True, settings, "cuzk_case")]
    assert ids == [f"{k}-batch1-j1-attached" for k in KINDS]
    per_kind = [p.id for p in case_params(["a", "b"], True, settings, "cuzk_kind")]
    assert per_kind == [f"{label}-{k}" for label in "ab" for k in KINDS]
    under = [p.id for p in case_params(["local"], True, settings, "cuzk_priority_case")]
    assert under[0] == "wpost-under-porep-attached"


def test_case_in_flight_is_batch_times_concurrency():
    assert Case("local", KINDS["porep"], 2, 3).in_flight == 6


def test_running_the_matrix_restarts_the_daemon_once_per_batch_size(fake_run):
    args = ("-k", "porep", "--cuzk-batch-sizes=2,1", "--cuzk-concurrency=1,2")
    result, (daemon,) = fake_run({"test_prove": PROVE_SOURCE}, *args)
    result.assert_outcomes(passed=4)
    assert daemon.starts == [1, 2]
    assert result.stdout.str().count("cold start [") == 2


def test_the_load_scenarios_have_ids_that_select_by_kind(fake_run):
    result, _ = fake_run({"test_load": SCENARIOS_SOURCE}, *COLLECT, "-k", "porep")
    ids = [line.split("::")[1] for line in result.outlines if "::test_" in line]
    assert ids == [
        "test_server[porep-batch1]",
        "test_priority[wpost-under-porep]",
        "test_priority[winning-under-porep]",
        "test_sweep[porep-batch1]",
        "test_server[porep-batch2]",
        "test_sweep[porep-batch2]",
    ], "PoSt under PoRep load, the sweep for the throughput kinds only; grouped by batch size"
    result, _ = fake_run({}, *COLLECT, "-k", "winning")
    ids = [line.split("::")[1] for line in result.outlines if "::test_" in line]
    assert ids == [
        "test_server[winning-batch1]",
        "test_priority[winning-under-porep]",
        "test_priority[winning-under-snap]",
    ]

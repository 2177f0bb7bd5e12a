"""The case matrix: ids, what -k selects, the order a spawned daemon needs, labels of fleets."""

from __future__ import annotations

import pytest
from helpers.support import PROVE_SOURCE, SCENARIOS_SOURCE

COLLECT = ("--collect-only", "-q")


def _ids(result: pytest.RunResult) -> list[str]:
    return [line.split("::")[1] for line in result.outlines if "::test_prove[" in line]


def test_the_tests_quick_plan_keeps_every_kind_at_batch_1_and_the_batchable_at_2(fake_run):
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


SUITE_COLLECT = ("--pyargs", "pytest_cuzk.suite", "--cuzk-daemon=auto", *COLLECT)


def _scenario_ids(result: pytest.RunResult) -> list[str]:
    return [line.split("::")[1] for line in result.outlines if "test_scenarios.py::" in line]


@pytest.mark.parametrize(
    ("select", "ids"),
    [
        ("priority and winning", ["test_priority[winning-under-porep]", "test_priority[winning-under-snap]"]),
        ("PRIORITY and winning and porep", ["test_priority[winning-under-porep]"]),
        ("winning-under-snap", ["test_priority[winning-under-snap]"]),
        ("sweep and batch2", ["test_sweep[porep-batch2]", "test_sweep[snap-batch2]"]),
        ("porep", []),  # a word every PoRep case has asks for no scenario
        ("not priority", []),  # nor does leaving a word out
        ("winning and not sweep", []),
    ],
)
def test_k_selects_the_packaged_load_scenarios_by_any_word_only_their_ids_have(fake_run, select, ids):
    result, _ = fake_run({}, *SUITE_COLLECT, "-k", select)
    assert _scenario_ids(result) == ids, result.stdout.str()


def test_a_k_that_selects_no_case_lists_the_kind_names(fake_run):
    result, _ = fake_run({}, *SUITE_COLLECT, "-k", "prep")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    said = result.stderr.str()
    assert (
        "ERROR: -k 'prep' leaves no suite case to measure: -k 'prep' deselects every case (a case's id names "
        "its kind, porep, snap, wpost, winning, its batch size and concurrency, e.g. porep-batch1-j1). Cases "
        "that would run: test_prove[porep-batch1-j1], test_prove[porep-batch2-j1], "
    ) in said
    result, _ = fake_run({}, *SUITE_COLLECT, "-k", "porep and batch1 and test_prove")
    assert result.ret == pytest.ExitCode.OK and "suite case" not in result.stderr.str()


NO_BATCH2 = (
    "ERROR: -k '{k}' leaves no suite case to measure: wpost has no batch 2 (cuzk batches only porep and "
    "snap), so --cuzk-batch-sizes=2 gives it no case: add 1 to prove it{kept}. "
    "Cases that would run: test_prove[porep-batch2-j1], test_prove[snap-batch2-j1]"
)
KEPT = (
    "; the 3 tests it keeps (daemon checks, tests without a case) measure nothing, so do not make it a run "
    "(to run only them, name them by node id, FILE::TEST)"
)


@pytest.mark.parametrize(("select", "kept"), [("wpost", KEPT), ("wpost and batch2", "")])
def test_a_kind_selected_at_a_batch_size_it_lacks_is_a_usage_error_not_a_green_run(fake_run, select, kept):
    """-k wpost --cuzk-batch-sizes=2 once passed on the daemon checks alone: "no suite case ran", exit 0."""
    result, _ = fake_run({}, *SUITE_COLLECT, "--cuzk-batch-sizes=2", "-k", select)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert NO_BATCH2.format(k=select, kept=kept) in result.stderr.str()


def test_daemon_checks_named_by_node_id_run_without_a_case(fake_run):
    """Tests asked for by name are run as asked: only a selection of collected cases must keep one."""
    node = "pytest_cuzk/suite/test_daemon.py::test_cold_start_is_reported"
    result, _ = fake_run({}, *COLLECT, "--pyargs", node.replace("/", ".").replace(".py::", "::"))
    assert "suite case" not in result.stderr.str()


@pytest.mark.parametrize("paths", [(), ("tests",)])
def test_a_daemon_run_that_collects_no_cuzk_test_is_a_usage_error(pytester, fake_run, paths):
    """Testpaths (or paths given) replace the packaged suite: unrelated tests must not pass for it."""
    pytester.makeini("[pytest]\ntestpaths = tests\n")
    pytester.mkdir("tests").joinpath("test_other.py").write_text("def test_porep_named():\n    pass\n")
    result, (daemon,) = fake_run({}, *paths, "--cuzk-daemon=auto", "-k", "porep")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    source = "tests" if paths else "the ini's testpaths (tests)"
    result.stderr.fnmatch_lines(
        [
            f"ERROR: --cuzk-daemon=auto: none of the 1 test collected from {source} uses cuzk, so the daemon "
            "would run nothing: run the packaged suite with --pyargs pytest_cuzk.suite, or from a directory "
            "whose ini has no testpaths"
        ]
    )
    assert daemon.starts == [], "no daemon started for it"
    args = ("--pyargs", "pytest_cuzk.suite", "--cuzk-daemon=auto", "-k", "porep-batch1 and prove")
    result, _ = fake_run({}, *args)
    result.assert_outcomes(passed=1)

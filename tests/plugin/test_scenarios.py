"""The load scenarios' plumbing against fake daemons: extra_info, the summary, bounds, plots, deaths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.support import SCENARIOS_SOURCE

from pytest_cuzk.backends.fake import FakeBehaviour

FILES = {"test_load": SCENARIOS_SOURCE}  # not this module's name: both would import as one
# Small, fast proofs; a PoRep slower than a PoSt, as they are. The fake proves each at once in
# its own thread: nothing queues, so every rate holds until a bound of the scenario ends it.
QUICK = {"porep": FakeBehaviour(delay_s=0.03), "winning": FakeBehaviour(delay_s=0.005)}
BOUNDED = ("--cuzk-batch-sizes=1", "--cuzk-proofs=3", "--cuzk-max-proofs=120", "--cuzk-scenario-budget=0.5")


def _extra(out: Path) -> dict[str, dict[str, object]]:
    return {b["name"]: b["extra_info"] for b in json.loads(out.read_text())["benchmarks"]}


def test_each_scenario_fills_extra_info_and_says_its_headline(fake_run, tmp_path):
    out, plots, html = tmp_path / "bench.json", tmp_path / "plots", tmp_path / "run.html"
    select = "test_server and winning or test_priority and winning-under-porep or test_sweep and porep"
    args = ("-k", select, *BOUNDED, f"--benchmark-json={out}", f"--cuzk-plots={plots}", f"--cuzk-html={html}")
    result, _ = fake_run(FILES, *args, behaviour=QUICK, mode="attach")
    result.assert_outcomes(passed=3)
    extra = _extra(out)
    server = extra["test_server[winning-batch1]"]
    assert server["max_sustainable_rate_per_hour"] == max(r["rate_per_hour"] for r in server["rates"])
    assert {"goodput_proofs_per_hour", "latency_p99_s", "rates"} <= server.keys()
    assert len(server["rates"]) > 1 and all(r["held"] for r in server["rates"]), "nothing queues in a fake"
    assert "--cuzk-scenario-budget" in server["stop_reason"] or "--cuzk-max-proofs" in server["stop_reason"]
    priority = extra["test_priority[winning-under-porep]"]
    wanted = {"idle_latency_p50_s", "slowdown_vs_idle", "background_throughput_proofs_per_hour", "slo_met"}
    assert wanted <= priority.keys() and priority["background_kind"] == "porep"
    assert priority["priority"] == "CRITICAL" and priority["probes"] >= 3
    assert priority["slo"] == "5 s (the fake daemon's default)"
    sweep = extra["test_sweep[porep-batch1]"]
    assert [p["in_flight"] for p in sweep["curve"]] == list(range(1, len(sweep["curve"]) + 1))
    assert sweep["knee_in_flight"] in [p["in_flight"] for p in sweep["curve"]]
    assert (plots / "test_sweep[porep-batch1].png").stat().st_size > 10_000
    page = html.read_text()
    assert "test_priority[winning-under-porep]" in page, "the run report lists them"
    assert page.count('class="test scenario') == 3, "a row per scenario with its headline"
    assert 'class="test case' not in page, "no proving case ran: the scenarios have their own table"
    assert "No test ran." not in page, "scenarios are tests that ran"
    assert page.count('data-chart="scenario"') == 3, "each scenario's curve is drawn in the run report"
    for label in ("arrival rate (proofs/h)", "proofs in flight", "PoSt proof #"):
        assert f">{label}<" in page, f"the {label!r} axis"
    result.stdout.fnmatch_lines(
        [
            "load scenarios:",
            "  test_server?winning-batch1?: max sustainable *.*/h with p99 within 5 s *",
            "  test_priority?winning-under-porep?: winning under porep load: * late against the "
            "bound 5 s (the fake daemon's default): met; porep *.*/h in the background",
            "  test_sweep?porep-batch1?: knee at * in flight *",
        ]
    )


@pytest.mark.parametrize(
    ("select", "behaviour", "said"),
    [
        (
            "test_server and winning",
            {"winning": FakeBehaviour(delay_s=0.2)},
            "*no rate held p99 within 0.1 s (option --cuzk-slo); 0 rates tried (idle, its p50 of 0.2* s is "
            "already over the bound)",
        ),
        (
            "test_priority and winning-under-porep",
            {"porep": FakeBehaviour(delay_s=0.03), "winning": FakeBehaviour(delay_s=0.15)},
            "*winning under porep load: * s (the slowest of *), *x its idle p50 of * s; * late against the "
            "bound 0.1 s (option --cuzk-slo): MISSED*",
        ),
    ],
    ids=["server", "priority"],
)
def test_a_bound_the_daemon_cannot_hold_fails_the_scenario_naming_it(fake_run, select, behaviour, said):
    args = ("-k", select, *BOUNDED, "--cuzk-slo=winning:0.1s")
    result, _ = fake_run(FILES, *args, behaviour=behaviour)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([said])


def test_a_daemon_that_dies_mid_scenario_fails_it_by_name(fake_run):
    args = ("-k", "test_server and winning", *BOUNDED, "--cuzk-skip-warmup")
    result, _ = fake_run(FILES, *args, behaviour=QUICK, die_after=5)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*daemon died during a wave of * winning proofs (jobs *): fake daemon stopped after 5 proofs*"]
    )


def test_a_daemon_that_hangs_mid_scenario_is_killed_as_hung(fake_run):
    frozen = {"porep": FakeBehaviour(freeze=True)}
    args = ("-k", "test_priority and winning-under-porep", *BOUNDED, "--cuzk-skip-warmup")
    result, (daemon,) = fake_run(FILES, *args, "--cuzk-proof-timeout=30", behaviour=frozen)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*daemon hung: the fake is frozen during porep proof job *"])
    assert daemon.state.restarts[0].startswith("restarted: daemon hung"), "no next test gets it as it is"


def test_a_proof_past_the_proof_timeout_ends_the_scenario_and_takes_the_daemon_out(fake_run):
    hang = {"winning": FakeBehaviour(hang=True)}
    args = ("-k", "test_server and winning", *BOUNDED, "--cuzk-skip-warmup", "--cuzk-proof-timeout=0.5")
    result, (daemon,) = fake_run(FILES, *args, behaviour=hang)
    result.assert_outcomes(failed=1)
    said = "*1 of 1 winning proof failed: 1x winning proof * timed out after *s (CancelProof sent*"
    result.stdout.fnmatch_lines([said])
    assert daemon.state.restarts == ["restarted: a winning proof timed out in test_server[winning-batch1]"]

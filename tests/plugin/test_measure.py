"""The measurement plan against a fake daemon: windows until stable, bounded by proofs and seconds.

Only the daemon's work is timed: requests are built, and proofs checked, between the waves.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.fakenvml import FakeNvml
from helpers.support import PROVE_SOURCE

from pytest_cuzk.backends.fake import FakeBehaviour, FakeDaemon
from pytest_cuzk.config.settings import resolve_settings
from pytest_cuzk.daemon.client import ProvingClient
from pytest_cuzk.data.testdata import TestData
from pytest_cuzk.measure import stats
from pytest_cuzk.proto import pb
from pytest_cuzk.run.cases import Case
from pytest_cuzk.run.plan import Plan, run_case, stability, stable
from pytest_cuzk.run.tally import case_figures, case_samples
from pytest_cuzk.run.waves import CaseResult, Runner
from pytest_cuzk.vocab.kinds import KINDS

WINNING = KINDS["winning"]
ONE = Case("local", WINNING, 1, 1)
STEADY = FakeBehaviour(delay_s=0.02)  # the sleep, not the machine, sets the pace


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[FakeDaemon]:
    fake = FakeDaemon("local", tmp_path / "fake", {"winning": STEADY})
    yield fake
    fake.stop()


def plan(**over: float) -> Plan:
    values = dict(min_proofs=2, max_proofs=1000, budget_s=20.0, window_s=0.1, stability_pct=25.0)
    return Plan(**{**values, **over})  # type: ignore[arg-type]


def measure(
    daemon: FakeDaemon,
    pytester: pytest.Pytester,
    the_plan: Plan,
    case: Case = ONE,
    request_hook: Callable[[], None] = lambda: None,
    verify_s: float = 0.0,
) -> CaseResult:
    daemon.bring_up(case.batch_size, [case.kind], lambda *_: None)
    data = TestData(resolve_settings(pytester.parseconfig()), daemon.profile().manifest(), None)
    verifier = daemon.profile().verifier(case.kind)
    assert verifier is not None

    def make_request() -> pb.SubmitProofRequest:
        request_hook()
        return data.request(case.kind)

    def verify(req: pb.SubmitProofRequest, proof: bytes) -> bool:
        time.sleep(verify_s)
        return verifier(req, proof)

    with ProvingClient(daemon.address) as client:
        runner = Runner(client, daemon, make_request, 5.0, 1.0, verify=verify)
        return run_case(case, runner, the_plan, benchmark=None)


def test_a_steady_daemon_stops_once_three_windows_agree(daemon, pytester):
    # Windows of 0.3 s hold 15 proofs of 20 ms: mostly the first three agree. A stall of a busy test
    # host can still move one window past the 25% asked, so the test holds the rule, not the count:
    # the case stops at the first window whose last three agree, and not before.
    result = measure(daemon, pytester, plan(window_s=0.3))
    assert [w.window for w in result.waves] == sorted(w.window for w in result.waves)
    windows = [[w for w in result.waves if w.window == k] for k in sorted({w.window for w in result.waves})]
    assert len(windows) == result.windows
    assert result.stabilised and 3 <= result.windows <= 10, "a steady daemon settles within a few windows"
    assert result.stop_reason == f"stable after {result.windows} windows"
    assert stable(windows, 25.0)

    def latencies(k: int) -> list[float]:
        return [r.latency_s for window in windows[:k] for wave in window for r in wave.records if r.ok]

    assert not any(stability(windows[:k], latencies(k), 25.0)[0] for k in range(3, result.windows)), (
        "it stops at the first agreement over proofs that do not drift"
    )
    assert 6 * result.windows <= len(result.proofs) <= 17 * result.windows, "windows of 0.3 s of 20 ms proofs"


def test_a_daemon_that_will_not_settle_stops_at_the_budget(daemon, pytester):
    turns = itertools.count()

    def alternate() -> None:  # every fifth proof the daemon changes pace: no three windows agree
        daemon.behaviour["winning"] = FakeBehaviour(delay_s=0.01 if next(turns) // 5 % 2 else 0.06)

    start = time.monotonic()
    result = measure(daemon, pytester, plan(budget_s=1.5, stability_pct=5.0), request_hook=alternate)
    assert time.monotonic() - start < 2.0, "no wave starts that would overrun the budget (0.5 s of slack)"
    assert not result.stabilised and result.windows >= 3
    assert result.stop_reason == "the 1.5 s time budget (--cuzk-case-budget) would be overrun"


def test_the_minimum_proofs_win_over_the_budget_and_the_maximum_bounds_all(daemon, pytester):
    assert len(measure(daemon, pytester, plan(min_proofs=25, budget_s=0.1)).proofs) == 25
    capped = measure(daemon, pytester, plan(min_proofs=3, max_proofs=5, stability_pct=0.001))
    assert (len(capped.proofs), capped.stop_reason) == (5, "--cuzk-max-proofs 5 reached")


def test_a_compared_run_measures_until_its_interval_is_within_a_third_of_the_limit(daemon, pytester):
    # A steady fake can reach ±0.5% within the three windows stability needs: ask for ±0.01%
    start = time.monotonic()
    tight = measure(daemon, pytester, plan(precision=(("throughput", 0.01),), budget_s=1.0))
    tight_s = time.monotonic() - start
    loose = measure(daemon, pytester, plan(precision=(("throughput", 50.0),), budget_s=3.0))
    assert loose.windows >= 6, "a compared run measures 6 windows at least"
    assert loose.stop_reason == f"stable after {loose.windows} windows"
    half = stats.half_width_pct(case_samples(tight).series("window_s_per_proof"), stats.Rate())
    assert tight.stop_reason.startswith("stable after") == (half is not None and half <= 0.01)
    if half is None or half > 0.01:  # on a loaded host the fake's windows can come out alike
        assert len(tight.proofs) > len(loose.proofs), "short of ±0.01% it measured on, past stability"
        # and past its budget, up to three of them: the gate's precision is worth the time
        assert tight.stop_reason.startswith(
            "3 times the 1 s time budget (--cuzk-case-budget) would be overrun, "
            "short of the compare gate's precision (throughput ±"
        ), tight.stop_reason
        tail = (
            r"±([\d.]+(?:e-?\d+)?)%, the gate needs ±0.01%: about (\d+) s of measuring on this host "
            r"would reach it, as --cuzk-case-budget=(\d+) allows\)$"
        )
        said = re.search(tail, tight.stop_reason)
        assert said, tight.stop_reason
        wide, needed, budget = float(said[1]), int(said[2]), int(said[3])
        # it measured over 1.5 s at ±wide% (two digits printed); the interval narrows as 1/sqrt(time)
        assert needed >= 1.5 * (wide * 0.95 / 0.01) ** 2
        assert 3 * (budget - 5) <= needed <= 3 * budget  # the printed seconds are rounded
        assert 1.5 < tight_s < 4.5


def test_a_run_short_of_precision_for_want_of_windows_or_with_a_zero_limit_says_so(daemon, pytester):
    few = measure(daemon, pytester, plan(precision=(("throughput", 50.0),), budget_s=1.0, window_s=0.7))
    assert re.fullmatch(
        r"3 times the 1 s time budget \(--cuzk-case-budget\) would be overrun, short of the compare "
        r"gate's precision \(it closed [1-5] windows? of the 6 a gated run needs\)",
        few.stop_reason,
    ), few.stop_reason
    zero = measure(daemon, pytester, plan(precision=(("throughput", 0.0),), budget_s=1.0))
    assert zero.stop_reason.endswith("%: a 0% limit is never precise enough)"), zero.stop_reason


def test_a_gated_run_once_precise_keeps_its_budget_though_not_stable(daemon, pytester):
    """Past one budget only while the interval is too wide: precise enough, the budget ends it."""
    start = time.monotonic()
    gated = plan(precision=(("throughput", 50.0),), budget_s=2.0, stability_pct=0.001)
    result = measure(daemon, pytester, gated)
    assert time.monotonic() - start < 2.5
    assert not result.stabilised and result.windows >= 6
    assert result.stop_reason == "the 2 s time budget (--cuzk-case-budget) would be overrun"


def test_requests_and_verification_stay_outside_the_timed_waves(daemon, pytester):
    result = measure(
        daemon,
        pytester,
        plan(min_proofs=6, max_proofs=6),
        request_hook=lambda: time.sleep(0.2),
        verify_s=0.2,
    )
    # A 20 ms proof, timed, is far below the 200 ms of either: a busy host's jitter cannot bridge it
    figures = case_figures(result, "test_x")
    assert all(0.02 <= s < 0.15 for s in figures.samples.wave_s), figures.samples.wave_s
    assert figures.untimed_s >= 6 * 0.4 * 0.9, "building and verifying are the plugin's own time"
    assert figures.throughput_proofs_per_hour > 3600 / 0.15, "throughput counts the timed waves only"
    assert figures.plugin_share_pct is not None and figures.plugin_share_pct < 50


def test_figures_carry_percentiles_an_interval_and_say_why_one_is_missing(daemon, pytester):
    one_wave_windows = plan(min_proofs=12, max_proofs=12, window_s=0.001)  # an interval needs 3 windows
    result = measure(daemon, pytester, one_wave_windows, case=Case("local", WINNING, 1, 2))
    f = case_figures(result, "test_x", unsampled="in-process fake daemon")
    assert f.proofs_ok == 12 and f.waves == 6 and list(f.samples.wave_size) == [2] * 6
    assert f.latency_p50_s is not None and f.latency_p90_s is not None and f.latency_p99_s is None
    assert f.na_reasons["latency_p99_s"] == "needs at least 100 proofs, 12 measured"
    assert f.na_reasons["rss_peak_bytes"] == "in-process fake daemon"
    low, high = f.throughput_proofs_per_hour_ci or (0, 0)
    assert low < f.throughput_proofs_per_hour < high
    assert f.throughput_cv is not None and f.latency_cv is not None
    assert sorted(f.samples.latency_s) == sorted(round(p.latency_s, 4) for p in result.ok)


def test_each_wave_is_one_benchmark_round_and_the_json_keeps_every_proof(fake_run, tmp_path):
    out = tmp_path / "bench.json"
    plan_args = ("--cuzk-proofs=4", "--cuzk-max-proofs=400", "--cuzk-window=0.1", "--cuzk-stability=25")
    result, _ = fake_run(
        {"test_prove": PROVE_SOURCE},
        "-k", "winning", "--cuzk-batch-sizes=1", *plan_args, f"--benchmark-json={out}",
        behaviour={"winning": STEADY},
    )  # fmt: skip
    result.assert_outcomes(passed=1)
    (case,) = json.loads(out.read_text())["benchmarks"]
    info = case["extra_info"]
    assert case["stats"]["rounds"] == info["waves"] == len(info["samples"]["wave_s"]) >= 9
    assert len(info["samples"]["latency_s"]) == info["proofs_ok"]
    # Windows of 0.1 s hold 5 proofs: one stall of a busy host can keep three from agreeing at once.
    windows = re.fullmatch(r"stable after (\d+) windows", info["stop_reason"])
    assert info["stabilised"] and windows, info["stop_reason"]
    assert len(info["throughput_proofs_per_hour_ci"]) == 2
    result.stdout.fnmatch_lines(
        [
            "test*p50 s*p90 s*p99 s*proofs/h*±95%*RSS peak*VRAM peak*",
            "p99 n/a: needs at least 100 proofs, * measured",
            "RSS n/a: in-process fake daemon",
            f"test_prove[[]winning-batch1-j1[]]: * proofs in * waves, {windows[1]} windows, "
            f"stable: the last 3 windows agree within 25%, no drift * (stable after {windows[1]} *"
            "plugin: client and transport *% of the daemon's time*",
        ]
    )


def test_a_gpu_that_sat_idle_through_a_case_is_named(fake_run, monkeypatch):
    fake = FakeNvml(monkeypatch, devices=2)
    fake.idle = {1}
    steady = {"winning": FakeBehaviour(delay_s=0.05)}
    args = ("-k", "winning", "--cuzk-batch-sizes=1", "--cuzk-proofs=14", "--cuzk-max-proofs=14")
    result, _ = fake_run({"test_prove": PROVE_SOURCE}, *args, behaviour=steady, sampled=True)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*CuzkWarning: test_prove[[]winning-batch1-j1[]]: GPU 1 (NVIDIA H200) sat idle through the case*",
            "  GPU 0 NVIDIA H200: VRAM peak 2.00 GiB, utilisation 87%, SM clock 1980 MHz",
            "  GPU 1 NVIDIA H200: VRAM peak 2.00 GiB, utilisation 0%, SM clock 1980 MHz",
        ]
    )


def test_a_one_gpu_host_shows_its_gpus_utilisation_and_clock_and_no_idle_warning(fake_run, monkeypatch):
    FakeNvml(monkeypatch, devices=1)
    steady = {"winning": FakeBehaviour(delay_s=0.05)}
    args = ("-k", "winning", "--cuzk-batch-sizes=1", "--cuzk-proofs=8", "--cuzk-max-proofs=8")
    result, _ = fake_run({"test_prove": PROVE_SOURCE}, *args, behaviour=steady, sampled=True)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["  GPU 0 NVIDIA H200: VRAM peak 2.00 GiB, utilisation 87%, SM clock 1980 MHz"]
    )
    assert "sat idle" not in result.stdout.str(), "a GPU that worked raises no idle warning"

"""The saved-baseline gate: the baseline build's runs on this host, judged by the host's run-to-run spread."""

from __future__ import annotations

import math
import re
import statistics

import numpy as np
import pytest
from helpers.support import QUIET_MEMORY

from pytest_cuzk.config.settings import resolve_settings
from pytest_cuzk.core.compat import SavedRun
from pytest_cuzk.core.errors import CuzkError
from pytest_cuzk.measure import stats
from pytest_cuzk.measure.figures import METRICS, Figures, Samples
from pytest_cuzk.measure.memory import MemoryReport
from pytest_cuzk.verdicts.baseline import imprecision
from pytest_cuzk.verdicts.comparison import against_saved, in_words
from pytest_cuzk.verdicts.gates import check_gates
from pytest_cuzk.verdicts.runspread import PRIOR_CV, SavedRuns, saved_runs

TEST = "test_prove.py::test_prove[porep-batch1-j1]"
THROUGHPUT = METRICS["throughput"]


def _busy(pct: float) -> MemoryReport:
    return MemoryReport.from_dict({**QUIET_MEMORY, "host_other_cpu_pct": pct})


def _figures(per_proof_s: float = 25.0, seed: int = 1, jitter: float = 0.03, **kw: object) -> Figures:
    """A case whose 30 proofs, one a window, took ``per_proof_s`` each, give or take ``jitter``."""
    waves = tuple(per_proof_s * (1 + jitter * np.random.default_rng(seed).standard_normal(30)))
    samples = Samples(latency_s=waves, wave_s=waves, wave_size=(1,) * 30, wave_window=tuple(range(30)))
    values = dict(
        test="test_prove[porep-batch1-j1]", label="local", kind="porep", batch_size=1, concurrency=1,
        proofs_ok=30, proofs_failed=0, wall_s=sum(waves),
        throughput_proofs_per_hour=3600 / statistics.fmean(waves),
        latency_p50_s=statistics.median(waves), latency_p90_s=None, latency_max_s=max(waves),
        rss_peak_bytes=200 << 30, samples=samples,
    )  # fmt: skip
    return Figures(**{**values, **kw})  # type: ignore[arg-type]


def _run(figures: Figures, n: int, build: str = "A", host: str = "h1", test: str = TEST) -> SavedRun:
    info = {"cuzk": {"daemon": build, "host": {"fingerprint": host}}}
    bench = {"fullname": test, "extra_info": figures.to_dict()}
    return SavedRun(f"/storage/{n:04d}_run.json", {"machine_info": info, "benchmarks": [bench]})


def _saved(*per_proof_s: float, others: dict[str, list[float]] | None = None, **kw: object) -> SavedRuns:
    """The baseline build's runs at these paces (the first one compared), and other builds' on the host."""
    runs = [_run(_figures(s, seed=10 + i, **kw), i) for i, s in enumerate(per_proof_s)]
    for build, paces in (others or {}).items():
        runs += [
            _run(_figures(s, seed=50 + i, jitter=0.0), len(runs) + i, build) for i, s in enumerate(paces)
        ]
    found = saved_runs(runs, runs[0], TEST)
    assert found is not None
    return found


def test_the_spread_is_the_builds_runs_on_this_host_when_it_has_three():
    saved = _saved(25.0, 25.0 * 100 / 110, 25.0 * 100 / 90, jitter=0.0)
    spread = saved.spread(THROUGHPUT)
    assert (spread.source, spread.runs, spread.df) == ("build", 3, 2)
    assert spread.cv == pytest.approx(0.1, rel=1e-3)
    assert saved.value(THROUGHPUT) == pytest.approx(144.0, rel=1e-3), "the mean of the build's runs"
    assert spread.describe() == "run-to-run spread CV 10.0% over 3 saved runs of this build on this host"
    assert spread.half_width_pct(3) == pytest.approx(4.303 * 10 * math.sqrt(4 / 3), rel=1e-3)


def test_the_hosts_pooled_spread_wins_where_it_has_more_degrees_of_freedom_than_the_builds_runs():
    saved = _saved(25.0, 25.0 * 100 / 110, 25.0 * 100 / 90, others={"B": [20.0, 20.2, 19.8]}, jitter=0.0)
    spread = saved.spread(THROUGHPUT)
    assert (spread.source, spread.df, spread.runs, spread.builds) == ("host", 4, 6, 2)
    assert spread.cv < 0.1, "the other build's steadier runs narrow the estimate of the host's spread"
    assert spread.half_width_pct(3) < 4.303 * 10 * math.sqrt(4 / 3), "and t at 4 degrees of freedom, not 2"
    alone = _saved(25.0, 25.0 * 100 / 110, 25.0 * 100 / 90, others={"B": [20.0]}, jitter=0.0)
    assert alone.spread(THROUGHPUT).source == "build", "a pool with as few degrees of freedom adds nothing"


def test_runs_of_other_hosts_and_tests_are_not_the_baseline():
    runs = [
        _run(_figures(25.0), 0),
        _run(_figures(20.0), 1, host="h2"),
        _run(_figures(20.0), 2, test="other"),
    ]
    saved = saved_runs(runs, runs[0], TEST)
    assert saved is not None and len(saved.mine) == 1 and saved.others == ()


def test_with_fewer_runs_of_the_build_the_spread_is_the_hosts_pooled_over_its_builds():
    saved = _saved(25.0, others={"B": [20.0, 20.8], "C": [40.0, 39.2, 40.8]}, jitter=0.0)
    spread = saved.spread(THROUGHPUT)
    rates = [[3600 / s for s in paces] for paces in ([20.0, 20.8], [40.0, 39.2, 40.8])]
    squares = sum(((r - statistics.fmean(g)) / statistics.fmean(g)) ** 2 for g in rates for r in g)
    assert (spread.source, spread.df, spread.runs, spread.builds) == ("host", 3, 5, 2)
    assert spread.cv == pytest.approx(math.sqrt(squares / 3))
    assert (
        spread.describe().startswith("run-to-run spread CV ")
        and "pooled over 5 runs of 2 builds" in spread.describe()
    )


def test_with_no_repeated_runs_on_this_host_the_spread_is_the_prior():
    spread = _saved(25.0, others={"B": [20.0]}).spread(THROUGHPUT)
    assert (spread.source, spread.cv, spread.df) == ("prior", PRIOR_CV, math.inf)
    assert spread.describe() == "no repeated runs on this host: a prior run-to-run CV of 10%"
    assert spread.half_width_pct(1) == pytest.approx(27.7, abs=0.05)


def test_with_one_baseline_run_a_build_twice_as_slow_fails_and_a_host_slowed_20pct_is_undecided():
    saved = _saved(25.0)
    twice = against_saved(THROUGHPUT, saved, _figures(50.0, seed=2), 5.0)
    assert twice.verdict == "regressed" and twice.p_value is not None and twice.p_value < 0.025
    for slowed in (1.0, 1.05, 1.1, 1.15, 1.2):  # the host, not the build: the guest cannot see it
        change = against_saved(THROUGHPUT, saved, _figures(25.0 * slowed, seed=3), 5.0)
        assert change.verdict != "regressed", slowed
    assert against_saved(THROUGHPUT, saved, _figures(30.0, seed=3), 5.0).verdict == "undecided"


def test_an_identical_build_within_the_builds_spread_is_ok_and_says_so_in_words():
    saved = _saved(25.0, 25.1, 24.9, jitter=0.01)
    change = against_saved(THROUGHPUT, saved, _figures(24.9, seed=4, jitter=0.01), 5.0)
    assert change.verdict == "ok", change.sentence()
    assert re.fullmatch(
        r"throughput 0\.\d% better \(95% CI \d\.\d% better to \d\.\d% worse, p=\S+ \(one-sided, beyond the "
        r"limit\); run-to-run spread CV 0\.\d% over 3 saved runs of this build on this host; "
        r"baseline 144\.\d/h \(mean of 3 runs\), now 14\d\.\d/h; limit 5%\): within the limit",
        change.sentence(),
    ), change.sentence()


def test_a_change_is_said_in_words_never_as_a_negative_worse():
    assert (in_words(7.14), in_words(-7.14), in_words(0.01)) == ("7.1% worse", "7.1% better", "unchanged")
    saved = _saved(25.0, 25.1, 24.9, jitter=0.01)
    for pace, word in ((24.5, "better"), (25.5, "worse")):
        said = against_saved(THROUGHPUT, saved, _figures(pace, seed=5), 5.0).sentence()
        assert re.match(rf"throughput \d\.\d% {word} \(", said), said
        assert not re.search(r"-\d[\d.]*% (worse|better)", said), said


def test_a_change_the_spread_explains_is_undecided_and_names_the_spread_and_both_ways_to_decide_it():
    saved = _saved(25.0, 27.0, 23.5, jitter=0.01)  # CV about 7%: the 2-core host's
    change = against_saved(THROUGHPUT, saved, _figures(27.5, seed=6, jitter=0.01), 5.0)
    assert change.verdict == "undecided"
    said = change.sentence()
    assert "over 3 saved runs of this build on this host" in said
    assert said.endswith(
        "its interval straddles the limit: undecided, not failed (save the baseline again at another hour to "
        "learn this host's spread, or measure both builds in one run with --cuzk-ab)"
    )


def test_a_run_whose_own_interval_is_wider_than_the_spread_says_so_and_to_measure_longer():
    saved = _saved(25.0, 25.1, 24.9, jitter=0.01)
    wide = _figures(25.0, jitter=0.0)
    waves = tuple(w * (0.8 if i % 2 else 1.2) for i, w in enumerate(wide.samples.wave_s))  # CV 20%
    noisy = Figures(**{**wide.__dict__, "samples": Samples(**{**wide.samples.__dict__, "wave_s": waves})})
    change = against_saved(THROUGHPUT, saved, noisy, 5.0)
    assert change.verdict == "undecided" and change.own_wider
    assert "this run's own interval, ±" in change.sentence() and "measure longer" in change.sentence()


@pytest.mark.parametrize(("before", "after"), [(65.0, 8.0), (8.0, 35.0)])
def test_a_change_while_other_processes_loaded_one_run_differently_is_undecided_either_way(before, after):
    saved = _saved(25.0, 25.1, 24.9, jitter=0.01, memory=_busy(before))
    slower = _figures(25.0 * 1.25, seed=8, jitter=0.01, memory=_busy(after))
    change = against_saved(THROUGHPUT, saved, slower, 5.0)
    assert change.verdict == "confounded"
    assert change.sentence().endswith(
        f"but other processes kept {after:.0f}% of the host's CPUs busy during this run against "
        f"{before:.0f}% during the baseline: undecided, not failed (compare on a quiet host)"
    )
    steady = _figures(25.0 * 1.25, seed=8, jitter=0.01, memory=_busy(before + 5))
    assert against_saved(THROUGHPUT, saved, steady, 5.0).verdict == "regressed", (
        "within 10 points: the build's"
    )


def test_a_peak_is_compared_as_measured_whatever_the_spread():
    saved = _saved(25.0)
    change = against_saved(METRICS["rss_peak"], saved, _figures(rss_peak_bytes=230 << 30), 10.0)
    assert change.verdict == "regressed" and change.spread is None
    assert change.sentence() == (
        "rss_peak regressed 15.0% (a peak, compared as measured; baseline 200.0 GiB, now 230.0 GiB; "
        "limit 10%)"
    )


def test_the_gate_fails_a_regression_and_leaves_the_undecided_to_unresolved(pytester):
    lenient = resolve_settings(pytester.parseconfig("--cuzk-compare-fail=throughput:5%"))
    strict = resolve_settings(
        pytester.parseconfig("--cuzk-compare-fail=throughput:5%", "--cuzk-compare-unresolved=fail")
    )
    saved = _saved(25.0)
    (failure,), warnings = check_gates(_figures(50.0, seed=2), lenient, saved)
    assert (
        warnings == []
        and failure.startswith("throughput regressed 50.")
        and failure.endswith("(--cuzk-compare-fail)")
    )
    failures, (warning,) = check_gates(_figures(25.0, seed=2), lenient, saved)
    assert failures == [] and "undecided, not failed" in warning
    (failure,), warnings = check_gates(_figures(25.0, seed=2), strict, saved)
    assert warnings == [] and failure.endswith(
        "(--cuzk-compare-fail); failed (--cuzk-compare-unresolved=fail)"
    )
    assert "undecided, not decided" in failure


def test_a_compared_run_without_the_test_fails_the_gate_and_one_that_is_no_record_names_its_file(pytester):
    settings = resolve_settings(pytester.parseconfig("--cuzk-compare-fail=throughput:5%"))
    failures, _ = check_gates(_figures(), settings, None, compared="0001_main.json (build x, saved y)")
    assert failures == [
        "--cuzk-compare-fail: 0001_main.json (build x, saved y) has no test_prove[porep-batch1-j1], so it "
        "cannot be compared: save a baseline that ran this test (the same -k and matrix), or compare with "
        "one that did"
    ]
    bare = SavedRun("/storage/0001_old.json", {"benchmarks": [{"fullname": TEST, "extra_info": {"x": 1}}]})
    with pytest.raises(
        CuzkError, match=r"^/storage/0001_old.json: .*not a pytest-cuzk record.*--benchmark-save"
    ):
        saved_runs([bare], bare, TEST)
    assert saved_runs([bare], bare, "another test") is None


def test_a_figure_missing_for_too_few_proofs_is_not_checked_and_says_why(pytester):
    settings = resolve_settings(pytester.parseconfig("--cuzk-compare-fail=p99:5%"))
    figures = _figures(na_reasons={"latency_p99_s": "needs at least 100 proofs, 30 measured"})
    _, warnings = check_gates(figures, settings, _saved(25.0))
    assert warnings == [
        "--cuzk-compare-fail p99 not checked: no latency_p99_s in the baseline or now "
        "(needs at least 100 proofs, 30 measured)"
    ]


def test_a_stage_figure_is_gated_like_throughput():
    def staged(gpu_ms: float, seed: int) -> Figures:
        gpu = tuple(int(v) for v in gpu_ms * (1 + 0.02 * np.random.default_rng(seed).standard_normal(30)))
        f = _figures(seed=seed)
        return Figures(
            **{
                **f.__dict__,
                "gpu_p50_ms": statistics.median(gpu),
                "samples": Samples(**{**f.samples.__dict__, "gpu_compute_ms": gpu}),
            }
        )

    runs = [_run(staged(500.0, 20 + i), i) for i in range(3)]
    saved = saved_runs(runs, runs[0], TEST)
    assert saved is not None
    gpu = METRICS["gpu"]
    assert against_saved(gpu, saved, staged(1000.0, 30), 5.0).verdict == "regressed"
    assert against_saved(gpu, saved, staged(500.0, 31), 5.0).verdict in ("ok", "undecided")


def test_a_baseline_short_of_its_gates_precision_names_the_smallest_limit_it_can_gate():
    precise, wide = _figures(25.0, jitter=0.01), _figures(25.0, jitter=0.15)
    assert imprecision(precise, (("throughput", 5 / 3),)) == []
    (note,) = imprecision(wide, (("throughput", 5 / 3),))
    half = stats.half_width_pct(wide.samples.series("window_s_per_proof"), stats.Rate())
    assert half is not None
    assert note == (
        f"saved as a baseline with throughput ±{half:.1f}% (95%), short of the ±1.7% a 5% throughput gate "
        f"needs: it can gate a limit of {math.ceil(half * 3)}% or more; measure longer (--cuzk-case-budget) "
        "or on a quieter host"
    )
    assert imprecision(wide, (("throughput", 10.0),)) == [], "a 30% gate asks ±10%"


def test_a_figure_whose_baseline_is_zero_is_not_checked_and_says_so(pytester):
    settings = resolve_settings(pytester.parseconfig("--cuzk-compare-fail=queue_wait:5%"))
    idle = _figures(queue_wait_p50_ms=0.0)
    runs = [_run(idle, 0)]
    saved = saved_runs(runs, runs[0], TEST)
    _, warnings = check_gates(_figures(queue_wait_p50_ms=3.0), settings, saved)
    assert warnings == [
        "--cuzk-compare-fail queue_wait not checked: the baseline's is 0, so no change is relative to it"
    ]

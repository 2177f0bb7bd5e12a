"""Gates: the figure, the limit and the option in the failing test's message; never a silent pass."""

from __future__ import annotations

import pytest
from helpers.support import QUIET_MEMORY

from pytest_cuzk.config.settings import resolve_settings
from pytest_cuzk.config.values import COMPARE_METRICS
from pytest_cuzk.measure.figures import METRICS, Figures, regression
from pytest_cuzk.measure.memory import MemoryReport
from pytest_cuzk.measure.paired import PairedAB
from pytest_cuzk.run.cases import Case
from pytest_cuzk.run.tally import case_figures
from pytest_cuzk.run.waves import CaseResult
from pytest_cuzk.verdicts.abgate import check_ab
from pytest_cuzk.verdicts.gates import check_gates
from pytest_cuzk.vocab.kinds import KINDS

STRICT = ("--cuzk-compare-fail=throughput:5%", "--cuzk-compare-unresolved=fail")
FAILED_UNDECIDED = "; failed (--cuzk-compare-unresolved=fail)"


def _figures(**kw) -> Figures:
    values = dict(
        test="test_prove[porep-batch1-j1]", label="local", kind="porep", batch_size=1, concurrency=1,
        proofs_ok=4, proofs_failed=0, wall_s=100.0, throughput_proofs_per_hour=144.0, latency_p50_s=25.0,
        latency_p90_s=26.0, latency_max_s=27.0, rss_peak_bytes=200 << 30, vram_peak_bytes=None,
    )  # fmt: skip
    return Figures(**{**values, **kw})


def test_regression_is_signed_by_which_way_is_better():
    assert regression(METRICS["throughput"], 100.0, 90.0) == pytest.approx(10.0)
    assert regression(METRICS["rss_peak"], 100.0, 90.0) == pytest.approx(-10.0)
    assert regression(METRICS["gpu"], 100.0, 90.0) == pytest.approx(-10.0)
    assert regression(METRICS["p50"], 0.0, 1.0) is None
    assert regression(METRICS["p50"], None, 1.0) is None


def test_absolute_gates_name_value_limit_and_option(pytester):
    settings = resolve_settings(
        pytester.parseconfig(
            "--cuzk-min-throughput=porep:200/h", "--cuzk-max-rss=150GiB", "--cuzk-max-vram=1GiB"
        )
    )
    failures, unchecked = check_gates(_figures(), settings, None)
    assert failures == [
        "throughput 144.00 proofs/h is below the minimum 200/h for porep (--cuzk-min-throughput)",
        "rss_peak_bytes 200.0 GiB exceeds 150.0 GiB for porep (--cuzk-max-rss)",
    ]
    assert unchecked == [
        "--cuzk-max-vram not checked for porep: no vram_peak_bytes "
        "(the daemon's process is not sampled (attached))"
    ]


def test_a_vram_gate_without_nvml_says_why(pytester):
    memory = MemoryReport.from_dict(QUIET_MEMORY)
    settings = resolve_settings(pytester.parseconfig("--cuzk-max-vram=1GiB"))
    result = CaseResult(Case("local", KINDS["porep"], 1, 1), memory=memory)
    _, unchecked = check_gates(case_figures(result, "test_prove[porep-batch1-j1]"), settings, None)
    assert unchecked == [
        "--cuzk-max-vram not checked for porep: no vram_peak_bytes (NVML unavailable: no driver)"
    ]


def test_too_few_ab_pairs_fail_a_gate_that_lets_nothing_undecided_pass(pytester):
    control = _figures(test="t", throughput_proofs_per_hour=1000.0)
    ab = PairedAB(control, "c", "b", "side-by-side", 1, "BC CB", 1, (0.01, 0.02), 0.985, None, None)
    figures = _figures(test="t", throughput_proofs_per_hour=985.0, ab=ab)
    said = "--cuzk-compare-fail not checked on the A/B pairs: 2 complete pairs, an interval needs 3"
    assert check_ab(figures, resolve_settings(pytester.parseconfig(STRICT[0])))[1][0].startswith(said)
    (failure,), warnings = check_ab(figures, resolve_settings(pytester.parseconfig(*STRICT)))
    assert warnings == [] and failure.startswith(said) and failure.endswith(FAILED_UNDECIDED)


def test_every_gateable_figure_is_a_metric_and_the_stage_figures_are_gateable():
    assert set(COMPARE_METRICS) == set(METRICS) - {"max"}, "the slowest proof is one proof: not gated"

"""Gates: the figure, the limit and the option in the failing test's message; never a silent pass."""

from __future__ import annotations

import json

import pytest
from support import PROVE_SOURCE

from pytest_cuzk.figures import METRICS, Figures, regression
from pytest_cuzk.gates import check_gates
from pytest_cuzk.memory import MemoryReport
from pytest_cuzk.settings import resolve_settings

WINNING = ("-k", "winning", "--cuzk-batch-sizes=1")


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
    memory = MemoryReport.from_dict(
        dict(samples=1, interval_s=0.1, duration_s=1.0, sampler_cpu_s=0.0, rss_peak_bytes=1,
             rss_mean_bytes=1, rss_hwm_peak_bytes=None, rss_hwm_scope="unavailable",
             sys_available_min_bytes=1, daemon_exited=False, vram_available=False, vram_source=None,
             vram_unavailable_reason="NVML unavailable: no driver", vram_peak_bytes=None,
             vram_mean_bytes=None, device_mem_used_peak_bytes=None, gpu_util_mean_pct=None,
             sm_clock_mean_mhz=None, sm_clock_min_mhz=None, pstates=[])
    )  # fmt: skip
    settings = resolve_settings(pytester.parseconfig("--cuzk-max-vram=1GiB"))
    _, unchecked = check_gates(_figures(memory=memory), settings, None)
    assert unchecked == [
        "--cuzk-max-vram not checked for porep: no vram_peak_bytes (NVML unavailable: no driver)"
    ]


def test_compare_gate_fails_beyond_the_threshold_only(pytester):
    settings = resolve_settings(pytester.parseconfig("--cuzk-compare-fail=throughput:5%,rss_peak:10%"))
    base = {"extra_info": {"throughput_proofs_per_hour": 150.0, "rss_peak_bytes": 190 << 30}}
    failures, _ = check_gates(_figures(), settings, base)
    assert failures == [], "4% slower and 5.3% more RSS are within 5% and 10%"
    failures, _ = check_gates(_figures(throughput_proofs_per_hour=100.0), settings, base)
    assert failures == ["throughput regressed 33.3% (baseline 150, now 100; limit 5%) (--cuzk-compare-fail)"]
    _, unchecked = check_gates(_figures(), settings, None)
    assert unchecked[0].startswith("--cuzk-compare-fail not checked: the compared run has no such test")


def test_a_gate_fails_the_test_by_name_in_a_run(fake_run):
    result, _ = fake_run(
        {"test_prove": PROVE_SOURCE}, *WINNING, "--cuzk-min-throughput=winning:1000000000000/h"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_prove[[]winning-batch1-j1[]]: throughput * proofs/h is below the minimum 1e+12/h "
            "for winning*"
        ]
    )


@pytest.mark.parametrize("source", ["--cuzk-baseline", "--benchmark-compare"])
def test_compare_gate_against_a_saved_run(fake_run, tmp_path, source):
    storage = tmp_path / "benchmarks"
    args = (*WINNING, f"--benchmark-storage=file://{storage}")
    fake_run({"test_prove": PROVE_SOURCE}, *args, "--benchmark-save=base")[0].assert_outcomes(passed=1)
    (base,) = storage.glob("*/0001_base.json")
    saved = json.loads(base.read_text())
    saved["benchmarks"][0]["extra_info"]["throughput_proofs_per_hour"] *= 100
    base.write_text(json.dumps(saved))
    compare = f"--cuzk-baseline={base}" if source == "--cuzk-baseline" else "--benchmark-compare=0001"
    result, _ = fake_run({}, *args, compare, "--cuzk-compare-fail=throughput:5%")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*test_prove[[]winning-batch1-j1[]]: throughput regressed 9*% (baseline *, now *; limit 5%)*"]
    )

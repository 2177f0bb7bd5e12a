"""Runs whose proofs outlast their windows: cuzk-ref at real speed, scaled to seconds.

The time plan said after the warm-up, each case's trade within the run budget, the stop reasons
and the stability rule, held by whole pytest runs on cuzk-ref paced as real cuzk
(``[ref.faults] real_speed``): a PoRep proof of about 2.5 s against windows of 0.5 s.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers.support import SUITE

PROVE = {"test_prove": (SUITE / "test_prove.py").read_text()}
PLAN = ("--cuzk-proofs=10", "--cuzk-max-proofs=1000", "--cuzk-window=0.5", "--cuzk-batch-sizes=1")


def _config(tmp_path: Path, faults: str) -> str:
    path = tmp_path / "realspeed.toml"
    path.write_text(f'[ref.faults]\nreal_speed = "32g"\n{faults}')
    return f"--cuzk-config={path}"


def test_a_run_budget_is_divided_among_the_cases_each_trade_said(inner, tmp_path: Path) -> None:
    config = _config(tmp_path, "real_speed_scale = 0.03\n")
    args = (config, *PLAN, "--cuzk-concurrency=1,2", "--cuzk-run-budget=20s", "-k", "porep and test_prove")
    result = inner(PROVE, *args, timeout=600)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["cuzk: the run measures for at most 20 s once the daemon is ready (--cuzk-run-budget)*"]
    )
    out = result.stderr.str()  # said as it happens, past pytest's capture
    head = r"cuzk: a proof takes porep ~\d+ s here \(the warm-up\); the run will take [^(]+\((\d+) s\)"
    said = re.search(head + " of the ~20 s run budget", out)
    assert said, out
    assert 10 <= int(said[1]) <= 40, "two cases within about their shares of 20 s"
    result.stderr.fnmatch_lines(
        [
            "cuzk: porep-batch1-j1: minimum proofs 10 -> * (* waves of ~* s fit its share ~* s)",
            "cuzk: porep-batch1-j2: minimum proofs 10 -> * (3 waves of ~* s fit its share ~* s)",
        ]
    )
    # windows are proofs: each case stops at its lowered minimum, and says it is no evidence of stability
    result.stdout.fnmatch_lines(
        [
            "test_prove[[]porep-batch1-j1[]]: * proofs in * waves, * windows, too few proofs to call stable "
            "(*; a drift test needs 8) (*budget (--cuzk-case-budget)*",
            "  95% intervals: throughput ±*% over * windows; median latency * s (* to * s) over * proofs; *",
        ]
    )


def test_proofs_that_slow_down_are_drifting_not_stable(inner, tmp_path: Path) -> None:
    config = _config(tmp_path, "real_speed_drift_pct = 25\n")  # WinningPoSt: 0.7 s, then 25% slower each
    args = (config, *PLAN, "--cuzk-max-proofs=10", "--cuzk-concurrency=1", "--cuzk-window=0.1")
    args += ("-k", "winning and test_prove")
    result = inner(PROVE, *args, timeout=600)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_prove[[]winning-batch1-j1[]]: 10 proofs in 10 waves, * windows, "
            "drifting: latency +*% over the run (95% interval +*"
        ]
    )
    assert "stable: the last" not in result.stdout.str()


@pytest.mark.parametrize(
    ("budget", "why"), [("0", "above 0"), ("15x", "give seconds"), ("200h", "at most a week")]
)
def test_a_bad_run_budget_is_a_usage_error_naming_the_option(inner, budget: str, why: str) -> None:
    result = inner(PROVE, f"--cuzk-run-budget={budget}")
    result.stderr.fnmatch_lines(
        [f"ERROR: Invalid duration '{budget}' from option --cuzk-run-budget: *{why}*"]
    )

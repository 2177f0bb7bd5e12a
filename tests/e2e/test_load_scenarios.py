"""The load scenarios against cuzk-ref: a PoSt under PoRep load meets its bound unless priorities are off.

The reference engine keeps jobs queued until a synthesis worker is free, so priorities order
what waits: a WinningPoSt sent behind queued PoRep runs right after the work already started.
With the ``fifo`` fault it waits behind every PoRep queued before it, and test_priority fails,
naming the slowdown and the bound. The runs are short (a few proofs, a few seconds of budget):
the figures themselves come from ``tests/benchmarks/test_scenario_bench.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

from helpers.support import SCENARIOS_SOURCE

FILES = {"test_scenarios": SCENARIOS_SOURCE}
SHORT = (
    "--cuzk-batch-sizes=1",
    "--cuzk-proofs=2",
    "--cuzk-max-proofs=300",
    "--cuzk-scenario-budget=2",
)
WINNING_UNDER_POREP = "test_priority and winning-under-porep"


def test_winning_post_under_porep_load_meets_its_bound(inner, tmp_path: Path):
    out = tmp_path / "bench.json"
    result = inner(FILES, "-k", WINNING_UNDER_POREP, *SHORT, f"--benchmark-json={out}")
    result.assert_outcomes(passed=1)
    (case,) = json.loads(out.read_text())["benchmarks"]
    priority = case["extra_info"]
    assert (
        priority["slo_met"] and priority["priority"] == "CRITICAL" and priority["background_kind"] == "porep"
    )
    assert priority["latency_max_s"] <= priority["slo_s"] and priority["slowdown_vs_idle"] > 1
    assert priority["background_throughput_proofs_per_hour"] > 0 and priority["background_proofs"] >= 9
    result.stdout.fnmatch_lines(
        [
            "load scenarios:",
            "  test_priority?winning-under-porep?: winning under porep load: * s (the slowest of *), *x its "
            "idle p50 of * s; 0 of * late against the bound the idle p50 + 4 background proofs' idle p50 = "
            "* s (the reference-engine default): met; porep *.*/h in the background",
        ]
    )


def test_winning_post_behind_every_queued_porep_misses_its_bound_with_the_fifo_fault(inner, tmp_path: Path):
    config = tmp_path / "fifo.toml"
    # The protocol behaviour cancels the load's queued proofs when the run stops: no wait for them.
    config.write_text('[ref]\nbehave = "protocol"\n[ref.faults]\nfifo = true\n')
    result = inner(FILES, "-k", WINNING_UNDER_POREP, *SHORT, f"--cuzk-config={config}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E * AssertionError: winning under porep load: * s (the slowest of 1; a p99 needs 100), *x its "
            "idle p50 of * s; 1 of 1 late against the bound the idle p50 + 4 background proofs' idle p50 = "
            "* s (the reference-engine default): MISSED"
        ]
    )

"""How often the saved-baseline gate is wrong, on the reference engine at the default settings.

Each comparison is a fresh ``pytest`` and a fresh daemon, gated by
``--cuzk-compare-fail=throughput:5%,rss_peak:10%``, and ends regressed (the run failed), undecided
(it passed with a warning that says so) or within the limit. Two rows:

- **Three baseline runs**: the same build saved three times (the baseline and its spread on this
  host), then ``CUZK_GATE_BENCH_PAIRS`` (10) candidates planted slower (``slow_factor =
  CUZK_GATE_BENCH_SLOW``, 1.10: a 10% slow-down) alternating with as many of the same build, none
  of them saved. Targets: no identical build regressed, at least 9 of 10 slow ones caught.
- **One baseline run, the host slowed invisibly**: the same build saved once, then as many runs of
  the same build whose engine is slowed by a factor drawn between 1 and ``CUZK_GATE_BENCH_HOST_SLOW``
  (1.2), as the H100 host was for minutes with no other process busy. They count as identical
  builds: target, none regressed.

The case is ``test_prove[porep-batch1-j1]`` (``CUZK_GATE_BENCH_KIND=winning`` picks another);
``CUZK_GATE_BENCH_NEIGHBOUR=drifting`` runs it all beside a neighbour on each CPU whose load wanders
over minutes; ``CUZK_GATE_BENCH_BUDGET`` sets ``--cuzk-case-budget`` (seconds) for a shorter sitting.
Each line says how much of the host's CPU other processes kept busy. Run:
``pytest tests/benchmarks/test_gate_error_rates.py --figures -s``.
"""

from __future__ import annotations

import os
import random
import re
import statistics
from pathlib import Path
from statistics import NormalDist
from typing import NamedTuple

import pytest
from helpers.support import drifting_neighbours, gate_verdict, run_ref_case

PAIRS = int(os.environ.get("CUZK_GATE_BENCH_PAIRS", "10"))
SLOW = float(os.environ.get("CUZK_GATE_BENCH_SLOW", "1.10"))
HOST_SLOW = float(os.environ.get("CUZK_GATE_BENCH_HOST_SLOW", "1.2"))
GATE = "--cuzk-compare-fail=throughput:5%,rss_peak:10%"
KIND = os.environ.get("CUZK_GATE_BENCH_KIND", "porep")
DRIFTING = os.environ.get("CUZK_GATE_BENCH_NEIGHBOUR", "") == "drifting"
BUDGET = os.environ.get("CUZK_GATE_BENCH_BUDGET")
CASE = ("-k", f"test_prove and {KIND}-batch1-j1", *((f"--cuzk-case-budget={BUDGET}",) if BUDGET else ()))
RUN_TIMEOUT_S = 300
BASELINE_RUNS = 3
RUNS = BASELINE_RUNS + 2 * PAIRS + 1 + PAIRS


class Row(NamedTuple):
    """Each side's verdicts and throughputs (proofs/h): ``slow`` planted, ``same`` identical."""

    verdicts: dict[str, list[str]]
    rates: dict[str, list[float]]


def _run(tmp: Path, *args: str, slow: float = 1.0) -> tuple[int, str, float]:
    """One pytest run of the suite case against a fresh reference engine: exit code, output, seconds."""
    env = {"CUZK_REF_FAULTS": f'{{"slow_factor": {slow}}}'} if slow != 1.0 else {}
    return run_ref_case(CASE, tmp, *args, env=env, timeout_s=RUN_TIMEOUT_S)


def _verdict(code: int, out: str) -> str:
    """``regressed`` (the gate failed the run), ``undecided`` (it passed, saying so) or ``ok``."""
    if gate_verdict(code, out) == "failed":
        return "regressed"
    return "undecided" if re.search(r"throughput .*undecided", out) else "ok"


def _rate(out: str) -> float:
    """The run's throughput from its summary row."""
    row = re.search(rf"^test_prove\[{KIND}-batch1-j1\]\s.*$", out, re.M)
    assert row, out[-3000:]
    return float(row[0].split()[9])


def _figures(out: str) -> str:
    """The run's throughput and interval, how it was measured, and the gate's words on throughput."""
    row = re.search(rf"^test_prove\[{KIND}-batch1-j1\]\s.*$", out, re.M)
    cells = row[0].split() if row else []
    how = re.search(rf"^test_prove\[{KIND}-batch1-j1\]: (\d+ proofs in \d+ waves, [^;]*)", out, re.M)
    busy = re.search(r"other processes kept (\d+)% of the host's CPUs busy$", out, re.M)
    gate = re.search(r"^  (throughput .*)$", out, re.M)
    parts = [
        f"{cells[9]} proofs/h {cells[10]}" if len(cells) > 10 else "",
        how[1] if how else "",
        f"others kept {busy[1]}% of the CPUs busy" if busy else "",
        gate[1] if gate else "",
    ]
    return "; ".join(p for p in parts if p)


@pytest.mark.timeout(RUNS * RUN_TIMEOUT_S)
def test_the_saved_gate_fails_no_identical_build_and_catches_a_planted_slowdown(tmp_path: Path) -> None:
    neighbours = drifting_neighbours(os.sched_getaffinity(0)) if DRIFTING else []
    try:
        noise = ", a drifting neighbour on each CPU" if DRIFTING else ""
        print(f"\n[gate error rates] gate {GATE}, {' '.join(CASE[1:])}{noise}")
        three = _three_baseline_runs(tmp_path / "three")
        one = _one_baseline_run(tmp_path / "one")
    finally:
        for proc in neighbours:
            proc.kill()
            proc.wait()
    print(f"[gate error rates] three baseline runs: {three.verdicts}")
    print(f"[gate error rates] {_separability(three.rates['same'], three.rates['slow'])}")
    print(f"[gate error rates] one baseline run, host slowed by up to {HOST_SLOW:g}x: {one}")
    assert "regressed" not in three.verdicts["same"], "an identical build regressed against 3 baseline runs"
    assert "regressed" not in one["same"], "an identical build on a slowed host regressed"
    caught = three.verdicts["slow"].count("regressed")
    assert caught >= 0.9 * PAIRS, "fewer than 9 in 10 planted slow-downs caught"


def _separability(same: list[float], slow: list[float]) -> str:
    """What one candidate run can tell on this host, whatever the rule: the bound on any saved gate.

    From the identical candidates' run-to-run spread: a rule that knew the baseline's mean
    exactly and failed one identical build in 20 would catch the planted slow-down this often.
    """
    if len(same) < 3 or not slow:
        return "too few runs for the spread of one run"
    cv = statistics.stdev(same) / statistics.mean(same)
    shift = 1 - statistics.mean(slow) / statistics.mean(same)
    catch = NormalDist().cdf(shift / cv - NormalDist().inv_cdf(0.95))
    return (
        f"identical candidates' throughput spreads by CV {cv:.1%} run to run ({len(same)} runs); the "
        f"planted runs are {shift:.1%} slower on average: with one candidate run, a rule that knew the "
        f"baseline exactly and failed 1 identical build in 20 would catch {catch:.0%} of them"
    )


def _three_baseline_runs(tmp: Path) -> Row:
    rates = []
    for i in range(BASELINE_RUNS):
        code, out, seconds = _run(tmp, f"--benchmark-save=base{i}")
        assert code == 0, out[-3000:]
        rates.append(_rate(out))
        print(f"  baseline run #{i} {seconds:.0f} s: {_figures(out)}")
    spread = statistics.stdev(rates) / statistics.mean(rates)
    print(
        f"  the baseline's {BASELINE_RUNS} runs: {min(rates):.0f} to {max(rates):.0f} proofs/h, "
        f"CV {spread:.1%}"
    )
    verdicts: dict[str, list[str]] = {"slow": [], "same": []}
    candidates: dict[str, list[float]] = {"slow": [], "same": []}
    for i in range(1, PAIRS + 1):
        for side, slow in (("slow", SLOW), ("same", 1.0)):
            code, out, seconds = _run(tmp, "--benchmark-compare=0001", GATE, slow=slow)
            verdicts[side].append(_verdict(code, out))
            candidates[side].append(_rate(out))
            print(
                f"  {side} (slow_factor {slow:g}) #{i}: {verdicts[side][-1]}, {seconds:.0f} s: "
                f"{_figures(out)}"
            )
    return Row(verdicts, candidates)


def _one_baseline_run(tmp: Path) -> dict[str, list[str]]:
    code, out, seconds = _run(tmp, "--benchmark-save=base")
    assert code == 0, out[-3000:]
    print(f"  one baseline run {seconds:.0f} s: {_figures(out)}")
    draw = random.Random(46)
    same = []
    for i in range(1, PAIRS + 1):
        slow = round(draw.uniform(1.0, HOST_SLOW), 3)
        code, out, seconds = _run(tmp, "--benchmark-compare=0001", GATE, slow=slow)
        same.append(_verdict(code, out))
        print(f"  same build, host slowed {slow:g}x #{i}: {same[-1]}, {seconds:.0f} s: {_figures(out)}")
    return {"same": same}

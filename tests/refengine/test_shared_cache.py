"""Daemons that share one param cache (a fleet on one host, xdist workers) set up and write PCEs safely."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from pytest_cuzk.refengine.prover import RefProver

pytestmark = pytest.mark.e2e  # two processes set up keys at once


def _setup(cache: str, start, results) -> None:
    start.wait()
    prover = RefProver(Path(cache))
    try:
        prover.ensure_params("winning-32g")
        results.put(("ok", prover.params_path("winning-32g").stat().st_mtime_ns))
    except Exception as exc:  # reported to the parent, which fails the test
        results.put(("error", repr(exc)))
    finally:
        prover.close()


def test_two_processes_setting_up_one_circuit_at_once_both_succeed_and_set_up_once(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_setup, args=(str(tmp_path), start, results)) for _ in range(2)]
    for proc in procs:
        proc.start()
    start.set()
    outcomes = [results.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(30)
    assert [o[0] for o in outcomes] == ["ok", "ok"], outcomes
    assert outcomes[0][1] == outcomes[1][1], "the second process reused the first one's setup"
    assert not list(tmp_path.glob("*.tmp")), "no half-written key left behind"

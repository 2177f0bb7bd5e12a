"""The case matrix as the settings make it: ids, how many proofs a case keeps in flight."""

from __future__ import annotations

from pytest_cuzk.config.settings import resolve_settings
from pytest_cuzk.run.cases import Case, case_params
from pytest_cuzk.vocab.kinds import KINDS


def test_default_matrix_is_every_kind_at_batch_1_alone_and_two_in_flight(pytester):
    """One daemon config (cuzk's default, no batching): no restart; j2 gives the pipelined rate."""
    settings = resolve_settings(pytester.parseconfig())
    ids = [p.id for p in case_params(["local"], settings, "cuzk_case")]
    assert ids == [f"{k}-batch1-j{j}" for k in KINDS for j in (1, 2)]


def test_case_ids_do_not_depend_on_how_the_daemon_is_reached(pytester):
    """A baseline saved against a spawned daemon gates an attached one: same ids (machine info says how)."""
    settings = resolve_settings(pytester.parseconfig("--cuzk-batch-sizes=1", "--cuzk-concurrency=1"))
    ids = [p.id for p in case_params(["local"], settings, "cuzk_case")]
    assert ids == [f"{k}-batch1-j1" for k in KINDS]
    per_kind = [p.id for p in case_params(["a", "b"], settings, "cuzk_kind")]
    assert per_kind == [f"{label}-{k}" for label in "ab" for k in KINDS]
    under = [p.id for p in case_params(["local"], settings, "cuzk_priority_case")]
    assert under[0] == "wpost-under-porep"


def test_case_in_flight_is_batch_times_concurrency():
    assert Case("local", KINDS["porep"], 2, 3).in_flight == 6

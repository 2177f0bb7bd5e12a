"""Prove every kind at every batch size and concurrency; check, verify, time and measure each proof.

Ids read ``porep-batch2-j1``: ``-k porep`` or ``-k batch2`` select as expected.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_cuzk.run.cases import Case
from pytest_cuzk.run.waves import CaseResult


def test_prove(cuzk_case: Case, cuzk_run: Callable[[Case], CaseResult]) -> None:
    result = cuzk_run(cuzk_case)
    if result.known_issue:  # a bug of the engine, failing with exactly its known error
        pytest.xfail(f"{result.known_issue} ({result.why()})")
    assert result.ok and not result.failed, result.why()
    assert all(p.proof_len == cuzk_case.kind.proof_len for p in result.ok)

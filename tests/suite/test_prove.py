"""Prove every kind at every batch size and concurrency; check, verify, time and measure each proof.

Ids read ``porep-batch2-j1``: ``-k porep`` or ``-k batch2`` select as expected.
"""

from __future__ import annotations


def test_prove(cuzk_case, cuzk_run):
    result = cuzk_run(cuzk_case)
    assert result.ok and not result.failed, result.why()
    assert all(p.proof_len == cuzk_case.kind.proof_len for p in result.ok)

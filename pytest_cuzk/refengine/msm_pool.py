"""The CPU prover's MSMs, sliced over a thread pool so that every worker thread has native work.

py-arkworks-bls12381's MSMs release the GIL but run on one thread each: a proof's five MSMs of
very different sizes would leave most threads idle, so each is cut into slices of near-equal cost.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from py_arkworks_bls12381 import G2Point, Scalar

__all__ = ["Msm", "start_msms"]

Msm = tuple[Any, list[Any], list[Scalar]]  # (G1Point or G2Point class, bases, scalars)

_MIN_CHUNK = 128
"""Fewest points in one MSM piece: smaller pieces lose more to Pippenger's per-call overhead than
they gain in balance."""
_G2_COST = 3.3
"""A G2 point costs about this many G1 points in an MSM (measured with py-arkworks-bls12381)."""
_PIECES_PER_THREAD = 2


def _pieces(jobs: list[Msm], threads: int) -> list[tuple[float, int, int, int]]:
    """(cost, job index, start, end) slices of every MSM, costliest first.

    Each MSM is cut into near-equal slices of about ``total cost / (threads * 2)``, so that even a
    single partition's five MSMs keep every thread busy, and G2 work (about 3.3 G1 points per
    point) is spread as evenly as G1 work. Handing out the costliest slices first keeps the tail short.
    """
    costs = [len(pts) * (_G2_COST if cls is G2Point else 1.0) for cls, pts, _ in jobs]
    target = sum(costs) / (threads * _PIECES_PER_THREAD) if threads > 1 else float("inf")
    out = []
    for i, ((_, pts, _), cost) in enumerate(zip(jobs, costs, strict=True)):
        if not pts:
            continue  # an empty MSM is the identity, which ``start_msms`` starts from
        n = max(1, min(round(cost / target), len(pts) // _MIN_CHUNK))
        for k in range(n):
            lo, hi = len(pts) * k // n, len(pts) * (k + 1) // n
            out.append((cost * (hi - lo) / len(pts), i, lo, hi))
    return sorted(out, reverse=True)


def start_msms(jobs: list[Msm], pool: Executor | None, threads: int) -> Callable[[], list]:
    """Start all MSMs, sliced so that every worker thread has native work; call the result for the sums."""
    pieces = _pieces(jobs, threads)

    def msm(piece: tuple[float, int, int, int]) -> object:
        _, i, lo, hi = piece
        cls, pts, sc = jobs[i]
        return cls.multiexp_unchecked(pts[lo:hi], sc[lo:hi])

    futures = [pool.submit(msm, p) for p in pieces] if pool is not None and threads > 1 else None

    def sums() -> list:
        parts = [f.result() for f in futures] if futures is not None else [msm(p) for p in pieces]
        out: list = [cls.identity() for cls, _, _ in jobs]
        for (_, i, _, _), part in zip(pieces, parts, strict=True):
            out[i] = out[i] + part
        return out

    return sums

"""What an offer would prove, from what the database measured: on that very machine, or on hosts like it.

A measured machine is found by its provider machine id (``--cuzk-host-id``) and GPU count; hosts
like an offer have as many GPUs of the same model. Of their configurations (batch size,
concurrency) only those whose measured RSS peak fits the offer's RAM count, and of those the one
with the best median throughput is the prediction, with the spread over the machines (or, for
the machine itself, over its runs) that measured it.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from pytest_cuzk.measure.figures import METRICS, regression
from pytest_cuzk.results.rows import ResultRow

from ..wire.units import format_bytes
from .offerfile import Offer
from .queries import group, joined, machine, values

__all__ = ["Estimate", "estimate", "gpu_key", "memory_verdict"]

Basis = Literal["this machine", "hosts like it", "unknown"]
_NOISE = re.compile(r"\b(nvidia|geforce|tesla|generation|\d+\s*gb)\b")


def gpu_key(name: str) -> tuple[str, ...]:
    """A GPU model as NVML and vast.ai both spell it: ``NVIDIA GeForce RTX 4090`` is ``RTX 4090``.

    Vendor words and memory sizes are left out, letters and digits split (``RTX 6000Ada`` is
    ``RTX 6000 Ada Generation``); variants stay apart (``RTX 4090 D``, ``A100 PCIE``, ``L40S``).
    """
    return tuple(re.findall(r"[a-z]+|\d+", _NOISE.sub(" ", name.lower())))


@dataclass(frozen=True)
class Estimate:
    """One offer for one kind: the proofs/hour to expect, on what basis, and whether it fits the RAM."""

    offer: Offer
    kind: str
    basis: Basis
    per_hour: float | None = None
    low: float | None = None
    high: float | None = None
    count: int = 0  # machines (hosts like it) or runs (this machine) behind the figure
    sources: str = "-"  # their labels
    batch: int | None = None
    j: int | None = None
    rss_peak: int | None = None  # the configuration's, max over its runs
    warmup_peak: int | None = None  # SRS load, warm-up proof and PCE extraction, full config
    lowmem_peak: int | None = None  # the same with a low-memory warm-up
    fits: str = "?"
    lowmem: str = "?"  # whether a low-memory warm-up is needed
    why: str = ""
    vs_like: float | None = None  # this machine against hosts like it, percent (above 0: faster)
    like_count: int = 0

    @property
    def dollars_per_proof(self) -> float | None:
        if self.offer.dph is None or not self.per_hour:
            return None
        return self.offer.dph / self.per_hour


def memory_verdict(
    budget: float | None, steady: int | None, full: int | None, low: int | None
) -> tuple[str, str]:
    """(fits, low-memory warm-up needed) from the measured peaks; ``?`` where nothing measured tells.

    ``steady`` is the proofs' peak, ``full`` the warm-up's with the full config (the first PCE
    extraction), ``low`` the warm-up's with the low-memory one.
    """
    if budget is None:
        return "?", "?"
    steady_fits = "?" if steady is None else "yes"
    if steady is not None and steady > budget:
        return "no", "-"
    if full is not None and full <= budget:
        return steady_fits, "no"
    if low is not None:
        return ("no", "-") if low > budget else (steady_fits, "yes")
    if full is not None:  # a full warm-up does not fit, and no low-memory one was measured
        return "?", "yes"
    return steady_fits, "?"


def _like(offer: Offer, row: ResultRow) -> bool:
    host = row.run.host
    return (
        offer.gpu_name is not None
        and host.gpu_count == offer.num_gpus
        and bool(host.gpu_models)
        and all(gpu_key(m) == gpu_key(offer.gpu_name) for m in host.gpu_models)
    )


def _worst(peaks: Iterable[int | None]) -> int | None:
    """The worst measured peak (the run that runs out of memory); None when none was measured."""
    found = [float(p) for p in peaks if p is not None]
    return int(METRICS["rss_peak"].combine(found)) if found else None


def _figures(rows: list[ResultRow], basis: Basis) -> list[float]:
    """The throughput of each run of this machine, or of each machine like it, its runs combined."""
    unit = (lambda r: r.run.run_id) if basis == "this machine" else machine
    throughput = METRICS["throughput"]
    return [throughput.combine(values(rs, "throughput")) for rs in group(rows, unit).values()]


def _from(offer: Offer, kind: str, basis: Basis, rows: list[ResultRow], margin: float) -> Estimate:
    """The fastest configuration of ``rows`` whose RSS peak fits the offer's RAM, as an estimate."""
    budget = None if offer.ram_bytes is None else offer.ram_bytes * (1 - margin)
    configs = group(rows, lambda r: (r.test.batch_size, r.test.concurrency))
    peaks = {c: _worst(r.test.rss_peak_bytes for r in rs) for c, rs in configs.items()}
    fitting = [c for c, p in peaks.items() if budget is None or p is None or p <= budget]
    if not fitting:
        least = min(p for p in peaks.values() if p is not None)
        need = format_bytes(least / (1 - margin))
        why = f"needs {need} of RAM"
        sources = joined(r.run.label for r in rows)
        count = len(_figures(rows, basis))
        return Estimate(
            offer, kind, basis, count=count, sources=sources, rss_peak=least, fits="no", lowmem="-", why=why
        )
    pick = max(fitting, key=lambda c: (statistics.median(_figures(configs[c], basis)), -(peaks[c] or 0)))
    used = configs[pick]
    figures = _figures(used, basis)
    full = _worst(r.test.warmup_rss_peak_bytes for r in used if r.test.lowmem_warmup is False)
    low = _worst(r.test.warmup_rss_peak_bytes for r in used if r.test.lowmem_warmup)
    fits, lowmem = memory_verdict(budget, peaks[pick], full, low)
    return Estimate(
        offer, kind, basis, statistics.median(figures), min(figures), max(figures), len(figures),
        joined(r.run.label for r in used), pick[0], pick[1], peaks[pick], full, low, fits, lowmem,
    )  # fmt: skip


def estimate(offer: Offer, kind: str, rows: list[ResultRow], margin: float) -> Estimate:
    """The offer's estimate for ``kind`` from that kind's rows; RAM peaks must leave ``margin`` free.

    Measured on this very machine, its figure is also set against the hosts like it.
    """
    rows = [r for r in rows if r.test.proofs_per_hour]
    if offer.machine_id is None:
        mine = []
    else:
        mine = [
            r for r in rows if r.run.host_id == offer.machine_id and r.run.host.gpu_count == offer.num_gpus
        ]
    ids = {r.run.run_id for r in mine}
    alike = [r for r in rows if r.run.run_id not in ids and _like(offer, r)]
    like = _from(offer, kind, "hosts like it", alike, margin) if alike else None
    if not mine:
        named = offer.gpu_name is not None and offer.num_gpus is not None
        why = f"no {offer.gpus} measured" if named else "the offer names no GPU model or count"
        return like or Estimate(offer, kind, "unknown", why=why)
    own = _from(offer, kind, "this machine", mine, margin)
    if like is None or like.per_hour is None:
        return own
    vs = regression(METRICS["throughput"], like.per_hour, own.per_hour)
    return replace(own, vs_like=None if vs is None else -vs, like_count=like.count)

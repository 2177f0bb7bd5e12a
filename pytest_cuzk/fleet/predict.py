"""What an offer would prove, from what the database measured: on that very machine, or on hosts like it.

A measured machine is found by its provider machine id (``--cuzk-machine-id``) and its hardware:
as many GPUs of the same model and memory (``gpus``); a machine recorded with other hardware is
said so. Hosts like an offer have that hardware too. Of their configurations (batch size,
concurrency) only those whose measured RSS peak fits the offer's RAM share, and whose VRAM peak
fits its GPUs, count; of those the one with the best median throughput is the prediction, with
the spread over the machines (or, for the machine itself, over its runs) that measured it.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from pytest_cuzk.fleet.floors import FLOORS
from pytest_cuzk.fleet.gpus import gpu_key
from pytest_cuzk.fleet.offerfile import Offer
from pytest_cuzk.fleet.queries import figure, gpu_memory, gpus, group, joined, machine
from pytest_cuzk.measure.figures import METRICS, regression
from pytest_cuzk.results.rows import ResultRow
from pytest_cuzk.vocab.units import format_bytes

__all__ = ["Estimate", "estimate", "memory_verdict"]

Basis = Literal["this machine", "hosts like it", "unknown"]


@dataclass(frozen=True)
class Estimate:
    """One offer for one kind: the proofs/hour to expect, on what basis, and whether it fits the RAM."""

    offer: Offer
    kind: str
    basis: Basis
    dph: float | None = None  # dollars per hour as rented (rate and disk)
    per_hour: float | None = None
    low: float | None = None
    high: float | None = None
    count: int = 0  # machines (hosts like it) or runs (this machine) behind the figure
    sources: str = "-"  # their labels
    batch: int | None = None
    j: int | None = None
    rss_peak: int | None = None  # the configuration's, max over its runs
    vram_peak: int | None = None  # the same, the daemon's over all its GPUs
    warmup_peak: int | None = None  # SRS load, warm-up proof and PCE extraction, full config
    lowmem_peak: int | None = None  # the same with a low-memory warm-up
    fits: str = "?"
    lowmem: str = "?"  # whether a low-memory warm-up is needed
    why: str = ""
    vs_like: float | None = None  # this machine against hosts like it, percent (above 0: faster)
    like_count: int = 0
    recorded_as: str = ""  # the hardware the offer's machine id was recorded with, when it differs

    @property
    def dollars_per_proof(self) -> float | None:
        if self.dph is None or not self.per_hour:
            return None
        return self.dph / self.per_hour


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
    """Whether the row's host has the offer's GPUs: as many, each of the same model and memory."""
    host = row.run.host
    if offer.gpu_name is None or not host.gpu_models or host.gpu_count != offer.num_gpus:
        return False
    want = gpu_key(offer.gpu_name, offer.gpu_ram_bytes)
    return all(gpu_key(m, gpu_memory(row)) == want for m in host.gpu_models)


def _worst(metric: str, peaks: Iterable[int | None]) -> int | None:
    """The worst measured peak (the run that runs out of memory); None when none was measured."""
    found = [float(p) for p in peaks if p is not None]
    return int(METRICS[metric].combine(found)) if found else None


def _figures(rows: list[ResultRow], basis: Basis) -> list[float]:
    """The throughput of each run of this machine, or of each machine like it, its runs combined."""
    unit = (lambda r: r.run.run_id) if basis == "this machine" else machine
    return [figure(rs, "throughput") or 0.0 for rs in group(rows, unit).values()]


def _misfit(offer: Offer, kind: str, basis: Basis, rows: list[ResultRow], least: int, why: str) -> Estimate:
    count, sources = len(_figures(rows, basis)), joined(r.run.label for r in rows)
    return Estimate(offer, kind, basis, count=count, sources=sources, rss_peak=least, fits="no", lowmem="-",
                    why=why)  # fmt: skip


def _from(offer: Offer, kind: str, basis: Basis, rows: list[ResultRow], margin: float) -> Estimate:
    """The fastest configuration of ``rows`` whose peaks fit the offer's RAM and VRAM, as an estimate."""
    budget = None if offer.ram_bytes is None else offer.ram_bytes * (1 - margin)
    vram = None if offer.gpu_ram_bytes is None or not offer.num_gpus else offer.gpu_ram_bytes * offer.num_gpus
    configs = group(rows, lambda r: (r.test.batch_size, r.test.concurrency))
    peaks = {c: _worst("rss_peak", (r.test.rss_peak_bytes for r in rs)) for c, rs in configs.items()}
    vpeaks = {c: _worst("vram_peak", (r.test.vram_peak_bytes for r in rs)) for c, rs in configs.items()}
    in_ram = [c for c, p in peaks.items() if budget is None or p is None or p <= budget]
    fitting = [c for c in in_ram if vram is None or (vpeaks[c] or 0) <= vram]
    if not in_ram:
        least = min(p for p in peaks.values() if p is not None)
        return _misfit(offer, kind, basis, rows, least, f"needs {format_bytes(least / (1 - margin))} of RAM")
    if not fitting:
        least = min(vpeaks[c] or 0 for c in in_ram)
        why = f"needs {format_bytes(least)} of VRAM, has {format_bytes(vram)}"
        return replace(_misfit(offer, kind, basis, rows, least, why), rss_peak=None, vram_peak=least)
    pick = max(fitting, key=lambda c: (statistics.median(_figures(configs[c], basis)), -(peaks[c] or 0)))
    used = configs[pick]
    figures = _figures(used, basis)
    full = _worst("rss_peak", (r.test.warmup_rss_peak_bytes for r in used if r.test.lowmem_warmup is False))
    low = _worst("rss_peak", (r.test.warmup_rss_peak_bytes for r in used if r.test.lowmem_warmup))
    fits, lowmem = memory_verdict(budget, peaks[pick], full, low)
    return Estimate(
        offer, kind, basis, None, statistics.median(figures), min(figures), max(figures), len(figures),
        joined(r.run.label for r in used), pick[0], pick[1], peaks[pick], vpeaks[pick], full, low, fits,
        lowmem,
    )  # fmt: skip


def _hardware(rows: list[ResultRow]) -> str:
    return f"{joined(map(gpus, rows))} ({joined(r.run.label for r in rows)})"


def against_floors(e: Estimate) -> Estimate:
    """Where no measured peak decides, cuzk's documented floors do (``floors``).

    An offer below the RAM or GPU-memory floor does not fit, whatever else is known of it; one
    that fits by its measured RAM peak but whose VRAM neither a peak nor a floor vouches for
    fits only perhaps (``?``).
    """
    floor, o = FLOORS.get(e.kind), e.offer
    if floor is None or e.fits == "no":
        return e
    short = ""
    if e.rss_peak is None and o.ram_bytes is not None and o.ram_bytes < floor.ram_bytes:
        short = floor.ram_short(e.kind)
    elif e.vram_peak is None and floor.vram_bytes is not None and o.gpu_ram_bytes is not None:
        if floor.vram_misfit(o.gpu_ram_bytes):
            short = floor.vram_short(e.kind, o.gpu_ram_bytes)
    elif e.vram_peak is None and e.fits == "yes":
        return replace(e, fits="?")
    if not short:
        return e
    return replace(e, fits="no", lowmem="-", why=f"{e.why}; {short}" if e.why else short)


def estimate(offer: Offer, kind: str, rows: list[ResultRow], margin: float, dph: float | None) -> Estimate:
    """The offer's estimate for ``kind`` from that kind's rows, at ``dph`` dollars per hour.

    RAM peaks must leave ``margin`` free. Measured on this very machine, its figure is also set
    against the hosts like it; recorded under its machine id with other GPUs, that is said.
    Where no measured peak decides, cuzk's documented floors do.
    """
    return against_floors(_estimate(offer, kind, rows, margin, dph))


def _estimate(offer: Offer, kind: str, rows: list[ResultRow], margin: float, dph: float | None) -> Estimate:
    rows = [r for r in rows if r.test.proofs_per_hour]
    recorded = [r for r in rows if offer.machine_id is not None and r.run.host_id == offer.machine_id]
    mine = [r for r in recorded if _like(offer, r)]
    other = "" if mine or not recorded else _hardware(recorded)
    ids = {r.run.run_id for r in mine}
    alike = [r for r in rows if r.run.run_id not in ids and _like(offer, r)]
    like = _from(offer, kind, "hosts like it", alike, margin) if alike else None
    if not mine:
        named = offer.gpu_name is not None and offer.num_gpus is not None
        why = f"no {offer.gpus} measured" if named else "the offer names no GPU model or count"
        return replace(like or Estimate(offer, kind, "unknown", why=why), dph=dph, recorded_as=other)
    own = replace(_from(offer, kind, "this machine", mine, margin), dph=dph)
    if like is None or like.per_hour is None:
        return own
    vs = regression(METRICS["throughput"], like.per_hour, own.per_hour)
    return replace(own, vs_like=None if vs is None else -vs, like_count=like.count)

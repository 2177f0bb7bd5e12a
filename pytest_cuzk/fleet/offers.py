"""``cuzk-perf offers``: marketplace offers ranked by measured dollars per proof, not by spec sheets.

A 2x A40 host with 2 TB of RAM can prove slower than one RTX 4090 with 500 GB, and hosts with
too little RAM die in their first PCE extraction: so each offer gets what that machine, or hosts
like it, measured, and whether the measured peaks fit its RAM and VRAM (see ``predict``), priced
as rented: its share of the machine, with the disk cuzk's parameters need (see ``offerfile``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from pytest_cuzk.fleet.errors import NOTHING, PerfError
from pytest_cuzk.fleet.floors import FLOORS, PCE_FILE_BYTES
from pytest_cuzk.fleet.gpus import matches
from pytest_cuzk.fleet.offerfile import Offer, missing_fields, read_offers
from pytest_cuzk.fleet.predict import Estimate, estimate
from pytest_cuzk.fleet.queries import NO_DATA, group
from pytest_cuzk.results.database import ResultsDB
from pytest_cuzk.results.rows import ResultRow
from pytest_cuzk.sinks.tables import table
from pytest_cuzk.vocab.units import GIB, format_bytes, plural

__all__ = ["DISK", "as_json", "basis_text", "cmd_offers", "rank", "select"]

# cuzk's 32 GiB parameter files, as `curio fetch-params 32GiB` fetches them, and the PCE file its
# PoRep warm-up writes.
DISK = int(sum(f.srs_gib for f in FLOORS.values()) * GIB) + PCE_FILE_BYTES


def _cheap(dph: float | None, most: float) -> bool:
    return dph is not None and dph <= most


def select(offers: list[Offer], args: argparse.Namespace) -> list[Offer]:
    """The offers that pass ``--max-dph``, ``--min-ram`` and ``--gpu`` (an offer lacking the field fails)."""
    return [
        o
        for o in offers
        if (args.max_dph is None or _cheap(o.hourly(args.disk, args.reserved), args.max_dph))
        and (args.min_ram is None or (o.ram_bytes is not None and o.ram_bytes >= args.min_ram))
        and (not args.gpu or (o.gpu_name is not None and matches(args.gpu, o.gpu_name, o.gpu_ram_bytes)))
    ]


FIT_ORDER = {"yes": 0, "?": 1, "no": 2}


def rank(
    offers: list[Offer], rows: list[ResultRow], margin: float, disk: int, reserved: bool
) -> list[Estimate]:
    """Per kind, every offer: those that fit by dollars per proof, then the uncertain, unknown, misfits."""
    by_kind = group(rows, lambda r: r.test.kind)
    out = [
        estimate(o, kind, krows, margin, o.hourly(disk, reserved))
        for kind, krows in sorted(by_kind.items())
        for o in offers
    ]
    return sorted(
        out,
        key=lambda e: (
            e.kind,
            FIT_ORDER[e.fits],
            e.dollars_per_proof is None,
            e.dollars_per_proof or 0.0,
            e.dph if e.dph is not None else float("inf"),
        ),
    )


def _names(sources: str, most: int = 3) -> str:
    names = sources.split(",")
    return ",".join(names[:most]) + (f",+{len(names) - most}" if len(names) > most else "")


def basis_text(e: Estimate) -> str:
    """Where the figure comes from, in a few words; and what the offer's machine was recorded as."""
    if e.recorded_as:
        return f"{_basis(e)}; machine {e.offer.machine_id} was recorded with {e.recorded_as}"
    return _basis(e)


def _basis(e: Estimate) -> str:
    text = _measured(e)
    return f"{text}; {e.why}" if e.fits == "no" and e.why and e.why not in text else text


def _measured(e: Estimate) -> str:
    if e.basis == "unknown":
        return f"unknown: {e.why}"
    if e.basis == "this machine":
        runs = plural(e.count, "run")
        vs = f", {e.vs_like:+.0f}% vs {e.like_count} like it" if e.vs_like is not None else ""
        return f"this machine ({_names(e.sources)}, {runs}{vs})"
    like = f"{e.count} like it ({_names(e.sources)})"
    if e.per_hour is None:
        return f"{like}: {e.why}"
    return like if e.count == 1 else f"{like}: {e.low:.1f}..{e.high:.1f}/h"


def _warmup(e: Estimate) -> str:
    """The full warm-up's peak, and the low-memory one's where the verdict rests on it."""
    full = None if e.warmup_peak is None else format_bytes(e.warmup_peak)
    low = None if e.lowmem_peak is None else f"{format_bytes(e.lowmem_peak)} low-mem"
    if e.lowmem == "yes" and low:
        return f"{full} / {low}" if full else low
    return full or low or "n/a"


def _row(e: Estimate) -> tuple[object, ...]:
    o, dpp = e.offer, e.dollars_per_proof
    return (
        e.kind, o.id, o.machine_id or "-", o.gpus, format_bytes(o.ram_bytes),
        "n/a" if e.dph is None else f"{e.dph:.3f}", "n/a" if e.per_hour is None else f"{e.per_hour:.1f}",
        basis_text(e), "-" if e.batch is None else f"batch{e.batch}-j{e.j}",
        "n/a" if dpp is None else f"{dpp:.3g}", format_bytes(e.rss_peak), _warmup(e),
        format_bytes(e.vram_peak), e.fits, e.lowmem,
    )  # fmt: skip


HEADS = ("kind", "offer", "machine", "gpus", ">ram", ">$/h", ">proofs/h", "basis", "config", ">$/proof",
         ">RSS peak", ">warm-up peak", ">VRAM peak", "fits", "low-mem warm-up")  # fmt: skip


def as_json(e: Estimate) -> dict[str, Any]:
    """One ranked row for scripts: the offer's fields as read, then the estimate (bytes, dollars)."""
    return {
        "kind": e.kind,
        "offer": {**dataclasses.asdict(e.offer), "share": e.offer.share, "ram_bytes": e.offer.ram_bytes},
        "dollars_per_hour": e.dph,
        "basis": e.basis,
        "proofs_per_hour": e.per_hour,
        "spread": None if e.low is None else [e.low, e.high],
        "count": e.count,
        "sources": [] if e.sources == "-" else e.sources.split(","),
        "config": None if e.batch is None else {"batch_size": e.batch, "concurrency": e.j},
        "dollars_per_proof": e.dollars_per_proof,
        "rss_peak_bytes": e.rss_peak,
        "vram_peak_bytes": e.vram_peak,
        "warmup_rss_peak_bytes": e.warmup_peak,
        "lowmem_warmup_rss_peak_bytes": e.lowmem_peak,
        "fits": e.fits,
        "lowmem_warmup_needed": e.lowmem,
        "vs_like_pct": e.vs_like,
        "why": e.why,
        "machine_recorded_as": e.recorded_as or None,
    }


def _header(args: argparse.Namespace, chosen: int, offered: int, name: str) -> str:
    rate = "reserved (discounted_dph_total)" if args.reserved else "on-demand"
    return (
        f"{chosen} of {plural(offered, 'offer')} from {name}; {rate} prices with {format_bytes(args.disk)} "
        f"of disk; measured peaks must leave {args.margin * 100:g}% of an offer's RAM free"
    )


def cmd_offers(db: ResultsDB, args: argparse.Namespace) -> int:
    """Rank marketplace offers (vastai search offers --raw) by measured dollars per proof."""
    offers = read_offers(args.file)
    name = "standard input" if args.file == "-" else args.file
    for line in missing_fields(offers, args.reserved):
        print(f"cuzk-perf offers: {name}: {line}", file=sys.stderr)
    chosen = select(offers, args)
    if args.gpu and not any(o.gpu_name and matches(args.gpu, o.gpu_name, o.gpu_ram_bytes) for o in offers):
        models = ", ".join(sorted({o.gpu_name for o in offers if o.gpu_name})) or "none named"
        raise PerfError(f"--gpu {args.gpu} names no offer's GPU in {name} (their GPUs: {models})", NOTHING)
    rows = db.rows(kind=args.kind)
    ranked = rank(chosen, rows, args.margin, args.disk, args.reserved)
    if args.json:
        json.dump([as_json(e) for e in ranked], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    if not rows:
        print(NO_DATA)
        return 0
    print(_header(args, len(chosen), len(offers), name))
    print(table(HEADS, [_row(e) for e in ranked]))
    return 0

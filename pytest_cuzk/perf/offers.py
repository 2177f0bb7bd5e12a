"""``cuzk-perf offers``: marketplace offers ranked by measured dollars per proof, not by spec sheets.

A 2x A40 host with 2 TB of RAM can prove slower than one RTX 4090 with 500 GB, and hosts with
too little RAM die in their first PCE extraction: so each offer gets what that machine, or hosts
like it, measured, and whether the measured peaks fit its RAM (see ``predict``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from pytest_cuzk.results.database import ResultsDB
from pytest_cuzk.results.rows import ResultRow
from pytest_cuzk.sinks.tables import table

from ..wire.units import format_bytes
from .offerfile import Offer, OfferFileError, missing_fields, read_offers
from .predict import Estimate, estimate
from .queries import NO_DATA, group

__all__ = ["as_json", "basis_text", "cmd_offers", "rank", "select"]


def select(offers: list[Offer], args: argparse.Namespace) -> list[Offer]:
    """The offers that pass ``--max-dph``, ``--min-ram`` and ``--gpu`` (an offer lacking the field fails)."""
    gpu = (args.gpu or "").lower()
    return [
        o
        for o in offers
        if (args.max_dph is None or (o.dph is not None and o.dph <= args.max_dph))
        and (args.min_ram is None or (o.ram_bytes is not None and o.ram_bytes >= args.min_ram))
        and (not gpu or gpu in (o.gpu_name or "").lower())
    ]


FIT_ORDER = {"yes": 0, "?": 1, "no": 2}


def rank(offers: list[Offer], rows: list[ResultRow], margin: float) -> list[Estimate]:
    """Per kind, every offer: those that fit by dollars per proof, then the uncertain, unknown, misfits."""
    by_kind = group(rows, lambda r: r.test.kind)
    out = [estimate(o, kind, krows, margin) for kind, krows in sorted(by_kind.items()) for o in offers]
    return sorted(
        out,
        key=lambda e: (
            e.kind,
            FIT_ORDER[e.fits],
            e.dollars_per_proof is None,
            e.dollars_per_proof or 0.0,
            e.offer.dph if e.offer.dph is not None else float("inf"),
        ),
    )


def _names(sources: str, most: int = 3) -> str:
    names = sources.split(",")
    return ",".join(names[:most]) + (f",+{len(names) - most}" if len(names) > most else "")


def basis_text(e: Estimate) -> str:
    """Where the figure comes from, in a few words."""
    if e.basis == "unknown":
        return f"unknown: {e.why}"
    if e.basis == "this machine":
        runs = f"{e.count} run{'s' if e.count != 1 else ''}"
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
        "n/a" if o.dph is None else f"{o.dph:.3f}", "n/a" if e.per_hour is None else f"{e.per_hour:.1f}",
        basis_text(e), "-" if e.batch is None else f"batch{e.batch}-j{e.j}",
        "n/a" if dpp is None else f"{dpp:.3g}", format_bytes(e.rss_peak), _warmup(e), e.fits, e.lowmem,
    )  # fmt: skip


HEADS = ("kind", "offer", "machine", "gpus", ">ram", ">$/h", ">proofs/h", "basis", "config", ">$/proof",
         ">RSS peak", ">warm-up peak", "fits", "low-mem warm-up")  # fmt: skip


def as_json(e: Estimate) -> dict[str, Any]:
    """One ranked row for scripts: the offer's fields as read, then the estimate (bytes, dollars)."""
    return {
        "kind": e.kind,
        "offer": dataclasses.asdict(e.offer),
        "basis": e.basis,
        "proofs_per_hour": e.per_hour,
        "spread": None if e.low is None else [e.low, e.high],
        "count": e.count,
        "sources": [] if e.sources == "-" else e.sources.split(","),
        "config": None if e.batch is None else {"batch_size": e.batch, "concurrency": e.j},
        "dollars_per_proof": e.dollars_per_proof,
        "rss_peak_bytes": e.rss_peak,
        "warmup_rss_peak_bytes": e.warmup_peak,
        "lowmem_warmup_rss_peak_bytes": e.lowmem_peak,
        "fits": e.fits,
        "lowmem_warmup_needed": e.lowmem,
        "vs_like_pct": e.vs_like,
        "why": e.why,
    }


def cmd_offers(db: ResultsDB, args: argparse.Namespace) -> int:
    """Rank marketplace offers (vastai search offers --raw) by measured dollars per proof."""
    try:
        offers = read_offers(args.file)
    except OfferFileError as exc:
        print(f"cuzk-perf offers: {exc}", file=sys.stderr)
        return 2
    name = "standard input" if args.file == "-" else args.file
    for line in missing_fields(offers):
        print(f"cuzk-perf offers: {name}: {line}", file=sys.stderr)
    chosen = select(offers, args)
    rows = db.rows(kind=args.kind)
    ranked = rank(chosen, rows, args.margin)
    if args.json:
        json.dump([as_json(e) for e in ranked], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    if not rows:
        print(NO_DATA)
        return 0
    print(
        f"{len(chosen)} of {len(offers)} offers from {name}; "
        f"measured peaks must leave {args.margin:.0%} of an offer's RAM free"
    )
    print(table(HEADS, [_row(e) for e in ranked]))
    return 0

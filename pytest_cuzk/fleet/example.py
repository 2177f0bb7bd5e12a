"""``cuzk-perf example``: a small made-up fleet and offers for it, to try ``cuzk-perf offers`` on.

The figures are round, not measured: a 2x A40 with 2 TiB of RAM that proves PoRep slower than
one RTX 4090 with 491 GiB, and PoRep warm-ups that need more RAM than the proofs, once with a
low-memory warm-up. The offers (``example-offers.json``) are in the shape ``vastai search offers
--raw`` prints, two of them for machines of this fleet (machine ids 31337 and 20481).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
from importlib import resources
from pathlib import Path

from pytest_cuzk.fleet.errors import PerfError
from pytest_cuzk.results.database import ResultsDB
from pytest_cuzk.results.rows import HostRecord, RunRecord, TestRecord
from pytest_cuzk.vocab.files import atomic_write
from pytest_cuzk.vocab.units import GIB, MIB, plural

__all__ = ["FLEET", "OFFERS", "cmd_example", "record_fleet"]

OFFERS = "example-offers.json"
START = dt.datetime(2025, 3, 1, tzinfo=dt.timezone.utc)


def host_record(gpu: str, count: int, vram_mib: int, ram_gib: int, name: str) -> HostRecord:
    return HostRecord.of(
        gpu_models=[gpu] * count, gpu_count=count, vram_total_bytes=count * vram_mib * MIB,
        cpu_model="AMD EPYC 7B13 64-Core Processor", cpu_cores=64, ram_bytes=ram_gib * GIB,
        driver="550.54.14", cuda="12.4", hostname=name,
    )  # fmt: skip


A40 = host_record("NVIDIA A40", 2, 46068, 2048, "c.8123")
RTX = host_record("NVIDIA GeForce RTX 4090", 1, 24564, 491, "rig-4090")

# (host, label, machine id, low-memory warm-up, [(kind, batch, proofs/hour, RSS peak GiB,
# warm-up peak GiB, VRAM peak GiB)]). The third 4090 run predates warm-up peaks (None).
Test = tuple[str, int, float, int, int | None, int]
FLEET: list[tuple[HostRecord, str, str, bool | None, list[Test]]] = [
    (A40, "a40", "20481", False, [("porep", 1, 35.9, 180, 240, 30), ("porep", 2, 30.0, 300, 260, 41),
                                  ("winning", 1, 900.0, 10, 12, 6)]),
    (RTX, "4090", "31337", False, [("porep", 1, 41.3, 180, 235, 15), ("porep", 2, 50.0, 230, 250, 21)]),
    (RTX, "4090", "31337", True, [("porep", 1, 38.0, 200, 70, 15), ("porep", 2, 51.0, 231, 72, 21)]),
    (RTX, "4090", "31337", None, [("porep", 1, 40.5, 185, None, 15), ("porep", 2, 52.0, 229, None, 22)]),
]  # fmt: skip


def record_fleet(db: ResultsDB) -> int:
    """Record ``FLEET`` in ``db``, a run a day from ``START``; returns how many tests."""
    count = 0
    for day, (host, label, machine, lowmem, tests) in enumerate(FLEET):
        when = START + dt.timedelta(days=day)
        run = RunRecord(host, "sha256:base", label=label, host_id=machine, started_at=when)
        db.start_run(run)
        for kind, b, per_hour, rss, warm, vram in tests:
            db.record_test(TestRecord(
                run_id=run.run_id, nodeid=f"test_prove[{kind}-batch{b}-j1]", kind=kind, batch_size=b,
                concurrency=1, proofs_ok=4, proofs_failed=0, p50_s=60.0, p90_s=70.0, max_s=80.0,
                proofs_per_hour=per_hour, rss_peak_bytes=rss * GIB, vram_peak_bytes=vram * GIB, label=label,
                warmup_rss_peak_bytes=None if warm is None else warm * GIB,
                lowmem_warmup=None if warm is None else lowmem,
            ))  # fmt: skip
            count += 1
        db.finish_run(run.run_id)
    return count


def cmd_example(db: ResultsDB, args: argparse.Namespace) -> int:
    """Record a small made-up fleet in an empty database and write offers for it, to try offers on."""
    if not args.db or args.db == os.environ.get("PYTEST_CUZK_RESULTS_DB"):
        raise PerfError("name a database of its own, e.g. --db example.db: the example is made up")
    if db.builds():
        raise PerfError(f"{args.db} already holds runs: give an empty database for the example")
    tests = record_fleet(db)
    offers = Path(args.offers)
    try:
        atomic_write(offers, resources.files(__package__).joinpath(OFFERS).read_text())
    except OSError as exc:
        raise PerfError(f"cannot write --offers {offers}: {exc.strerror}") from None
    machines = len({f[2] for f in FLEET})
    counts = f"{plural(len(FLEET), 'run')} ({plural(tests, 'test')}) of {plural(machines, 'machine')}"
    print(f"recorded {counts}; wrote {offers}")
    print(f"try: cuzk-perf offers {offers} --db {args.db} --kind porep")
    return 0

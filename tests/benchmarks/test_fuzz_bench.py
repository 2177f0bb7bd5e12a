"""The long fuzz: 20,000 malformed requests per behaviour against a cuzk-ref process, bounded in time.

Prints, in rounds of 5,000, the requests sent, the status counts, the crashes (there must be
none) and the daemon's RSS. The protocol behaviour keeps the last 1,000 results, so its RSS
levels off; the cuzk behaviour keeps every result by id for ever, as cuzk does, so its RSS
grows with every job. Run: ``pytest tests/benchmarks/test_fuzz_bench.py --figures -s``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.engine_support import Daemon, RefData, write_config
from helpers.fuzzing import fuzz

from pytest_cuzk.vocab.kinds import KINDS

ROUNDS, PER_ROUND, ROUND_SECONDS = 4, 5_000, 60.0


@pytest.mark.parametrize("behave", ["protocol", "cuzk"])
def test_twenty_thousand_malformed_requests_crash_nothing(
    behave: str,
    spawn: Callable[..., Daemon],
    ref_data: RefData,
    ref_params: Path,
    tmp_path: Path,
    socket_dir: Path,
) -> None:
    text = f'[srs]\nparam_cache = "{ref_params}"\n[ref]\nbehave = "{behave}"\n'
    config = write_config(tmp_path / "ref.toml", text)
    address = f"unix://{socket_dir / 'cuzk.sock'}"
    daemon = spawn("-c", str(config), "-l", address)
    daemon.wait_ready()
    valid = {k: ref_data.request(k) for k in KINDS}
    sent, crashes, rss = 0, 0, []
    try:
        for i in range(ROUNDS):
            report = fuzz(address, daemon.proc.pid, valid, count=PER_ROUND, seconds=ROUND_SECONDS, seed=i)
            print(f"fuzz [{behave}] round {i + 1}: {report.line()}")
            sent, crashes = sent + report.requests, crashes + len(report.crashes)
            rss.append(report.rss_end)
            assert not report.crashes, report.crashes[:5]
    finally:
        daemon.stop()
    growth = (rss[-1] - rss[0]) / 2**20
    print(
        f"fuzz [{behave}]: {sent} requests, {crashes} crashes, RSS after round 1 -> last: {growth:+.1f} MiB"
    )
    assert sent >= 10_000

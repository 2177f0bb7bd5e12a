"""One number per figure: the gate, the terminal summary and the HTML report print a run's recorded one.

Each test records a run in a results database (SQLite) and reads the figure back from its row,
then from the view, which must print that very figure as its metric prints it.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
from helpers.fakenvml import FakeNvml
from helpers.htmltables import rows, tables, tiles
from helpers.support import PROVE_SOURCE

from pytest_cuzk.backends.fake import FakeBehaviour
from pytest_cuzk.measure.figures import METRICS, Samples
from pytest_cuzk.results.database import ResultsDB
from pytest_cuzk.results.rows import TestRecord

CASE = "test_prove[winning-batch1-j1]"
# Ten proofs (a p90 needs ten), a window a wave (ten windows to test), memory sampled through a fake NVML.
ARGS = ("-k", "winning", "--cuzk-batch-sizes=1", "--cuzk-proofs=10", "--cuzk-max-proofs=10")
ARGS += ("--cuzk-window=0.001",)
STEADY = {"winning": FakeBehaviour(delay_s=0.05)}


def recorded(url: str) -> TestRecord:
    """The one case the database at ``url`` holds."""
    with ResultsDB(url) as db:
        (row,) = db.rows()
    return row.test


def value(test: TestRecord, name: str) -> float | None:
    return getattr(test, METRICS[name].column)


def summary_row(out: str) -> dict[str, str]:
    """The terminal summary's row of ``CASE``, by its headings (cells are two spaces or more apart)."""
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("test ") and "proofs/h" in line)
    heads = re.split(r"\s{2,}", lines[at].strip())
    row = next(line for line in lines[at:] if line.startswith(CASE))
    return dict(zip(heads, re.split(r"\s{2,}", row.strip()), strict=True))


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """A GPU on which the sampled fake daemon (this process) holds 3 GiB."""
    fake = FakeNvml(monkeypatch)
    fake.processes = [(os.getpid(), 3 << 30)]
    return fake


def test_the_terminal_summary_prints_the_recorded_figures(fake_run, tmp_path, nvml):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    result, _ = fake_run(
        {"test_prove": PROVE_SOURCE}, *ARGS, f"--cuzk-results-db={url}", behaviour=STEADY, sampled=True
    )
    result.assert_outcomes(passed=1)
    test, row = recorded(url), summary_row(result.stdout.str())
    for name in ("p50", "p90", "p99", "throughput", "rss_peak", "vram_peak"):
        m = METRICS[name]
        assert row[m.label] == m.fmt(value(test, name)), name
    assert value(test, "rss_peak") and value(test, "vram_peak"), "memory was sampled: its peaks are figures"


def test_the_html_report_prints_the_recorded_figures(fake_run, tmp_path, nvml):
    url, page = f"sqlite:///{tmp_path / 'results.db'}", tmp_path / "report.html"
    args = (*ARGS, f"--cuzk-results-db={url}", f"--cuzk-html={page}")
    result, _ = fake_run({"test_prove": PROVE_SOURCE}, *args, behaviour=STEADY, sampled=True)
    result.assert_outcomes(passed=1)
    test, html = recorded(url), page.read_text()
    (row,) = tables(html, "summary")
    tile = dict(tiles(html))
    details: dict[str, str] = {}
    for r in rows(html, "details"):  # the figures' own rows come first, then why any is n/a
        details.setdefault(r[0], r[1])
    for name, m in METRICS.items():
        assert row[m.label] == m.fmt(value(test, name)), f"{name} in the results table"
        assert details[m.attr] == m.show(value(test, name)), f"{name} in the case's every figure"
        if m.label in tile:
            assert tile[m.label] == m.show(value(test, name)), f"{name} on its tile"
    assert {"proofs/h", "p90 s", "RSS peak", "VRAM peak"} <= set(tile)
    for name in ("p50", "p90"):  # the latency chart's lines, named in its legend
        assert f">{name} {METRICS[name].show(value(test, name))}<" in html, name
    p90, slowest = value(test, "p90"), value(test, "max")
    assert p90 is not None and slowest is not None and p90 <= slowest
    assert float(row["p90 s"]) <= float(row["max s"])


def _known(extra: dict, wave_s: list[float], windows: list[int], rss: int, vram: int) -> dict:
    """A run's figures and samples set to known ones: one proof a wave, figures as the plugin makes them.

    Its windows hold unequal numbers of proofs, so the windows' mean rate (what a throughput test
    resamples) differs from the run's figure, the proofs over the timed seconds.
    """
    n = len(wave_s)
    samples = Samples(
        latency_s=tuple(wave_s), wave_s=tuple(wave_s), wave_size=(1,) * n, wave_window=tuple(windows)
    )
    return extra | {
        "throughput_proofs_per_hour": round(n / sum(wave_s) * 3600, 3),
        "latency_p50_s": round(float(np.percentile(wave_s, 50)), 4),
        "latency_p90_s": round(float(np.percentile(wave_s, 90)), 4),
        "latency_max_s": max(wave_s),
        "rss_peak_bytes": rss,
        "vram_peak_bytes": vram,
        "samples": samples.to_dict(),
    }


GATED = ("throughput", "p90", "rss_peak", "vram_peak")


def test_the_gate_prints_the_recorded_figures_of_both_runs(fake_run, tmp_path, nvml):
    storage = tmp_path / "benchmarks"
    args = (*ARGS, f"--benchmark-storage=file://{storage}")
    fake_run({"test_prove": PROVE_SOURCE}, *args, "--benchmark-save=base", behaviour=STEADY, sampled=True)
    (base,) = storage.glob("*/0001_base.json")
    saved = json.loads(base.read_text())
    bench = saved["benchmarks"][0]
    # A baseline five times as fast and a tenth of the memory: every gated figure regressed.
    waves = [0.01] * 9 + [0.05]
    bench["extra_info"] = _known(bench["extra_info"], waves, [0, 0, 0, 1, 1, 1, 2, 2, 2, 3], 1 << 20, 1 << 26)
    base.write_text(json.dumps(saved))
    before = bench["extra_info"]

    url = f"sqlite:///{tmp_path / 'results.db'}"
    gate = ("--benchmark-compare=0001", f"--cuzk-compare-fail={','.join(f'{n}:10%' for n in GATED)}")
    result, _ = fake_run({}, *args, *gate, f"--cuzk-results-db={url}", behaviour=STEADY, sampled=True)
    result.assert_outcomes(failed=1)
    out, now = result.stdout.str(), recorded(url)
    for name in GATED:
        m = METRICS[name]
        found = re.search(rf"\b{name} (?:regressed|[\d.]+% worse) .*?; baseline ([^;]+?), now ([^;]+?);", out)
        assert found, f"the gate names {name}:\n{out}"
        assert found.groups() == (m.show(before[m.attr]), m.show(value(now, name))), name
    row = summary_row(out)
    for name in GATED:
        assert row[METRICS[name].label] == METRICS[name].fmt(value(now, name)), f"{name}: the summary agrees"
    pct = re.search(r"throughput (?:regressed )?([\d.]+)%", out)
    tput = METRICS["throughput"]
    worse = (before[tput.attr] - value(now, "throughput")) / before[tput.attr] * 100
    assert pct and pct.group(1) == f"{worse:.1f}", "the change is that of the two figures printed"

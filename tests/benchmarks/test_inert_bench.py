"""What the installed plugin costs a pytest run that does not use it: wall time with and without it.

Target: at most 5% over ``-p no:cuzk`` for an unrelated one-test project (medians of 15 runs each,
interleaved so that load on the machine hits both alike).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

RUNS = 15
TARGET = 1.05


def _wall(project: Path, *args: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=project,
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    return time.perf_counter() - t0


def test_the_plugin_costs_an_unrelated_run_almost_nothing(tmp_path: Path) -> None:
    (tmp_path / "test_unrelated.py").write_text("def test_unrelated():\n    assert True\n")
    with_plugin, without = [], []
    for _ in range(RUNS):
        with_plugin.append(_wall(tmp_path))
        without.append(_wall(tmp_path, "-p", "no:cuzk"))
    ratio = statistics.median(with_plugin) / statistics.median(without)
    print(
        f"\nunrelated one-test run: {statistics.median(with_plugin) * 1000:.0f} ms with the plugin, "
        f"{statistics.median(without) * 1000:.0f} ms with -p no:cuzk: ratio {ratio:.3f} (target <= {TARGET})"
    )
    assert ratio <= TARGET

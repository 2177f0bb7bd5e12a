"""What the installed plugin costs a pytest run that does not use it: wall time with and without it.

Target: at most 5% over ``-p no:cuzk`` for an unrelated one-test project, with the wheel installed
as a user has it. Runs alternate, so load on the machine hits both alike, and the ratio is of the
fastest of each: load only ever adds time, so the fastest run is the one closest to the cost itself
(the medians are printed too).
"""

from __future__ import annotations

import statistics
import subprocess
import time
from pathlib import Path

RUNS = 25
TARGET = 1.05


def _wall(python: Path, project: Path, *args: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=project,
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    return time.perf_counter() - t0


def test_the_plugin_costs_an_unrelated_run_almost_nothing(user_venv: Path, tmp_path: Path) -> None:
    (tmp_path / "test_unrelated.py").write_text("def test_unrelated():\n    assert True\n")
    with_plugin, without = [], []
    for _ in range(RUNS):
        with_plugin.append(_wall(user_venv, tmp_path))
        without.append(_wall(user_venv, tmp_path, "-p", "no:cuzk"))
    ratio = min(with_plugin) / min(without)
    print(
        f"\nunrelated one-test run, fastest of {RUNS}: {min(with_plugin) * 1000:.0f} ms with the plugin, "
        f"{min(without) * 1000:.0f} ms with -p no:cuzk: ratio {ratio:.3f} (target <= {TARGET}); medians "
        f"{statistics.median(with_plugin) * 1000:.0f} and {statistics.median(without) * 1000:.0f} ms"
    )
    assert ratio <= TARGET

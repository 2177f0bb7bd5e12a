"""The packaged suite end to end against cuzk-ref: both behaviours, both ways of getting a daemon.

One run per path, behaving as cuzk, on a kind or two: the reference-engine backend on WinningPoSt
and a SnapDeals batch, cuzk-ref spawned as any cuzk binary on PoRep (restarted for batch 2); the
per-kind checks of ``test_daemon`` run on those kinds. The protocol behaviour on ``-k`` subsets.
Behaving as cuzk, a SnapDeals batch fails as cuzk's does: the suite marks it xfail as cuzk's
known bug, and says so. Each case takes the sectors in turn with a fresh request id per proof:
a reused id would get the stored proof of another sector, which does not verify. Planted wrong
proofs (one that does not verify, two swapped in a batch) fail.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from helpers.support import SUITE

SUITE_FILES = {
    "test_prove": (SUITE / "test_prove.py").read_text(),
    "test_daemon": (SUITE / "test_daemon.py").read_text(),
}
KNOWN = [  # "?" for the brackets, which fnmatch reads as a character class
    "KNOWN ENGINE BUG (xfail): 1 cuzk test",
    "  test_prove?snap-batch2-j1?: known cuzk bug: SnapDeals*proof split failed*",
]
# cuzk's 10 s wait for a batch's company, shortened as a user's base config may
SHORT_BATCH_WAIT = "[scheduler]\nmax_batch_wait_ms = 300\n"


def _cuzk_ref() -> str:
    found = shutil.which("cuzk-ref", path=str(Path(sys.executable).parent))
    assert found, "cuzk-ref is not installed next to this Python; run pip install -e ."
    return found


def _config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "base.toml"
    path.write_text(text)
    return f"--cuzk-config={path}"


@pytest.fixture
def spawn_home(tmp_path: Path, shared_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """cuzk-ref spawned with no param cache keeps its keys in the per-user cache: the shared one here."""
    (tmp_path / "xdg").mkdir()
    (tmp_path / "xdg" / "pytest-cuzk").symlink_to(shared_cache)  # trusted setup once per session
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def test_the_suite_against_the_reference_engine_behaving_as_cuzk(inner) -> None:
    result = inner(SUITE_FILES, "-k", "winning or snap-batch2", timeout=600)
    result.assert_outcomes(passed=4, xfailed=1)
    result.stdout.fnmatch_lines(KNOWN)


def test_the_suite_against_cuzk_ref_spawned_as_a_cuzk_binary(inner, tmp_path: Path, spawn_home: None) -> None:
    args = ["--cuzk-daemon=spawn", f"--cuzk-binary={_cuzk_ref()}", _config(tmp_path, SHORT_BATCH_WAIT)]
    result = inner(SUITE_FILES, *args, "-k", "porep", timeout=600)
    result.stdout.fnmatch_lines(["cuzk: daemon mode spawn (--cuzk-daemon=spawn)"])
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["cold start [[]local batch 1[]]*", "cold start [[]local batch 2[]]*"])


def test_the_protocol_behaviour_proves_snapdeals_batches(inner, tmp_path: Path) -> None:
    args = [_config(tmp_path, '[ref]\nbehave = "protocol"\n'), "-k", "snap and batch2"]
    inner({"test_prove": SUITE_FILES["test_prove"]}, *args).assert_outcomes(passed=1)


def test_the_protocol_behaviour_spawned_as_a_cuzk_binary(inner, tmp_path: Path, spawn_home: None) -> None:
    # Spawned as any cuzk binary, the plugin waits for a PCE written since the start, which the
    # protocol behaviour (reusing its PCE) never writes again: the warm-up is skipped.
    args = [_config(tmp_path, '[ref]\nbehave = "protocol"\n'), "-k", "winning and not batch2"]
    args += ["--cuzk-daemon=spawn", f"--cuzk-binary={_cuzk_ref()}", "--cuzk-skip-warmup"]
    inner(SUITE_FILES, *args).assert_outcomes(passed=3, skipped=1)


@pytest.mark.parametrize(
    ("faults", "select"),
    [("invalid_at_proof = 2", "winning and batch1"), ("swap_batch_proofs = true", "porep and batch2")],
    ids=["does-not-verify", "swapped-in-a-batch"],
)
def test_a_well_formed_wrong_proof_fails_the_case(inner, tmp_path: Path, faults: str, select: str) -> None:
    out = tmp_path / "bench.json"
    config = _config(tmp_path, f"[ref.faults]\n{faults}\n")
    result = inner({"test_prove": SUITE_FILES["test_prove"]}, "-k", select, config, f"--benchmark-json={out}")
    result.assert_outcomes(failed=1)
    (case,) = json.loads(out.read_text())["benchmarks"]
    failures = case["extra_info"]["failures"]
    assert failures and all(
        "proof does not verify against the reference verifying key" in f for f in failures
    )

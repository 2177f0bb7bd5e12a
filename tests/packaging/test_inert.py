"""Installed but not asked for, the plugin does nothing: no header, no socket, no heavy import, no file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

UNRELATED = "def test_unrelated():\n    assert 1 + 1 == 2\n"
PROBE = r"""
import json, sys, pytest
rc = pytest.main(sys.argv[1:])
heavy = ("grpc", "google.protobuf", "py_arkworks_bls12381", "requests", "psutil", "pynvml", "sqlalchemy",
         "matplotlib", "numpy", "filelock", "pytest_cuzk.session")
print("PROBE" + json.dumps({"rc": int(rc), "loaded": [m for m in heavy if m in sys.modules]}))
"""


def _run(tmp_path: Path, name: str, *args: str) -> tuple[dict[str, object], str, set[str]]:
    """An unrelated one-test project's pytest run, with its own HOME and TMPDIR to see what it leaves."""
    root = tmp_path / name
    project, home, tmp = root / "project", root / "home", root / "tmp"
    for d in (project, home, tmp):
        d.mkdir(parents=True)
    (project / "test_unrelated.py").write_text(UNRELATED)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_CUZK_", "PYTEST_XDIST"))}
    env |= {"HOME": str(home), "TMPDIR": str(tmp), "XDG_CACHE_HOME": str(home / ".cache")}
    argv = [sys.executable, "-c", PROBE, "-p", "no:cacheprovider", *args]
    out = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, timeout=120).stdout
    probe = json.loads(out.split("PROBE", 1)[1])
    left = {str(p.relative_to(root)) for p in root.rglob("*")} - {"project/test_unrelated.py"}
    left = {p for p in left if "__pycache__" not in p and p not in ("project", "home", "tmp")}
    return probe, out, left


def test_an_unrelated_run_hears_nothing_of_cuzk_and_is_left_as_without_the_plugin(tmp_path):
    probe, out, left = _run(tmp_path, "with")
    plain_probe, _, plain_left = _run(tmp_path, "without", "-p", "no:cuzk")
    assert probe["rc"] == 0
    said = [line for line in out.splitlines() if "cuzk" in line.lower() and not line.startswith("plugins:")]
    assert not said, "only pytest's own plugin list may name it"
    assert probe["loaded"] == plain_probe["loaded"] == [], (
        "no gRPC, protobuf, arkworks, requests, psutil, NVML, nor the plugin's own session"
    )
    assert {p.split("/", 1)[1] for p in left} == {p.split("/", 1)[1] for p in plain_left}, (left, plain_left)


OWN_TEST = """
import pytest

@pytest.mark.cuzk_kinds("winning")
def test_own(cuzk_ready, cuzk_client, cuzk_data):
    assert cuzk_client.prove(cuzk_data.request("winning")).completed
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["alone", "xdist"])
def test_a_test_that_uses_cuzk_fixtures_wakes_the_plugin_with_no_option_given(
    pytester: pytest.Pytester, shared_cache: Path, monkeypatch: pytest.MonkeyPatch, workers: list[str]
) -> None:
    for name in [n for n in os.environ if n.startswith(("PYTEST_CUZK_", "PYTEST_XDIST"))]:
        monkeypatch.delenv(name)
    (pytester.path / "xdg").mkdir()
    (pytester.path / "xdg" / "pytest-cuzk").symlink_to(shared_cache)  # the default data dir, set up once
    monkeypatch.setenv("XDG_CACHE_HOME", str(pytester.path / "xdg"))
    pytester.makepyfile(test_own=OWN_TEST, test_other=UNRELATED)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *workers, timeout=300)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*cuzk proving summary*", "cold start *"])

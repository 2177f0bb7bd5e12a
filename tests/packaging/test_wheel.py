"""As a user gets it: the built wheel in a fresh venv, run from an empty directory with an empty HOME.

The suite and its manifest are package data, so ``pytest --cuzk-daemon=auto`` finds them with
no checkout around; nothing of the repository is on the path.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path


def _as_a_user(python: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    empty, home = tmp_path / "empty", tmp_path / "home"
    empty.mkdir()
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH", "XDG_"))}
    env["HOME"] = str(home)
    return subprocess.run(
        [python, "-m", "pytest", "-p", "no:cacheprovider", "-rs", *args],
        cwd=empty, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _failures(out: str) -> str:
    """What a failed run said of its failures (the summary's tail alone hides why)."""
    start = out.find("= FAILURES =")
    return (out[start : start + 4000] + "\n...\n" if start >= 0 else "") + out[-2000:]


def test_the_readme_command_runs_the_packaged_suite_from_an_empty_directory(user_venv, tmp_path):
    run = _as_a_user(user_venv, tmp_path, "--cuzk-daemon=auto", "-k", "winning")
    assert run.returncode == 0, _failures(run.stdout)
    out = run.stdout
    assert "cuzk: running the packaged suite" in out
    assert "cuzk: daemon mode ref (no daemon at 127.0.0.1:9820 and no cuzk binary" in out
    assert "5 passed" in out and "skipped" not in out, out[-2000:]
    assert "cuzk proving summary" in out
    assert "test_prove[winning-batch1-j1]" in out and "test_prove[winning-batch1-j2]" in out, (
        "alone and pipelined"
    )
    # the load scenarios take minutes: -k winning alone leaves them out, and says so
    assert "note: 3 load scenario tests of the suite not run: they take minutes; pass --cuzk-" in out


def test_pyargs_names_the_suite_too(user_venv, tmp_path):
    select = "prove and wpost or test_server and winning"  # a scenario named with -k runs
    # A 3 s budget has room for one rate step: with the default bound (5 times the idle p50) a CI
    # host busy with other tests can miss it, and no rate held fails the case; 30 s holds anywhere.
    bounded = ("--cuzk-scenario-budget=3", "--cuzk-slo=winning:30s")
    args = ("--pyargs", "pytest_cuzk.suite", "--cuzk-daemon=ref", "-k", select, *bounded)
    run = _as_a_user(user_venv, tmp_path, *args)
    assert run.returncode == 0, _failures(run.stdout)
    assert "3 passed" in run.stdout, "WindowPoSt alone and two in flight, and the scenario"
    assert re.search(r"^  test_server\[winning-batch1\]: max sustainable .* within 30 s", run.stdout, re.M)


def test_k_selects_a_load_scenario_by_what_its_id_contains(user_venv, tmp_path):
    select = ("-k", "priority and winning", "--collect-only", "-q")
    run = _as_a_user(user_venv, tmp_path, "--cuzk-daemon=ref", *select)
    assert "test_scenarios.py::test_priority[winning-under-porep]" in run.stdout, run.stdout[-2000:]
    assert "test_prove" not in run.stdout


def test_the_wheel_holds_the_gpu_kernels_with_their_shared_field_code(user_venv, tmp_path):
    probe = (
        "from pytest_cuzk.refengine.gpu.kernels import kernel_source\n"
        "for name in ('msm.cu', 'ntt.cu'):\n"
        "    text = kernel_source(name)\n"
        "    print(name, 'template <class P> struct mont' in text, '__global__' in text)\n"
    )
    run = subprocess.run([user_venv, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split("\n")[:2] == ["msm.cu True True", "ntt.cu True True"]

"""The ``ci/`` templates' own commands, run here as the CI would: install from the built wheel, prove, gate.

cuzk-ref stands in for the cuzk binary (it is spawned like one), with a short plan set through
the options' environment variables. A planted regression (cuzk-ref's ``grow_memory_mib_per_s``
fault: a memory peak, which a busy shared host cannot excuse the way it can a slower proof)
must fail the gate on every run until the build is fixed: a failed run never becomes the baseline.
The gate is set to the memory peak alone (``CUZK_GATE``): these runs share the host with the other
tests, which would move throughput by a third; the throughput gate has tests of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML  # check-jsonschema's YAML reader (the dev extra)

from pytest_cuzk.measure.figures import METRICS
from pytest_cuzk.wire.units import parse_thresholds

CI = Path(__file__).resolve().parents[2] / "ci"
SHORT_PLAN = {
    "PYTEST_CUZK_BATCH_SIZES": "1",
    "PYTEST_CUZK_PROOFS": "3",
    "PYTEST_CUZK_CASE_BUDGET": "8",
    "PYTEST_CUZK_WINDOW": "1",
    "CUZK_GATE": "rss_peak:10%",
}
LEAKS = json.dumps({"grow_memory_mib_per_s": 10})


def github_script(text: str) -> str:
    """The workflow's ``run`` steps, in order, as one script (``uses`` steps are GitHub's own)."""
    (job,) = YAML(typ="safe").load(text)["jobs"].values()
    return "\n".join(step["run"] for step in job["steps"] if "run" in step)


def gitlab_script(text: str) -> str:
    (job,) = YAML(typ="safe").load(text).values()
    return "\n".join(job["script"])


class Pipeline:
    """One template's script, run in a checkout of its own with the variables a user sets."""

    def __init__(self, script: str, root: Path, wheel: Path, env: dict[str, str]) -> None:
        self.script, self.root = script, root
        (root / "checkout").mkdir()
        (root / "home").mkdir()
        mine = ("PYTEST_", "PYTHON", "XDG_", "VIRTUAL")  # this session's, not the CI's
        keep = {k: v for k, v in os.environ.items() if not k.startswith(mine)}
        keep["PATH"] = os.pathsep.join(p for p in keep["PATH"].split(os.pathsep) if ".venv" not in p)
        self.env = keep | SHORT_PLAN | env | {
            "HOME": str(root / "home"),
            "PYTEST_CUZK_SPEC": str(wheel),
            "CUZK_BINARY": str(root / "checkout" / ".venv" / "bin" / "cuzk-ref"),
            "CUZK_PARAM_CACHE": str(root / "params"),
            "CUZK_KINDS": "test_prove and porep",
        }  # fmt: skip

    def run(
        self, *, against: str = "", save_as: str = "main", faults: str = "{}"
    ) -> subprocess.CompletedProcess[str]:
        env = self.env | {"CUZK_GATE_AGAINST": against, "CUZK_SAVE_AS": save_as, "CUZK_REF_FAULTS": faults}
        return subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", self.script],
            cwd=self.root / "checkout", env=env, capture_output=True, text=True, timeout=900,
        )  # fmt: skip

    def saved(self, store: Path) -> list[str]:
        return sorted(p.name for p in store.glob("*/*.json"))


def _passed(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    return run.stdout


def _failed_the_gate(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 1, run.stdout[-4000:] + run.stderr[-2000:]
    assert "rss_peak regressed" in run.stdout, run.stdout[-4000:]
    assert "not saved as a baseline" in run.stdout or "--benchmark-save" not in run.stdout
    return run.stdout


def test_the_github_template_saves_main_and_fails_a_regression_on_every_run(built_wheel, tmp_path):
    cache = tmp_path / "tool-cache"
    pipeline = Pipeline(github_script((CI / "github-gpu.yml").read_text()), tmp_path, built_wheel,
                        {"RUNNER_TOOL_CACHE": str(cache)})  # fmt: skip
    store = cache / "cuzk-benchmarks"
    first = _passed(pipeline.run())  # a push to main, nothing saved yet
    assert "no main baseline in" in first and "this run saves the first" in first
    assert pipeline.saved(store) == ["0001_main.json"]
    assert (tmp_path / "checkout" / "results" / "report.html").is_file()
    pull = _failed_the_gate(pipeline.run(against="main", save_as="42/merge", faults=LEAKS))
    assert "compared with " in pull and "0001_main.json (build cuzk-ref" in pull
    _failed_the_gate(pipeline.run(faults=LEAKS))  # merged anyway: main fails too, against the same baseline
    assert pipeline.saved(store) == ["0001_main.json"]
    _passed(pipeline.run())  # fixed: it passes, and becomes the baseline
    assert pipeline.saved(store) == ["0001_main.json", "0002_main.json"]


def test_the_gitlab_template_saves_the_default_branch_and_gates_a_merge_request(built_wheel, tmp_path):
    store = tmp_path / "store"
    pipeline = Pipeline(gitlab_script((CI / "gitlab-gpu.yml").read_text()), tmp_path, built_wheel,
                        {"CUZK_STORE": str(store)})  # fmt: skip
    _passed(pipeline.run())
    assert pipeline.saved(store / "benchmarks") == ["0001_main.json"]
    _failed_the_gate(pipeline.run(against="main", save_as="", faults=LEAKS))
    assert pipeline.saved(store / "benchmarks") == ["0001_main.json"]


def test_both_templates_gate_throughput_and_memory_unless_told_otherwise():
    github = YAML(typ="safe").load((CI / "github-gpu.yml").read_text())
    (job,) = github["jobs"].values()
    gitlab = YAML(typ="safe").load((CI / "gitlab-gpu.yml").read_text())
    (default,) = (v["variables"]["CUZK_GATE"] for v in gitlab.values())
    assert default == "throughput:5%,rss_peak:10%"
    assert job["env"]["CUZK_GATE"] == "${{ vars.CUZK_GATE || '" + default + "' }}"
    assert parse_thresholds(default, METRICS, "CUZK_GATE") == {"throughput": 5.0, "rss_peak": 10.0}


def test_a_merge_request_with_no_baseline_of_its_target_stops_with_the_fix(built_wheel, tmp_path):
    pipeline = Pipeline(gitlab_script((CI / "gitlab-gpu.yml").read_text()), tmp_path, built_wheel,
                        {"CUZK_STORE": str(tmp_path / "store")})  # fmt: skip
    run = pipeline.run(against="main", save_as="")
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout[-3000:] + run.stderr[-2000:]
    assert "--benchmark-compare=*_main names no saved run in " in run.stderr


def test_the_install_step_says_which_variable_to_set(tmp_path):
    script = github_script((CI / "github-gpu.yml").read_text())
    run = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env={"PATH": os.environ["PATH"]},
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert run.returncode != 0
    assert "PYTEST_CUZK_SPEC: set the variable PYTEST_CUZK_SPEC to a pytest-cuzk wheel" in run.stderr
    assert not (tmp_path / ".venv").exists(), "it stops before making anything"

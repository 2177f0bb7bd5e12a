"""The ``ci/`` templates' commands, run as the CI would: build each commit, install the wheel, prove, gate.

The repository the templates are copied into is a git repository here whose "build" (``CUZK_BUILD``)
makes a cuzk-daemon that is cuzk-ref (it is spawned like one) with the faults its commit holds, so a
commit can plant a regression: ``grow_memory_mib_per_s``, a memory peak, which a busy shared host
cannot excuse the way it can a slower proof. A short plan is set through the options' environment
variables, and the throughput limit is wide: these runs share the host with the other tests, and
the A/B gate's throughput has tests of its own.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from ruamel.yaml import YAML  # check-jsonschema's YAML reader (the dev extra)

from pytest_cuzk.measure.figures import METRICS
from pytest_cuzk.vocab.units import parse_thresholds

CI = Path(__file__).resolve().parents[2] / "ci"
SHORT_PLAN = {
    "PYTEST_CUZK_BATCH_SIZES": "1",
    "PYTEST_CUZK_PROOFS": "3",
    "PYTEST_CUZK_CASE_BUDGET": "8",
    "PYTEST_CUZK_WINDOW": "1",
    "CUZK_THROUGHPUT_LIMIT": "60%",
}
LEAKS = json.dumps({"grow_memory_mib_per_s": 10})
# The repository's build: a cuzk-daemon that runs cuzk-ref with this commit's faults.
BUILD = """mkdir -p "$CARGO_TARGET_DIR/release"
printf '#!/bin/sh\nCUZK_REF_FAULTS=%s exec "$REF_ENGINE" "$@"\n' "'$(cat faults.json)'" \
  > "$CARGO_TARGET_DIR/release/cuzk-daemon"
chmod +x "$CARGO_TARGET_DIR/release/cuzk-daemon"
"""


def _load(name: str) -> dict:
    data: dict = YAML(typ="safe").load((CI / name).read_text())
    return data


def github_script(text: str) -> str:
    """The workflow's ``run`` steps, in order, as one script (``uses`` steps are GitHub's own)."""
    (job,) = YAML(typ="safe").load(text)["jobs"].values()
    return "\n".join(step["run"] for step in job["steps"] if "run" in step)


def gitlab_script(text: str) -> str:
    (job,) = YAML(typ="safe").load(text).values()
    return "\n".join(job["script"])


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True)
    return done.stdout.strip()


class Pipeline:
    """One template's script, run in a git checkout of its own with the variables a user sets.

    The checkout has two commits: ``main`` and, on top of it, ``leaky``, whose build leaks memory.
    """

    def __init__(self, script: str, root: Path, wheel: Path, env: dict[str, str]) -> None:
        self.script, self.root = script, root
        self.checkout = root / "checkout"
        self.checkout.mkdir()
        (root / "home").mkdir()
        _git(self.checkout, "init", "-q", "-b", "main")
        (self.checkout / "build.sh").write_text(BUILD)
        (self.checkout / "faults.json").write_text("{}")
        self.main = self._commit("cuzk")
        (self.checkout / "faults.json").write_text(LEAKS)
        self.leaky = self._commit("cuzk that leaks")
        mine = ("PYTEST_", "PYTHON", "XDG_", "VIRTUAL")  # this session's, not the CI's
        keep = {k: v for k, v in os.environ.items() if not k.startswith(mine)}
        keep["PATH"] = os.pathsep.join(p for p in keep["PATH"].split(os.pathsep) if ".venv" not in p)
        self.env = keep | SHORT_PLAN | env | {
            "HOME": str(root / "home"),
            "PYTEST_CUZK_SPEC": str(wheel),
            "CUZK_SOURCE_DIR": ".",
            "CUZK_BUILD": "sh build.sh",
            "CUZK_BUILT": "release/cuzk-daemon",
            "REF_ENGINE": str(self.checkout / ".venv" / "bin" / "cuzk-ref"),
            "CUZK_PARAM_CACHE": str(root / "params"),
            "CUZK_KINDS": "test_prove and porep",
            "CUZK_RSS_LIMIT": "10%",
            "CUZK_UNRESOLVED": "warn",
            "CI_DEFAULT_BRANCH": "main",
        }  # fmt: skip

    def _commit(self, message: str) -> str:
        _git(self.checkout, "add", "-A")
        _git(
            self.checkout,
            "-c",
            "user.name=ci",
            "-c",
            "user.email=ci@example.org",
            "commit",
            "-q",
            "-m",
            message,
        )
        return _git(self.checkout, "rev-parse", "HEAD")

    def run(self, commit: str, base: str = "") -> subprocess.CompletedProcess[str]:
        """The job for ``commit``: a push to main without ``base``, else a pull request onto ``base``."""
        _git(self.checkout, "checkout", "-q", "--detach", commit)
        env = self.env | {"CUZK_COMMIT": commit, "CUZK_BASE_COMMIT": base}
        return subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", self.script],
            cwd=self.checkout, env=env, capture_output=True, text=True, timeout=900,
        )  # fmt: skip


def _saved(store: Path) -> list[str]:
    return sorted(p.name for p in store.glob("*/*.json"))


def _passed(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    return run.stdout


def _failed_the_gate(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 1, run.stdout[-4000:] + run.stderr[-2000:]
    assert re.search(r"rss_peak regressed .*; A/B over \d+ pairs", run.stdout), run.stdout[-4000:]
    return run.stdout


def test_the_github_template_saves_main_and_fails_a_pull_request_against_main_s_build(built_wheel, tmp_path):
    cache = tmp_path / "tool-cache"
    pipeline = Pipeline(github_script((CI / "github-gpu.yml").read_text()), tmp_path, built_wheel,
                        {"RUNNER_TOOL_CACHE": str(cache)})  # fmt: skip
    push = _passed(pipeline.run(pipeline.main))
    assert f"cuzk-daemon of {pipeline.main} from the cache" not in push, "built, the first time"
    assert "no results database: set the secret PYTEST_CUZK_RESULTS_DB" in push
    assert _saved(cache / "cuzk-benchmarks") == ["0001_main.json"]
    assert (tmp_path / "checkout" / "results" / "report.html").is_file()
    pull = _failed_the_gate(pipeline.run(pipeline.leaky, base=pipeline.main))
    assert f"cuzk-daemon of {pipeline.main} from the cache" in pull, "main's build is kept by its commit"
    assert f"cuzk-daemon of {pipeline.leaky} from the cache" not in pull
    assert re.search(r"^A/B \S+: candidate against control, ", pull, re.M), pull[-3000:]
    assert _saved(cache / "cuzk-benchmarks") == ["0001_main.json"], "a pull request saves nothing"
    assert sorted(p.name for p in (cache / "cuzk-builds").iterdir()) == sorted(
        [pipeline.main, pipeline.leaky, "target"]
    ), "each build under its commit, no worktree left behind"


def test_the_gitlab_template_fails_a_merge_request_against_its_target_s_build(built_wheel, tmp_path):
    store = tmp_path / "store"
    pipeline = Pipeline(gitlab_script((CI / "gitlab-gpu.yml").read_text()), tmp_path, built_wheel,
                        {"CUZK_STORE": str(store)})  # fmt: skip
    _failed_the_gate(pipeline.run(pipeline.leaky, base=pipeline.main))
    assert (store / "builds" / pipeline.main / "cuzk-daemon").is_file()
    assert _saved(store / "benchmarks") == []


def test_both_templates_take_every_limit_from_a_variable_with_the_same_defaults():
    (github,) = _load("github-gpu.yml")["jobs"].values()
    (gitlab,) = _load("gitlab-gpu.yml").values()
    defaults = {"CUZK_THROUGHPUT_LIMIT": "5%", "CUZK_RSS_LIMIT": "10%", "CUZK_UNRESOLVED": "warn"}
    for name, default in defaults.items():
        assert github["env"][name] == "${{ vars." + name + " || '" + default + "' }}"
        assert gitlab["variables"][name] == default
    gate = '--cuzk-compare-fail="throughput:$CUZK_THROUGHPUT_LIMIT,rss_peak:$CUZK_RSS_LIMIT"'
    for script in (github_script((CI / "github-gpu.yml").read_text()), "\n".join(gitlab["script"])):
        assert gate in script and '--cuzk-compare-unresolved="$CUZK_UNRESOLVED"' in script
    assert parse_thresholds("throughput:5%,rss_peak:10%", METRICS, "gate") == {
        "throughput": 5.0,
        "rss_peak": 10.0,
    }


def test_neither_template_runs_a_pull_request_from_a_fork_on_the_gpu_runner():
    (github,) = _load("github-gpu.yml")["jobs"].values()
    assert "github.event.pull_request.head.repo.full_name == github.repository" in github["if"]
    (gitlab,) = _load("gitlab-gpu.yml").values()
    requests = [r["if"] for r in gitlab["rules"] if "merge_request_event" in r["if"]]
    same_project = "$CI_MERGE_REQUEST_SOURCE_PROJECT_ID == $CI_PROJECT_ID"
    assert requests == [f'$CI_PIPELINE_SOURCE == "merge_request_event" && {same_project}']


def test_the_install_step_says_which_variable_to_set(tmp_path):
    script = github_script((CI / "github-gpu.yml").read_text())
    run = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env={"PATH": os.environ["PATH"]},
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert run.returncode != 0
    assert "PYTEST_CUZK_SPEC: set the variable PYTEST_CUZK_SPEC to a pytest-cuzk wheel" in run.stderr
    assert not (tmp_path / ".venv").exists(), "it stops before making anything"

"""Bad input stops the run before any daemon starts, naming where it came from and the fix."""

from __future__ import annotations

import os
import sys

import pytest
from helpers.support import PROVE_SOURCE


def _usage(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_prove=PROVE_SOURCE)
    return pytester.runpytest("-p", "no:cacheprovider", "--import-mode=importlib", ".", *args)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--cuzk-preset=mediun"],
            "Invalid value 'mediun' from option --cuzk-preset: did you mean medium? "
            "use one of default, medium, large, xlarge",
        ),
        (
            ["--cuzk-daemon=atuo"],
            "Invalid value 'atuo' from option --cuzk-daemon: did you mean auto? use auto, spawn, ref or *",
        ),
        (
            ["--cuzk-daemon=spwan"],
            "Invalid value 'spwan' from option --cuzk-daemon: did you mean spawn? *",
        ),
        (
            ["--cuzk-results-db=defualt"],
            "Invalid results database 'defualt' from option --cuzk-results-db: use default,*",
        ),
        (
            ["--cuzk-binary=/nonexistent/cuzk"],
            "--cuzk-binary /nonexistent/cuzk does not exist: pass the path*",
        ),
        (
            ["--cuzk-baseline=/nonexistent.json"],
            "--cuzk-baseline /nonexistent.json does not exist (or is not a file)*",
        ),
        (
            ["--cuzk-input=porep=/nonexistent/c1.json"],
            "--cuzk-input porep=/nonexistent/c1.json: no such file*",
        ),
        (["--cuzk-manifest=/nonexistent.toml"], "--cuzk-manifest /nonexistent.toml does not exist*"),
    ],
)
def test_a_bad_option_is_a_usage_error_naming_it(pytester, args, says):
    result = _usage(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {says}"])


@pytest.mark.parametrize("name", ["manifest", "config", "baseline", "binary"])
def test_a_url_for_a_path_option_is_a_usage_error_that_masks_its_password(pytester, name):
    result = _usage(pytester, f"--cuzk-{name}=https://carol:pw-in-url@127.0.0.1:9/file")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: --cuzk-{name} takes a local path, not a URL (https://carol:***@127.0.0.1:9/file, *"]
    )
    assert "pw-in-url" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--cuzk-daemon=spawn"],
            "--cuzk-daemon=spawn needs a cuzk binary: pass --cuzk-binary PATH or put cuzk-daemon on PATH",
        ),
        (["--cuzk-daemon=spawn", "--cuzk-binary="], "--cuzk-binary is empty (from option --cuzk-binary)*"),
        (["--cuzk-daemon=spawn", "--benchmark-compare"], "--cuzk-daemon=spawn needs a cuzk binary*"),
    ],
)
def test_a_missing_binary_is_one_line_at_configure_time(pytester, monkeypatch, args, says):
    monkeypatch.setenv("PATH", str(pytester.path))  # no cuzk-daemon on it
    result = _usage(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.stderr.lines if line.strip()] == [result.stderr.lines[0]], "one line"
    result.stderr.fnmatch_lines([f"ERROR: {says}"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_a_postgresql_results_db_without_its_driver_is_a_usage_error(pytester, monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as where only pytest-cuzk is installed
    result = _usage(pytester, "--cuzk-results-db=postgresql://u@127.0.0.1/db")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: Invalid results database * from option --cuzk-results-db: *needs the psycopg driver*"]
    )


def test_a_baseline_that_is_not_benchmark_json_is_a_usage_error(pytester):
    (pytester.path / "base.json").write_text("[1, 2")
    result = _usage(pytester, "--cuzk-baseline=base.json", "--cuzk-compare-fail=throughput:5%")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: cannot read --cuzk-baseline base.json: *"])


def test_a_config_that_is_not_toml_is_a_usage_error(pytester):
    (pytester.path / "cuzk.toml").write_text("[daemon\nlisten = 1")
    result = _usage(pytester, "--cuzk-config=cuzk.toml")
    result.stderr.fnmatch_lines(["ERROR: --cuzk-config cuzk.toml is not valid TOML (*): fix the file"])


def test_a_marker_naming_no_kind_is_a_usage_error_and_an_alias_is_fine(pytester):
    pytester.makepyfile(
        test_marked="""
        import pytest

        @pytest.mark.cuzk_kinds("window-post")
        def test_alias():
            pass

        @pytest.mark.cuzk_kinds("windowpost2")
        def test_typo():
            pass
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: test_marked.py::test_typo: @pytest.mark.cuzk_kinds: unknown proof kind 'windowpost2'*"]
    )


def test_a_binary_that_cannot_start_says_so_and_never_prints_the_environment(pytester, monkeypatch):
    monkeypatch.setenv("CI_DEPLOY_TOKEN", "s3cr3t-t0k3n")
    binary = pytester.path / "cuzk-daemon"
    binary.write_text("#!/nonexistent/interpreter\n")
    binary.chmod(0o755)
    pytester.makepyfile(test_prove=PROVE_SOURCE)
    args = [
        "--cuzk-daemon=spawn",
        f"--cuzk-binary={binary}",
        "-k",
        "winning or wpost",
        "--cuzk-batch-sizes=1",
        "--cuzk-concurrency=1",
        "--import-mode=importlib",  # the inner test_prove must not collide with the suite's module
        ".",
    ]
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines([f"*cannot start {binary}: No such file or directory*"])
    out = result.stdout.str() + result.stderr.str()
    assert "s3cr3t-t0k3n" not in out and "CI_DEPLOY_TOKEN" not in out
    assert "AssertionError" not in out
    assert os.environ["CI_DEPLOY_TOKEN"] == "s3cr3t-t0k3n"


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (
            ["--cuzk-preset=large"],
            '--cuzk-preset=large (from option --cuzk-preset) disagrees with [[]ref[]] preset = "medium" '
            "in *base.toml: give the preset in one place, or the same in both",
        ),
        ([], ""),  # the config's own preset, no option: nothing to disagree with
        (["--cuzk-preset=medium"], ""),  # the same in both
    ],
)
def test_a_preset_in_the_config_and_another_in_the_option_is_a_usage_error_naming_both(
    pytester, tmp_path, given, says
):
    config = tmp_path / "base.toml"
    config.write_text('[ref]\npreset = "medium"\n')
    result = _usage(pytester, "--cuzk-daemon=ref", f"--cuzk-config={config}", "--collect-only", *given)
    if says:
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"ERROR: {says}"])
    else:
        assert result.ret == pytest.ExitCode.OK, result.stderr.str()


def test_an_unknown_preset_in_the_config_is_a_usage_error_naming_the_file(pytester, tmp_path):
    config = tmp_path / "base.toml"
    config.write_text('[ref]\npreset = "mediun"\n')
    result = _usage(pytester, "--cuzk-daemon=ref", f"--cuzk-config={config}", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ['ERROR: [[]ref[]] preset = "mediun" in *base.toml: unknown preset; use one of *']
    )

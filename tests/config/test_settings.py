"""Options: flags, ini keys and environment variables, their precedence and their error messages."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

from pytest_cuzk.config.options import OPTIONS, option_value
from pytest_cuzk.config.settings import resolve_settings
from pytest_cuzk.config.slo import Slo
from pytest_cuzk.vocab.units import parse_size

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def test_help_lists_every_option(pytester):
    result = pytester.runpytest("--help")
    for opt in OPTIONS:
        result.stdout.fnmatch_lines([f"*{opt.flag}*"])


def test_precedence_is_flag_then_env_then_ini_then_default(pytester, monkeypatch):
    pytester.makeini("[pytest]\ncuzk_proofs = 7\ncuzk_batch_sizes = 1,4\n")
    assert resolve_settings(pytester.parseconfig()).proofs == 7
    assert resolve_settings(pytester.parseconfig()).batch_sizes == (1, 4)
    monkeypatch.setenv("PYTEST_CUZK_PROOFS", "5")
    assert resolve_settings(pytester.parseconfig()).proofs == 5
    assert resolve_settings(pytester.parseconfig("--cuzk-proofs=3")).proofs == 3
    monkeypatch.delenv("PYTEST_CUZK_PROOFS")
    pytester.makeini("[pytest]\n")
    assert resolve_settings(pytester.parseconfig()).proofs == 10


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cuzk-batch-sizes=1,x"], "Invalid list '1,x' from option --cuzk-batch-sizes"),
        (["--cuzk-min-throughput=porep:fast"], "Invalid throughput 'fast' from option --cuzk-min-throughput"),
        (["--cuzk-max-rss=lots"], "Invalid size 'lots' from option --cuzk-max-rss"),
        (["--cuzk-compare-fail=mean:5%"], "Invalid threshold 'mean:5%' from option --cuzk-compare-fail"),
        (["--cuzk-compare-fail=throughput:5"], "give the limit in percent (throughput:5%)"),
        (["--cuzk-min-throughput=porep:50"], "Invalid throughput '50' from option --cuzk-min-throughput"),
        (["--cuzk-max-rss=200"], "Invalid size '200' from option --cuzk-max-rss: give its unit, e.g. 200GiB"),
        (["--cuzk-input=porp=x.json"], "unknown proof kind 'porp'"),
        (["--cuzk-label=host:1="], "Invalid value 'host:1=' from option --cuzk-label: use ADDR=NAME"),
        (["--cuzk-lowmem-warmup=maybe"], "use auto, on or off"),
        (["--cuzk-proof-timeout=0"], "must be above 0"),
        (
            ["--cuzk-daemon=spwan"],
            r"Invalid value 'spwan' from option --cuzk-daemon: did you mean spawn\? use auto, spawn, ref",
        ),
        (["--cuzk-addr=https://h:1"], "Invalid address 'https://h:1' from option --cuzk-addr"),
        (["--cuzk-sample-interval=0.001"], "the sampler needs 0.005s or more"),
        (
            ["--cuzk-proofs=20", "--cuzk-max-proofs=5"],
            "Invalid number 5 from option --cuzk-max-proofs: below the minimum of 20 proofs "
            "(option --cuzk-proofs)",
        ),
        (["--cuzk-case-budget=0"], "Invalid number '0' from option --cuzk-case-budget: must be above 0"),
        (["--cuzk-stability=x"], "Invalid number 'x' from option --cuzk-stability"),
        (
            ["--cuzk-slo=winning:fast"],
            "Invalid latency bound 'fast' from option --cuzk-slo: use seconds (10s), minutes (30m) or a "
            "multiple of the kind's idle p50 (5x), above 0",
        ),
        (["--cuzk-slo=winning:0s"], "Invalid latency bound '0s' from option --cuzk-slo"),
        (["--cuzk-slo=wining:10s"], "option --cuzk-slo: unknown proof kind 'wining'"),
        (["--cuzk-scenario-budget=-1"], "Invalid number '-1' from option --cuzk-scenario-budget"),
        (["--cuzk-background-in-flight=2.5"], "Invalid number 2.5 from option --cuzk-background-in-flight"),
        (["--cuzk-ab-config=base.toml"], "option --cuzk-ab-config needs --cuzk-ab: name the control daemon"),
        (
            ["--cuzk-ab=spawn"],
            "option --cuzk-ab: --cuzk-ab=spawn takes the control's binary from --cuzk-ab-binary",
        ),
        (["--cuzk-ab=ref", "--cuzk-ab-binary=cuzk"], "--cuzk-ab=spawn takes the control's binary from"),
        (["--cuzk-ab=auto"], "Invalid address 'auto' from option --cuzk-ab: use spawn, ref or one ADDR"),
        (
            ["--cuzk-ab=h:1,h:2"],
            "option --cuzk-ab: A/B pairs one candidate daemon with one control, not several",
        ),
        (["--cuzk-daemon=h:1,h:2", "--cuzk-ab=ref"], "A/B pairs one candidate daemon with one control"),
        (["--cuzk-ab=ref", "--cuzk-ab-layout=sideways"], "use one of auto, side-by-side, in-turn"),
        (["--cuzk-ab=ref", "--cuzk-ab-seed=1.5"], "Invalid number 1.5 from option --cuzk-ab-seed"),
        (
            ["--cuzk-compare-unresolved=fail"],
            "option --cuzk-compare-unresolved needs --cuzk-compare-fail: name the gate it applies to",
        ),
        (
            ["--cuzk-compare-fail=throughput:5%", "--cuzk-compare-unresolved=error"],
            "Invalid value 'error' from option --cuzk-compare-unresolved: use one of warn, fail",
        ),
    ],
)
def test_bad_values_name_their_source(pytester, args, message):
    with pytest.raises(pytest.UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve_settings(pytester.parseconfig(*args))


def test_an_unresolved_policy_from_the_environment_waits_for_a_run_that_gates(pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_CUZK_COMPARE_UNRESOLVED", "fail")
    assert resolve_settings(pytester.parseconfig()).compare_unresolved == "fail"  # a first run: no gate
    gated = resolve_settings(pytester.parseconfig("--cuzk-compare-fail=throughput:5%"))
    assert gated.compare_unresolved == "fail"
    monkeypatch.setenv("PYTEST_CUZK_COMPARE_UNRESOLVED", "always")
    with pytest.raises(
        pytest.UsageError, match="'always' from environment variable PYTEST_CUZK_COMPARE_UNRESOLVED"
    ):
        resolve_settings(pytester.parseconfig())


@pytest.mark.parametrize("flag", ["--cuzk-daemon", "--cuzk-addr", "--cuzk-ab"])
def test_a_password_in_a_daemon_address_is_not_shown(pytester, flag):
    with pytest.raises(pytest.UsageError) as info:
        resolve_settings(pytester.parseconfig(f"{flag}=http://cuzk:s3cret@127.0.0.1:1"))
    assert f"Invalid address 'http://cuzk:***@127.0.0.1:1' from option {flag}" in str(info.value)
    assert "takes no user name or password" in str(info.value) and "s3cret" not in str(info.value)


def test_the_control_daemon_is_named_like_the_candidate(pytester, tmp_path):
    from pytest_cuzk.backends.choice import AB_LABEL, control_settings
    from pytest_cuzk.config.settings import check_paths
    from pytest_cuzk.config.values import THIS_DAEMON

    (tmp_path / "slow.toml").write_text("[ref.faults]\nslow_factor = 1.15\n")
    s = resolve_settings(
        pytester.parseconfig("--cuzk-daemon=ref", "--cuzk-ab=ref", f"--cuzk-ab-config={tmp_path}/slow.toml")
    )
    control = control_settings(s)
    assert (control.daemon, control.config) == ("ref", tmp_path / "slow.toml")
    assert control.labels == {THIS_DAEMON: AB_LABEL}
    assert s.config is None and s.ab_layout == "auto" and s.ab_seed is None
    attach = resolve_settings(pytester.parseconfig("--cuzk-ab=unix:///run/cuzk-main.sock"))
    assert (attach.ab, attach.ab_attach) == ("attach", ("unix:///run/cuzk-main.sock",))
    (tmp_path / "bad.toml").write_text("[ref\n")
    bad = resolve_settings(pytester.parseconfig("--cuzk-ab=ref", f"--cuzk-ab-config={tmp_path}/bad.toml"))
    with pytest.raises(pytest.UsageError, match=r"--cuzk-ab-config .*bad.toml is not valid TOML"):
        check_paths(bad)
    missing = resolve_settings(pytester.parseconfig("--cuzk-ab=spawn", f"--cuzk-ab-binary={tmp_path}/none"))
    with pytest.raises(pytest.UsageError, match=r"--cuzk-ab-binary .*none does not exist"):
        check_paths(missing)


def test_bad_env_value_names_the_variable(pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_CUZK_CONCURRENCY", "0")
    with pytest.raises(pytest.UsageError, match="environment variable PYTEST_CUZK_CONCURRENCY"):
        resolve_settings(pytester.parseconfig())


def test_kind_maps_and_gates_parse(pytester):
    s = resolve_settings(
        pytester.parseconfig(
            "--cuzk-min-throughput=porep:50/h,winning-post:3600/h",
            "--cuzk-max-rss=200GiB",
            "--cuzk-max-vram=porep:12GB",
            "--cuzk-compare-fail=rss_peak:10%,throughput:5%",
            "--cuzk-daemon=10.0.0.1:9820,unix:///run/cuzk.sock",
            "--cuzk-label=10.0.0.1:9820=rtx4090",
        )
    )
    assert s.min_throughput == {"porep": 50.0, "winning": 3600.0}
    assert s.max_rss == {k: 200 * 2**30 for k in ("porep", "snap", "wpost", "winning")}
    assert s.max_vram == {"porep": 12 * 10**9}
    assert s.compare_fail == {"rss_peak": 10.0, "throughput": 5.0}
    assert (s.daemon, s.attach) == ("attach", ("10.0.0.1:9820", "unix:///run/cuzk.sock"))
    assert resolve_settings(pytester.parseconfig("--cuzk-daemon=Ref")).daemon == "ref"
    assert s.labels == {"10.0.0.1:9820": "rtx4090"}


def test_parse_size_units():
    assert parse_size("512 MiB", "x") == 512 * 2**20
    assert parse_size("1.5GB", "x") == 1_500_000_000
    assert parse_size("50GiB", "x") == 50 * 2**30
    assert parse_size("1024", "x") == 1024
    with pytest.raises(ValueError, match=r"Invalid size 'lots' from memory\.total_budget"):
        parse_size("lots", "memory.total_budget")


def test_latency_bounds_are_seconds_minutes_or_multiples_of_the_idle_p50(pytester):
    s = resolve_settings(pytester.parseconfig("--cuzk-slo=12s,porep:30m,winning-post:4x"))
    assert s.slo["wpost"] == Slo(seconds=12.0, source="option --cuzk-slo")
    assert s.slo["porep"].bound(idle_p50_s=100.0) == 1800.0
    winning = s.slo["winning"]
    assert winning.bound(idle_p50_s=0.25) == 1.0
    assert winning.describe(1.0) == "4x the idle p50 = 1.00 s (option --cuzk-slo)"
    assert resolve_settings(pytester.parseconfig()).slo == {}, "the engine's own bounds apply"


def test_a_bound_under_load_allows_for_the_background_proofs_ahead():
    under_load = Slo(times_idle=1.0, background=3.0, source="the reference-engine default")
    assert under_load.bound(idle_p50_s=0.1, background_p50_s=0.9) == pytest.approx(2.8)
    assert under_load.describe(2.8) == (
        "the idle p50 + 3 background proofs' idle p50 = 2.80 s (the reference-engine default)"
    )


DECIMAL_OPTIONS = [opt.flag for opt in OPTIONS if opt.kind == "float"]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", "1e999"])
@pytest.mark.parametrize("flag", DECIMAL_OPTIONS)
def test_every_decimal_option_is_refused_unless_finite(pytester, flag, value):
    """A nan passes every comparison (a timeout that never fires); inf is no bound either."""
    message = f"Invalid number '{value}' from option {flag}: must be a finite"
    with pytest.raises(pytest.UsageError, match=message):
        resolve_settings(pytester.parseconfig(f"{flag}={value}"))


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_percentage_is_refused_unless_finite(pytester, value):
    message = f"Invalid percentage '{value}%' from option --cuzk-compare-fail"
    with pytest.raises(pytest.UsageError, match=message):
        resolve_settings(pytester.parseconfig(f"--cuzk-compare-fail=throughput:{value}%"))


def test_a_nan_timeout_stops_a_real_run_before_any_daemon_starts(pytester):
    result = pytester.runpytest("--cuzk-daemon=ref", "--cuzk-start-timeout=nan")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*Invalid number 'nan' from option --cuzk-start-timeout: must be a finite*"])


def test_the_checkouts_ini_leaves_a_main_jobs_warnings_as_warnings():
    """The README's main job runs the packaged suite with this checkout's ini: keep its warnings.

    An ``error`` filter there turned the plugin's CuzkWarnings (its spread notes) into failed tests.
    """
    ini = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["tool"]["pytest"]
    assert "filterwarnings" not in ini["ini_options"], "set it per test in tests/conftest.py instead"


def test_an_options_provenance_is_typed_and_reads_as_the_place_it_came_from(pytester, monkeypatch):
    proofs = next(o for o in OPTIONS if o.name == "proofs")
    _, default = option_value(pytester.parseconfig(), proofs)
    _, flag = option_value(pytester.parseconfig("--cuzk-proofs=3"), proofs)
    monkeypatch.setenv("PYTEST_CUZK_PROOFS", "4")
    _, env = option_value(pytester.parseconfig(), proofs)
    assert [(w, w.source, w.given) for w in (default, flag, env)] == [
        ("default of --cuzk-proofs", "default", False),
        ("option --cuzk-proofs", "option", True),
        ("environment variable PYTEST_CUZK_PROOFS", "environment variable", True),
    ]
    assert copy.deepcopy(flag).given and copy.deepcopy(flag) == flag, "copied (to a worker) it stays typed"


MEMORY = "at most .*, as this host has .* of memory available"
UNTIMED = ("--cuzk-proofs", "--cuzk-max-proofs", "--cuzk-stability", "--cuzk-background-in-flight")
BOUNDED = [
    *((flag, "1e300", "at most 9223372036, as the longest wait this host") for flag in DECIMAL_OPTIONS
      if flag not in UNTIMED),
    ("--cuzk-proofs", "1e15", f"{MEMORY}, for records of up to 4 KiB"),
    ("--cuzk-max-proofs", "1e15", MEMORY),
    ("--cuzk-stability", "150", "at most 100, as a band wider than the mean itself admits a window of no"),
    ("--cuzk-background-in-flight", "1e9", r"at most \d+, as (ulimit -u allows|the kernel allows)"),
    ("--cuzk-concurrency", "1000000000", r"\d{10} proofs in flight need a thread each; at most \d+, as"),
    ("--cuzk-batch-sizes", "1000000000", r"\d{10} proofs in flight need a thread each; at most \d+, as"),
    ("--cuzk-slo", "winning:99999999999s", "latency bound .* at most 9223372036, as the longest wait"),
    ("--cuzk-min-throughput", "winning:99999999999999999999/h", "at most .*, as no proof can take less"),
    ("--cuzk-max-rss", "99999999TiB", "at most .*, as no 64-bit process can hold more"),
    ("--cuzk-ab-seed", "1e17", "at most 9007199254740992, as a larger whole number is not read exactly"),
]  # fmt: skip


@pytest.mark.parametrize(("flag", "value", "message"), BOUNDED)
def test_every_numeric_option_is_refused_above_what_the_host_can_hold(pytester, flag, value, message):
    """Each bound is the host's (its longest wait, threads, memory), and its error says which."""
    args = [f"{flag}={value}"] + (["--cuzk-ab=ref"] if flag == "--cuzk-ab-seed" else [])
    with pytest.raises(pytest.UsageError, match=f"{flag}.*{message}|{message}") as caught:
        resolve_settings(pytester.parseconfig(*args))
    assert flag in str(caught.value)


def test_a_huge_concurrency_stops_a_real_run_at_once(pytester):
    """It once built a billion requests for two minutes, printing nothing, until the host ran out."""
    result = pytester.runpytest("--cuzk-daemon=ref", "--cuzk-concurrency=1000000000")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*proofs in flight need a thread each; at most *"])

"""Options: flags, ini keys and environment variables, their precedence and their error messages."""

from __future__ import annotations

import pytest

from pytest_cuzk.options import OPTIONS
from pytest_cuzk.settings import resolve_settings
from pytest_cuzk.wire.units import parse_size


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
    assert resolve_settings(pytester.parseconfig()).proofs == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cuzk-batch-sizes=1,x"], "Invalid list '1,x' from option --cuzk-batch-sizes"),
        (["--cuzk-min-throughput=porep:fast"], "Invalid throughput 'fast' from option --cuzk-min-throughput"),
        (["--cuzk-max-rss=lots"], "Invalid size 'lots' from option --cuzk-max-rss"),
        (["--cuzk-compare-fail=mean:5%"], "Invalid threshold 'mean:5%' from option --cuzk-compare-fail"),
        (["--cuzk-input=porp=x.json"], "unknown proof kind 'porp'"),
        (["--cuzk-label=host:1="], "Invalid value 'host:1=' from option --cuzk-label: use ADDR=NAME"),
        (["--cuzk-lowmem-warmup=maybe"], "use auto, on or off"),
        (["--cuzk-proof-timeout=0"], "must be above 0"),
        (
            ["--cuzk-daemon=spwan"],
            "Invalid address 'spwan' from option --cuzk-daemon: use auto, spawn, ref or ADDR",
        ),
        (["--cuzk-addr=https://h:1"], "Invalid address 'https://h:1' from option --cuzk-addr"),
        (["--cuzk-sample-interval=0.001"], "the sampler needs 0.005s or more"),
    ],
)
def test_bad_values_name_their_source(pytester, args, message):
    with pytest.raises(pytest.UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve_settings(pytester.parseconfig(*args))


def test_bad_env_value_names_the_variable(pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_CUZK_CONCURRENCY", "0")
    with pytest.raises(pytest.UsageError, match="environment variable PYTEST_CUZK_CONCURRENCY"):
        resolve_settings(pytester.parseconfig())


def test_kind_maps_and_gates_parse(pytester):
    s = resolve_settings(
        pytester.parseconfig(
            "--cuzk-min-throughput=porep:50/h,winning-post:3600",
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

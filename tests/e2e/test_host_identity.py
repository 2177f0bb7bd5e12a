"""Runs record the identity a host is rented by (label, hostname, provider machine id) and warm-up peaks."""

from __future__ import annotations

import socket

import pytest
from helpers.support import PROVE_SOURCE

from pytest_cuzk.config.options import renamed
from pytest_cuzk.config.settings import resolve_settings
from pytest_cuzk.config.values import THIS_DAEMON, daemon_value
from pytest_cuzk.results.database import ResultsDB

MIB = 2**20


def test_a_reference_run_records_its_label_machine_id_hostname_and_warmup_peak(inner, tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    result = inner(
        {"test_prove": PROVE_SOURCE},
        "-k",
        "winning",
        "--cuzk-label=rig-a",
        "--cuzk-machine-id=22990",
        f"--cuzk-results-db={url}",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["test_prove[[]rig-a-winning-batch1-j1[]]*winning*1*1*2*0*"])
    with ResultsDB(url) as db:
        (row,) = db.rows()
    assert (row.run.label, row.run.host_id, row.run.host.hostname) == ("rig-a", "22990", socket.gethostname())
    # The daemon's VmHWM over SRS load, warm-up proof and PCE file: the engine's own tens of MiB.
    peak = row.test.warmup_rss_peak_bytes
    assert peak is not None and 10 * MIB < peak < 4096 * MIB, peak
    assert row.test.lowmem_warmup is False, "the reference engine warms up with its full config"


def test_identities_per_daemon_or_for_the_only_one(pytester: pytest.Pytester) -> None:
    s = resolve_settings(
        pytester.parseconfig(
            "--cuzk-daemon=10.0.0.1:9820,10.0.0.2:9820",
            "--cuzk-label=10.0.0.1:9820=rtx4090",
            "--cuzk-machine-id=10.0.0.1:9820=22990",
            "--cuzk-machine-id=10.0.0.2:9820=31337",
        )
    )
    assert s.host_ids == {"10.0.0.1:9820": "22990", "10.0.0.2:9820": "31337"}
    assert daemon_value(s.host_ids, "10.0.0.2:9820") == "31337"
    assert daemon_value(s.labels, "10.0.0.2:9820") is None, "no label given: the address names it"
    only = resolve_settings(pytester.parseconfig("--cuzk-label=rig-a", "--cuzk-machine-id=22990"))
    assert (only.labels, only.host_ids) == ({THIS_DAEMON: "rig-a"}, {THIS_DAEMON: "22990"})
    assert daemon_value(only.host_ids, "unix:///run/cuzk.sock") == "22990"


def test_a_bare_identity_with_several_daemons_is_a_usage_error(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfig("--cuzk-daemon=10.0.0.1:9820,10.0.0.2:9820", "--cuzk-machine-id=22990")
    with pytest.raises(
        pytest.UsageError, match="'22990' from option --cuzk-machine-id: with several daemons"
    ):
        resolve_settings(config)
    config = pytester.parseconfig("--cuzk-machine-id=10.0.0.1:9820=")
    with pytest.raises(pytest.UsageError, match="use ADDR=ID"):
        resolve_settings(config)


def test_the_former_name_still_works_and_says_to_use_the_new_one(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = pytester.parseconfig("--cuzk-host-id=22990")
    assert resolve_settings(config).host_ids == {THIS_DAEMON: "22990"}
    assert renamed(config) == [
        "option --cuzk-host-id is the former name of --cuzk-machine-id (cuzk_machine_id, "
        "PYTEST_CUZK_MACHINE_ID): use that"
    ]
    new = pytester.parseconfig("--cuzk-machine-id=31337", "--cuzk-host-id=22990")
    assert resolve_settings(new).host_ids == {THIS_DAEMON: "31337"}, "the new name wins"
    assert renamed(pytester.parseconfig("--cuzk-machine-id=31337")) == []
    monkeypatch.setenv("PYTEST_CUZK_HOST_ID", "4242")
    env = pytester.parseconfig()
    assert resolve_settings(env).host_ids == {THIS_DAEMON: "4242"}
    assert renamed(env)[0].startswith("environment variable PYTEST_CUZK_HOST_ID is the former name")


def test_a_run_under_the_former_name_warns(inner) -> None:
    # a cuzk test (a run that names a daemon and collects none is a usage error) that starts no daemon
    marked = "import pytest\n\n@pytest.mark.cuzk_kinds('winning')\ndef test_nothing():\n    pass\n"
    result = inner({"test_nothing": marked}, "--cuzk-host-id=22990")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*PytestDeprecationWarning: option --cuzk-host-id is the former name of*"])


def test_one_binary_under_two_configs_is_two_builds_and_compare_names_the_keys(inner, tmp_path, capsys):
    """A normal run and a slow_factor = 1.25 one were one build, and cuzk-perf compared it with itself."""
    from pytest_cuzk.fleet.cli import main

    url = f"sqlite:///{tmp_path / 'results.db'}"
    builds = []
    for name, text in (
        ("normal", "[logging]\nlevel = 'info'\n"),
        ("slow", "[ref.faults]\nslow_factor = 1.25\n"),
    ):
        (tmp_path / f"{name}.toml").write_text(text)
        args = ("-k", "winning", f"--cuzk-config={tmp_path / name}.toml", f"--cuzk-results-db={url}")
        result = inner({"test_prove": PROVE_SOURCE}, *args)
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines([f"cuzk: 1 daemon run written to the results database {url}"])
        with ResultsDB(url) as db:
            builds = [b for b, _, _ in db.builds()]
    assert len(builds) == 2 and all(" config=" in b for b in builds), builds
    assert main(["compare", "--db", url, *builds]) == 0
    out = capsys.readouterr().out
    changes = "logging.level: info -> unset; ref.faults.slow_factor: unset -> 1.25"
    assert f"one binary, two configs: {changes}" in out, out

"""Contract tests: each contact of ``core.compat`` with pytest-benchmark's and pytest-timeout's internals.

Each runs the installed plugin for real, so an upgrade that renames or moves what is read fails here.
"""

from __future__ import annotations

import json

import pytest
from helpers.support import not_an_xdist_worker

from pytest_cuzk.core import compat

pytestmark = pytest.mark.e2e  # each contract runs the other plugin in a real pytest run


@pytest.fixture(autouse=True)
def _inner_runs_are_not_xdist_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    not_an_xdist_worker(monkeypatch)  # under a worker pytest-benchmark would disable itself


BENCH = """
def test_bench(benchmark):
    benchmark(lambda: None)
"""


def _saved(pytester: pytest.Pytester, name: str) -> None:
    pytester.makepyfile(test_bench=BENCH)
    pytester.inline_run(f"--benchmark-save={name}", "-p", "no:cacheprovider").assertoutcome(passed=1)


def test_the_compare_and_save_options_are_read_by_their_names(pytester):
    assert compat.compare_asked(pytester.parseconfig()) is None
    assert compat.compare_asked(pytester.parseconfig("--benchmark-compare")) is True
    assert compat.compare_asked(pytester.parseconfig("--benchmark-compare=0001")) == "0001"
    assert compat.saving_as(pytester.parseconfig()) is None
    assert compat.saving_as(pytester.parseconfig("--benchmark-save=main")) == "main"
    assert compat.saving_as(pytester.parseconfig("--benchmark-autosave"))  # a tag of its own
    off = pytester.parseconfig("-p", "no:" + compat.BENCHMARK_PLUGIN)
    assert compat.compare_asked(off) is None and compat.saving_as(off) is None


def test_the_benchmark_plugin_is_found_by_its_name(pytester):
    assert pytester.parseconfigure().pluginmanager.hasplugin(compat.BENCHMARK_PLUGIN)


def test_the_compared_and_saved_runs_are_read_from_the_session(pytester):
    _saved(pytester, "one")
    _saved(pytester, "two")
    config = pytester.parseconfigure("--benchmark-compare=0001")
    (compared,) = compat.compared_runs(config)
    assert compared.path.endswith("0001_one.json")
    assert list(compared.benchmarks()) == ["test_bench.py::test_bench"]
    names = [r.path.rpartition("/")[2] for r in compat.saved_runs(config)]
    assert names == ["0001_one.json", "0002_two.json"]
    assert compat.storage_name(config).endswith(".benchmarks")


def test_keep_from_storage_stops_the_save_but_not_the_json(pytester):
    class Refuse:
        @pytest.hookimpl(wrapper=True, tryfirst=True)
        def pytest_sessionfinish(self, session):
            self.name = compat.keep_from_storage(session.config)
            return (yield)

    refuse = Refuse()
    pytester.makepyfile(test_bench=BENCH)
    pytester.inline_run("--benchmark-save=main", "--benchmark-json=out.json", plugins=[refuse])
    assert refuse.name == "main"
    assert not list(pytester.path.glob(".benchmarks/*/*.json"))
    assert json.loads((pytester.path / "out.json").read_text())["benchmarks"]


@pytest.mark.parametrize("whole", [True, False])
def test_benchmark_whole_keeps_a_benchmark_whose_setup_ended_the_rounds(pytester, whole):
    pytester.makepyfile(
        test_bench=f"""
        from pytest_cuzk.core.compat import benchmark_whole

        class Done(Exception):
            pass

        def test_rounds(benchmark):
            left = [3]
            def setup():
                left[0] -= 1
                if left[0] < 0:
                    raise Done
            try:
                benchmark.pedantic(lambda: None, setup=setup, rounds=10)
            except Done:
                if {whole}:
                    benchmark_whole(benchmark)
        """
    )
    pytester.inline_run("--benchmark-json=out.json").assertoutcome(passed=1)
    kept = json.loads((pytester.path / "out.json").read_text())["benchmarks"]
    assert [b["stats"]["rounds"] for b in kept] == ([3] if whole else [])


def test_a_pytest_timeout_stop_is_told_from_its_message(pytester):
    seen: list[bool] = []

    class Watch:
        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_makereport(self, item, call):
            if call.when == "call" and call.excinfo is not None:
                seen.append(compat.stopped_by_pytest_timeout(call.excinfo.value))
            return (yield)

    pytester.makepyfile(
        test_slow="import time\n\ndef test_slow():\n    time.sleep(30)\n\n"
        "def test_fails():\n    assert False\n"
    )
    pytester.inline_run("--timeout=1", "--timeout-method=signal", plugins=[Watch()])
    assert seen == [True, False]  # test_slow was stopped by pytest-timeout; test_fails failed on its own


def test_the_k_matcher_is_pytests_own(pytester):
    (item,) = pytester.getitems("def test_one_porep():\n    pass\n")
    names = compat.keyword_names(item)
    assert "test_one_porep" in names
    assert compat.keyword_selects("PoRep and not winning", names), "case-insensitive, by substring"
    assert not compat.keyword_selects("winning or (porep and two)", names)

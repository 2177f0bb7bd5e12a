"""What a run that uses cuzk sets up: settings checked at once, the packaged suite, the session, its sinks.

``start_session`` runs at configure when a cuzk option is set; ``session_of`` makes the session
on first need in any other run (a test asked for a cuzk fixture), in place of the plugin's
``Dormant`` stand-in.
"""

from __future__ import annotations

import pytest

from pytest_cuzk.config.options import renamed
from pytest_cuzk.config.settings import check_paths, resolve_settings
from pytest_cuzk.core.outcome import as_usage_error
from pytest_cuzk.session import CuzkSession

__all__ = ["CUZK_SESSION", "DORMANT", "SUITE", "session_of", "start_session"]

CUZK_SESSION = pytest.StashKey[CuzkSession]()
DORMANT = "cuzk_dormant"  # the plugin name of the stand-in a woken session replaces
SUITE = "pytest_cuzk.suite"


def start_session(config: pytest.Config) -> None:
    """Resolve and check every setting (a usage error names the bad one), then register the session."""
    settings = resolve_settings(config)
    check_paths(settings)
    for line in renamed(config):
        config.issue_config_time_warning(pytest.PytestDeprecationWarning(line), stacklevel=2)
    from pytest_cuzk.backends.choice import check

    with as_usage_error():  # a daemon's mistake (no binary, a preset that disagrees) is one line
        check(settings)
    no_paths = config.args_source == pytest.Config.ArgsSource.INVOCATION_DIR
    if config.option.cuzk_daemon is not None:
        from pytest_cuzk.run.selection import CollectionCheck

        config.pluginmanager.register(CollectionCheck(config), "cuzk_collection_check")
        if no_paths:  # no test paths on the command line nor testpaths in the ini: the packaged suite
            config.option.pyargs = True
            config.args = [SUITE]
    session = _register(config, CuzkSession(config, settings))
    from pytest_cuzk.verdicts.baseline import PLUGIN, Baseline

    with as_usage_error():
        baseline = Baseline(config, settings)
    config.pluginmanager.register(baseline, PLUGIN)
    recorder = None
    if settings.results_db:
        from pytest_cuzk.sinks.recording import Recorder

        recorder = Recorder(settings, session.worker, session.backend, lambda: len(session.choice.every))
    if settings.gates_asked:
        from pytest_cuzk.verdicts.gates import PLUGIN as GATES
        from pytest_cuzk.verdicts.gates import Gates

        recorded = recorder.recorded if recorder is not None else None  # the baseline build's other runs
        with as_usage_error():
            config.pluginmanager.register(Gates(config, settings, baseline, recorded), GATES)
    if settings.ab is not None and settings.compare_fail:
        from pytest_cuzk.verdicts.abgate import ABGate

        config.pluginmanager.register(ABGate(settings), "cuzk_ab_gate")
    if settings.manifest is not None:
        from pytest_cuzk.data.manifest import load_manifest

        with as_usage_error():
            load_manifest(settings.manifest)
    if settings.plots:
        from pytest_cuzk.sinks.plots import Plotter

        config.pluginmanager.register(Plotter(settings.plots), "cuzk_plots")
    if settings.html:
        from pytest_cuzk.html.run import RunReport

        config.pluginmanager.register(RunReport(config, session, settings.html), "cuzk_html")
    if recorder is not None:
        with as_usage_error():
            recorder.check()
        config.pluginmanager.register(recorder, "cuzk_recorder")


def session_of(config: pytest.Config) -> CuzkSession:
    """The run's session, made and registered (in place of the ``Dormant``) on first need."""
    session = config.stash.get(CUZK_SESSION, None)
    if session is None:
        session = _register(config, CuzkSession(config))
        dormant = config.pluginmanager.get_plugin(DORMANT)
        if dormant is not None:
            config.pluginmanager.unregister(dormant)
    return session


def _register(config: pytest.Config, session: CuzkSession) -> CuzkSession:
    config.stash[CUZK_SESSION] = session
    config.pluginmanager.register(session, "cuzk_session")
    session.interrupts.install()  # SIGTERM then ends the run as Ctrl-C does; a second Ctrl-C waits
    # Restored after every plugin's pytest_unconfigure (pytest's own collects garbage there), so a
    # Ctrl-C that lands in the last teardown is acknowledged too, not a raw traceback.
    config.add_cleanup(session.interrupts.restore)
    return session

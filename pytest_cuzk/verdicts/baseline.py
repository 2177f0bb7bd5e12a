"""The run a relative gate compares with: there before any daemon starts, named, and never a failed run.

A gate that compares with nothing is a gate that is off, so ``--cuzk-compare-fail`` with no
run to compare with, and a ``--benchmark-compare`` that names no saved run, stop the run as
usage errors. A run that failed (a gate, a proof, or Ctrl-C) is not saved by
``--benchmark-save`` or ``--benchmark-autosave``: saved, it would be the next run's baseline,
and the same regression would pass against itself. A run saved too imprecise for the gate it will
serve (its own ``--cuzk-compare-fail`` limits, else ``plan.SAVED_PRECISION``) is saved with a
warning naming the smallest limit it can gate, and under ``--cuzk-compare-unresolved=fail`` is not
saved: a baseline that decides nothing is no baseline.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_cuzk.config.settings import Settings
from pytest_cuzk.core import compat
from pytest_cuzk.core.compat import SavedRun
from pytest_cuzk.core.errors import CuzkError, CuzkWarning
from pytest_cuzk.measure import stats
from pytest_cuzk.measure.figures import METRICS, Figures
from pytest_cuzk.run.plan import GATE_SHARE, Plan
from pytest_cuzk.verdicts.runspread import saved_runs_beside
from pytest_cuzk.vocab.daemonconfig import config_changes

if TYPE_CHECKING:
    from pytest_cuzk.run.cases import Case
    from pytest_cuzk.run.waves import CaseResult

__all__ = ["PLUGIN", "Baseline", "compared_with", "describe_run", "load_baseline"]

PLUGIN = "cuzk_baseline"


def load_baseline(path: Path) -> SavedRun:
    """A pytest-benchmark JSON file's run (``--cuzk-baseline``)."""
    import json

    try:
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict) or not isinstance(data.get("benchmarks", []), list):
            raise ValueError("not a pytest-benchmark run (no list of benchmarks)")
        return SavedRun(str(path), data)
    except (OSError, ValueError) as exc:
        raise CuzkError(
            f"cannot read --cuzk-baseline {path}: {exc}; pass a JSON file written by --benchmark-json "
            "or --benchmark-save"
        ) from exc


def describe_run(run: SavedRun, current: Mapping[str, Mapping[str, str]] | None = None) -> str:
    """``FILE (build ..., saved DATE)``: which run a comparison was made with.

    Against ``current`` (this run's builds and their config keys), a saved run of the same binary
    under another config says which keys differ: it is another build, not the same one.
    """
    info = run.data.get("machine_info")
    cuzk = info.get("cuzk") if isinstance(info, Mapping) else None
    build = cuzk.get("daemon") if isinstance(cuzk, Mapping) else None
    when = str(run.data.get("datetime") or "date unknown").replace("T", " ").partition(".")[0]
    saved = cuzk.get("daemon_config") if isinstance(cuzk, Mapping) else None
    changes = config_changes(saved, current) if isinstance(saved, Mapping) and current else []
    differs = f"; config differs: {', '.join(changes)}" if changes else ""
    return f"{run.path} (build {build or 'unknown'}, saved {when}{differs})"


class Baseline:
    """The compared run of a run that asked for cuzk, and the guard that keeps failed runs out of storage."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        """Read ``--cuzk-baseline`` now, so a bad file stops the run before any daemon starts."""
        self.config = config
        self.settings = settings
        self.file = load_baseline(settings.baseline) if settings.baseline else None
        self.unsaved: str | None = None  # the name a failed run would have been saved under
        self.imprecise: list[str] = []  # the cases saved short of the precision their gate needs
        self.unsaved_why = "this run failed or was interrupted: {}; the saved baseline stays as it was"
        compared = self.file is not None or settings.ab is not None or compat.compare_asked(config)
        if settings.compare_fail and not compared:  # with --cuzk-ab, the baseline daemon is the comparison
            raise CuzkError(
                "--cuzk-compare-fail needs a run to compare with: pass --benchmark-compare=NAME (a run "
                "saved with --benchmark-save=NAME), --cuzk-baseline FILE, or --cuzk-ab=SPEC (a baseline "
                "build measured beside this one)"
            )

    def run(self) -> SavedRun | None:
        """``--cuzk-baseline``, else the newest run ``--benchmark-compare`` loaded."""
        runs = compat.compared_runs(self.config)
        return self.file or (runs[-1] if runs else None)

    def runs_beside(self) -> list[SavedRun]:
        """Every saved run beside the compared one: the baseline build's runs, and the host's spread."""
        if self.file is not None:
            return list(saved_runs_beside(Path(self.file.path)))
        return compat.saved_runs(self.config)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """pytest-benchmark has loaded the compared runs by now: one that names none is a usage error."""
        asked = compat.compare_asked(self.config)
        if self.file is not None or asked is None or compat.compared_runs(self.config):
            return
        if not (self.settings.compare_fail or isinstance(asked, str)):
            return  # a bare --benchmark-compare with nothing saved yet, and no gate on it
        saved = [Path(run.path).stem for run in compat.saved_runs(self.config)]
        what = "--benchmark-compare" + (f"={asked}" if isinstance(asked, str) else "")
        raise pytest.UsageError(
            f"{what} names no saved run in {compat.storage_name(self.config)} "
            f"(saved: {', '.join(saved) or 'none'}): save the baseline first with --benchmark-save=NAME "
            "and compare with --benchmark-compare='*_NAME', or pass --cuzk-baseline FILE"
        )

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> Any:
        """Before pytest-benchmark saves: a run that failed or was interrupted is no baseline."""
        strict = self.settings.compare_unresolved == "fail"
        if exitstatus != pytest.ExitCode.OK:
            self.unsaved = compat.keep_from_storage(self.config)
        elif strict and self.imprecise:
            self.unsaved = compat.keep_from_storage(self.config)
            self.unsaved_why = (
                f"{', '.join(dict.fromkeys(self.imprecise))} too imprecise for the gate it would serve: "
                "this run is {} (--cuzk-compare-unresolved=fail)"
            )
        return (yield)

    @pytest.hookimpl(trylast=True)
    def pytest_cuzk_case_finished(
        self, item: pytest.Item, case: Case, figures: Figures, result: CaseResult
    ) -> None:
        """A case saved short of the precision its gate needs says the smallest limit it can gate."""
        if compat.saving_as(self.config) is None:
            return
        for note in imprecision(figures, Plan.of(self.settings, saving=True).precision):
            self.imprecise.append(item.name)
            item.warn(CuzkWarning(f"{item.name}: {note}"))

    def lines(self, current: Mapping[str, Mapping[str, str]] | None = None) -> list[str]:
        """What the summary says of the baseline: the run compared with, and a save refused.

        ``current`` holds this run's builds and their config keys, to say which keys differ.
        """
        run = self.run()
        lines = [f"compared with {describe_run(run, current)}"] if run is not None else []
        if self.unsaved:
            lines.append(self.unsaved_why.format(f"not saved as a baseline ({self.unsaved!r})"))
        return lines


def imprecision(figures: Figures, precision: tuple[tuple[str, float], ...]) -> list[str]:
    """Why a run saved as a baseline cannot serve its gate: each gated figure's interval too wide for it."""
    notes = []
    for name, want in precision:
        metric = METRICS[name]
        if metric.sample is None or metric.estimator is None:
            continue
        series = figures.samples.series(metric.sample)
        half = stats.half_width_pct(series, metric.estimator)
        if half is not None and half <= want:
            continue
        limit = f"a {want / GATE_SHARE:g}% {name} gate"
        reached = "no 95% interval" if half is None else f"{name} ±{half:.1f}% (95%)"
        can = "" if half is None else f": it can gate a limit of {math.ceil(half / GATE_SHARE)}% or more"
        notes.append(
            f"saved as a baseline with {reached}, short of the ±{want:.1f}% {limit} needs{can}; measure "
            "longer (--cuzk-case-budget) or on a quieter host"
        )
    return notes


def compared_with(config: pytest.Config) -> Baseline | None:
    """The run's ``Baseline`` plugin, where the run asked for cuzk."""
    plugin = config.pluginmanager.get_plugin(PLUGIN)
    return plugin if isinstance(plugin, Baseline) else None

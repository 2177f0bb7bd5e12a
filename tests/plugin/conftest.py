"""In-process pytest runs against fake daemons: the plugin's own behaviour in a fraction of a second."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy  # noqa: F401  (loaded once here: pytester's in-process runs cannot re-import it)
import pytest
import scipy.stats  # noqa: F401  (and the numpy submodules it loads)
from helpers.support import QUICK_PLAN, not_an_xdist_worker

from pytest_cuzk.backends.choice import DaemonChoice
from pytest_cuzk.backends.fake import FakeBehaviour, FakeDaemon
from pytest_cuzk.backends.protocol import Mode


class SampledFake(FakeDaemon):
    """A fake daemon whose 'process' is the test process, so the memory sampler has a pid to watch."""

    @property
    def pid(self) -> int | None:
        return os.getpid()

    def unsampled(self) -> str | None:
        return None


class FakeChoice:
    """Answers pytest_cuzk_make_backends with the given fake daemons."""

    def __init__(
        self, daemons: tuple[FakeDaemon, ...], mode: Mode = "fake", control: FakeDaemon | None = None
    ) -> None:
        self.daemons = daemons
        self.mode = mode
        self.control = control

    def pytest_cuzk_make_backends(self, config, settings, workspace) -> DaemonChoice:
        return DaemonChoice(self.mode, "fake daemons of this test", self.daemons, self.control)


FakeRun = Callable[..., tuple[pytest.RunResult, list[FakeDaemon]]]


@pytest.fixture
def fake_run(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeRun:
    """``fake_run(files, *args, labels=..., behaviour=..., die_after=..., plugins=..., ab=..., sampled=...)``.

    Writes the test files, runs pytest in this process against fake daemons (one per label)
    and returns the result with the daemons, for a look at what happened to them. ``ab``, the
    behaviour of an A/B control daemon (labelled ``control``, listed last), adds one.
    ``labels`` defaults to ``("local",)``; ``sampled`` makes the daemons ``SampledFake``: their
    memory figures are the test process's.
    """

    def run(
        files: dict[str, str],
        *args: str,
        labels: tuple[str, ...] = ("local",),
        behaviour: dict[str, FakeBehaviour] | None = None,
        die_after: int | None = None,
        mode: Mode = "fake",
        plugins: tuple[object, ...] = (),
        no_reraise_ctrlc: bool = False,
        ab: dict[str, FakeBehaviour] | None = None,
        sampled: bool = False,
    ) -> tuple[pytest.RunResult, list[FakeDaemon]]:
        not_an_xdist_worker(monkeypatch)
        if files:
            pytester.makepyfile(**files)
        fake = SampledFake if sampled else FakeDaemon
        daemons = tuple(fake(label, tmp_path / f"fake-{label}", behaviour, die_after) for label in labels)
        # importlib mode: an inner test_prove must not collide with the suite's module of that name
        inner = ("-p", "no:cacheprovider", "--import-mode=importlib", *QUICK_PLAN, *args)
        control = FakeDaemon("control", tmp_path / "fake-control", ab) if ab is not None else None
        fakes = [FakeChoice(daemons, mode, control), *plugins]
        result = pytester.runpytest(*inner, plugins=fakes, no_reraise_ctrlc=no_reraise_ctrlc)
        return result, [*daemons, *([control] if control else [])]

    return run

"""Every long wait is shown: stage, time taken and timeout; quiet when short; a line per 15 s in CI logs."""

from __future__ import annotations

import contextlib
import io

import pytest

from pytest_cuzk.core import progress
from pytest_cuzk.core.progress import ProgressLine


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(progress.time, "monotonic", fake)
    return fake


def _line(out: io.StringIO, tty: bool) -> ProgressLine:
    return ProgressLine(lambda: contextlib.nullcontext(out), tty=tty)


def test_a_ci_log_gets_a_line_every_15_seconds_of_a_long_wait_and_none_of_a_short_one(clock):
    out = io.StringIO()
    line = _line(out, tty=False)
    with line.stage("local: loading the porep SRS", 900):
        for _ in range(40):
            clock.now += 1
            line.tick()
    with line.stage("local: winning warm-up proof"):
        clock.now += 5
        line.tick()
    assert out.getvalue().splitlines() == [
        "cuzk: local: loading the porep SRS: 15 s of 900 s",
        "cuzk: local: loading the porep SRS: 30 s of 900 s",
    ]


def test_a_terminal_gets_one_rewritten_line_that_ends_done(clock):
    out = io.StringIO()
    line = _line(out, tty=True)
    with line.stage("porep-batch1-j1: proving"):
        clock.now += 0.5
        line.tick("0 of 2 proofs done")  # too early: nothing
        clock.now += 0.5
        line.tick("1 of 2 proofs done")
        clock.now += 1
        line.tick("2 of 2 proofs done")
    assert out.getvalue() == (
        "cuzk: porep-batch1-j1: proving (1 of 2 proofs done): 1 s\x1b[K"
        "\rcuzk: porep-batch1-j1: proving (2 of 2 proofs done): 2 s\x1b[K"
        "\rcuzk: porep-batch1-j1: proving: 2 s: done\x1b[K\n"
    )


def test_a_download_says_its_end_once(clock):
    out = io.StringIO()
    line = _line(out, tty=False)
    line.download("c1.json", 0, 2_000_000)
    line.download("c1.json", 2_000_000, 2_000_000)
    assert out.getvalue().splitlines() == ["downloading c1.json: 2.0/2.0 MB (100%)"]

"""How precisely a case is measured: a saved run as precisely as a gated one."""

from __future__ import annotations

import pytest

from pytest_cuzk.config.settings import resolve_settings
from pytest_cuzk.run.plan import SAVED_PRECISION, Plan


def test_a_saved_run_is_measured_as_precisely_as_a_gated_one(pytester):
    settings = resolve_settings(pytester.parseconfig())
    assert Plan.of(settings).precision == ()
    assert Plan.of(settings, saving=True).precision == SAVED_PRECISION
    assert (("throughput", pytest.approx(5 / 3)),) == SAVED_PRECISION
    gated = resolve_settings(pytester.parseconfig("--cuzk-compare-fail=p50:8%,rss_peak:10%"))
    # the gate's own, peaks unsampled
    assert Plan.of(gated, saving=True).precision == (("p50", pytest.approx(8 / 3)),)

"""The report's charts as SVG text: what their axes say."""

from __future__ import annotations

import re

from pytest_cuzk.html.charts import scenario_chart
from pytest_cuzk.scenarios.records import PriorityFigures


def _ticks(svg: str, axis: str) -> list[str]:
    """The tick labels of one axis, in order (text stays text in the page's SVG)."""
    return re.findall(rf'<g id="{axis}tick_\d+">.*?<text[^>]*>([^<]+)</text>', svg, re.S)


def test_the_post_proof_axis_counts_proofs_in_whole_numbers():
    record = PriorityFigures(
        test="test_priority[winning-under-porep]", label="local", kind="winning", background_kind="porep",
        slo_s=1.0, idle_latency_p50_s=0.1, latencies_s=(0.2, 0.3, 0.25, 0.4),
    )  # fmt: skip
    ticks = _ticks(str(scenario_chart(record, "t")), "x")
    assert ticks, "the x axis has ticks"
    assert all(re.fullmatch(r"\d+", t) for t in ticks), ticks

"""The memory chart's wave labels: as many as fit side by side at the size it is drawn, none overlapping."""

from __future__ import annotations

import itertools
import re
from xml.etree import ElementTree

import pytest
from helpers.support import QUIET_MEMORY
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

from pytest_cuzk.html.charts import CHART_WIDTH_IN, memory_chart
from pytest_cuzk.measure.memory import MemoryReport
from pytest_cuzk.sinks.plots import memory_figure

MIB = 1 << 20


def report(marks: list[tuple[float, str]], seconds: float = 120.0) -> MemoryReport:
    t_s = [i * 0.5 for i in range(int(seconds / 0.5) + 1)]
    rss = [int(200 * MIB + 10 * MIB * (t % 7)) for t in t_s]  # a saw: a wave's memory, then freed
    series = dict(t_s=t_s, rss_bytes=rss, sys_available_bytes=[1 << 34] * len(t_s), vram_bytes=None,
                  device_used_bytes=None, marks=marks)  # fmt: skip
    return MemoryReport.from_dict({**QUIET_MEMORY, "series": series})


def waves(starts: list[float]) -> list[tuple[float, str]]:
    return [(t, f"wave {n}") for n, t in enumerate(starts, 1)]


def drawn(fig: Figure, width_in: float) -> list[tuple[str, float, float]]:
    """Each wave label the figure draws at ``width_in`` inches wide: its text and its left and right edges."""
    fig.set_size_inches(width_in, fig.get_figheight())
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    shown = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().startswith("wave ")]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in shown]
    return sorted(((text, box.x0, box.x1) for text, box in boxes), key=lambda b: b[1])


# A long case: the SRS load, then 60 waves at uneven pace (a burst of quick ones, then slower);
# and 20 waves a second apart in two minutes.
MANY = waves([20.0 + 0.15 * i for i in range(20)] + [23.0 + 1.6 * i for i in range(40)])
CLOSE = waves([30.0 + 1.0 * i for i in range(20)])


@pytest.mark.parametrize("marks", [MANY, CLOSE], ids=["60-waves", "20-close-waves"])
@pytest.mark.parametrize("width_in", [10.0, CHART_WIDTH_IN], ids=["png", "html"])
def test_many_waves_are_labelled_without_overlap(marks, width_in):
    labels = drawn(memory_figure(report(marks), "many waves"), width_in)
    pairs = itertools.pairwise(labels)
    overlaps = [f"{a} ends at {a_end:.0f} px, {b} starts at {b_start:.0f} px"
                for (a, _, a_end), (b, b_start, _) in pairs if b_start < a_end]  # fmt: skip
    assert not overlaps, f"labels overlap at {width_in} in: {overlaps}"
    names = [text for text, _, _ in labels]
    assert names[:1] == ["wave 1"], f"the first wave is labelled: {names}"
    assert 5 <= len(names) < len(marks), f"thinned to those that fit, not to none: {names}"


def test_waves_far_apart_are_all_labelled():
    far = waves([10.0, 50.0, 90.0])
    labels = drawn(memory_figure(report(far), ""), CHART_WIDTH_IN)
    assert [text for text, _, _ in labels] == ["wave 1", "wave 2", "wave 3"]


def svg_labels(svg: str) -> list[tuple[str, float, float]]:
    """Each wave label of an SVG chart: its text, where it stands (x) and its font size."""
    out = []
    for text in ElementTree.fromstring(svg).iter("{http://www.w3.org/2000/svg}text"):
        if (text.text or "").startswith("wave "):
            size = re.search(r"font-size: ([\d.]+)px", text.get("style", ""))
            x = re.search(r"translate\(([\d.]+) ", text.get("transform", ""))
            assert size and x, ElementTree.tostring(text)
            out.append((text.text or "", float(x[1]), float(size[1])))
    return out


@pytest.mark.parametrize("marks", [MANY, CLOSE], ids=["60-waves", "20-close-waves"])
def test_the_pages_chart_draws_its_wave_labels_a_label_apart(marks):
    """The page's SVG chart is narrower than the PNG: its labels are thinned at its own size."""
    labels = svg_labels(str(memory_chart(report(marks), "c")))
    assert [name for name, _, _ in labels[:1]] == ["wave 1"], "the first wave is labelled"
    assert 5 <= len(labels) < len(marks), [name for name, _, _ in labels]
    for (name, x, _), (next_name, next_x, size) in itertools.pairwise(labels):
        assert next_x - x >= size, f"{name} at {x} px, {next_name} at {next_x} px: they overlap"

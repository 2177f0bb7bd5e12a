"""The run report (--cuzk-html) of in-process runs against fake daemons, as a headless browser shows it."""

from __future__ import annotations

import os

import pytest
from helpers import browser as chromium
from helpers.fakenvml import FakeNvml
from helpers.support import PROVE_SOURCE

from pytest_cuzk.backends.fake import FakeBehaviour

browser = chromium.browser
CASES = ("-k", "winning or wpost or snap", "--cuzk-batch-sizes=1")
NAMES = ["test_prove[snap-batch1-j1]", "test_prove[winning-batch1-j1]", "test_prove[wpost-batch1-j1]"]

SAMPLED_PER_WORKER = """
import os
from pytest_cuzk.backends.choice import DaemonChoice
from pytest_cuzk.backends.fake import FakeDaemon

class SampledFake(FakeDaemon):
    @property
    def pid(self):
        return os.getpid()  # the worker serves the fake, so its process stands in for the daemon's

def pytest_cuzk_make_backends(config, settings, workspace):
    daemon = SampledFake("local", workspace.subdir(os.environ.get("PYTEST_XDIST_WORKER", "master")))
    return DaemonChoice("fake", "one sampled fake daemon per worker", (daemon,))
"""


def text(element) -> str:
    """An element's text, also inside a closed <details>."""
    return element.get_attribute("textContent")


def test_the_report_shows_each_case_why_one_failed_and_what_did_not_run(fake_run, tmp_path, browser):
    page = tmp_path / "out" / "report.html"
    page.parent.mkdir()
    gate = "--cuzk-min-throughput=winning:1000000000/h"
    behaviour = {"snap": FakeBehaviour(fail="out of GPU memory")}
    result, _ = fake_run(
        {"test_prove": PROVE_SOURCE}, *CASES, gate, f"--cuzk-html={page}", behaviour=behaviour
    )
    result.assert_outcomes(passed=1, failed=1, errors=1)
    result.stdout.fnmatch_lines([f"cuzk HTML report: {page}"])

    browser.open(page)
    assert browser.fetched() == [], "the page loads nothing: it opens offline"
    assert browser.one("#verdict").text == "Failed"
    rows = {r.get_attribute("data-nodeid").rpartition("::")[2]: r for r in browser.all("#summary tr.case")}
    assert sorted(rows) == NAMES, "a row per case"
    outcome = {name: row.get_attribute("class").split()[-1] for name, row in rows.items()}
    assert outcome == dict(zip(NAMES, ["error", "failed", "passed"], strict=True))
    shade = {
        n: r.find_element("tag name", "td").value_of_css_property("background-color") for n, r in rows.items()
    }
    assert shade[NAMES[1]] != shade[NAMES[2]], "the failed case is highlighted"
    why = browser.one("#summary tr.why.failed").text
    assert "is below the minimum 1e+09/h for winning (--cuzk-min-throughput)" in why
    not_run = browser.one("#not-run-table").text
    assert "test_prove[snap-batch1-j1]" in not_run and "out of GPU memory" in not_run

    charts = browser.all("section.case figure[data-chart=latency] svg")
    assert len(charts) == 2, "a latency chart per case that proved"
    assert all(c.size["width"] > 400 and c.size["height"] > 100 for c in charts), "laid out, not collapsed"
    assert browser.one("figure[data-chart=cold-start] svg").size["height"] > 50
    assert "cuzk_proofs_completed_total" in browser.one("#metrics-table").text
    wpost = browser.one("section.case.passed")
    assert "throughput_proofs_per_hour" in text(wpost.find_element("css selector", "details.figures"))
    assert "Memory not sampled" in wpost.text, (
        "the fake daemon has no process to sample, and the page says so"
    )
    browser.screenshot(tmp_path / "report.png")


@pytest.mark.e2e  # a subprocess pytest run on real daemons: the end-to-end tier
def test_an_xdist_run_gives_one_report_with_every_workers_memory_charts(pytester, monkeypatch, browser):
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeconftest(SAMPLED_PER_WORKER)
    pytester.makepyfile(test_a=PROVE_SOURCE, test_b=PROVE_SOURCE)
    page = pytester.path / "report.html"
    xdist = (
        "-n",
        "2",
        "--dist",
        "loadfile",
        "-k",
        "winning or wpost",
        "--cuzk-batch-sizes=1",
        "--cuzk-concurrency=1",
    )
    more = ("--cuzk-proofs=3", "--cuzk-max-proofs=3", f"--cuzk-html={page}", "-p", "no:cacheprovider")
    result = pytester.runpytest_subprocess(*xdist, *more, timeout=120)
    result.assert_outcomes(passed=4)

    browser.open(page)
    rows = [r.get_attribute("data-nodeid") for r in browser.all("#summary tr.case")]
    assert sorted(rows) == sorted(
        f"test_{f}.py::test_prove[{k}-batch1-j1]" for f in "ab" for k in ("winning", "wpost")
    )
    charts = browser.all("figure[data-chart=memory] svg")
    assert len(charts) == 4, "each worker's memory series reached the controller"
    for chart in charts:
        labels = [text(t) for t in chart.find_elements("tag name", "text")]
        assert {"wave 1", "wave 2", "wave 3"} <= set(labels), "the proof waves are marked"
    counters = dict(line.rsplit(" ", 1) for line in browser.one("#metrics-table tbody").text.splitlines())
    assert counters["local cuzk_proofs_completed_total"] == "+16", (
        "both workers' counters: 4 x (1 warm-up + 3)"
    )
    for case in browser.all("section.case"):
        tiles = {t.find_element("class name", "k").text: t.find_element("class name", "v").text
                 for t in case.find_elements("class name", "tile")}  # fmt: skip
        assert tiles["RSS peak"].endswith("MiB"), tiles


# Each column's box, and the scroll box (the table's wrapper) it must fit in, as the browser laid them out.
COLUMNS = """
const table = document.querySelector('#summary'), wrap = table.parentElement.getBoundingClientRect();
const box = e => { const r = e.getBoundingClientRect(); return [e.textContent.trim(), r.left, r.right]; };
return {wrap: [wrap.left, wrap.right], viewport: document.documentElement.clientWidth,
        page: document.documentElement.scrollWidth, heads: [...table.querySelectorAll('thead th')].map(box),
        cells: [...table.querySelectorAll('tbody tr.case')].map(tr => [...tr.cells].map(box))};
"""


def test_every_results_column_is_in_view_at_1400_px(fake_run, tmp_path, browser, monkeypatch):
    FakeNvml(monkeypatch).processes = [(os.getpid(), 3 << 30)]  # a VRAM peak in its column
    page = tmp_path / "report.html"
    # The widest rows a run gives: every figure filled, a daemon's label in the case's name, a
    # control row and an A/B line under each case, a failed case's reason.
    args = ("-k", "winning", "--cuzk-batch-sizes=1", "--cuzk-ab=ref", "--cuzk-proofs=10")
    gate = "--cuzk-min-throughput=winning:1000000000/h"
    result, _ = fake_run(
        {"test_prove": PROVE_SOURCE}, *args, "--cuzk-max-proofs=10", gate, f"--cuzk-html={page}",
        labels=("local", "attached"), ab={}, sampled=True,
    )  # fmt: skip
    result.assert_outcomes(failed=2)
    browser.open(page)
    with browser.window(1400, 900) as window:
        laid = window.execute_script(COLUMNS)
    left, right = laid["wrap"]
    heads = [name for name, _, _ in laid["heads"]]
    assert {"RSS peak", "VRAM peak", "GPU ms", "time"} <= set(heads), heads
    assert laid["page"] <= laid["viewport"] == 1400, "the page itself does not scroll sideways"
    outside = [f"{n} {x0:.0f}-{x1:.0f}" for n, x0, x1 in laid["heads"] if x0 < left - 1 or x1 > right + 1]
    assert not outside, f"columns past the table's box {left:.0f}-{right:.0f} px, behind a scroll: {outside}"
    for row in laid["cells"]:
        assert len(row) == len(heads) and all(left - 1 <= x0 and x1 <= right + 1 for _, x0, x1 in row), row
    assert any(value.endswith("GiB") for value, _, _ in laid["cells"][0]), "the VRAM peak is a figure"


def test_on_a_narrow_screen_the_results_scroll_with_the_case_names_in_view(fake_run, tmp_path, browser):
    page = tmp_path / "report.html"
    args = ("-k", "winning", "--cuzk-batch-sizes=1", f"--cuzk-html={page}")
    fake_run({"test_prove": PROVE_SOURCE}, *args)[0].assert_outcomes(passed=1)
    browser.open(page)
    with browser.window(700, 900) as window:
        wrap = browser.one("#summary").find_element("xpath", "..")
        window.execute_script("arguments[0].scrollLeft = arguments[0].scrollWidth", wrap)
        laid = window.execute_script(COLUMNS)
    left, right = laid["wrap"]
    assert laid["page"] <= laid["viewport"] == 700, "the table scrolls in its box, not the whole page"
    (row,) = laid["cells"]
    name, x0, _ = row[1]
    assert name == "test_prove[winning-batch1-j1]", row
    assert abs(x0 - left) <= 2, f"scrolled to its end, the case's name is at {x0:.0f} px, not {left:.0f} px"
    *_, (_, last0, last1) = row
    assert left <= last0 and last1 <= right + 1, "scrolled to the last column"


def test_a_directory_is_not_a_report_path(fake_run, tmp_path):
    result, _ = fake_run({}, f"--cuzk-html={tmp_path}")
    assert result.ret == 4
    result.stderr.fnmatch_lines([f"*--cuzk-html {tmp_path} is a directory: give a file, e.g.*"])


def test_a_report_path_in_no_directory_is_a_usage_error_and_creates_none(fake_run, tmp_path):
    page = tmp_path / "typo" / "dir" / "r.html"
    result, _ = fake_run({}, f"--cuzk-html={page}")
    assert result.ret == 4
    result.stderr.fnmatch_lines([f"*--cuzk-html {page}: the directory {page.parent} does not exist*"])
    assert not (tmp_path / "typo").exists()


def test_the_report_names_the_baseline_it_compared_with(fake_run, tmp_path):
    storage = f"--benchmark-storage=file://{tmp_path / 'benchmarks'}"
    args = ("-k", "winning", "--cuzk-batch-sizes=1", storage, "--cuzk-window=0.001")
    fake_run({"test_prove": PROVE_SOURCE}, *args, "--benchmark-save=main")[0].assert_outcomes(passed=1)
    page = tmp_path / "report.html"
    gate = ("--benchmark-compare=*_main", "--cuzk-compare-fail=throughput:900%", f"--cuzk-html={page}")
    fake_run({}, *args, *gate)[0].assert_outcomes(passed=1)
    html = page.read_text()
    assert "<dt>baseline</dt>" in html
    assert "0001_main.json (build fake daemon, saved " in html
    assert "at least 2 and at most 2 proofs per case" in html, "--cuzk-proofs is a minimum"

"""A reference-engine run's report, the results-database page (in a headless browser) and the CI templates."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import browser as chromium
from helpers import pg
from helpers.support import PROVE_SOURCE
from test_perf import FLEET, RTX, store

from pytest_cuzk.config.settings import OPTIONS
from pytest_cuzk.fleet.cli import main
from pytest_cuzk.results.database import ResultsDB

db_url, pg_server = pg.db_url, pg.pg_server
browser = chromium.browser
# The 4090's latest build loses a fifth of its PoRep batch-1 throughput.
SLOWER = [*FLEET, (RTX, "4090", "31337", "sha256:slow0004", 4, [("porep", 1, 1, 30.0, 100.0, 250)])]


def text(element) -> str:
    return element.get_attribute("textContent")


@pytest.mark.e2e  # a subprocess pytest run on real daemons: the end-to-end tier
def test_a_reference_engine_run_shows_its_build_and_memory_over_time(inner, tmp_path, browser):
    page = tmp_path / "ref.html"
    args = (
        "-k",
        "test_prove and winning",
        "--cuzk-batch-sizes=1",
        "--cuzk-proofs=3",
        "--cuzk-max-proofs=3",
        "--cuzk-window=0.01",  # a window per wave: three to draw
        f"--cuzk-html={page}",
    )
    result = inner({"test_prove": PROVE_SOURCE}, *args)
    result.assert_outcomes(passed=1)

    browser.open(page)
    assert browser.fetched() == []
    assert browser.one(".card.daemon dd.build").text.startswith("cuzk-ref "), "the daemon build"
    assert browser.one("#verdict").text == "Passed"
    (row,) = browser.all("#summary tr.case")
    assert row.get_attribute("data-nodeid").endswith("test_prove[winning-batch1-j1]")
    chart = browser.one("section.case figure[data-chart=memory] svg")
    assert chart.size["width"] > 400 and chart.size["height"] > 150
    labels = {text(t) for t in chart.find_elements("tag name", "text")}
    assert {"wave 1", "wave 2", "wave 3"} <= labels and any(x.startswith("peak ") for x in labels)
    assert browser.one("figure[data-chart=latency] svg").size["height"] > 100
    windows = browser.one("figure[data-chart=windows]")
    assert {"complete window", "one wave", "measurement window"} <= {
        text(t) for t in windows.find_elements("tag name", "text")
    }, "the measurement windows are drawn"
    assert "winning" in browser.one("#cold-table").text
    browser.screenshot(tmp_path / "ref.png")


def test_the_database_page_ranks_hosts_follows_builds_and_flags_the_latest_regression(
    db_url: str, tmp_path, browser, capsys: pytest.CaptureFixture[str]
):
    page = tmp_path / "db.html"
    assert (
        main(["report", "--db", store(db_url, SLOWER), "--html", str(page), "--fail", "throughput:5%"]) == 0
    )
    assert capsys.readouterr().out == f"wrote {page}\n"

    browser.open(page)
    assert browser.fetched() == []
    porep = [r.find_element("css selector", "strong").text for r in browser.all("[data-kind=porep] tr.host")]
    assert porep == ["4090", "a40", "a40-2"], "one row per machine, by best proofs/hour: 52.0, 35.9, 34.0"
    assert len(browser.all("section.ranking figure svg")) == 2, "a ranking chart per kind"
    histories = [
        h.get_attribute("data-kind")
        for h in browser.all("section.history")
        if h.find_elements("tag name", "svg")
    ]
    assert histories == ["porep"], "a history chart for the kind that ran several builds"
    history = browser.one("section.history[data-kind=porep] table").text
    assert history.count("4090 batch1-j1") == 4, "the 4090's four builds at batch 1, each a row"
    (latest,) = browser.all("section.comparison")
    assert "sha256:good0003" in latest.text and "sha256:slow0004" in latest.text
    assert "REGRESSION porep batch1-j1 on 4090 throughput" in latest.text
    bad = browser.one("section.comparison td.bad")
    # good0003 stored 40.5/h, slow0004 30.0/h (-25.9%): the figures as recorded, tested on their samples
    a, b, change = (float(x) for x in re.findall(r"([-\d.]+)(?:/h|%)", bad.text)[:3])
    assert (a, b, change) == (40.5, 30.0, -25.9) and "regressed" in bad.text
    browser.screenshot(tmp_path / "db.png")


def test_the_database_page_of_an_empty_database_says_so(tmp_path, capsys: pytest.CaptureFixture[str]):
    page, url = tmp_path / "db.html", f"sqlite:///{tmp_path / 'empty.db'}"
    ResultsDB(url).close()
    assert main(["report", "--db", url, "--html", str(page)]) == 0
    assert "The database holds no test yet" in page.read_text()
    assert main(["report", "--db", url, "--html", str(tmp_path)]) == 2
    assert "is a directory: give a file" in capsys.readouterr().err


@pytest.mark.parametrize("template", ["github-gpu.yml", "gitlab-gpu.yml"])
def test_the_ci_templates_upload_the_report_with_the_other_results(template: str):
    text = (Path(__file__).resolve().parents[2] / "ci" / template).read_text()
    flags = set(re.findall(r"--cuzk-[a-z-]+", text))
    assert flags <= {o.flag for o in OPTIONS}, "every flag the template passes exists"
    assert "--cuzk-html=results/report.html" in text and "--junitxml=results/junit.xml" in text
    assert re.search(r"path(s)?: \[?results/", text), "the folder holding them is uploaded"


@pytest.mark.parametrize(
    ("template", "linter"),
    [
        ("github-gpu.yml", ["actionlint", "-config-file", ".github/actionlint.yaml"]),
        ("gitlab-gpu.yml", ["check-jsonschema", "--builtin-schema", "vendor.gitlab-ci"]),
    ],
)
def test_the_ci_templates_pass_their_linters_and_install_from_one_variable(template: str, linter: list[str]):
    root = Path(__file__).resolve().parents[2]
    tool = Path(sys.executable).parent / linter[0]
    lint = subprocess.run([tool, *linter[1:], f"ci/{template}"], cwd=root, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    text = (root / "ci" / template).read_text()
    installs = re.findall(r"pip install (\S+)", text)
    assert installs == ['"$PYTEST_CUZK_SPEC"'], "a wheel or a git URL the user sets"
    assert "once it is on PyPI: pytest-cuzk" in text
    assert '-k "$CUZK_KINDS"' in text, "kind selection in the command"


def test_the_database_page_counts_in_the_singular_for_one(tmp_path, capsys: pytest.CaptureFixture[str]):
    page, url = tmp_path / "db.html", f"sqlite:///{tmp_path / 'one.db'}"
    one = [(RTX, "4090", "31337", "sha256:base0001", 1, [("porep", 1, 1, 41.3, 80.0, 180)])]
    assert main(["report", "--db", store(url, one), "--html", str(page)]) == 0
    html = page.read_text()
    assert "<title>cuzk results: 1 host, 1 build</title>" in html
    assert "1 test in 1 run of 1 build on 1 host" in html

"""A/B in one run: a case measured on a candidate and a control daemon in pairs, gated on the pair."""

from __future__ import annotations

import json
import re
from itertools import groupby

from helpers.support import PROVE_SOURCE

from pytest_cuzk.backends.fake import FakeBehaviour, FakeDaemon

AB = (
    "-k", "winning", "--cuzk-batch-sizes=1", "--cuzk-ab=ref", "--cuzk-ab-seed=7",
    "--cuzk-proofs=8", "--cuzk-max-proofs=200", "--cuzk-window=0.001", "--cuzk-case-budget=1",
)  # fmt: skip
GATE = "--cuzk-compare-fail=throughput:5%"


def _steady(delay_s: float) -> dict[str, FakeBehaviour]:
    return {"winning": FakeBehaviour(delay_s=delay_s)}  # the sleep, not the machine, sets the pace


def test_a_slower_candidate_fails_by_name_with_the_paired_change(fake_run):
    result, (candidate, control) = fake_run(
        {"test_prove": PROVE_SOURCE}, *AB, GATE, behaviour=_steady(0.03), ab=_steady(0.02)
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_prove[[]winning-batch1-j1[]]: throughput regressed * (95% CI *% to *% worse, p=*; "
            "control *, now *; limit 5%); A/B over * pairs, side by side, seed 7 (--cuzk-compare-fail)*"
        ]
    )
    assert candidate.proofs >= 8 and control.proofs >= 8, "both builds proved the case"


def test_identical_builds_pass_and_the_summary_shows_both_builds_and_the_pair(fake_run, tmp_path):
    out = tmp_path / "run.json"
    result, (candidate, control) = fake_run(
        {"test_prove": PROVE_SOURCE},
        *AB,
        GATE,
        f"--benchmark-json={out}",
        behaviour=_steady(0.02),
        ab=_steady(0.02),
    )
    result.assert_outcomes(passed=1)
    text = result.stdout.str()
    assert re.search(
        r"^  test_prove\[winning-batch1-j1\] \[control\]\s+winning\s+1\s+1\s+\d+\s+0\s", text, re.M
    )
    line = re.search(
        r"^A/B test_prove\[winning-batch1-j1\]: candidate against control, throughput .*$", text, re.M
    )
    assert line and re.search(r" pairs \(ratios' SD \d+\.\d%\), side by side, seed 7, order ", line[0]), text
    result.stdout.fnmatch_lines(
        ["cuzk: A/B: each case also runs on the control build *", "  control fake*/h, RSS peak *"]
    )
    extra = json.loads(out.read_text())["benchmarks"][0]["extra_info"]
    ab = extra["ab"]
    assert ab["seed"] == 7 and ab["layout"] == "side-by-side"
    assert len(ab["log_ratios"]) == len(ab["order"].split()) >= 3
    # The control's figures, stored under its former name.
    assert ab["baseline"]["proofs_ok"] >= 8 and extra["proofs_ok"] >= 8
    assert abs(ab["change_pct"]) < 25, ab["change_pct"]  # the same sleep; the host jitters the rest
    # Each build's wall time is its own windows': the other build's between them are not its checks.
    assert 0 < extra["wall_s"] + ab["baseline"]["wall_s"] <= ab["wall_s"]
    assert candidate.starts == [1] and control.starts == [1], "side by side: each started once"


def test_in_turn_each_daemon_is_restarted_for_its_block_and_the_summary_says_so(fake_run):
    result, (candidate, control) = fake_run(
        {"test_prove": PROVE_SOURCE},
        *AB,
        "--cuzk-ab-layout=in-turn",
        behaviour=_steady(0.01),
        ab=_steady(0.01),
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["A/B *: * pairs (ratios' SD *), in turn (one daemon up at a time, restarted for each block of 3*"]
    )
    assert len(candidate.starts) >= 2 and len(control.starts) >= 2, (candidate.starts, control.starts)


def test_side_by_side_the_builds_take_turns_wave_by_wave_not_window_by_window(fake_run, monkeypatch):
    """A window holds some ten waves of each build here, yet neither build proves more than a few in a row."""
    proved: list[str] = []
    proof_done = FakeDaemon.proof_done

    def record(self: FakeDaemon) -> None:
        proved.append(self.label)
        proof_done(self)

    monkeypatch.setattr(FakeDaemon, "proof_done", record)
    window = ("--cuzk-window=0.1", "--cuzk-proofs=40")  # the later option wins over AB's
    result, _ = fake_run(
        {"test_prove": PROVE_SOURCE}, *AB, *window, behaviour=_steady(0.01), ab=_steady(0.01)
    )
    result.assert_outcomes(passed=1)
    runs = [len(list(run)) for _, run in groupby(proved)]
    assert proved.count("control") >= 40 and proved.count("local") >= 40, proved
    # a pair's last wave and the next pair's first are one build's (BC CB), a window's tail may add one
    assert max(runs) <= 4, runs


def test_the_results_database_holds_both_builds_and_the_paired_change(fake_run, tmp_path):
    from pytest_cuzk.results.database import ResultsDB

    url = f"sqlite:///{tmp_path / 'results.db'}"
    result, _ = fake_run(
        {"test_prove": PROVE_SOURCE},
        *AB,
        f"--cuzk-results-db={url}",
        behaviour=_steady(0.01),
        ab=_steady(0.01),
    )
    result.assert_outcomes(passed=1)
    with ResultsDB(url) as db:
        rows = {row.run.label: row for row in db.rows()}
    assert set(rows) == {"local", "control"}
    candidate, control = rows["local"].test, rows["control"].test
    assert control.ab is None and control.proofs_ok >= 8 and control.proofs_per_hour
    # The control's figures are its own row, not also under the key of its former name.
    assert candidate.ab is not None and candidate.ab["seed"] == 7 and "baseline" not in candidate.ab
    assert candidate.ab["throughput_ratio"] is not None and len(candidate.ab["log_ratios"]) >= 3
    assert {row.run.daemons for row in rows.values()} == {2}, (
        "measured beside each other: no lone build's runs"
    )


def test_the_html_report_shows_both_builds_and_the_paired_change(fake_run, tmp_path):
    from html.parser import HTMLParser

    report = tmp_path / "report.html"
    result, _ = fake_run(
        {"test_prove": PROVE_SOURCE}, *AB, f"--cuzk-html={report}", behaviour=_steady(0.01), ab=_steady(0.01)
    )
    result.assert_outcomes(passed=1)

    class Text(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.lines: list[str] = []

        def handle_data(self, data: str) -> None:
            self.lines.append(" ".join(data.split()))

    parser = Text()
    parser.feed(report.read_text())
    text = [line for line in parser.lines if line]
    assert "test_prove[winning-batch1-j1] [control]" in text
    assert "Daemon control" in text
    pair = next(line for line in text if line.startswith("A/B, candidate against control ("))
    assert re.search(
        r"\): throughput [+-]\d+\.\d% \(95% CI .*\); \d+ pairs \(ratios' SD [\d.]+%\), side by side, "
        r"seed 7, order ",
        pair,
    ), pair


def test_a_daemon_that_hangs_during_a_pair_is_the_one_killed_and_the_other_is_not_blamed(fake_run):
    result, (candidate, control) = fake_run(
        {"test_prove": PROVE_SOURCE},
        *AB,
        "--cuzk-skip-warmup",  # the case's own proofs freeze it, not the warm-up
        behaviour={"winning": FakeBehaviour(freeze=True)},
        ab=_steady(0.01),
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*daemon hung: the fake is frozen during winning proof job*"])
    assert len(candidate.state.restarts) == 1 and "hung" in candidate.state.restarts[0]
    assert control.state.restarts == [] and control.state.out_of_service is None

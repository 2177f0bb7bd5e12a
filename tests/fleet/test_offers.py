"""cuzk-perf offers: marketplace offers ranked by what their machine, or hosts like it, measured.

Two databases, each on SQLite and on a real PostgreSQL:

- ``fleet``: ``cuzk-perf example``'s fleet (``fleet/example.py``), the storage provider's story in
  round figures (a 2x A40 with 2 TiB of RAM below one RTX 4090; PoRep warm-ups that need more RAM
  than the proofs), with and without low-memory warm-ups, to check the RAM and VRAM verdicts.
- ``load_ref_runs``: figures the reference engine really measured under six labels
  (``fixtures/ref-runs.json``), filed under made-up rented hosts: the default preset's runs
  under 1x NVIDIA L4 machines 9001-9004, the slower medium preset's under 1x NVIDIA L40S
  machines 9101-9102. Recorded with one run per label and machine id (ref-a 9001 ... ref-d 9004,
  then ``--cuzk-preset medium`` for ref-m1 9101 and ref-m2 9102), then exported, host fields
  dropped::

      pytest --cuzk-daemon=ref -k "winning or wpost" --cuzk-proofs 8 --cuzk-results-db=ref.db
             --cuzk-label ref-a --cuzk-host-id 9001
      cuzk-perf export --format json --db ref.db

``fleet/example-offers.json`` holds made-up offers in the shape ``vastai search offers --raw``
prints (every field of a real 2024 offer, which is the sample ``RAW_QUARTER`` below).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import statistics
from collections.abc import Iterable
from pathlib import Path

import pytest
from helpers import pg
from test_perf import body

from pytest_cuzk.fleet import example
from pytest_cuzk.fleet.cli import main
from pytest_cuzk.fleet.offerfile import Offer, OfferFileError, read_offers
from pytest_cuzk.fleet.predict import memory_verdict
from pytest_cuzk.measure.figures import METRICS, regression
from pytest_cuzk.results.database import ResultsDB
from pytest_cuzk.results.rows import RunRecord, TestRecord

db_url, pg_server = pg.db_url, pg.pg_server
OFFERS = Path(example.__file__).with_name(example.OFFERS)
REF_RUNS = Path(__file__).resolve().parents[2] / "fixtures" / "ref-runs.json"
GIB, MIB = 2**30, 2**20
DISK = 159.18 * GIB  # the default --disk: cuzk's 32 GiB parameter files and the PoRep PCE file


@pytest.fixture
def fleet(db_url: str) -> str:
    with ResultsDB(db_url) as db:
        example.record_fleet(db)
    return db_url


REF_HOSTS = {
    **{f"ref-{x}": example.host_record("NVIDIA L4", 1, 23034, 64, f"l4-{x}") for x in "abcd"},
    **{f"ref-m{n}": example.host_record("NVIDIA L40S", 1, 46068, 128, f"l40s-{n}") for n in (1, 2)},
}


def ref_records() -> list[dict[str, object]]:
    return list(json.loads(REF_RUNS.read_text()))


def load_ref_runs(url: str, labels: Iterable[str] = REF_HOSTS) -> str:
    """The recorded reference runs of ``labels`` in a database, each under its made-up host."""
    runs: dict[str, RunRecord] = {}
    test_fields = set(TestRecord.__dataclass_fields__)
    with ResultsDB(url) as db:
        for rec in ref_records():
            label = str(rec["run_label"])
            if label not in labels:
                continue
            if rec["run_id"] not in runs:
                fields = {
                    str(k)[4:]: v for k, v in rec.items() if str(k).startswith("run_") and k != "run_id"
                }
                fields["started_at"] = dt.datetime.fromisoformat(str(fields["started_at"]))
                runs[str(rec["run_id"])] = run = RunRecord(
                    REF_HOSTS[label], run_id=str(rec["run_id"]), **fields
                )
                db.start_run(run)
            values = {k: v for k, v in rec.items() if k in test_fields}
            values["finished_at"] = dt.datetime.fromisoformat(str(values["finished_at"]))
            db.record_test(TestRecord(**values))
    return url


def offers(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, str, str]:
    code = main(["offers", *argv, "--db", url])
    out, err = capsys.readouterr()
    return code, out, err


def ranked(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> list[dict[str, object]]:
    code, out, _ = offers(capsys, url, str(OFFERS), "--json", *argv)
    assert code == 0
    return list(json.loads(out))


def by_offer(rows: list[dict[str, object]]) -> dict[object, dict[str, object]]:
    return {r["offer"]["id"]: r for r in rows}


def test_reads_the_fields_vast_ai_prints_in_its_units() -> None:
    raw = json.loads(OFFERS.read_text())
    got = read_offers(str(OFFERS))
    assert len(got) == len(raw) == 11
    first, r = got[0], raw[0]
    assert first == Offer(
        id=str(r["id"]), machine_id=str(r["machine_id"]), host_id=str(r["host_id"]), gpu_name=r["gpu_name"],
        num_gpus=r["num_gpus"], gpu_ram_bytes=r["gpu_ram"] * MIB, machine_ram_bytes=r["cpu_ram"] * MIB,
        cpu_cores=r["cpu_cores_effective"], machine_cpu_cores=r["cpu_cores"], gpu_frac=r["gpu_frac"],
        dph_total=r["dph_total"], dph_base=r["dph_base"], reserved_dph_total=r["discounted_dph_total"],
        storage_cost=r["storage_cost"], storage_total_cost=r["storage_total_cost"],
        reliability=r["reliability2"], geolocation=r["geolocation"], driver_version=r["driver_version"],
    )  # fmt: skip
    assert first.gpu_ram_bytes == 24564 * MIB < 24 * GIB, "nvidia-smi's MiB for a 24 GiB card"
    assert (first.share, first.ram_bytes) == (1.0, 503000 * MIB), "a whole machine"
    quarter = next(o for o in got if o.id == "7100003")
    assert quarter.machine_ram_bytes == 1030288 * MIB and quarter.ram_bytes == 1030288 * MIB // 4
    lacking = next(o for o in got if o.id == "7100007")
    assert (lacking.machine_id, lacking.ram_bytes) == (None, None)


def test_csv_the_rest_api_wrapper_and_standard_input_read_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = json.loads(OFFERS.read_text())
    columns = sorted({k for o in raw for k, v in o.items() if not isinstance(v, dict)})
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns)
    writer.writeheader()
    writer.writerows({k: v for k, v in o.items() if k in columns} for o in raw)
    (tmp_path / "offers.csv").write_text(buf.getvalue())
    (tmp_path / "bundles.json").write_text(json.dumps({"offers": raw}))
    expected = read_offers(str(OFFERS))
    assert read_offers(str(tmp_path / "offers.csv")) == expected
    assert read_offers(str(tmp_path / "bundles.json")) == expected
    monkeypatch.setattr("sys.stdin", io.StringIO(OFFERS.read_text()))
    assert read_offers("-") == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[oops", "not valid JSON"),
        ('{"offers": 3}', "expected a list of offers, as `vastai search offers --raw` prints it"),
        ("[1, 2]", "expected a list of offers"),
        ("just words\n", "neither JSON nor a CSV with a header of offer fields"),
        (
            '[{"id": 5, "num_gpus": "two"}]',
            "offer 5 (number 1): field num_gpus is 'two', not a number",
        ),
        ("  \n", "empty; pipe in `vastai search offers --raw ...`"),
    ],
)
def test_bad_offer_files_say_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "bad.json").write_text(text)
    with pytest.raises(OfferFileError) as caught:
        read_offers(str(tmp_path / "bad.json"))
    assert str(caught.value).startswith(f"{tmp_path / 'bad.json'}: {message}")


@pytest.mark.parametrize(
    ("steady", "full", "low", "verdict"),
    [
        (180, 200, None, ("yes", "no")),  # the full warm-up fits
        (200, 235, 70, ("yes", "yes")),  # only a low-memory warm-up fits
        (200, 235, 230, ("no", "-")),  # neither fits
        (200, 235, None, ("?", "yes")),  # the full one does not fit, a low-memory one was not measured
        (200, None, 70, ("yes", "yes")),  # only low-memory warm-ups were measured, and fit
        (200, None, None, ("yes", "?")),  # no warm-up peak recorded
        (231, 100, None, ("no", "-")),  # the proofs alone do not fit
        (None, None, None, ("?", "?")),  # nothing measured (an attached remote daemon)
    ],
)
def test_memory_verdicts(
    steady: int | None, full: int | None, low: int | None, verdict: tuple[str, str]
) -> None:
    gib = [None if v is None else v * GIB for v in (steady, full, low)]
    assert memory_verdict(213 * GIB, *gib) == verdict
    assert memory_verdict(None, *gib) == ("?", "?"), "an offer without its RAM"


def test_ranks_by_dollars_per_proof_with_ram_verdicts(fleet: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = offers(capsys, fleet, str(OFFERS), "--kind", "porep")
    assert code == 0
    assert out.splitlines()[0] == (
        f"11 of 11 offers from {OFFERS}; on-demand prices with 159.2 GiB of disk; "
        "measured peaks must leave 15% of an offer's RAM free"
    )
    rows = body(out)
    assert [(r[1], r[5], r[6], r[9], r[-2], r[-1]) for r in rows] == [
        # a quarter of a 1006 GiB machine: 251.5 GiB, batch 1 only, and a low-memory warm-up
        ("7100003", "0.306", "40.5", "0.00755", "yes", "yes"),
        ("7100001", "0.428", "51.0", "0.00838", "yes", "no"),  # this 4090 itself, 491 GiB: batch 2 fits
        ("7100002", "0.906", "35.9", "0.0252", "yes", "no"),  # 2x A40 and 2 TiB, slower than one 4090
        ("7100006", "2.474", "35.9", "0.0689", "yes", "no"),
        ("7100007", "0.402", "51.0", "0.00789", "?", "?"),  # cheaper per proof, but its RAM is not known
        ("7100005", "0.248", "n/a", "n/a", "?", "?"),  # no 3090 measured, above cuzk's floors
        ("7200010", "0.612", "n/a", "n/a", "?", "?"),
        ("7300001", "0.841", "n/a", "n/a", "?", "?"),
        ("7100004", "0.263", "n/a", "n/a", "no", "-"),  # 125.7 GiB: no PoRep configuration fits
        ("7200004", "0.269", "n/a", "n/a", "no", "-"),  # 62.9 GiB: below cuzk's PoRep floor, none measured
        ("7200009", "0.288", "n/a", "n/a", "no", "-"),
    ]
    assert rows[0][7] == "1 like it (4090)" and rows[1][7] == "this machine (4090, 3 runs)"
    assert (rows[0][4], rows[0][11], rows[0][12]) == ("251.5 GiB", "235.0 GiB / 70.0 GiB low-mem", "15.0 GiB")
    assert rows[5][7] == "unknown: no 1x RTX 3090 measured"
    assert rows[8][7] == "1 like it (4090): needs 235.3 GiB of RAM"
    assert rows[9][7] == "unknown: no 1x L4 measured; does not fit: cuzk's porep floor is 83.7 GiB of RAM"
    assert (rows[1][4], rows[1][8], rows[1][10], rows[1][12]) == (
        "491.2 GiB",
        "batch2-j1",
        "231.0 GiB",
        "22.0 GiB",
    )
    assert err.splitlines() == [
        f"cuzk-perf offers: {OFFERS}: field cpu_ram missing in 1 of 11 offers (7100007): "
        "the RAM checks answer '?'",
        f"cuzk-perf offers: {OFFERS}: field machine_id missing in 1 of 11 offers (7100007): "
        "it cannot match a measured machine",
    ]


def test_filters_and_json(fleet: str, capsys: pytest.CaptureFixture[str]) -> None:
    rows = ranked(capsys, fleet, "--kind", "porep", "--max-dph", "1.5", "--min-ram", "256GiB")
    assert [r["offer"]["id"] for r in rows] == ["7100001", "7100002"]
    assert [r["offer"]["id"] for r in ranked(capsys, fleet, "--gpu", "a40")] == ["7100002", "7100006"] * 2
    got = by_offer(ranked(capsys, fleet, "--kind", "porep"))
    like = got["7100003"]
    assert like["basis"] == "hosts like it" and like["sources"] == ["4090"] and like["count"] == 1
    assert like["proofs_per_hour"] == statistics.median([41.3, 38.0, 40.5])  # the 4090's batch-1 runs
    assert like["dollars_per_hour"] == pytest.approx(0.294 + 0.05 * DISK / 1e9 / 720, abs=1e-4)  # $/GB
    assert like["dollars_per_proof"] == pytest.approx(like["dollars_per_hour"] / 40.5)
    assert like["config"] == {"batch_size": 1, "concurrency": 1}
    assert (like["rss_peak_bytes"], like["warmup_rss_peak_bytes"], like["lowmem_warmup_rss_peak_bytes"]) == (
        200 * GIB, 235 * GIB, 70 * GIB
    )  # fmt: skip
    assert like["vram_peak_bytes"] == 15 * GIB
    assert (like["fits"], like["lowmem_warmup_needed"]) == ("yes", "yes")
    assert (like["offer"]["share"], like["offer"]["ram_bytes"]) == (0.25, 1030288 * MIB // 4)
    own = got["7100001"]
    assert (own["basis"], own["count"], own["spread"]) == ("this machine", 3, [50.0, 52.0])
    assert own["offer"]["ram_bytes"] == 503000 * MIB
    small = got["7100004"]
    assert (small["proofs_per_hour"], small["fits"], small["why"]) == (
        None, "no", "needs 235.3 GiB of RAM"
    )  # fmt: skip
    assert got["7100005"]["basis"] == "unknown"


def test_an_offer_lacking_needed_fields_is_listed_and_named(
    fleet: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "bare.json").write_text('[{"id": 1, "dph_total": 0.5, "inet_down": 900}]')
    code, out, err = offers(capsys, fleet, str(tmp_path / "bare.json"), "--json", "--kind", "porep")
    assert code == 0
    (row,) = json.loads(out)
    assert (row["basis"], row["why"]) == ("unknown", "the offer names no GPU model or count")
    assert row["dollars_per_hour"] == 0.5, "no storage_cost: the price as the search priced it"
    missing = [line.split(": field ")[1].split(" missing")[0] for line in err.splitlines()]
    assert missing == ["gpu_name", "num_gpus", "cpu_ram", "storage_cost", "machine_id"]
    assert "missing in every offer (1)" in err


def test_usage_errors_and_no_data(fleet: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = offers(capsys, fleet, str(tmp_path / "nope.json"))
    assert code == 2 and "cuzk-perf offers: cannot read the offers file" in err and "nope.json" in err
    code, _, err = offers(capsys, fleet, str(OFFERS), "--max-dph", "cheap")
    assert code == 2 and "invalid price 'cheap'" in err
    code, _, err = offers(capsys, fleet, str(OFFERS), "--min-ram", "lots")
    assert code == 2 and "Invalid size 'lots' from --min-ram" in err
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    ResultsDB(empty).close()  # a database with no run yet
    assert offers(capsys, empty, str(OFFERS))[:2] == (0, "no data\n")


@pytest.mark.parametrize("kind", ["winning", "wpost"])
def test_a_prediction_from_hosts_like_it_matches_a_held_back_host(
    db_url: str, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    measured = {str(r["run_label"]): float(r["proofs_per_hour"]) for r in ref_records() if r["kind"] == kind}
    held = measured["ref-d"]
    load_ref_runs(db_url, [x for x in REF_HOSTS if x != "ref-d"])
    guess = by_offer(ranked(capsys, db_url, "--kind", kind))["7200004"]
    assert (guess["basis"], guess["sources"], guess["count"]) == (
        "hosts like it",
        ["ref-a", "ref-b", "ref-c"],
        3,
    )
    predicted = statistics.median(measured[x] for x in ("ref-a", "ref-b", "ref-c"))
    assert guess["proofs_per_hour"] == predicted  # the L40S hosts (the medium preset) left out
    off = regression(METRICS["throughput"], held, predicted)
    assert off is not None and abs(off) <= 25, f"predicted {predicted:.0f}/h, measured {held:.0f}/h"
    slower = statistics.median(measured[x] for x in ("ref-m1", "ref-m2"))
    assert abs(regression(METRICS["throughput"], held, slower) or 0) > 50, "other GPUs would mislead"

    load_ref_runs(db_url, ["ref-d"])
    got = by_offer(ranked(capsys, db_url, "--kind", kind))
    own = got["7200004"]
    assert (own["basis"], own["proofs_per_hour"], own["sources"]) == ("this machine", held, ["ref-d"])
    assert own["vs_like_pct"] == pytest.approx((held - predicted) / predicted * 100)
    assert got["7200009"]["basis"] == "hosts like it" and got["7200009"]["count"] == 4
    assert (got["7200010"]["basis"], got["7200010"]["sources"]) == ("this machine", ["ref-m1"])

"""cuzk-perf offers on offers in the shapes vast.ai really writes, priced and fitted as rented.

The samples are built from the formats' definitions: every field of a 2024 ``vastai search
offers --raw`` offer (a quarter of a 96-core RTX 4090 machine), a 2022 ``/bundles`` answer
(``{"offers": [...]}``, a quarter of a 3090 machine), vast-cli's field list (``cpu_ram`` the
machine's, ``cpu_cores_effective`` the offer's share, ``storage_cost`` $/GB/month,
``discounted_dph_total`` the reserved rate) and gpuhunt's rules (RAM scaled by the CPU share,
storage over 30 days). GPU names are the ones vast.ai lists and NVML reports.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_offers import OFFERS, by_offer, offers
from test_perf import body

from pytest_cuzk.fleet import example
from pytest_cuzk.fleet.cli import main
from pytest_cuzk.fleet.gpus import gpu_key, matches
from pytest_cuzk.fleet.offerfile import read_offers
from pytest_cuzk.results.database import ResultsDB
from pytest_cuzk.results.rows import RunRecord, TestRecord
from pytest_cuzk.vocab.units import format_bytes

GIB, MIB, GB = 2**30, 2**20, 10**9
OFFERS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "rank-offers.md"

RAW_QUARTER = {  # `vastai search offers --raw`, 2024: one RTX 4090 of a 96-core machine
    "ask_contract_id": 11684738, "bundle_id": 1598539855, "bundled_results": None, "bw_nvlink": 0.0,
    "compute_cap": 890, "cpu_arch": "amd64", "cpu_cores": 96, "cpu_cores_effective": 24.0, "cpu_ghz": 2.3,
    "cpu_name": "AMD EPYC 7642 48-Core Processor", "cpu_ram": 64393, "credit_discount_max": 0.4,
    "cuda_max_good": 12.2, "direct_port_count": 249, "discount_rate": 0.0,
    "discounted_dph_total": 0.2466759259259259, "discounted_hourly": 0.0, "disk_bw": 2545.294,
    "disk_name": "INTEL SSDPE2KX080T8", "disk_space": 1607.875, "dlperf": 106.637,
    "dlperf_per_dphtotal": 432.296, "dph_base": 0.24666666666666665, "dph_total": 0.2466759259259259,
    "dph_total_adj": 0.2466759259259259, "driver_vers": 535183001, "driver_version": "535.183.01",
    "duration": 13356528.5, "end_date": 1735707781.0, "external": None, "flops_per_dphtotal": 336.3,
    "geolocation": "Guangxi, CN", "geolocode": 921675020, "gpu_arch": "nvidia", "gpu_display_active": False,
    "gpu_frac": 0.25, "gpu_ids": [82267], "gpu_lanes": 16, "gpu_mem_bw": 3108.4, "gpu_name": "RTX 4090",
    "gpu_ram": 24564, "gpu_total_ram": 24564, "has_avx": 1, "host_id": 125418, "hosting_type": 0,
    "hostname": None, "id": 11684738, "inet_down": 105.9, "inet_down_cost": 0.0, "inet_up": 77.7,
    "inet_up_cost": 0.0, "is_bid": False, "machine_id": 22990, "min_bid": 0.2, "mobo_name": "H12SSL",
    "num_gpus": 1, "os_version": "20.04", "pci_gen": 4.0, "pcie_bw": 12.3, "reliability": 0.9700835,
    "reliability2": 0.9700835, "reliability_mult": 0.7710531, "rentable": True, "rented": False, "rn": 1,
    "score": 190.03, "search": {"discountTotalHour": 0, "discountedTotalPerHour": 0.2466759259259259,
                                "diskHour": 9.25925925925926e-06, "gpuCostPerHour": 0.24666666666666665,
                                "totalHour": 0.2466759259259259},
    "start_date": 1722348655.8, "static_ip": False, "storage_cost": 0.0013333333333333335,
    "storage_total_cost": 9.25925925925926e-06, "time_remaining": "", "time_remaining_isbid": "",
    "total_flops": 82.97, "vericode": 1, "verification": "verified", "vram_costperhour": 0.0103,
    "webpage": None,
}  # fmt: skip
BUNDLE_3090 = {  # a /bundles offer, 2022: one RTX 3090 of a 4-GPU machine, no storage_total_cost yet
    "id": 5219012, "machine_id": 4263, "host_id": 8911, "gpu_name": "RTX 3090", "num_gpus": 1,
    "gpu_ram": 24576, "gpu_frac": 0.25, "cpu_cores": 32, "cpu_cores_effective": 8.0, "cpu_ram": 128514,
    "dph_base": 0.35, "dph_total": 0.3502, "storage_cost": 0.15, "disk_space": 420.0,
    "reliability2": 0.994, "geolocation": "Ontario, CA", "driver_version": "510.47.03",
}  # fmt: skip


def _write(tmp_path: Path, records: object, name: str = "offers.json") -> str:
    (tmp_path / name).write_text(json.dumps(records))
    return str(tmp_path / name)


def _db(tmp_path: Path, *runs: tuple[object, str, str, list[tuple[int, float, int, int]]]) -> str:
    """A database of porep runs: (host, label, machine id, [(batch, proofs/hour, RSS GiB, VRAM GiB)])."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with ResultsDB(url) as db:
        for day, (host, label, machine, tests) in enumerate(runs):
            run = RunRecord(host, "b1", label=label, host_id=machine,  # type: ignore[arg-type]
                            started_at=dt.datetime(2025, 1, 1 + day, tzinfo=dt.timezone.utc))  # fmt: skip
            db.start_run(run)
            for b, per_hour, rss, vram in tests:
                db.record_test(TestRecord(
                    run_id=run.run_id, nodeid=f"test_prove[porep-batch{b}-j1]", kind="porep", batch_size=b,
                    concurrency=1, proofs_ok=4, proofs_failed=0, p50_s=60.0, p90_s=70.0, max_s=80.0,
                    proofs_per_hour=per_hour, rss_peak_bytes=rss * GIB, vram_peak_bytes=vram * GIB,
                    label=label,
                ))  # fmt: skip
            db.finish_run(run.run_id)
    return url


def _json(
    capsys: pytest.CaptureFixture[str], url: str, path: str, *argv: str
) -> dict[object, dict[str, object]]:
    code, out, _ = offers(capsys, url, path, "--json", "--kind", "porep", *argv)
    assert code == 0
    return by_offer(json.loads(out))


def test_a_share_of_a_machine_gets_its_share_of_the_ram(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quarter, bundle = read_offers(_write(tmp_path, {"offers": [RAW_QUARTER, BUNDLE_3090]}))
    assert quarter.ram_bytes == 64393 * MIB // 4 and f"{quarter.ram_bytes / GIB:.1f}" == "15.7"
    assert bundle.share == 0.25 and f"{bundle.ram_bytes / GIB:.1f}" == "31.4"  # type: ignore[operator]
    rtx = example.host_record("NVIDIA GeForce RTX 4090", 1, 24564, 256, "rig")
    url = _db(tmp_path, (rtx, "rig", "1", [(1, 40.0, 90, 15)]))  # a 90 GiB PoRep peak
    got = _json(capsys, url, _write(tmp_path, [RAW_QUARTER]))[str(RAW_QUARTER["id"])]
    assert (got["fits"], got["why"]) == ("no", "needs 105.9 GiB of RAM"), "the whole machine's 62.9 GiB fit"


def test_disk_is_priced_at_storage_cost_and_can_reorder_offers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rtx = example.host_record("NVIDIA GeForce RTX 5090", 2, 32607, 512, "rig")
    url = _db(tmp_path, (rtx, "rig", "1", [(1, 60.0, 100, 40)]))
    base = {"gpu_name": "RTX 5090", "num_gpus": 2, "gpu_ram": 32607, "cpu_ram": 515000, "cpu_cores": 64,
            "cpu_cores_effective": 64.0, "gpu_frac": 1.0}  # fmt: skip
    dear_disk = {
        **base,
        "id": 1,
        "dph_base": 0.60,
        "storage_cost": 0.93,
        "storage_total_cost": 0.93 * 5 / 720,
    }
    cheap_disk = {
        **base,
        "id": 2,
        "dph_base": 0.66,
        "storage_cost": 0.0013,
        "storage_total_cost": 0.0013 * 5 / 720,
    }
    for o in (dear_disk, cheap_disk):
        o["dph_total"] = o["dph_base"] + o["storage_total_cost"]  # as vast.ai sums them
    path = _write(tmp_path, [dear_disk, cheap_disk])
    searched = _json(capsys, url, path, "--disk", "5GB")  # what the search priced: 5 GB, not GiB
    assert searched["1"]["dollars_per_hour"] == pytest.approx(dear_disk["dph_total"])
    assert searched["1"]["dollars_per_proof"] < searched["2"]["dollars_per_proof"]  # type: ignore[operator]
    asked = _json(capsys, url, path)  # the default: cuzk's parameters and PCE file, 159.2 GiB
    assert asked["1"]["dollars_per_hour"] == pytest.approx(0.60 + 0.93 * 159.18 * GIB / GB / 720, abs=1e-4)
    assert asked["1"]["dollars_per_hour"] > 1.3 * 0.60  # type: ignore[operator]
    assert asked["1"]["dollars_per_proof"] > asked["2"]["dollars_per_proof"]  # type: ignore[operator]
    code, out, _ = offers(capsys, url, path, "--kind", "porep", "--disk", "53GiB")
    assert "on-demand prices with 53.0 GiB of disk" in out.splitlines()[0] and code == 0


def test_reserved_prices_and_fallbacks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    no_base = {k: v for k, v in RAW_QUARTER.items() if k not in ("dph_base", "discounted_dph_total")}
    no_base["id"] = 2
    only_base = {k: v for k, v in BUNDLE_3090.items() if k != "dph_total"}
    offers_ = read_offers(_write(tmp_path, [RAW_QUARTER, no_base, only_base]))
    disk, per_hour = 53 * GIB, 0.0013333333333333335 * 53 * GIB / GB / 720
    quarter, rebuilt, bundle = offers_
    assert quarter.hourly(disk) == pytest.approx(0.24666666666666665 + per_hour)
    assert rebuilt.hourly(disk) == pytest.approx(0.2466759259259259 - 9.25925925925926e-06 + per_hour)
    assert bundle.hourly(disk) == pytest.approx(0.35 + 0.15 * 53 * GIB / GB / 720), "no dph_total: dph_base"
    discounted = {**RAW_QUARTER, "discounted_dph_total": 0.2 + 9.25925925925926e-06}
    assert read_offers(_write(tmp_path, [discounted]))[0].hourly(disk, reserved=True) == pytest.approx(
        0.2 + per_hour
    )
    url = _db(tmp_path, (example.RTX, "rig", "1", [(1, 40.0, 10, 15)]))
    code, out, err = offers(
        capsys, url, _write(tmp_path, [discounted, no_base]), "--kind", "porep", "--reserved"
    )
    assert code == 0 and "reserved (discounted_dph_total) prices" in out.splitlines()[0]
    assert "field discounted_dph_total missing in 1 of 2 offers (2): no reserved price" in err
    assert [r[5] for r in body(out)] == [f"{0.2 + 0.0013333 * 159.18 * GIB / GB / 720:.3f}", "n/a"]


@pytest.mark.parametrize(
    ("vast", "nvml", "mib"),
    [
        ("H100 SXM", "NVIDIA H100 80GB HBM3", 81559),
        ("H100 PCIE", "NVIDIA H100 PCIe", 81559),
        ("H100 NVL", "NVIDIA H100 NVL", 95830),
        ("A100 SXM4", "NVIDIA A100-SXM4-40GB", 40960),
        ("A100 SXM4", "NVIDIA A100-SXM4-80GB", 81920),
        ("A100 PCIE", "NVIDIA A100-PCIE-40GB", 40960),
        ("A100 PCIE", "NVIDIA A100 80GB PCIe", 81920),
        ("Tesla V100", "Tesla V100-SXM2-16GB", 16160),
        ("Tesla V100", "Tesla V100-PCIE-32GB", 32510),
        ("RTX 4090", "NVIDIA GeForce RTX 4090", 24564),
        ("RTX 5090", "NVIDIA GeForce RTX 5090", 32607),
        ("L40S", "NVIDIA L40S", 46068),
        ("A40", "NVIDIA A40", 46068),
        ("RTX A6000", "NVIDIA RTX A6000", 49140),
        ("Q RTX 8000", "Quadro RTX 8000", 49152),
        ("RTX 6000Ada", "NVIDIA RTX 6000 Ada Generation", 49140),
    ],
)
def test_one_table_matches_vast_ai_and_nvml_names(vast: str, nvml: str, mib: int) -> None:
    assert gpu_key(vast, mib * MIB) == gpu_key(nvml, mib * MIB) == gpu_key(nvml)
    assert matches(vast.replace(" ", "_"), nvml, mib * MIB), "vast.ai's query spelling"


def test_memory_sizes_and_variants_stay_apart() -> None:
    assert str(gpu_key("A100 SXM4", 40960 * MIB)) == "A100 SXM4 40GB"
    assert gpu_key("A100 SXM4", 40960 * MIB) != gpu_key("NVIDIA A100-SXM4-80GB")
    assert gpu_key("Tesla V100", 16160 * MIB) != gpu_key("Tesla V100-SXM2-32GB")
    for a, b in [("RTX 4090", "RTX 4090 D"), ("A40", "RTX A4000"), ("L4", "L40S"), ("L40", "L40S"),
                 ("A100 SXM4", "A100 PCIE"), ("H100 SXM", "H100 NVL"),
                 ("RTX 6000Ada", "Q RTX 6000")]:  # fmt: skip
        assert gpu_key(a, 48 * GIB) != gpu_key(b, 48 * GIB), (a, b)
    assert not matches("a40", "RTX A4000") and matches("A100 80GB", "A100 SXM4", 81920 * MIB)
    assert not matches("A100 80GB", "A100 SXM4", 40960 * MIB)


def test_hosts_like_it_share_the_gpu_memory_and_vram_is_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a100 = example.host_record("NVIDIA A100-SXM4-80GB", 1, 81920, 512, "a100")
    url = _db(tmp_path, (a100, "a100", "1", [(1, 60.0, 200, 70), (2, 90.0, 300, 78)]))
    offer = {"gpu_name": "A100 SXM4", "num_gpus": 1, "cpu_ram": 515000, "dph_base": 1.2, "storage_cost": 0.1}
    got = _json(capsys, url, _write(tmp_path, [
        {**offer, "id": 80, "gpu_ram": 81920}, {**offer, "id": 40, "gpu_ram": 40960},
        {**offer, "id": 79, "gpu_ram": 76000},  # an 80 GB card that shows less (a host's limit)
    ]))  # fmt: skip
    assert (got["80"]["basis"], got["80"]["config"], got["80"]["vram_peak_bytes"]) == (
        "hosts like it", {"batch_size": 2, "concurrency": 1}, 78 * GIB
    )  # fmt: skip
    assert got["40"]["why"] == "no 1x A100 SXM4 measured", "40 GB and 80 GB do not pool"
    assert got["79"]["config"] == {"batch_size": 1, "concurrency": 1}, (
        "batch 2's 78 GiB VRAM peak does not fit"
    )
    got = _json(capsys, url, _write(tmp_path, [{**offer, "id": 9, "gpu_ram": 70000}]))
    assert (got["9"]["fits"], got["9"]["why"]) == ("no", "needs 70.0 GiB of VRAM, has 68.4 GiB")


def test_a_recorded_machine_with_other_hardware_is_said_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cpu_only = example.host_record("", 0, 0, 64, "box")
    url = _db(tmp_path, (cpu_only, "box", "4263", [(1, 2.0, 20, 0)]))
    got = _json(capsys, url, _write(tmp_path, [BUNDLE_3090]))["5219012"]
    assert got["basis"] == "unknown"
    assert got["machine_recorded_as"] == "no GPU (box)"
    _, out, _ = offers(capsys, url, _write(tmp_path, [BUNDLE_3090]), "--kind", "porep")
    assert body(out)[0][7] == (
        "unknown: no 1x RTX 3090 measured; does not fit: cuzk's porep floor is 83.7 GiB of RAM; machine 4263 "
        "was recorded with no GPU (box)"
    )


def _offers_session() -> list[tuple[list[str], list[str]]]:
    """The docs' offers example: each ``$ cuzk-perf ...`` command and the lines it prints."""
    text = OFFERS_PAGE.read_text()
    block = re.search(r"```\n(\$ cuzk-perf example .*?)```", text, re.S)
    assert block, "the offers page shows cuzk-perf example"
    out: list[tuple[list[str], list[str]]] = []
    for line in block.group(1).splitlines():
        if line.startswith("$ "):
            out.append((line[2:].split()[1:], []))
        else:
            out[-1][1].append(line)
    return out


def test_the_docs_offers_example_is_what_the_tool_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTEST_CUZK_RESULTS_DB", raising=False)
    session = _offers_session()
    assert [argv[0] for argv, _ in session] == ["example", "offers"]
    for argv, shown in session:
        assert main(argv) == 0
        out, err = capsys.readouterr()
        assert out.splitlines() + err.splitlines() == shown, argv
    assert main(["example", "--db", "example.db", "--offers", "again.json"]) == 2
    assert "example.db already holds runs: give an empty database" in capsys.readouterr().err
    monkeypatch.setenv("PYTEST_CUZK_RESULTS_DB", str(tmp_path / "mine.db"))
    assert main(["example", "--offers", "o.json"]) == 2
    assert "name a database of its own, e.g. --db example.db" in capsys.readouterr().err
    assert not (tmp_path / "mine.db").exists() or not ResultsDB(str(tmp_path / "mine.db")).builds()


def test_gpu_and_margin_options_as_users_write_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'ex.db'}"
    with ResultsDB(url) as db:
        example.record_fleet(db)
    code, out, _ = offers(capsys, url, str(OFFERS), "--json", "--gpu", "RTX_4090", "--kind", "porep")
    assert code == 0 and {r["offer"]["gpu_name"] for r in json.loads(out)} == {"RTX 4090"}
    code, out, err = offers(capsys, url, str(OFFERS), "--gpu", "H100")
    assert (code, out) == (1, "")
    assert (
        "cuzk-perf offers: --gpu H100 names no offer's GPU in" in err and "(their GPUs: A40, L4, L40S," in err
    )
    code, _, err = offers(capsys, url, str(OFFERS), "--margin", "0.15")
    assert (
        code == 2 and "'0.15' is a percent, 0.15%: write 15% for that share, or 0.15% if you mean it" in err
    )
    code, out, _ = offers(capsys, url, str(OFFERS), "--margin", "0.15%", "--kind", "porep")
    assert code == 0 and "must leave 0.15% of an offer's RAM free" in out
    code, out, _ = offers(capsys, url, str(OFFERS), "--margin", "20", "--kind", "porep")
    assert code == 0 and "must leave 20% of an offer's RAM free" in out


@pytest.mark.e2e  # cuzk-perf in a subprocess
def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ex.db'}"
    with ResultsDB(url) as db:
        example.record_fleet(db)
    whole = [o for o in json.loads(OFFERS.read_text()) if "cpu_ram" in o and "machine_id" in o] * 200
    path = _write(tmp_path, whole)
    script = "import sys; from pytest_cuzk.fleet.cli import main; sys.exit(main(sys.argv[1:]))"
    with subprocess.Popen(
        [sys.executable, "-c", script, "offers", path, "--db", url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as proc:  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.read(10)  # what `head -c 10` reads, then it goes
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 0
    assert err == "", err


def _porep_db(tmp_path: Path, host: object, vram_gib: float | None) -> str:
    """One porep run of ``host`` (batch 1, 90 GiB RSS peak), its VRAM peak given or not measured."""
    url = f"sqlite:///{tmp_path / 'floors.db'}"
    with ResultsDB(url) as db:
        run = RunRecord(host, "b1", label="rig", host_id="1")  # type: ignore[arg-type]
        db.start_run(run)
        db.record_test(TestRecord(
            run_id=run.run_id, nodeid="test_prove[porep-batch1-j1]", kind="porep", batch_size=1,
            concurrency=1, proofs_ok=4, proofs_failed=0, p50_s=60.0, p90_s=70.0, max_s=80.0,
            proofs_per_hour=40.0, rss_peak_bytes=90 * GIB,
            vram_peak_bytes=None if vram_gib is None else int(vram_gib * GIB), label="rig",
        ))  # fmt: skip
        db.finish_run(run.run_id)
    return url


SMALL_GPUS = [  # GPUs nobody measured, with no room beside cuzk's PoRep pool and buffers (12.0 GiB)
    {"id": 3070, "gpu_name": "RTX 3070", "gpu_ram": 8192},
    {"id": 3060, "gpu_name": "RTX 3060", "gpu_ram": 12288},
    {"id": 1080, "gpu_name": "GTX 1080 Ti", "gpu_ram": 11264},
]


def test_offers_below_cuzks_floors_do_not_fit_even_where_nothing_like_them_was_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """They once printed ``unknown ... fits ?``: cuzk's documented floors say more than nothing."""
    url = _porep_db(tmp_path, example.A40, 30)
    plenty = {"num_gpus": 1, "cpu_ram": 515000, "dph_base": 0.2, "storage_cost": 0.1}
    got = _json(capsys, url, _write(tmp_path, [{**plenty, **o} for o in SMALL_GPUS] + [RAW_QUARTER]))
    for offer in SMALL_GPUS:
        row = got[str(offer["id"])]
        held = format_bytes(int(offer["gpu_ram"]) * MIB)  # type: ignore[call-overload]
        assert (row["basis"], row["fits"], row["why"]) == (
            "unknown", "no", f"no 1x {offer['gpu_name']} measured; does not fit: a GPU of {held} holds no "
            "more than cuzk's porep floor of 12.0 GiB",
        ), offer  # fmt: skip
    quarter = got[str(RAW_QUARTER["id"])]  # a 15.7 GiB share of a 62.9 GiB machine
    assert (quarter["fits"], quarter["why"]) == (
        "no", "no 1x RTX 4090 measured; does not fit: cuzk's porep floor is 83.7 GiB of RAM"
    )  # fmt: skip


def test_fits_yes_needs_the_vram_vouched_for_by_a_peak_or_a_floor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A host like it without a VRAM peak once made ``fits yes``; now the GPUs must meet cuzk's floor."""
    rtx3060 = example.host_record("NVIDIA GeForce RTX 3060", 1, 12288, 512, "rig")
    offer = {"id": 1, "gpu_name": "RTX 3060", "num_gpus": 1, "gpu_ram": 12288, "cpu_ram": 515000,
             "dph_base": 0.2, "storage_cost": 0.1}  # fmt: skip
    unmeasured = _json(capsys, _porep_db(tmp_path, rtx3060, None), _write(tmp_path, [offer]))["1"]
    assert (unmeasured["vram_peak_bytes"], unmeasured["fits"]) == (None, "no")
    assert (
        unmeasured["why"]
        == "does not fit: a GPU of 12.0 GiB holds no more than cuzk's porep floor of 12.0 GiB"
    )
    (tmp_path / "floors.db").unlink()
    measured = _json(capsys, _porep_db(tmp_path, rtx3060, 11.5), _write(tmp_path, [offer]))["1"]
    assert (measured["vram_peak_bytes"], measured["fits"]) == (int(11.5 * GIB), "yes"), "a peak outranks"
    (tmp_path / "floors.db").unlink()
    rtx = example.host_record("NVIDIA GeForce RTX 4090", 1, 24564, 512, "rig")
    unsized = {**offer, "gpu_name": "RTX 4090"}
    del unsized["gpu_ram"]
    vouched = _json(capsys, _porep_db(tmp_path, rtx, None), _write(tmp_path, [unsized]))["1"]
    assert (vouched["vram_peak_bytes"], vouched["fits"]) == (None, "?"), "no peak, no GPU memory to compare"


def test_a_reserved_price_counts_the_searched_storage_once_and_disk_is_priced_per_gb(tmp_path: Path) -> None:
    """Without storage_total_cost, a reserved rate was $0.259/h against $0.253 on demand."""
    bundle = {**BUNDLE_3090, "discounted_dph_total": 0.3002 * 0.8}  # 20% off, the searched 0.0002 in it
    (offer,) = read_offers(_write(tmp_path, [bundle]))
    assert offer.searched_storage == pytest.approx(0.0002)
    assert offer.hourly(0, reserved=True) == pytest.approx(0.3002 * 0.8 - 0.0002)
    assert offer.hourly(0, reserved=True) < offer.hourly(0)  # type: ignore[operator]
    assert offer.hourly(GB) == pytest.approx(0.35 + 0.15 / 720), "storage_cost is $ per GB (10^9 bytes)"

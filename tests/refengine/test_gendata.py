"""gen-data: deterministic files for all four kinds and a manifest that describes them."""

from __future__ import annotations

import hashlib
import sys

import pytest

from pytest_cuzk.data.inputs import build_request
from pytest_cuzk.refengine import gendata
from pytest_cuzk.refengine.field import R
from pytest_cuzk.vocab.kinds import KINDS
from pytest_cuzk.vocab.vanilla import read_vanilla_proofs

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FILES = [
    "c1.json",
    "c1-2.json",
    "snap-vanilla.json",
    "snap-vanilla-2.json",
    "wpost-vanilla.json",
    "wpost-vanilla-2.json",
    "winning-vanilla.json",
    "winning-vanilla-2.json",
    "manifest.toml",
]


def test_same_seed_gives_identical_files_and_another_seed_does_not(tmp_path):
    gendata.generate(tmp_path / "a", seed=7)
    gendata.generate(tmp_path / "b", seed=7)
    gendata.generate(tmp_path / "c", seed=8)
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == sorted(FILES)
    for name in FILES:
        a = (tmp_path / "a" / name).read_bytes()
        assert a == (tmp_path / "b" / name).read_bytes(), name
        if name != "manifest.toml":
            assert a != (tmp_path / "c" / name).read_bytes(), name


def test_manifest_describes_every_sector_of_every_kind(tmp_path):
    manifest = tomllib.loads(gendata.generate(tmp_path).read_text())
    assert manifest["engine"] == {"name": "cuzk-ref", "preset": "default", "seed": 0}
    for name, kind in KINDS.items():
        entries = manifest["kinds"][name]
        assert len(entries) == 2
        for entry in entries:
            raw = (tmp_path / entry["file"]).read_bytes()
            assert entry["sha256"] == hashlib.sha256(raw).hexdigest() and entry["size"] == len(raw)
            req = build_request(kind, tmp_path / entry["file"], entry["request"])
            assert req.registered_proof == {"porep": 8, "snap": 3, "wpost": 13, "winning": 3}[name]
        assert entries[0]["request"] != entries[1]["request"] or name == "porep", name
    assert [e["request"] for e in manifest["kinds"]["porep"]] == [
        {"registered_proof": 8, "miner_id": 1000, "sector_number": 1},
        {"registered_proof": 8, "miner_id": 1000, "sector_number": 2},
    ]
    assert len(read_vanilla_proofs(tmp_path / "snap-vanilla.json")) == 16
    assert len(read_vanilla_proofs(tmp_path / "winning-vanilla-2.json")) == 1
    for name in ("wpost", "winning"):
        for entry in manifest["kinds"][name]:
            rand = bytes.fromhex(entry["request"]["randomness"])
            assert len(rand) == 32 and int.from_bytes(rand, "little") < R
    assert manifest["kinds"]["wpost"][1]["request"]["partition_index"] == 0


def test_the_plugin_reads_every_sector_of_the_manifest(tmp_path):
    from pytest_cuzk.data.manifest import load_manifest

    manifest = load_manifest(gendata.generate(tmp_path, sectors=3))
    assert {k: [e.file for e in v] for k, v in manifest.entries.items()}["porep"] == [
        "c1.json",
        "c1-2.json",
        "c1-3.json",
    ]


def test_unknown_preset_is_refused(tmp_path):
    with pytest.raises(
        ValueError, match="unknown reference preset 'huge'; use one of: default, medium, large, xlarge"
    ):
        gendata.generate(tmp_path, preset="huge")
    with pytest.raises(ValueError, match="sectors must be at least 1, got 0"):
        gendata.generate(tmp_path, sectors=0)

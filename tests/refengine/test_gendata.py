"""gen-data: deterministic files for all four kinds and a manifest that describes them."""

from __future__ import annotations

import hashlib
import sys

import pytest

from pytest_cuzk.inputs import build_request
from pytest_cuzk.refengine import gendata
from pytest_cuzk.refengine.field import R
from pytest_cuzk.wire.kinds import KINDS
from pytest_cuzk.wire.vanilla import read_vanilla_proofs

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FILES = ["c1.json", "snap-vanilla.json", "wpost-vanilla.json", "winning-vanilla.json", "manifest.toml"]


def test_same_seed_gives_identical_files_and_another_seed_does_not(tmp_path):
    gendata.generate(tmp_path / "a", seed=7)
    gendata.generate(tmp_path / "b", seed=7)
    gendata.generate(tmp_path / "c", seed=8)
    for name in FILES:
        a = (tmp_path / "a" / name).read_bytes()
        assert a == (tmp_path / "b" / name).read_bytes(), name
        if name != "manifest.toml":
            assert a != (tmp_path / "c" / name).read_bytes(), name


def test_manifest_describes_every_file(tmp_path):
    manifest = tomllib.loads(gendata.generate(tmp_path).read_text())
    assert manifest["engine"] == {"name": "cuzk-ref", "preset": "default", "seed": 0}
    for name, kind in KINDS.items():
        entry = manifest["kinds"][name]
        raw = (tmp_path / entry["file"]).read_bytes()
        assert entry["sha256"] == hashlib.sha256(raw).hexdigest() and entry["size"] == len(raw)
        req = build_request(kind, tmp_path / entry["file"], entry["request"])
        assert req.registered_proof == {"porep": 8, "snap": 3, "wpost": 13, "winning": 3}[name]
    assert manifest["kinds"]["porep"]["request"] == {
        "registered_proof": 8,
        "miner_id": 1000,
        "sector_number": 1,
    }
    assert len(read_vanilla_proofs(tmp_path / "snap-vanilla.json")) == 16
    assert len(read_vanilla_proofs(tmp_path / "winning-vanilla.json")) == 1
    for name in ("wpost", "winning"):
        rand = bytes.fromhex(manifest["kinds"][name]["request"]["randomness"])
        assert len(rand) == 32 and int.from_bytes(rand, "little") < R
    assert manifest["kinds"]["wpost"]["request"]["partition_index"] == 0


def test_main_writes_the_data_set(tmp_path, capsys):
    assert gendata.main([str(tmp_path / "d"), "--seed", "3"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "d" / "manifest.toml")
    assert tomllib.loads((tmp_path / "d" / "manifest.toml").read_text())["engine"]["seed"] == 3


def test_unknown_preset_is_refused(tmp_path):
    with pytest.raises(
        ValueError, match="unknown reference preset 'huge'; use one of: default, medium, large"
    ):
        gendata.generate(tmp_path, preset="huge")

"""Test data in a run: downloaded once with progress shown past capture; a kind without data is said so."""

from __future__ import annotations

import tomli_w
from httpserver import FileServer
from support import PROVE_SOURCE

from pytest_cuzk.backends.fake import FakeProfile


def test_missing_data_is_downloaded_with_progress_and_undownloadable_kinds_skip(fake_run, tmp_path):
    generated = FakeProfile(tmp_path / "generated").manifest().parent
    manifest = tmp_path / "remote" / "manifest.toml"
    manifest.parent.mkdir()
    with FileServer() as server:
        url = server.add("/winning.json", (generated / "winning.json").read_bytes())
        kinds = {"winning": {"file": "winning.json", "url": url}, "wpost": {"file": "wpost.json"}}
        manifest.write_text(tomli_w.dumps({"kinds": kinds}))
        result, _ = fake_run(
            {"test_prove": PROVE_SOURCE},
            "-k",
            "winning or wpost",
            f"--cuzk-manifest={manifest}",
            f"--cuzk-data-dir={tmp_path / 'cache'}",
            "-rs",
        )
        assert server.count("/winning.json") == 1, "downloaded once, for the warm-up and the case"
    result.assert_outcomes(passed=1, skipped=1)
    result.stderr.fnmatch_lines(["downloading winning.json: *(100%)*"])
    result.stdout.fnmatch_lines(["SKIPPED*wpost data wpost.json (*manifest.toml [[]kinds.wpost[]]): *"])
    assert (tmp_path / "cache" / "winning.json").exists()

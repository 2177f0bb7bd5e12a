"""Test data in a run: downloaded once with progress shown past capture; a kind without data is said so."""

from __future__ import annotations

import tomli_w
from helpers.httpserver import FileServer
from helpers.support import PROVE_SOURCE

from pytest_cuzk.backends.fake import FakeProfile


def test_missing_data_is_downloaded_with_progress_and_a_kind_without_data_fails_first_in_the_summary(
    fake_run, tmp_path
):
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
    result.assert_outcomes(passed=1, errors=1)
    result.stderr.fnmatch_lines(["downloading winning.json: *(100%)*"])
    result.stdout.fnmatch_lines(
        [
            "wpost data wpost.json (*manifest.toml [[]kinds.wpost[]]): not found * "
            "(or pass --cuzk-allow-missing *)",
            "*cuzk proving summary*",
            "DID NOT RUN: 1 cuzk test",
            "  test_prove[[]wpost-batch1-j1[]]: wpost data wpost.json *",
        ]
    )
    assert (tmp_path / "cache" / "winning.json").exists()


def test_missing_data_skips_only_when_asked(fake_run, tmp_path):
    manifest = tmp_path / "manifest.toml"
    manifest.write_text(tomli_w.dumps({"kinds": {"wpost": {"file": "wpost.json"}}}))
    args = ("-k", "wpost", f"--cuzk-manifest={manifest}", "--cuzk-allow-missing", "-rs")
    result, _ = fake_run({"test_prove": PROVE_SOURCE}, *args)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["DID NOT RUN: 1 cuzk test", "SKIPPED*wpost data wpost.json*"])

"""Each cuzk behaviour the plugin handles, met for real: a cuzk-ref behaving as cuzk (its default).

Every test here fails when the plugin's handling of that behaviour is removed: the client-side
AwaitProof bound, SIGTERM (not SIGINT) to stop, the PCE freshness rule, and telling a cuzk-ref
from a cuzk. The restart after an uncancellable timed-out proof is held by test_reliability
(the hung proof holds cuzk's prove worker, so the next test passes only on a fresh daemon),
unique request ids by the suite runs in test_suite_runs (a reused id gets the stored proof
of another sector, which does not verify).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers.engine_support import copy_params, fill, tmpfs
from helpers.support import PROVE_SOURCE, ref_daemons

from pytest_cuzk.backends.process import DaemonProcess, daemon_config, listen_address
from pytest_cuzk.backends.profiles import CuzkProfile, detect_profile
from pytest_cuzk.backends.reference import RefProfile
from pytest_cuzk.core.errors import DataDirUnwritable, ProofTimeout
from pytest_cuzk.daemon.client import ProvingClient
from pytest_cuzk.data.inputs import build_request
from pytest_cuzk.data.manifest import load_manifest
from pytest_cuzk.refengine.gendata import generate
from pytest_cuzk.vocab.kinds import KINDS

HANGS = "[ref.faults]\nhang_at_proof = 1\n"


def _request(manifest: Path, kind: str = "winning"):  # type: ignore[no-untyped-def]
    entry = load_manifest(manifest).entries[kind][0]
    return build_request(KINDS[kind], manifest.parent / entry.file, entry.request, request_id=f"{kind}-job")


def test_the_client_bounds_await_proof_which_cuzk_does_not(tmp_path: Path, ref_params: Path) -> None:
    with ref_daemons(tmp_path, ref_params, config=HANGS) as refs, ProvingClient(refs.addresses[0]) as client:
        client.wait_ready(60)
        req = _request(refs.manifest)
        client.submit(req)
        outcome: list[BaseException] = []
        waiter = threading.Thread(target=lambda: _await(client, req.request_id, outcome), daemon=True)
        t0 = time.monotonic()
        waiter.start()
        waiter.join(20)
        assert not waiter.is_alive(), "AwaitProof never returned: the client must not rely on timeout_ms"
        assert isinstance(outcome[0], ProofTimeout), outcome
        assert 1.0 <= time.monotonic() - t0 < 5
        assert client.cancel(req.request_id) is False  # cuzk cannot cancel: the job still holds the worker


def _await(client: ProvingClient, job_id: str, outcome: list[BaseException]) -> None:
    try:
        client.await_proof(job_id, timeout_s=1.0)
    except BaseException as exc:
        outcome.append(exc)


@pytest.mark.e2e  # a daemon in a subprocess
def test_stopping_sends_sigterm_which_stops_cuzk_where_sigint_does_not(tmp_path: Path) -> None:
    config = daemon_config(
        None, {"daemon": {"listen": listen_address(tmp_path)}, "srs": {"param_cache": str(tmp_path)}}
    )
    daemon = DaemonProcess([sys.executable, "-m", "pytest_cuzk.refengine.cli"], tmp_path / "work", config)
    daemon.start()
    daemon.wait_answering(60)
    t0 = time.monotonic()
    assert daemon.stop(grace_s=10) == -signal.SIGTERM  # with SIGINT it would wait the grace out, then SIGKILL
    assert time.monotonic() - t0 < 5


def test_a_cuzk_ref_says_what_it_is_and_a_cuzk_does_not(
    tmp_path: Path, ref_params: Path, fake_daemon_address: str
) -> None:
    with ref_daemons(tmp_path, ref_params) as refs:
        address = refs.addresses[0]
        with ProvingClient(address) as client:
            client.wait_ready(60)
        fallback = CuzkProfile("cuzk")
        local = detect_profile(address, fallback, local=True, data_dir=tmp_path)
        assert isinstance(local, RefProfile)
        assert (local.param_cache, local.behave, local.preset()) == (refs.params, "cuzk", "default")
        assert local.verifier(KINDS["winning"]) is not None
        remote = detect_profile(address, fallback, local=False, data_dir=tmp_path)
        assert isinstance(remote, RefProfile) and remote.verifier(KINDS["winning"]) is None
    assert detect_profile(fake_daemon_address, fallback, local=True, data_dir=tmp_path) is fallback
    assert detect_profile("unix:///nonexistent/socket", fallback, local=True, data_dir=tmp_path) is None


@pytest.fixture
def fake_daemon_address(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A running in-process daemon that, like cuzk, has no cuzk_ref_info metric."""
    from pytest_cuzk.backends.fake import FakeDaemon

    fake = FakeDaemon("fake", tmp_path / "fake")
    fake.bring_up(1, [], lambda *_: None)
    yield fake.address
    fake.stop()


def _config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "base.toml"
    path.write_text(text)
    return f"--cuzk-config={path}"


def test_only_a_pce_written_since_the_start_counts_for_cuzk(inner, tmp_path: Path, ref_params: Path) -> None:
    """The param cache holds a complete PCE from an earlier run, but the daemon cannot write a new one."""
    winning = KINDS["winning"]
    manifest = generate(tmp_path / "data")
    with tmpfs(tmp_path / "cache") as cache:
        copy_params(ref_params, cache, winning.circuit_id)  # the session's keys: no setup of its own
        (cache / winning.pce_file).write_bytes(b"PCE\x02" + b"\0" * 60)  # complete and stable, but stale
        fill(cache)
        result = inner(
            {"test_prove": PROVE_SOURCE},
            "-k", "winning", "--cuzk-batch-sizes=1", f"--cuzk-param-cache={cache}",
            f"--cuzk-manifest={manifest}", "--cuzk-warmup-timeout=3",
        )  # fmt: skip
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*PCE file {cache / winning.pce_file} did not appear within 3s*"])


SPLIT = "FAILED: proof split failed: proof bytes length mismatch: got 3072, expected 0"


@pytest.mark.parametrize(
    ("profile", "kind", "batch", "errors", "known"),
    [
        (CuzkProfile("cuzk"), "snap", 2, [SPLIT, SPLIT], True),
        (RefProfile("default", None, Path("."), behave="cuzk"), "snap", 4, [SPLIT], True),
        (CuzkProfile("cuzk"), "snap", 2, [SPLIT, "FAILED: out of memory"], False),
        (CuzkProfile("cuzk"), "snap", 2, [], False),
        (CuzkProfile("cuzk"), "snap", 1, [SPLIT], False),
        (CuzkProfile("cuzk"), "porep", 2, [SPLIT], False),
        (RefProfile("default", None, Path("."), behave="protocol"), "snap", 2, [SPLIT], False),
    ],
    ids=["cuzk", "ref-as-cuzk", "another-error-too", "no-failure", "batch1", "porep", "protocol"],
)
def test_only_cuzks_batched_snapdeals_failure_is_a_known_bug(profile, kind, batch, errors, known) -> None:
    reason = profile.known_issue(kind, batch, errors)
    assert (reason is not None) == known
    assert reason is None or "--cuzk-batch-sizes=1" in reason


def test_a_reference_data_dir_it_cannot_make_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("in the way of the data dir")
    profile = RefProfile("default", None, tmp_path / "file" / "data")
    with pytest.raises(DataDirUnwritable) as raised:
        profile.manifest()
    said = f"cannot use {tmp_path / 'file' / 'data'}: Not a directory; check that directory"
    assert str(raised.value).startswith(said), raised.value


def test_a_spawned_builds_name_ends_with_its_configs_digest(pytester, tmp_path, monkeypatch):
    """One cuzk binary under two configs was one build: its runs pooled and compared with themselves."""
    import json as json_

    from pytest_cuzk.backends.reference import ReferenceEngine
    from pytest_cuzk.backends.spawned import SpawnedCuzk
    from pytest_cuzk.backends.workspace import Workspace
    from pytest_cuzk.config.settings import resolve_settings
    from pytest_cuzk.refengine.config import FAULTS_ENV

    binary = tmp_path / "cuzk-daemon"
    binary.write_bytes(b"\x7fELF" + b"\0" * 60)  # compiled: taken for cuzk, never started to ask
    binary.chmod(0o755)
    builds = []
    for text in ("[gpus]\ngpu_threads = 32\n", "[gpus]\ngpu_threads = 16\n"):
        (tmp_path / "cuzk.toml").write_text(text + '[daemon]\nlisten = "0.0.0.0:9820"\n')
        args = (f"--cuzk-binary={binary}", f"--cuzk-config={tmp_path / 'cuzk.toml'}")
        settings = resolve_settings(pytester.parseconfig(*args))
        profile = SpawnedCuzk("local", settings, Workspace(tmp_path / "ws"), binary).profile()
        builds.append(profile.build())
        assert profile.identity() == profile.build()
        assert profile.config().keys == {"gpus.gpu_threads": text.split("= ")[1].strip()}  # type: ignore[union-attr]
    assert builds[0].rpartition(" config=")[0] == builds[1].rpartition(" config=")[0]
    assert builds[0] != builds[1]
    monkeypatch.setenv(FAULTS_ENV, json_.dumps({"slow_factor": 1.25}))
    ref = ReferenceEngine("local", resolve_settings(pytester.parseconfig()), Workspace(tmp_path / "ws"))
    assert ref.profile().config().keys == {"ref.faults.slow_factor": "1.25"}  # type: ignore[union-attr]
    assert ref.profile().build().endswith(ref.profile().config().tag)  # type: ignore[union-attr]

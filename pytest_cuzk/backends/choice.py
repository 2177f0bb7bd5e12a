"""Which daemons a run tests: ``--cuzk-daemon`` resolved to backends, with the reason for the header.

``auto`` attaches when a daemon answers at ``--cuzk-addr``, else spawns a cuzk binary
(``--cuzk-binary``, else ``cuzk-daemon`` or ``cuzk`` on PATH), else the reference engine.
This is the built-in ``pytest_cuzk_make_backends``; another plugin can answer first.
"""

from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass
from pathlib import Path

from pytest_cuzk.config.settings import THIS_DAEMON, Settings, daemon_value
from pytest_cuzk.core.errors import CuzkError

from ..wire.addresses import label_from_address
from .protocol import DaemonBackend, Mode
from .workspace import Workspace

__all__ = ["AB_LABEL", "DaemonChoice", "choose", "find_binary"]

LOCAL_LABEL = "local"
AB_LABEL = "baseline"  # the --cuzk-ab daemon's label: test ids and backends keep naming the candidate


@dataclass(frozen=True)
class DaemonChoice:
    """The daemons under test and how they were chosen."""

    mode: Mode
    reason: str
    backends: tuple[DaemonBackend, ...]
    baseline: DaemonBackend | None = None  # --cuzk-ab's daemon, measured beside the candidate

    @property
    def attached(self) -> bool:
        """Daemons someone else runs: named in test ids and never shared by xdist workers."""
        return self.mode == "attach"

    def ab_identity(self) -> dict[str, str]:
        """The A/B baseline's build, for machine info beside the candidate's (none without --cuzk-ab)."""
        return {"ab_baseline_daemon": self.baseline.profile().identity()} if self.baseline is not None else {}

    @property
    def every(self) -> tuple[DaemonBackend, ...]:
        """Every daemon of the run, the A/B baseline too: what is stopped at its end."""
        return self.backends + ((self.baseline,) if self.baseline is not None else ())


def find_binary(explicit: Path | None) -> Path | None:
    """The cuzk binary to spawn: the explicit one, else ``cuzk-daemon`` or ``cuzk`` on PATH."""
    if explicit:
        return explicit
    for name in ("cuzk-daemon", "cuzk"):
        found = shutil.which(name)
        if found:
            return Path(found)
    return None


def _answers(address: str, timeout_s: float) -> bool:
    """One GetStatus: a closed port is refused at once, so the probe costs nothing when no one listens."""
    from pytest_cuzk.daemon.client import ProvingClient

    try:
        with ProvingClient(address) as client:
            client.status(timeout=timeout_s)
        return True
    except (CuzkError, ValueError):
        return False


def choose(settings: Settings, workspace: Workspace) -> DaemonChoice:
    """Resolve ``--cuzk-daemon`` into backends, and ``--cuzk-ab`` into the baseline beside them."""
    choice = _candidates(settings, workspace)
    if settings.ab is None:
        return choice
    baseline = _candidates(baseline_settings(settings), workspace).backends[0]
    return dataclasses.replace(choice, baseline=baseline)


def baseline_settings(s: Settings) -> Settings:
    """The baseline's settings: ``--cuzk-ab*`` in the places of the options that name the candidate."""
    assert s.ab is not None, "only an A/B run has a baseline"
    own = {THIS_DAEMON: AB_LABEL}  # its label; --cuzk-status and --cuzk-host-id name the candidate
    return dataclasses.replace(
        s, daemon=s.ab, attach=s.ab_attach, binary=s.ab_binary, config=s.ab_config, labels=own, status={}
    )


def _candidates(settings: Settings, workspace: Workspace) -> DaemonChoice:
    s = settings
    if s.attach:
        return _attached(s, s.attach, "addresses given with --cuzk-daemon")
    if s.daemon == "ref":
        return _reference(s, workspace, "--cuzk-daemon=ref")
    if s.daemon == "spawn":
        found = find_binary(s.binary)
        if not found:
            raise CuzkError(
                "--cuzk-daemon=spawn needs a cuzk binary: pass --cuzk-binary PATH or put cuzk-daemon on PATH"
            )
        return _spawned(s, workspace, found, "--cuzk-daemon=spawn")
    if _answers(s.addr, 1.0):
        return _attached(s, (s.addr,), f"a daemon answers at {s.addr}")
    found = find_binary(s.binary)
    if found:
        return _spawned(s, workspace, found, f"no daemon at {s.addr}; found binary {found}")
    return _reference(s, workspace, f"no daemon at {s.addr} and no cuzk binary: using the reference engine")


def _attached(s: Settings, addresses: tuple[str, ...], reason: str) -> DaemonChoice:
    from .attached import AttachedDaemon

    backends = tuple(
        AttachedDaemon(
            daemon_value(s.labels, addr) or label_from_address(addr),
            addr,
            start_timeout_s=s.start_timeout,
            param_cache=s.param_cache,
            data_dir=s.data_dir,
        )
        for addr in addresses
    )
    return DaemonChoice("attach", reason, backends)


def _local_label(s: Settings) -> str:
    """A daemon the plugin starts has no address yet: only a bare ``--cuzk-label NAME`` names it."""
    return s.labels.get(THIS_DAEMON, LOCAL_LABEL)


def _spawned(s: Settings, workspace: Workspace, binary: Path, reason: str) -> DaemonChoice:
    from .spawned import SpawnedCuzk

    return DaemonChoice("spawn", reason, (SpawnedCuzk(_local_label(s), s, workspace, binary),))


def _reference(s: Settings, workspace: Workspace, reason: str) -> DaemonChoice:
    from .reference import ReferenceEngine

    return DaemonChoice("ref", reason, (ReferenceEngine(_local_label(s), s, workspace),))

"""Which daemons a run tests: ``--cuzk-daemon`` resolved to backends, with the reason for the header.

``auto`` attaches when a daemon answers at ``--cuzk-addr``, else spawns a cuzk binary
(``--cuzk-binary``, else ``cuzk-daemon`` or ``cuzk`` on PATH), else the reference engine; it
falls back only when nothing listens there, and fails when something else does. Attached
daemons are dialed as they are chosen: a run stops at once on an address that does not answer.
This is the built-in ``pytest_cuzk_make_backends``; another plugin can answer first.
"""

from __future__ import annotations

import dataclasses
import socket
from dataclasses import dataclass
from pathlib import Path

from pytest_cuzk.backends.protocol import DaemonBackend, Mode
from pytest_cuzk.backends.workspace import Workspace
from pytest_cuzk.config.settings import Settings
from pytest_cuzk.config.values import THIS_DAEMON, daemon_value
from pytest_cuzk.core.errors import CuzkError
from pytest_cuzk.vocab.addresses import label_from_address, parse_address

__all__ = ["AB_LABEL", "DaemonChoice", "check", "choose"]

LOCAL_LABEL = "local"
AB_LABEL = "control"  # the --cuzk-ab daemon's label: test ids and backends keep naming the candidate


@dataclass(frozen=True)
class DaemonChoice:
    """The daemons under test and how they were chosen."""

    mode: Mode
    reason: str
    backends: tuple[DaemonBackend, ...]
    control: DaemonBackend | None = None  # --cuzk-ab's daemon, measured beside the candidate

    @property
    def attached(self) -> bool:
        """Daemons someone else runs: named in test ids and never shared by xdist workers."""
        return self.mode == "attach"

    def machine_record(self, host: dict[str, object]) -> dict[str, object]:
        """pytest-benchmark's ``machine_info["cuzk"]``: the host, the builds and how they are reached.

        How a daemon is reached (attach, spawn, ref) is not in the test ids: a baseline saved
        against a spawned daemon gates an attached one of the same build. Each build's config keys
        (masked) let a comparison say which keys differ; ``host`` describes where pytest ran, and a
        remote daemon's hardware is not in it.
        """
        control = self.control
        # The key keeps the control daemon's former name: saved runs are read by it.
        ab = {"ab_baseline_daemon": control.profile().build()} if control is not None else {}
        return {
            "host": host,
            "daemon": ", ".join(sorted({b.profile().build() for b in self.backends})),
            "daemon_mode": self.mode,
            **ab,
            "daemon_config": self.config_info(),
            "remote_daemons": [b.address for b in self.backends if not b.local],
        }

    def config_info(self) -> dict[str, dict[str, str]]:
        """Each build's config keys (masked), where the plugin knows them: for machine info."""
        profiles = [b.profile() for b in self.every]
        return {p.build(): config.keys for p in profiles if (config := p.config()) is not None}

    @property
    def every(self) -> tuple[DaemonBackend, ...]:
        """Every daemon of the run, the A/B control daemon too: what is stopped at its end."""
        return self.backends + ((self.control,) if self.control is not None else ())


def _listens(address: str, timeout_s: float) -> bool:
    """Whether anything accepts a connection at ``address``: refused, or no socket file, is no one."""
    where = parse_address(address)
    try:
        if where.port is not None:
            socket.create_connection((where.host, where.port), timeout=timeout_s).close()
        else:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(timeout_s)
                sock.connect(str(where.socket_path))  # a unix socket
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except OSError as exc:
        raise CuzkError(
            f"--cuzk-daemon=auto: cannot connect to {address} ({exc}); start the daemon there, "
            "or pass another --cuzk-addr or --cuzk-daemon=ref"
        ) from exc
    return True


def _attachable(address: str, timeout_s: float) -> bool:
    """False only when nothing listens at ``address``; something there that is not a cuzk daemon fails.

    Falling back to the reference engine then would test the wrong engine and go green: a hung
    daemon (accepts, never answers), a web server or another gRPC service at the address.
    """
    from pytest_cuzk.core.errors import NotCuzkServer, RpcError
    from pytest_cuzk.daemon.client import ProvingClient

    if not _listens(address, timeout_s):
        return False
    rest = "not falling back to the reference engine (pass another --cuzk-addr, or --cuzk-daemon=ref)"
    try:
        with ProvingClient(address) as client:
            client.wait_ready(timeout_s)
    except NotCuzkServer as exc:
        raise CuzkError(f"--cuzk-daemon=auto: {exc}; {rest}") from exc
    except RpcError as exc:
        raise CuzkError(
            f"--cuzk-daemon=auto: {address} accepts connections but its GetStatus got no answer "
            f"({exc.details}); a hung daemon looks like this: restart it; {rest}"
        ) from exc
    return True


def check(settings: Settings) -> None:
    """What each daemon the run starts needs of the settings, checked by its class at configure time.

    A missing binary or a preset in two places that disagree is one line then, not a failed session.
    """
    from pytest_cuzk.backends.reference import ReferenceEngine
    from pytest_cuzk.backends.spawned import SpawnedCuzk, SpawnedDaemon

    kinds: dict[str, type[SpawnedDaemon]] = {"spawn": SpawnedCuzk, "ref": ReferenceEngine}
    sides = [settings] + ([control_settings(settings)] if settings.ab is not None else [])
    for side in sides:
        if not side.attach and side.daemon in kinds:
            kinds[side.daemon].check_settings(side)


def choose(settings: Settings, workspace: Workspace) -> DaemonChoice:
    """Resolve ``--cuzk-daemon`` into backends, and ``--cuzk-ab`` into the control daemon beside them."""
    choice = _candidates(settings, workspace)
    if settings.ab is None:
        return choice
    control = _candidates(control_settings(settings), workspace).backends[0]
    return dataclasses.replace(choice, control=control)


def control_settings(s: Settings) -> Settings:
    """The control daemon's settings: ``--cuzk-ab*`` in the places of the options that name the candidate."""
    assert s.ab is not None, "only an A/B run has a control daemon"
    own = {THIS_DAEMON: AB_LABEL}  # its label; --cuzk-status and --cuzk-host-id name the candidate
    return dataclasses.replace(
        s, daemon=s.ab, attach=s.ab_attach, binary=s.ab_binary, config=s.ab_config, labels=own, status={}
    )


def _candidates(settings: Settings, workspace: Workspace) -> DaemonChoice:
    from pytest_cuzk.backends.spawned import find_binary, spawn_binary

    s = settings
    if s.attach:
        return _attached(s, s.attach, "addresses given with --cuzk-daemon")
    if s.daemon == "ref":
        return _reference(s, workspace, "--cuzk-daemon=ref")
    if s.daemon == "spawn":
        return _spawned(s, workspace, spawn_binary(s), "--cuzk-daemon=spawn")
    if _attachable(s.addr, s.probe_timeout):
        return _attached(s, (s.addr,), f"a daemon answers at {s.addr}")
    found = find_binary(s.binary)
    if found:
        return _spawned(s, workspace, found, f"no daemon at {s.addr}; found binary {found}")
    return _reference(s, workspace, f"no daemon at {s.addr} and no cuzk binary: using the reference engine")


def _attached(s: Settings, addresses: tuple[str, ...], reason: str) -> DaemonChoice:
    from pytest_cuzk.backends.attached import AttachedDaemon

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
    for backend in backends:
        backend.dial()
    return DaemonChoice("attach", reason, backends)


def _local_label(s: Settings) -> str:
    """A daemon the plugin starts has no address yet: only a bare ``--cuzk-label NAME`` names it."""
    return s.labels.get(THIS_DAEMON, LOCAL_LABEL)


def _spawned(s: Settings, workspace: Workspace, binary: Path, reason: str) -> DaemonChoice:
    from pytest_cuzk.backends.spawned import SpawnedCuzk

    return DaemonChoice("spawn", reason, (SpawnedCuzk(_local_label(s), s, workspace, binary),))


def _reference(s: Settings, workspace: Workspace, reason: str) -> DaemonChoice:
    from pytest_cuzk.backends.reference import ReferenceEngine

    return DaemonChoice("ref", reason, (ReferenceEngine(_local_label(s), s, workspace),))

"""A daemon someone else started: the plugin dials it and never starts, restarts or stops it.

On this machine its process is found by its socket (``owner``), so its RSS and VRAM are sampled
as a spawned daemon's are; a remote one's memory is what its own HTTP ``/status`` says, if anything.
What engine it is (a cuzk-ref says so in GetMetrics) is read once, when it first answers.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import psutil

from pytest_cuzk.backends.health import probe
from pytest_cuzk.backends.owner import socket_owner
from pytest_cuzk.backends.process import stuck_state
from pytest_cuzk.backends.profiles import CuzkProfile, detect_profile
from pytest_cuzk.backends.protocol import (
    BackendState,
    ColdStart,
    DaemonLog,
    EngineProfile,
    Mode,
    PceRule,
    Prepare,
    no_lock,
)
from pytest_cuzk.core.errors import CuzkError, DaemonExited, DeadlineExceeded
from pytest_cuzk.daemon.client import ProvingClient
from pytest_cuzk.results.rows import HostRecord
from pytest_cuzk.vocab.addresses import is_local, parse_address
from pytest_cuzk.vocab.kinds import ProofKindInfo

__all__ = ["ATTACHED_PROBE_S", "AttachedDaemon"]

ATTACHED_PROBE_S = 1.0  # how often a watched call asks an attached daemon whether it still answers
ATTACHED_PROBE_TIMEOUT_S = 2.0
ATTACH_GRACE_S = 5.0  # an attached daemon is already running: refused connections are an answer


class AttachedDaemon:
    """A running daemon at an address; taken out of the run, never restarted, when it fails."""

    mode: Mode = "attach"
    owned = False

    def __init__(
        self,
        label: str,
        address: str,
        *,
        start_timeout_s: float,
        param_cache: Path | None,
        data_dir: Path,
        profile: EngineProfile | None = None,
    ) -> None:
        self.label = label
        self._address = address
        self._start_timeout_s = start_timeout_s
        self._param_cache = param_cache
        self._data_dir = data_dir
        self._profile = profile
        self.state = BackendState()
        self._probe_at = 0.0
        self._probe_error = ""
        self._silent = 0  # GetStatus probes in a row that got no answer at all
        self._owner: tuple[int | None, str] | None = None

    @property
    def address(self) -> str:
        return self._address

    @property
    def pid(self) -> int | None:
        """The process listening at the address (found again after it was restarted)."""
        if not self.local:
            return None
        if self._owner is None or (self._owner[0] is not None and not psutil.pid_exists(self._owner[0])):
            self._owner = socket_owner(parse_address(self._address))
        return self._owner[0]

    @property
    def status_page(self) -> str | None:
        return None

    def unsampled(self) -> str | None:
        if not self.local:
            return "remote daemon"
        return None if self.pid is not None else (self._owner[1] if self._owner else None)

    @property
    def local(self) -> bool:
        return is_local(self._address)

    @property
    def log(self) -> DaemonLog | None:
        return None

    def profile(self) -> EngineProfile:
        """A cuzk-ref's profile when it says it is one (its keys verify proofs if local), else cuzk's."""
        fallback = CuzkProfile(f"attached: {self.address}")
        if self._profile is None and not self.state.out_of_service:
            self._profile = detect_profile(self.address, fallback, local=self.local, data_dir=self._data_dir)
        return self._profile or fallback

    def pce_rule(self) -> PceRule | None:
        """Only a daemon on this machine, whose param cache the user named, can be watched."""
        if not self.local or self._param_cache is None:
            return None
        return PceRule(self._param_cache)

    def bring_up(self, batch_size: int, kinds: Sequence[ProofKindInfo], prepare: Prepare) -> None:
        """Check once that it answers; one that does not is out of service for the rest of the run."""
        if self.state.out_of_service:
            raise DaemonExited(
                f"daemon {self.label} ({self.address}) is out of service: {self.state.out_of_service}"
            )
        self.dial()

    def dial(self) -> None:
        """Check once that it answers (it is already running: a short grace), when the run chooses it.

        One that does not is out of service for the rest of the run, and the run stops on it
        at once: a wrong address is one usage error, not a failure of every test.
        """
        if self.state.cold:
            return
        cold = ColdStart(self.label, None)
        t0 = time.monotonic()
        try:
            with ProvingClient(self.address) as client:
                client.wait_ready(min(ATTACH_GRACE_S, self._start_timeout_s))
        except CuzkError as exc:
            self.state.out_of_service = str(exc)
            raise
        cold.start_s = time.monotonic() - t0
        self.state.cold.append(cold)

    def alive(self) -> bool:
        """It answered GetStatus lately, or at least took the call: a host that vanishes is noticed too."""
        self._probe()
        return not self._probe_error or self._silent > 0

    def _probe(self) -> None:
        if time.monotonic() - self._probe_at < ATTACHED_PROBE_S:
            return
        self._probe_at = time.monotonic()
        try:
            with ProvingClient(self.address) as client:
                client.status(timeout=ATTACHED_PROBE_TIMEOUT_S)
            self._probe_error, self._silent = "", 0
        except DeadlineExceeded as exc:
            self._probe_error, self._silent = str(exc), self._silent + 1
        except CuzkError as exc:
            self._probe_error, self._silent = str(exc), 0

    def gone(self, grace_s: float = 1.0) -> bool:
        self._probe_at = 0.0
        return not self.alive()

    def death_message(self, rss_peak: int | None = None) -> str:
        return f"attached daemon at {self.address} stopped answering: {self._probe_error}"

    def take_out(self, reason: str) -> None:
        self.state.out_of_service = reason

    def lost(self, reason: str) -> None:
        self.state.out_of_service = reason

    def stuck(self) -> str | None:
        """Stopped, when its process is on this machine; else silent to two GetStatus probes in a row."""
        if self.local and (state := stuck_state(self.pid)):
            return state
        self._probe()
        if self._silent >= 2:
            return f"no answer to GetStatus for {ATTACHED_PROBE_TIMEOUT_S:g} s, twice in a row"
        return None

    def health(self, timeout_s: float) -> str | None:
        return probe(self.address, None, timeout_s)

    def hung(self, reason: str) -> None:
        self.state.out_of_service = reason

    def cache_lock(self, kind: ProofKindInfo) -> AbstractContextManager[object]:
        return no_lock()

    def host_record(self) -> HostRecord:
        """The local machine for a local daemon, else what its GetStatus says of its GPUs."""
        if self.local:
            return HostRecord.this_host()
        with ProvingClient(self.address) as client:
            # cuzk lists each GPU once per worker (two per GPU by default).
            gpus = list({g.ordinal: g for g in client.status().gpus}.values())
        return HostRecord.of(
            gpu_models=[g.name for g in gpus],
            gpu_count=len(gpus),
            vram_total_bytes=sum(g.vram_total_bytes for g in gpus),
            cpu_model=f"unknown (remote host {self.label})",  # keeps unlike remote hosts apart
            cpu_cores=0,
            ram_bytes=0,
            hostname=self.label,
        )

    def stop(self) -> None:
        """Nothing to stop: the daemon is not ours."""

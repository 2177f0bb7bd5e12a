"""What every way of getting a daemon provides: the ``DaemonBackend`` Protocol and its records.

The session never asks *how* a daemon came to be; it asks its backend. A backend owns
starting and restarting, liveness and the message when the daemon dies, where its PCE
lives and whether it must be fresh, its identity for machine info, its engine profile
(test data and verifier), and what happens after a proof it cannot cancel. The mode
string survives only as a ``Literal`` for the header and the records. Model: pytest-xdist's
``Scheduling`` Protocol. A new way of getting a daemon is one class satisfying this.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import pytest

from pytest_cuzk.vocab.daemonconfig import DaemonConfig
from pytest_cuzk.vocab.kinds import ProofKindInfo

if TYPE_CHECKING:
    from pytest_cuzk.config.slo import Slo
    from pytest_cuzk.core.progress import ProgressLine
    from pytest_cuzk.proto import pb
    from pytest_cuzk.results.rows import HostRecord

__all__ = [
    "LOG_MARK_KEY",
    "BackendState",
    "ColdStart",
    "DaemonBackend",
    "DaemonLog",
    "EngineProfile",
    "Mode",
    "PceRule",
    "Prepare",
    "Verifier",
    "log_section",
    "no_lock",
]

Mode = Literal["attach", "spawn", "ref", "fake"]
Verifier = Callable[["pb.SubmitProofRequest", bytes], bool]


@dataclass
class ColdStart:
    """Seconds each readiness stage took for one daemon configuration, and each kind's RSS peak."""

    label: str
    batch_size: int | None
    start_s: float = 0.0
    srs_load_s: dict[str, float] = field(default_factory=dict)
    warmup_s: dict[str, float] = field(default_factory=dict)
    pce_s: dict[str, float] = field(default_factory=dict)
    warmup_rss_peak_bytes: dict[str, int] = field(default_factory=dict)  # SRS load to PCE written
    lowmem_warmup: bool = False
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "batch_size": self.batch_size,
            "notes": list(self.notes),
            "start_s": round(self.start_s, 3),
            "srs_load_s": {k: round(v, 3) for k, v in self.srs_load_s.items()},
            "warmup_s": {k: round(v, 3) for k, v in self.warmup_s.items()},
            "pce_s": {k: round(v, 3) for k, v in self.pce_s.items()},
            "warmup_rss_peak_bytes": dict(self.warmup_rss_peak_bytes),
            "lowmem_warmup": self.lowmem_warmup,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ColdStart:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class BackendState:
    """What the run learnt about one daemon: its cold starts, restarts, readiness and the proofs it gave.

    ``proofs`` maps the sha256 of every proof the daemon returned in this run to its job id:
    Groth16 proofs are randomised, so a repeat is a replayed or cached answer.
    """

    cold: list[ColdStart] = field(default_factory=list)
    restarts: list[str] = field(default_factory=list)
    ready_kinds: set[str] = field(default_factory=set)
    out_of_service: str | None = None
    proofs: dict[bytes, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PceRule:
    """Where a daemon writes its PCE files and since when a file counts (0: any complete file)."""

    directory: Path
    fresh_since: float = 0.0


class DaemonLog(Protocol):
    """A spawned daemon's log, for the lines a failing test gets."""

    @property
    def log_path(self) -> Path: ...

    @property
    def config_path(self) -> Path: ...

    def log_size(self) -> int: ...

    def log_tail(self, lines: int = 40, since: int = 0) -> str: ...


def log_section(log: DaemonLog, since: int, *, loud: bool) -> str:
    """A failed test's daemon-log section: where the kept log is, and its lines since ``since`` if ``loud``.

    The failure's reason comes first; the log's lines, pages of INFO, only under ``-v``.
    """
    tail = log.log_tail(60, since=since) if loud else ""
    none = " (nothing logged during this test)" if loud else " (-v shows its last lines here)"
    return f"kept in {log.log_path}{'' if tail else none}\n{tail}".rstrip()


class EngineProfile(Protocol):
    """What engine a daemon runs: where its test data comes from and how its proofs are checked."""

    def manifest(self) -> Path | None:
        """The data manifest for this engine; None means the run's default (cuzk's) manifest."""

    def verifier(self, kind: ProofKindInfo) -> Verifier | None:
        """Full verification of a proof from its request; None where only the structure is checked."""

    def identity(self) -> str:
        """The build under test, for the summary and the results database (what it said once running)."""

    def build(self) -> str:
        """The build as known before its daemon answers: machine info, compared between runs by equality."""

    def config(self) -> DaemonConfig | None:
        """The configuration the plugin started it with (its digest ends the build's name); None: unknown."""

    def preset(self) -> str | None:
        """The reference engine's circuit-size preset; None for a real cuzk."""

    def default_param_cache(self) -> Path | None:
        """The param cache the engine says it uses when none is configured; None where it says nothing."""

    def known_issue(self, kind: str, batch_size: int, errors: Sequence[str]) -> str | None:
        """Why these failures are a known bug of the engine (the case is expected to fail); else None."""

    def slo(self, kind: ProofKindInfo, under: ProofKindInfo | None) -> Slo:
        """The latency bound of ``kind`` where ``--cuzk-slo`` names none: alone, or under ``under``'s load."""


class Prepare(Protocol):
    """The readiness chain, as a backend that restarts its daemon runs it; ``progress`` shows its waits."""

    progress: ProgressLine

    def __call__(self, backend: DaemonBackend, kinds: Sequence[ProofKindInfo], cold: ColdStart) -> None: ...


class DaemonBackend(Protocol):
    """One daemon under test, however it is provided."""

    label: str
    mode: Mode
    state: BackendState
    owned: bool  # the plugin starts it, so it may stop and restart it (an A/B pair taking turns)

    @property
    def address(self) -> str:
        """Where to dial it now (a restarted daemon may have a new address)."""

    @property
    def pid(self) -> int | None:
        """The process to sample for RSS and VRAM; None when it cannot be sampled from here."""

    def unsampled(self) -> str | None:
        """Why ``pid`` is None (e.g. "remote daemon"), for the summary's n/a; None when it is sampled."""

    @property
    def status_page(self) -> str | None:
        """The HTTP ``/status`` the plugin gave the daemon; None where it gave none.

        It tells what only the daemon knows (each partition's stage times); an attached daemon's
        is ``--cuzk-status``.
        """

    @property
    def local(self) -> bool:
        """Whether the daemon runs on this machine (its host is this host)."""

    @property
    def log(self) -> DaemonLog | None:
        """The daemon's log when the plugin owns it."""

    def profile(self) -> EngineProfile: ...

    def pce_rule(self) -> PceRule | None:
        """Where to wait for PCE files after a warm-up; None when they cannot be checked from here."""

    def bring_up(self, batch_size: int, kinds: Sequence[ProofKindInfo], prepare: Prepare) -> None:
        """Make the daemon answer, configured for ``batch_size`` where the plugin configures it.

        Raises DaemonExited when it is out of service or cannot be started.
        """

    def alive(self) -> bool: ...

    def gone(self, grace_s: float = 1.0) -> bool:
        """After an RPC error: whether the daemon is dead (a spawned one gets ``grace_s`` to be reaped)."""

    def death_message(self, rss_peak: int | None = None) -> str: ...

    def take_out(self, reason: str) -> None:
        """After a proof the daemon cannot cancel: restart it, or take it out of the run."""

    def lost(self, reason: str) -> None:
        """The daemon died or stopped answering during a test."""

    def stuck(self) -> str | None:
        """Why the daemon cannot be making progress right now (its process is stopped), else None."""

    def health(self, timeout_s: float) -> str | None:
        """None when the daemon answers GetStatus within ``timeout_s``; else what was seen."""

    def hung(self, reason: str) -> None:
        """It answers nothing: kill and restart it before the next test, or take it out of the run."""

    def cache_lock(self, kind: ProofKindInfo) -> AbstractContextManager[object]:
        """Held while a circuit is set up and its PCE written, across daemons sharing a cache."""

    def host_record(self) -> HostRecord:
        """The host the daemon runs on, for the results database."""

    def stop(self) -> None:
        """Stop what the plugin started; idempotent."""


def no_lock() -> AbstractContextManager[object]:
    """For backends whose cache no other daemon of this run shares."""
    return contextlib.nullcontext()


# On a test item that used a daemon: the daemon, its log then, and the log's size then (what the
# test's own lines are, if it fails).
LOG_MARK_KEY = pytest.StashKey["tuple[DaemonBackend, DaemonLog | None, int]"]()

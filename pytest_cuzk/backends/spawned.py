"""Daemons the plugin starts: a cuzk binary, and (in ``reference``) the reference engine.

A spawned daemon is restarted when a test needs another batch size (tests are grouped so
that this happens once per size), after it crashed (once per crash, recorded, given up
after three), and after a proof it could not cancel (cuzk cannot). When its PCE files are
missing, a cuzk binary warms up with a low-memory config first and then restarts with the
full one: the PCE extraction is the memory peak that gets small hosts OOM-killed.

A cuzk binary is asked once, in a short start of its own, what engine it is (a cuzk-ref
says so in GetMetrics): that decides its test data and verifier, nothing else. Its param
cache is written into its config only when the user named one; otherwise the binary keeps
its own default (cuzk's ``/data/zk/params``, or what a cuzk-ref reports).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from filelock import FileLock

from pytest_cuzk.backends.health import probe
from pytest_cuzk.backends.process import (
    DaemonProcess,
    daemon_config,
    listen_address,
    status_address,
    stuck_state,
)
from pytest_cuzk.backends.profiles import CuzkProfile, detect_profile
from pytest_cuzk.backends.protocol import (
    BackendState,
    ColdStart,
    DaemonLog,
    EngineProfile,
    Mode,
    PceRule,
    Prepare,
)
from pytest_cuzk.backends.workspace import Workspace
from pytest_cuzk.config.settings import Settings
from pytest_cuzk.core.errors import CuzkError, DaemonExited, ReadinessError
from pytest_cuzk.core.progress import ProgressLine
from pytest_cuzk.results.rows import HostRecord
from pytest_cuzk.vocab.daemonconfig import DaemonConfig, config_record
from pytest_cuzk.vocab.kinds import ProofKindInfo

__all__ = [
    "CUZK_PARAM_CACHE",
    "LOWMEM_OVERRIDES",
    "MAX_RESTARTS",
    "SpawnedCuzk",
    "SpawnedDaemon",
    "find_binary",
    "spawn_binary",
]

MAX_RESTARTS = 3
CUZK_PARAM_CACHE = Path("/data/zk/params")  # cuzk's srs.param_cache default
# Low-memory warm-up: one job at a time, no batching (the PCE extraction is the memory peak).
LOWMEM_OVERRIDES: dict[str, dict[str, Any]] = {
    "scheduler": {"max_batch_size": 1},
    "pipeline": {"synthesis_concurrency": 1, "max_parallel_synthesis": 1},
    "gpus": {"gpu_workers_per_device": 1},
}


def find_binary(explicit: Path | None) -> Path | None:
    """The cuzk binary to spawn: the explicit one, else ``cuzk-daemon`` or ``cuzk`` on PATH."""
    if explicit:
        return explicit
    for name in ("cuzk-daemon", "cuzk"):
        found = shutil.which(name)
        if found:
            return Path(found)
    return None


def spawn_binary(settings: Settings) -> Path:
    """The binary ``--cuzk-daemon=spawn`` starts (``--cuzk-binary``, else cuzk on PATH)."""
    found = find_binary(settings.binary)
    if not found:
        raise CuzkError(
            "--cuzk-daemon=spawn needs a cuzk binary: pass --cuzk-binary PATH or put cuzk-daemon on PATH"
        )
    return found


class SpawnedDaemon:
    """What every daemon the plugin starts shares: its process, restarts and readiness bookkeeping.

    Subclasses say what to run (``argv``), what to override in its config, where its param
    cache is, whether its PCE must be written since its start, and what engine it is.
    """

    mode: Mode = "spawn"
    owned = True
    lowmem_by_default = True  # --cuzk-lowmem-warmup=auto

    def __init__(self, label: str, settings: Settings, workspace: Workspace) -> None:
        self.label = label
        self.settings = settings
        self.workspace = workspace
        self.state = BackendState()
        self.process: DaemonProcess | None = None
        self.batch_size: int | None = None

    # --- what differs per engine ------------------------------------------------------------------
    @staticmethod
    def check_settings(settings: Settings) -> None:
        """What this engine needs of the settings, checked at configure time (``choice.check``)."""

    def argv(self) -> list[str]:
        raise NotImplementedError

    def overrides(self, batch_size: int) -> dict[str, dict[str, Any]]:
        return {"scheduler": {"max_batch_size": batch_size}}

    def given_param_cache(self) -> Path | None:
        """--cuzk-param-cache, else the base config's srs.param_cache: what the config must say."""
        if self.settings.param_cache:
            return self.settings.param_cache
        cache = daemon_config(self.settings.config, {}).get("srs", {}).get("param_cache")
        return Path(cache) if cache else None

    def param_cache(self) -> Path:
        """The given param cache, else the binary's own default (cuzk's)."""
        return self.given_param_cache() or CUZK_PARAM_CACHE

    def pce_rule(self) -> PceRule | None:
        """Cuzk extracts the PCE again after every start (it never loads the file): only a new one counts."""
        fresh = self.process.started_wall if self.process is not None else 0.0
        return PceRule(self.param_cache(), fresh)

    def profile(self) -> EngineProfile:
        return CuzkProfile(self.identity(), self.config_record())

    def identity(self) -> str:
        raise NotImplementedError

    def config_record(self) -> DaemonConfig:
        """The base config it is started with, less what the plugin sets each start: part of its build."""
        return config_record(daemon_config(self.settings.config, {}))

    # --- the Protocol -----------------------------------------------------------------------------
    @property
    def address(self) -> str:
        return self.process.address if self.process is not None else ""

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def unsampled(self) -> str | None:
        return None if self.pid is not None else "the daemon is not running"

    @property
    def status_page(self) -> str | None:
        return self.process.status_page if self.process is not None else None

    @property
    def local(self) -> bool:
        return True

    @property
    def log(self) -> DaemonLog | None:
        return self.process

    def bring_up(self, batch_size: int, kinds: Sequence[ProofKindInfo], prepare: Prepare) -> None:
        """A running daemon for ``batch_size``: restarted after a crash or for another batch size."""
        if self.state.out_of_service:
            raise DaemonExited(f"daemon {self.label}: {self.state.out_of_service}")
        if self.process is not None and not self.process.alive():
            self.process.stop()  # its children still belong to the group
            how = "crash" if self.process.answered else "failed start"
            self.state.restarts.append(f"restarted after {how}: {self.process.exit_message()}")
            self.process = None
            if len(self.state.restarts) >= MAX_RESTARTS:
                self.state.out_of_service = (
                    f"it died {len(self.state.restarts)} times; not restarting it again"
                )
                raise DaemonExited(f"daemon {self.label}: {self.state.out_of_service}")
        if self.process is None or self.batch_size != batch_size:
            self._restart(batch_size, kinds, prepare)

    def _restart(self, batch_size: int, kinds: Sequence[ProofKindInfo], prepare: Prepare) -> None:
        self.stop()
        cold = ColdStart(self.label, batch_size)
        self.state.ready_kinds = set()
        if self._needs_lowmem(kinds):
            cold.lowmem_warmup = True
            self._start(batch_size, cold, prepare.progress, lowmem=True)
            prepare(self, kinds, cold)
            self.stop()
            self.state.ready_kinds = set()
            cold.notes.append("warmed up with a low-memory config, then restarted with the full one")
        self._start(batch_size, cold, prepare.progress, lowmem=False)
        self.batch_size = batch_size
        self.state.cold.append(cold)

    def _needs_lowmem(self, kinds: Sequence[ProofKindInfo]) -> bool:
        mode = self.settings.lowmem_warmup
        if mode == "off" or self.settings.skip_warmup:
            return False
        cache = self.param_cache()
        missing = [k for k in kinds if not (cache / k.pce_file).exists()]
        return bool(missing) and (mode == "on" or self.lowmem_by_default)

    def _start(self, batch_size: int, cold: ColdStart, progress: ProgressLine, lowmem: bool) -> None:
        prefix = f"{self.label}-b{batch_size}{'-lowmem' if lowmem else ''}-"
        workdir = self.workspace.subdir(prefix)
        overrides = self.overrides(batch_size)
        daemon = overrides.setdefault("daemon", {})
        daemon.update(listen=listen_address(workdir), status_listen=status_address())
        given = self.given_param_cache()
        if given is not None:
            overrides.setdefault("srs", {})["param_cache"] = str(given)
        if lowmem:
            for section, values in LOWMEM_OVERRIDES.items():
                overrides.setdefault(section, {}).update(values)
        config = daemon_config(self.settings.config, overrides)
        process = DaemonProcess(self.argv(), workdir, config, base_config=self.settings.config)
        process.start()  # raises DaemonExited naming the binary when it cannot even start
        self.process = process
        timeout = self.settings.start_timeout
        with progress.stage(
            f"{self.label}: starting the daemon{' (low-memory config)' if lowmem else ''}", timeout
        ):
            cold.start_s += self.process.wait_answering(timeout, progress.tick)

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

    def gone(self, grace_s: float = 1.0) -> bool:
        return self.process is not None and self.process.died_within(grace_s)

    def death_message(self, rss_peak: int | None = None) -> str:
        if self.process is None:
            return f"daemon {self.label} is not running"
        return self.process.exit_message(rss_peak)

    def take_out(self, reason: str) -> None:
        """It cannot cancel the proof it still works on: stop it, so the next test gets a fresh one."""
        self.stop()
        self.state.restarts.append(f"restarted: {reason}")

    def lost(self, reason: str) -> None:
        """A crash: the next test's bring_up restarts it and records how it ended."""

    def stuck(self) -> str | None:
        return stuck_state(self.pid)

    def health(self, timeout_s: float) -> str | None:
        return probe(self.address, self.pid, timeout_s)

    def hung(self, reason: str) -> None:
        """Kill it now (a stopped process ignores SIGTERM), so the next test gets a fresh one."""
        if self.process is not None:
            self.process.stop(grace_s=0)
            self.process = None
        self.state.restarts.append(f"restarted: {reason}")

    def cache_lock(self, kind: ProofKindInfo) -> AbstractContextManager[object]:
        """Serialise setup and PCE writing of one circuit across daemons sharing a param cache (xdist)."""
        cache = self.param_cache()
        lock = cache / f".pytest-cuzk-{kind.circuit_id}.lock"
        try:
            cache.mkdir(parents=True, exist_ok=True)
            lock.touch()
        except OSError as exc:
            raise ReadinessError(
                f"cannot write {lock} in the param cache {cache}: {exc.strerror}; "
                "pass --cuzk-param-cache with a directory you can write"
            ) from None
        return FileLock(str(lock))

    def host_record(self) -> HostRecord:
        return HostRecord.this_host()

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None


class SpawnedCuzk(SpawnedDaemon):
    """A cuzk binary (``--cuzk-binary``, or ``cuzk-daemon``/``cuzk`` on PATH)."""

    mode: Mode = "spawn"

    @staticmethod
    def check_settings(settings: Settings) -> None:
        """A binary to start: a missing one is one line at configure time."""
        spawn_binary(settings)

    def __init__(self, label: str, settings: Settings, workspace: Workspace, binary: Path) -> None:
        super().__init__(label, settings, workspace)
        self.binary = binary
        self._engine: EngineProfile | None = None

    def argv(self) -> list[str]:
        return [str(self.binary)]

    def given_param_cache(self) -> Path | None:
        """What the user named, else the cache the engine reported as its default (cuzk-ref does)."""
        given = super().given_param_cache()
        if given is None and self._engine is not None:
            return self._engine.default_param_cache()
        return given

    def profile(self) -> EngineProfile:
        """What engine the binary is; a real cuzk is never started twice to find out.

        A compiled binary is cuzk. A script (cuzk-ref is one) is asked once, in a short
        low-memory start of its own.
        """
        if self._engine is None:
            try:
                with self.binary.open("rb") as head:
                    compiled = head.read(4) == b"\x7fELF"
            except OSError:
                compiled = False  # its start will fail and say why
            cuzk = compiled and CuzkProfile(self.identity(), self.config_record())
            self._engine = cuzk or self._identify()
        return self._engine

    def _identify(self) -> EngineProfile:
        fallback = CuzkProfile(self.identity(), self.config_record())
        workdir = self.workspace.subdir(f"{self.label}-identify-")
        overrides: dict[str, dict[str, Any]] = {k: dict(v) for k, v in LOWMEM_OVERRIDES.items()}
        overrides.setdefault("daemon", {})["listen"] = listen_address(workdir)
        given = super().given_param_cache()
        if given is not None:
            overrides.setdefault("srs", {})["param_cache"] = str(given)
        process = DaemonProcess(self.argv(), workdir, daemon_config(self.settings.config, overrides))
        try:
            process.start()
            process.wait_answering(self.settings.start_timeout)
            found = detect_profile(process.address, fallback, local=True, data_dir=self.settings.data_dir)
        except CuzkError:
            found = None  # it will fail to start again, with the reason, when a test needs it
        finally:
            process.stop()
        return found or fallback

    def identity(self) -> str:
        from pytest_cuzk.host.info import binary_sha256

        return f"{self.binary.name} sha256:{binary_sha256(self.binary)[:16]}"

"""A spawned daemon process: its config, socket, log, process group and how it ended.

A spawned daemon gets its own config (the user's base TOML, overridden), a private unix
socket (or a free loopback port), its own session and process group, and a log file.
Stopping is SIGTERM to the whole group, then SIGKILL after a grace period: cuzk ignores a
second SIGINT, so SIGINT is never relied on. A daemon that exits while we wait fails at
once with its exit code or signal and the tail of its log. The environment it runs with
is never part of a message.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from pytest_cuzk.core.errors import CuzkError, DaemonExited, DaemonUnavailable, NotCuzkServer, RpcError
from pytest_cuzk.daemon.client import ProvingClient
from pytest_cuzk.vocab.units import format_bytes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "EXIT_TIMEOUT",
    "DaemonProcess",
    "OomCounter",
    "daemon_config",
    "describe_exit",
    "listen_address",
    "process_state",
    "status_address",
    "stuck_state",
]

EXIT_TIMEOUT = 10.0
_UNIX_PATH_MAX = 100
_PR_SET_PDEATHSIG = 1


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listen_address(workdir: Path) -> str:
    """A private unix socket in ``workdir``, or a free loopback port when the path is too long."""
    sock = workdir / "cuzk.sock"
    if len(str(sock)) <= _UNIX_PATH_MAX:
        return f"unix://{sock}"
    return f"127.0.0.1:{_free_port()}"


def status_address() -> str:
    """A free loopback port for the daemon's HTTP ``/status``.

    Its per-partition stage times are the run's only view inside a proof; cuzk only logs a
    failed bind, so a port lost to a race costs those samples, never the start.
    """
    return f"127.0.0.1:{_free_port()}"


def daemon_config(base: Path | None, overrides: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The user's base TOML with the plugin's sections merged over it.

    The status HTTP server listens only where the plugin says (``status_address``), never where
    the base config says (``0.0.0.0`` in cuzk's example): a spawned daemon is reachable from
    this machine alone.
    """
    config: dict[str, Any] = {}
    if base:
        try:
            config = tomllib.loads(base.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise CuzkError(f"cannot read --cuzk-config {base}: {exc}") from exc
    for section, values in overrides.items():
        config.setdefault(section, {}).update(values)
    config.setdefault("daemon", {})["status_listen"] = overrides.get("daemon", {}).get("status_listen", "")
    return config


def _libc_prctl() -> Any:
    """prctl, looked up once in the parent: the forked child must not load libraries (locks held)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _libc_prctl()


def _set_pdeathsig() -> None:  # pragma: no cover - runs in the child
    """Have the kernel kill the daemon if pytest dies without tearing down (os._exit, SIGKILL)."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass(frozen=True)
class OomCounter:
    """The kernel's OOM-kill counters (``oom_kill`` in the cgroup's files and /proc/vmstat).

    Read before a start and after a death: only a counter that grew in between says the
    OOM killer was at work; any other SIGKILL (a user, a supervisor, a fault) is just that.
    """

    sources: tuple[Path, ...] = (
        Path("/sys/fs/cgroup/memory.events"),  # cgroup v2 (a container's own cgroup is its root)
        Path("/sys/fs/cgroup/memory/memory.oom_control"),  # cgroup v1
        Path("/proc/vmstat"),
    )

    def read(self) -> dict[Path, int]:
        """Each readable counter's value."""
        counts: dict[Path, int] = {}
        for path in self.sources:
            with contextlib.suppress(OSError, ValueError):
                for line in path.read_text().splitlines():
                    name, _, value = line.partition(" ")
                    if name == "oom_kill":
                        counts[path] = int(value)
        return counts

    def grown(self, before: dict[Path, int]) -> list[str]:
        """The counters that grew since ``before``, in words; empty when none did (or none is readable)."""
        now = self.read()
        return [
            f"oom_kill count {now[path]}, up from {before[path]} ({path})"
            for path in now
            if path in before and now[path] > before[path]
        ]


def stuck_state(pid: int | None) -> str | None:
    """Why a live process cannot be making progress (stopped or traced), None when it can or is gone."""
    if pid is None:
        return None
    import psutil

    try:
        status = psutil.Process(pid).status()
    except psutil.Error:
        return None
    if status == psutil.STATUS_STOPPED:
        return "process state stopped (SIGSTOP?)"
    if status == psutil.STATUS_TRACING_STOP:
        return "process state tracing stop (a debugger holds it)"
    return None


def process_state(pid: int | None) -> str:
    """The process's scheduler state in words, for a hang message."""
    if pid is None:
        return "process not visible from here"
    import psutil

    try:
        return f"process state {psutil.Process(pid).status()}"
    except psutil.Error:
        return "process gone"


def describe_exit(returncode: int, oom_grown: Sequence[str] = (), rss_peak: int | None = None) -> str:
    """``exited with code 1``, ``killed by SIGKILL``, or ``killed by SIGKILL (likely killed by the OOM ...)``.

    The OOM killer is named only when ``oom_grown`` (``OomCounter.grown``) says a counter grew.
    """
    if returncode >= 0:
        return f"exited with code {returncode}"
    sig = -returncode
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = f"signal {sig}"
    text = f"killed by {name}"
    if sig == signal.SIGKILL and oom_grown:
        facts = [f"RSS peak {format_bytes(rss_peak)}"] if rss_peak else []
        with contextlib.suppress(ImportError):
            import psutil

            facts.append(f"available memory {format_bytes(psutil.virtual_memory().available)}")
        text += f" (likely killed by the OOM killer: {', '.join([*facts, *oom_grown])})"
    return text


@dataclass
class DaemonProcess:
    """One spawned daemon process: its argv, config, socket, log and lifetime."""

    argv_head: list[str]
    workdir: Path
    config: dict[str, Any]
    base_config: Path | None = None  # the user's --cuzk-config this config was made from
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    started_wall: float = 0.0
    answered: bool = False
    oom: OomCounter = field(default_factory=OomCounter)
    _oom_before: dict[Path, int] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return str(self.config["daemon"]["listen"])

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def status_page(self) -> str | None:
        return str(self.config["daemon"].get("status_listen") or "") or None

    @property
    def config_path(self) -> Path:
        return self.workdir / "cuzk.toml"

    @property
    def log_path(self) -> Path:
        return self.workdir / "daemon.log"

    def start(self) -> None:
        """Write the config (user-only permissions) and start the daemon in its own process group."""
        self.workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            tomli_w.dump(self.config, f)
        log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        self._oom_before = self.oom.read()
        try:
            self.proc = subprocess.Popen(
                [*self.argv_head, "-c", str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                env=env,
                start_new_session=True,
                preexec_fn=_set_pdeathsig,
            )
        except OSError as exc:  # the message names the binary, never the environment
            raise DaemonExited(f"cannot start {self.argv_head[0]}: {exc.strerror}") from None
        finally:
            os.close(log_fd)
        self.started_at = time.monotonic()
        self.started_wall = time.time()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def died_within(self, seconds: float) -> bool:
        """Whether the process is gone, or goes within ``seconds``.

        Its sockets close a moment before it can be reaped, so an RPC error can
        arrive while ``alive()`` still says yes.
        """
        if self.proc is None:
            return False
        try:
            self.proc.wait(seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log_tail(self, lines: int = 40, since: int = 0) -> str:
        """The last ``lines`` lines of the log (from byte offset ``since``), colour codes removed."""
        try:
            with self.log_path.open("rb") as f:
                f.seek(since)
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        text = re.sub(r"\x1b\[[0-9;]*m", "", text)
        return "\n".join(text.splitlines()[-lines:])

    def exit_message(self, rss_peak: int | None = None) -> str:
        """How the process ended, with the OOM hint and the log tail (and which config file it read)."""
        if self.proc is None:
            return f"daemon {self.argv_head[0]} was never started"
        code = self.proc.poll()
        grown = self.oom.grown(self._oom_before)
        how = "is still running" if code is None else describe_exit(code, grown, rss_peak)
        tail = self.log_tail()
        if self.base_config is not None and str(self.config_path) in tail:
            tail += (
                f"\n(the config {self.config_path} is your --cuzk-config {self.base_config} with the "
                "plugin's listen, param cache and batching set: fix the key named above in your file)"
            )
        # the first line says what failed on its own: it is a test's one-line reason in the summary
        return f"daemon (pid {self.proc.pid}) {how}; log {self.log_path}\nits last lines:\n{tail}"

    def wait_answering(self, timeout_s: float, tick: Callable[[], None] | None = None) -> float:
        """Poll GetStatus until it answers; fail at once if the process exits first. Returns seconds.

        ``tick`` is called on every poll, for a live line on the terminal.
        """

        def between() -> None:
            if tick is not None:
                tick()
            if not self.alive():
                raise DaemonExited(f"daemon exited before it answered: {self.exit_message()}")

        try:
            with ProvingClient(self.address) as client:
                client.wait_ready(timeout_s, between=between)
        except DaemonUnavailable as exc:
            last = exc.__cause__ or exc
            raise DaemonExited(
                f"daemon at {self.address} did not answer within {timeout_s:.0f}s (last error: {last}); "
                f"log {self.log_path}\nits last lines:\n{self.log_tail()}"
            ) from exc
        except (NotCuzkServer, RpcError) as exc:  # something answers there, but not as a healthy cuzk
            raise DaemonExited(f"{exc}; log {self.log_path}") from exc
        self.answered = True
        return time.monotonic() - self.started_at

    def stop(self, grace_s: float = EXIT_TIMEOUT) -> int | None:
        """SIGTERM the process group, SIGKILL it after ``grace_s``; idempotent. Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):  # a GPU driver may hold it a while
                    self.proc.wait(EXIT_TIMEOUT)
        # Children that outlived the leader still belong to the group.
        self._signal_group(signal.SIGKILL)
        return self.proc.returncode

    def _signal_group(self, sig: int) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

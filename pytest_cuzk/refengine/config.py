"""The reference engine's configuration: cuzk's TOML sections and keys, plus ``[ref]``.

The reference engine reads the same file a cuzk daemon reads, so one config can drive
either. Keys cuzk knows but the reference engine has no use for, and unknown keys, are
ignored like cuzk ignores them. Unlike cuzk, a value of the wrong type or an unparseable
size is an error that names the file and the key (cuzk silently falls back to 50 GiB), a
config named with ``-c`` must exist (cuzk silently runs on defaults), and without one the
param cache is a per-user directory (cuzk's default, ``/data/zk/params``, is root's).
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from pytest_cuzk.host.limits import WAIT_MAX_S, Bound, address_space, thread_limit, total_memory, wait_bound
from pytest_cuzk.host.paths import user_cache_dir
from pytest_cuzk.proto import pb
from pytest_cuzk.refengine.errors import RefEngineError
from pytest_cuzk.vocab import units

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = [
    "BEHAVES",
    "FAULTS_ENV",
    "ConfigError",
    "Faults",
    "RefConfig",
    "load_config",
    "parse_config",
    "parse_size",
]

FAULTS_ENV = "CUZK_REF_FAULTS"
GIB = 1 << 30
BEHAVES = ("cuzk", "protocol")
EXIT_STATUS_MAX = 255  # what a process can exit with (POSIX keeps the low 8 bits)


class ConfigError(RefEngineError, ValueError):
    """A config value the reference engine cannot use; the message names the file and the key."""


@dataclass(frozen=True)
class Faults:
    """Fault injection, all off by default; proof numbers count proofs started, from 1."""

    die_at_proof: int = 0  # SIGKILL the daemon while proving proof N
    hang_at_proof: int = 0  # proof N never finishes
    corrupt_at_proof: int = 0  # proof N is returned with an invalid partition-0 A point
    invalid_at_proof: int = 0  # proof N is returned well-formed (valid points) but does not verify
    swap_batch_proofs: bool = False  # the first two jobs of every batch get each other's proof
    slow_factor: float = 1.0  # every proof takes this many times as long
    fifo: bool = False  # priorities are ignored: jobs run in the order they came
    start_delay_s: float = 0.0  # sleep before binding the listen address
    exit_before_ready: int | None = None  # exit with this code before binding
    grow_memory_mib_per_s: float = 0.0  # allocate and touch memory until killed
    stop_on_rpc: str = ""  # SIGSTOP the daemon when this RPC (SubmitProof, Prove, ...) first arrives
    real_speed: str = ""  # prove at the pace of real cuzk ("32g", see realspeed.py); "" at its own
    real_speed_scale: float = 1.0  # every real-speed time times this (0.05: PoRep proofs of ~4 s)
    real_speed_drift_pct: float = 0.0  # at real speed, each proof this much slower than the one before

    @property
    def active(self) -> bool:
        """Whether any fault is switched on (logged at start so nobody mistakes it for a bug)."""
        return self != Faults()


_FAULT_TYPES: dict[str, tuple[type, ...]] = {
    "swap_batch_proofs": (bool,),
    "fifo": (bool,),
    "slow_factor": (int, float),
    "start_delay_s": (int, float),
    "grow_memory_mib_per_s": (int, float),
    "stop_on_rpc": (str,),
    "real_speed": (str,),
    "real_speed_scale": (int, float),
    "real_speed_drift_pct": (int, float),
}
REAL_SPEEDS = ("32g",)  # realspeed.MODELS' names (checked in its tests)


def default_param_cache(preset: str) -> Path:
    """Where cuzk-ref keeps keys and PCE files without ``srs.param_cache``: the plugin's own choice."""
    return user_cache_dir() / f"ref-params-{preset}"


@dataclass(frozen=True)
class RefConfig:
    """Every setting the reference engine uses, with cuzk's defaults."""

    listen: str = "unix:///run/curio/cuzk.sock"
    status_listen: str = ""
    param_cache: Path = field(default_factory=lambda: default_param_cache("default"))
    max_batch_size: int = 1
    max_batch_wait_ms: int = 10000
    pipeline_enabled: bool = True
    synthesis_concurrency: int = 1
    synthesis_threads: int = 0
    gpu_devices: tuple[int, ...] = ()
    gpus_off: bool = False  # ``[gpus] devices = []`` written out: prove on the CPU
    gpu_workers_per_device: int = 2
    total_budget: int | None = None  # None = "auto": MemTotal - safety_margin
    safety_margin: int = 5 * GIB
    log_level: str = "info"
    preset: str = "default"
    seed: int = 0
    behave: str = "cuzk"
    faults: Faults = field(default_factory=Faults)
    source: str = "<defaults>"

    def with_overrides(self, *, listen: str | None = None, log_level: str | None = None) -> RefConfig:
        """Apply the command-line flags, which win over the file like cuzk-daemon's."""
        return replace(self, listen=listen or self.listen, log_level=log_level or self.log_level)


# (section, key) -> (RefConfig field, expected type); sizes are handled separately.
_KEYS: dict[tuple[str, str], tuple[str, type | tuple[type, ...]]] = {
    ("daemon", "listen"): ("listen", str),
    ("daemon", "status_listen"): ("status_listen", str),
    ("srs", "param_cache"): ("param_cache", str),
    ("scheduler", "max_batch_size"): ("max_batch_size", int),
    ("scheduler", "max_batch_wait_ms"): ("max_batch_wait_ms", int),
    ("pipeline", "enabled"): ("pipeline_enabled", bool),
    ("pipeline", "synthesis_concurrency"): ("synthesis_concurrency", int),
    ("synthesis", "threads"): ("synthesis_threads", int),
    ("gpus", "devices"): ("gpu_devices", list),
    ("gpus", "gpu_workers_per_device"): ("gpu_workers_per_device", int),
    ("logging", "level"): ("log_level", str),
    ("ref", "preset"): ("preset", str),
    ("ref", "seed"): ("seed", int),
    ("ref", "behave"): ("behave", str),
}


def parse_size(text: str, where: str) -> int:
    """Parse a size (cuzk writes ``50GiB``); a ConfigError names the file and key, where cuzk guesses."""
    try:
        return units.parse_size(text, where)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def _typed(value: Any, expected: type | tuple[type, ...], where: str) -> Any:
    names = expected.__name__ if isinstance(expected, type) else " or ".join(t.__name__ for t in expected)
    is_bool = isinstance(value, bool)
    if not isinstance(value, expected) or (is_bool and bool not in _as_tuple(expected)):
        raise ConfigError(f"{where} must be {names}, got {type(value).__name__} {value!r}")
    return value


def _as_tuple(expected: type | tuple[type, ...]) -> tuple[type, ...]:
    return expected if isinstance(expected, tuple) else (expected,)


def _section(data: Mapping[str, Any], name: str, where: str) -> Mapping[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: [{name}] must be a table, got {type(value).__name__}")
    return value


def _memory(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    section = _section(data, "memory", where)
    out: dict[str, Any] = {}
    for key, attr in (("total_budget", "total_budget"), ("safety_margin", "safety_margin")):
        if key not in section:
            continue
        value = _typed(section[key], (str, int), f"{where}: memory.{key}")
        if key == "total_budget" and value == "auto":
            out[attr] = None
        else:
            out[attr] = value if isinstance(value, int) else parse_size(value, f"{where}: memory.{key}")
    return out


def parse_faults(data: Mapping[str, Any], where: str) -> Faults:
    """Build :class:`Faults` from a ``[ref.faults]`` table or the env JSON object."""
    known = {f.name: f for f in fields(Faults)}
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in known:
            raise ConfigError(f"{where}: unknown fault {key!r}; known: {', '.join(known)}")
        values[key] = _typed(value, _FAULT_TYPES.get(key, (int,)), f"{where}: {key}")
    rpcs = pb.DESCRIPTOR.services_by_name["ProvingEngine"].methods_by_name
    if values.get("stop_on_rpc", "") not in ("", *rpcs):
        known_rpcs = ", ".join(rpcs)
        raise ConfigError(f"{where}: stop_on_rpc names no RPC of cuzk.v1.ProvingEngine; one of {known_rpcs}")
    for key in ("slow_factor", "start_delay_s", "grow_memory_mib_per_s"):
        if key in values and not math.isfinite(values[key]):  # nan passes every check, then never acts
            raise ConfigError(f"{where}: {key} must be a finite number, got {values[key]}")
    if values.get("real_speed", "") not in ("", *REAL_SPEEDS):
        speeds = ", ".join(REAL_SPEEDS)
        raise ConfigError(
            f'{where}: real_speed must be one of {speeds} (or ""), got {values["real_speed"]!r}'
        )
    if not 0 < values.get("real_speed_scale", 1.0) <= 10:
        raise ConfigError(
            f"{where}: real_speed_scale must be above 0 and at most 10, got {values['real_speed_scale']}"
        )
    if not -50 <= values.get("real_speed_drift_pct", 0.0) <= 50:
        raise ConfigError(
            f"{where}: real_speed_drift_pct must be between -50 and 50, got {values['real_speed_drift_pct']}"
        )
    if values.get("slow_factor", 1.0) < 1.0:
        raise ConfigError(f"{where}: slow_factor must be at least 1, got {values['slow_factor']}")
    _check_bounds(values, where, _fault_bounds())
    exit_code = values.get("exit_before_ready")
    if exit_code is not None and not 0 <= exit_code <= EXIT_STATUS_MAX:
        raise ConfigError(
            f"{where}: exit_before_ready must be 0 to {EXIT_STATUS_MAX}, got {exit_code}: "
            "a process exits with its status's low 8 bits"
        )
    return Faults(**values)


def _fault_bounds() -> dict[str, tuple[str, Bound]]:
    """Each bounded fault: the longest a slowed stage or a start may wait, the most memory to grow by."""
    memory = total_memory()
    grow = Bound(memory.most / (1 << 20), f"{memory.why}: growing faster is the same as all at once")
    return {
        "slow_factor": ("slow_factor", wait_bound()),  # a one-second stage slowed by it still ends
        "start_delay_s": ("start_delay_s", wait_bound()),
        "grow_memory_mib_per_s": ("grow_memory_mib_per_s", grow),
    }


def _check_bounds(values: Mapping[str, Any], where: str, bounds: Mapping[str, tuple[str, Bound]]) -> None:
    """Each value within its host bound, the error naming the key, the bound and the host's figure."""
    for attr, (key, bound) in bounds.items():
        if attr in values and values[attr] is not None and bound.refuses(values[attr]):
            raise ConfigError(
                f"{where}: {key} must be at most {bound.shown()}, got {bound.shown(values[attr])}, "
                f"as {bound.why}"
            )


def parse_config(data: Mapping[str, Any], where: str, env: Mapping[str, str] | None = None) -> RefConfig:
    """Turn a parsed TOML document into a :class:`RefConfig`; ``where`` names the file in errors."""
    values: dict[str, Any] = {"source": where}
    for (section, key), (attr, expected) in _KEYS.items():
        table = _section(data, section, where)
        if key in table:
            values[attr] = _typed(table[key], expected, f"{where}: {section}.{key}")
    if "param_cache" in values:
        values["param_cache"] = Path(values["param_cache"]).expanduser()
    else:
        values["param_cache"] = default_param_cache(values.get("preset", "default"))
    if values.get("behave", "cuzk") not in BEHAVES:
        raise ConfigError(
            f"{where}: ref.behave must be one of {', '.join(BEHAVES)}, got {values['behave']!r}"
        )
    if "gpu_devices" in values:
        devices = values["gpu_devices"]
        for d in devices:
            _typed(d, int, f"{where}: gpus.devices entry")
        values["gpu_devices"] = tuple(devices)
        values["gpus_off"] = not devices
    values.update(_memory(data, where))
    faults = _section(_section(data, "ref", where), "faults", f"{where}: [ref]")
    env_faults = (env if env is not None else os.environ).get(FAULTS_ENV, "")
    if env_faults:
        try:
            overrides = json.loads(env_faults)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"env {FAULTS_ENV}: not a JSON object ({exc})") from exc
        if not isinstance(overrides, dict):
            raise ConfigError(f"env {FAULTS_ENV}: must be a JSON object, got {env_faults!r}")
        faults = {**faults, **overrides}
    values["faults"] = parse_faults(faults, f"{where}: [ref.faults] / env {FAULTS_ENV}")
    _check_ranges(values, where)
    return RefConfig(**values)


def _key_bounds() -> dict[str, tuple[str, Bound]]:
    """The upper bound of each numeric key: the threads, waits and memory this host can give it.

    A batch holds each of its jobs' requests, up to cuzk's largest message each; workers and
    synthesis tasks are a thread each.
    """
    memory, threads = total_memory(), thread_limit()
    requests = Bound(
        memory.most // units.MAX_MESSAGE_BYTES, f"{memory.why}, for jobs of up to 128 MiB of request each"
    )
    out = {
        "max_batch_size": ("scheduler.max_batch_size", requests),
        "max_batch_wait_ms": ("scheduler.max_batch_wait_ms", Bound(WAIT_MAX_S * 1000, wait_bound().why)),
        "total_budget": ("memory.total_budget", address_space()),  # a config may be another host's
        "safety_margin": ("memory.safety_margin", memory),  # more leaves an auto budget of nothing
    }
    if threads is not None:
        for attr, key in (
            ("synthesis_concurrency", "pipeline.synthesis_concurrency"),
            ("synthesis_threads", "synthesis.threads"),
            ("gpu_workers_per_device", "gpus.gpu_workers_per_device"),
        ):
            out[attr] = (key, threads)
    return out


def _check_ranges(values: Mapping[str, Any], where: str) -> None:
    _check_bounds(values, where, _key_bounds())
    for attr, key in (
        ("max_batch_size", "scheduler.max_batch_size"),
        ("synthesis_concurrency", "pipeline.synthesis_concurrency"),
        ("gpu_workers_per_device", "gpus.gpu_workers_per_device"),
    ):
        if values.get(attr, 1) < 1:
            raise ConfigError(f"{where}: {key} must be at least 1, got {values[attr]}")
    for attr, key in (
        ("max_batch_wait_ms", "scheduler.max_batch_wait_ms"),
        ("synthesis_threads", "synthesis.threads"),
    ):
        if values.get(attr, 0) < 0:
            raise ConfigError(f"{where}: {key} must not be negative, got {values[attr]}")


def load_config(path: Path | None, env: Mapping[str, str] | None = None) -> RefConfig:
    """Read the TOML file at ``path``; no path means the defaults, a path that does not exist an error."""
    if path is None:
        return parse_config({}, "<defaults>", env)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: config file not found; fix the -c path, or leave -c out for the defaults"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config ({exc.strerror})") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc
    return parse_config(data, str(path), env)

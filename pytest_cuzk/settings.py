"""Options of pytest-cuzk: declaration, parsing and one resolved ``Settings`` record.

Every ``--cuzk-*`` flag has a ``cuzk_*`` ini twin and a ``PYTEST_CUZK_*`` environment
variable. Precedence lives in ``resolve_settings``: command line, then environment,
then ini, then the default. Parsers take ``where`` so a bad value names its source.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .wire.kinds import KINDS, by_name
from .wire.units import parse_size, parse_thresholds

__all__ = ["OPTIONS", "Settings", "add_options", "resolve_settings"]

DEFAULT_ADDR = "127.0.0.1:9820"
MODES = ("auto", "spawn", "ref")


@dataclass(frozen=True)
class Option:
    """One ``--cuzk-NAME`` flag with its ini key, environment variable and help text."""

    name: str
    help: str
    default: Any = None
    kind: str = "str"  # str | bool | float | list

    @property
    def flag(self) -> str:
        return f"--cuzk-{self.name}"

    @property
    def ini(self) -> str:
        return "cuzk_" + self.name.replace("-", "_")

    @property
    def env(self) -> str:
        return "PYTEST_CUZK_" + self.name.replace("-", "_").upper()


OPTIONS: tuple[Option, ...] = (
    Option(
        "daemon",
        "Which daemon to test: auto (attach at --cuzk-addr, else spawn a cuzk binary, else the reference "
        "engine), spawn (a cuzk binary), ref (the reference engine), or ADDR[,ADDR...] to attach to "
        "running daemons",
        "auto",
    ),
    Option("addr", "Address auto mode tries to attach to first", DEFAULT_ADDR),
    Option("binary", "cuzk daemon binary to spawn (else cuzk-daemon or cuzk on PATH)"),
    Option(
        "config", "Base daemon TOML config; the plugin copies it and overrides listen, cache and batching"
    ),
    Option("param-cache", "Parameter (SRS) cache directory of the daemon (srs.param_cache)"),
    Option("data-dir", "Cache directory for downloaded and generated test data", None),
    Option(
        "manifest", "Test-data manifest TOML (default: fixtures/manifest.toml, or generated data for ref)"
    ),
    Option("input", "Use your own data file for a kind: KIND=PATH (repeatable)", (), "list"),
    Option("offline", "Never download test data", False, "bool"),
    Option("skip-warmup", "Skip the warm-up proof and PCE wait before measuring", False, "bool"),
    Option(
        "lowmem-warmup",
        "When the PCE file is missing and the daemon is spawned, warm up with a low-memory config, then "
        "restart with the full one: auto (for cuzk binaries), on, off",
        "auto",
    ),
    Option("preset", "Circuit-size preset of the reference engine (default, medium, large)", "default"),
    Option("start-timeout", "Seconds for a spawned daemon to start answering", 120.0, "float"),
    Option("ready-timeout", "Seconds for SRS parameters to load (PreloadSRS)", 900.0, "float"),
    Option("warmup-timeout", "Seconds for the warm-up proof and its PCE file", 1800.0, "float"),
    Option("proof-timeout", "Seconds one proof may take before it is cancelled and fails", 1800.0, "float"),
    Option("batch-sizes", "Batch sizes to test (sizes above 1 only for porep and snap)", "1,2"),
    Option("concurrency", "Concurrency levels (clients submitting at once) to test", "1"),
    Option("proofs", "Proofs per test (at least one wave of batch x concurrency)", 2, "float"),
    Option("sample-interval", "Memory sampling interval in seconds", 0.1, "float"),
    Option("min-throughput", "Fail a test below this many proofs per hour: KIND:N/h[,KIND:N/h...]"),
    Option("max-rss", "Fail a test whose daemon RSS peak exceeds SIZE or KIND:SIZE[,...] (e.g. 200GiB)"),
    Option("max-vram", "Fail a test whose daemon VRAM peak exceeds SIZE or KIND:SIZE[,...]"),
    Option(
        "compare-fail",
        "Fail a test that regressed against the compared pytest-benchmark run: METRIC:N%[,...] with "
        "METRIC in throughput, rss_peak, vram_peak, p50, p90",
    ),
    Option(
        "baseline", "Saved pytest-benchmark JSON to compare against (default: the --benchmark-compare run)"
    ),
    Option("plots", "Directory for per-test memory plots (PNG)"),
    Option("label", "Host label for a daemon address in test ids: ADDR=NAME (repeatable)", (), "list"),
    Option(
        "results-db",
        "Record every test in this database: a SQLAlchemy URL (sqlite:///FILE, postgresql://...) or "
        "'default' for a SQLite file in the user's data dir",
    ),
)


@dataclass(frozen=True)
class Settings:
    """Every pytest-cuzk option after precedence and validation."""

    daemon: str
    addr: str
    attach: tuple[str, ...]
    binary: Path | None
    config: Path | None
    param_cache: Path | None
    data_dir: Path
    manifest: Path | None
    inputs: dict[str, Path]
    offline: bool
    skip_warmup: bool
    lowmem_warmup: str
    preset: str
    start_timeout: float
    ready_timeout: float
    warmup_timeout: float
    proof_timeout: float
    batch_sizes: tuple[int, ...]
    concurrency: tuple[int, ...]
    proofs: int
    sample_interval: float
    min_throughput: dict[str, float] = field(default_factory=dict)
    max_rss: dict[str, int] = field(default_factory=dict)
    max_vram: dict[str, int] = field(default_factory=dict)
    compare_fail: dict[str, float] = field(default_factory=dict)
    baseline: Path | None = None
    plots: Path | None = None
    labels: dict[str, str] = field(default_factory=dict)
    results_db: str | None = None

    @property
    def gates_asked(self) -> bool:
        """Whether any gate option is set (the gates sink is registered only then)."""
        return bool(self.min_throughput or self.max_rss or self.max_vram or self.compare_fail)


def add_options(parser: pytest.Parser) -> None:
    """Declare every option as a flag in the ``cuzk`` group and as an ini key."""
    group = parser.getgroup("cuzk", "cuzk proving daemon validation and benchmarks")
    for opt in OPTIONS:
        help_text = f"{opt.help}. Default: {opt.default!r}" if opt.default not in (None, ()) else opt.help
        help_text = help_text.replace("%", "%%")  # argparse expands % in help
        if opt.kind == "bool":
            group.addoption(opt.flag, action="store_true", default=None, help=help_text)
            parser.addini(opt.ini, opt.help, type="bool", default=opt.default)
        elif opt.kind == "list":
            group.addoption(opt.flag, action="append", default=None, metavar="VALUE", help=help_text)
            parser.addini(opt.ini, opt.help, type="linelist", default=[])
        else:
            group.addoption(opt.flag, default=None, metavar="VALUE", help=help_text)
            parser.addini(opt.ini, opt.help, default=None)


def _raw(config: pytest.Config, opt: Option) -> tuple[Any, str]:
    """The option's value and where it came from, by precedence."""
    value = config.getoption(opt.flag)
    if value not in (None, []):
        return value, f"option {opt.flag}"
    if opt.env in os.environ:
        env = os.environ[opt.env]
        if opt.kind == "bool":
            return env.strip().lower() in ("1", "true", "yes", "on"), f"environment variable {opt.env}"
        if opt.kind == "list":
            return [v for v in env.split(";") if v.strip()], f"environment variable {opt.env}"
        return env, f"environment variable {opt.env}"
    ini = config.getini(opt.ini)
    if ini not in (None, [], ""):
        return ini, f"ini key {opt.ini}"
    return opt.default, f"default of {opt.flag}"


def _size(text: str, where: str) -> int:
    try:
        return parse_size(text, where)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc


def _kind_map(text: str | None, where: str, parse: Any) -> dict[str, Any]:
    """Parse ``KIND:VALUE,...`` (or a bare VALUE for every kind) into a dict keyed by kind name."""
    if not text:
        return {}
    out: dict[str, Any] = {}
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        if ":" in part:
            name, value = part.split(":", 1)
            try:
                kind = by_name(name).name
            except KeyError as exc:
                raise pytest.UsageError(f"{where}: {exc.args[0]}") from exc
            out[kind] = parse(value, where)
        else:
            out.update({k: parse(part, where) for k in KINDS})
    return out


def _throughput(text: str, where: str) -> float:
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*(/h)?\s*$", text)
    if not m:
        raise pytest.UsageError(
            f"Invalid throughput {text!r} from {where}: use proofs per hour, e.g. porep:50/h"
        )
    return float(m.group(1))


COMPARE_METRICS = ("throughput", "rss_peak", "vram_peak", "p50", "p90")


def _compare_fail(text: str | None, where: str) -> dict[str, float]:
    try:
        return parse_thresholds(text or "", COMPARE_METRICS, where)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc


def _ints(text: Any, where: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in str(text).split(",") if v.strip())
    except ValueError as exc:
        raise pytest.UsageError(f"Invalid list {text!r} from {where}: use comma-separated integers") from exc
    if not values or min(values) < 1:
        raise pytest.UsageError(f"Invalid list {text!r} from {where}: integers must be 1 or more")
    return values


def _float(text: Any, where: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError) as exc:
        raise pytest.UsageError(f"Invalid number {text!r} from {where}") from exc
    if value <= 0:
        raise pytest.UsageError(f"Invalid number {text!r} from {where}: must be above 0")
    return value


def _interval(text: Any, where: str) -> float:
    from .memory import MIN_INTERVAL_S

    value = _float(text, where)
    if value < MIN_INTERVAL_S:
        raise pytest.UsageError(
            f"Invalid interval {text!r} from {where}: the sampler needs {MIN_INTERVAL_S}s or more"
        )
    return value


def _pairs(values: Any, where: str, what: str) -> dict[str, str]:
    out = {}
    for item in values or ():
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip() or not value.strip():
            raise pytest.UsageError(f"Invalid value {item!r} from {where}: use {what}")
        out[key.strip()] = value.strip()
    return out


def _address(addr: str, where: str, hint: str) -> None:
    from .wire.addresses import parse_address

    try:
        parse_address(addr)
    except ValueError as exc:
        raise pytest.UsageError(f"Invalid address {addr!r} from {where}: {hint} ({exc})") from exc


def default_data_dir() -> Path:
    """The user's cache dir for test data (XDG_CACHE_HOME honoured); cuzk-ref keeps its params there too."""
    from .wire.paths import user_cache_dir

    return user_cache_dir()


def resolve_settings(config: pytest.Config) -> Settings:
    """Apply precedence and validation to every option; raise ``pytest.UsageError`` naming the source."""
    raw = {opt.name: _raw(config, opt) for opt in OPTIONS}

    def path(name: str) -> Path | None:
        value = raw[name][0]
        return Path(value).expanduser() if value else None

    daemon, where = raw["daemon"]
    daemon = str(daemon).strip()
    attach: tuple[str, ...] = ()
    if daemon.lower() in MODES:
        daemon = daemon.lower()
    else:
        attach = tuple(a.strip() for a in daemon.split(",") if a.strip())
        for addr in attach or (daemon,):
            _address(addr, where, f"use {', '.join(MODES)} or ADDR[,ADDR...]")
    _address(str(raw["addr"][0]), raw["addr"][1], "use IP:port, host:port or unix:///path")
    inputs = {}
    for name, value in _pairs(raw["input"][0], raw["input"][1], "KIND=PATH").items():
        try:
            inputs[by_name(name).name] = Path(value).expanduser()
        except KeyError as exc:
            raise pytest.UsageError(f"{raw['input'][1]}: {exc.args[0]}") from exc
    lowmem = str(raw["lowmem-warmup"][0]).lower()
    if lowmem not in ("auto", "on", "off"):
        raise pytest.UsageError(
            f"Invalid value {lowmem!r} from {raw['lowmem-warmup'][1]}: use auto, on or off"
        )
    proofs = _float(raw["proofs"][0], raw["proofs"][1])
    if proofs != int(proofs):
        raise pytest.UsageError(f"Invalid number {proofs!r} from {raw['proofs'][1]}: use a whole number")
    results_db = raw["results-db"][0]
    return Settings(
        daemon="attach" if attach else daemon,
        addr=str(raw["addr"][0]),
        attach=attach,
        binary=path("binary"),
        config=path("config"),
        param_cache=path("param-cache"),
        data_dir=path("data-dir") or default_data_dir(),
        manifest=path("manifest"),
        inputs=inputs,
        offline=bool(raw["offline"][0]),
        skip_warmup=bool(raw["skip-warmup"][0]),
        lowmem_warmup=lowmem,
        preset=str(raw["preset"][0]),
        start_timeout=_float(raw["start-timeout"][0], raw["start-timeout"][1]),
        ready_timeout=_float(raw["ready-timeout"][0], raw["ready-timeout"][1]),
        warmup_timeout=_float(raw["warmup-timeout"][0], raw["warmup-timeout"][1]),
        proof_timeout=_float(raw["proof-timeout"][0], raw["proof-timeout"][1]),
        batch_sizes=_ints(raw["batch-sizes"][0], raw["batch-sizes"][1]),
        concurrency=_ints(raw["concurrency"][0], raw["concurrency"][1]),
        proofs=int(proofs),
        sample_interval=_interval(raw["sample-interval"][0], raw["sample-interval"][1]),
        min_throughput=_kind_map(raw["min-throughput"][0], raw["min-throughput"][1], _throughput),
        max_rss=_kind_map(raw["max-rss"][0], raw["max-rss"][1], _size),
        max_vram=_kind_map(raw["max-vram"][0], raw["max-vram"][1], _size),
        compare_fail=_compare_fail(raw["compare-fail"][0], raw["compare-fail"][1]),
        baseline=path("baseline"),
        plots=path("plots"),
        labels=_pairs(raw["label"][0], raw["label"][1], "ADDR=NAME"),
        results_db=str(results_db) if results_db else None,
    )

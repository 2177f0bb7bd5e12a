"""Every ``--cuzk-*`` option, declared once: its flag, ini key, environment variable and help text.

pytest-timeout's model: one table; each flag has a ``cuzk_*`` ini twin and a ``PYTEST_CUZK_*``
environment variable that share its help text. ``settings.resolve_settings`` applies them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

import pytest

__all__ = [
    "DEFAULT_ADDR",
    "OPTIONS",
    "REF_PRESETS",
    "Option",
    "Where",
    "add_options",
    "option_value",
    "renamed",
    "requested",
]

DEFAULT_ADDR = "127.0.0.1:9820"
Source = Literal["option", "environment variable", "ini key", "default"]
# The reference engine's circuit sizes (checked in its tests).
REF_PRESETS = ("default", "medium", "large", "xlarge")


@dataclass(frozen=True)
class Option:
    """One ``--cuzk-NAME`` flag with its ini key, environment variable and help text."""

    name: str
    help: str
    default: Any = None
    kind: str = "str"  # str | bool | float | list
    old_name: str | None = None  # a former name, still read (flag, ini key, variable), with a warning

    @property
    def flag(self) -> str:
        return f"--cuzk-{self.name}"

    @property
    def ini(self) -> str:
        return "cuzk_" + self.name.replace("-", "_")

    @property
    def env(self) -> str:
        return "PYTEST_CUZK_" + self.name.replace("-", "_").upper()

    @property
    def old(self) -> Option | None:
        """The option under its former name, help and all; None when it was never renamed."""
        if self.old_name is None:
            return None
        return Option(self.old_name, f"Former name of {self.flag}", self.default, self.kind)


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
        "manifest",
        "Test-data manifest TOML (default: the suite's manifest.toml for cuzk, generated data for cuzk-ref)",
    ),
    Option("input", "Use your own data file for a kind: KIND=PATH (repeatable)", (), "list"),
    Option("offline", "Never download test data", False, "bool"),
    Option(
        "download-stall",
        "Seconds a download may send no byte (or no whole response head) before it is given up",
        60.0,
        "float",
    ),
    Option("download-timeout", "Seconds one data file's download may take in all", 3600.0, "float"),
    Option("skip-warmup", "Skip the warm-up proof and PCE wait before measuring", False, "bool"),
    Option(
        "scenarios",
        "Also run the suite's load scenarios (test_server, test_priority, test_sweep), which take minutes; "
        "a -k expression or node id that names one of them runs it too",
        False,
        "bool",
    ),
    Option(
        "allow-missing",
        "Skip, instead of fail, the suite cases whose test data cannot be had (a CI gate should not)",
        False,
        "bool",
    ),
    Option(
        "lowmem-warmup",
        "When the PCE file is missing and the daemon is spawned, warm up with a low-memory config, then "
        "restart with the full one: auto (for cuzk binaries), on, off",
        "auto",
    ),
    Option("preset", f"Circuit-size preset of the reference engine ({', '.join(REF_PRESETS)})", "default"),
    Option("start-timeout", "Seconds for a spawned daemon to start answering", 120.0, "float"),
    Option("ready-timeout", "Seconds for SRS parameters to load (PreloadSRS)", 900.0, "float"),
    Option("warmup-timeout", "Seconds for the warm-up proof and its PCE file", 1800.0, "float"),
    Option("proof-timeout", "Seconds one proof may take before it is cancelled and fails", 1800.0, "float"),
    Option(
        "batch-sizes",
        "Batch sizes to test (sizes above 1 only for porep and snap; each size restarts a spawned daemon "
        "with scheduler.max_batch_size set to it, which costs minutes on a real cuzk)",
        "1",
    ),
    Option(
        "concurrency",
        "Concurrency levels (clients submitting at once) to test: 1 times a proof alone, 2 the pipelined "
        "rate (the next proof's synthesis under this one's GPU stage)",
        "1,2",
    ),
    Option(
        "proofs",
        "Minimum proofs per test (at least one wave of batch x concurrency); more run until the last 3 "
        "windows agree, within --cuzk-max-proofs and --cuzk-case-budget",
        10,
        "float",
    ),
    Option("max-proofs", "Maximum proofs per test", 1000, "float"),
    Option(
        "case-budget",
        "Seconds a test may measure: no wave starts that would end past them (the minimum proofs still run;"
        " a gated or saved run short of the precision its gate needs: up to 3 times as long)",
        45.0,
        "float",
    ),
    Option(
        "run-budget",
        "Time the whole run may measure for once the daemon is ready: 900s, 15m, 1.5h (or off); divided "
        "among the selected cases, each told its share, its minimum proofs lowered when they do not fit",
        "15m",
    ),
    Option("window", "Seconds of proving per measurement window", 5.0, "float"),
    Option(
        "stability",
        "Percent within which the last 3 windows' throughput and median latency must agree to stop",
        10.0,
        "float",
    ),
    Option("sample-interval", "Memory sampling interval in seconds", 0.1, "float"),
    Option(
        "slo",
        "Latency bound of the load scenarios (test_server, test_priority): KIND:BOUND[,...] or BOUND for "
        "every kind, BOUND in seconds (10s), minutes (30m) or times the kind's idle p50 (5x); default: "
        "the engine's (cuzk: porep:30m,snap:30m,wpost:5m,winning:10s)",
    ),
    Option(
        "scenario-budget",
        "Seconds a load scenario (test_server, test_priority, test_sweep) may measure for: no step starts "
        "that would end past them (its minimum still runs)",
        60.0,
        "float",
    ),
    Option(
        "background-in-flight",
        "Proofs test_priority keeps in flight as background load (Curio's default [Cuzk] MaxPending of 10, "
        "less the PoSt)",
        9,
        "float",
    ),
    Option("min-throughput", "Fail a test below this many proofs per hour: KIND:N/h[,KIND:N/h...]"),
    Option("max-rss", "Fail a test whose daemon RSS peak exceeds SIZE or KIND:SIZE[,...] (e.g. 200GiB)"),
    Option("max-vram", "Fail a test whose daemon VRAM peak exceeds SIZE or KIND:SIZE[,...]"),
    Option(
        "compare-fail",
        "Fail a test that regressed against the compared pytest-benchmark run: METRIC:N%[,...] with "
        "METRIC in throughput, rss_peak, vram_peak, p50, p90, p99, gpu, synthesis, queue_wait; a change "
        "fails when its whole interval, widened to the host's run-to-run spread, is beyond N%",
    ),
    Option(
        "compare-unresolved",
        "What --cuzk-compare-fail does with a change it cannot decide (its interval straddling the "
        "limit, confounded by other processes' load, a figure missing) and with a baseline saved too "
        "imprecise for its gate: warn, or fail (a CI gate that lets nothing unmeasured pass)",
        "warn",
    ),
    Option(
        "baseline", "Saved pytest-benchmark JSON to compare against (default: the --benchmark-compare run)"
    ),
    Option(
        "ab",
        "A/B in one run: the control daemon, named like --cuzk-daemon names the candidate (spawn, ref, or "
        "ADDR); the two builds prove each case in turn, in pairs of windows, and --cuzk-compare-fail gates "
        "the paired change",
    ),
    Option(
        "ab-binary", "The control build's cuzk binary, for --cuzk-ab=spawn (the candidate's is --cuzk-binary)"
    ),
    Option("ab-config", "The control build's base daemon TOML config (for cuzk-ref, e.g. its [ref.faults])"),
    Option(
        "ab-layout",
        "How the two daemons of --cuzk-ab share the host: auto (side by side where memory allows, else "
        "in turn), side-by-side (both up, waves in turn), in-turn (one up at a time, blocks of windows)",
        "auto",
    ),
    Option("ab-seed", "Seed of the A/B order of windows (default: a fresh one, reported in the summary)"),
    Option("plots", "Directory for per-test memory plots (PNG)"),
    Option(
        "status",
        "An attached daemon's HTTP /status (its daemon.status_listen), for its per-partition times and "
        "the memory figures of a daemon whose process cannot be sampled (a daemon the plugin starts has "
        "its own): ADDR=HOST:PORT per daemon (repeatable), or HOST:PORT for the only daemon",
        (),
        "list",
    ),
    Option("html", "Write one self-contained HTML report of the run (charts inline, no network) to PATH"),
    Option(
        "label",
        "Host label in test ids and the results database: ADDR=NAME per daemon (repeatable), or NAME for "
        "the run's only daemon",
        (),
        "list",
    ),
    Option(
        "machine-id",
        "The provider's id of the machine a daemon runs on (vast.ai's machine_id, not its host_id, which "
        "names the provider), recorded with each run so cuzk-perf offers can match the next offer of that "
        "machine: ADDR=ID per daemon (repeatable), or ID for the run's only daemon",
        (),
        "list",
        old_name="host-id",
    ),
    Option(
        "results-db",
        "Record every test in this database: a SQLAlchemy URL (sqlite:///FILE, postgresql://...) or "
        "'default' for a SQLite file in the user's data dir",
    ),
)


def add_options(parser: pytest.Parser) -> None:
    """Declare every option as a flag in the ``cuzk`` group and as an ini key."""
    group = parser.getgroup("cuzk", "cuzk proving daemon validation and benchmarks")
    for opt in (*OPTIONS, *(o.old for o in OPTIONS if o.old)):
        help_text = f"{opt.help}. Default: {opt.default!r}" if opt.default not in (None, ()) else opt.help
        help_text = help_text.replace("%", "%%")  # argparse expands % in help
        if opt.kind == "bool":
            group.addoption(opt.flag, action="store_true", default=None, help=help_text)
            parser.addini(opt.ini, opt.help, type="bool", default=None)
        elif opt.kind == "list":
            group.addoption(opt.flag, action="append", default=None, metavar="VALUE", help=help_text)
            parser.addini(opt.ini, opt.help, type="linelist", default=[])
        else:
            group.addoption(opt.flag, default=None, metavar="VALUE", help=help_text)
            parser.addini(opt.ini, opt.help, default=None)


class Where(str):
    """Where an option's value came from, as messages name it (``option --cuzk-proofs``).

    A ``str``, so every message names it as it is; ``source`` says which kind of place, so code asks
    ``where.given`` instead of reading the words.
    """

    source: Source
    name: str  # the flag, variable or ini key

    def __new__(cls, source: Source, name: str) -> Where:
        where = super().__new__(cls, f"default of {name}" if source == "default" else f"{source} {name}")
        where.source, where.name = source, name
        return where

    def __getnewargs__(self) -> tuple[Source, str]:  # type: ignore[override]
        return self.source, self.name

    @property
    def given(self) -> bool:
        """Set by flag, environment or ini, not left at its default."""
        return self.source != "default"


def option_value(config: pytest.Config, opt: Option) -> tuple[Any, Where]:
    """The option's value and where it came from, by precedence; its former name, if set, comes last."""
    value, where = _value(config, opt)
    if not where.given and opt.old is not None:
        old, old_where = _value(config, opt.old)
        if old_where.given:
            return old, old_where
    return value, where


def renamed(config: pytest.Config) -> list[str]:
    """A warning for each option set under its former name."""
    out = []
    for opt in OPTIONS:
        if opt.old is not None and (where := _value(config, opt.old)[1]).given:
            out.append(f"{where} is the former name of {opt.flag} ({opt.ini}, {opt.env}): use that")
    return out


def _value(config: pytest.Config, opt: Option) -> tuple[Any, Where]:
    value = config.getoption(opt.flag)
    if value not in (None, []):
        return value, Where("option", opt.flag)
    if opt.env in os.environ:
        env, where = os.environ[opt.env], Where("environment variable", opt.env)
        if opt.kind == "bool":
            return env.strip().lower() in ("1", "true", "yes", "on"), where
        if opt.kind == "list":
            return [v for v in env.split(";") if v.strip()], where
        return env, where
    ini = config.getini(opt.ini)  # None when unset: the ini keys are declared without defaults
    if ini not in (None, [], ""):
        return ini, Where("ini key", opt.ini)
    return opt.default, Where("default", opt.flag)


# What a suite case asks for: here, to be checked without imports (cases.py says what each holds).
CASE_FIXTURES = ("cuzk_case", "cuzk_kind", "cuzk_server_case", "cuzk_sweep_case", "cuzk_priority_case")


def uses_cuzk(item: pytest.Item) -> bool:
    """Whether a collected test asks for the plugin: a ``cuzk_*`` fixture or a ``cuzk_kinds`` marker."""
    names = getattr(item, "fixturenames", ())
    return any(n.startswith("cuzk_") for n in names) or item.get_closest_marker("cuzk_kinds") is not None


def requested(config: pytest.Config) -> bool:
    """Whether any cuzk option is set by flag, environment or ini: the run is about a daemon."""
    return any(option_value(config, opt)[1].given for opt in OPTIONS)

"""The options resolved into one ``Settings`` record, each value checked where it came from.

Every ``--cuzk-*`` flag has a ``cuzk_*`` ini twin and a ``PYTEST_CUZK_*`` environment
variable. Precedence lives in ``resolve_settings``: command line, then environment,
then ini, then the default. Parsers take ``where`` so a bad value names its source.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from pytest_cuzk.config import values
from pytest_cuzk.config.options import OPTIONS, REF_PRESETS, Where, option_value
from pytest_cuzk.config.slo import Slo
from pytest_cuzk.host.limits import thread_limit
from pytest_cuzk.vocab.kinds import UnknownKind, by_name
from pytest_cuzk.vocab.redact import redact

__all__ = ["Settings", "check_paths", "resolve_settings"]

QUICK_CALL_S = 60.0
HUNG_PROBE_S = 5.0
MODES = ("auto", "spawn", "ref")
AB_LAYOUTS = ("auto", "side-by-side", "in-turn")


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
    download_stall: float
    download_timeout: float
    skip_warmup: bool
    lowmem_warmup: str
    preset: str  # --cuzk-preset, or its default: the reference engine's [ref] preset wins over a default
    start_timeout: float
    ready_timeout: float
    warmup_timeout: float
    proof_timeout: float
    batch_sizes: tuple[int, ...]
    concurrency: tuple[int, ...]
    proofs: int
    sample_interval: float
    max_proofs: int = 1000
    case_budget: float = 45.0
    run_budget: float | None = 900.0  # seconds the run measures for once a daemon is ready; None: off
    window: float = 5.0
    stability: float = 10.0
    min_throughput: dict[str, float] = field(default_factory=dict)
    max_rss: dict[str, int] = field(default_factory=dict)
    max_vram: dict[str, int] = field(default_factory=dict)
    compare_fail: dict[str, float] = field(default_factory=dict)
    compare_unresolved: str = "warn"  # or "fail": what --cuzk-compare-fail does with what it cannot decide
    baseline: Path | None = None
    plots: Path | None = None
    html: Path | None = None
    allow_missing: bool = False
    scenarios: bool = False  # run the suite's load scenarios without naming them
    requested: bool = False  # a --cuzk-* option, PYTEST_CUZK_* variable or cuzk_* ini key is set
    labels: dict[str, str] = field(default_factory=dict)
    host_ids: dict[str, str] = field(default_factory=dict)
    status: dict[str, str] = field(default_factory=dict)
    results_db: str | None = field(default=None, repr=False)  # a DSN may hold a password
    slo: dict[str, Slo] = field(default_factory=dict)  # --cuzk-slo by kind; the engine's default elsewhere
    scenario_budget: float = 60.0
    background_in_flight: int = 9
    ab: str | None = None  # --cuzk-ab: the control daemon's mode (spawn, ref, attach); None: no A/B
    ab_attach: tuple[str, ...] = ()
    ab_binary: Path | None = None
    ab_config: Path | None = None
    ab_layout: str = "auto"
    ab_seed: int | None = None
    preset_from: str | None = None  # where --cuzk-preset was given (flag, environment, ini); None: not

    @property
    def call_timeout(self) -> float:
        """The deadline of calls a daemon should answer at once (Submit, GetStatus, GetMetrics, Cancel).

        Bounded by the user's proof timeout: a daemon that takes longer than a proof to
        accept one is hung, and must not hold the run for a fixed minute.
        """
        return min(QUICK_CALL_S, self.proof_timeout)

    @property
    def probe_timeout(self) -> float:
        """How long GetStatus may take when the plugin asks whether a daemon is hung."""
        return min(HUNG_PROBE_S, self.proof_timeout)

    @property
    def gates_asked(self) -> bool:
        """Whether any gate option is set (the gates sink is registered only then)."""
        return bool(self.min_throughput or self.max_rss or self.max_vram or self.compare_fail)


def check_paths(s: Settings) -> None:
    """The files and directories the options name exist and are what they must be; at configure time."""
    for flag, binary in (("--cuzk-binary", s.binary), ("--cuzk-ab-binary", s.ab_binary)):
        if binary is not None and not (binary.is_file() and os.access(binary, os.X_OK)):
            why = "is not an executable file" if binary.exists() else "does not exist"
            raise pytest.UsageError(f"{flag} {binary} {why}: pass the path of the cuzk daemon executable")
    configs = (("--cuzk-config", s.config), ("--cuzk-ab-config", s.ab_config))
    for flag, path in (*configs, ("--cuzk-baseline", s.baseline), ("--cuzk-manifest", s.manifest)):
        if path is not None and not path.is_file():
            raise pytest.UsageError(f"{flag} {path} does not exist (or is not a file): fix the path")
    for flag, path in ((flag, path) for flag, path in configs if path is not None):
        try:
            tomllib.loads(path.read_text())
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise pytest.UsageError(f"{flag} {path} is not valid TOML ({exc}): fix the file") from None
    for kind, path in s.inputs.items():
        if not path.is_file():
            raise pytest.UsageError(f"--cuzk-input {kind}={path}: no such file; fix the path")
    for flag, path in (("--cuzk-param-cache", s.param_cache), ("--cuzk-data-dir", s.data_dir)):
        if path is not None and path.exists() and not path.is_dir():
            raise pytest.UsageError(f"{flag} {path} is a file, not a directory: pass a directory")


def default_data_dir() -> Path:
    """The user's cache dir for test data (XDG_CACHE_HOME honoured); cuzk-ref keeps its params there too."""
    from pytest_cuzk.host.paths import user_cache_dir

    return user_cache_dir()


def resolve_settings(config: pytest.Config) -> Settings:
    """Apply precedence and validation to every option; raise ``pytest.UsageError`` naming the source."""
    raw = {opt.name: option_value(config, opt) for opt in OPTIONS}

    def path(name: str) -> Path | None:
        value, source = raw[name]
        if value and "://" in str(value):  # as a Path it would lose the "//" that redact finds a URL by
            raise pytest.UsageError(
                f"--cuzk-{name} takes a local path, not a URL ({redact(str(value))}, from {source}): "
                "download the file and pass its path"
            )
        return Path(value).expanduser() if value else None

    for name in ("binary", "config", "manifest", "baseline"):  # an unset CI variable gives ""
        value, source = raw[name]
        if value is not None and not str(value).strip():
            raise pytest.UsageError(f"--cuzk-{name} is empty (from {source}): give a path, or leave it out")
    daemon, attach = values.daemon(*raw["daemon"], MODES, "ADDR[,ADDR...]")
    values.address(str(raw["addr"][0]), raw["addr"][1], "use IP:port, host:port or unix:///path")
    inputs = {}
    for name, value in values.pairs(raw["input"][0], raw["input"][1], "KIND=PATH").items():
        try:
            inputs[by_name(name).name] = Path(value).expanduser()
        except UnknownKind as exc:
            raise pytest.UsageError(f"{raw['input'][1]}: {exc}") from exc
    lowmem = str(raw["lowmem-warmup"][0]).lower()
    if lowmem not in ("auto", "on", "off"):
        raise pytest.UsageError(
            f"Invalid value {lowmem!r} from {raw['lowmem-warmup'][1]}: use auto, on or off"
        )
    proofs, max_proofs = (values.proof_count(*raw[name]) for name in ("proofs", "max-proofs"))
    if max_proofs < proofs:
        why = f"below the minimum of {proofs} proofs ({raw['proofs'][1]})"
        raise pytest.UsageError(f"Invalid number {max_proofs} from {raw['max-proofs'][1]}: {why}")
    batch_sizes, concurrency = (values.ints(*raw[name]) for name in ("batch-sizes", "concurrency"))
    values.in_flight((batch_sizes, raw["batch-sizes"][1]), (concurrency, raw["concurrency"][1]))
    results_db = raw["results-db"][0]
    return Settings(
        daemon=daemon,
        addr=str(raw["addr"][0]),
        attach=attach,
        binary=path("binary"),
        config=path("config"),
        param_cache=path("param-cache"),
        data_dir=path("data-dir") or default_data_dir(),
        manifest=path("manifest"),
        inputs=inputs,
        offline=bool(raw["offline"][0]),
        download_stall=values.seconds(*raw["download-stall"]),
        download_timeout=values.seconds(*raw["download-timeout"]),
        allow_missing=bool(raw["allow-missing"][0]),
        scenarios=bool(raw["scenarios"][0]),
        requested=any(where.given for _, where in raw.values()),
        skip_warmup=bool(raw["skip-warmup"][0]),
        lowmem_warmup=lowmem,
        preset=values.choice(*raw["preset"], REF_PRESETS),
        preset_from=str(raw["preset"][1]) if raw["preset"][1].given else None,
        start_timeout=values.seconds(*raw["start-timeout"]),
        ready_timeout=values.seconds(*raw["ready-timeout"]),
        warmup_timeout=values.seconds(*raw["warmup-timeout"]),
        proof_timeout=values.seconds(*raw["proof-timeout"]),
        batch_sizes=batch_sizes,
        concurrency=concurrency,
        proofs=proofs,
        sample_interval=values.interval(raw["sample-interval"][0], raw["sample-interval"][1]),
        max_proofs=max_proofs,
        case_budget=values.seconds(*raw["case-budget"]),
        run_budget=values.duration(*raw["run-budget"]),
        window=values.seconds(*raw["window"]),
        stability=values.percent_band(*raw["stability"]),
        min_throughput=values.kind_map(raw["min-throughput"][0], raw["min-throughput"][1], values.throughput),
        max_rss=values.kind_map(raw["max-rss"][0], raw["max-rss"][1], values.size),
        max_vram=values.kind_map(raw["max-vram"][0], raw["max-vram"][1], values.size),
        compare_fail=values.compare_fail(raw["compare-fail"][0], raw["compare-fail"][1]),
        compare_unresolved=_unresolved(raw),
        baseline=path("baseline"),
        plots=path("plots"),
        html=path("html"),
        labels=values.identities(*raw["label"], "ADDR=NAME", len(attach)),
        host_ids=values.identities(*raw["machine-id"], "ADDR=ID", len(attach)),
        status=values.identities(*raw["status"], "ADDR=HOST:PORT", len(attach)),
        results_db=values.results_db(results_db, raw["results-db"][1]) if results_db else None,
        slo=values.kind_map(raw["slo"][0], raw["slo"][1], values.slo),
        scenario_budget=values.seconds(*raw["scenario-budget"]),
        background_in_flight=values.whole(*raw["background-in-flight"], thread_limit()),
        **_ab(raw, attach, path),
    )


def _unresolved(raw: dict[str, tuple[Any, Where]]) -> str:
    """``--cuzk-compare-unresolved``: the flag says what this run's compare gate does, so it needs one.

    Set in the environment or an ini file it is a policy for the runs that gate, as in a CI job
    whose first run, with no baseline yet, gates nothing.
    """
    value, where = raw["compare-unresolved"]
    if where.source == "option" and raw["compare-fail"][0] is None:
        raise pytest.UsageError(f"{where} needs --cuzk-compare-fail: name the gate it applies to")
    return values.choice(value, where, ("warn", "fail"))


def _ab(raw: dict[str, tuple[Any, Where]], candidates: tuple[str, ...], path: Any) -> dict[str, Any]:
    """The ``ab_*`` settings: one control daemon beside one candidate, a binary only where it is spawned."""
    value, where = raw["ab"]
    if value is None:
        if given := [raw[n][1] for n in ("ab-binary", "ab-config", "ab-seed") if raw[n][0] is not None]:
            raise pytest.UsageError(f"{given[0]} needs --cuzk-ab: name the control daemon")
        return {}
    mode, attach = values.daemon(value, where, ("spawn", "ref"), "one ADDR")
    if len(attach) > 1 or len(candidates) > 1:
        raise pytest.UsageError(f"{where}: A/B pairs one candidate daemon with one control, not several")
    if (raw["ab-binary"][0] is not None) != (mode == "spawn"):
        raise pytest.UsageError(f"{where}: --cuzk-ab=spawn takes the control's binary from --cuzk-ab-binary")
    seed = values.whole(*raw["ab-seed"]) if raw["ab-seed"][0] is not None else None
    layout = values.choice(*raw["ab-layout"], AB_LAYOUTS)
    return dict(ab=mode, ab_attach=attach, ab_binary=path("ab-binary"), ab_config=path("ab-config"),
                ab_layout=layout, ab_seed=seed)  # fmt: skip

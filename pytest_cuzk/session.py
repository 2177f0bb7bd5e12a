"""The run's shared state: which daemons, which data, and the readiness chain for each.

``CuzkSession`` is built once per pytest run. It resolves the daemon mode, makes
the test data present, and hands out ready daemons: answering, SRS loaded for
the selected kinds, warmed up with one proof per kind and its PCE file written.
A spawned daemon is restarted when a test needs another batch size (tests are
grouped so that this happens once per size) and after it crashed (once per
crash, reported); an attached daemon is used as it is.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from . import __version__
from .client import ProvingClient
from .daemon import DaemonExited, DaemonProcess, ModeChoice, choose_mode, daemon_config, listen_address
from .data import DataStore, DataUnavailable, Progress, load_manifest
from .errors import CuzkError, RpcError
from .inputs import build_request
from .proofcheck import check_proof
from .proto import pb
from .settings import Settings
from .wire.addresses import is_local, label_from_address
from .wire.kinds import KINDS, ProofKindInfo

__all__ = ["PCE_MAGIC", "ColdStart", "CuzkSession", "MetricValues", "Target"]

MetricValues = dict[tuple[str, tuple[tuple[str, str], ...]], float]

PCE_MAGIC = b"PCE\x02"
ATTACHED_PROBE_S = 5.0
MAX_RESTARTS = 3
CUZK_PARAM_CACHE = Path("/data/zk/params")  # cuzk's srs.param_cache default
DEFAULT_MANIFEST = Path(__file__).resolve().parent.parent / "fixtures" / "manifest.toml"
# Low-memory warm-up: one job at a time, no batching (the PCE extraction is the memory peak).
LOWMEM_OVERRIDES = {
    "scheduler": {"max_batch_size": 1},
    "pipeline": {"synthesis_concurrency": 1, "max_parallel_synthesis": 1},
    "gpus": {"gpu_workers_per_device": 1},
}


@dataclass
class ColdStart:
    """Seconds each readiness stage took for one daemon configuration."""

    label: str
    batch_size: int | None
    start_s: float = 0.0
    srs_load_s: dict[str, float] = field(default_factory=dict)
    warmup_s: dict[str, float] = field(default_factory=dict)
    pce_s: dict[str, float] = field(default_factory=dict)
    lowmem_warmup: bool = False
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "batch_size": self.batch_size,
            "notes": list(self.notes),
            "start_s": round(self.start_s, 3),
            "srs_load_s": {k: round(v, 3) for k, v in self.srs_load_s.items()},
            "warmup_s": {k: round(v, 3) for k, v in self.warmup_s.items()},
            "pce_s": {k: round(v, 3) for k, v in self.pce_s.items()},
            "lowmem_warmup": self.lowmem_warmup,
        }


@dataclass
class Target:
    """One daemon under test: attached at an address, or spawned (and respawned) by the plugin."""

    label: str
    address: str
    mode: str
    process: DaemonProcess | None = None
    batch_size: int | None = None
    ready_kinds: set[str] = field(default_factory=set)
    cold: list[ColdStart] = field(default_factory=list)
    restarts: list[str] = field(default_factory=list)
    crashed: str | None = None

    _probe_at: float = 0.0
    _probe_error: str = ""

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def alive(self) -> bool:
        """A spawned daemon's process is running; an attached one answered GetStatus lately.

        An attached host that vanishes without a TCP reset would otherwise keep an
        AwaitProof blocked until the proof timeout.
        """
        if self.process is not None:
            return self.process.alive()
        if time.monotonic() - self._probe_at >= ATTACHED_PROBE_S:
            self._probe_at = time.monotonic()
            try:
                with ProvingClient(self.address) as client:
                    client.status(timeout=2.0)
                self._probe_error = ""
            except CuzkError as exc:
                self._probe_error = str(exc)
        return not self._probe_error

    def gone(self, grace_s: float = 1.0) -> bool:
        """Whether the daemon is dead after an RPC error (a spawned one gets ``grace_s`` to be reaped)."""
        if self.process is not None:
            return self.process.died_within(grace_s)
        self._probe_at = 0.0
        return not self.alive()

    def death_message(self, rss_peak: int | None = None) -> str:
        if self.process is not None:
            return self.process.exit_message(rss_peak)
        return f"attached daemon at {self.address} stopped answering: {self._probe_error}"


def _pce_complete(path: Path, newer_than: float = 0.0) -> bool:
    """The PCE file is in place (final name), recent enough, its magic right and its size stable.

    cuzk extracts the PCE again after every start (it never loads the file), so for
    a spawned cuzk only a file written since its start means the extraction is done.
    """
    try:
        st = path.stat()
        with path.open("rb") as f:
            magic = f.read(4)
        time.sleep(0.05)
        return (
            magic == PCE_MAGIC
            and st.st_size >= 32
            and st.st_mtime >= newer_than
            and path.stat().st_size == st.st_size
        )
    except OSError:
        return False


class CuzkSession:
    """Daemons, data and readiness for one pytest run (one per xdist worker)."""

    def __init__(self, settings: Settings, worker: str = "master") -> None:
        self.settings = settings
        self.worker = worker
        self.choice: ModeChoice | None = None
        self.selected_kinds: set[str] = set(KINDS)
        self.targets: dict[str, Target] = {}
        self.tmpdir = Path(tempfile.mkdtemp(prefix="cuzk-"))
        self._manifest: Any = None
        self._data: dict[str, Path | DataUnavailable] = {}
        self.data_notes: list[str] = []
        self.progress: Progress | None = None
        self.rows: list[tuple[str, dict[str, Any]]] = []
        self.colds: dict[str, dict[str, Any]] = {}
        self.recorder: Any = None
        if settings.results_db:  # SQLAlchemy is imported only by runs that record
            from .recording import Recorder

            self.recorder = Recorder(settings.results_db)
        self._metric_base: dict[str, MetricValues] = {}
        self.metric_totals: dict[str, MetricValues] = {}
        self.keep_tmpdir = False
        self.interrupted = False

    # --- mode and targets -------------------------------------------------------------------------
    def resolve_mode(self) -> ModeChoice:
        """Decide attach / spawn / ref once, and create the targets."""
        if self.choice is None:
            s = self.settings
            self.choice = choose_mode(s.daemon, s.addr, s.attach, s.binary)
            if self.choice.mode == "attach":
                for addr in self.choice.addresses:
                    label = s.labels.get(addr) or label_from_address(addr)
                    self.targets[label] = Target(label, addr, "attach")
            else:
                self.targets["local"] = Target("local", "", self.choice.mode)
        return self.choice

    @property
    def labels(self) -> list[str]:
        self.resolve_mode()
        return list(self.targets)

    @property
    def param_cache(self) -> Path | None:
        """Where the daemon keeps params and PCE files, when the plugin knows it.

        --cuzk-param-cache, else for a spawned daemon the base config's srs.param_cache
        or cuzk's default; unknown for an attached daemon unless given.
        """
        s = self.settings
        if s.param_cache:
            return s.param_cache
        mode = self.resolve_mode().mode
        if mode == "ref":
            return s.data_dir / f"ref-params-{s.preset}"
        if mode == "spawn":
            cache = daemon_config(s.config, {}).get("srs", {}).get("param_cache")
            return Path(cache) if cache else CUZK_PARAM_CACHE
        return None

    def pce_dir(self, target: Target) -> Path | None:
        """The param cache to watch for ``target``'s PCE files: only one on this machine."""
        if target.mode == "attach" and not is_local(target.address):
            return None
        return self.param_cache

    def engine_identity(self) -> str:
        """Which build is under test, for machine info and the results database."""
        choice = self.resolve_mode()
        if choice.mode == "ref":
            return f"cuzk-ref {__version__} preset={self.settings.preset}"
        if choice.mode == "spawn" and choice.binary:
            from .hostinfo import binary_sha256

            return f"{choice.binary.name} sha256:{binary_sha256(choice.binary)[:16]}"
        return "attached: " + ",".join(choice.addresses)

    # --- data -------------------------------------------------------------------------------------
    def manifest_path(self) -> Path:
        s = self.settings
        if s.manifest:
            return s.manifest
        if self.resolve_mode().mode == "ref":
            return self._ref_data()
        return DEFAULT_MANIFEST

    def _ref_data(self) -> Path:
        """Generated reference-engine data, made once per cache dir (locked across xdist workers)."""
        from .refengine import gendata

        out = self.settings.data_dir / f"ref-data-{self.settings.preset}"
        out.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(out) + ".lock"):
            manifest = out / "manifest.toml"
            if not manifest.exists():
                gendata.generate(out, preset=self.settings.preset, seed=0)
        return manifest

    def data(self, kind: str) -> Path | DataUnavailable:
        """The data file for ``kind`` (a user's --cuzk-input first), or why it cannot be had."""
        if kind in self.settings.inputs:
            path = self.settings.inputs[kind]
            if path.is_file():
                return path
            return DataUnavailable(
                kind,
                str(path),
                path,
                f"--cuzk-input {kind}=",
                "file not found",
                "fix the path in --cuzk-input",
            )
        if kind not in self._data:
            store = DataStore(self.settings.data_dir, offline=self.settings.offline, progress=self.progress)
            self._data.update(store.ensure_all(self.manifest(), [kind]))
            self.data_notes += store.notes
        return self._data[kind]

    def manifest(self) -> Any:
        if self._manifest is None:
            self._manifest = load_manifest(self.manifest_path())
        return self._manifest

    def request(self, kind: ProofKindInfo, request_id: str | None = None) -> pb.SubmitProofRequest:
        """A fresh request for one proof of ``kind`` with a unique id (cuzk caches results by id)."""
        path = self.data(kind.name)
        if isinstance(path, DataUnavailable):
            raise path
        entry = self.manifest().entries.get(kind.name)
        fields = dict(entry.request) if entry else {}
        rid = request_id or f"pytest-cuzk-{kind.name}-{uuid.uuid4()}"
        return build_request(
            kind, path, fields, request_id=rid, where=f"{self.manifest_path()} [kinds.{kind.name}]"
        )

    # --- daemons ----------------------------------------------------------------------------------
    def _spawn(self, target: Target, batch_size: int, lowmem: bool) -> DaemonProcess:
        choice = self.resolve_mode()
        prefix = f"{target.label}-b{batch_size}{'-lowmem' if lowmem else ''}-"
        workdir = Path(tempfile.mkdtemp(prefix=prefix, dir=self.tmpdir))
        overrides: dict[str, dict[str, Any]] = {
            "daemon": {"listen": listen_address(workdir)},
            "scheduler": {"max_batch_size": batch_size},
        }
        if self.param_cache:
            overrides["srs"] = {"param_cache": str(self.param_cache)}
        if choice.mode == "ref":
            argv = [sys.executable, "-m", "pytest_cuzk.refengine.cli"]
            overrides["ref"] = {"preset": self.settings.preset}
            overrides["scheduler"]["max_batch_wait_ms"] = 2000
        else:
            assert choice.binary is not None
            argv = [str(choice.binary)]
        if lowmem:
            for section, values in LOWMEM_OVERRIDES.items():
                overrides.setdefault(section, {}).update(values)
        config = daemon_config(self.settings.config, overrides)
        return DaemonProcess(argv, workdir, config, choice.mode)

    def _needs_lowmem(self, kinds: list[ProofKindInfo]) -> bool:
        mode = self.settings.lowmem_warmup
        if mode == "off" or self.settings.skip_warmup or not self.param_cache:
            return False
        missing = [k for k in kinds if not (self.param_cache / k.pce_file).exists()]
        return bool(missing) and (mode == "on" or self.resolve_mode().mode == "spawn")

    def target(self, label: str | None = None) -> Target:
        self.resolve_mode()
        return self.targets[label or next(iter(self.targets))]

    def started(
        self, label: str | None = None, batch_size: int = 1, kinds: list[ProofKindInfo] | None = None
    ) -> Target:
        """A daemon that answers, configured for ``batch_size`` when the plugin spawns it.

        A spawned daemon that died is restarted (once per crash, recorded); ``kinds`` are
        the ones a low-memory warm-up would cover if their PCE files are missing.
        """
        target = self.target(label)
        if target.crashed:
            raise DaemonExited(
                f"daemon {target.label} ({target.address}) is out of service: {target.crashed}"
            )
        if target.mode == "attach":
            if not target.cold:
                self._attach(target)
            return target
        if target.process and not target.process.alive():
            target.process.stop()  # its children still belong to the group
            how = "crash" if target.process.answered else "failed start"
            target.restarts.append(f"restarted after {how}: {target.process.exit_message()}")
            target.process = None
            if len(target.restarts) >= MAX_RESTARTS:
                target.crashed = f"it died {len(target.restarts)} times; not restarting it again"
                raise DaemonExited(f"daemon {target.label}: {target.crashed}")
        if target.process is None or target.batch_size != batch_size:
            self._restart(target, batch_size, self.wanted_kinds() if kinds is None else kinds)
        return target

    def _attach(self, target: Target) -> None:
        """Check that an attached daemon answers; a daemon that does not is out of service for the run."""
        cold = ColdStart(target.label, None)
        t0 = time.monotonic()
        try:
            with ProvingClient(target.address) as client:
                client.wait_ready(self.settings.start_timeout)
        except CuzkError as exc:
            target.crashed = str(exc)
            raise
        cold.start_s = time.monotonic() - t0
        target.cold.append(cold)

    def out_of_service(self, target: Target, reason: str) -> None:
        """Take a daemon that can no longer be trusted (a proof it cannot cancel) out of the run.

        A spawned one is restarted before the next test; an attached one is skipped from now on.
        """
        if target.process is None:
            target.crashed = reason
            return
        self.fold_metrics(target)
        target.process.stop()
        target.process = None
        target.restarts.append(f"restarted: {reason}")

    def wanted_kinds(self, kinds: list[str] | None = None) -> list[ProofKindInfo]:
        """The selected kinds (or ``kinds``) whose data can be had."""
        wanted = [KINDS[k] for k in (kinds or sorted(self.selected_kinds))]
        return [k for k in wanted if not isinstance(self.data(k.name), DataUnavailable)]

    def ready(self, label: str | None = None, batch_size: int = 1, kinds: list[str] | None = None) -> Target:
        """A daemon that answers, has the SRS of ``kinds`` loaded and is warmed up for them."""
        wanted = self.wanted_kinds(kinds)
        target = self.started(label, batch_size, wanted)
        self._prepare(target, wanted, target.cold[-1])
        return target

    def watch_metrics(self, target: Target) -> None:
        """Remember the daemon's counters now, so the run's changes can be reported."""
        if target.label not in self._metric_base:
            with ProvingClient(target.address) as client:
                self._metric_base[target.label] = _metric_values(client)

    def fold_metrics(self, target: Target) -> None:
        """Add what the counters moved since ``watch_metrics`` to the run's totals (before a restart)."""
        base = self._metric_base.pop(target.label, None)
        if base is None or not target.alive():
            return
        try:
            with ProvingClient(target.address) as client:
                now = _metric_values(client)
        except CuzkError:
            return
        totals = self.metric_totals.setdefault(target.label, {})
        for key, value in now.items():
            totals[key] = totals.get(key, 0.0) + value - base.get(key, 0.0)

    def _restart(self, target: Target, batch_size: int, kinds: list[ProofKindInfo]) -> None:
        if target.process:
            self.fold_metrics(target)
            target.process.stop()
        cold = ColdStart(target.label, batch_size)
        target.ready_kinds = set()
        if self._needs_lowmem(kinds):
            cold.lowmem_warmup = True
            self._start(target, self._spawn(target, batch_size, lowmem=True), cold)
            self._prepare(target, kinds, cold)
            target.process.stop()  # type: ignore[union-attr]
            target.ready_kinds = set()
            cold.notes.append("warmed up with a low-memory config, then restarted with the full one")
        self._start(target, self._spawn(target, batch_size, lowmem=False), cold)
        target.batch_size = batch_size
        target.cold.append(cold)

    def _start(self, target: Target, process: DaemonProcess, cold: ColdStart) -> None:
        target.process = process
        process.start()
        cold.start_s += process.wait_answering(self.settings.start_timeout)
        target.address = process.address

    def _prepare(self, target: Target, kinds: list[ProofKindInfo], cold: ColdStart) -> None:
        """Preload SRS, then warm up each kind not yet ready on this daemon and wait for its PCE.

        A daemon that dies on the way (the OOM killer during the first proof) is reported
        as a death, with its exit and log, not as the RPC error its socket gave.
        """
        todo = [k for k in kinds if k.name not in target.ready_kinds]
        if not todo:
            return
        try:
            with ProvingClient(target.address) as client:
                for kind in todo:
                    with self._cache_lock(target, kind):
                        t0 = time.monotonic()
                        client.preload_srs(kind.circuit_id, timeout_s=self.settings.ready_timeout)
                        cold.srs_load_s[kind.name] = time.monotonic() - t0
                        if not self.settings.skip_warmup:
                            self._warm_up(client, target, kind, cold)
                    target.ready_kinds.add(kind.name)
        except RpcError as exc:
            if target.gone():
                raise DaemonExited(f"daemon died while getting ready: {target.death_message()}") from exc
            raise

    def _cache_lock(self, target: Target, kind: ProofKindInfo) -> Any:
        """Serialise setup and PCE writing of one circuit across daemons sharing a param cache (xdist)."""
        cache = self.pce_dir(target)
        if target.process is None or cache is None:
            return contextlib.nullcontext()
        cache.mkdir(parents=True, exist_ok=True)
        return FileLock(str(cache / f".pytest-cuzk-{kind.circuit_id}.lock"))

    def _warm_up(self, client: ProvingClient, target: Target, kind: ProofKindInfo, cold: ColdStart) -> None:
        t0 = time.monotonic()
        result = client.prove(self.request(kind), timeout_s=self.settings.warmup_timeout)
        cold.warmup_s[kind.name] = time.monotonic() - t0
        if result.status != pb.AwaitProofResponse.COMPLETED:
            raise CuzkError(f"warm-up {kind.name} proof on {target.address} failed: {result.error_message}")
        check_proof(result.proof, kind)
        cache = self.pce_dir(target)
        if cache is None:
            cold.notes.append(
                f"{kind.name}: PCE file not checked (param cache unknown or remote: "
                "pass --cuzk-param-cache for a daemon on this machine)"
            )
            return
        pce = cache / kind.pce_file
        # The reference engine reuses its PCE file; cuzk writes a new one after each start.
        fresh = target.process.started_wall if target.process and target.mode == "spawn" else 0.0
        t1 = time.monotonic()
        deadline = t1 + self.settings.warmup_timeout
        while not _pce_complete(pce, fresh):
            if target.process and not target.process.alive():
                raise DaemonExited(f"daemon died while writing {pce}: {target.process.exit_message()}")
            if time.monotonic() > deadline:
                raise CuzkError(
                    f"PCE file {pce} did not appear within {self.settings.warmup_timeout:.0f}s after the "
                    f"{kind.name} warm-up proof"
                )
            time.sleep(0.2)
        cold.pce_s[kind.name] = time.monotonic() - t1

    def close(self) -> None:
        """Stop every spawned daemon, then close the results database and remove the temp dir.

        Daemons go first, each on its own, so nothing else failing leaves one behind.
        An interrupted run's database runs stay unfinished, as the database expects;
        the temp dir (configs and daemon logs) is kept when a test failed.
        """
        for target in self.targets.values():
            if target.process:
                try:
                    target.process.stop()
                except Exception as exc:  # keep stopping the others
                    self.data_notes.append(f"could not stop daemon {target.label}: {exc}")
        if self.recorder is not None:
            self.recorder.close(self.interrupted)
        if not self.keep_tmpdir:
            with contextlib.suppress(OSError):
                shutil.rmtree(self.tmpdir)


def _metric_values(client: ProvingClient) -> MetricValues:
    """The proof counters (gauges, and the summary over the last 1000 proofs, do not add up)."""
    return {
        key: sample.value
        for key, sample in client.metric_samples().by_key.items()
        if sample.name.startswith(("cuzk_proofs_completed", "cuzk_proofs_failed"))
    }

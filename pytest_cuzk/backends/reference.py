"""The reference engine as a daemon under test, and the plugin's one door into ``refengine``.

``ReferenceEngine`` spawns ``cuzk-ref`` like any daemon; ``RefProfile`` gives it generated
test data and full Groth16 verification of every proof. Nothing else in the plugin imports
the reference engine.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from filelock import FileLock

from pytest_cuzk import __version__
from pytest_cuzk.backends.process import daemon_config
from pytest_cuzk.backends.profiles import CUZK_KNOWN_ISSUES, known_issue, ref_labels
from pytest_cuzk.backends.protocol import ColdStart, EngineProfile, Mode, PceRule, Verifier
from pytest_cuzk.backends.spawned import SpawnedDaemon
from pytest_cuzk.backends.workspace import Workspace
from pytest_cuzk.config.options import REF_PRESETS
from pytest_cuzk.config.settings import Settings
from pytest_cuzk.config.slo import Slo
from pytest_cuzk.core.errors import CuzkError, DataDirUnwritable
from pytest_cuzk.core.progress import ProgressLine
from pytest_cuzk.proto import pb
from pytest_cuzk.vocab.daemonconfig import DaemonConfig, config_record
from pytest_cuzk.vocab.kinds import ProofKindInfo

__all__ = ["RefProfile", "ReferenceEngine", "ref_preset"]

BATCH_WAIT_MS = 2000  # a partial batch waits this long (cuzk's default is 10 s)
# Its latency bounds, relative to what it measures idle on this host: alone, 5 times the kind's idle p50;
# under load, the PoSt's idle p50 plus 4 background proofs. With priorities honoured a PoSt waits for the
# work already started (the proof being proved and the one synthesised next: two), each slower than idle
# while they share the CPUs, so four; ignoring priorities, for every proof queued before it.
REF_SLO = Slo(times_idle=5.0, source="the reference-engine default")
REF_SLO_UNDER_LOAD = Slo(times_idle=1.0, background=4.0, source="the reference-engine default")


class RefProfile:
    """cuzk-ref: deterministic generated data, and proofs verified against its own keys.

    ``version``, ``behave`` and ``prover`` are what a running cuzk-ref reported (``detect_profile``).
    """

    def __init__(
        self,
        preset: str,
        param_cache: Path | None,
        data_dir: Path,
        *,
        version: str | None = None,
        behave: str | None = None,
        prover: str | None = None,
        config: DaemonConfig | None = None,
    ) -> None:
        self._preset = preset
        self.param_cache = param_cache
        self.data_dir = data_dir
        self.version = version or __version__
        self.behave = behave
        self.prover = prover
        self._config = config

    def manifest(self) -> Path:
        """Generated data, made once per cache dir (locked across xdist workers).

        A data dir that cannot be written (read-only, full) is a ``DataDirUnwritable`` naming the file.
        """
        from pytest_cuzk.refengine import gendata

        out = self.data_dir / f"ref-data-{self._preset}"
        manifest = out / "manifest.toml"
        with DataDirUnwritable.raised_for(out):
            out.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(str(out) + ".lock"):
                if not manifest.exists():
                    gendata.generate(out, preset=self._preset, seed=0)
        return manifest

    def verifier(self, kind: ProofKindInfo) -> Verifier | None:
        """Full pairing verification, where the engine's verifying keys can be read."""
        if self.param_cache is None:
            return None
        from pytest_cuzk.refengine.verify import verify_proof

        cache, preset = self.param_cache, self._preset

        def verify(request: pb.SubmitProofRequest, proof: bytes) -> bool:
            return verify_proof(cache, kind, request, proof, preset=preset)

        return verify

    def identity(self) -> str:
        prover = f" prover={self.prover}" if self.prover else ""
        return f"{self.build()}{prover}"

    def build(self) -> str:
        """Without the prover: a spawned engine says which it chose only once it runs."""
        behave = f" behave={self.behave}" if self.behave else ""
        tag = f" {self._config.tag}" if self._config is not None else ""
        return f"cuzk-ref {self.version} preset={self._preset}{behave}{tag}"

    def config(self) -> DaemonConfig | None:
        return self._config

    def preset(self) -> str | None:
        return self._preset

    def default_param_cache(self) -> Path | None:
        return self.param_cache

    def known_issue(self, kind: str, batch_size: int, errors: Sequence[str]) -> str | None:
        """Behaving as cuzk it has cuzk's bugs; the protocol behaviour has none."""
        if self.behave == "protocol":
            return None
        return known_issue(CUZK_KNOWN_ISSUES, kind, batch_size, errors)

    def slo(self, kind: ProofKindInfo, under: ProofKindInfo | None) -> Slo:
        """Relative to its idle latency on this host (``REF_SLO``, ``REF_SLO_UNDER_LOAD``)."""
        return REF_SLO if under is None else REF_SLO_UNDER_LOAD


def ref_preset(settings: Settings) -> str:
    """The circuit size: --cuzk-preset, else the base config's ``[ref] preset``, else the option's default.

    Both given and different is a mistake the run must not guess about: a CuzkError naming both.
    """
    configured = daemon_config(settings.config, {}).get("ref", {}).get("preset")
    where = f'[ref] preset = "{configured}" in {settings.config}'  # --cuzk-config, or --cuzk-ab-config
    if configured is not None and configured not in REF_PRESETS:
        raise CuzkError(f"{where}: unknown preset; use one of {', '.join(REF_PRESETS)}")
    if configured is None or settings.preset_from is None:
        return str(configured or settings.preset)
    if settings.preset != configured:
        raise CuzkError(
            f"--cuzk-preset={settings.preset} (from {settings.preset_from}) disagrees with {where}: "
            "give the preset in one place, or the same in both"
        )
    return settings.preset


class ReferenceEngine(SpawnedDaemon):
    """``cuzk-ref`` spawned by the plugin, with its param cache in the data dir (per preset)."""

    mode: Mode = "ref"
    lowmem_by_default = False  # it needs no low-memory warm-up unless asked (--cuzk-lowmem-warmup=on)
    prover: str | None = None  # which prover the running engine chose (gpu:NAME or cpu), once it answered

    @staticmethod
    def check_settings(settings: Settings) -> None:
        """Its preset and its base config: a disagreement or a bad key is one line at configure time.

        The config is read as cuzk-ref reads it, keys the plugin overrides too: a value it cannot
        use is the user's to fix, not something the run may hide by overriding it.
        """
        ref_preset(settings)
        if settings.config is not None:
            from pytest_cuzk.refengine.config import ConfigError, parse_config

            try:
                parse_config(daemon_config(settings.config, {}), str(settings.config))
            except ConfigError as exc:
                raise CuzkError(f"{exc}: fix the config (it is cuzk-ref's, as -c reads it)") from None

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "pytest_cuzk.refengine.cli"]

    def __init__(self, label: str, settings: Settings, workspace: Workspace) -> None:
        super().__init__(label, settings, workspace)
        self.preset = ref_preset(settings)

    def overrides(self, batch_size: int) -> dict[str, dict[str, Any]]:
        out = super().overrides(batch_size)
        out["scheduler"]["max_batch_wait_ms"] = BATCH_WAIT_MS
        out["ref"] = {"preset": self.preset}
        return out

    def given_param_cache(self) -> Path | None:
        """--cuzk-param-cache, else a per-preset directory in the data dir (always written to its config)."""
        return self.settings.param_cache or self.settings.data_dir / f"ref-params-{self.preset}"

    def behave(self) -> str:
        """The behaviour the base config asks for (``[ref] behave``; cuzk-ref's default is cuzk)."""
        return str(daemon_config(self.settings.config, {}).get("ref", {}).get("behave", "cuzk"))

    def pce_rule(self) -> PceRule | None:
        """Behaving as cuzk it extracts the PCE again after every start: only a file written since counts.

        In the protocol behaviour it reuses its PCE file across starts: any complete file counts.
        """
        if self.behave() == "protocol":
            return PceRule(self.param_cache())
        return super().pce_rule()

    def _start(self, batch_size: int, cold: ColdStart, progress: ProgressLine, lowmem: bool) -> None:
        """Start it, then ask which prover it chose: only the running engine knows if a GPU is usable."""
        super()._start(batch_size, cold, progress, lowmem)
        self.prover = (ref_labels(self.address) or {}).get("prover", self.prover)

    def profile(self) -> EngineProfile:
        settings = self.settings
        return RefProfile(
            self.preset, self.param_cache(), settings.data_dir, behave=self.behave(), prover=self.prover,
            config=self.config_record(),
        )  # fmt: skip

    def config_record(self) -> DaemonConfig:
        """Its base config and the faults its environment adds (``CUZK_REF_FAULTS``): both change it."""
        from pytest_cuzk.refengine.config import FAULTS_ENV

        table = daemon_config(self.settings.config, {})
        if faults := os.environ.get(FAULTS_ENV):
            with contextlib.suppress(ValueError):  # cuzk-ref refuses it at its start, and says why
                table.setdefault("ref", {}).setdefault("faults", {}).update(json.loads(faults))
        return config_record(table)

    def identity(self) -> str:
        return self.profile().identity()

"""The reference engine as a daemon under test, and the plugin's one door into ``refengine``.

``ReferenceEngine`` spawns ``cuzk-ref`` like any daemon; ``RefProfile`` gives it generated
test data and full Groth16 verification of every proof. Nothing else in the plugin imports
the reference engine.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from filelock import FileLock

from .. import __version__
from ..proto import pb
from ..wire.kinds import ProofKindInfo
from .protocol import EngineProfile, Mode, PceRule, Verifier
from .spawned import SpawnedDaemon

__all__ = ["RefProfile", "ReferenceEngine"]

BATCH_WAIT_MS = 2000  # a partial batch waits this long (cuzk's default is 10 s)


class RefProfile:
    """cuzk-ref: deterministic generated data, and proofs verified against its own keys."""

    def __init__(self, preset: str, param_cache: Path | None, data_dir: Path) -> None:
        self._preset = preset
        self.param_cache = param_cache
        self.data_dir = data_dir

    def manifest(self) -> Path:
        """Generated data, made once per cache dir (locked across xdist workers)."""
        from ..refengine import gendata

        out = self.data_dir / f"ref-data-{self._preset}"
        out.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(out) + ".lock"):
            manifest = out / "manifest.toml"
            if not manifest.exists():
                gendata.generate(out, preset=self._preset, seed=0)
        return manifest

    def verifier(self, kind: ProofKindInfo) -> Verifier | None:
        """Full pairing verification, where the engine's verifying keys can be read."""
        if self.param_cache is None:
            return None
        from ..refengine.verify import verify_proof

        cache, preset = self.param_cache, self._preset

        def verify(request: pb.SubmitProofRequest, proof: bytes) -> bool:
            return verify_proof(cache, kind, request, proof, preset=preset)

        return verify

    def identity(self) -> str:
        return f"cuzk-ref {__version__} preset={self._preset}"

    def preset(self) -> str | None:
        return self._preset


class ReferenceEngine(SpawnedDaemon):
    """``cuzk-ref`` spawned by the plugin, with its param cache in the data dir (per preset)."""

    mode: Mode = "ref"
    lowmem_by_default = False  # it needs no low-memory warm-up unless asked (--cuzk-lowmem-warmup=on)

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "pytest_cuzk.refengine.cli"]

    def overrides(self, batch_size: int) -> dict[str, dict[str, Any]]:
        out = super().overrides(batch_size)
        out["scheduler"]["max_batch_wait_ms"] = BATCH_WAIT_MS
        out["ref"] = {"preset": self.settings.preset}
        return out

    def param_cache(self) -> Path:
        return self.settings.param_cache or self.settings.data_dir / f"ref-params-{self.settings.preset}"

    def pce_rule(self) -> PceRule | None:
        """The reference engine reuses its PCE file across starts: any complete file counts."""
        return PceRule(self.param_cache())

    def profile(self) -> EngineProfile:
        return RefProfile(self.settings.preset, self.param_cache(), self.settings.data_dir)

    def identity(self) -> str:
        return self.profile().identity()

"""Engine profiles of daemons the plugin did not build: a cuzk, or a cuzk-ref that says so.

A daemon's engine decides only its test data and how its proofs are verified. A cuzk-ref
says what it is through a channel every cuzk client already reads: the info metric
``cuzk_ref_info{version, preset, behave, param_cache} 1`` in GetMetrics (real cuzk has no
such metric). ``detect_profile`` reads it; anything without it is a cuzk.
"""

from __future__ import annotations

from pathlib import Path

from ..client import ProvingClient
from ..errors import CuzkError
from ..wire.kinds import ProofKindInfo
from .protocol import EngineProfile, Verifier

__all__ = ["INFO_METRIC", "CuzkProfile", "detect_profile"]

INFO_METRIC = "cuzk_ref_info"


class CuzkProfile:
    """A real cuzk (or anything that does not say it is something else).

    Its proofs need cuzk's verifying keys to verify fully, which the plugin does not hold:
    every proof gets the structure check, and PoRep proofs were self-checked by cuzk.
    """

    def __init__(self, identity: str) -> None:
        self._identity = identity

    def manifest(self) -> Path | None:
        return None

    def verifier(self, kind: ProofKindInfo) -> Verifier | None:
        return None

    def identity(self) -> str:
        return self._identity

    def preset(self) -> str | None:
        return None


def detect_profile(
    address: str, fallback: EngineProfile, *, local: bool, data_dir: Path, timeout_s: float = 5.0
) -> EngineProfile | None:
    """What the daemon at ``address`` says it is: a cuzk-ref's profile, else ``fallback``.

    None when it does not answer (ask again later). A cuzk-ref's param cache (its keys) is
    used only when the daemon runs on this machine; a remote one's proofs get no verifier.
    """
    try:
        with ProvingClient(address) as client:
            samples = client.metric_samples(timeout=timeout_s)
    except (CuzkError, ValueError):
        return None
    info = next((s for s in samples.samples if s.name == INFO_METRIC), None)
    if info is None:
        return fallback
    from .reference import RefProfile

    labels = dict(info.labels)
    cache = labels.get("param_cache")
    return RefProfile(
        labels.get("preset", "default"),
        Path(cache) if cache and local else None,
        data_dir,
        version=labels.get("version"),
        behave=labels.get("behave"),
    )

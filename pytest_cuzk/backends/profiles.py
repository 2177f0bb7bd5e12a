"""Engine profiles of daemons the plugin did not build: a cuzk, or a cuzk-ref that says so.

A daemon's engine decides only its test data and how its proofs are verified. A cuzk-ref
says what it is through a channel every cuzk client already reads: the info metric
``cuzk_ref_info{version, preset, behave, param_cache, prover} 1`` in GetMetrics (real cuzk has no
such metric). ``detect_profile`` reads it; anything without it is a cuzk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_cuzk.backends.protocol import EngineProfile, Verifier
from pytest_cuzk.config.slo import Slo
from pytest_cuzk.core.errors import CuzkError
from pytest_cuzk.daemon.client import ProvingClient
from pytest_cuzk.vocab.daemonconfig import DaemonConfig
from pytest_cuzk.vocab.kinds import ProofKindInfo

__all__ = [
    "CUZK_KNOWN_ISSUES",
    "CUZK_SLO_S",
    "INFO_METRIC",
    "CuzkProfile",
    "KnownIssue",
    "detect_profile",
    "known_issue",
]

INFO_METRIC = "cuzk_ref_info"


@dataclass(frozen=True)
class KnownIssue:
    """A bug of the engine a case meets: the case is expected to fail, but only with this error."""

    kind: str
    min_batch_size: int
    error: str
    reason: str


CUZK_KNOWN_ISSUES = (
    KnownIssue(
        "snap",
        2,
        "proof split failed: proof bytes length mismatch",
        "known cuzk bug: SnapDeals requests batched together (scheduler.max_batch_size > 1) all fail;"
        " prove SnapDeals with --cuzk-batch-sizes=1",
    ),
)


# A real cuzk's latency bounds, in seconds. PoRep and SnapDeals: Curio's [Cuzk] ProveTimeout (30 min),
# after which Curio gives the proof up. WindowPoSt: a partition's proof may take 5 minutes of its 30-minute
# deadline, leaving the rest for the deadline's other partitions and for the message to land on chain.
# WinningPoSt: the block must be built and sent within its 30 s epoch, after Lotus's 6 s wait for the
# parent blocks and with seconds left to assemble and propagate it: 10 s for the proof.
CUZK_SLO_S = {"porep": 1800.0, "snap": 1800.0, "wpost": 300.0, "winning": 10.0}


def known_issue(
    issues: Sequence[KnownIssue], kind: str, batch_size: int, errors: Sequence[str]
) -> str | None:
    """The reason of the issue every one of ``errors`` is, if there are errors and one issue covers them."""
    for issue in issues:
        matches = kind == issue.kind and batch_size >= issue.min_batch_size
        if matches and errors and all(issue.error in e for e in errors):
            return issue.reason
    return None


class CuzkProfile:
    """A real cuzk (or anything that does not say it is something else).

    Its proofs need cuzk's verifying keys to verify fully, which the plugin does not hold:
    every proof gets the structure check, and PoRep proofs were self-checked by cuzk.
    """

    def __init__(self, identity: str, config: DaemonConfig | None = None) -> None:
        self._identity = identity
        self._config = config

    def manifest(self) -> Path | None:
        return None

    def verifier(self, kind: ProofKindInfo) -> Verifier | None:
        return None

    def identity(self) -> str:
        return self.build()

    def build(self) -> str:
        return f"{self._identity} {self._config.tag}" if self._config is not None else self._identity

    def config(self) -> DaemonConfig | None:
        return self._config

    def preset(self) -> str | None:
        return None

    def default_param_cache(self) -> Path | None:
        return None

    def known_issue(self, kind: str, batch_size: int, errors: Sequence[str]) -> str | None:
        return known_issue(CUZK_KNOWN_ISSUES, kind, batch_size, errors)

    def slo(self, kind: ProofKindInfo, under: ProofKindInfo | None) -> Slo:
        """Seconds that matter on chain, under load or not (``CUZK_SLO_S``)."""
        return Slo(seconds=CUZK_SLO_S[kind.name], source="the cuzk default")


def ref_labels(address: str, timeout_s: float = 5.0) -> dict[str, str] | None:
    """The ``cuzk_ref_info`` labels of the daemon at ``address``: {} for a daemon that is not cuzk-ref.

    None when it does not answer (ask again later).
    """
    try:
        with ProvingClient(address) as client:
            samples = client.metric_samples(timeout=timeout_s)
    except (CuzkError, ValueError):
        return None
    info = next((s for s in samples.samples if s.name == INFO_METRIC), None)
    return dict(info.labels) if info is not None else {}


def detect_profile(
    address: str, fallback: EngineProfile, *, local: bool, data_dir: Path, timeout_s: float = 5.0
) -> EngineProfile | None:
    """What the daemon at ``address`` says it is: a cuzk-ref's profile, else ``fallback``.

    None when it does not answer (ask again later). A cuzk-ref's param cache (its keys) is
    used only when the daemon runs on this machine; a remote one's proofs get no verifier.
    """
    labels = ref_labels(address, timeout_s)
    if labels is None:
        return None
    if not labels:
        return fallback
    from pytest_cuzk.backends.reference import RefProfile

    cache = labels.get("param_cache")
    return RefProfile(
        labels.get("preset", "default"),
        Path(cache) if cache and local else None,
        data_dir,
        version=labels.get("version"),
        behave=labels.get("behave"),
        prover=labels.get("prover"),
        config=fallback.config(),  # what the plugin started it with, where it did
    )

"""The engine profile of a cuzk daemon: the shipped data manifest, and structure checks only."""

from __future__ import annotations

from pathlib import Path

from ..wire.kinds import ProofKindInfo
from .protocol import Verifier

__all__ = ["CuzkProfile"]


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

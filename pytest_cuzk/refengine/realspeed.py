"""Real cuzk's pace for the reference engine: proofs that take what 32 GiB proofs take on one GPU.

The reference circuits prove in a second; a real cuzk takes 60 to 90 s per PoRep proof, and a
plugin tuned on the first must be rehearsed at the pace of the second. ``[ref.faults] real_speed
= "32g"`` pads every stage to the times cuzk was measured at (one GPU, pipeline mode, curio
e0294b0f): each PoRep partition's synthesis about 42 s, all ten side by side (so a proof's
synthesis is the slowest of ten), then each partition's GPU stage about 3.2 s, one after the
other; a proof's whole pace varies by about 8% (the host), each partition's by 5-6%. After every
start the PCE is extracted again in the background (about 47 s) and the SRS loaded (about 15 s).
Synthesis of the next proof overlaps the GPU stage of the current one, as in cuzk, so two proofs
in flight prove faster than one at a time.

``real_speed_scale`` multiplies every time (0.05: a PoRep proof in about 4 s), so tests rehearse
the timescale in seconds; ``real_speed_drift_pct`` makes each proof that much slower than the one
before (a host heating up), for the stability rule's sake. ``/status`` lists each partition's
``synth_ms`` and ``gpu_ms``, and AwaitProof sums them, as cuzk does.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_cuzk.proto import pb
from pytest_cuzk.refengine.config import Faults, RefConfig
from pytest_cuzk.vocab.kinds import by_circuit

if TYPE_CHECKING:
    from pytest_cuzk.refengine.jobs import Job
    from pytest_cuzk.refengine.prover import RefProver

__all__ = ["MODELS", "KindPace", "Pace"]


@dataclass(frozen=True)
class KindPace:
    """One kind's stage times at real speed (seconds at scale 1) and their spreads (CVs)."""

    synth_s: float  # one partition's synthesis (partitions run side by side)
    gpu_s: float  # one partition's GPU stage (partitions run one after the other)
    srs_load_s: float
    pce_extract_s: float
    part_cv: float = 0.05
    proof_cv: float = 0.08


# Facts of cuzk (one RTX 5070 Ti, 512 GiB): PoRep 88.9 s a proof, ~3.3-3.75 s of CUDA per
# partition, PCE extraction 46.9 s, SRS cold load ~15 s; WinningPoSt 0.8 s (52 ms synthesis,
# 666 ms GPU); WindowPoSt ~125M constraints (a PoRep partition's size); SnapDeals ~81M per partition.
MODELS: dict[str, dict[str, KindPace]] = {
    "32g": {
        "porep": KindPace(synth_s=42.0, gpu_s=3.2, srs_load_s=15.0, pce_extract_s=47.0),
        "snap": KindPace(synth_s=26.0, gpu_s=2.0, srs_load_s=10.0, pce_extract_s=30.0),
        "wpost": KindPace(synth_s=40.0, gpu_s=3.4, srs_load_s=12.0, pce_extract_s=45.0),
        "winning": KindPace(synth_s=0.05, gpu_s=0.67, srs_load_s=0.09, pce_extract_s=1.5),
    }
}


class Pace:
    """Sleeps that bring each stage of a proof to its real-speed time, drawn per proof (seeded).

    Without ``real_speed`` every step is a no-op: the engine calls them either way.
    """

    def __init__(self, faults: Faults, seed: int) -> None:
        self.model = MODELS.get(faults.real_speed)
        self.scale = faults.real_speed_scale
        self.drift = faults.real_speed_drift_pct / 100
        self.seed = seed
        self._loaded: set[str] = set()

    @classmethod
    def of(cls, config: RefConfig, prover: RefProver) -> Pace:
        """The engine's pace; the prover's background PCE extraction takes its real time too."""
        pace = cls(config.faults, config.seed)
        if pace.model is not None:
            model = pace.model
            prover.extract_delay_s = lambda kind: model[kind].pce_extract_s * pace.scale
        return pace

    def _factor(self, proof_no: int) -> tuple[random.Random, float]:
        """The proof's generator and its whole pace: the host's draw, the drift so far, the scale."""
        rng = random.Random(f"{self.seed}:{proof_no}")
        host = rng.lognormvariate(0.0, 0.08)
        return rng, self.scale * host * (1 + self.drift * max(0, proof_no - 1))

    def synthesis(self, jobs: Sequence[Job], started: float) -> None:
        """Pad a work item's synthesis: each partition's time drawn, the slowest of them all slept out.

        Each partition gets its ``synth_ms``, each job its summed ``synth_s`` (cuzk's AwaitProof
        sum) and ``gpu_draws`` for the GPU stage.
        """
        if self.model is None or not jobs:
            return
        pace = self.model[jobs[0].kind.name]
        longest = 0.0
        for job in jobs:
            rng, factor = self._factor(job.proof_no)
            synth = [factor * pace.synth_s * rng.gauss(1.0, pace.part_cv) for _ in job.parts]
            job.gpu_draws = [factor * pace.gpu_s * rng.gauss(1.0, pace.part_cv) for _ in job.parts]
            for part, seconds in zip(job.parts, synth, strict=True):
                part["synth_ms"] = round(seconds * 1000)
            job.synth_s = sum(synth)
            longest = max([longest, *synth])
        _sleep_until(started + longest)

    def gpu(self, jobs: Sequence[Job], started: float) -> None:
        """Pad a prove pass to every partition's GPU time in turn."""
        if self.model is not None:
            _sleep_until(started + sum(sum(job.gpu_draws) for job in jobs))

    def delivered(self, job: Job, result: pb.AwaitProofResponse) -> None:
        """Each partition its own GPU time (not the pass's), and AwaitProof their sum, as cuzk's."""
        if self.model is None:
            return
        for part, seconds in zip(job.parts, job.gpu_draws, strict=True):
            part["gpu_ms"] = round(seconds * 1000)
        result.gpu_compute_ms = round(sum(job.gpu_draws) * 1000)

    def srs_load(self, circuit_id: str) -> None:
        """The first load of a kind's SRS after the start."""
        kind = by_circuit(circuit_id).name
        if self.model is not None and kind not in self._loaded:
            self._loaded.add(kind)
            time.sleep(self.model[kind].srs_load_s * self.scale)


def _sleep_until(deadline: float) -> None:
    left = deadline - time.monotonic()
    if left > 0:
        time.sleep(left)

"""What the prover's stages hand on: a parsed job, then each of its partitions synthesised."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from py_arkworks_bls12381 import Scalar

from pytest_cuzk.refengine.circuits.registry import Inputs
from pytest_cuzk.refengine.r1cs import ConstraintSystem, Evaluations, Matrices
from pytest_cuzk.vocab.kinds import ProofKindInfo

__all__ = ["ParsedJob", "Source", "Synthesized"]


@dataclass(frozen=True)
class ParsedJob:
    """A validated request: its kind, how many partition circuits it proves, and the circuit inputs."""

    kind: ProofKindInfo
    partitions: int
    inputs: Inputs = field(repr=False)
    witnesses: dict[int, Future[Any]] = field(default_factory=dict, repr=False, compare=False)
    """Partitions under way in the worker processes (``RefProver.prefetch``), by partition: each
    future gives (number of inputs, z) on the PCE path, ``Evaluations`` on the constraint system's."""


Source = Matrices | ConstraintSystem | Evaluations
"""Where a partition's A·z, B·z, C·z come from: the PCE's matrices, or a constraint system's own
evaluations (this process's system, or what a worker sent back of one)."""


@dataclass
class Synthesized:
    """One partition ready for the prove stage: z and h(x)'s coefficients as native scalars."""

    job: ParsedJob
    partition: int
    synth_s: float
    used_pce: bool
    num_constraints: int = 0
    z: list[Scalar] = field(repr=False, default_factory=list)
    h: list[Scalar] = field(repr=False, default_factory=list)
    h_limbs: Any = field(repr=False, default=None)  # h on the GPU (then ``h`` is empty)
    z_limbs: Any = field(repr=False, default=None)  # z on the GPU, from its sparse products

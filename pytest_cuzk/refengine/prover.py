"""The reference prover: what the reference engine runs for every proof.

Stages as in cuzk's pipeline: ``parse`` (request to circuit inputs, cuzk's
error messages), ``synthesize`` (one partition's witness and A·z, B·z, C·z;
GIL-bound Python), ``prove`` (the "GPU" stage: QAP witness map and the MSMs,
which release the GIL and are spread over a thread pool; any number of
partitions in one pass), ``self_check`` (full pairing verification).

Parameters are per preset and circuit in the param cache
(``cuzk-ref-<preset>-<circuit id>.params`` and ``.vk``), made by a trusted
setup on first need and reused afterwards. The first synthesis of a circuit
goes through the constraint system and writes ``pce-<name>.bin``; later ones,
also after a restart, use the PCE: witness generation plus sparse mat-vec.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..kinds import ProofKindInfo
from ..proto import pb
from . import keyfile
from .circuits import PRESETS, JobInputError, Preset
from .circuits.registry import Inputs, circuit_for
from .field import get_domain
from .groth16 import PhaseTimer, ProofInput, ProvingKey, create_random_proofs, generate_random_parameters
from .pce import PceError, load_pce, pce_path, write_pce
from .qap import h_coefficients
from .r1cs import ConstraintSystem, Matrices, WitnessCS
from .verify import key_stem, verify_partitions

__all__ = ["PRESETS", "JobInputError", "ParsedJob", "Preset", "RefProver", "Synthesized"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ParsedJob:
    """A validated request: its kind, how many partition circuits it proves, and the circuit inputs."""

    kind: ProofKindInfo
    partitions: int
    inputs: Inputs = field(repr=False)


@dataclass
class Synthesized:
    """One partition ready for the prove stage: the assignment z and A·z, B·z, C·z."""

    job: ParsedJob
    partition: int
    synth_s: float
    used_pce: bool
    z: list[int] = field(repr=False, default_factory=list)
    abc: tuple[list[int], list[int], list[int]] = field(repr=False, default=([], [], []))


@dataclass
class _Resident:
    pk: ProvingKey
    size_bytes: int


class RefProver:
    """Setup, PCE, synthesis, proving and self-check for the reference circuits; thread-safe."""

    def __init__(self, param_cache: Path, preset: str = "default", seed: int = 0, threads: int = 0) -> None:
        if preset not in PRESETS:
            raise ValueError(f"unknown reference preset {preset!r}; use one of: {', '.join(PRESETS)}")
        self.param_cache = Path(param_cache)
        self.param_cache.mkdir(parents=True, exist_ok=True)
        self._preset = PRESETS[preset]
        self.seed = seed  # the data seed the engine passes to gendata; proofs always use fresh randomness
        self.threads = threads or os.cpu_count() or 1
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="ref-msm")
        self._lock = threading.Lock()
        self._circuit_locks: dict[str, threading.Lock] = {}
        self._keys: dict[str, _Resident] = {}
        self._pce: dict[str, Matrices] = {}
        self.timer = PhaseTimer()

    @property
    def preset(self) -> Preset:
        """The circuit size preset."""
        return self._preset

    def _circuit_lock(self, circuit_id: str) -> threading.Lock:
        with self._lock:
            return self._circuit_locks.setdefault(circuit_id, threading.Lock())

    # --- parameters -------------------------------------------------------------------------------

    def params_path(self, circuit_id: str) -> Path:
        """``<param_cache>/cuzk-ref-<preset>-<circuit id>.params`` (the .vk sits alongside)."""
        return self.param_cache / f"{key_stem(self._preset.name, circuit_id)}.params"

    def _params_current(self, circuit_id: str) -> bool:
        params = self.params_path(circuit_id)
        if not (params.exists() and params.with_suffix(".vk").exists()):
            return False
        try:
            return keyfile.read_meta(params).get("shape") == self._preset.shape()
        except (ValueError, OSError):
            return False

    def ensure_params(self, circuit_id: str) -> None:
        """Run the trusted setup for ``circuit_id`` unless current .params/.vk files exist."""
        circuit = circuit_for(circuit_id)
        with self._circuit_lock(circuit_id):
            if self._params_current(circuit_id):
                return
            log.info("running trusted setup for %s (preset %s)", circuit_id, self._preset.name)
            cs = ConstraintSystem()
            circuit.synthesize(cs, self._preset, circuit.blank(self._preset))
            with self.timer.phase("setup"):
                pk = generate_random_parameters(cs.matrices(), self.timer)
            pk.meta.update(circuit_id=circuit_id, kind=circuit.kind.name, shape=self._preset.shape())
            path = self.params_path(circuit_id)
            keyfile.write_params(path, pk)
            keyfile.write_vk(path.with_suffix(".vk"), pk.vk, pk.meta)

    def ensure_loaded(self, circuit_id: str) -> float:
        """Load the proving key (after a setup if needed); seconds spent, 0.0 when already resident."""
        return self._load(circuit_id)[1]

    def _load(self, circuit_id: str) -> tuple[ProvingKey, float]:
        resident = self._keys.get(circuit_id)
        if resident is not None:
            return resident.pk, 0.0
        t0 = time.perf_counter()
        self.ensure_params(circuit_id)
        with self._circuit_lock(circuit_id):
            resident = self._keys.get(circuit_id)
            if resident is None:
                path = self.params_path(circuit_id)
                resident = _Resident(keyfile.read_params(path), path.stat().st_size)
                with self._lock:
                    self._keys[circuit_id] = resident
                return resident.pk, time.perf_counter() - t0
        return resident.pk, 0.0

    def preload(self, circuit_id: str) -> tuple[bool, float]:
        """(already_loaded, load seconds) like PreloadSRS; KeyError for ids cuzk does not know."""
        circuit_for(circuit_id)
        if circuit_id in self._keys:
            return True, 0.0
        return False, self.ensure_loaded(circuit_id)

    def evict(self, circuit_id: str) -> tuple[bool, int]:
        """Drop a resident proving key: (was_loaded, freed_bytes)."""
        with self._lock:
            gone = self._keys.pop(circuit_id, None)
        return (gone is not None, gone.size_bytes if gone else 0)

    def loaded(self) -> list[tuple[str, int]]:
        """(circuit id, size in bytes) of every resident proving key."""
        with self._lock:
            return [(cid, r.size_bytes) for cid, r in self._keys.items()]

    # --- the pipeline stages --------------------------------------------------------------------

    def parse(self, kind: ProofKindInfo, req: pb.SubmitProofRequest) -> ParsedJob:
        """Validate a request; JobInputError carries cuzk's FAILED message."""
        inputs = circuit_for(kind.circuit_id).parse(req, self._preset)
        return ParsedJob(kind, inputs.partitions, inputs)

    def _resident_pce(self, circuit_id: str, name: str) -> Matrices | None:
        if circuit_id in self._pce:
            return self._pce[circuit_id]
        path = pce_path(self.param_cache, name)
        if not path.exists():
            return None
        with self._circuit_lock(circuit_id), self.timer.phase("pce: load"):
            try:
                m = load_pce(path)
            except PceError as exc:
                log.warning("ignoring unusable PCE (%s); it will be re-extracted", exc)
                return None
            if self._params_current(circuit_id):
                meta = keyfile.read_meta(self.params_path(circuit_id))
                if (meta["num_inputs"], meta["num_aux"]) != (m.num_inputs, m.num_aux):
                    log.warning("ignoring %s: it belongs to another circuit size; re-extracting", path)
                    return None
            self._pce[circuit_id] = m
            return m

    def synthesize(self, job: ParsedJob, partition: int) -> Synthesized:
        """Synthesize one partition: PCE path when a PCE exists, else the constraint system + extraction."""
        circuit = circuit_for(job.kind.circuit_id)
        witness = job.inputs.witness(partition)
        t0 = time.perf_counter()
        m = self._resident_pce(job.kind.circuit_id, job.kind.pce_name)
        if m is not None:
            w = WitnessCS()
            circuit.synthesize(w, self._preset, witness)
            if (len(w.inputs), len(w.aux)) == (m.num_inputs, m.num_aux):
                z = w.assignment()
                abc = (m.a.matvec(z), m.b.matvec(z), m.c.matvec(z))
                self.timer.add("synthesis: PCE path", time.perf_counter() - t0)
                return Synthesized(job, partition, time.perf_counter() - t0, True, z, abc)
            log.warning("PCE for %s does not fit the circuit; falling back", job.kind.circuit_id)
            with self._lock:
                self._pce.pop(job.kind.circuit_id, None)
        cs = ConstraintSystem()
        circuit.synthesize(cs, self._preset, witness)
        synth_s = time.perf_counter() - t0
        self.timer.add("synthesis: constraint system", synth_s)
        self._extract_pce(job.kind.circuit_id, job.kind.pce_name, cs)
        return Synthesized(job, partition, synth_s, False, cs.assignment(), (cs.a, cs.b, cs.c))

    def _extract_pce(self, circuit_id: str, name: str, cs: ConstraintSystem) -> None:
        with self._circuit_lock(circuit_id), self.timer.phase("pce: extract + write"):
            if circuit_id in self._pce:
                return
            m = cs.matrices()
            path = write_pce(self.param_cache, name, m)
            log.info("PCE saved to disk: %s (%d constraints, %d non-zeros)", path, m.num_constraints, m.nnz)
            self._pce[circuit_id] = m

    def prove(self, parts: Sequence[Synthesized]) -> list[bytes]:
        """One 192-byte proof per part, same order; all MSMs in one pass over the thread pool."""
        inputs = []
        for part in parts:
            cid = part.job.kind.circuit_id
            pk = self._load(cid)[0]
            a, b, c = part.abc
            if len(a) != pk.meta["num_constraints"]:
                raise RuntimeError(
                    f"{cid}: synthesized {len(a)} constraints but the key has {pk.meta['num_constraints']}; "
                    f"delete {self.params_path(cid).name} and {part.job.kind.pce_file} from the param cache"
                )
            with self.timer.phase("prove: witness map (FFT)"):
                h = h_coefficients(a, b, c, get_domain(pk.meta["domain_size"]))
            inputs.append(ProofInput(pk, part.z, h))
        proofs = create_random_proofs(inputs, self._pool, self.threads, self.timer)
        return [p.to_bytes() for p in proofs]

    def self_check(self, job: ParsedJob, proof: bytes) -> bool:
        """Full pairing verification of a whole proof against the request-derived public inputs."""
        pk = self._load(job.kind.circuit_id)[0]
        with self.timer.phase("self-check"):
            return verify_partitions(pk.vk, job.inputs, proof)

    def timings(self) -> dict[str, Any]:
        """Seconds spent per named phase since this prover was created."""
        return dict(self.timer.totals)

    def close(self) -> None:
        """Stop the MSM thread pool."""
        self._pool.shutdown(wait=True)
